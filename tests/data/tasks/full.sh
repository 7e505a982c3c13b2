#!/usr/bin/env bash
#JOBMAN --accelerator=v4-8
#JOBMAN --zone=us-central2-b
#JOBMAN --name=my-task
#JOBMAN --tpu-version=tpu-ubuntu2204-base
#JOBMAN --max-retries=5
#JOBMAN --pricing=standard
#JOBMAN --mail-user=you@example.com
#JOBMAN --mail-type=FAIL,begin,END
#JOBMAN --priority=-2
#JOBMAN --hosts=0
set -euo pipefail
echo "hello from $(hostname)"
