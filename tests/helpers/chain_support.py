"""Small builders for the chain tests: receipts, populated chains, tampering with rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from floorguard._base._time import now_ts
from floorguard._chain.chain import AuditChain

CANARY = "adapter.canary_receipt"
SPAWN = "adapter.spawn_preflight_receipt"


def receipt(event: str = CANARY, **extra: Any) -> dict[str, Any]:
    """A minimal well-formed receipt of ``event``."""
    return {"kind": event, "schema_version": 1, "ts": now_ts(), **extra}


def ticking_clock(start_second: int = 0) -> Iterator[str]:
    """Timestamps one second apart from 2026-01-01T00:00:00Z, for predictable windows."""
    second = start_second
    while True:
        minutes, sec = divmod(second, 60)
        hours, minutes = divmod(minutes, 60)
        yield f"2026-01-01T{hours:02d}:{minutes:02d}:{sec:02d}.000000Z"
        second += 1


def filled_chain(folder: Path, count: int, *, clock: Iterator[str] | None = None) -> AuditChain:
    """A chain in ``folder`` with ``count`` canary records (n = 0..count-1)."""
    ticks = clock if clock is not None else ticking_clock()
    chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key", clock=lambda: next(ticks))
    for n in range(count):
        chain.append(CANARY, receipt(n=n, adapter="aider"))
    return chain


def execute(db: Path, sql: str, *params: Any) -> None:
    """Run one statement on the database as an attacker with file access would."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def export_lines(chain: AuditChain) -> list[str]:
    return [line + "\n" for line in chain.export_lines()]
