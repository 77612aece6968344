import sys

if len(sys.argv) != 2:
    print("usage: greet.py NAME", file=sys.stderr)
    sys.exit(2)
print(f"Hello, {sys.argv[1]}!")
