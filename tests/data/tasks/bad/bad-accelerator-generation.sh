#!/usr/bin/env bash
# expect: bad-accelerator-generation.sh:3:23: #JOBMAN --accelerator: unknown TPU generation 'v9' in 'v9-8' (did you mean 'v2'?)
#JOBMAN --accelerator=v9-8
echo unreachable
