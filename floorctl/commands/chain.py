"""``floorctl chain``: the audit chain from the outside (export; later, checkpoints).

Reading only: exporting never creates the database or the key.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TextIO

import click

from floorguard._time import parse_ts
from floorguard.chain import AuditChain
from floorguard.errors import ChainError, FloorguardError


def parse_time_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """Click callback: RFC 3339 with ``Z`` or an offset, as CONTRACT.md says; else usage error."""
    if value is None:
        return None
    try:
        return parse_ts(value)
    except FloorguardError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


@click.group("chain")
def chain() -> None:
    """The audit chain floorguard writes: export slices of it."""


@chain.command("export")
@click.option(
    "--since",
    metavar="TS",
    callback=parse_time_option,
    help="Start of the window (inclusive), RFC 3339.",
)
@click.option(
    "--until",
    metavar="TS",
    callback=parse_time_option,
    help="End of the window (inclusive), RFC 3339.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the slice to FILE atomically instead of stdout.",
)
def export(since: datetime | None, until: datetime | None, out: Path | None) -> None:
    """Export a contiguous slice of the audit chain as JSON Lines.

    The slice reaches one record before --since and one after --until when there are
    such records (else from genesis, or up to the head), so that a verifier can see
    that the window is covered.
    """
    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since is later than --until", param_hint="--since")
    audit = AuditChain.from_env()
    if not audit.exists():
        raise ChainError(f"no audit chain at {audit.db_path}: nothing has been recorded yet")
    lines = audit.export_lines(since, until)
    if out is None:
        try:
            _write_lines(sys.stdout, lines)
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader stopped early (| head): the slice is incomplete, so exit 1, quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(1) from None
        return
    count = _write_atomically(out, lines)
    click.echo(f"wrote {count} record(s) to {out}", err=True)


def _write_lines(stream: TextIO, lines: Iterable[str]) -> int:
    write = stream.write
    count = 0
    for line in lines:
        write(line + "\n")
        count += 1
    return count


def _write_atomically(path: Path, lines: Iterable[str]) -> int:
    """Write to a temporary file beside ``path``, sync it, then rename it into place."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            count = _write_lines(stream, lines)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return count
