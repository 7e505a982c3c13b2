#!/usr/bin/env bash
# expect: bad-max-retries-negative.sh:4:23: #JOBMAN --max-retries: must be at least 0, got -1
#JOBMAN --accelerator=v4-8
#JOBMAN --max-retries=-1
echo unreachable
