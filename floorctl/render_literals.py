"""Values written as Python literals, so feed text reaches a template only as data."""

from __future__ import annotations

from typing import Any

from floorctl.errors import RenderError

_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    if ch in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def py_literal(value: str | int) -> str:
    """``value`` as Python source: a double-quoted string literal, or a decimal int.

    Printable characters other than ``"`` and ``\\`` are kept as they are; everything
    else (line breaks, NUL, control and format characters, U+2028...) is escaped, so the
    literal is always one line and evaluates back to exactly ``value``. Raises RenderError
    for a bool, a negative int or another type.
    """
    if type(value) is str and value.isprintable():  # the common case, at C speed
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RenderError(f"cannot write {type(value).__name__} as a floor-map literal")
    if isinstance(value, int):
        if value < 0:
            raise RenderError(f"cannot write negative number {value} as a floor-map literal")
        return str(value)
    if value.isprintable():  # a str subclass
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return '"' + "".join(_escape_char(ch) for ch in value) + '"'


# A container whose one-line form is at most this long is written on one line.
_ONE_LINE = 72


def py_data(value: Any, indent: int = 0) -> str:
    """Nested dicts (string keys), lists, strings and ints as a Python literal.

    Every string and int goes through :func:`py_literal`; the brackets, colons and commas
    around them are this function's own, so no value can add syntax. Small containers of
    scalars take one line; others one item per line, indented from ``indent``. Raises
    RenderError for any other type.
    """
    if isinstance(value, dict):
        items = [(py_literal(_key(k)), v) for k, v in value.items()]
        if not items:
            return "{}"
        if all(isinstance(v, str | int) for _, v in items):
            line = "{" + ", ".join(f"{k}: {py_literal(v)}" for k, v in items) + "}"
            if len(line) <= _ONE_LINE:
                return line
        pad = " " * (indent + 4)
        body = "".join(f"{pad}{k}: {py_data(v, indent + 4)},\n" for k, v in items)
        return "{\n" + body + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(isinstance(v, str | int) for v in value):
            line = "[" + ", ".join(py_literal(v) for v in value) + "]"
            if len(line) <= _ONE_LINE:
                return line
        pad = " " * (indent + 4)
        body = "".join(f"{pad}{py_data(v, indent + 4)},\n" for v in value)
        return "[\n" + body + " " * indent + "]"
    return py_literal(value)


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise RenderError(f"cannot write a {type(key).__name__} key as a floor-map literal")
    return key
