"""dotenv-expand's reading of one value, as Gemini CLI (0.31 and later) applies it to each
value of a stdio MCP server's ``env`` when it starts the server (core ``expandEnvVars``:
dotenv-expand 12's ``expand`` of a single entry, from the agent's environment and the
extension's variables).

Its rules are not those of the expansion Gemini CLI applies to its settings first: a
reference is ``${EXPRESSION}`` (anything but braces) or ``$NAME``, not after a backslash;
an expression is a name, or a name and a default split at the first ``:+``, ``+``, ``:-``
or ``-`` (with none of them, at the first ``null``: JavaScript's ``split(null)``); ``:+``
and ``+`` give the default when the variable is non-empty, else nothing; the others give
the variable when it is non-empty, else the default. What is put in place is read again
from the start, and a backslash before a dollar is dropped at the end.

What is not modelled here (a value put in place that holds a dollar: JavaScript's
``replace`` reads ``$&``, ``$$`` and their kind in it; a reading that does not end) gives
None: the caller takes the value for unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"(?<!\\)\$\{([^{}]+)\}|(?<!\\)\$([A-Za-z_][A-Za-z0-9_]*)")
_OPERATOR = re.compile(r":\+|\+|:-|-")
_MOST_STEPS = 64
_OBJECT_PROPERTIES = frozenset(
    {"constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable",
     "toLocaleString", "toString", "valueOf", "__proto__", "__defineGetter__",
     "__defineSetter__", "__lookupGetter__", "__lookupSetter__"}
)  # fmt: skip


def dotenv_expand(value: str, environ: Mapping[str, str]) -> str | None:
    """``value`` as dotenv-expand gives it from ``environ``; None when not modelled."""
    if not value:
        return value  # (Gemini CLI passes an empty value through untouched)
    result = value
    seen: set[str] = set()
    for _ in range(_MOST_STEPS):
        match = _REFERENCE.search(result)
        if match is None:
            return result.replace("\\$", "$")
        seen.add(result)
        expression = match.group(1) or match.group(2)
        operator = _OPERATOR.search(expression)
        splitter = operator.group(0) if operator else "null"
        key, *rest = expression.split(splitter)
        default = splitter.join(rest)
        if key in _OBJECT_PROPERTIES and key not in environ:
            return None  # (JavaScript finds a function there: Object.prototype's)
        found = environ.get(key, "")
        if splitter in (":+", "+"):
            put = default if found else ""
        elif found and found not in seen:
            put = found
        else:
            put = default
        if "$" in put:
            return None
        # (JavaScript's replace of a text: its first occurrence, maybe an escaped one)
        at = result.index(match.group(0))
        result = result[:at] + put + result[at + len(match.group(0)) :]
    return None
