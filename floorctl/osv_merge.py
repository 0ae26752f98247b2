"""Merging the records that alias one another into one advisory per adapter."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from floorctl import feeds
from floorctl.osv_checks import Interval, _order, _record_error, _span_problems, _too_many
from floorguard._maps import versions

if TYPE_CHECKING:
    from floorctl.osv import Counts


@dataclass
class _Kept:
    """What one record contributes, reduced to what the feed needs."""

    id: str
    aliases: frozenset[str]
    modified: Any  # datetime
    summary: str
    severity: frozenset[tuple[str, str]]
    references: frozenset[str]
    # adapter -> (ranges, versions)
    affected: dict[str, tuple[set[Interval], set[str]]] = field(default_factory=dict)
    # Where the record was read, for an error found only once records are merged.
    source: str = ""
    prefix: tuple[str | int, ...] = ()


# --- merging ----------------------------------------------------------------------------------


def _union(a: _Kept, b: _Kept) -> _Kept:
    affected = {k: (set(v[0]), set(v[1])) for k, v in a.affected.items()}
    for adapter, (ranges, listed) in b.affected.items():
        known = affected.setdefault(adapter, (set(), set()))
        known[0].update(ranges)
        known[1].update(listed)
    return dataclasses.replace(
        a,
        aliases=a.aliases | b.aliases,
        severity=a.severity | b.severity,
        references=a.references | b.references,
        affected=affected,
    )


def _alias_groups(kept: Sequence[_Kept]) -> list[list[_Kept]]:
    """Records that name one another (id or alias, transitively): union-find over names."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        root = name
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[name] != root:  # path compression
            parent[name], name = root, parent[name]
        return root

    for record in kept:
        for alias in record.aliases:
            a, b = find(record.id), find(alias)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, list[_Kept]] = {}
    for record in kept:
        groups.setdefault(find(record.id), []).append(record)
    return [sorted(group, key=lambda r: r.id) for group in groups.values()]


def _chosen_id(names: set[str]) -> str:
    ghsa = sorted(n for n in names if n.startswith("GHSA-"))
    return ghsa[0] if ghsa else min(names)


def _merge(
    group: list[_Kept], ecosystem_of: Mapping[str, str], counts: Counts
) -> dict[str, dict[str, Any]]:
    """One advisory per adapter from records that are aliases of one another.

    Raises RecordError (naming the group's first record) when the union passes a cap the
    feed sets on what decides verdicts (aliases, ranges, listed versions); severity and
    references past their caps are only decorative: the first in sorted order are kept.
    """
    names = {name for record in group for name in (record.id, *record.aliases)}
    chosen = _chosen_id(names)
    # The summary of the record that carries the chosen id, else of the first by id.
    first = next((r for r in group if r.id == chosen), group[0])
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if len(names) - 1 > feeds.MAX_ALIASES:
        problems.append(
            (("aliases",), _too_many(len(names) - 1, "aliases (merged)", feeds.MAX_ALIASES))
        )
    severity = sorted(set().union(*(r.severity for r in group)))
    references = sorted(set().union(*(r.references for r in group)))
    counts.dropped_severity += max(0, len(severity) - feeds.MAX_SEVERITY)
    counts.dropped_references += max(0, len(references) - feeds.MAX_REFERENCES)
    severity = severity[: feeds.MAX_SEVERITY]
    references = references[: feeds.MAX_REFERENCES]
    out: dict[str, dict[str, Any]] = {}
    adapters = sorted({adapter for record in group for adapter in record.affected})
    for adapter in adapters:
        ecosystem = ecosystem_of[adapter]
        ranges: set[Interval] = set()
        listed: set[str] = set()
        for record in group:
            found = record.affected.get(adapter)
            if found is not None:
                ranges |= found[0]
                listed |= found[1]
        problems.extend(_span_problems(("affected",), (ranges, listed)))
        if problems:
            continue
        ordered = sorted(listed, key=lambda v: (versions.parse(v, ecosystem), v))
        out[adapter] = {
            "id": chosen,
            "aliases": sorted(names - {chosen}),
            "summary": first.summary,
            "affected": [r.as_json() for r in sorted(ranges, key=_range_key(ecosystem))],
            "versions": ordered,
            "severity": [{"type": t, "score": s} for t, s in severity],
            "references": references,
        }
    if problems:
        with_ids = ", ".join(r.id for r in group[:5]) + (", ..." if len(group) > 5 else "")
        shown = [
            (path, f"{message}, merged from the records {with_ids}") for path, message in problems
        ]
        raise _record_error(first.source, first.prefix, shown)
    return out


def _range_key(ecosystem: str) -> Callable[[Interval], tuple[Any, ...]]:
    def key(interval: Interval) -> tuple[Any, ...]:
        if interval.fixed is not None:
            end: tuple[Any, ...] = (0, versions.parse(interval.fixed, ecosystem), 0)
        elif interval.last_affected is not None:
            end = (0, versions.parse(interval.last_affected, ecosystem), 1)
        else:
            end = (1,)
        return (_order(interval.introduced, ecosystem, True), end, interval.as_json())

    return key
