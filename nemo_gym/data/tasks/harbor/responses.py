"""Responses API responses built by hand: for tests, for ``gym-harbor verify --response`` given a text
file, and for the oracle's ``answer.md``.

``response("42")`` is the common case: a completed response whose one assistant message says ``42``.
The other builders give the shapes ``final_text`` reads differently (SPEC section 3): several
messages (the last counts), ``phase`` (only ``"final_answer"`` counts once any message has a phase),
text split into parts (joined), a refusal (never text), reasoning and tool items (never counted)::

    response(
        reasoning("12 x 0.35"),
        message("Let me compute.", phase="commentary"),
        function_call("python", {"code": "12 * 0.35"}),
        function_call_output("4.2"),
        message("Answer: ", "4.20", phase="final_answer"),
    )

Each builder gives a plain dict, ready for ``json.dumps``; any other output item can be passed to
``response`` as a dict of its own.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Union

OutputItem = Dict[str, Any]


def message(
    *texts: str,
    refusal: Optional[str] = None,
    phase: Optional[str] = None,
    role: str = "assistant",
) -> OutputItem:
    """A ``message`` output item: one ``output_text`` part per text, then a ``refusal`` part when
    ``refusal`` is given; ``phase`` (``"final_answer"``, ``"commentary"``) only when given."""
    content: List[Dict[str, Any]] = [{"type": "output_text", "text": text} for text in texts]
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    item: OutputItem = {"type": "message", "role": role, "content": content}
    if phase is not None:
        item["phase"] = phase
    return item


def reasoning(*summary: str) -> OutputItem:
    """A ``reasoning`` output item with one ``summary_text`` part per text."""
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text} for text in summary]}


def function_call(name: str, arguments: Union[str, Mapping[str, Any]] = "{}", *, call_id: str = "call_1") -> OutputItem:
    """A ``function_call`` output item; ``arguments`` is JSON text, or a dict written as JSON text."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return {"type": "function_call", "name": name, "arguments": text, "call_id": call_id}


def function_call_output(output: str, *, call_id: str = "call_1") -> OutputItem:
    """A ``function_call_output`` item: what the tool returned for ``call_id``."""
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def response(
    *output: Union[str, Mapping[str, Any]], status: Optional[str] = "completed", **fields: Any
) -> Dict[str, Any]:
    """A Responses API response: ``{"object": "response", "status": status, "output": [...]}``.

    Each of ``output``, in order, is a string (an assistant message holding that text, as
    ``message(text)``) or an output item (``message``, ``reasoning``, ``function_call``, ... or any
    dict, copied). ``status=None`` leaves ``status`` out; ``fields`` are further top-level keys
    (``id``, ``model``, ``usage``, ...). ``final_text(response("42")) == "42"``.
    """
    items = [message(item) if isinstance(item, str) else dict(item) for item in output]
    built: Dict[str, Any] = {"object": "response"}
    if status is not None:
        built["status"] = status
    built["output"] = items
    built.update(fields)
    return built


__all__ = ["OutputItem", "function_call", "function_call_output", "message", "reasoning", "response"]
