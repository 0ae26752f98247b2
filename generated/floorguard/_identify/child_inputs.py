"""What the child is given, checked before anything about it is decided.

Two kinds of check live here, both pure:

- :func:`invalid_inputs`: an argument, environment entry or working directory that the
  kernel cannot pass (a NUL byte, ``=`` in a variable's name) makes the start fail *after*
  the decision. A permit sealed for a process that never started would be evidence of
  something that did not happen, so such inputs are refused before anything is sealed.
- :func:`loader_doubts`: variables read by the dynamic loader and the C library of *any*
  child, which load native code into it before its own first instruction (``LD_PRELOAD``,
  ``LD_AUDIT``, a ``GCONV_PATH`` of iconv modules) or decide which shared libraries it links
  (``LD_LIBRARY_PATH``). Whatever the program, such a child does not run only what was judged.
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
}


def invalid_inputs(argv: Sequence[str], environ: Mapping[str, str], cwd: str | None) -> str | None:
    """Why the child cannot be started with these inputs, or None when it can."""
    for position, arg in enumerate(argv, start=1):
        if "\x00" in arg:
            return f"argument {position} contains a NUL byte"
    for name, value in environ.items():
        if not name or "=" in name or "\x00" in name:
            return f"environment variable name {name!r} cannot be passed to a process"
        if "\x00" in value:
            return f"environment variable {name} contains a NUL byte"
    if cwd is not None and "\x00" in cwd:
        return "the working directory contains a NUL byte"
    return None


def loader_doubts(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Every variable that makes the child load code not judged, named: the loader's, and a
    PATH with an empty or relative entry (``env`` in a ``#!`` line, and CPython finding its
    own prefix from ``argv[0]``, search it from the child's working directory, where
    floorguard, which looks only in absolute entries, does not)."""
    doubts = [
        f"PATH entry {entry!r} is relative: the child searches it in its working directory"
        for entry in environ.get("PATH", "").split(os.pathsep)
        if "PATH" in environ and not os.path.isabs(entry)
    ]
    for name in sorted(environ):
        if name.startswith("LD_") and name not in _HARMLESS_LOADER_VARIABLES:
            doubts.append(f"environment variable {name} makes the dynamic loader load code")
        elif name in _LOADING_VARIABLES:
            doubts.append(f"environment variable {name} {_LOADING_VARIABLES[name]}")
    return tuple(doubts)
