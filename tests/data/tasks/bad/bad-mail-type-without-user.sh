#!/usr/bin/env bash
# expect: bad-mail-type-without-user.sh:4:9: #JOBMAN --mail-type: needs a mail user too (add '#JOBMAN --mail-user=you@example.com')
#JOBMAN --accelerator=v4-8
#JOBMAN --mail-type=ALL
echo unreachable
