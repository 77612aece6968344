#!/bin/bash
# SERVICE_PORT comes from [solution].env, DEPLOY_ENV from the environment.
set -euo pipefail

cat > settings.ini <<INI
[service]
name = inventory-api
port = ${SERVICE_PORT}
environment = ${DEPLOY_ENV}
INI
