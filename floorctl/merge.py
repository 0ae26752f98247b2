"""Merging feeds into one floor map, and the data diff between two maps.

Pure functions over values: no files, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from floorguard.floormap import Advisory, FloorMap, from_entries, to_entries

FIELDS = ("min_safe_version", "advisory_id", "note")


@dataclass(frozen=True)
class Conflict:
    """Two feeds disagree about one adapter; ``chosen`` names the source whose entry won."""

    adapter: str
    sources: tuple[str, ...]
    versions: tuple[str, ...]
    chosen: str

    def describe(self) -> str:
        pairs = ", ".join(f"{s} says {v}" for s, v in zip(self.sources, self.versions, strict=True))
        return (
            f"{self.adapter}: feeds disagree ({pairs}); the highest floor, from {self.chosen}, wins"
        )


@dataclass(frozen=True)
class Merged:
    floor_map: FloorMap
    conflicts: tuple[Conflict, ...] = ()


def merge(feeds: Sequence[tuple[str, FloorMap]]) -> Merged:
    """Merge ``(source, map)`` pairs: per adapter the highest floor wins.

    On equal versions the first feed's entry is kept. Any disagreement (version, advisory
    or note) is reported as a Conflict, never silently dropped.
    """
    winners: dict[str, tuple[str, Advisory]] = {}
    seen: dict[str, list[tuple[str, Advisory]]] = {}
    for source, floor_map in feeds:
        for name, advisory in floor_map.items():
            seen.setdefault(name, []).append((source, advisory))
            current = winners.get(name)
            if current is None or Version(advisory.min_safe_version) > Version(
                current[1].min_safe_version
            ):
                winners[name] = (source, advisory)
    conflicts = []
    for name, claims in sorted(seen.items()):
        if len({tuple(claim.as_entry().items()) for _, claim in claims}) > 1:
            conflicts.append(
                Conflict(
                    adapter=name,
                    sources=tuple(source for source, _ in claims),
                    versions=tuple(claim.min_safe_version for _, claim in claims),
                    chosen=winners[name][0],
                )
            )
    return Merged(
        from_entries({name: advisory.as_entry() for name, (_, advisory) in winners.items()}),
        tuple(conflicts),
    )


@dataclass(frozen=True)
class MapDiff:
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[dict[str, str], ...] = ()
    lowered: tuple[str, ...] = field(default=())
    # Waivers added, removed and changed ({"adapter", "id"} each); None when neither map
    # has an extended entry, so receipts of floor-only maps keep today's exact diff.
    waivers: dict[str, list[dict[str, str]]] | None = None

    @property
    def empty(self) -> bool:
        moved = self.waivers is not None and any(self.waivers.values())
        return not (self.added or self.removed or self.changed or moved)

    @property
    def is_downgrade(self) -> bool:
        """Dropping an adapter or lowering a floor weakens protection."""
        return bool(self.removed or self.lowered)

    def to_json(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [dict(change) for change in self.changed],
        }
        if self.waivers is not None:
            described["waivers"] = {key: list(value) for key, value in self.waivers.items()}
        return described


def diff(old: FloorMap, new: FloorMap) -> MapDiff:
    """The data diff from ``old`` to ``new``, with the adapters whose floor went down."""
    old_entries, new_entries = to_entries(old), to_entries(new)
    changed: list[dict[str, str]] = []
    lowered: list[str] = []
    for name in sorted(set(old_entries) & set(new_entries)):
        for field_name in FIELDS:
            before, after = old_entries[name][field_name], new_entries[name][field_name]
            if before != after:
                changed.append({"adapter": name, "field": field_name, "old": before, "new": after})
        if Version(new_entries[name]["min_safe_version"]) < Version(
            old_entries[name]["min_safe_version"]
        ):
            lowered.append(name)
    extended = any(entry.extended for entry in (*old.values(), *new.values()))
    return MapDiff(
        added=tuple(sorted(set(new_entries) - set(old_entries))),
        removed=tuple(sorted(set(old_entries) - set(new_entries))),
        changed=tuple(changed),
        lowered=tuple(lowered),
        waivers=_waiver_diff(old, new) if extended else None,
    )


def _waiver_diff(old: FloorMap, new: FloorMap) -> dict[str, list[dict[str, str]]]:
    def held(floor_map: FloorMap) -> dict[tuple[str, str], Any]:
        return {(n, w.id): w for n, e in floor_map.items() for w in e.waivers}

    before, after = held(old), held(new)

    def named(keys: Any) -> list[dict[str, str]]:
        return [{"adapter": adapter, "id": waiver_id} for adapter, waiver_id in sorted(keys)]

    return {
        "added": named(after.keys() - before.keys()),
        "removed": named(before.keys() - after.keys()),
        "changed": named(k for k in before.keys() & after.keys() if before[k] != after[k]),
    }
