"""``env``'s command line, read as GNU coreutils' (and BusyBox's) env reads it: what env
runs is the program judged, in the environment env gives it.

``env [OPTION]... [-] [NAME=VALUE]... [COMMAND [ARG]...]``: options up to the first
argument that is not one (``-i``/``--ignore-environment``, ``-u NAME``/``-uNAME``/
``--unset[=]NAME``, a long option by any unambiguous abbreviation, as ``getopt_long``
takes it), ``--`` ending them; a lone ``-`` after them is ``-i``; then every argument holding
``=`` is an assignment (after ``--`` too); the first that holds none is the command, looked
up on the PATH of the environment env built (``execvp``).

The string of ``-S``/``--split-string`` on a ``#!`` line (``#!/usr/bin/env -S python3 -I``)
is split by :func:`split_string`, as GNU env splits it, when it holds no quote, backslash or
``$`` (env unquotes, unescapes and expands those: refused).

Everything else env can do changes what runs or where and is not modelled here:
``-S``/``--split-string`` on the command line, ``-C``/``--chdir``, the signal options,
``-0``, ``-v``/``--debug``, ``--help``, ``--version``, any unknown option, and env running
env again. Each is a refusal naming it (:class:`EnvRefused`), never a skip. Pure: no file
is read here but env's own, to tell that it is env.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from floorguard._identify import identify
from floorguard._identify.target import Target

# GNU env's long options (coreutils 9): getopt_long accepts any unambiguous prefix of one.
_LONG_OPTIONS: Final = (
    "ignore-environment", "null", "unset", "chdir", "default-signal", "ignore-signal",
    "block-signal", "list-signal-handling", "debug", "split-string", "help", "version",
)  # fmt: skip
# What env is told from: GNU's usage line (in the standalone env and in coreutils' single
# multi-call binary, which acts by the name it is run as), BusyBox's banner (an applet chosen
# by that name too).
_GNU_USAGE: Final = b"[OPTION]... [-] [NAME=VALUE]... [COMMAND [ARG]...]"
_GNU_MULTI_CALL: Final = b"--coreutils-prog="
_BUSYBOX: Final = b"BusyBox v"
_ELF_MAGIC: Final = b"\x7fELF"
_MAX_ENV_BYTES: Final = 32 << 20
# What GNU env -S splits words at (coreutils' env.c): Python's str.split() takes more for
# blanks (\x1c-\x1f, U+0085, U+00A0, ...), which env keeps inside a word, a program's name.
_SPLIT_BLANKS: Final = re.compile(r"[ \t\n\v\f\r]+")
_UNQUOTED: Final = ("'", '"', "\\", "$")
# execvp's search when the environment has no PATH depends on the C library: not guessed.
NO_PATH: Final = "env's environment has no PATH (the C library's default search path decides)"


class EnvRefused(Exception):
    """env is asked to do something not modelled (``str``: what, named)."""


@dataclass(frozen=True)
class EnvCommand:
    """env's command line, read: start from an empty environment (``ignores_environment``)
    or the given one less ``unsets``, add ``assignments`` in order, then run ``command``
    with ``args`` (None: no command, env prints the environment)."""

    ignores_environment: bool
    unsets: tuple[str, ...]
    assignments: tuple[tuple[str, str], ...]
    command: str | None
    args: tuple[str, ...]

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The environment the command runs with, env's given ``environ``."""
        unset = set(self.unsets)
        built = {} if self.ignores_environment else {
            name: value for name, value in environ.items() if name not in unset
        }  # fmt: skip
        built.update(self.assignments)
        return built

    def record(self, binary: str) -> dict[str, object]:
        """What a receipt says of it: env's file, the command as given, and the names (never
        the values, which may be credentials) of the variables it sets and unsets."""
        return {
            "program": "env",
            "binary": binary,
            "command": self.command,
            "ignores_environment": self.ignores_environment,
            "sets": list(dict.fromkeys(name for name, _ in self.assignments)),
            "unsets": list(dict.fromkeys(self.unsets)),
        }


def parse_env_argv(argv: Sequence[str]) -> EnvCommand:
    """``argv`` (after env's own name) as env reads it. Raises EnvRefused for anything that
    is not an assignment, ``-i``, ``-u`` or the command."""
    ignore, at = False, 0
    unsets: list[str] = []
    while at < len(argv):
        arg = argv[at]
        if arg == "--":
            at += 1
            break
        if arg == "-" or not arg.startswith("-"):
            break
        if arg.startswith("--"):
            at, cleared = _long_option(argv, at, unsets)
            ignore = ignore or cleared
            continue
        at, cleared = _short_options(argv, at, unsets)
        ignore = ignore or cleared
    if at < len(argv) and argv[at] == "-":
        ignore, at = True, at + 1
    assignments: list[tuple[str, str]] = []
    while at < len(argv) and "=" in argv[at]:
        name, _, value = argv[at].partition("=")
        if not name:
            raise EnvRefused(f"env's assignment {argv[at]!r} names no variable")
        assignments.append((name, value))
        at += 1
    command = argv[at] if at < len(argv) else None
    if command is not None and os.path.basename(command) == "env":
        raise EnvRefused(f"env runs env again ({command!r}): not followed")
    return EnvCommand(ignore, tuple(unsets), tuple(assignments), command, tuple(argv[at + 1 :]))


def split_string(text: str) -> tuple[str, ...]:
    """The words of an ``env -S`` string as GNU env splits it: at spaces, tabs, ``\\n``,
    ``\\v``, ``\\f`` and ``\\r`` only; a word that starts with ``#`` starts a comment, and
    env reads nothing after it (``env -S 'echo a #b c'`` runs ``echo a``; in ``a#b`` the
    ``#`` is a letter). Raises EnvRefused for a quote, a backslash or a ``$`` before any
    comment (env unquotes, unescapes and expands them; not modelled)."""
    words: list[str] = []
    for word in _SPLIT_BLANKS.split(text):
        if word.startswith("#"):
            break
        unquoted = [c for c in _UNQUOTED if c in word]
        if unquoted:
            raise EnvRefused(
                f"env -S string {text!r}: its {unquoted[0]!r} is not modelled (env unquotes, "
                "unescapes and expands)"
            )
        if word:
            words.append(word)
    return tuple(words)


def _long_option(argv: Sequence[str], at: int, unsets: list[str]) -> tuple[int, bool]:
    """The long option at ``argv[at]``: where the next argument is, and whether it clears
    the environment."""
    given = argv[at]
    name, has_value, value = given[2:].partition("=")
    full = name if name in _LONG_OPTIONS else None
    if full is None:
        matches = [option for option in _LONG_OPTIONS if option.startswith(name)]
        if len(matches) != 1:
            kind = "ambiguous" if matches else "unknown"
            raise EnvRefused(f"env option {given!r} is {kind}: not understood")
        full = matches[0]
    shown = f"--{full}" + ("" if full == name else f" (given as {given!r})")
    if full == "ignore-environment":
        if has_value:
            raise EnvRefused(f"env option {shown} takes no value: not understood")
        return at + 1, True
    if full == "unset":
        if not has_value:
            if at + 1 >= len(argv):
                raise EnvRefused(f"env option {shown} names no variable")
            at, value = at + 1, argv[at + 1]
        unsets.append(_unset_name(value))
        return at + 1, False
    raise EnvRefused(f"env option {shown} is not modelled: what env then runs is not judged")


def _short_options(argv: Sequence[str], at: int, unsets: list[str]) -> tuple[int, bool]:
    """The cluster of short options at ``argv[at]`` (``-iu NAME``, ``-uNAME``)."""
    given, cleared = argv[at], False
    for place in range(1, len(given)):
        letter = given[place]
        if letter == "i":
            cleared = True
            continue
        if letter == "u":
            value = given[place + 1 :]
            if not value:
                if at + 1 >= len(argv):
                    raise EnvRefused("env option -u names no variable")
                at, value = at + 1, argv[at + 1]
            unsets.append(_unset_name(value))
            return at + 1, cleared
        shown = f"-{letter}" if letter.isprintable() else repr(letter)
        raise EnvRefused(
            f"env option {shown} (in {given!r}) is not modelled: what env then runs is not judged"
        )
    return at + 1, cleared


def _unset_name(name: str) -> str:
    # unsetenv refuses these, and env stops with an error.
    if not name or "=" in name:
        raise EnvRefused(f"env -u {name!r}: not a variable name")
    return name


# ---------------------------------------------------------------------------- which file is env

_kind_cache = identify.new_cache()


def is_env(opened: Target) -> bool:
    """Whether the opened program is env: named ``env`` (as run, or its real file) and
    native. Raises EnvRefused when it is named so but is not GNU coreutils' or BusyBox's
    env (its command line would be read by other rules, or it is another program renamed).
    A copy of env under another name is not told (judged as the program it is)."""
    asked = os.path.basename(opened.requested)
    real = opened.path.name
    if "env" not in (asked, real) or opened.read_head(4) != _ELF_MAGIC:
        return False
    kind = identify.memo(_kind_cache, (str(opened.path), opened.identity), lambda: _kind(opened))
    # A multi-call binary (BusyBox, coreutils') runs the program named by argv[0].
    if kind == "gnu" or (kind in ("busybox", "gnu-multi-call") and asked == "env"):
        return True
    raise EnvRefused(
        f"{opened.path}, run as {asked!r}, is not recognised as GNU coreutils' or BusyBox's "
        "env: what it runs is not understood"
    )


def _kind(opened: Target) -> str | None:
    data = opened.read_all(_MAX_ENV_BYTES)
    if data is None:
        return None
    if _GNU_USAGE in data:
        return "gnu-multi-call" if _GNU_MULTI_CALL in data else "gnu"
    return "busybox" if _BUSYBOX in data else None


def command_path(command: str, environ: Mapping[str, str], here: str) -> tuple[str, str | None]:
    """Where env's ``execvp`` looks for ``command``: a name with a slash against the child's
    working directory ``here``; else on the PATH of ``environ`` (returned too). Raises
    EnvRefused when that search cannot be followed: no PATH, or an entry that is relative (env
    searches it from its working directory)."""
    if "/" in command:
        return os.path.join(here, command), None
    path = environ.get("PATH")
    if path is None:
        raise EnvRefused(NO_PATH)
    for number, entry in enumerate(path.split(os.pathsep), 1):
        if not os.path.isabs(entry):
            # Named by its place: a variable's text may be a secret (it is recorded).
            raise EnvRefused(
                f"entry {number} of env's PATH is relative: env searches it for {command!r} "
                "in its working directory"
            )
    return command, path


def check_not_env(program: Target) -> None:
    """Raises EnvRefused when env's command, opened, is env by its real file (a symbolic link
    to env under another name): env running env is not followed, whatever it is called."""
    if program.path.name == "env":
        raise EnvRefused(
            f"env runs env again ({program.requested!r}, which is {program.path}): not followed"
        )
