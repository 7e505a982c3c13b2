#!/usr/bin/env bash
# expect: bad-accelerator-form.sh:3:23: #JOBMAN --accelerator: 'v4' is not an accelerator type (expected <generation>-<size>, e.g. v4-8 or v6e-1)
#JOBMAN --accelerator=v4
echo unreachable
