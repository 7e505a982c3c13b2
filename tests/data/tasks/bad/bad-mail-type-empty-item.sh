#!/usr/bin/env bash
# expect: bad-mail-type-empty-item.sh:5:21: #JOBMAN --mail-type: empty mail type in 'BEGIN,,END'
#JOBMAN --accelerator=v4-8
#JOBMAN --mail-user=you@example.com
#JOBMAN --mail-type=BEGIN,,END
echo unreachable
