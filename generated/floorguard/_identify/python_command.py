"""How a CPython 3.11-3.13 child reads its command line and its PYTHON* environment.

The runtime refuses a below-floor adapter whatever it is called, so for a Python child it
must know which code the interpreter will load: the program (``-m``, ``-c``, a script, or
standard input) and every option or variable that adds code or moves where code is found.
A loose reading is an opening: ``python -I -W -m aider`` takes ``-m`` as the value of
``-W`` and runs the *file* ``aider`` in the working directory, not the module.

So this module reads the command line as CPython's own option parser does (one option
letter at a time, values from the rest of the argument or the next one, ``-c``/``-m``
ending the options, the first other argument being the program) and checks what it reads
against allowlists: whatever is not known to leave the loaded code unchanged is named in
``doubts``, and the caller refuses a command with any doubt. The same goes for the
environment: every PYTHON* name is either known here, resolved by the caller (PYTHONPATH,
PYTHONUSERBASE), or a doubt, so a variable a newer interpreter starts reading is refused
rather than ignored.

Pure functions over strings, standard library only: no file, process or environment access.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "PythonCommand",
    "build_variable_doubts",
    "parse_python_argv",
    "python_environment_doubts",
    "shebang_arguments",
]


@dataclass(frozen=True)
class PythonCommand:
    """What ``python ARGV`` runs, as CPython parses ARGV.

    ``runs`` is ``"module"`` (-m), ``"code"`` (-c), ``"script"`` (a file, directory or zip
    archive), ``"stdin"`` (``-``), ``"repl"`` (no program: the interactive interpreter, or
    standard input read as a script when it is not a terminal) or ``"nothing"`` (-h, -V,
    --help-*, or an option error: the interpreter exits before loading any program).
    ``value`` is the module name, the code or the script path exactly as given (None for
    the others); ``flags`` the one-letter options among I E s S P i that change where
    code is found; ``args`` the program's own arguments; ``doubts`` every input not
    understood, each a short phrase naming it.
    """

    runs: str
    value: str | None
    flags: frozenset[str]
    args: tuple[str, ...]
    doubts: tuple[str, ...]


# The interpreter's one-letter options (the same set in 3.11, 3.12 and 3.13; -P is new in
# 3.11). -t is still accepted and ignored. -J is rejected ("reserved for Jython").
_PLAIN_LETTERS: Final = frozenset("bBdEiIOPqRsStuv")
_VALUE_LETTERS: Final = frozenset("cmWX")  # value: the rest of the argument, or the next one
_HELP_LETTERS: Final = frozenset("h?")  # print the usage and exit at once
# The options recorded in ``flags``: each changes the search path, the environment read or
# whether standard input is read after the program.
_LOCATION_FLAGS: Final = frozenset("IEsSPi")

# Long options, matched whole (no ``--name=value`` form); ``--help`` and ``--version`` are
# only recognised as a whole argument, these also inside a cluster (``-I-help-env``).
_LONG_HELP: Final = frozenset({"help-all", "help-env", "help-xoptions"})
_CHECK_HASH_PYCS: Final = "check-hash-based-pycs"

# -X options known not to change the code loaded. Bare names; then NAME=VALUE patterns.
# Not here, so doubts: pycache_prefix (bytecode read from another tree), frozen_modules=off
# (runpy and the other startup modules are then imported from sys.path, the working
# directory first: a runpy.py there runs for ``-m``), presite (3.13 debug builds: imports a
# module before site) and any name CPython may add later (it accepts every -X silently).
_X_BARE: Final = frozenset(
    {
        "utf8",
        "dev",
        "importtime",
        "faulthandler",
        "tracemalloc",
        "warn_default_encoding",
        "no_debug_ranges",
        "showrefcount",
        "perf",
        "perf_jit",
        "frozen_modules",  # (bare, as with an empty value: on)
    }
)
_X_VALUED: Final = re.compile(
    r"utf8=[01]|importtime=[0-9]+|tracemalloc=[0-9]+|int_max_str_digits=[0-9]+"
    r"|frozen_modules=(?:on)?|gil=[01]|cpu_count=(?:0*[1-9][0-9]*|default)",
    re.ASCII,
)

# A warnings filter is action:message:category:module:lineno. A dotted category makes the
# warnings module import the module before it (at startup, before the program): code
# loading. A bare category is looked up in builtins only; these are its warning classes.
_BUILTIN_WARNINGS: Final = frozenset(
    {
        "Warning",
        "UserWarning",
        "DeprecationWarning",
        "PendingDeprecationWarning",
        "SyntaxWarning",
        "RuntimeWarning",
        "FutureWarning",
        "ImportWarning",
        "UnicodeWarning",
        "BytesWarning",
        "ResourceWarning",
        "EncodingWarning",
    }
)
# Actions the warnings module accepts: "all", or any prefix of these ("d" is "default").
_WARNING_ACTIONS: Final = ("default", "always", "ignore", "module", "once", "error")
_WARNING_FIELDS: Final = 5
_DIGITS: Final = re.compile(r"[0-9]+", re.ASCII)

# PYTHON* variables that CPython 3.11-3.13 (or its standard library at startup, in the REPL
# or on demand) reads without changing which code is loaded.
ENV_UNDERSTOOD: Final = frozenset(
    {
        "PYTHONASYNCIODEBUG",
        "PYTHONCOERCECLOCALE",
        "PYTHONDEBUG",
        "PYTHONDEVMODE",
        "PYTHONDOCS",  # pydoc's documentation URL
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONDUMPREFS",
        "PYTHONDUMPREFSFILE",
        "PYTHONFAULTHANDLER",
        "PYTHONHASHSEED",
        "PYTHONINTMAXSTRDIGITS",
        "PYTHONIOENCODING",  # codecs come from the standard library's encodings package
        "PYTHONLEGACYWINDOWSFSENCODING",
        "PYTHONLEGACYWINDOWSSTDIO",
        "PYTHONMALLOC",
        "PYTHONMALLOCSTATS",
        "PYTHONNODEBUGRANGES",
        "PYTHONNOUSERSITE",
        "PYTHONOPTIMIZE",
        "PYTHONPERFSUPPORT",
        "PYTHONPROFILEIMPORTTIME",
        "PYTHONSAFEPATH",
        "PYTHONTRACEMALLOC",
        "PYTHONUNBUFFERED",
        "PYTHONUTF8",
        "PYTHONVERBOSE",
        "PYTHONWARNDEFAULTENCODING",
        "PYTHON_BASIC_REPL",
        "PYTHON_COLORS",
        "PYTHON_CPU_COUNT",
        "PYTHON_GIL",
        "PYTHON_HISTORY",
        "PYTHON_JIT",
        "PYTHON_PERF_JIT_SUPPORT",
    }
)
# Set by the official python container images (and so by every child in them); read by no
# CPython: without them every Python child in such an image would be refused.
ENV_NOT_READ: Final = frozenset(
    {
        "PYTHON_VERSION",
        "PYTHON_SHA256",
        "PYTHON_PIP_VERSION",
        "PYTHON_SETUPTOOLS_VERSION",
        "PYTHON_GET_PIP_URL",
        "PYTHON_GET_PIP_SHA256",
    }
)
# Read by getpath, -E and -I or not (build_variable_doubts): the program Python takes itself
# for, whose pyvenv.cfg then makes a virtual environment of any folder.
ENV_READ_WHATEVER_THE_OPTIONS: Final = {
    "PYTHONEXECUTABLE": "PYTHONEXECUTABLE: read by getpath, -E and -I or not "
    "(moves sys.executable and the environment found)",
    "__PYVENV_LAUNCHER__": "__PYVENV_LAUNCHER__: read by getpath, -E or not "
    "(another program's venv)",
}
# Resolved by the caller when it builds the search path (identify.python_search_path).
_ENV_CALLER_RESOLVES: Final = frozenset({"PYTHONPATH", "PYTHONUSERBASE"})
# Known, and known to load code or move where it comes from.
_ENV_DOUBTS: Final = {
    "PYTHONHOME": "PYTHONHOME: the standard library, site.py included, comes from there",
    "PYTHONPYCACHEPREFIX": "PYTHONPYCACHEPREFIX: bytecode read from another tree",
    "PYTHON_PRESITE": "PYTHON_PRESITE: a module imported before site",
    "PYTHONCASEOK": "PYTHONCASEOK: imports match file names case-insensitively",
}

_SHEBANG_BLANKS: Final = " \t"  # what the kernel strips around a "#!" line's argument


def parse_python_argv(argv: Sequence[str]) -> PythonCommand:
    """Parse ``argv``, the arguments after the interpreter program, as CPython does."""
    args = list(argv)
    flags: set[str] = set()
    doubts: list[str] = []
    version = False
    index = 0

    def stop(doubt: str | None = None) -> PythonCommand:
        # The interpreter exits (help, or a usage error) before loading any program.
        if doubt is not None:
            doubts.append(doubt)
        return PythonCommand("nothing", None, frozenset(flags), (), tuple(doubts))

    while index < len(args):
        arg = args[index]
        if not arg.startswith("-") or arg == "-":
            break  # the program: a script, or "-" for standard input
        index += 1
        if arg == "--":
            break  # the next argument is the program even if it starts with "-"
        if arg == "--help":
            return stop()
        if arg == "--version":
            version = True
            continue
        cluster = arg[1:]
        position = 0
        while position < len(cluster):
            letter = cluster[position]
            rest = cluster[position + 1 :]
            position += 1
            if letter == "-":
                if not rest:
                    # CPython warns "expected long option" and ends the options here.
                    doubts.append(f"option {arg!r}: a stray '-' ends the options")
                    return _program(args, index, flags, doubts, version)
                if rest in _LONG_HELP:
                    return stop()
                if rest != _CHECK_HASH_PYCS:
                    return stop(f"unknown option --{rest}")
                if index >= len(args):
                    return stop(f"--{rest} without a value")
                mode = args[index]
                index += 1
                if mode == "never":
                    doubts.append(f"--{rest} never: bytecode used without checking its source")
                elif mode not in ("default", "always"):
                    return stop(f"--{rest} {mode!r}: not a mode")
                break
            if letter in _HELP_LETTERS:
                return stop()
            if letter == "V":
                version = True
                continue
            if letter in _PLAIN_LETTERS:
                if letter in _LOCATION_FLAGS:
                    flags.add(letter)
                continue
            if letter == "t":
                continue  # accepted and ignored since Python 3
            if letter == "x":
                # The script's first line is skipped: what runs is not the source as read.
                doubts.append("option -x: the script is run without its first line")
                continue
            if letter not in _VALUE_LETTERS:
                return stop(f"unknown option -{letter}")
            if rest:
                value = rest
            elif index < len(args):
                value = args[index]
                index += 1
            else:
                return stop(f"-{letter} without a value")
            if letter == "W":
                doubts.extend(_warning_filter_doubts(value, "-W"))
            elif letter == "X":
                doubts.extend(_x_option_doubts(value))
            else:
                runs = "code" if letter == "c" else "module"
                if letter == "m" and not _is_module_name(value):
                    doubts.append(f"-m {value!r}: not a dotted module name")
                return _done(
                    runs, value, tuple(args[index:]), flags=flags, doubts=doubts, version=version
                )
            break  # the value took the rest of this argument
    return _program(args, index, flags, doubts, version)


def _program(
    args: list[str], index: int, flags: set[str], doubts: list[str], version: bool
) -> PythonCommand:
    # After the options: the first argument is the program; "-" (even after "--") and no
    # argument at all both read code from standard input.
    if index >= len(args):
        return _done("repl", None, (), flags=flags, doubts=doubts, version=version)
    if args[index] == "-":
        return _done(
            "stdin", None, tuple(args[index + 1 :]), flags=flags, doubts=doubts, version=version
        )
    return _done(
        "script", args[index], tuple(args[index + 1 :]), flags=flags, doubts=doubts, version=version
    )


def _done(
    runs: str,
    value: str | None,
    program_args: tuple[str, ...],
    *,
    flags: set[str],
    doubts: list[str],
    version: bool,
) -> PythonCommand:
    if version:
        # -V/--version anywhere among the options: the version is printed once they are
        # all read, and nothing runs.
        return PythonCommand("nothing", None, frozenset(flags), (), tuple(doubts))
    if runs == "stdin":
        doubts.append("program '-': code read from standard input")
    elif runs == "repl":
        doubts.append("no program: code read from standard input")
    if "i" in flags and runs not in ("stdin", "repl"):
        doubts.append("-i: code read from standard input after the program")
    return PythonCommand(runs, value, frozenset(flags), program_args, tuple(doubts))


def _is_module_name(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


# -X options CPython parses as the variable of the same meaning, and refuses to start with
# a value it refuses there.
_X_AS_VARIABLE: Final = {
    "int_max_str_digits": "PYTHONINTMAXSTRDIGITS",
    "tracemalloc": "PYTHONTRACEMALLOC",
}


def _x_option_doubts(value: str) -> list[str]:
    name, _, given = value.partition("=")
    variable = _X_AS_VARIABLE.get(name)
    if variable is not None and given and (problem := _start_up_refuses(variable, given)):
        return [f"-X {value}: {problem}, and CPython refuses to start with it"]
    if value in _X_BARE or _X_VALUED.fullmatch(value):
        return []
    if value.split("=", 1)[0] == "pycache_prefix":
        return [f"-X {value}: bytecode read from another tree"]
    if value == "frozen_modules=off":
        return [f"-X {value}: startup modules such as runpy imported from sys.path"]
    return [f"-X {value}: not a known -X option"]


def _warning_filter_doubts(value: str, source: str) -> list[str]:
    """Doubts for one warnings filter ``action:message:category:module:lineno``."""
    fields = value.split(":")
    if len(fields) > _WARNING_FIELDS:
        return [f"{source} {value}: not a warnings filter"]
    fields += [""] * (_WARNING_FIELDS - len(fields))
    # The warnings module strips every field, then reads action, category, lineno in turn.
    action, _message, category, _module, lineno = (field.strip() for field in fields)
    doubts = []
    if category and category not in _BUILTIN_WARNINGS:
        if "." in category:
            importer = category.rpartition(".")[0]
            doubts.append(f"{source} {value}: the category imports module {importer}")
        else:
            doubts.append(f"{source} {value}: not a builtin warning category")
    known_action = not action or action == "all"
    known_action = known_action or any(name.startswith(action) for name in _WARNING_ACTIONS)
    if not known_action or (lineno and not _DIGITS.fullmatch(lineno)):
        doubts.append(f"{source} {value}: not a warnings filter")
    return doubts


def build_variable_doubts(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Doubts for the variables CPython reads whatever the options (-E and -I included):
    sysconfig's ``_PYTHON*`` (``_PYTHON_SYSCONFIGDATA_NAME`` names a module it imports),
    and getpath's ``PYTHONEXECUTABLE`` and ``__PYVENV_LAUNCHER__`` (the program it takes
    itself for, whose ``pyvenv.cfg`` then makes a virtual environment of any folder)."""
    doubts = [
        f"{name}: read by sysconfig, -E or not (it may name a module to import)"
        for name in sorted(environ)
        if name.startswith("_PYTHON")
    ]
    doubts += [doubt for name, doubt in ENV_READ_WHATEVER_THE_OPTIONS.items() if name in environ]
    return tuple(doubts)


# Values CPython 3.11-3.13 all take (an empty value is unset); any other stops its start-up
# with a fatal error, after the gate would have recorded a permit for the child.
_MALLOCS: Final = frozenset(
    {"default", "malloc", "pymalloc", "debug", "malloc_debug", "pymalloc_debug"}
)
_HASH_SEED_MAX: Final = 4294967295
_INT_MAX_STR_DIGITS_MIN: Final = 640
_TRACEMALLOC_FRAMES_MAX: Final = 65535
# A whole number as C's strtoul reads one: blanks first, a plus sign (a minus is refused
# here, stricter than CPython, which reads some as numbers).
_C_NUMBER: Final = re.compile(r"[ \t\n\v\f\r]*\+?([0-9]+)", re.ASCII)


def _c_number(value: str) -> int | None:
    found = _C_NUMBER.fullmatch(value)
    return None if found is None else int(found.group(1))


def _start_up_refuses(name: str, value: str) -> str | None:
    """Why CPython refuses to start with the variable ``name`` set to ``value``, or None."""
    if not value:
        return None
    if name == "PYTHONUTF8":
        return None if value in ("0", "1") else "not 0 or 1"
    if name == "PYTHONMALLOC":
        return None if value in _MALLOCS else "not an allocator every CPython 3.11 to 3.13 has"
    if name == "PYTHONHASHSEED":
        seed = _c_number(value)
        if value == "random" or (seed is not None and seed <= _HASH_SEED_MAX):
            return None
        return f"neither 'random' nor a whole number from 0 to {_HASH_SEED_MAX}"
    if name == "PYTHONINTMAXSTRDIGITS":
        digits = _c_number(value)
        if digits is not None and (digits == 0 or _INT_MAX_STR_DIGITS_MIN <= digits <= 2**31 - 1):
            return None
        return f"neither 0 nor a whole number of at least {_INT_MAX_STR_DIGITS_MIN}"
    if name == "PYTHONTRACEMALLOC":
        frames = _c_number(value)
        if frames is not None and frames <= _TRACEMALLOC_FRAMES_MAX:
            return None
        return f"not a number of frames from 0 to {_TRACEMALLOC_FRAMES_MAX}"
    if name == "PYTHONIOENCODING":
        import codecs

        # (the error handler after a colon is looked up only when a stream first needs it)
        encoding = value.partition(":")[0]
        try:
            if encoding:
                codecs.lookup(encoding)
        except LookupError:
            return f"the encoding {encoding!r} is not one this Python knows"
    return None


def python_environment_doubts(
    environ: Mapping[str, str], command: PythonCommand
) -> tuple[str, ...]:
    """Doubts for the PYTHON* variables in ``environ`` that the child reads.

    None with -E or -I: CPython then reads no PYTHON* variable. PYTHONPATH and
    PYTHONUSERBASE are the caller's: it resolves the search path from them.
    """
    if command.flags & {"E", "I"}:
        return ()
    doubts: list[str] = []
    # CPython treats an empty PYTHONINSPECT as unset, any other value (even "0") as set:
    # the interpreter then reads standard input after the program.
    inspect = bool(environ.get("PYTHONINSPECT"))
    interactive = inspect or "i" in command.flags or command.runs in ("stdin", "repl")
    for name in sorted(environ):
        if not name.startswith("PYTHON"):
            continue
        value = environ[name]
        if (problem := _start_up_refuses(name, value)) is not None:
            doubts.append(f"{name}={value!r}: {problem}, and CPython refuses to start with it")
            continue
        if name in ENV_UNDERSTOOD or name in ENV_NOT_READ or name in _ENV_CALLER_RESOLVES:
            continue
        if name in ENV_READ_WHATEVER_THE_OPTIONS:  # (a doubt of build_variable_doubts)
            continue
        if name in _ENV_DOUBTS:
            doubts.append(_ENV_DOUBTS[name])
        elif name == "PYTHONWARNINGS":
            # Split on commas, empty entries skipped, each a filter as for -W.
            for entry in value.split(","):
                if entry:
                    doubts.extend(_warning_filter_doubts(entry, "PYTHONWARNINGS"))
        elif name == "PYTHONINSPECT":
            if inspect:
                doubts.append("PYTHONINSPECT: code read from standard input after the program")
        elif name == "PYTHONSTARTUP":
            # Run only when the interpreter is interactive; an empty value is unset.
            if value and interactive:
                doubts.append("PYTHONSTARTUP: a file run by the interactive interpreter")
        elif name == "PYTHONBREAKPOINT":
            # breakpoint() imports the module it names; "0" disables it, empty is pdb.
            if value not in ("", "0"):
                doubts.append(f"PYTHONBREAKPOINT={value}: breakpoint() imports it")
        elif name == "PYTHONPLATLIBDIR":
            if value != "lib":
                doubts.append(f"PYTHONPLATLIBDIR={value}: library directories moved")
        elif name == "PYTHON_FROZEN_MODULES":
            if value not in ("on", ""):  # (empty: unset, the default, on)
                doubts.append(
                    f"PYTHON_FROZEN_MODULES={value}: startup modules imported from sys.path"
                )
        else:
            doubts.append(f"{name}: not a known Python variable")
    if "PY_SAX_PARSER" in environ:
        doubts.append("PY_SAX_PARSER: xml.sax imports the parser modules it names")
    return tuple(doubts)


def shebang_arguments(line_rest: str, *, via_env_split: bool) -> list[str]:
    """The arguments a ``#!`` line passes after its interpreter.

    ``line_rest`` is the line after the interpreter's path (after the program name for
    ``#!/usr/bin/env -S``). Linux passes it as one argument, spaces and tabs stripped from
    both ends; ``env -S`` splits it as ``env_command.split_string`` does (at env's blanks,
    up to a word starting with ``#``). For ``env -S`` quotes, backslashes and ``$`` have
    meanings of their own, not modelled: ValueError, which the caller must treat as a
    refusal.
    """
    if not via_env_split:
        rest = line_rest.strip(_SHEBANG_BLANKS)
        return [rest] if rest else []
    from floorguard._identify.env_command import EnvRefused, split_string

    try:
        return list(split_string(line_rest))
    except EnvRefused as exc:
        raise ValueError(str(exc)) from None
