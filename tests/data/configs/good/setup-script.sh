#!/bin/bash
# Runs on every worker, from the home directory, after the environment is set up and before the command starts.
set -euo pipefail
python3 -m pip install --user -r requirements.txt
