"""How feed problems show JSON paths, values and sources in messages."""

from __future__ import annotations

import json

from floorctl.feed_rules import _JSON_TYPES, _MAX_SHOWN_KEY, _PLAIN_KEY, _Path


def format_path(parts: _Path) -> str:
    """A ``$``-rooted JSON path; unusual keys are quoted with every non-ASCII char escaped."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif len(part) > _MAX_SHOWN_KEY:
            # A megabyte-long key must not become a megabyte-long error line.
            out.append("[" + _quote(part[:_MAX_SHOWN_KEY], ascii_only=True)[:-1] + '..."]')
        elif _PLAIN_KEY.match(part):
            out.append("." + part)
        else:
            out.append("[" + _quote(part, ascii_only=True) + "]")
    return "".join(out)


# --- display ----------------------------------------------------------------------------------


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _a(expected: object) -> str:
    names = [expected] if isinstance(expected, str) else list(expected)  # type: ignore[call-overload]
    words = [f"an {n}" if str(n)[0] in "aeiou" else f"a {n}" for n in names]
    return " or ".join(words)


def _quote(text: str, *, ascii_only: bool = False) -> str:
    """Text in double quotes with every non-printable (and, if asked, non-ASCII) char escaped,
    so that nothing from a feed can move the cursor or fake a line on a terminal."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable() and (code < 0x80 or not ascii_only):
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _show(text: str, *, limit: int = 80) -> str:
    """Free text for a message: escaped like ``_quote`` but without quotes, and shortened."""
    short = text if len(text) <= limit else text[:limit] + "..."
    return _quote(short)[1:-1]


def show_value(value: object, *, limit: int = 80) -> str:
    if isinstance(value, str):
        short = value if len(value) <= limit else value[:limit] + "..."
        return "'" + _quote(short)[1:-1].replace("'", "\\'") + "'"
    return _show(json.dumps(value) if isinstance(value, bool | int | None) else repr(value))


def show_source(source: str) -> str:
    """A file name or URL as given, with non-printable characters escaped."""
    return source if source.isprintable() else _show(source, limit=len(source))
