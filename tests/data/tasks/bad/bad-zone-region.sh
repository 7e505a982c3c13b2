#!/usr/bin/env bash
# expect: bad-zone-region.sh:4:16: #JOBMAN --zone: 'us-central2' is not a zone ('us-central2' is a region; add the zone letter, e.g. us-central2-b)
#JOBMAN --accelerator=v4-8
#JOBMAN --zone=us-central2
echo unreachable
