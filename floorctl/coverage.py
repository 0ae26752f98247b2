"""Which versions an advisory affects, as intervals of its ecosystem's order, and whether
one set of them covers another: a refresh that leaves some once-affected version
unaffected narrows the advisory, which is a downgrade.

Exact interval arithmetic: each OSV range is an interval (``introduced`` inclusive, ``0``
from the start; ``fixed`` exclusive, ``last_affected`` inclusive, no end: open), each
listed version a single point. The order is treated as dense: two intervals that meet
only at a point both exclude leave that point uncovered, and a gap is a gap even where no
release could fall into it (1.0.0 and 1.0.1-0 in SemVer). So coverage is never claimed
when some version could be missed; the price is an occasional needless refusal.

Pure. Raises versions.InvalidVersionError when a bound is not a version of the ecosystem.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from floorguard._maps import versions
from floorguard._maps.map_model import AffectedRange, RangeAdvisory


@dataclass(frozen=True)
class Interval:
    """Versions between ``low`` and ``high`` (None: no bound on that side)."""

    low: str | None
    low_closed: bool
    high: str | None
    high_closed: bool

    def describe(self) -> str:
        if self.low is not None and self.low == self.high:
            return self.low
        start = "from the start" if self.low is None else (">= " if self.low_closed else "> ")
        start += self.low or ""
        if self.high is None:
            return f"{start}, not fixed"
        return f"{start}, {'<=' if self.high_closed else '<'} {self.high}"


def of_range(span: AffectedRange) -> Interval:
    low = None if span.introduced == versions.FROM_THE_START else span.introduced
    if span.fixed is not None:
        return Interval(low, True, span.fixed, False)
    if span.last_affected is not None:
        return Interval(low, True, span.last_affected, True)
    return Interval(low, True, None, False)


def of_advisory(advisory: RangeAdvisory) -> list[Interval]:
    return [of_range(span) for span in advisory.affected] + [
        Interval(version, True, version, True) for version in advisory.versions
    ]


class _Order:
    """Comparisons of bounds in one ecosystem, None standing for minus or plus infinity."""

    def __init__(self, ecosystem: str | None) -> None:
        self.ecosystem = ecosystem

    def key(self, version: str) -> Any:
        return versions.order_key(version, self.ecosystem)

    def low_key(self, interval: Interval) -> tuple[Any, ...]:
        # A closed start sorts before an open one at the same version.
        if interval.low is None:
            return (0,)
        return (1, self.key(interval.low), 0 if interval.low_closed else 1)

    def empty(self, interval: Interval) -> bool:
        if interval.low is None or interval.high is None:
            return False
        order = versions.compare(interval.low, interval.high, self.ecosystem)
        return order > 0 or (order == 0 and not (interval.low_closed and interval.high_closed))

    def high_above(self, a: Interval, b: Interval) -> bool:
        """``a`` reaches strictly beyond ``b`` at the top."""
        if b.high is None:
            return False
        if a.high is None:
            return True
        order = versions.compare(a.high, b.high, self.ecosystem)
        return order > 0 or (order == 0 and a.high_closed and not b.high_closed)

    def joins(self, a: Interval, b: Interval) -> bool:
        """``b`` (starting no earlier than ``a``) overlaps or touches ``a``, leaving no gap."""
        if a.high is None or b.low is None:
            return True
        order = versions.compare(b.low, a.high, self.ecosystem)
        return order < 0 or (order == 0 and (a.high_closed or b.low_closed))

    def below(self, interval: Interval, start: str, start_closed: bool) -> Interval:
        """The part of ``interval`` below a part of the union starting at ``start``."""
        if interval.high is not None:
            order = versions.compare(interval.high, start, self.ecosystem)
            if order < 0:
                return interval
            if order == 0:
                closed = interval.high_closed and not start_closed
                return Interval(interval.low, interval.low_closed, start, closed)
        return Interval(interval.low, interval.low_closed, start, not start_closed)

    def starts_within(self, inner: Interval, outer: Interval) -> bool:
        """``inner`` starts no earlier than ``outer``."""
        if outer.low is None:
            return True
        if inner.low is None:
            return False
        order = versions.compare(inner.low, outer.low, self.ecosystem)
        return order > 0 or (order == 0 and (outer.low_closed or not inner.low_closed))


def normalise(intervals: Iterable[Interval], ecosystem: str | None) -> list[Interval]:
    """The union as disjoint intervals with gaps between them, in order."""
    order = _Order(ecosystem)
    pieces = sorted((i for i in intervals if not order.empty(i)), key=order.low_key)
    merged: list[Interval] = []
    for piece in pieces:
        if merged and order.joins(merged[-1], piece):
            last = merged[-1]
            if order.high_above(piece, last):
                merged[-1] = Interval(last.low, last.low_closed, piece.high, piece.high_closed)
        else:
            merged.append(piece)
    return merged


def uncovered(
    old: Sequence[Interval], new: Sequence[Interval], ecosystem: str | None
) -> Interval | None:
    """The first run of versions of ``old`` (in order) that no interval of ``new`` holds,
    exactly: only what is lost, for the refusal to name; None when every version in ``old``
    is in ``new``."""
    order = _Order(ecosystem)
    union = normalise(new, ecosystem)
    for piece in normalise(old, ecosystem):
        gap = _first_gap(piece, union, order)
        if gap is not None:
            return gap
    return None


def _first_gap(piece: Interval, union: Sequence[Interval], order: _Order) -> Interval | None:
    """The first part of ``piece`` outside ``union`` (disjoint, in order), or None. A cursor
    climbs ``piece`` from its start, past each part of the union that holds it."""
    low, low_closed = piece.low, piece.low_closed
    for part in union:
        cursor = Interval(low, low_closed, piece.high, piece.high_closed)
        if order.empty(cursor):
            return None
        if part.high is not None and low is not None:
            ends = versions.compare(part.high, low, order.ecosystem)
            if ends < 0 or (ends == 0 and not (part.high_closed and low_closed)):
                continue  # (this part ends below the cursor)
        if part.low is not None and not order.starts_within(cursor, part):
            # (the part starts above the cursor: what lies between is lost)
            return order.below(cursor, part.low, part.low_closed)
        if part.high is None:
            return None
        low, low_closed = part.high, not part.high_closed
    rest = Interval(low, low_closed, piece.high, piece.high_closed)
    return None if order.empty(rest) else rest


def contains(intervals: Sequence[Interval], version: str, ecosystem: str | None) -> bool:
    """Whether ``version`` lies in any of ``intervals`` (for tests and messages)."""
    for i in intervals:
        if i.low is not None:
            order = versions.compare(version, i.low, ecosystem)
            if order < 0 or (order == 0 and not i.low_closed):
                continue
        if i.high is not None:
            order = versions.compare(version, i.high, ecosystem)
            if order > 0 or (order == 0 and not i.high_closed):
                continue
        return True
    return False
