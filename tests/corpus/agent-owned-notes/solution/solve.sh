#!/bin/bash
# Harbor runs the oracle as [agent].user, like the agent itself.
set -euo pipefail

mkdir -p /app/notes
printf 'buy milk\ncall bob\nship release\n' > /app/notes/todo.txt
chmod 600 /app/notes/todo.txt
id -un > /app/whoami.txt
