#!/bin/bash
set -euo pipefail

cat > /tmp/access.log <<'LOG'
10.0.0.1 - - [12/Mar/2025:10:00:01 +0000] "GET /index.html HTTP/1.1" 200 512
10.0.0.2 - - [12/Mar/2025:10:00:02 +0000] "GET /missing HTTP/1.1" 404 128
10.0.0.1 - - [12/Mar/2025:10:00:03 +0000] "POST /api/orders HTTP/1.1" 201 64
10.0.0.3 - - [12/Mar/2025:10:00:04 +0000] "GET /index.html HTTP/1.1" 200 512
10.0.0.2 - - [12/Mar/2025:10:00:05 +0000] "GET /api/orders HTTP/1.1" 500 32
10.0.0.4 - - [12/Mar/2025:10:00:06 +0000] "GET /about HTTP/1.1" 200 256
LOG

python3 - <<'PY'
import collections
import json

codes = collections.Counter(line.split()[-2] for line in open("/tmp/access.log") if line.strip())
report = dict(sorted(codes.items()))
report["total"] = sum(codes.values())
json.dump(report, open("/app/status_counts.json", "w"), indent=2)
PY
