#!/bin/bash
here=/app
source "$here/greeting.env"
name=$(sed -n 's/^name=//p' "$here/config.txt")
echo "$GREETING, $name!"
