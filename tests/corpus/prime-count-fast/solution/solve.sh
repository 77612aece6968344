#!/bin/bash
cat > /app/primes.py <<'PY'
import sys


def count_primes_below(limit):
    if limit < 3:
        return 0
    sieve = bytearray([1]) * limit
    sieve[0] = sieve[1] = 0
    for n in range(2, int(limit**0.5) + 1):
        if sieve[n]:
            sieve[n * n :: n] = bytes(len(range(n * n, limit, n)))
    return sum(sieve)


print(count_primes_below(int(sys.argv[1])))
PY
