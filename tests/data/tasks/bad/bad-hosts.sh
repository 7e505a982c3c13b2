#!/usr/bin/env bash
# expect: bad-hosts.sh:4:17: #JOBMAN --hosts: expected all (the script runs on every host) or 0 (on host 0 only), got '1'
#JOBMAN --accelerator=v4-8
#JOBMAN --hosts=1
echo unreachable
