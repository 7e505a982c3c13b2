#!/usr/bin/env bash
# expect: bad-max-retries-range.sh:4:23: #JOBMAN --max-retries: integer out of range: 99999999999
#JOBMAN --accelerator=v4-8
#JOBMAN --max-retries=99999999999
echo unreachable
