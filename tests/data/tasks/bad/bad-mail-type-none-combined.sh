#!/usr/bin/env bash
# expect: bad-mail-type-none-combined.sh:5:21: #JOBMAN --mail-type: NONE cannot be combined with other mail types (write NONE alone, or leave it out)
#JOBMAN --accelerator=v4-8
#JOBMAN --mail-user=you@example.com
#JOBMAN --mail-type=NONE,END
echo unreachable
