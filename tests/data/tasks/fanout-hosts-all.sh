#!/usr/bin/env bash
#JOBMAN --accelerator=v4-32
#JOBMAN --hosts=all
gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone=us-central2-b --worker all --command="python3 train.py"
