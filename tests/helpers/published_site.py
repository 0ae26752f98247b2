"""A publishing site of floor maps, and the map documents published to it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from feedserver import envelope, new_key
from hosts import Host, floor, map_module

from floorguard._base._canonical import canonical_bytes
from floorguard._base._time import format_ts, utc_now
from floorguard._maps import published_map
from floorguard._maps.map_model import from_entries

PRINT_HASH = "import floorguard; print(floorguard.FLOOR_MAP_HASH)"


BUILTIN = {"aider": floor("0.50.0")}


NEWER = {"aider": floor("0.60.0"), "goose": floor("1.0.0")}


def document(
    entries: dict[str, Any],
    version: int,
    *,
    expires: dt.datetime | None = None,
    stated_hash: str | None = None,
) -> bytes:
    doc = published_map.document(
        from_entries(entries), version, format_ts(expires or utc_now() + dt.timedelta(days=5))
    )
    if stated_hash is not None:
        doc["floor_map_hash"] = stated_hash
    return canonical_bytes(doc)


class Site:
    def __init__(self, root: Path) -> None:
        self.key, _, self.public = new_key(root / "publisher")
        self.map = root / "site" / "floor-map.json"
        self.map.parent.mkdir()
        self.host = Host(root / "host", {})
        self.host.set_map(map_module(BUILTIN, version=3))

    def write(self, data: bytes, *signers: Ed25519PrivateKey, signed: bytes | None = None) -> None:
        self.map.write_bytes(data)
        if signers:
            Path(str(self.map) + ".dsse").write_bytes(
                envelope(
                    signed if signed is not None else data,
                    *signers,
                    payload_type=published_map.PAYLOAD_TYPE,
                )
            )

    def run(self, code: str = PRINT_HASH, *, package_keys: bool = False) -> tuple[str, str]:
        extra = {"FLOORGUARD_FLOOR_MAP": str(self.map)}
        if not package_keys:
            extra["FLOORGUARD_TRUSTED_KEYS"] = str(self.public)
        done = self.host.python("-c", code, **extra)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip(), done.stderr
