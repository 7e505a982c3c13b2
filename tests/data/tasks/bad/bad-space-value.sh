#!/usr/bin/env bash
# expect: bad-space-value.sh:3:23: #JOBMAN --accelerator: unknown TPU generation 'v44' in 'v44-8'
#JOBMAN --accelerator v44-8
echo unreachable
