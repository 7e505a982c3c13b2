#!/usr/bin/env bash
# A jobman-lite task: it runs on host 0 and starts the training on every host itself.
#JOBMAN --accelerator=v4-32
#JOBMAN --zone=us-central2-b
#JOBMAN --name=llama-pretrain
#JOBMAN --max-retries=2
set -euo pipefail

TPU_NAME="${TPU_NAME:-$(hostname)}"
gcloud compute tpus tpu-vm ssh "$TPU_NAME" \
  --zone=us-central2-b \
  --worker=all \
  --command="cd ~/maxtext && python3 train.py"
