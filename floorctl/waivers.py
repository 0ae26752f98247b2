"""Waivers documents: read and check them, and attach their waivers to a floor map.

A waiver is a narrow, reviewed exception (docs/feeds.md, "Waivers"): one adapter, one
exact version, the causes it covers (advisory ids or aliases, or ``"floor"``), a reason, who
approved it and an expiry. Its text ends up in the generated module like a feed's notes, so
the document is checked as strictly as a feed: every problem reported with file and JSON
path, the JSON Schema (``schemas/waivers.v1.schema.json``) for structure and the semantic
checks of floorctl.feeds for what a pattern cannot check safely.

Attaching is pure and fails closed: a waiver must fit the map it is attached to. One that
names an adapter, advisory or floor the map does not have, a version the map does not
refuse, or a version it would not waive (a cause left unnamed) would waive nothing: it is
stale or mistyped, and refused. So is one already expired at the refresh time.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import importlib.resources
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from floorctl import feeds
from floorctl.errors import WaiversError
from floorctl.feed_checks import local_label_problem
from floorguard._base._canonical import sha256_digest
from floorguard._base._time import UTC_Z_FORM, format_ts, is_utc_z, parse_ts
from floorguard._base.files import read_regular
from floorguard._maps import map_model, verdict, versions
from floorguard.errors import UnreadableFileError

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

SCHEMA_VERSION = 1
SCHEMA_FILE = "waivers.v1.schema.json"
# Waivers are few, reviewed one by one: these caps are far above any real document and keep
# a hostile one from costing more than a feed would.
MAX_WAIVERS_BYTES = 1024 * 1024
MAX_WAIVERS = 1000
MAX_COVERED = 64

_Path = tuple[str | int, ...]
_Found = list[tuple[_Path, str]]
# Array-size keywords are checked (and worded) by the semantic checks below.
_SEMANTIC_KEYWORDS = frozenset({"minItems", "maxItems", "uniqueItems"})


@dataclass(frozen=True)
class DocumentWaiver:
    """One waiver as a document states it: for ``adapter``, at position ``index``."""

    adapter: str
    index: int
    waiver: map_model.Waiver


@dataclass(frozen=True)
class WaiversDocument:
    """A checked waivers document: where it came from, its exact bytes' digest, its waivers
    (``expires``, always UTC with ``Z``, written with six fractional digits)."""

    source: str
    digest: str
    waivers: tuple[DocumentWaiver, ...]

    def identity(self) -> dict[str, object]:
        """What an update receipt records about the document among its inputs."""
        return {
            "source": self.source,
            "digest": self.digest,
            "schema_version": SCHEMA_VERSION,
            "waivers": len(self.waivers),
        }


def looks_like_waivers(data: bytes) -> bool:
    """Whether a JSON file is shaped as a waivers document (a ``waivers`` key and no
    ``adapters``), so that ``floorctl validate`` checks it as one. Raises nothing."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and "waivers" in document and "adapters" not in document


def parse_waivers(data: bytes, source: str) -> WaiversDocument:
    """Check a waivers document's exact bytes. Pure. Raises WaiversError listing every
    problem (file, JSON path, message)."""
    shown = feeds.show_source(source)

    def refuse(found: list[tuple[str, str]]) -> WaiversError:
        return WaiversError([(shown, path, message) for path, message in found])

    if len(data) > MAX_WAIVERS_BYTES:
        raise refuse([("$", _too_large())])
    document, decoded = feeds.decode_document(data)
    # The shared decoder words its messages for feeds.
    decoded = [(path, _reword(message)) for path, message in decoded]
    if document is None:
        raise refuse(decoded)
    version_problem = _schema_version(document)
    if version_problem is not None:
        raise refuse([*decoded, version_problem])
    listed = document.get("waivers")
    if isinstance(listed, list) and len(listed) > MAX_WAIVERS:
        # Refused before the per-waiver checks: their cost grows with the count.
        too_many = (
            f"too many waivers: {len(listed):,} (a document may list at most {MAX_WAIVERS:,})"
        )
        raise refuse([*decoded, ("$.waivers", too_many)])
    found = decoded + _check(document)
    if found:
        raise refuse(_ordered(found))
    return WaiversDocument(
        source=source,
        digest=sha256_digest(data),
        waivers=tuple(
            DocumentWaiver(
                adapter=item["adapter"],
                index=index,
                waiver=map_model.Waiver(
                    id=item["id"],
                    version=item["version"],
                    advisories=tuple(item["advisories"]),
                    reason=item["reason"],
                    approved_by=item["approved_by"],
                    expires=format_ts(parse_ts(item["expires"])),
                ),
            )
            for index, item in enumerate(document["waivers"])
        ),
    )


def load_waivers(path: Path) -> WaiversDocument:
    """Read a waivers document (at most ``MAX_WAIVERS_BYTES``) and check it. Raises
    WaiversError when the file is unreadable, too large or invalid."""
    try:
        # Never blocks: a FIFO or device named as the document is refused at once.
        data = read_regular(path, max_bytes=MAX_WAIVERS_BYTES, what="waivers document")
    except UnreadableFileError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
        if exc.too_large:
            reason = _too_large() + "; refused unread"
        raise WaiversError([(feeds.show_source(str(path)), "$", reason)]) from exc
    return parse_waivers(data, str(path))


def _too_large() -> str:
    return f"waivers document is larger than {MAX_WAIVERS_BYTES:,} bytes"


def _reword(message: str) -> str:
    return "waivers document " + message[5:] if message.startswith("feed ") else message


def _schema_version(document: dict[str, Any]) -> tuple[str, str] | None:
    if "schema_version" not in document:
        return "$.schema_version", "required field missing"
    value = document["schema_version"]
    # `type(...) is int`: JSON true and 1.0 compare equal to 1.
    if type(value) is not int:
        shown = feeds.show_value(value)
        return "$.schema_version", f"must be an integer such as 1, not {shown}"
    if value != SCHEMA_VERSION:
        return "$.schema_version", f"unsupported schema_version {value} (this floorctl reads 1)"
    return None


# --- checking ---------------------------------------------------------------------------------


@functools.cache
def _validator() -> Draft202012Validator:
    # Imported here: refresh without --waivers never needs it.
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    resource = importlib.resources.files("floorctl._schemas") / SCHEMA_FILE
    schema = json.loads(resource.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_problems(document: Any) -> list[tuple[str, str]]:
    """What the JSON Schema alone finds wrong with a decoded document (for tests that hold
    it and the semantic checks in step)."""
    return [(path, message) for path, message, _ in _schema_errors(document)]


def _schema_errors(document: Any) -> Iterator[tuple[str, str, bool]]:
    for error in _validator().iter_errors(document):
        if error.validator in _SEMANTIC_KEYWORDS:
            continue
        yield from feeds.describe_schema_error(error)


def _check(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Schema and semantic problems; a semantic message replaces the schema's at its path."""
    semantic: dict[str, str] = {}
    listed = document.get("waivers")
    if isinstance(listed, list):
        first_at: dict[str, int] = {}
        for index, item in enumerate(listed):
            if isinstance(item, dict):
                for parts, message in _waiver_problems(item):
                    semantic.setdefault(feeds.format_path(("waivers", index, *parts)), message)
                waiver_id = item.get("id")
                if isinstance(waiver_id, str):
                    key = waiver_id.upper()  # (WVR-0001 and wvr-0001 name one waiver)
                    if key in first_at:
                        path = feeds.format_path(("waivers", index, "id"))
                        semantic.setdefault(
                            path,
                            f"{feeds.show_value(waiver_id)} twice (waiver ids are unique, in "
                            f"any case; first at $.waivers[{first_at[key]}])",
                        )
                    first_at.setdefault(key, index)
    found = [
        (path, message)
        for path, message, superseded in _schema_errors(document)
        if not (superseded and path in semantic)
    ]
    return found + list(semantic.items())


def _waiver_problems(item: dict[str, Any]) -> _Found:
    found: _Found = []
    for field, check in _TEXT_CHECKS:
        value = item.get(field)
        if isinstance(value, str):
            reason = check(value)
            if reason is not None:
                found.append(((field,), reason))
    covered = item.get("advisories")
    if isinstance(covered, list):
        if not covered:
            found.append(
                (("advisories",), 'must name at least one advisory (an id, an alias or "floor")')
            )
        if len(covered) > MAX_COVERED:
            found.append(
                (
                    ("advisories",),
                    f"too many: {len(covered):,} (a waiver names at most {MAX_COVERED})",
                )
            )
        seen: set[str] = set()
        for index, name in enumerate(covered):
            if not isinstance(name, str):
                continue  # the schema reports the type
            reason = feeds.advisory_id_problem(name)
            if reason is None and name in seen:
                reason = f"{feeds.show_value(name)} is named twice"
            if reason is not None:
                found.append((("advisories", index), reason))
            seen.add(name)
    return found


def _version_problem(value: str) -> str | None:
    # Whether it is a version of the adapter's ecosystem is asked when it is attached.
    if not value:
        return "must not be empty"
    if len(value) > versions.MAX_VERSION_CHARS:
        return f"too long: {len(value):,} characters (at most {versions.MAX_VERSION_CHARS})"
    if any(char.isspace() for char in value):
        return f"{feeds.show_value(value)} has whitespace (a version is one exact string)"
    if not value.isprintable():
        return f"{feeds.show_value(value)} has a non-printable character"
    return None


def _text_problem(value: str) -> str | None:
    # The rules of a feed note: one printable line, no quote, backslash or template syntax.
    return "must not be empty" if not value else feeds.note_problem(value)


def _expires_problem(value: str) -> str | None:
    # The runtime reads a map's waivers by the same rule (floorguard._maps.map_model).
    if not is_utc_z(value):
        return f"{feeds.show_value(value)} is not {UTC_Z_FORM} (such as 2026-12-31T00:00:00Z)"
    return None


_TEXT_CHECKS = (
    ("id", feeds.advisory_id_problem),
    ("adapter", feeds.name_problem),
    ("version", _version_problem),
    ("reason", _text_problem),
    ("approved_by", _text_problem),
    ("expires", _expires_problem),
)


def _same_version(floor_map: map_model.FloorMap, item: DocumentWaiver) -> object:
    """What ``item``'s version is in its adapter's order (a version not valid there is
    refused by _fit)."""
    entry = floor_map.get(item.adapter)
    return map_model.waived_version(item.waiver.version, None if entry is None else entry.order)


def _ordered(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Without repeats, in document order ($.waivers[2] before $.waivers[10])."""

    def key(problem: tuple[str, str]) -> list[Any]:
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", problem[0])]

    return sorted(dict.fromkeys(problems), key=key)


# --- attaching --------------------------------------------------------------------------------


def attach(
    floor_map: map_model.FloorMap, document: WaiversDocument | None, *, at: _dt.datetime
) -> map_model.FloorMap:
    """The floor map with exactly ``document``'s waivers in its entries (sorted by id) and
    no others; None strips every waiver the map held. ``at`` is the refresh time expiry is
    judged at. Pure. Raises WaiversError (every problem, with file and JSON path) when a
    waiver does not fit the map.

    An entry that gets no waiver and has no advisories or ecosystem returns to the
    floor-only form, so its hash is that of schema 1 and 2 again.
    """
    attached: dict[str, list[map_model.Waiver]] = {}
    if document is not None:
        problems: list[tuple[str, str]] = []
        waived: dict[tuple[str, object], DocumentWaiver] = {}
        for item in document.waivers:
            found = _fit(floor_map, item, at)
            key = (item.adapter, _same_version(floor_map, item))
            first = waived.get(key)
            if not found and first is not None:
                found = [
                    (
                        ("version",),
                        f"{item.adapter} {feeds.show_value(item.waiver.version)} is already "
                        f"waived by {first.waiver.id} (as "
                        f"{feeds.show_value(first.waiver.version)}: one waiver per adapter "
                        "and version, however spelt)",
                    )
                ]
            waived.setdefault(key, item)
            problems += [
                (feeds.format_path(("waivers", item.index, *parts)), message)
                for parts, message in found
            ]
            attached.setdefault(item.adapter, []).append(item.waiver)
        if problems:
            shown = feeds.show_source(document.source)
            raise WaiversError([(shown, path, message) for path, message in _ordered(problems)])
    # Only the entries that gain, keep or lose waivers are built again (from plain data: the
    # same checks and canonical form as any map); a map of 100,000 floors stays cheap.
    touched = set(attached) | {name for name, entry in floor_map.items() if entry.waivers}
    rebuilt = map_model.from_entries(
        {
            name: dataclasses.replace(
                floor_map[name], waivers=tuple(sorted(attached.get(name, ()), key=_by_id))
            ).as_entry()
            for name in touched
        }
    )
    return MappingProxyType({name: rebuilt.get(name, entry) for name, entry in floor_map.items()})


def _by_id(waiver: map_model.Waiver) -> str:
    return waiver.id


def _fit(floor_map: map_model.FloorMap, item: DocumentWaiver, at: _dt.datetime) -> _Found:
    """Why ``item`` does not fit ``floor_map`` at ``at`` (empty when it does)."""
    waiver, adapter = item.waiver, item.adapter
    entry = floor_map.get(adapter)
    if entry is None:
        return [(("adapter",), f"{adapter} is not in the floor map: there is nothing to waive")]
    found: _Found = []
    if not verdict.waiver_in_force(waiver, at):
        found.append(
            (
                ("expires",),
                f"expired at {waiver.expires} (the refresh judges at {format_ts(at)}); "
                "renew it after review, or remove it",
            )
        )
    shown = feeds.show_value(waiver.version)
    labelled = None if entry.order == versions.NPM else local_label_problem(waiver.version)
    if labelled is not None:  # (as in a feed: the gate compares releases, the label aside)
        found.append((("version",), labelled))
        return found
    try:
        causes = verdict.assess(entry, waiver.version, at=None).causes
    except versions.InvalidVersionError:
        order = versions.order_name(entry.order)
        found.append((("version",), f"{shown} is not a valid {order} version ({adapter}'s order)"))
        return found
    if not causes:
        found.append(
            (
                ("version",),
                f"{adapter} {shown} is not refused by the floor map: the waiver would waive "
                "nothing (stale or mistyped)",
            )
        )
        return found
    named_wrong = False
    for index, name in enumerate(waiver.advisories):
        reason = name_problem(entry, waiver.version, name, causes)
        if reason is not None:
            found.append((("advisories", index), reason))
            named_wrong = True
    uncovered = [cause for cause in causes if not cause.covered_by(waiver)]
    if uncovered and not named_wrong:
        needed = ", ".join(
            '"floor"' if cause.is_floor else cause.advisory_id for cause in uncovered
        )
        found.append(
            (
                ("advisories",),
                f"{adapter} {shown} is also refused for {needed}: a waiver that does not name "
                "every cause waives nothing",
            )
        )
    return found


def name_problem(
    entry: map_model.Advisory, version: str, name: str, causes: tuple[verdict.Cause, ...]
) -> str | None:
    """Why one name in a waiver's ``advisories`` does not name a cause of refusing
    ``version``, or None."""
    adapter = entry.adapter
    if name == map_model.FLOOR_ID:
        if not entry.has_floor:
            return f'{adapter} has no floor: "floor" names nothing here'
        if not any(cause.is_floor for cause in causes):
            return (
                f'{version} is not below the floor {entry.min_safe_version}: "floor" waives nothing'
            )
        return None
    matching = [advisory for advisory in entry.advisories if name in advisory.names()]
    if not matching:
        if name == entry.advisory_id:
            return f'{name} is the id of {adapter}\'s floor: name the floor "floor"'
        return f"{name} is not an id or alias of an advisory of {adapter}"
    if not any(cause.advisory_id == matching[0].id and not cause.is_floor for cause in causes):
        return f"{name} does not affect {version}: nothing to waive (stale or mistyped)"
    return None
