"""A small recursive-descent evaluator."""

import re

_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|(.))")


def _tokens(text):
    tokens = []
    for number, symbol in _TOKEN.findall(text):
        if number:
            tokens.append(float(number) if "." in number else int(number))
        elif symbol in "+-*/()":
            tokens.append(symbol)
        elif not symbol.isspace():
            raise ValueError(f"unexpected character {symbol!r}")
    return tokens


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.position = 0

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self):
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end of expression")
        self.position += 1
        return token

    def expression(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self):
        value = self.factor()
        while self.peek() in ("*", "/"):
            if self.take() == "*":
                value = value * self.factor()
            else:
                divisor = self.factor()
                if divisor == 0:
                    raise ZeroDivisionError("division by zero")
                value = value / divisor
        return value

    def factor(self):
        token = self.take()
        if token == "-":
            return -self.factor()
        if token == "(":
            value = self.expression()
            if self.take() != ")":
                raise ValueError("unbalanced parentheses")
            return value
        if isinstance(token, (int, float)):
            return token
        raise ValueError(f"unexpected {token!r}")


def evaluate(expression):
    parser = _Parser(_tokens(expression))
    value = parser.expression()
    if parser.peek() is not None:
        raise ValueError(f"unexpected {parser.peek()!r}")
    return value
