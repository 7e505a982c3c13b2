#!/usr/bin/env bash
# expect: bad-accelerator-size.sh:3:23: #JOBMAN --accelerator: 'v4-6' is not a valid v4 size (valid: v4-8, v4-16,
#JOBMAN --accelerator=v4-6
echo unreachable
