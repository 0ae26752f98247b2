"""Writing large valid slices fast, for the benchmarks: records sealed exactly as the chain
seals them (canonical bodies, digests, links, MACs), without a database in between."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from floorguard._base._canonical import ZERO_DIGEST
from floorguard._base._time import format_ts
from floorguard._chain.chain import body_text, canonical_json, line_text, record_mac

START = datetime(2026, 11, 30, tzinfo=UTC)
CHAIN_ID = "0123456789abcdef" * 2


def write_slice(
    path: Path, count: int, key: bytes, receipt_for: Callable[[int], dict[str, Any]]
) -> None:
    """``count`` records, seq n stamped START + n seconds, receipt ``receipt_for(n)``."""
    prev = ZERO_DIGEST
    with path.open("w", encoding="utf-8") as out:
        for seq in range(count):
            receipt = receipt_for(seq)
            receipt_json = canonical_json(receipt)
            fields = {
                "seq": seq,
                "ts": format_ts(START + timedelta(seconds=seq)),
                "chain_id": CHAIN_ID,
                "event": receipt["kind"],
                "receipt_id": "sha256:" + hashlib.sha256(receipt_json.encode()).hexdigest(),
                "receipt_json": receipt_json,
                "prev": prev,
            }
            body = body_text(**fields).encode()
            out.write(line_text(**fields, mac=record_mac(key, body)) + "\n")
            prev = "sha256:" + hashlib.sha256(body).hexdigest()
