"""The floor map as values: advisories per adapter, and the map's content hash.

The hash is CONTRACT.md's definition: ``sha256`` of the RFC 8785 canonical JSON of
``{adapter: {"min_safe_version", "advisory_id", "note"}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from floorguard._canonical import content_address
from floorguard.errors import FloorMapError

ENTRY_FIELDS = ("min_safe_version", "advisory_id", "note")


@dataclass(frozen=True)
class Advisory:
    """One adapter's floor: versions below ``min_safe_version`` are known-unsafe."""

    adapter: str
    min_safe_version: str
    advisory_id: str
    note: str

    def as_entry(self) -> dict[str, str]:
        return {
            "min_safe_version": self.min_safe_version,
            "advisory_id": self.advisory_id,
            "note": self.note,
        }


FloorMap = Mapping[str, Advisory]


def from_entries(entries: Mapping[str, Any]) -> FloorMap:
    """Build a read-only floor map from ``{adapter: {field: str}}``; raises FloorMapError."""
    if not isinstance(entries, Mapping):
        raise FloorMapError("floor map data is not a mapping")
    built: dict[str, Advisory] = {}
    for adapter, entry in entries.items():
        if not isinstance(adapter, str) or not isinstance(entry, Mapping):
            raise FloorMapError(f"floor map entry {adapter!r} is malformed")
        if set(entry) != set(ENTRY_FIELDS) or not all(
            isinstance(entry[f], str) for f in ENTRY_FIELDS
        ):
            raise FloorMapError(
                f"floor map entry {adapter!r} must have exactly the string fields "
                + ", ".join(ENTRY_FIELDS)
            )
        built[adapter] = Advisory(adapter, *(entry[f] for f in ENTRY_FIELDS))
    return MappingProxyType(dict(sorted(built.items())))


def to_entries(floor_map: FloorMap) -> dict[str, dict[str, str]]:
    """The plain JSON form of a floor map, adapters in sorted order."""
    return {name: floor_map[name].as_entry() for name in sorted(floor_map)}


def floor_map_hash(floor_map: FloorMap) -> str:
    """The floor map's content hash (``sha256:<hex>``)."""
    return content_address(to_entries(floor_map))


def entries_hash(entries: Mapping[str, Any]) -> str:
    """The content hash of plain ``{adapter: entry}`` data, checked for shape first."""
    return floor_map_hash(from_entries(entries))


PUBLISHED_FIELDS = frozenset(
    {"schema_version", "floor_map_hash", "map_version", "expires", "adapters"}
)


def map_file_hash(data: bytes, source: str) -> str:
    """The floor-map hash of a map JSON file: an archived map (the entries themselves) or a
    published one (entries under ``adapters``). Raises FloorMapError."""
    import json

    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FloorMapError(f"{source}: not a floor-map JSON file: {exc}") from exc
    # Published: exactly the published fields, an integer schema_version (an archived map
    # may well hold adapters named "adapters" or "schema_version": their values are entries).
    if (
        isinstance(document, dict)
        and set(document) == PUBLISHED_FIELDS
        and type(document["schema_version"]) is int
        and isinstance(document["adapters"], dict)
    ):
        document = document["adapters"]
    try:
        return entries_hash(document)
    except FloorMapError as exc:
        raise FloorMapError(f"{source}: {exc}") from exc
