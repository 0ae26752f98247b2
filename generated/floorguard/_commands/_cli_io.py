"""What both command lines (``floorctl`` and ``python -m floorguard``) need of their standard
streams before and after a command runs: the format asked for, read before the parser has run,
and a standard output that can no longer be written."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def requested_format(argv: Sequence[str]) -> str | None:
    """The format named on a command line, read before the parser has run (a usage error can
    stop the parse before any option is processed): the last ``--json``, ``--format F`` or
    ``--format=F`` wins, and nothing after ``--`` counts."""
    found = None
    args = list(argv)
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--json":
            found = "json"
        elif arg == "--format" and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith("--format="):
            found = arg.split("=", 1)[1]
    return found


def stdout_failed() -> bool:
    """Whether standard output can no longer be written (closed pipe, full disk). If so it
    is pointed at /dev/null, so that nothing more (the exit's flush) fails on it."""
    try:
        sys.stdout.flush()
        return False
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return True
