#!/bin/bash
# Compute the total rather than hard-code it.
python3 - <<'PY'
import csv
import io
from decimal import Decimal

orders = """order_id,quantity,unit_price
1001,3,19.99
1002,1,249.00
1003,12,2.50
1004,2,74.25
"""
total = sum(Decimal(row["quantity"]) * Decimal(row["unit_price"]) for row in csv.DictReader(io.StringIO(orders)))
with open("/app/total.txt", "w") as handle:
    handle.write(f"{total:.2f}\n")
PY
