"""The console script's entry point: ``floorctl -V`` and ``floorctl --help`` answered
without loading click.

Every other command line goes to :func:`floorctl.cli.main`. A version check is what scripts
and installers run most often, and importing click and the CLI's helpers would double its
time; the answer is the same line the CLI's own -V option prints. The top-level help is
click's own text, kept as click writes it at its widest (floorctl._top_help); on a terminal
narrower than that, click lays it out.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_VERSION_ONLY = (["-V"], ["--version"])
_HELP_ONLY = (["-h"], ["--help"])
# click lays help out at min(terminal columns, 80) - 2: the kept text is the one for 80 and up.
_KEPT_HELP_COLUMNS = 80


def main(argv: Sequence[str] | None = None) -> None:
    """Print the version line for a lone -V/--version; otherwise run the full CLI."""
    args = list(argv) if argv is not None else sys.argv[1:]
    if args in _VERSION_ONLY and sys.stdout is not None:  # (None: stdout closed)
        from floorctl import version_line  # noqa: PLC0415

        try:
            sys.stdout.write(version_line() + "\n")
            sys.stdout.flush()
        except OSError:
            pass  # the full CLI below tries again and reports the failure as it always has
        else:
            sys.exit(0)
    if args in _HELP_ONLY and sys.stdout is not None and _help_is_kept():
        from floorctl._top_help import TOP_HELP  # noqa: PLC0415

        try:
            sys.stdout.write(TOP_HELP)
            sys.stdout.flush()
        except OSError:
            pass  # as for -V: the full CLI tries again and reports the failure
        else:
            sys.exit(0)
    from floorctl.cli import main as cli_main  # noqa: PLC0415  (click only past this point)

    cli_main(args)


def _help_is_kept() -> bool:
    """Whether click would lay the help out at its widest here (what shutil tells it)."""
    import shutil  # noqa: PLC0415

    return shutil.get_terminal_size().columns >= _KEPT_HELP_COLUMNS
