"""Progress lines for long work, on a terminal only.

Each helper returns a callback for the library, or None when stderr is not a terminal (a
pipe, a file, CI logs): the library then skips the calls altogether, and whatever reads
stderr sees exactly what it saw before. The library calls back a few times per run (per
stage, or every N records), so showing progress costs nothing measurable.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from floorctl.commands._output import notice


def on_terminal() -> bool:
    return sys.stderr.isatty()


def counter(what: str, unit: str) -> Callable[[int], None] | None:
    """``floorctl: WHAT: N UNIT`` each time the library reports a count."""
    if not on_terminal():
        return None

    def show(count: int) -> None:
        notice(f"floorctl: {what}: {count:,} {unit}")

    return show


def stages(what: str) -> Callable[[str], None] | None:
    """``floorctl: WHAT: STAGE`` as the library enters each stage of a long run."""
    if not on_terminal():
        return None

    def show(stage: str) -> None:
        notice(f"floorctl: {what}: {stage}")

    return show


def download() -> Callable[[int, int | None], None] | None:
    """``floorctl: downloading N of M bytes``, one line rewritten in place (for bodies of
    1 MiB and up: the fetcher decides when to call)."""
    if not on_terminal():
        return None

    def show(received: int, total: int | None) -> None:
        of = f" of {total:,}" if total else ""
        click.echo(
            f"\rfloorctl: downloading {received:,}{of} bytes", err=True, nl=received == total
        )

    return show
