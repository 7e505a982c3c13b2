#!/bin/bash
# Fails its first run, then succeeds: one of its retries spent.
#JOBMAN --accelerator=v4-8
#JOBMAN --name=flaky
#JOBMAN --max-retries=1
marker=~/bucket/flaky-$JOBMAN_TASK_ID
if [ ! -e "$marker" ]; then
  touch "$marker"
  echo "first run: failing on purpose" >&2
  exit 3
fi
echo "second run: fine"
