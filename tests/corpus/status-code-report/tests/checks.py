"""One named check of /app/status_counts.json; exit status 0 when it holds."""

import json
import sys
from pathlib import Path

REPORT = Path("/app/status_counts.json")
EXPECTED = {"200": 3, "201": 1, "404": 1, "500": 1}


def load():
    return json.loads(REPORT.read_text())


def check(name):
    if name == "exists":
        return REPORT.is_file()
    try:
        report = load()
    except (OSError, ValueError):
        return False
    if not isinstance(report, dict):
        return False
    if name == "valid_json":
        return True
    if name == "counts":
        return {key: value for key, value in report.items() if key != "total"} == EXPECTED
    if name == "total":
        return report.get("total") == sum(EXPECTED.values())
    raise SystemExit(f"unknown check {name!r}")


if __name__ == "__main__":
    sys.exit(0 if check(sys.argv[1]) else 1)
