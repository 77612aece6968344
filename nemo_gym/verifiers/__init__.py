"""Helpers for Python verifiers (``tests/verifier.py``) of NeMo Gym's Harbor tasks.

This package runs inside the agent's sandbox: it imports the standard library alone and supports
Python 3.8 and newer. What the *agent* got wrong reads as "no answer" (``False``, ``None``, ``""``);
what the *author* got wrong (a bad argument) raises.

Each helper is imported on first use, and its module imports ``re``, ``fractions`` and the like
only when it first needs them: ``from nemo_gym.verifiers import exact_match`` costs a fraction of
the interpreter's own start.
"""

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
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

# Where each name of __all__ lives, by module of this package.
_HOMES = {
    "exact_match": "_match",
    "extract_answer": "_extract",
    "extract_boxed": "_extract",
    "extract_tag": "_extract",
    "final_text": "_response",
    "numeric_match": "_numbers",
    "parse_number": "_numbers",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        # Also how `from nemo_gym.verifiers import files` learns to import the submodule.
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # __import__ with a fromlist returns the submodule itself (importlib costs start-up time).
    value = getattr(__import__(f"{__name__}.{home}", None, None, [name]), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(__all__))
