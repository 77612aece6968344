#!/usr/bin/env bash
cat > add.sh <<'SCRIPT'
echo $(( $1 + $2 ))
SCRIPT
