#!/bin/bash
# Harbor uploads this step's workdir/ into the working directory and runs this file there before
# the agent starts. It leaves its result, then removes itself so the agent finds a clean folder.
set -e
printf 'GREETING="Good morning"\n' > greeting.env
rm -f -- "$0"
