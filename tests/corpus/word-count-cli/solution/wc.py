import sys


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        text = handle.read()
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    print(lines, len(text.split()), len(text))


if __name__ == "__main__":
    main()
