"""Advisories of one adapter in their one canonical form, and the union of several.

The floor-map hash covers every advisory, so the order of everything in an entry is fixed
here, never taken from a feed: advisories by id, aliases sorted, listed versions
deduplicated and sorted in the ecosystem's order, ranges sorted by introduced, severity and
references deduplicated and sorted. Two feeds stating the same advisories in another order
give the same map and the same hash.

Pure: plain JSON-like data in, plain data out. Versions are expected to be valid in the
ecosystem (the feed checks make sure); raises versions.InvalidVersionError otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from floorguard._maps import versions

Advisory = dict[str, Any]


def _version_key(ecosystem: str | None) -> Any:
    parse = versions.sort_key(ecosystem)

    # Equal in the order but other strings (1.0 and 1.0.0, or build metadata): the string
    # breaks the tie, so the order is total and the result does not depend on input order.
    def key(version: str) -> tuple[Any, str]:
        return parse(version), version

    return key


def _range_key(ecosystem: str | None) -> Any:
    version_key = _version_key(ecosystem)

    def key(span: dict[str, str]) -> tuple[Any, ...]:
        introduced = span["introduced"]
        start = (0,) if introduced == versions.FROM_THE_START else (1, version_key(introduced))
        if "fixed" in span:
            end: tuple[Any, ...] = (0, version_key(span["fixed"]))
        elif "last_affected" in span:
            end = (1, version_key(span["last_affected"]))
        else:
            end = (2,)
        return start, end

    return key


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(repr(sorted(item.items())) if isinstance(item, dict) else item, item)
    return list(seen.values())


def canonical(advisory: dict[str, Any], ecosystem: str | None) -> Advisory:
    """One advisory in canonical form, every optional list present."""
    ident = advisory["id"]
    spans = [
        {k: span[k] for k in ("introduced", "fixed", "last_affected") if k in span}
        for span in advisory.get("affected", [])
    ]
    severity = [{"type": s["type"], "score": s["score"]} for s in advisory.get("severity", [])]
    return {
        "id": ident,
        "aliases": sorted({a for a in advisory.get("aliases", []) if a != ident}),
        "summary": advisory["summary"],
        "affected": sorted(_unique(spans), key=_range_key(ecosystem)),
        "versions": sorted(set(advisory.get("versions", [])), key=_version_key(ecosystem)),
        "severity": sorted(_unique(severity), key=lambda s: (s["type"], s["score"])),
        "references": sorted(set(advisory.get("references", []))),
    }


def union(advisories: Iterable[dict[str, Any]], ecosystem: str | None) -> list[Advisory]:
    """Advisories that share an id or an alias are one advisory: their names, ranges,
    versions, severity and references are unioned. Sorted by id, each canonical.

    The merged advisory keeps the id no other member lists as an alias (a GHSA that names
    its CVE keeps the GHSA id), the smallest such one if several, and that id's summary.
    """
    items = [canonical(a, ecosystem) for a in advisories]
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for index, item in enumerate(items):
        for name in (item["id"], *item["aliases"]):
            if name in owner:
                parent[find(index)] = find(owner[name])
            else:
                owner[name] = index
    groups: dict[int, list[Advisory]] = {}
    for index, item in enumerate(items):
        groups.setdefault(find(index), []).append(item)
    merged = [_merge_group(group, ecosystem) for group in groups.values()]
    return sorted(merged, key=lambda a: a["id"])


def _merge_group(group: Sequence[Advisory], ecosystem: str | None) -> Advisory:
    if len(group) == 1:
        return group[0]
    ids = {a["id"] for a in group}
    named_as_alias = {alias for a in group for alias in a["aliases"] if alias != a["id"]}
    chosen = min(ids - named_as_alias or ids)
    summary = min(a["summary"] for a in group if a["id"] == chosen)
    return canonical(
        {
            "id": chosen,
            "aliases": [name for a in group for name in (a["id"], *a["aliases"])],
            "summary": summary,
            "affected": [span for a in group for span in a["affected"]],
            "versions": [v for a in group for v in a["versions"]],
            "severity": [s for a in group for s in a["severity"]],
            "references": [r for a in group for r in a["references"]],
        },
        ecosystem,
    )


def names(advisory: dict[str, Any]) -> frozenset[str]:
    """Every name of an advisory: its id and aliases."""
    return frozenset((advisory["id"], *advisory.get("aliases", [])))
