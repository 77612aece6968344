#!/bin/bash
set -euo pipefail

cat > /app/inventory.csv <<'CSV'
sku,name,quantity
A-100,hex bolt M6,250
A-101,hex nut M6,300
B-200,washer 6 mm,1000
CSV

# The delivery: 50 more hex bolts.
sed -i 's/^A-100,hex bolt M6,250$/A-100,hex bolt M6,300/' /app/inventory.csv
