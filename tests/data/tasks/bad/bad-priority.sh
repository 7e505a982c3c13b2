#!/usr/bin/env bash
# expect: bad-priority.sh:4:20: #JOBMAN --priority: expected an integer, got 'high'
#JOBMAN --accelerator=v4-8
#JOBMAN --priority=high
echo unreachable
