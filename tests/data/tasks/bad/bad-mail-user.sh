#!/usr/bin/env bash
# expect: bad-mail-user.sh:4:21: #JOBMAN --mail-user: 'someone' is not an e-mail address (e.g. you@example.com)
#JOBMAN --accelerator=v4-8
#JOBMAN --mail-user=someone
#JOBMAN --mail-type=END
echo unreachable
