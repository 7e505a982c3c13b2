#!/bin/bash
# A training task for a v4-8 worker, as jobman-lite takes it: `jobman task submit configs/examples/tasks/train.sh`.
#JOBMAN --accelerator=v4-8
#JOBMAN --name=train-systolic
#JOBMAN --max-retries=2
#JOBMAN --pricing=spot
set -euo pipefail
# JOBMAN_TASK_ID names the task; JOBMAN_RESUME is 1 when it runs again after an interruption.
echo "task $JOBMAN_TASK_ID on $JOBMAN_TPU_NAME (resume=$JOBMAN_RESUME)"
systolic-train --steps 600 --step-time-ms 20 --ckpt-dir ~/bucket/ckpt/task-$JOBMAN_TASK_ID --ckpt-every 50
