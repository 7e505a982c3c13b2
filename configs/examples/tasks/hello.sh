#!/bin/bash
# The smallest task: it runs on every host of a v4-8 worker's slice.
#JOBMAN --accelerator=v4-8
#JOBMAN --name=hello
echo "hello from host $JOBMAN_WORKER_ID of $JOBMAN_NUM_WORKERS on $JOBMAN_TPU_NAME ($JOBMAN_ZONE)"
