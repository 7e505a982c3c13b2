#!/bin/bash
# Fails its first run, then succeeds: one of its retries spent. JOBMAN_ATTEMPT counts the task's runs.
#JOBMAN --accelerator=v4-8
#JOBMAN --name=flaky
#JOBMAN --max-retries=1
if [ "$JOBMAN_ATTEMPT" = 1 ]; then
  echo "run $JOBMAN_ATTEMPT: failing on purpose" >&2
  exit 3
fi
echo "run $JOBMAN_ATTEMPT: fine"
