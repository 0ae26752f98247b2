"""The console script's entry point: ``floorctl -V`` answered without loading click.

Every other command line goes to :func:`floorctl.cli.main`. A version check is what scripts
and installers run most often, and importing click and the CLI's helpers would double its
time; the answer is the same line the CLI's own -V option prints.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_VERSION_ONLY = (["-V"], ["--version"])


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
    from floorctl.cli import main as cli_main  # noqa: PLC0415  (click only past this point)

    cli_main(args)
