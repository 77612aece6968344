#!/usr/bin/env bash
for n in 2 3 5 7 11 13 17 19 23 29; do echo "$n"; done > primes.txt
