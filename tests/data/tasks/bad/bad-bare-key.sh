#!/usr/bin/env bash
# expect: bad-bare-key.sh:3:9: #JOBMAN --accelerator: needs a value (e.g. '#JOBMAN --accelerator=v4-8')
#JOBMAN --accelerator
echo unreachable
