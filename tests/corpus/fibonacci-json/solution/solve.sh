#!/bin/bash
python3 -c '
import json
numbers = [0, 1]
while len(numbers) < 40:
    numbers.append(numbers[-1] + numbers[-2])
json.dump(numbers, open("/app/fib.json", "w"))
'
