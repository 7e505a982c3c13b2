#!/usr/bin/env bash
# expect: bad-mail-user-without-type.sh:4:9: #JOBMAN --mail-user: needs a mail type too (add '#JOBMAN --mail-type=END,FAIL')
#JOBMAN --accelerator=v4-8
#JOBMAN --mail-user=you@example.com
echo unreachable
