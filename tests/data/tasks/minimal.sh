#!/bin/sh
#JOBMAN --accelerator=v4-8
echo "training"
