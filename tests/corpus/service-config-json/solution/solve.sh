#!/bin/bash
cat > /app/config.json <<'JSON'
{
  "service": "orders-api",
  "port": 8443,
  "log_level": "warning",
  "features": ["audit", "export", "search"]
}
JSON
