"""The behaviour instruction.md asks of /app/calc.py."""

import ast
import sys
import unittest
from pathlib import Path

sys.path.insert(0, "/app")

import calc


class Evaluate(unittest.TestCase):
    def test_precedence(self):
        self.assertEqual(calc.evaluate("2 + 3 * 4"), 14)
        self.assertEqual(calc.evaluate("(2 + 3) * 4"), 20)
        self.assertEqual(calc.evaluate("10 - 4 - 3"), 3)

    def test_division_is_float(self):
        self.assertEqual(calc.evaluate("7 / 2"), 3.5)
        self.assertIsInstance(calc.evaluate("8 / 4"), float)

    def test_unary_minus_and_decimals(self):
        self.assertEqual(calc.evaluate("-3 + 5"), 2)
        self.assertAlmostEqual(calc.evaluate("-(1.5 * 2)"), -3.0)

    def test_errors(self):
        for bad in ("", "2 +", "(1 + 2", "1 + x", "3 $ 4"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                calc.evaluate(bad)
        with self.assertRaises(ZeroDivisionError):
            calc.evaluate("1 / 0")

    def test_no_eval(self):
        tree = ast.parse(Path(calc.__file__).read_text())
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        self.assertFalse(names & {"eval", "exec"}, "calc.py must not call eval or exec")


if __name__ == "__main__":
    unittest.main()
