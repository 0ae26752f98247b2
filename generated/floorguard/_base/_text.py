"""Text for one line of a terminal or a log: what a message quotes (a path, a version, a
reason) may hold newlines and control characters chosen by whoever named the file."""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\n``, ``\\x1b``), so
    it stays one line and cannot forge the next one."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
