#!/usr/bin/env bash
#JOBMAN --accelerator=v4-32
# Earlier this script started every host itself:
# gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone=us-central2-b --worker=all --command="python3 train.py"
python3 train.py # not: gcloud compute tpus tpu-vm ssh x --worker=all
