"""Text for one line of a terminal or a log: what a message quotes (a path, a version, a
reason) may hold newlines and control characters chosen by whoever named the file."""

from __future__ import annotations

import re
from typing import Any, TypeGuard


def one_line(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\n``, ``\\x1b``), so
    it stays one line and cannot forge the next one."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def is_text(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a ``str`` (a subclass's too) by its type, not by what it says
    its ``__class__`` is (``isinstance`` believes that)."""
    return issubclass(type(value), str)


def own_characters(value: str) -> str:
    """``value`` as a plain ``str`` of its characters: what a subclass says of itself (its
    comparisons, hash, ``str()`` or ``startswith``) takes no part in a judgement, which reads
    the characters the operating system will be given."""
    return value if type(value) is str else str.__str__(value)


def recordable(text: str) -> str:
    """``text`` as a record can hold it: a lone surrogate (what a byte that is not UTF-8 in
    a file name, an argument or a variable becomes) written as its escape (``\\udcff``)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def recordable_value(value: Any) -> Any:
    """``value`` (strings, lists and dicts of them) with every string ``recordable``."""
    if isinstance(value, str):
        return recordable(value)
    if isinstance(value, dict):
        # (an ASCII key or value, or none, the common case: no call down for it; 1.6 us
        # against 2.7 for a receipt's fields)
        return {
            k if type(k) is str and k.isascii() else recordable(str(k)):
            v if v is None or (type(v) is str and v.isascii())
            else recordable(v) if type(v) is str else recordable_value(v)
            for k, v in value.items()
        }  # fmt: skip
    if isinstance(value, (list, tuple)):
        return [recordable_value(v) for v in value]
    return value


# What a reason may quote from a command line that carries a credential: a URL's user
# information in any spelling node or git reads (``https://u:p@h``, ``https:u:p@h``,
# ``git+https://u:p@h``, ``u:p@h:9``), a value given to a name that says it is secret, and
# a quoted variable assignment's value (``'=VALUE'``, ``'NAME=VALUE'`` quoted from an
# env(1) command line; the host's own settings, ``FLOORGUARD_FLOOR_MAP=PATH``, unquoted).
_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.-]*:[/\\]*)[^\s/\\@'\"]*@")
# The name (within a longer one: GITHUB_TOKEN; not a file's extension: chain.key), then
# what may close it (a quote, a
# subscript: "token": , [token]=, token[0]=) and = or :, then the value: quoted (spaces and
# all, to the closing quote or the end), or a word after an authentication scheme
# (Bearer, Basic, ...), or a bare word.
_SECRET_VALUE = re.compile(
    r"(?i)((?<!\.)(?:token|password|passwd|pwd|secret|auth[a-z_-]*|api[_-]?key|key|bearer)"
    r"[\]\[0-9'\"]*\s*[=:]\s*)"
    r"(?:\"[^\"]*\"?|'[^']*'?|(?:(?:bearer|basic|digest|token)\s+)?[^\s'\",]+)"
)
_ASSIGNED = re.compile(r"(['\"])([A-Za-z_][A-Za-z0-9_]*)?=[^'\"]+(?=['\"])")


def without_credentials(text: str) -> str:
    """``text`` with what may be a credential replaced by ``<hidden>`` (see above): refusal
    reasons quote arguments, and a receipt keeps arguments only as a digest.
    A pattern runs only on text holding the character it cannot match without (``@``; ``=``
    or ``:``; ``=``): most reasons hold none, and three scans were a part of every decision."""
    if "@" in text:
        text = _USERINFO.sub(r"\1<hidden>@", text)
    if "=" in text or ":" in text:
        text = _SECRET_VALUE.sub(r"\1<hidden>", text)
    if "=" in text:
        text = _ASSIGNED.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}=<hidden>", text)
    return text


# (a minus only before a number that is not zero: "-0" is no spelling of 0 either)
_WHOLE_NUMBER = re.compile(r"(?:-(?=[0-9]*[1-9]))?[0-9]+")


def whole_number(text: str) -> int:
    """The integer ``text`` spells in ASCII digits (an optional ``-`` first), as the command
    lines read one. Raises ValueError for anything else: ``int()`` also takes other scripts'
    digits, ``_`` between digits, a ``+`` and white space around them, which no other
    option of the command lines takes."""
    if _WHOLE_NUMBER.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a whole number in ASCII digits")
    return int(text)


def _json_escape(character: str) -> str:
    code = ord(character)
    if code > 0xFFFF:  # (as a UTF-16 surrogate pair, as JSON spells one)
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def terminal_json(document: Any) -> str:
    """``document`` as the JSON the command lines print (two-space indents, sorted keys,
    UTF-8), with every character that is not printable in a string written as its ``\\u``
    escape: JSON leaves DEL, the C1 controls (U+009B starts a terminal's control sequence),
    U+2028 and bidirectional overrides raw, and a file name may hold any of them."""
    import json

    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    if text.replace("\n", "").isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else _json_escape(c) for c in text)
