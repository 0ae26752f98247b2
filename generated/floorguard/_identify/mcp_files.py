"""Reading an MCP client's configuration files strictly: one open, a size cap, a place.

A configuration file decides which programs an agent will start, so a file that cannot be
read completely and exactly is a doubt, never a skip: unparseable text, a duplicate key (two
readers may keep different ones), a non-finite number, nesting past Python's limit, a FIFO
or device (refused without blocking), a file over :data:`MAX_CONFIG_BYTES`, an unreadable
file, or a link that leads out of the folder the file was looked for in (a project's or the
home folder). Only a file that is not there at all is simply absent.
"""

from __future__ import annotations

import os
import re
import tomllib
from typing import Any, Final

from floorguard._base._canonical import RepeatedKey, loads_strict
from floorguard._base.files import read_regular_located
from floorguard._identify.process_paths import INTO_THE_PROCESS, Walk
from floorguard.errors import UnreadableFileError

# ~/.claude.json also holds the client's history and every project's state; a few MiB is
# normal there, tens of MiB is not a configuration.
MAX_CONFIG_BYTES: Final = 16 * 1024 * 1024

# Parsed documents by (format, bytes): the same bytes parse to the same value, so a warm
# preflight reads each file but parses only what changed. Values are never handed out to be
# modified (readers copy what they keep).
_PARSED: dict[tuple[str, bytes], Any] = {}
_PARSED_LIMIT: Final = 64


class ConfigDoubt(Exception):
    """A configuration file or value that cannot be read exactly; the message names it."""


def read_config(
    path: str,
    *,
    within: str | None,
    what: str,
    max_bytes: int = MAX_CONFIG_BYTES,
    walk: Walk | None = None,
) -> tuple[bytes, str] | None:
    """The bytes of the file at ``path`` and its real path, or None when nothing is there.

    ``within``: a folder the file must really lie in (its links resolved, from the open
    descriptor), or None for a file named explicitly (an argument, a system file). Raises
    ConfigDoubt for anything but a regular, readable file of at most ``max_bytes`` there,
    and for a path that leads, through links, into a folder each process has its own of
    (``walk``: the lookups of one judgement, which remember the plain folders).
    """
    refuse_process_paths(path, what, walk)
    try:
        got = read_regular_located(path, max_bytes=max_bytes, what=what)
    except UnreadableFileError as exc:  # (ENOTDIR too: a file where a folder was looked for)
        raise ConfigDoubt(str(exc)) from None
    if got is None:
        return None
    data, _, real = got
    if within is not None and not _inside(real, within):
        raise ConfigDoubt(f"{path}: the {what} is a link to {real}, outside {within}")
    return data, real


def refuse_process_paths(path: str, what: str, walk: Walk | None = None) -> None:
    """Raise ConfigDoubt when ``path`` (a file or a folder) leads into ``/proc/self``,
    ``/dev/fd`` and the like: the agent would read its own there, not what is read here
    (a link the gate would find leading nowhere must not pass for an absent file)."""
    here = "/" if os.path.isabs(path) else os.getcwd()
    where = (walk or Walk()).leads(path, here)
    if where == INTO_THE_PROCESS:
        raise ConfigDoubt(
            f"{path}: the {what} is reached through /proc or /dev/fd, which lead to each "
            "process's own files: the agent would read another file than the one read here"
        )
    if where is not None:
        raise ConfigDoubt(f"{path}: the {what} is reached {where}")


def _inside(real: str, folder: str) -> bool:
    base = os.path.realpath(folder)
    return real == base or real.startswith(base.rstrip("/") + "/")


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigDoubt(f"{path}: not UTF-8 text: {exc}") from None


def parse_json(data: bytes, path: str, *, comments: bool = False) -> Any:
    """The JSON document in ``data`` (``comments``: JSON with ``//`` and ``/* */`` comments,
    as Gemini CLI reads its settings). Raises ConfigDoubt naming ``path``."""
    fmt = "jsonc" if comments else "json"
    cached = _PARSED.get((fmt, data), _PARSED)
    if cached is not _PARSED:
        return cached
    text = _text(data, path)
    if text.startswith("\ufeff"):
        raise ConfigDoubt(f"{path}: starts with a byte order mark")
    if comments:
        text = strip_comments(text, path)
    try:
        value = loads_strict(text)
    except RepeatedKey as exc:
        raise ConfigDoubt(f"{path}: {exc}") from None
    except RecursionError:
        raise ConfigDoubt(f"{path}: nested too deeply") from None
    except ValueError as exc:
        raise ConfigDoubt(f"{path}: not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text) and _holds_surrogate(value):
        raise ConfigDoubt(f"{path}: a \\u escape decodes to a lone surrogate, which is no text")
    _remember((fmt, data), value)
    return value


# A JSON escape of a UTF-16 surrogate: a pair is one character, one alone is no text (and no
# receipt could record it).
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def _holds_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return not is_text(value)
    if isinstance(value, dict):
        return any(_holds_surrogate(k) or _holds_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_surrogate(item) for item in value)
    return False


def is_text(value: str) -> bool:
    """Whether ``value`` is text, not holding a lone surrogate (what an undecodable byte of
    an argument or a JSON escape of half a pair becomes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_toml(data: bytes, path: str) -> dict[str, Any]:
    """The TOML document in ``data`` (TOML itself refuses a key defined twice). Raises
    ConfigDoubt naming ``path``."""
    cached = _PARSED.get(("toml", data))
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    text = _text(data, path)
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise ConfigDoubt(f"{path}: nested too deeply") from None
    except ValueError as exc:  # TOMLDecodeError, and an integer past Python's digit limit
        raise ConfigDoubt(f"{path}: not valid TOML: {exc}") from None
    _remember(("toml", data), value)
    return value


def _remember(key: tuple[str, bytes], value: Any) -> None:
    if len(_PARSED) >= _PARSED_LIMIT:
        _PARSED.clear()
    _PARSED[key] = value


def strip_comments(text: str, path: str) -> str:
    """``text`` with every ``//`` line comment and ``/* */`` block comment outside strings
    replaced by spaces (so positions in messages still hold). An unterminated block
    comment is a doubt."""
    out: list[str] = []
    i, n, start = 0, len(text), 0
    while i < n:
        char = text[i]
        if char == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif char == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out += (text[start:i], " " * (end - i))
            i = start = end
        elif char == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigDoubt(f"{path}: a /* comment is never closed")
            comment = text[i : end + 2]
            out += (text[start:i], "".join("\n" if c == "\n" else " " for c in comment))
            i = start = end + 2
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)
