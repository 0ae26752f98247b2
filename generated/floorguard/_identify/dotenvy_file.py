"""A ``.env`` file as the Rust dotenvy crate (0.15.7, the one Codex CLI uses) reads it and
loads it into a process's environment.

Pure: :func:`load` takes the file's text and the environment it is loaded into and returns
the environment after it; nothing is read or set here. The reading follows dotenvy's own
``iter.rs`` (a logical line may span physical lines inside quotes; a ``#`` after white
space ends it) and ``parse.rs`` (``export``, keys of ASCII letters, digits, ``_`` and ``.``,
single quotes taken literally, double quotes with the escapes ``\\\\ \\' \\" \\$ \\ `` and
``\\n``, ``$NAME`` and ``${NAME}`` substituted from the environment being built, then from
earlier lines of the file, else nothing). A line dotenvy rejects is an error item, which a
caller may skip (Codex's ``set_filtered``) or stop at (dotenvy's ``load``). What could be
read two ways here raises :class:`DotenvDoubt`, naming the line, never a value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

# What Rust's ``char::is_whitespace`` and ``str::trim`` take for white space (Unicode
# White_Space); Python's ``str.isspace`` takes a few more characters.
RUST_WHITE_SPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# ``eval_end_state``'s states (iter.rs).
_COMPLETE, _ESCAPE, _STRONG, _STRONG_ESC, _WEAK, _WEAK_ESC, _COMMENT, _SPACE = range(8)


class DotenvDoubt(ValueError):
    """The file holds something dotenvy may read otherwise than this module does."""


class _LineError(Exception):
    """A line dotenvy rejects (its ``Error::LineParse``)."""


def _end_state(state: int, text: str) -> tuple[int, int]:
    """iter.rs ``eval_end_state``: the state after ``text`` and where a comment starts."""
    at = 0
    for at, c in enumerate(text):
        if state == _SPACE:
            if c == "#":
                return at, _COMMENT
            state = {"\\": _ESCAPE, '"': _WEAK, "'": _STRONG}.get(c, _COMPLETE)
        elif state == _ESCAPE:
            state = _COMPLETE
        elif state == _COMPLETE:
            if c in RUST_WHITE_SPACE and c not in "\n\r":
                state = _SPACE
            else:
                state = {"\\": _ESCAPE, '"': _WEAK, "'": _STRONG}.get(c, _COMPLETE)
        elif state == _WEAK:
            state = {"\\": _WEAK_ESC, '"': _COMPLETE}.get(c, _WEAK)
        elif state == _WEAK_ESC:
            state = _WEAK
        elif state == _STRONG:
            state = {"\\": _STRONG_ESC, "'": _COMPLETE}.get(c, _STRONG)
        elif state == _STRONG_ESC:
            state = _STRONG
    return at, state


def logical_lines(text: str) -> Iterator[tuple[int, str | None]]:
    """iter.rs ``QuotedLines``: each logical line with the number of its first physical
    line, or None for one dotenvy rejects (a quote still open at the end of the file)."""
    parts = text.split("\n")
    pieces = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    index = 0
    while index < len(pieces):
        buf, state, first = "", _COMPLETE, index + 1
        while True:
            if index >= len(pieces):
                yield first, None
                return
            start = len(buf)
            buf += pieces[index]
            index += 1
            if buf.lstrip(RUST_WHITE_SPACE).startswith("#"):
                yield first, ""
                break
            at, state = _end_state(state, buf[start:])
            if state == _COMPLETE:
                if buf.endswith("\n"):
                    buf = buf[:-1]
                    if buf.endswith("\r"):
                        buf = buf[:-1]
                yield first, buf
                break
            if state == _COMMENT:
                yield first, buf[: start + at]
                break


def _key(text: str) -> tuple[str, str]:
    if not text or not (text[0].isascii() and (text[0].isalpha() or text[0] == "_")):
        raise _LineError
    end = 0
    while end < len(text) and text[end].isascii() and (text[end].isalnum() or text[end] in "_."):
        end += 1
    return text[:end], text[end:]


def _equals(text: str) -> str:
    if not text.startswith("="):
        raise _LineError
    return text[1:]


_NONE, _BLOCK, _BRACED = range(3)


def _value(text: str, lookup: Callable[[str], str]) -> str:
    """parse.rs ``parse_value``."""
    strong = weak = escaped = expecting_end = False
    out: list[str] = []
    mode, name = _NONE, ""
    for c in text:
        if expecting_end:
            if c in " \t":
                continue
            if c == "#":
                break
            raise _LineError
        if escaped:
            if c in "\\'\"$ ":
                out.append(c)
            elif c == "n":
                out.append("\n")
            else:
                raise _LineError
            escaped = False
        elif strong:
            if c == "'":
                strong = False
            else:
                out.append(c)
        elif mode != _NONE:
            if mode == _BLOCK and not c.isascii():
                # (Rust's is_alphanumeric and Python's isalnum differ outside ASCII)
                raise DotenvDoubt("a variable name with a character that is not ASCII")
            if c.isalnum():
                name += c
            elif mode == _BLOCK:
                if c == "{" and not name:
                    mode = _BRACED
                else:
                    out.append(lookup(name))
                    name = ""
                    if c == "$":
                        mode = _BLOCK
                    else:
                        mode = _NONE
                        out.append(c)
            elif c == "}":
                mode = _NONE
                out.append(lookup(name))
                name = ""
            else:
                name += c
        elif c == "$":
            mode = _BLOCK
        elif weak:
            if c == '"':
                weak = False
            elif c == "\\":
                escaped = True
            else:
                out.append(c)
        elif c == "'":
            strong = True
        elif c == '"':
            weak = True
        elif c == "\\":
            escaped = True
        elif c in " \t":
            expecting_end = True
        else:
            out.append(c)
    if mode == _BRACED or strong or weak:
        raise _LineError
    out.append(lookup(name))
    return "".join(out)


def _parse_line(
    line: str, earlier: dict[str, str | None], environ: Mapping[str, str]
) -> tuple[str, str] | None:
    """parse.rs ``parse_line``: the key and value, None for a blank or comment line."""
    rest = line.rstrip(RUST_WHITE_SPACE).lstrip(RUST_WHITE_SPACE)
    if not rest or rest.startswith("#"):
        return None
    key, rest = _key(rest)
    rest = rest.lstrip(RUST_WHITE_SPACE)
    if key == "export" and not rest.startswith("="):
        key, rest = _key(rest)
        rest = rest.lstrip(RUST_WHITE_SPACE)
    rest = _equals(rest).lstrip(RUST_WHITE_SPACE)
    if not rest or rest.startswith("#"):
        earlier[key] = None
        return key, ""

    def lookup(name: str) -> str:
        # std::env::var first (set and text), then the file's earlier lines, else nothing.
        if "=" in name or "\x00" in name:
            raise DotenvDoubt("a variable name holding '=' or NUL")
        value = environ.get(name) if name else None
        if value is not None and _is_text(value):
            return value
        return earlier.get(name) or ""

    value = _value(rest, lookup)
    earlier[key] = value
    return key, value


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load(
    text: str,
    environ: Mapping[str, str],
    *,
    override: bool,
    stop_at_error: bool,
    strip_bom: bool,
    keep: Callable[[str], bool] = lambda key: True,
) -> dict[str, str]:
    """``environ`` after dotenvy's iterator over ``text`` is loaded into it: each key
    ``keep`` accepts set (``override``) or set only when ``environ`` lacks it (dotenvy's
    ``load``), a rejected line skipped or, with ``stop_at_error``, ending the load; a byte
    order mark removed first only with ``strip_bom`` (``load`` does, the bare iterator does
    not). Substitution sees the environment as loaded so far, as dotenvy's does, since
    each key is set before the next line is read.

    Raises :class:`DotenvDoubt` (naming the line) for what could be read two ways: a NUL
    (Rust's ``set_var`` panics on one), a variable name that is not ASCII, holds ``=``."""
    env = dict(environ)
    earlier: dict[str, str | None] = {}
    if "\x00" in text:
        raise DotenvDoubt("holds a NUL character")
    if strip_bom and text.startswith("\ufeff"):
        text = text[1:]
    for number, line in logical_lines(text):
        try:
            if line is None:
                raise _LineError
            parsed = _parse_line(line, earlier, env)
        except _LineError:
            if stop_at_error:
                break
            continue
        except DotenvDoubt as exc:
            raise DotenvDoubt(f"line {number}: {exc}") from None
        if parsed is None or not keep(parsed[0]):
            continue
        key, value = parsed
        if override or not (key in env and _is_text(env[key])):
            env[key] = value
    return env
