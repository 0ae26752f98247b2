"""Builders for the window-proof tests: real receipts appended to a real AuditChain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floorguard._chain.chain import AuditChain, ChainRecord, canonical_json
from floorguard._chain.receipts import new_receipt
from floorguard._maps.map_model import entries_hash
from helpers.chain_support import ticking_clock

SPAWN = "adapter.spawn_preflight_receipt"
UPDATE = "adapter.floor_update_receipt"
CANARY = "adapter.canary_receipt"
ZERO = "sha256:" + "0" * 64


def entry(floor: str, advisory: str = "BSA-0001") -> dict[str, str]:
    return {"min_safe_version": floor, "advisory_id": advisory, "note": f"below {floor} is unsafe"}


MAP_V1 = {"aider": entry("0.60.0"), "claude": entry("1.0.20", "BSA-0002")}
MAP_V2 = {"aider": entry("0.61.0"), "claude": entry("1.0.20", "BSA-0002")}
HASH_V1, HASH_V2 = entries_hash(MAP_V1), entries_hash(MAP_V2)


def update_receipt(entries: dict[str, Any], old_hash: str = ZERO) -> dict[str, Any]:
    """A floor-update receipt as refresh writes it: it carries the whole new map."""
    return new_receipt(
        UPDATE,
        {
            "old_floor_map_hash": old_hash,
            "new_floor_map_hash": entries_hash(entries),
            "old_map_version": 0,
            "new_map_version": 1,
            "new_floor_map": entries,
            "diff": {"added": sorted(entries), "removed": [], "changed": []},
            "feeds": [],
            "downgrade_allowed": False,
            "changed": True,
            "template": "floorguard",
            "forced": False,
        },
    )


def spawn_receipt(
    adapter: str,
    version: str | None,
    verdict: str,
    map_hash: str | None = HASH_V1,
    floor: str | None = "0.60.0",
) -> dict[str, Any]:
    """A spawn preflight receipt with the fields the gate records."""
    return new_receipt(
        SPAWN,
        {
            "adapter": adapter,
            "binary": f"/usr/bin/{adapter}",
            "version": version,
            "detected_by": "--version",
            "floor": floor,
            "advisory_id": "BSA-0001",
            "verdict": verdict,
            "reason": "test",
            "policy": "warn" if verdict == "warn_override" else "block",
            "floor_map_hash": map_hash,
        },
    )


def canary_receipt(
    adapter: str, version: str, verdict: str, map_hash: str = HASH_V1, result: str = "pass"
) -> dict[str, Any]:
    return new_receipt(
        CANARY,
        {
            "adapter": adapter,
            "version": version,
            "result": result,
            "floor": "0.60.0",
            "advisory_id": "BSA-0001",
            "certified": verdict == "certify",
            "verdict": verdict,
            "reason": "test",
            "previous_last_green": None,
            "floor_map_hash": map_hash,
        },
    )


@dataclass
class Built:
    """A chain in a folder, its key, and its records (one ts a second from 00:00:00)."""

    chain: AuditChain
    key: bytes
    folder: Path

    def lines(self) -> list[str]:
        return [line + "\n" for line in self.chain.export_lines()]

    def records(self) -> list[ChainRecord]:
        return list(self.chain.records())


def build(folder: Path, receipts: list[tuple[str, dict[str, Any]]]) -> Built:
    """Append ``(event, receipt)`` pairs to a new chain in ``folder``; seq n at second n."""
    folder.mkdir(parents=True, exist_ok=True)
    ticks: Iterator[str] = ticking_clock()
    chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key", clock=lambda: next(ticks))
    for event, receipt in receipts:
        chain.append(event, receipt)
    key = bytes.fromhex((folder / "chain.key").read_text().strip())
    return Built(chain, key, folder)


def at(second: int) -> str:
    """The timestamp ``build`` gives seq ``second``."""
    return next(ticking_clock(second))


def relink(records: list[dict[str, Any]]) -> list[str]:
    """Re-seal edited records as a forger without the key would: receipt ids, digests and
    links recomputed (the MACs left as they were, since they cannot be recomputed)."""
    import hashlib

    from floorguard._chain.chain import body_text

    out, prev = [], None
    for record in records:
        receipt_json = canonical_json(record["receipt"])
        record["receipt_id"] = "sha256:" + hashlib.sha256(receipt_json.encode()).hexdigest()
        if prev is not None:
            record["prev"] = prev
        body = body_text(
            seq=record["seq"],
            ts=record["ts"],
            chain_id=record["chain_id"],
            event=record["event"],
            receipt_id=record["receipt_id"],
            receipt_json=receipt_json,
            prev=record["prev"],
        )
        prev = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
        out.append(canonical_json(record) + "\n")
    return out


def parsed(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def tree_root(built: Built, size: int) -> bytes:
    """The RFC 6962 root of the first ``size`` records, computed here from the export lines."""
    import hashlib

    def mth(leaves: list[bytes]) -> bytes:
        if len(leaves) == 1:
            return hashlib.sha256(b"\x00" + leaves[0]).digest()
        k = 1 << ((len(leaves) - 1).bit_length() - 1)
        return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()

    return mth([line.encode() for line in list(built.chain.export_lines())[:size]])
