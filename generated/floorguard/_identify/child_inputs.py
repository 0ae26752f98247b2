"""What the child is given, checked before anything about it is decided.

Two kinds of check live here, both pure:

- :func:`invalid_inputs`: an argument, environment entry or working directory that the
  kernel cannot pass (a NUL byte, ``=`` in a variable's name, a lone surrogate, a string
  or a command line over its size limits) makes the start fail *after*
  the decision. A permit sealed for a process that never started would be evidence of
  something that did not happen, so such inputs are refused before anything is sealed.
- :func:`loader_doubts`: variables read by the dynamic loader and the C library of *any*
  child, which load native code into it before its own first instruction (``LD_PRELOAD``,
  ``LD_AUDIT``, a ``GCONV_PATH`` of iconv modules) or decide which shared libraries it links
  (``LD_LIBRARY_PATH``), and what makes a shell or a language runtime it starts run other
  code (a function exported to bash, ``BASH_FUNC_claude%%``; ``BASH_ENV``; ``PS4``;
  ``PERL5LIB``). Whatever the program, such a child does not run only what was judged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Final

# Read by glibc's loader without loading anything: binding and diagnostics only.
_HARMLESS_LOADER_VARIABLES: Final = frozenset({"LD_BIND_NOW", "LD_BIND_NOT", "LD_WARN"})
# Outside the LD_ family, variables that make the C library or OpenSSL load modules.
_LOADING_VARIABLES: Final = {
    "GCONV_PATH": "makes iconv load conversion modules from its folders",
    "OPENSSL_CONF": "names an OpenSSL configuration, which can load engines and providers",
    "OPENSSL_ENGINES": "names a folder OpenSSL loads engines from",
    "OPENSSL_MODULES": "names a folder OpenSSL loads providers from",
    # A locale built anywhere decides how the C library (and Python's "locale" encoding)
    # reads bytes: a made-up codeset reads the judged path, .pth or argument otherwise.
    "LOCPATH": "makes the C library read locales from its folders",
    "LOCALE_ARCHIVE": "makes the C library read locales from another archive",
}


# bash's exported functions: ``BASH_FUNC_<name>%%`` (``BASH_FUNC_<name>()`` in Red Hat's
# bash), and, in a bash from before 2014, any variable whose value starts so.
_BASH_FUNCTION_PREFIX: Final = "BASH_FUNC_"
_OLD_BASH_FUNCTION: Final = "() {"
# Read by a shell the child starts (at its start or at a `set -x`), or by a language
# runtime an agent's commands commonly start: each runs or loads code the variable names,
# or turns on what does. (Not every runtime's: R's, PHP's, ... are not read.)
_SHELL_VARIABLES: Final = {
    "BASH_ENV": "names a file every non-interactive bash the child starts runs first",
    "ENV": "names a file an interactive sh (or ksh) the child starts runs first",
    "SHELLOPTS": "sets options of every bash the child starts (xtrace runs PS4's commands)",
    "BASHOPTS": "sets options of every bash the child starts",
    "PS4": "is expanded, its commands run, at every traced line of a bash the child starts",
    "PROMPT_COMMAND": "is run by an interactive bash the child starts",
    "BASH_LOADABLES_PATH": "names folders a bash the child starts loads builtins from",
    "CDPATH": "makes a shell the child starts cd into other folders than those named",
    "NULLCMD": "names the program a zsh the child starts runs for a bare redirection",
    "READNULLCMD": "names the program a zsh the child starts runs for a bare < redirection",
    "ZDOTDIR": "names the folder whose .zshenv every zsh the child starts runs first",
    "FPATH": "names folders a ksh or zsh the child starts loads functions from",
    "PERL5OPT": "gives every perl the child starts options (-M loads a module)",
    "PERL5LIB": "puts folders first on the module path of every perl the child starts",
    "PERLLIB": "puts folders first on the module path of every perl the child starts",
    "PERL5DB": "holds code every perl the child starts under -d runs first",
    "RUBYOPT": "gives every ruby the child starts options (-r loads a library)",
    "RUBYLIB": "puts folders first on the load path of every ruby the child starts",
    "RUBYPATH": "names folders ruby -S runs scripts from",
    "GEM_PATH": "names folders every ruby the child starts loads gems from",
    "GEM_HOME": "names the folder every ruby the child starts loads gems from",
    "TCL_LIBRARY": "names the folder whose init.tcl every tclsh the child starts runs",
    "TCLLIBPATH": "puts folders on the package path of every tclsh the child starts",
    "JAVA_TOOL_OPTIONS": "gives every JVM the child starts options (-agentpath loads code)",
    "_JAVA_OPTIONS": "gives every JVM the child starts options (-agentpath loads code)",
    "JDK_JAVA_OPTIONS": "gives every java launcher the child starts options",
    "CLASSPATH": "names where every JVM the child starts loads classes from",
}
# Lua's, versioned as LUA_INIT_5_4 too (LUA_INIT runs code at every start), and Tcl's
# module paths (TCL8_6_TM_PATH).
_RUNTIME_PREFIXES: Final = ("LUA_INIT", "LUA_PATH", "LUA_CPATH", "TCL8_", "TCL9_")
# Read by a Python or node the child starts. A Python child is judged with the PYTHON*
# ones and a node child with the NODE_* ones (python_command, node_command: followed, or
# refused); the commands of any child may start either, which then loads what they name.
_INTERPRETER_VARIABLES: Final = {
    "PYTHONPATH": "puts folders first on the module path of every python the child starts",
    "PYTHONHOME": "names the installation every python the child starts loads its library from",
    "PYTHONPLATLIBDIR": "changes the library folder every python the child starts reads",
    "PYTHONUSERBASE": "names the user site every python the child starts adds (its .pth "
    "files and usercustomize run)",
    "PYTHONSTARTUP": "names a file every interactive python the child starts runs first",
    "PYTHONBREAKPOINT": "names what breakpoint() imports and calls in every python the child "
    "starts",
    "PYTHONWARNINGS": "gives every python the child starts warning filters (a category "
    "names a module it imports)",
    "PYTHONPYCACHEPREFIX": "names the folder every python the child starts reads cached "
    "bytecode from",
    "PYTHONEXECUTABLE": "makes every python the child starts take another file for itself",
    "__PYVENV_LAUNCHER__": "makes every python the child starts take another file for itself",
    "PY_SAX_PARSER": "names the module every python the child starts imports as its XML parser",
    "PYTHONINSPECT": "makes every python the child starts run what its standard input holds "
    "after its program",
    "PYTHON_PRESITE": "names a module every python the child starts imports before site (a "
    "debug build's)",
    "NODE_PRESERVE_SYMLINKS": "changes which files every node the child starts loads modules from",
    "NODE_PRESERVE_SYMLINKS_MAIN": "changes which files every node the child starts loads "
    "modules from",
    "NODE_OPTIONS": "gives every node the child starts options (--require and --import load code)",
    "NODE_PATH": "puts folders on the module path of every node the child starts",
    "NODE_REPL_EXTERNAL_MODULE": "names a module every node REPL the child starts loads",
    # A Bun executable (bun, and every program built with `bun build --compile`, Claude
    # Code's native build among them) reads these as it starts, whatever its name.
    "BUN_OPTIONS": "gives every Bun executable the child starts, and a Bun-built child itself, "
    "options (--preload loads code)",
    "BUN_BE_BUN": "makes every Bun-built executable the child starts, and a Bun-built child "
    "itself, act as bun (its arguments run as code)",
}


# Bun's variables that load nothing: where its installer put it (set in Bun users' shells).
_BUN_HARMLESS: Final = frozenset({"BUN_INSTALL"})


# Linux copies each argument and each NAME=VALUE string into the new program's stack, each
# at most MAX_ARG_STRLEN (32 pages) with its NUL, and all of them with their pointers within
# a quarter of the stack limit (what sysconf(_SC_ARG_MAX) reports); past either the exec
# fails with E2BIG. What floorguard adds (the program's name and path, the receipt id's
# variable, a #! line's interpreter) is kept within the margin.
_MAX_ARG_STRLEN: Final = 32 * 4096
_EXEC_MARGIN: Final = 8192


def invalid_inputs(argv: Sequence[str], environ: Mapping[str, str], cwd: str | None) -> str | None:
    """Why the child cannot be started with these inputs, or None when it can: a NUL byte,
    ``=`` in a variable's name, text the operating system cannot be given (a lone
    surrogate), or a string or a whole command line over the kernel's limits."""
    total = 0
    for position, arg in enumerate(argv, start=1):
        if "\x00" in arg:
            return f"argument {position} contains a NUL byte"
        size = _encoded_size(arg)
        if size is None:
            return f"argument {position} holds text that cannot be passed to a process"
        if size + 1 > _MAX_ARG_STRLEN:
            return f"argument {position} is {size} bytes, over the kernel's limit for one"
        total += size + 1 + 8
    for name, value in environ.items():
        if not name or "=" in name or "\x00" in name:
            return f"environment variable name {name!r} cannot be passed to a process"
        if "\x00" in value:
            return f"environment variable {name} contains a NUL byte"
        size = _encoded_size(name)
        more = _encoded_size(value)
        if size is None or more is None:
            return f"environment variable {name!r} holds text that cannot be passed to a process"
        size += more + 1
        if size + 1 > _MAX_ARG_STRLEN:
            # (named by its first characters: the whole name may be that long)
            shown = name if len(name) <= 64 else f"{name[:64]}..."
            return f"environment variable {shown} is {size} bytes, over the kernel's limit for one"
        total += size + 1 + 8
    limit = _arg_max()
    if total + _EXEC_MARGIN > limit:
        return (
            f"the arguments and environment come to {total} bytes, over the {limit - _EXEC_MARGIN} "
            f"the kernel's limit ({limit}) leaves after the {_EXEC_MARGIN} bytes floorguard "
            "keeps for what it adds"
        )
    if cwd is not None and "\x00" in cwd:
        return "the working directory contains a NUL byte"
    if cwd is not None and _encoded_size(cwd) is None:
        return f"the working directory {cwd!r} cannot be passed to a process"
    return None


def _encoded_size(text: str) -> int | None:
    """The bytes ``text`` is passed to a process as (``os.fsencode``), or None when it
    cannot be (a surrogate that no byte stands for)."""
    if text.isascii():
        return len(text)
    try:
        return len(os.fsencode(text))
    except UnicodeError:
        return None


def _arg_max() -> int:
    try:
        found = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        found = -1
    # (an unlimited stack: the kernel still caps the arguments at 6 MiB)
    return min(found, 6 * 1024 * 1024) if found > 0 else 128 * 1024


def loader_doubts(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Every variable that makes the child load code not judged, named: the loader's, those
    of a shell or runtime it starts, and a PATH with an empty or relative entry (``env`` in
    a ``#!`` line, and CPython finding its own prefix from ``argv[0]``, search it from the
    child's working directory, where floorguard, which looks only in absolute entries,
    does not)."""
    doubts = [
        # Named by its place: a variable's text may be a secret (it is recorded).
        f"entry {number} of PATH is relative: the child searches it in its working directory"
        for number, entry in enumerate(environ.get("PATH", "").split(os.pathsep), 1)
        if "PATH" in environ and not os.path.isabs(entry)
    ]
    return (*doubts, *loading_variables(environ), *shell_start_up(environ))


def loading_variables(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The variables of ``environ`` that make the dynamic loader, the C library or OpenSSL
    of any process load native code, each named with what it does."""
    # (every spawn's: the names are searched as one text, and only those found sorted)
    names = environ.keys()
    found = set(_LOADING_VARIABLES.keys() & names)
    if "\0LD_" in "\0" + "\0".join(names):
        found.update(
            n for n in names if n.startswith("LD_") and n not in _HARMLESS_LOADER_VARIABLES
        )
    return tuple(
        f"environment variable {name} {_LOADING_VARIABLES[name]}"
        if name in _LOADING_VARIABLES
        else f"environment variable {name} makes the dynamic loader load code"
        for name in sorted(found)
    )


def shell_start_up(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The variables of ``environ`` that make a shell, or a language runtime (perl, ruby,
    Tcl, the JVM, Lua), the child starts run or load code the variable names before, or
    instead of, what it was given, each named with how: an agent runs its commands through
    a shell (npm's ``sh -c BIN``, ``system()``, ``popen()``, its own shell tool), and bash
    reads most of them even when started as ``sh``."""
    # (every spawn's: the names and the values are searched as one text each, and only
    # the variables found are looked at one by one)
    names = environ.keys()
    found = set(_SHELL_VARIABLES.keys() & names)
    joined = "\0" + "\0".join(names)
    if "\0" + _BASH_FUNCTION_PREFIX in joined:
        found.update(n for n in names if n.startswith(_BASH_FUNCTION_PREFIX))
    if any("\0" + prefix in joined for prefix in _RUNTIME_PREFIXES):
        found.update(n for n in names if n.startswith(_RUNTIME_PREFIXES))
    if "\0" + _OLD_BASH_FUNCTION in "\0" + "\0".join(environ.values()):
        found.update(n for n, v in environ.items() if v.startswith(_OLD_BASH_FUNCTION))
    return tuple(_shell_doubt(name, environ[name]) for name in sorted(found))


def interpreter_start_up(environ: Mapping[str, str], judged: str | None) -> tuple[str, ...]:
    """Each variable of ``environ`` that makes a Python or node the child's commands start
    load other code, named; but those of ``judged`` (``python``, ``node``: the child is
    that interpreter, and judged with its own variables)."""
    own = {"python": "PYTHON", "node": "NODE_"}.get(judged or "")
    named = [
        f"environment variable {name} {_INTERPRETER_VARIABLES[name]}"
        for name in sorted(_INTERPRETER_VARIABLES.keys() & environ.keys())
        if own is None or not name.startswith(own)
    ]
    # Two families read whole (one pass over the names, only those found sorted): Bun's,
    # which bun and every program built with it read as it starts (BUN_INSPECT_PRELOAD
    # loads a file, BUN_INSPECT_CONNECT_TO hands a debugger the process, BUN_JSC_* set the
    # engine's options...), all but where it installs itself; and CPython's build
    # configuration (_PYTHON_SYSCONFIGDATA_NAME names a module it imports), which a Python
    # child is judged with by CPython's own rules.
    prefixed = sorted(n for n in environ if n.startswith(("BUN_", "_PYTHON_")))
    for name in prefixed:
        if name.startswith("BUN_"):
            if name not in _INTERPRETER_VARIABLES and name not in _BUN_HARMLESS:
                named.append(
                    f"environment variable {name} is read by every Bun-built program the child "
                    "starts, and by a Bun-built child itself (Bun's own variables load code, "
                    "or hand the process to a debugger)"
                )
        elif judged != "python":
            named.append(
                f"environment variable {name} is read by every python the child starts (its "
                "build's configuration: _PYTHON_SYSCONFIGDATA_NAME names a module it imports)"
            )
    return tuple(named)


def _shell_doubt(name: str, value: str) -> str:
    if name.startswith(_BASH_FUNCTION_PREFIX) or value.startswith(_OLD_BASH_FUNCTION):
        return (
            f"environment variable {name} exports a shell function: a bash the child starts "
            "would run it instead of the command of its name"
        )
    if name in _SHELL_VARIABLES:
        return f"environment variable {name} {_SHELL_VARIABLES[name]}"
    if name.startswith("TCL"):
        return f"environment variable {name} puts folders on the module path of every tclsh"
    return f"environment variable {name} makes every lua the child starts load or run code"
