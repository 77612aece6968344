"""The final answer text of a Responses API response."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported for the type checker only: it costs start-up time
if TYPE_CHECKING:
    from typing import Any, Dict, List


def _is_assistant_message(item: Any) -> bool:
    # A serialized output item always has a type; an item without one is read as a message, as the
    # Responses API reads an input item written as {"role": ..., "content": ...}.
    return (
        isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") in (None, "assistant")
    )


def _message_text(message: Dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: List[str] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "output_text":
            text = part.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


def final_text(response: Any) -> str:
    """The text of the response's final assistant message, ``""`` when there is none.

    The message is the last ``message`` item of ``response["output"]`` whose role is ``assistant``
    (or absent); when any such message carries a ``phase``, only ``phase == "final_answer"`` counts
    (``"phase": null``, as a serializer that writes every optional field gives it, is no phase).
    Its ``output_text`` parts are joined with ``""`` (a plain-string ``content`` is taken as is).
    Refusals, reasoning and tool items never count, and an earlier message is never a fall-back:
    a final message without text gives ``""``. Never raises on odd shapes; never strips.
    """
    if not isinstance(response, dict):
        return ""
    output = response.get("output")
    if not isinstance(output, (list, tuple)):
        return ""
    messages = [item for item in output if _is_assistant_message(item)]
    if any(message.get("phase") is not None for message in messages):
        messages = [message for message in messages if message.get("phase") == "final_answer"]
    return _message_text(messages[-1]) if messages else ""
