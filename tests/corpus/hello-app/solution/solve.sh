#!/bin/bash
# Runs from the task's working directory (/app), as Harbor's oracle does.

echo "Hello, world!" > hello.txt
