"""Checks the collect hooks' export and listing; exit status 0 when both are right."""

import json
import sys
from pathlib import Path

EXPECTED = [
    {"sku": "A-100", "name": "hex bolt M6", "quantity": "300"},
    {"sku": "A-101", "name": "hex nut M6", "quantity": "300"},
    {"sku": "B-200", "name": "washer 6 mm", "quantity": "1000"},
]


def main(export_path, listing_path):
    export = Path(export_path)
    if not export.is_file():
        print(f"FAIL: no export at {export} (did the collect hook run?)")
        return 1
    try:
        rows = json.loads(export.read_text())
    except ValueError as error:
        print(f"FAIL: the export is not JSON ({error}): is inventory.csv there?")
        return 1
    if rows != EXPECTED:
        print(f"FAIL: the inventory holds {rows}")
        return 1
    listing = Path(listing_path)
    names = listing.read_text().split() if listing.is_file() else None
    if names != ["inventory.csv"]:
        print(f"FAIL: the working directory holds {names}, not just inventory.csv")
        return 1
    print("PASS: the inventory is right and alone")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
