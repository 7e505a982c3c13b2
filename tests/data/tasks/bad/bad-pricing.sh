#!/usr/bin/env bash
# expect: bad-pricing.sh:4:19: #JOBMAN --pricing: unknown pricing 'spto' (did you mean 'spot'?)
#JOBMAN --accelerator=v4-8
#JOBMAN --pricing=spto
echo unreachable
