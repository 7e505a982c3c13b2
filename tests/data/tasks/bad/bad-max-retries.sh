#!/usr/bin/env bash
# expect: bad-max-retries.sh:4:23: #JOBMAN --max-retries: expected an integer, got 'three'
#JOBMAN --accelerator=v4-8
#JOBMAN --max-retries=three
echo unreachable
