"""Exporting a slice of the audit chain as JSON Lines, to a file (atomically) or to standard
output: what ``floorctl chain export`` and ``python -m floorguard chain export`` both do."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from floorguard._base import atomic
from floorguard._chain.chain import AuditChain
from floorguard.errors import ChainError


@dataclass(frozen=True)
class Exported:
    """How many records were written, and the seq of the last (None: the slice is empty)."""

    count: int
    last_seq: int | None


def export_slice(
    audit: AuditChain, since: datetime | None, until: datetime | None, out: Path | None
) -> Exported:
    """Write the slice reaching from the record before ``since`` to the one after ``until``
    (from genesis, up to the head, without them) to ``out``, else to standard output.

    Raises ChainError (no chain here: nothing is created), OutputError (also for an ``out``
    that names a file the chain is kept in), and BrokenPipeError when the reader of
    standard output went away (the slice it has is incomplete).
    """
    if out is not None:
        atomic.refuse_kept_file(out)
    if not audit.exists():
        raise ChainError(f"no audit chain at {audit.location}: nothing has been recorded yet")
    count = 0
    last: str | None = None

    def lines() -> Iterator[str]:
        nonlocal count, last
        for line in audit.export_lines(since, until):
            count += 1
            last = line
            yield line + "\n"

    if out is None:
        write = sys.stdout.write
        for line in lines():
            write(line)
        sys.stdout.flush()
    else:
        atomic.write_chunks_atomic(out, (line.encode("utf-8") for line in lines()))
    return Exported(count, None if last is None else int(json.loads(last)["seq"]))
