"""Helpers for Python verifiers (``tests/verifier.py``) of NeMo Gym's Harbor tasks.

This package runs inside the agent's sandbox: it imports the standard library alone and supports
Python 3.8 and newer. What the *agent* got wrong reads as "no answer" (``False``, ``None``, ``""``);
what the *author* got wrong (a bad argument) raises.
"""

from nemo_gym.verifiers._extract import extract_answer, extract_boxed, extract_tag
from nemo_gym.verifiers._match import exact_match
from nemo_gym.verifiers._numbers import numeric_match, parse_number
from nemo_gym.verifiers._response import final_text

__all__ = (
    "exact_match",
    "extract_answer",
    "extract_boxed",
    "extract_tag",
    "final_text",
    "numeric_match",
    "parse_number",
)
