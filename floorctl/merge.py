"""Merging feeds into one floor map, and the data diff between two maps.

Pure functions over values: no files, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from floorctl import advisories, coverage
from floorctl.errors import MergeConflict
from floorguard._maps import versions
from floorguard._maps.catalog import ecosystem_of
from floorguard._maps.map_model import Advisory, FloorMap, RangeAdvisory, from_entries

FIELDS = ("min_safe_version", "advisory_id", "note")


@dataclass(frozen=True)
class Conflict:
    """Two feeds disagree about one adapter's floor; ``chosen`` names the source that won."""

    adapter: str
    sources: tuple[str, ...]
    versions: tuple[str, ...]
    chosen: str
    # Another feed's floor is the same version (1.0 and 1.0.0, another id or note): the
    # first feed's entry is kept, so the order of the feeds decides.
    tied: bool = False

    def describe(self) -> str:
        pairs = ", ".join(f"{s} says {v}" for s, v in zip(self.sources, self.versions, strict=True))
        if self.tied:
            return (
                f"{self.adapter}: feeds disagree ({pairs}); the highest floor is the same "
                f"version in more than one: the first of them, {self.chosen}, wins (the order "
                "of the feeds decides)"
            )
        return (
            f"{self.adapter}: feeds disagree ({pairs}); the highest floor, from {self.chosen}, wins"
        )


@dataclass(frozen=True)
class Merged:
    floor_map: FloorMap
    conflicts: tuple[Conflict, ...] = ()


def merge(feeds: Sequence[tuple[str, FloorMap]]) -> Merged:
    """Merge ``(source, map)`` pairs, per adapter.

    The highest floor wins, compared in the adapter's ecosystem order; on equal versions the
    first feed's floor is kept, and any disagreement about a floor (version, advisory or
    note) is reported as a Conflict, never silently dropped. Advisories are unioned: those
    sharing an id or alias are one. A schema 1/2 floor merged with a schema 3 entry takes
    its ecosystem. Raises MergeConflict when two feeds state different ecosystems for one
    adapter, or a floor is not a version of the ecosystem another feed states.
    """
    seen: dict[str, list[tuple[str, Advisory]]] = {}
    for source, floor_map in feeds:
        for name, claim in floor_map.items():
            seen.setdefault(name, []).append((source, claim))
    kept: dict[str, Advisory] = {}
    conflicts: list[Conflict] = []
    for name, claims in sorted(seen.items()):
        sole = _sole_floor(name, claims)
        if sole is not None:
            kept[name] = sole
            continue
        merged, conflict = _merge_adapter(name, claims)
        if conflict is not None:
            conflicts.append(conflict)
        # Built one by one, and a sole claim that merges to itself is kept as it is: a large
        # feed's map is then held once, not once as the feed's and again as the merge's.
        built = from_entries({name: merged})[name]
        kept[name] = claims[0][1] if len(claims) == 1 and built == claims[0][1] else built
    return Merged(MappingProxyType(dict(sorted(kept.items()))), tuple(conflicts))


def _sole_floor(name: str, claims: list[tuple[str, Advisory]]) -> Advisory | None:
    """The claim itself when it is the only one on ``name``, a floor alone that is a
    version in the adapter's order: ``_merge_adapter`` would rebuild exactly it (an
    entry of a feed's map is read once, not once more per merge). Else None."""
    if len(claims) != 1:
        return None
    claim = claims[0][1]
    if (
        claim.extended
        or claim.adapter != name
        or not isinstance(claim.min_safe_version, str)
        or not isinstance(claim.advisory_id, str)
        or not isinstance(claim.note, str)
    ):
        return None
    return claim if versions.is_valid(claim.min_safe_version, ecosystem_of(name)) else None


def _merge_adapter(
    name: str, claims: list[tuple[str, Advisory]]
) -> tuple[dict[str, Any], Conflict | None]:
    stated = [(source, claim.ecosystem) for source, claim in claims if claim.ecosystem is not None]
    ecosystems = sorted({ecosystem for _, ecosystem in stated if ecosystem is not None})
    if len(ecosystems) > 1:
        says = ", ".join(f"{source} says {ecosystem}" for source, ecosystem in stated)
        raise MergeConflict(f"{name}: feeds state different ecosystems ({says})")
    ecosystem = ecosystems[0] if ecosystems else None
    known = ecosystem_of(name)
    if ecosystem is not None and known is not None and ecosystem != known:
        # The runtime judges a catalogued CLI in its own ecosystem's order whatever a feed
        # says (map_model.Advisory.order): a feed's contrary claim could only mislead.
        says = ", ".join(f"{source} says {stated_eco}" for source, stated_eco in stated)
        raise MergeConflict(
            f"{name}: feeds state the {ecosystem} ecosystem ({says}), but {name} is an "
            f"{known} CLI in floorguard's catalog: its versions compare by "
            f"{versions.order_name(known)}"
        )
    package = _merged_package(name, claims)
    # Floors and ranges compare in the order the runtime will use (map_model.Advisory.order).
    order = ecosystem if ecosystem is not None else ecosystem_of(name)
    floors = [
        (source, claim, claim.min_safe_version)
        for source, claim in claims
        if claim.min_safe_version is not None
    ]
    winner: tuple[str, Advisory, str] | None = None
    for source, claim, floor in floors:
        if not versions.is_valid(floor, order):
            said = (
                f"{stated[0][0]} says the adapter is in the {ecosystem} ecosystem"
                if stated
                else f"{name} is an {order} CLI (its versions compare by "
                f"{versions.order_name(order)})"
            )
            raise MergeConflict(
                f"{name}: the floor {floor!r} from {source} is not a valid "
                f"{versions.order_name(order)} version, and {said}"
            )
        if winner is None or versions.compare(floor, winner[2], order) > 0:
            winner = (source, claim, floor)
    conflict = None
    if winner is not None and len({_floor_of(claim) for _, claim, _ in floors}) > 1:
        conflict = Conflict(
            adapter=name,
            sources=tuple(source for source, _, _ in floors),
            versions=tuple(floor for _, _, floor in floors),
            chosen=winner[0],
            tied=any(
                other is not winner[1] and versions.compare(floor, winner[2], order) == 0
                for _, other, floor in floors
            ),
        )
    found = [a.as_entry() for _, claim in claims for a in claim.advisories]
    waivers = {w.id: w.as_entry() for _, claim in reversed(claims) for w in claim.waivers}
    entry: dict[str, Any] = {}
    if winner is not None:
        entry = dict(zip(FIELDS, _floor_of(winner[1]), strict=True))
    if ecosystem is None and not found and not waivers:
        return entry, conflict  # floor only: exactly the form (and hash) of schema 1 and 2
    if ecosystem is not None:
        entry["ecosystem"] = ecosystem
    if package is not None:
        entry["package"], entry["kind"] = package
    entry["advisories"] = advisories.union(found, order)
    entry["waivers"] = [waivers[key] for key in sorted(waivers)]
    return entry, conflict


def _merged_package(name: str, claims: list[tuple[str, Advisory]]) -> tuple[str, str] | None:
    """The package and kind the feeds name for ``name``: every feed that names one names
    the same (one entry is one package), or the merge is refused."""
    stated = [
        (source, (claim.package, claim.kind))
        for source, claim in claims
        if claim.package is not None and claim.kind is not None
    ]
    named = sorted({pair for _, pair in stated})
    if len(named) > 1:
        says = ", ".join(f"{source} says {pair[0]} ({pair[1]})" for source, pair in stated)
        raise MergeConflict(f"{name}: feeds name different packages ({says})")
    return named[0] if named else None


def _floor_of(claim: Advisory) -> tuple[str | None, ...]:
    return claim.min_safe_version, claim.advisory_id, claim.note


Change = dict[str, Any]


@dataclass(frozen=True)
class MapDiff:
    """What changed between two maps, and what of it weakens protection.

    ``lowered`` are adapters whose floor went down (or was removed); ``downgrades`` the
    other weakenings in words (an advisory removed or narrowed, another ecosystem).
    ``extended``: either map has an extended entry, so the JSON form names advisories and
    waivers too; for floor-only maps it is exactly the form receipts always had.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[Change, ...] = ()
    lowered: tuple[str, ...] = ()
    extended: bool = False
    advisories_added: tuple[Change, ...] = ()
    advisories_removed: tuple[Change, ...] = ()
    advisories_changed: tuple[Change, ...] = ()
    waivers_added: tuple[Change, ...] = ()
    waivers_removed: tuple[Change, ...] = ()
    waivers_changed: tuple[Change, ...] = ()
    downgrades: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.advisories_added
            or self.advisories_removed
            or self.advisories_changed
            or self.waivers_added
            or self.waivers_removed
            or self.waivers_changed
        )

    @property
    def is_downgrade(self) -> bool:
        """Dropping an adapter, lowering a floor, or letting an affected version through."""
        return bool(self.removed or self.lowered or self.downgrades)

    def reasons(self) -> list[str]:
        """Every weakening, in words."""
        return (
            [f"removes {name}" for name in self.removed]
            + [f"lowers the floor of {name}" for name in self.lowered]
            + list(self.downgrades)
        )

    def summary(self, shown: int = 10) -> str:
        """The weakenings for a one-line message: the first ``shown``, then how many more
        (the receipt and --json carry them all; an error line must stay readable)."""
        reasons = self.reasons()
        more = len(reasons) - shown
        text = ", ".join(reasons[:shown])
        return text + (f", and {more:,} more" if more > 0 else "")

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [dict(change) for change in self.changed],
        }
        if self.extended:
            document["advisories"] = {
                "added": [dict(c) for c in self.advisories_added],
                "removed": [dict(c) for c in self.advisories_removed],
                "changed": [dict(c) for c in self.advisories_changed],
            }
            document["waivers"] = {
                "added": [dict(c) for c in self.waivers_added],
                "removed": [dict(c) for c in self.waivers_removed],
                "changed": [dict(c) for c in self.waivers_changed],
            }
        return document


def diff(old: FloorMap, new: FloorMap) -> MapDiff:
    """The data diff from ``old`` to ``new``, with what in it is a downgrade."""
    extended = any(e.extended for e in old.values()) or any(e.extended for e in new.values())
    if not extended:
        return _floor_diff(old, new)
    changed: list[Change] = []
    lowered: list[str] = []
    downgrades: list[str] = []
    named: dict[str, list[Change]] = {}
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        old_entry = before.as_entry() if before is not None else {}
        new_entry = after.as_entry() if after is not None else {}
        for kind in ("advisories", "waivers"):
            for how, change in _named_changes(name, old_entry, new_entry, kind):
                named.setdefault(f"{kind} {how}", []).append(change)
        if before is None or after is None:
            continue
        for field_name in (*FIELDS, "ecosystem", "package", "kind"):
            was, now = old_entry.get(field_name), new_entry.get(field_name)
            if was != now:
                changed.append({"adapter": name, "field": field_name, "old": was, "new": now})
        if _floor_lowered(before, after):
            lowered.append(name)
        downgrades.extend(_weakenings(name, before, after))
    return MapDiff(
        added=tuple(sorted(set(new) - set(old))),
        removed=tuple(sorted(set(old) - set(new))),
        changed=tuple(changed),
        lowered=tuple(lowered),
        extended=True,
        advisories_added=tuple(named.get("advisories added", ())),
        advisories_removed=tuple(named.get("advisories removed", ())),
        advisories_changed=tuple(named.get("advisories changed", ())),
        waivers_added=tuple(named.get("waivers added", ())),
        waivers_removed=tuple(named.get("waivers removed", ())),
        waivers_changed=tuple(named.get("waivers changed", ())),
        downgrades=tuple(downgrades),
    )


def _floor_diff(old: FloorMap, new: FloorMap) -> MapDiff:
    """Maps of floors only: exactly the diff (and receipt bytes) of schema 1 and 2."""
    # A floor-only entry's JSON form is exactly its three floor fields.
    changed: list[Change] = []
    lowered: list[str] = []
    for name in sorted(old.keys() & new.keys()):
        was, now = old[name], new[name]
        for field_name in FIELDS:
            before, after = getattr(was, field_name), getattr(now, field_name)
            if before != after:
                changed.append({"adapter": name, "field": field_name, "old": before, "new": after})
        if _floor_lowered(was, now):
            lowered.append(name)
    return MapDiff(
        # In the maps' own (sorted) order, which sorts in one pass, not the sets' order.
        added=tuple(sorted([name for name in new if name not in old])),
        removed=tuple(sorted([name for name in old if name not in new])),
        changed=tuple(changed),
        lowered=tuple(lowered),
    )


def _named_changes(
    adapter: str, old_entry: dict[str, Any], new_entry: dict[str, Any], kind: str
) -> list[tuple[str, Change]]:
    """Advisories or waivers ``added``, ``removed`` and ``changed``, each named by adapter
    and id (an id now held as an alias elsewhere is still named as removed)."""
    before = {item["id"]: item for item in old_entry.get(kind, [])}
    after = {item["id"]: item for item in new_entry.get(kind, [])}
    found: list[tuple[str, Change]] = []
    for ident in sorted(set(before) | set(after)):
        change = {"adapter": adapter, "id": ident}
        if ident not in before:
            found.append(("added", change))
        elif ident not in after:
            found.append(("removed", change))
        elif before[ident] != after[ident]:
            found.append(("changed", change))
    return found


def _floor_lowered(before: Advisory, after: Advisory) -> bool:
    """The floor went down or away, judged in the new entry's order (a floor that is no
    version there cannot be shown to be kept, so it counts as lowered)."""
    if before.min_safe_version is None:
        return False
    if after.min_safe_version is None:
        return True
    try:
        return versions.is_below(after.min_safe_version, before.min_safe_version, after.order)
    except versions.InvalidVersionError:
        return True


def _weakenings(name: str, before: Advisory, after: Advisory) -> list[str]:
    """Advisories removed or narrowed, and a change between two stated ecosystems."""
    found: list[str] = []
    if before.package is not None and (before.package, before.kind) != (after.package, after.kind):
        # The old package is no longer identified as this entry: its installs go untracked.
        now = f"{after.package} ({after.kind})" if after.package is not None else "none"
        found.append(
            f"changes the package of {name} from {before.package} ({before.kind}) to {now}"
        )
    ecosystem = after.order
    stated = (before.ecosystem, after.ecosystem)
    if versions.order_name(before.order) != versions.order_name(ecosystem) or (
        None not in stated and stated[0] != stated[1]
    ):
        # Versions compare in another order now: nothing shown before still holds.
        found.append(
            f"changes the ecosystem of {name} from "
            f"{before.ecosystem or before.order or 'none (PEP 440)'} to "
            f"{after.ecosystem or ecosystem or 'none (PEP 440)'}"
        )
    # Each new advisory under every name it has, so that finding an old advisory's
    # successors costs its names, not a scan of every new advisory (2,048 per adapter).
    by_name: dict[str, list[RangeAdvisory]] = {}
    for candidate in after.advisories:
        for known in candidate.names():
            by_name.setdefault(known, []).append(candidate)
    for advisory in before.advisories:
        successors = list({id(a): a for n in advisory.names() for a in by_name.get(n, ())}.values())
        if not successors:
            found.append(f"removes advisory {advisory.id} of {name}")
            continue
        if before.order == ecosystem and any(
            set(advisory.affected) <= set(a.affected) and set(advisory.versions) <= set(a.versions)
            for a in successors
        ):
            continue  # every range and version still stated as it was: nothing to compute
        try:
            gap = coverage.uncovered(
                coverage.of_advisory(advisory),
                [piece for a in successors for piece in coverage.of_advisory(a)],
                ecosystem,
            )
        except versions.InvalidVersionError:
            found.append(
                f"narrows advisory {advisory.id} of {name} (its versions are not "
                f"{versions.order_name(ecosystem)} versions)"
            )
            continue
        if gap is not None:
            found.append(
                f"narrows advisory {advisory.id} of {name} ({gap.describe()} no longer affected)"
            )
    return found
