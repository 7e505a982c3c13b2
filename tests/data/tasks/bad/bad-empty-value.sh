#!/usr/bin/env bash
# expect: bad-empty-value.sh:4:9: #JOBMAN --name: needs a value (e.g. '#JOBMAN --name=my-task')
#JOBMAN --accelerator=v4-8
#JOBMAN --name=
echo unreachable
