"""Minimal, checked edits of a TOML document's text, for publishing a task's ``task.toml``.

There is no TOML writer among the dependencies, and rewriting an author's file from its parsed
values would lose its comments, order and formatting. ``edit_toml`` changes only the lines an edit
names:
- deleting a key removes its ``key = value`` statement (every line of it);
- setting a key that is written replaces its statement, keeping the key as written (a comment at
  the end of that line goes with the old value);
- setting a key that is not written adds ``key = value`` right after its table's header; a table
  with no header gets one, at the end of the file, or for an element of an array of tables
  (``[[steps]]``), just before the next header after that element's.

It then parses the result and holds it against the original's parsed values with the same edits
applied. Anything else, such as a table written inline or with dotted keys, which a line edit cannot
reach, raises ``TomlEditError``: the file is never silently wrong.
"""

from __future__ import annotations

import copy
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.8-3.10 by the nox matrix
    import tomli as tomllib

Key = Union[str, int]
KeyPath = Tuple[Key, ...]
Value = Union[str, float]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class TomlEditError(ValueError):
    """The edit cannot be made by changing lines alone; the message says which and why."""


@dataclass(frozen=True)
class Edit:
    """Set ``path`` to ``value``, or delete it when ``value`` is ``None``. An integer in the path is an
    index into an array of tables: ``("steps", 0, "verifier", "timeout_sec")``."""

    path: KeyPath
    value: Optional[Value] = None


@dataclass(frozen=True)
class _Statement:
    kind: str  # "header" or "kv"
    start: int  # the offset of its line's start
    end: int  # the offset just past its last character, before the line break
    path: KeyPath  # a header's table, a key-value's key, both absolute
    key_text: str = ""  # a key-value's key, as written
    indent: str = ""


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _render_key(key: Key) -> str:
    if not isinstance(key, str):
        raise TomlEditError(f"an array index ({key}) cannot be written as a key")
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def _render_value(value: Value) -> str:
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, bool) or not math.isfinite(value):
        raise TomlEditError(f"{value!r} is not a value this editor writes")
    return repr(float(value))


def _string_end(text: str, index: int) -> int:
    """The offset just past the string that starts at ``index`` (basic, literal, multi-line)."""
    quote, size = text[index], len(text)
    if text.startswith(quote * 3, index):
        cursor = index + 3
        while cursor < size:
            if quote == '"' and text[cursor] == "\\":
                cursor += 2
                continue
            if text.startswith(quote * 3, cursor):
                cursor += 3
                for _ in range(2):  # a multi-line string may end with one or two of its quotes
                    if cursor < size and text[cursor] == quote:
                        cursor += 1
                return cursor
            cursor += 1
        raise TomlEditError("a multi-line string does not end")
    cursor = index + 1
    while cursor < size:
        char = text[cursor]
        if quote == '"' and char == "\\":
            cursor += 2
            continue
        if char == quote:
            return cursor + 1
        if char == "\n":
            break
        cursor += 1
    raise TomlEditError("a string does not end on its line")


def _statement_end(text: str, start: int) -> Tuple[int, int]:
    """The end of the key-value statement at ``start`` (the line break after its value, outside any
    string, array or inline table), and the offset of its ``=``."""
    cursor, depth, equals, size = start, 0, -1, len(text)
    while cursor < size:
        char = text[cursor]
        if char in "\"'":
            cursor = _string_end(text, cursor)
            continue
        if char == "#":
            newline = text.find("\n", cursor)
            cursor = size if newline < 0 else newline
            continue
        if char == "\n":
            if equals < 0:
                raise TomlEditError(f"line {text.count(chr(10), 0, start) + 1} is neither a table header nor a key")
            if depth == 0:
                return cursor, equals
        elif equals < 0:
            if char == "=":
                equals = cursor
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        cursor += 1
    if equals < 0:
        raise TomlEditError("the last line is neither a table header nor a key")
    return size, equals


def _keys(document: Dict[str, Any]) -> Tuple[List[str], Any]:
    """The keys of a one-statement document, down to its value (or an array of tables' ``[{}]``)."""
    keys: List[str] = []
    value: Any = document
    while isinstance(value, dict) and len(value) == 1:
        key, value = next(iter(value.items()))
        keys.append(key)
    return keys, value


def _trim(text: str, start: int, end: int) -> int:
    return end - 1 if end > start and text[end - 1] == "\r" else end


def _scan(text: str) -> List[_Statement]:
    """The document's headers and key-value statements, each with its absolute key path."""
    statements: List[_Statement] = []
    table: KeyPath = ()
    arrays: Dict[KeyPath, int] = {}  # an array of tables' path (with its parents' indices) -> count
    cursor, size = 0, len(text)
    while cursor < size:
        newline = text.find("\n", cursor)
        line_end = size if newline < 0 else newline
        line = text[cursor : _trim(text, cursor, line_end)]
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if not stripped or stripped.startswith("#"):
            cursor = line_end + 1
            continue
        if stripped.startswith("["):
            keys, value = _keys(tomllib.loads(line))
            is_array = isinstance(value, list)
            path: KeyPath = ()
            for position, key in enumerate(keys):
                path += (key,)
                if is_array and position == len(keys) - 1:
                    arrays[path] = arrays.get(path, 0) + 1
                    path += (arrays[path] - 1,)
                elif path in arrays:
                    path += (arrays[path] - 1,)
            table = path
            statements.append(_Statement("header", cursor, _trim(text, cursor, line_end), table, indent=indent))
            cursor = line_end + 1
            continue
        end, equals = _statement_end(text, cursor)
        key_text = text[cursor:equals].strip()
        keys, _ = _keys(tomllib.loads(key_text + " = 0"))
        statements.append(
            _Statement("kv", cursor, _trim(text, cursor, end), table + tuple(keys), key_text=key_text, indent=indent)
        )
        cursor = end + 1
    return statements


def _apply(document: Dict[str, Any], edit: Edit) -> None:
    """``edit`` applied to parsed values: what the edited text must parse to."""
    node: Any = document
    for key in edit.path[:-1]:
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                raise TomlEditError(f"{_dotted(edit.path)}: no element {key} to edit")
            node = node[key]
        else:
            if not isinstance(node, dict):
                raise TomlEditError(f"{_dotted(edit.path)}: {key!r} is not inside a table")
            node = node.setdefault(key, {})
    if not isinstance(node, dict):
        raise TomlEditError(f"{_dotted(edit.path)}: not a table")
    last = edit.path[-1]
    assert isinstance(last, str)
    if edit.value is None:
        node.pop(last, None)
    else:
        node[last] = edit.value


def _same(left: Any, right: Any) -> bool:
    """Equality of parsed TOML values, where a NaN equals a NaN."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    return type(left) is type(right) and bool(left == right)


def _dotted(path: KeyPath) -> str:
    return ".".join(str(key) if isinstance(key, int) else key for key in path)


def _line_after(text: str, end: int) -> int:
    """The offset of the line after the one holding ``end``."""
    newline = text.find("\n", end)
    return len(text) if newline < 0 else newline + 1


def edit_toml(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with ``edits`` made by changing, adding or removing whole lines; ``TomlEditError``
    when the result would not parse to the original's values with the edits applied."""
    if not edits:
        return text
    try:
        original = tomllib.loads(text)
        statements = _scan(text)
    except ValueError as error:  # TOMLDecodeError
        raise TomlEditError(f"cannot read it ({error})") from None
    newline = "\r\n" if "\r\n" in text else "\n"
    patches: List[Tuple[int, int, int, str]] = []  # (start, end, order, replacement)
    appended: List[str] = []
    for order, edit in enumerate(edits):
        found = [item for item in statements if item.kind == "kv" and item.path == edit.path]
        if edit.value is None:
            patches.extend((item.start, _line_after(text, item.end), order, "") for item in found)
            continue
        rendered = _render_value(edit.value)
        if found:
            item = found[0]
            patches.append((item.start, item.end, order, f"{item.indent}{item.key_text} = {rendered}"))
            continue
        parent, line = edit.path[:-1], f"{_render_key(edit.path[-1])} = {rendered}{newline}"
        headers = [item for item in statements if item.kind == "header" and item.path == parent]
        if headers:
            header = headers[0]
            at = _line_after(text, header.end)
            patches.append((at, at, order, (newline if at == len(text) and header.end == at else "") + line))
            continue
        block = "[" + ".".join(_render_key(key) for key in parent if isinstance(key, str)) + "]" + newline + line
        if parent and isinstance(parent[-1], str) and len(parent) >= 2 and isinstance(parent[-2], int):
            elements = [index for index, item in enumerate(statements) if item.path == parent[:-1]]
            if not elements or statements[elements[0]].kind != "header":
                raise TomlEditError(f"{_dotted(edit.path)}: the element is not written as a [[table]]")
            later = [item for item in statements[elements[0] + 1 :] if item.kind == "header"]
            if later:
                patches.append((later[0].start, later[0].start, order, block + newline))
                continue
        elif any(isinstance(key, int) for key in parent):
            raise TomlEditError(f"{_dotted(edit.path)}: cannot add a table inside an array of tables")
        appended.append(block)
    result = text
    # From the end, so that earlier offsets hold; at one offset, a replaced range before the lines
    # added there (which then come out in the edits' order).
    for start, end, _, replacement in sorted(
        patches, key=lambda patch: (patch[0], patch[1] > patch[0], patch[2]), reverse=True
    ):
        result = result[:start] + replacement + result[end:]
    for block in appended:
        if result and not result.endswith("\n"):
            result += newline
        result += (newline if result.strip() else "") + block
    expected = copy.deepcopy(original)
    for edit in edits:
        _apply(expected, edit)
    try:
        edited = tomllib.loads(result)
    except ValueError as error:
        raise TomlEditError(f"the edited file would not parse ({error})") from None
    if not _same(edited, expected):
        names = ", ".join(_dotted(edit.path) for edit in edits)
        raise TomlEditError(f"editing {names} by lines would change other values (a table written inline or dotted?)")
    return result
