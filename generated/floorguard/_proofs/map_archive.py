"""Floor maps found by their hash, for the window proof: from the floor-update receipts
earlier in the slice, or from content-addressed map archives (the package's own first)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from floorguard._base.files import read_regular
from floorguard._maps.map_model import FloorMap, entries_hash, from_entries
from floorguard.errors import FloorguardError, FloorMapError, UnreadableFileError

MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
PACKAGE_MAPS = Path(__file__).parent.parent / "maps"


class MapResolver:
    """Floor maps by their hash: learned from update receipts, or read from map archives.

    An archive directory holds ``sha256-<hex>.json`` files, each the canonical JSON of one
    map; a file whose bytes do not hash to its name is never used (and says so).
    """

    def __init__(self, archive_dirs: Sequence[Path] = ()) -> None:
        self.archive_dirs = tuple(Path(d) for d in archive_dirs)
        self._maps: dict[str, FloorMap] = {}
        self._missing: dict[str, str] = {}

    def learn(self, entries: Any, stated_hash: str) -> bool:
        """Keep the map an update receipt carries, if it hashes to the hash it states."""
        try:
            if entries_hash(entries) != stated_hash:
                return False
            self._maps[stated_hash] = from_entries(entries)
        except FloorguardError:
            return False
        self._missing.pop(stated_hash, None)
        return True

    def resolve(self, map_hash: object) -> FloorMap | str:
        """The map ``map_hash`` names, or the reason it cannot be resolved."""
        if not isinstance(map_hash, str):
            return "pins no floor-map hash"
        found = self._maps.get(map_hash)
        if found is not None:
            return found
        if map_hash in self._missing:
            return self._missing[map_hash]
        result = self._from_archives(map_hash)
        if isinstance(result, str):
            self._missing[map_hash] = result
        else:
            self._maps[map_hash] = result
        return result

    def _from_archives(self, map_hash: str) -> FloorMap | str:
        from floorguard._base._canonical import is_digest

        unknown = (
            f"pins floor map {map_hash}, which no update receipt in the slice "
            "and no map archive holds"
        )
        if not is_digest(map_hash):
            return f"pins {map_hash!r}, which is not a floor-map hash"
        name = map_hash.replace(":", "-") + ".json"
        problems = []
        for folder in self.archive_dirs:
            path = folder / name
            try:
                data = read_regular(path, max_bytes=MAX_ARCHIVE_BYTES, what="archived floor map")
            except UnreadableFileError as exc:
                if not exc.missing:
                    problems.append(str(exc))
                continue
            if "sha256:" + hashlib.sha256(data).hexdigest() != map_hash:
                problems.append(f"{path} does not hash to its name")
                continue
            try:
                floor_map = from_entries(json.loads(data))
            except (ValueError, RecursionError, FloorMapError) as exc:
                problems.append(f"{path} is not a floor map ({exc})")
                continue
            return floor_map
        if problems:
            return f"{unknown} ({'; '.join(problems)})"
        return unknown


def default_map_dirs(extra: Iterable[Path] = ()) -> list[Path]:
    """The package's own archive, then ``extra`` (those that exist)."""
    return [d for d in (PACKAGE_MAPS, *extra) if d.is_dir()]
