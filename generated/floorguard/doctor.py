"""The doctor: the installed version posture of every tracked adapter, sealed as a receipt."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from floorguard import active_map, receipts
from floorguard.errors import DetectionError

OK, BELOW_FLOOR, UNKNOWN_VERSION, NOT_INSTALLED = (
    "ok",
    "below_floor",
    "unknown_version",
    "not_installed",
)


@dataclass(frozen=True)
class AdapterPosture:
    adapter: str
    binary: str | None
    version: str | None
    detected_by: str | None
    floor: str
    status: str
    reason: str


@dataclass(frozen=True)
class Posture:
    receipt_id: str
    floor_map_hash: str
    adapters: tuple[AdapterPosture, ...]

    @property
    def healthy(self) -> bool:
        """False if any installed tracked adapter is below its floor or of unknown version."""
        return all(a.status in (OK, NOT_INSTALLED) for a in self.adapters)

    def to_json(self) -> dict[str, Any]:
        return {
            "receipt_id": self.receipt_id,
            "floor_map_hash": self.floor_map_hash,
            "adapters": [asdict(a) for a in self.adapters],
        }


def examine(adapter: str, floor: str, path_env: str | None) -> AdapterPosture:
    """One adapter's posture on this PATH; detection failures become statuses, not errors."""
    from packaging.version import Version

    from floorguard import detect

    try:
        binary = detect.resolve_binary(adapter, None, path_env=path_env)
    except DetectionError as exc:
        return AdapterPosture(adapter, None, None, None, floor, NOT_INSTALLED, str(exc))
    try:
        found = detect.detect_version(adapter, binary=binary, path_env=path_env)
    except DetectionError as exc:
        return AdapterPosture(adapter, str(binary), None, None, floor, UNKNOWN_VERSION, str(exc))
    below = Version(found.version) < Version(floor)
    return AdapterPosture(
        adapter,
        found.binary or str(binary),
        found.version,
        found.detected_by,
        floor,
        BELOW_FLOOR if below else OK,
        f"below the floor {floor}" if below else f"meets the floor {floor}",
    )


def run(environ: Mapping[str, str] | None = None) -> Posture:
    """Examine every tracked adapter and append an ``adapter.version_posture`` receipt.

    Raises FloorMapError (map untrustworthy) and ChainError (posture not recorded).
    """
    from floorguard.chain import AuditChain

    env = os.environ if environ is None else environ
    in_force = active_map.current()
    postures = tuple(
        examine(name, advisory.min_safe_version, env.get("PATH"))
        for name, advisory in sorted(in_force.floor_map.items())
    )
    receipt = receipts.new_receipt(
        receipts.VERSION_POSTURE,
        {
            "floor_map_hash": in_force.floor_map_hash,
            "adapters": [asdict(p) for p in postures],
        },
    )
    record = AuditChain.shared(env).append(receipts.VERSION_POSTURE, receipt)
    return Posture(record.receipt_id, in_force.floor_map_hash, postures)


def format_table(posture: Posture) -> str:
    header = ("adapter", "binary", "version", "detected by", "floor", "status")
    rows = [header] + [
        (a.adapter, a.binary or "-", a.version or "-", a.detected_by or "-", a.floor, a.status)
        for a in posture.adapters
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.append(f"floor map {posture.floor_map_hash}")
    lines.append(f"posture receipt {posture.receipt_id}")
    return "\n".join(lines)
