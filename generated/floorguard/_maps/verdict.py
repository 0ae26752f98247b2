"""Whether a version of an adapter is known-unsafe under its map entry, and whether a waiver
lets it run anyway. Pure: the gate, the doctor, the canary and the window proof all ask here,
so that one rule decides everywhere.

The rule: a version is unsafe when it is below the entry's floor or inside any affected
range (or among the listed versions) of any of its advisories, compared in the entry's
ecosystem order. A waiver lets an unsafe version run only when it is for that exact version
string (``2.0.10+local`` is another one: a waiver is as narrow as it can be), unexpired at
the moment judged, and names every cause: the advisory's id or one of its aliases, or
``floor`` for the floor.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Final

from floorguard._base._time import parse_ts
from floorguard._maps import versions
from floorguard._maps.map_model import FLOOR_ID, Advisory, AffectedRange, RangeAdvisory, Waiver
from floorguard.errors import FloorguardError

# A waiver must still hold this long after a decision: the decision may then wait for the
# chain (up to chain.BUSY_TIMEOUT_SECONDS for the lock and as long again for busy retries),
# and a spawn starts only once its record is written. Whoever judges a waiver for a spawn
# (the gate, the doctor's posture) judges it this far ahead, so a waiver's last two minutes
# are never used; the window proof judges it at the record's time, which is within them.
WAIVER_MARGIN: Final = _dt.timedelta(seconds=120)


@dataclass(frozen=True)
class Cause:
    """One reason a version is unsafe: the floor, or one advisory's affected versions."""

    advisory_id: str
    aliases: tuple[str, ...]
    is_floor: bool
    detail: str

    def covered_by(self, waiver: Waiver) -> bool:
        """The waiver names this cause: "floor" names the floor and nothing else; an
        advisory is named only by its id or an alias, never by "floor" (even if a feed
        called it so), so a waiver reviewed for the floor never widens to an advisory."""
        if self.is_floor:
            return FLOOR_ID in waiver.advisories
        names = {self.advisory_id, *self.aliases} - {FLOOR_ID}
        return not names.isdisjoint(waiver.advisories)

    def describe(self) -> str:
        aliases = f" (also {', '.join(self.aliases)})" if self.aliases else ""
        return f"{self.advisory_id}{aliases}: {self.detail}"


@dataclass(frozen=True)
class Assessment:
    """What the map entry says of one version. ``causes`` empty: not known-unsafe.
    ``waiver``: the unexpired waiver that covers every cause, if one does."""

    causes: tuple[Cause, ...]
    waiver: Waiver | None = None

    @property
    def unsafe(self) -> bool:
        return bool(self.causes)

    @property
    def advisory_id(self) -> str | None:
        """The advisory a refusal names: the first cause (the floor comes first)."""
        return self.causes[0].advisory_id if self.causes else None

    def describe(self) -> str:
        return "; ".join(cause.describe() for cause in self.causes)


def assess(entry: Advisory, version: str, *, at: _dt.datetime | None) -> Assessment:
    """Judge ``version`` against ``entry``. Raises versions.InvalidVersionError when the
    version (or a bound in the entry) is not a version of the entry's ecosystem: an unknown
    version is never assumed safe. ``at`` is the moment waivers must be unexpired at; None
    looks for no waiver."""
    ecosystem = entry.order
    versions.parse(version, ecosystem)
    causes: list[Cause] = []
    if entry.min_safe_version is not None and versions.is_below(
        version, entry.min_safe_version, ecosystem
    ):
        causes.append(
            Cause(
                advisory_id=entry.advisory_id or FLOOR_ID,
                aliases=(),
                is_floor=True,
                detail=f"below the floor {entry.min_safe_version}",
            )
        )
    for advisory in entry.advisories:
        matched = _affecting(advisory, version, ecosystem)
        if matched is not None:
            causes.append(Cause(advisory.id, advisory.aliases, False, matched))
    if not causes or at is None:
        return Assessment(tuple(causes))
    return Assessment(tuple(causes), _covering_waiver(entry, version, causes, at))


def _affecting(advisory: RangeAdvisory, version: str, ecosystem: str | None) -> str | None:
    """How ``advisory`` affects ``version`` (a phrase for the reason), or None."""
    for listed in advisory.versions:
        if versions.compare(version, listed, ecosystem) == 0:
            return f"version {listed} is listed as affected"
    for span in advisory.affected:
        if in_range(version, span, ecosystem):
            return f"inside the affected range {span.describe()}"
    return None


def in_range(version: str, span: AffectedRange, ecosystem: str | None) -> bool:
    """OSV semantics: introduced inclusive (``0``: from the start), fixed exclusive,
    last_affected inclusive, and no end when neither is given."""
    if span.introduced != versions.FROM_THE_START and versions.is_below(
        version, span.introduced, ecosystem
    ):
        return False
    if span.fixed is not None:
        return versions.compare(version, span.fixed, ecosystem) < 0
    if span.last_affected is not None:
        return versions.compare(version, span.last_affected, ecosystem) <= 0
    return True


@dataclass(frozen=True)
class RefusalBoundary:
    """Where an entry's refusal of every older version ends: all versions below ``version``
    are unsafe (up to and including it when ``inclusive``); ``version`` None: every one is."""

    version: str | None
    inclusive: bool = False

    def describe(self) -> str:
        if self.version is None:
            return "none safe"
        return f"> {self.version}" if self.inclusive else self.version


def refusal_boundary(entry: Advisory) -> RefusalBoundary | None:
    """The boundary ``assess`` refuses below: the floor, raised by every affected range or
    listed version that starts at or below it (``in_range``'s bounds; a range from ``0``
    starts below everything), until none reaches further. None when no version from the
    start is unsafe. Waivers leave it alone (each is for one version). Raises
    versions.InvalidVersionError when a bound is not a version of the entry's ecosystem."""
    ecosystem = entry.order
    # (start or None for the start, end or None for no end, end inclusive)
    pieces: list[tuple[str | None, str | None, bool]] = []
    for advisory in entry.advisories:
        for span in advisory.affected:
            start = None if span.introduced == versions.FROM_THE_START else span.introduced
            if span.fixed is not None:
                pieces.append((start, span.fixed, False))
            else:
                pieces.append((start, span.last_affected, span.last_affected is not None))
        pieces += [(listed, listed, True) for listed in advisory.versions]
    # How far the refused versions reach from the start so far: (end, end inclusive).
    reach = None if entry.min_safe_version is None else (entry.min_safe_version, False)
    grown = True
    while grown:
        grown = False
        for start, end, inclusive in pieces:
            if start is not None and (
                reach is None or versions.compare(start, reach[0], ecosystem) > 0
            ):
                continue  # a gap before it: versions there are not refused
            if end is None:
                return RefusalBoundary(None)
            if reach is not None:
                order = versions.compare(end, reach[0], ecosystem)
                if order < 0 or (order == 0 and (reach[1] or not inclusive)):
                    continue  # reaches no further
            reach, grown = (end, inclusive), True
    return None if reach is None else RefusalBoundary(*reach)


def _covering_waiver(
    entry: Advisory, version: str, causes: list[Cause], at: _dt.datetime
) -> Waiver | None:
    for waiver in entry.waivers:
        if not waiver_in_force(waiver, at):
            continue
        if waiver.version == version and all(cause.covered_by(waiver) for cause in causes):
            return waiver
    return None


def waiver_in_force(waiver: Waiver, at: _dt.datetime) -> bool:
    """Unexpired at ``at``: the expiry is the first moment the waiver no longer holds. An
    expiry that does not parse holds at no moment."""
    try:
        return at < parse_ts(waiver.expires)
    except FloorguardError:
        return False


def why_not_waived(
    entry: Advisory, version: str, causes: tuple[Cause, ...], at: _dt.datetime
) -> str | None:
    """When waivers of this entry exist for ``version`` but none applies at ``at`` (plus
    WAIVER_MARGIN, as a spawn is judged), say why for the refusal's reason: expired, in its
    last WAIVER_MARGIN, or a cause it does not name; failing those, a waiver that would
    cover these causes but is for another version. None when one applies or none is near."""
    for waiver in entry.waivers:
        if waiver.version != version:
            continue
        if not waiver_in_force(waiver, at):
            return f"waiver {waiver.id} expired at {waiver.expires}"
        if not waiver_in_force(waiver, at + WAIVER_MARGIN):
            return (
                f"waiver {waiver.id} expires at {waiver.expires}, within the "
                f"{WAIVER_MARGIN.seconds // 60} minutes a decision must leave before expiry"
            )
        missing = [c.advisory_id for c in causes if not c.covered_by(waiver)]
        if missing:
            return f"waiver {waiver.id} does not cover {', '.join(missing)}"
        return None  # this waiver applies: nothing to explain
    for waiver in entry.waivers:
        if any(cause.covered_by(waiver) for cause in causes):
            return f"waiver {waiver.id} is for version {waiver.version}, not {version}"
    return None


def unsafe_phrase(cause: Cause) -> str:
    """One cause as a refusal names it; a floor alone reads as it always did."""
    if cause.is_floor:
        return f"{cause.detail.replace('below', 'is below', 1)} ({cause.advisory_id})"
    return f"is affected by {cause.describe()}"
