#!/usr/bin/env bash
# expect: bad-mail-type.sh:5:21: #JOBMAN --mail-type: unknown mail type 'FINISH' (expected one of: BEGIN, END, FAIL, ALL, NONE)
#JOBMAN --accelerator=v4-8
#JOBMAN --mail-user=you@example.com
#JOBMAN --mail-type=BEGIN,FINISH
echo unreachable
