"""The floor map as values: each adapter's floor, advisories and waivers, and the map's hash.

An entry comes in one of two forms.

- **Floor only** (every map written from schema 1 and 2 feeds): exactly the strings
  ``min_safe_version``, ``advisory_id`` and ``note``. Versions compare by PEP 440.
- **Extended** (schema 3 feeds, waivers): the entry lists ``advisories`` with OSV affected
  ranges and ``waivers``, may keep the floor (the three fields, all or none), and states
  its ``ecosystem`` (``npm`` or ``PyPI``, whose version order applies); without one (a
  waiver on a schema 1 floor) versions keep comparing by PEP 440. It may name its
  ``package`` (the registry name, checked strictly per ecosystem) and ``kind`` (``agent``,
  ``mcp-server``, ``library``): a package the runtime's catalogue does not know is then
  identified from its installed metadata like a catalogued CLI.

The hash is ``sha256`` of the RFC 8785 canonical JSON of ``{adapter: entry}`` with each
entry exactly as above, so a map of floor-only entries keeps the hash that
docs/floor-map.md defines, and every advisory, range and waiver of an extended entry is
covered by it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeGuard

from floorguard._base._canonical import content_address
from floorguard._base._time import UTC_Z_FORM, is_utc_z
from floorguard.errors import FloorMapError

ENTRY_FIELDS = ("min_safe_version", "advisory_id", "note")
EXTENDED_FIELDS = ("ecosystem", "package", "kind", "advisories", "waivers")
# The package an entry names (its registry name in ``ecosystem``) and what it is: both or
# neither, and only with an ecosystem. Identification then finds it like a catalogued CLI.
PACKAGE_FIELDS = ("package", "kind")
ADVISORY_FIELDS = ("id", "aliases", "summary", "affected", "versions", "severity", "references")
RANGE_BOUNDS = ("introduced", "fixed", "last_affected")
WAIVER_FIELDS = ("id", "version", "advisories", "reason", "approved_by", "expires")
SEVERITY_FIELDS = ("type", "score")
# The pseudo advisory id a waiver names to cover a below-floor refusal.
FLOOR_ID = "floor"
_ECOSYSTEMS = ("npm", "PyPI")
# What an adapter is named in a map (the feeds' schemas say the same): the gate refuses any
# other name before it looks anything up, and a verifier fails a record that carries one.
ADAPTER_NAME_FORM = r"[a-z0-9][a-z0-9._-]{0,63}"
ADAPTER_NAME = re.compile(ADAPTER_NAME_FORM + r"\Z")
# A waiver's id, as a waivers document states it (an advisory id's form): ASCII letters and
# digits in hyphen-separated parts, at most 64 characters. (Any other, a look-alike letter
# or a space, would name a waiver no document has.)
WAIVER_ID = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\Z", re.ASCII)
MAX_WAIVER_ID_CHARS = 64


def invalid_adapter_name(adapter: object) -> str:
    """Why ``adapter`` is no adapter name (one that does not match ``ADAPTER_NAME``)."""
    why = f"invalid adapter name: {adapter!r}"
    if isinstance(adapter, str) and "/" in adapter:
        why += (
            " (an adapter is named as the floor map names it, never by a path: a program's "
            "path is given as binary=, and exec finds the name on PATH)"
        )
    return why


# A map version travels in JSON (receipts, the host's rollback record), where an integer
# is exact only up to 2^53 - 1; a larger one would also pin the host's record out of reach.
MAX_MAP_VERSION = 2**53 - 1
MAP_VERSION_FORM = "a non-negative integer up to 2^53 - 1"


def is_map_version(value: object) -> TypeGuard[int]:
    """Whether ``value`` can be a map's version (a bool is not an integer here)."""
    return type(value) is int and 0 <= value <= MAX_MAP_VERSION


@dataclass(frozen=True)
class AffectedRange:
    """Versions from ``introduced`` (inclusive; ``"0"``: from the first release) up to
    ``fixed`` (exclusive) or ``last_affected`` (inclusive), or without end if neither."""

    introduced: str
    fixed: str | None = None
    last_affected: str | None = None

    def as_entry(self) -> dict[str, str]:
        entry = {"introduced": self.introduced}
        if self.fixed is not None:
            entry["fixed"] = self.fixed
        if self.last_affected is not None:
            entry["last_affected"] = self.last_affected
        return entry

    def describe(self) -> str:
        start = "from the start" if self.introduced == "0" else f">= {self.introduced}"
        if self.fixed is not None:
            return f"{start}, < {self.fixed}"
        if self.last_affected is not None:
            return f"{start}, <= {self.last_affected}"
        return f"{start}, not fixed"


@dataclass(frozen=True)
class Severity:
    type: str
    score: str


@dataclass(frozen=True)
class RangeAdvisory:
    """One advisory against an adapter: the versions it affects, as OSV states them."""

    id: str
    aliases: tuple[str, ...]
    summary: str
    affected: tuple[AffectedRange, ...]
    versions: tuple[str, ...]
    severity: tuple[Severity, ...]
    references: tuple[str, ...]

    def names(self) -> tuple[str, ...]:
        """Its id and every alias: each names this advisory."""
        return (self.id, *self.aliases)

    def as_entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "aliases": list(self.aliases),
            "summary": self.summary,
            "affected": [r.as_entry() for r in self.affected],
            "versions": list(self.versions),
            "severity": [{"type": s.type, "score": s.score} for s in self.severity],
            "references": list(self.references),
        }


@dataclass(frozen=True)
class Waiver:
    """A reviewed exception: ``version`` of the adapter may run despite ``advisories``
    (ids, aliases, or ``"floor"``) until ``expires`` (an RFC 3339 time, exclusive)."""

    id: str
    version: str
    advisories: tuple[str, ...]
    reason: str
    approved_by: str
    expires: str

    def as_entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "advisories": list(self.advisories),
            "reason": self.reason,
            "approved_by": self.approved_by,
            "expires": self.expires,
        }


@dataclass(frozen=True)
class Advisory:
    """One adapter's entry in the floor map (the name is kept from when an entry was only a
    floor). Versions below ``min_safe_version``, when there is a floor, are known-unsafe, as
    is every version inside an affected range of one of ``advisories``."""

    adapter: str
    min_safe_version: str | None
    advisory_id: str | None
    note: str | None
    ecosystem: str | None = None
    advisories: tuple[RangeAdvisory, ...] = ()
    waivers: tuple[Waiver, ...] = ()
    package: str | None = None
    kind: str | None = None

    @property
    def extended(self) -> bool:
        """False for a floor-only entry, whose form (and hash) is that of schema 1 and 2."""
        return self.ecosystem is not None or bool(self.advisories) or bool(self.waivers)

    @property
    def has_floor(self) -> bool:
        return self.min_safe_version is not None

    @property
    def order(self) -> str | None:
        """The ecosystem whose version order judges this entry: the one the catalog knows
        the adapter from (an npm CLI's versions are SemVer whatever the feed said, under a
        schema 1 floor too: ``0.6.0-preview.1`` is never read as ``0.6.0rc1``), else the one
        the entry states, else None (PEP 440). Not part of the entry's data, so it leaves
        the hash alone; refresh refuses an entry whose stated ecosystem contradicts the
        catalog, so the two never differ in a map floorctl wrote."""
        from floorguard._maps.catalog import ecosystem_of

        known = ecosystem_of(self.adapter)
        return known if known is not None else self.ecosystem

    def as_entry(self) -> dict[str, Any]:
        if self.ecosystem is None and not self.advisories and not self.waivers:
            # Floor only (``extended`` is false), the common case, built in one step.
            if self.min_safe_version is None:
                return {}
            return {
                "min_safe_version": self.min_safe_version,
                "advisory_id": self.advisory_id,
                "note": self.note,
            }
        entry: dict[str, Any] = {}
        if self.min_safe_version is not None:
            entry.update(
                min_safe_version=self.min_safe_version,
                advisory_id=self.advisory_id,
                note=self.note,
            )
        if not self.extended:
            return entry
        if self.ecosystem is not None:
            entry["ecosystem"] = self.ecosystem
        if self.package is not None:
            entry["package"] = self.package
            entry["kind"] = self.kind
        entry["advisories"] = [a.as_entry() for a in self.advisories]
        entry["waivers"] = [w.as_entry() for w in self.waivers]
        return entry


FloorMap = Mapping[str, Advisory]


def from_entries(entries: Mapping[str, Any]) -> FloorMap:
    """Build a read-only floor map from plain ``{adapter: entry}`` data; raises FloorMapError.

    Only the shape is checked here (fields and types); whether each version is valid in
    the entry's ecosystem is asked when a version is judged against it.
    """
    if not isinstance(entries, Mapping):
        raise FloorMapError("floor map data is not a mapping")
    built: dict[str, Advisory] = {}
    for adapter, entry in entries.items():
        if not isinstance(adapter, str) or not isinstance(entry, Mapping):
            raise FloorMapError(f"floor map entry {adapter!r} is malformed")
        if not ADAPTER_NAME.match(adapter):
            # (a key that reads as an adapter's and is not, "Claude" or one with a
            # look-alike letter, would leave that adapter with no entry: untracked)
            raise FloorMapError(
                f"floor map entry {adapter!a} is not a valid adapter name (lower-case "
                "ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, at "
                "most 64 characters)"
            )
        built[adapter] = _entry(adapter, entry)
        labelled = _local_label(built[adapter])
        if labelled is not None:
            raise FloorMapError(
                f"floor map entry {adapter!r}: {labelled!r} has a local version label, which "
                "the gate ignores (it compares releases, so the map would mean another "
                "version than it states): no feed states one"
            )
        _one_waiver_per_version(built[adapter])
    _waiver_ids_once(built.values())
    named = [(a.ecosystem, a.package, a.adapter) for a in built.values() if a.package is not None]
    if named:
        from floorguard._maps.packages import build_index

        try:
            build_index(named)  # type: ignore[arg-type]  # an entry with a package has an ecosystem
        except ValueError as exc:
            raise FloorMapError(f"floor map: {exc}") from None
    return MappingProxyType(dict(sorted(built.items())))


_FLOOR_KEYS = frozenset(ENTRY_FIELDS)


def _entry(adapter: str, entry: Mapping[str, Any]) -> Advisory:
    if entry.keys() == _FLOOR_KEYS:
        # A floor only, the common case: the check below in one step.
        floor, advisory_id, note = entry["min_safe_version"], entry["advisory_id"], entry["note"]
        if isinstance(floor, str) and isinstance(advisory_id, str) and isinstance(note, str):
            return Advisory(adapter, floor, advisory_id, note)
    keys = set(entry)
    floor_keys = keys & set(ENTRY_FIELDS)
    if keys == set(ENTRY_FIELDS) and _all_strings(entry, ENTRY_FIELDS):
        return Advisory(adapter, *(entry[f] for f in ENTRY_FIELDS))
    unknown = keys - set(ENTRY_FIELDS) - set(EXTENDED_FIELDS)
    if unknown or not keys & set(EXTENDED_FIELDS):
        raise FloorMapError(
            f"floor map entry {adapter!r} must have exactly the string fields "
            + ", ".join(ENTRY_FIELDS)
            + " (a floor), or the fields "
            + ", ".join(EXTENDED_FIELDS)
            + " with an optional floor"
        )
    if floor_keys and (floor_keys != set(ENTRY_FIELDS) or not _all_strings(entry, ENTRY_FIELDS)):
        raise FloorMapError(
            f"floor map entry {adapter!r}: a floor needs all of the string fields "
            + ", ".join(ENTRY_FIELDS)
        )
    where = f"floor map entry {adapter!r}"
    if {"advisories", "waivers"} - keys:
        raise FloorMapError(f"{where}: an extended entry lists advisories and waivers")
    ecosystem = entry.get("ecosystem")
    if ecosystem is None and not entry["advisories"] and not entry["waivers"]:
        # Else two spellings of one floor-only entry would share a hash.
        raise FloorMapError(f"{where}: a floor alone is written as the three floor fields")
    if "ecosystem" in entry and ecosystem not in _ECOSYSTEMS:
        raise FloorMapError(f"{where}: ecosystem must be one of {', '.join(_ECOSYSTEMS)}")
    package, kind = _package_fields(where, entry, ecosystem)
    return Advisory(
        adapter,
        entry.get("min_safe_version"),
        entry.get("advisory_id"),
        entry.get("note"),
        ecosystem=ecosystem,
        advisories=tuple(
            _advisory(f"{where} advisory {i}", a, _order_of(adapter, ecosystem))
            for i, a in enumerate(_list(where, "advisories", entry["advisories"]))
        ),
        waivers=tuple(
            _waiver(f"{where} waiver {i}", w)
            for i, w in enumerate(_list(where, "waivers", entry["waivers"]))
        ),
        package=package,
        kind=kind,
    )


def _local_label(entry: Advisory) -> str | None:
    """A PEP 440 version of ``entry`` with a local label (its floor, a range's bound, a
    listed version, a waiver's), or None. (SemVer ignores build metadata by its own rule, as
    the gate does.)"""
    from floorguard._maps.versions import NPM

    if entry.order == NPM:
        return None
    return next((version for version in _stated_versions(entry) if "+" in version), None)


def unjudged_version(entry: Advisory) -> str | None:
    """A version ``entry`` states that is not valid in its order (the gate refuses the
    adapter's every spawn, unable to judge), or None. Not asked by ``from_entries``: a map of
    100,000 entries would parse every version of it on each load."""
    from floorguard._maps import versions

    for version in _stated_versions(entry):
        if version == versions.FROM_THE_START:
            continue  # (a range's start "0": every ecosystem's first version)
        try:
            versions.parse(version, entry.order)
        except versions.InvalidVersionError:
            return version
    return None


def _stated_versions(entry: Advisory) -> list[str]:
    """Every version ``entry`` states: its floor, each range's bounds, each listed version,
    each waiver's."""
    stated = [] if entry.min_safe_version is None else [entry.min_safe_version]
    stated += [waiver.version for waiver in entry.waivers]
    for advisory in entry.advisories:
        stated += advisory.versions
        for span in advisory.affected:
            bounds = (span.introduced, span.fixed, span.last_affected)
            stated += [bound for bound in bounds if bound is not None]
    return stated


def _order_of(adapter: str, ecosystem: object) -> str | None:
    """The version order an entry is judged in (Advisory.order), before it is built."""
    from floorguard._maps.catalog import ecosystem_of

    known = ecosystem_of(adapter)
    return known if known is not None else ecosystem if isinstance(ecosystem, str) else None


def _waiver_ids_once(entries: Iterable[Advisory]) -> None:
    """Refuses a map in which one waiver id, in any case, names two waivers, of one adapter
    or two (the gate would take one, an auditor's proof another; a waivers document states
    each id once)."""
    seen: dict[str, str] = {}
    for entry in entries:
        for waiver in entry.waivers:
            key = waiver.id.upper()
            if key in seen:
                raise FloorMapError(
                    f"floor map entry {entry.adapter!r}: the waiver id {waiver.id!r} is stated "
                    f"twice (also under {seen[key]!r})"
                )
            seen[key] = entry.adapter


def waived_version(version: str, order: str | None) -> object:
    """What a waiver's ``version`` is in ``order``, for telling two waivers of one version
    apart: one PEP 440 version for every spelling (``0.64`` and ``0.64.0``); a SemVer
    version, or one not valid in the order, as written."""
    from floorguard._maps import versions

    if order == versions.NPM:
        return version
    try:
        return versions.parse(version, order)
    except versions.InvalidVersionError:
        return version


def _one_waiver_per_version(entry: Advisory) -> None:
    """Refuses two waivers of one version of ``entry`` (in its order: ``0.64`` and
    ``0.64.0`` are one PEP 440 version; a SemVer version is its spelling), as the feeds'
    check does. A version not valid in the order is judged, and refused, at spawn time."""
    seen: dict[object, str] = {}
    for waiver in entry.waivers:
        key = waived_version(waiver.version, entry.order)
        if key in seen:
            raise FloorMapError(
                f"floor map entry {entry.adapter!r}: version {waiver.version!r} is waived twice "
                f"({seen[key]} and {waiver.id}): one waiver per adapter and version"
            )
        seen[key] = waiver.id


def _package_fields(
    where: str, entry: Mapping[str, Any], ecosystem: object
) -> tuple[str | None, str | None]:
    """The entry's ``package`` and ``kind``: both or neither, with an ecosystem, the name
    valid there in its one spelling (npm's exact name, PyPI's PEP 503 normal form)."""
    from floorguard._maps.packages import kind_problem, package_problem

    present = set(PACKAGE_FIELDS) & set(entry)
    if not present:
        return None, None
    if present != set(PACKAGE_FIELDS):
        raise FloorMapError(f"{where}: package and kind come together")
    if ecosystem is None:
        raise FloorMapError(f"{where}: a package is named with its ecosystem")
    problem = package_problem(ecosystem, entry["package"])
    if problem is not None:
        raise FloorMapError(f"{where}: its package: {problem}")
    problem = kind_problem(entry["kind"])
    if problem is not None:
        raise FloorMapError(f"{where}: {problem}")
    return entry["package"], entry["kind"]


def _advisory(where: str, value: Any, order: str | None) -> RangeAdvisory:
    _exact_fields(where, value, ADVISORY_FIELDS)
    if not isinstance(value["id"], str) or not isinstance(value["summary"], str):
        raise FloorMapError(f"{where}: id and summary must be strings")
    affected = []
    for bound in _list(where, "affected", value["affected"]):
        if not isinstance(bound, dict) or "introduced" not in bound:
            raise FloorMapError(f"{where}: each affected range needs an introduced version")
        if not set(bound) <= set(RANGE_BOUNDS) or not _all_strings(bound, tuple(bound)):
            raise FloorMapError(f"{where}: affected range fields are " + ", ".join(RANGE_BOUNDS))
        if "fixed" in bound and "last_affected" in bound:
            raise FloorMapError(f"{where}: a range ends with fixed or last_affected, not both")
        if _holds_nothing(bound, order):
            raise FloorMapError(
                f"{where}: the affected range {bound} holds no version (its end is not above "
                "its start), as no feed states one"
            )
        affected.append(AffectedRange(**bound))
    severity = []
    for item in _list(where, "severity", value["severity"]):
        _exact_fields(where + " severity", item, SEVERITY_FIELDS)
        if not _all_strings(item, SEVERITY_FIELDS):
            raise FloorMapError(f"{where}: severity type and score must be strings")
        severity.append(Severity(item["type"], item["score"]))
    return RangeAdvisory(
        id=value["id"],
        aliases=_strings(where, "aliases", value["aliases"]),
        summary=value["summary"],
        affected=tuple(affected),
        versions=_strings(where, "versions", value["versions"]),
        severity=tuple(severity),
        references=_strings(where, "references", value["references"]),
    )


def _holds_nothing(bound: Mapping[str, str], order: str | None) -> bool:
    """Whether a range's end is not above its start in the entry's ``order``, both versions
    of it (a version that is not is an unknown version when judged, refused then)."""
    from floorguard._maps import versions

    start = bound["introduced"]
    end = bound.get("fixed", bound.get("last_affected"))
    if end is None or start == versions.FROM_THE_START:
        return False
    try:
        found = versions.compare(start, end, order)
    except versions.InvalidVersionError:
        return False
    return found > 0 or (found == 0 and "fixed" in bound)


def _waiver(where: str, value: Any) -> Waiver:
    _exact_fields(where, value, WAIVER_FIELDS)
    scalars = ("id", "version", "reason", "approved_by", "expires")
    if not _all_strings(value, scalars):
        raise FloorMapError(f"{where}: " + ", ".join(scalars) + " must be strings")
    waiver_id = value["id"]
    if not WAIVER_ID.match(waiver_id) or len(waiver_id) > MAX_WAIVER_ID_CHARS:
        raise FloorMapError(
            f"{where}: the id {waiver_id!a} is not a waiver id (ASCII letters and digits in "
            f"parts joined by '-', at most {MAX_WAIVER_ID_CHARS} characters), as a waivers "
            "document states one"
        )
    covered = _strings(where, "advisories", value["advisories"])
    if not covered:
        raise FloorMapError(f"{where}: a waiver covers at least one advisory")
    if not is_utc_z(value["expires"]):
        # floorctl writes no other form: a map with one was edited by hand, and an offset
        # must not be normalised into an expiry nobody approved.
        raise FloorMapError(f"{where}: expires {value['expires']!r} is not {UTC_Z_FORM}")
    return Waiver(
        id=value["id"],
        version=value["version"],
        advisories=covered,
        reason=value["reason"],
        approved_by=value["approved_by"],
        expires=value["expires"],
    )


def _exact_fields(where: str, value: Any, fields: tuple[str, ...]) -> None:
    if not isinstance(value, dict) or set(value) != set(fields):
        raise FloorMapError(f"{where} must have exactly the fields " + ", ".join(fields))


def _list(where: str, name: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise FloorMapError(f"{where}: {name} must be a list")
    return value


def _strings(where: str, name: str, value: Any) -> tuple[str, ...]:
    items = _list(where, name, value)
    if not all(isinstance(item, str) for item in items):
        raise FloorMapError(f"{where}: {name} must be a list of strings")
    return tuple(items)


def _all_strings(entry: Mapping[str, Any], fields: tuple[str, ...]) -> bool:
    return all(isinstance(entry[f], str) for f in fields)


def to_entries(floor_map: FloorMap) -> dict[str, dict[str, Any]]:
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
    from floorguard._base._canonical import RepeatedKey, loads_strict

    try:
        document = loads_strict(data)
    except RepeatedKey as exc:
        # (a reader keeping the first copy would see another map than the one hashed)
        raise FloorMapError(f"{source}: the floor map {exc}") from exc
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
