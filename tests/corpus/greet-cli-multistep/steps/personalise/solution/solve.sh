#!/bin/bash
set -e
install -m 755 /solution/greet.sh /app/greet.sh
