"""Advisory feeds: read and decode a feed, run its checks, and turn it into a floor map.

A feed is untrusted input whose notes end up in a generated Python module, so every check
fails closed and every problem is reported (file, JSON path, message), not only the first.
The JSON Schema (``schemas/feed.v<N>.schema.json``) checks the structure
(``floorctl.feed_schema``); the semantic checks (``floorctl.feed_checks``,
``floorctl.feed_v3_checks``) make the whole-string, PEP 440 and printable-text checks a
pattern cannot make safely. Limits are in ``floorctl.feed_rules``, message formatting in
``floorctl.feed_messages``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from floorctl import advisories
from floorctl.bulk import without_cyclic_gc
from floorctl.errors import FeedError
from floorctl.feed_checks import _v2_problems, advisory_id_problem, name_problem, note_problem
from floorctl.feed_messages import _json_type, _show, format_path, show_source, show_value
from floorctl.feed_rules import (
    IDENTITY_FIELDS,
    MAX_ADAPTERS,
    MAX_ADVISORIES,
    MAX_ALIASES,
    MAX_FEED_BYTES,
    MAX_LISTED_VERSIONS,
    MAX_RANGES,
    MAX_REFERENCES,
    MAX_SEVERITY,
    SCHEMA_FILES,
    SEVERITY_TYPES,
    Problem,
    _Path,
)
from floorctl.feed_schema import _check, _validator, describe_schema_error, top_level_clean
from floorctl.feed_v3_checks import eco_version_problem, score_problem, v3_reference_problem
from floorguard._base._canonical import sha256_digest
from floorguard._base._time import format_ts, parse_ts
from floorguard._base.files import read_regular
from floorguard._maps import map_model
from floorguard.errors import FloorMapError, UnreadableFileError


@dataclass(frozen=True)
class Feed:
    """A checked feed: where it came from, the digest of its exact bytes, and its floor map.

    Schema version 2 adds identity and freshness (``feed_id``, ``version``, ``published``,
    ``expires``, the times normalised to UTC with a ``Z``); they are None for version 1.
    ``signed_by`` holds the key ids whose signatures verified, once a caller checked them.
    """

    source: str
    digest: str
    schema_version: int
    floor_map: map_model.FloorMap
    feed_id: str | None = None
    version: int | None = None
    published: str | None = None
    expires: str | None = None
    signed_by: frozenset[str] = frozenset()

    def identity(self) -> dict[str, object]:
        """What a receipt records about this feed."""
        described: dict[str, object] = {
            "source": self.source,
            "digest": self.digest,
            "schema_version": self.schema_version,
        }
        if self.feed_id is not None:
            described.update(
                feed_id=self.feed_id,
                version=self.version,
                published=self.published,
                expires=self.expires,
            )
        if self.signed_by:
            described["signed_by"] = sorted(self.signed_by)
        return described


class _Refused(Exception):
    """Raised inside the JSON decoder's hooks to stop parsing with a reason."""


@without_cyclic_gc
def parse_feed(data: bytes, source: str) -> Feed:
    """Check a feed's exact bytes and build its floor map.

    Pure: no I/O. ``source`` names the feed in messages. Raises ``FeedError`` listing every
    problem found (file, JSON path, message) when the feed is not acceptable in every respect.
    """
    shown = show_source(source)
    document, problems = decode_document(data)
    if document is None:
        raise FeedError([(shown, path, message) for path, message in problems])

    version, version_problem = _schema_version(document)
    if version_problem is not None:
        raise FeedError([(shown, path, message) for path, message in [*problems, version_problem]])

    adapters = document.get("adapters")
    if isinstance(adapters, dict) and len(adapters) > MAX_ADAPTERS:
        # Refused before the per-entry checks: their cost grows with the count.
        problems.append(
            (
                "$.adapters",
                f"too many adapters: {len(adapters):,} (a feed may list at most {MAX_ADAPTERS:,})",
            )
        )
        raise FeedError([(shown, path, message) for path, message in problems])

    problems.extend(_check(document, version))
    if version >= 2:
        problems.extend(_v2_problems(document))
    if problems:
        raise FeedError([(shown, path, message) for path, message in _ordered(problems)])
    try:
        floor_map = _floor_map(document["adapters"], version)
    except FloorMapError as exc:  # cannot happen after the checks above; fail closed anyway
        raise FeedError([(shown, "$.adapters", str(exc))]) from exc
    feed = Feed(
        source=source, digest=sha256_digest(data), schema_version=version, floor_map=floor_map
    )
    # Schema 2 always states its identity; schema 3 may (all four fields or none).
    if version >= 2 and "feed_id" in document:
        feed = Feed(
            source=feed.source,
            digest=feed.digest,
            schema_version=version,
            floor_map=floor_map,
            feed_id=document["feed_id"],
            version=document["version"],
            published=format_ts(parse_ts(document["published"])),
            expires=format_ts(parse_ts(document["expires"])),
        )
    return feed


def load_feed(path: Path) -> Feed:
    """Read a feed file (at most ``MAX_FEED_BYTES``) and check it with ``parse_feed``.

    Raises ``FeedError`` when the file is unreadable, too large, or not a valid feed.
    """
    source = str(path)
    try:
        # Never blocks: a FIFO or device named as a feed is refused at once.
        data = read_regular(path, max_bytes=MAX_FEED_BYTES, what="feed")
    except UnreadableFileError as exc:
        # The message names the path first; the feed error names it again as its source.
        reason = str(exc).removeprefix(f"{path}: ")
        if exc.too_large:
            reason = f"feed is larger than {MAX_FEED_BYTES:,} bytes (16 MiB); refused unread"
        raise FeedError([(show_source(source), "$", reason)]) from exc
    return parse_feed(data, source)


def validate_paths(paths: Sequence[Path]) -> list[Problem]:
    """Every problem of every feed file, in order; empty when all are valid. Raises nothing."""
    problems: list[Problem] = []
    for path in paths:
        try:
            load_feed(path)
        except FeedError as error:
            problems.extend(error.problems)
    return problems


# --- decoding -------------------------------------------------------------------------------


def decode_document(data: bytes) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """Bytes to a JSON object, or None with the reasons. Duplicate keys are reported, not fatal."""
    if len(data) > MAX_FEED_BYTES:
        return None, [("$", f"feed is larger than {MAX_FEED_BYTES:,} bytes (16 MiB)")]
    if data.startswith(b"\xef\xbb\xbf"):
        return None, [("$", "feed starts with a byte order mark; write UTF-8 without a BOM")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [("$", f"feed is not valid UTF-8 (byte offset {exc.start})")]
    if not text.strip():
        return None, [("$", "feed is empty")]

    duplicates: dict[int, tuple[dict[str, Any], list[str]]] = {}

    def object_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        seen_twice: list[str] = []
        for key, value in pairs:
            if key in obj:
                seen_twice.append(key)
            obj[key] = value
        if seen_twice:
            # Keyed by id; the object itself is kept so that the id stays unique.
            duplicates[id(obj)] = (obj, seen_twice)
        return obj

    def refuse_constant(name: str) -> Any:
        raise _Refused(f"{name} is not valid JSON (only finite numbers are)")

    huge: list[_TooManyDigits] = []

    def integer(digits: str) -> int | _TooManyDigits:
        # Python reads at most sys.get_int_max_str_digits() digits of an integer, and its
        # error names no field: such a number is kept aside and refused by its path.
        if len(digits) - digits.startswith("-") > sys.get_int_max_str_digits() > 0:
            huge.append(_TooManyDigits(len(digits) - digits.startswith("-")))
            return huge[-1]
        return int(digits)

    try:
        document = json.loads(
            text, object_pairs_hook=object_hook, parse_constant=refuse_constant, parse_int=integer
        )
    except _Refused as exc:
        return None, [("$", str(exc))]
    except json.JSONDecodeError as exc:
        return None, [("$", f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
    except ValueError as exc:
        return None, [("$", f"malformed JSON: {_show(str(exc), limit=120)}")]
    except RecursionError:
        return None, [("$", "malformed JSON: nested too deeply")]

    if huge:
        return None, [
            (format_path(path), f"an integer of {value.digits:,} digits: no field takes one")
            for path, value in _found(document, _TooManyDigits)
        ]
    if not isinstance(document, dict):
        return None, [("$", f"the top level must be a JSON object, not {_json_type(document)}")]
    problems = [
        (format_path((*path, key)), "duplicate key (each key may appear only once per object)")
        for path, key in _find_duplicates(document, duplicates)
    ]
    return document, problems


@dataclass(frozen=True)
class _TooManyDigits:
    """A JSON integer with more digits than Python reads."""

    digits: int


def _found(document: Any, kind: type) -> list[tuple[_Path, Any]]:
    """Every value of ``kind`` in ``document``, with its path, in document order."""
    found: list[tuple[_Path, Any]] = []
    stack: list[tuple[_Path, Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, kind):
            found.append((path, value))
        elif isinstance(value, dict):
            stack.extend(reversed([((*path, k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(value)]))
    return found


def _find_duplicates(
    document: Any, duplicates: dict[int, tuple[dict[str, Any], list[str]]]
) -> Iterator[tuple[_Path, str]]:
    if not duplicates:
        return
    stack: list[tuple[_Path, Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key in duplicates.get(id(value), (None, []))[1]:
                yield path, key
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))


def _schema_version(document: dict[str, Any]) -> tuple[int, tuple[str, str] | None]:
    if "schema_version" not in document:
        return 0, ("$.schema_version", "required field missing")
    version = document["schema_version"]
    # `type(...) is int`: JSON true and 1.0 compare equal to 1 in Python and in JSON Schema.
    if type(version) is not int:
        return 0, (
            "$.schema_version",
            f"must be an integer such as 1, not {_json_type(version)} {show_value(version)}",
        )
    if version not in SCHEMA_FILES:
        readable = ", ".join(str(v) for v in sorted(SCHEMA_FILES))
        return 0, (
            "$.schema_version",
            f"unsupported schema_version {version} (this floorctl reads {readable})",
        )
    return version, None


# The adapters are turned into the map this many at a time (see ``_floor_map``).
_MAP_BATCH = 1024


def _floor_map(adapters: dict[str, Any], version: int) -> map_model.FloorMap:
    """The floor map of a checked feed's adapters, which it empties as it goes: each
    entry's decoded JSON is dropped once its part of the map is built, so a large feed is
    never held as JSON and as a map at once. Raises FloorMapError (as ``from_entries``)."""
    built: dict[str, map_model.Advisory] = {}
    names = list(adapters)
    for first in range(0, len(names), _MAP_BATCH):
        batch: dict[str, Any] = {}
        for name in names[first : first + _MAP_BATCH]:
            entry = adapters.pop(name)
            if version >= 3:
                batch[name] = _v3_map_entry(entry)
            else:
                # References are for people: the floor map (and its hash) keeps the three fields.
                batch[name] = {key: entry[key] for key in map_model.ENTRY_FIELDS}
        built.update(map_model.from_entries(batch))
    return MappingProxyType(dict(sorted(built.items())))


def _v3_map_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The extended floor-map entry of a checked schema 3 entry, in canonical form."""
    ecosystem = entry["ecosystem"]
    mapped: dict[str, Any] = {key: entry[key] for key in map_model.ENTRY_FIELDS if key in entry}
    mapped["ecosystem"] = ecosystem
    for key in map_model.PACKAGE_FIELDS:
        if key in entry:
            mapped[key] = entry[key]
    mapped["advisories"] = advisories.union(entry["advisories"], ecosystem)
    mapped["waivers"] = []  # feeds never carry waivers
    return mapped


def _ordered(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Problems without repeats, sorted by path so that output is stable."""
    return sorted(dict.fromkeys(problems), key=lambda problem: problem[0])


# Used by other modules and tests from here (they moved to the feed_* modules).
__all__ = [
    "IDENTITY_FIELDS",
    "MAX_ADAPTERS",
    "MAX_ADVISORIES",
    "MAX_ALIASES",
    "MAX_FEED_BYTES",
    "MAX_LISTED_VERSIONS",
    "MAX_RANGES",
    "MAX_REFERENCES",
    "MAX_SEVERITY",
    "SEVERITY_TYPES",
    "_check",
    "_validator",
    "advisory_id_problem",
    "describe_schema_error",
    "eco_version_problem",
    "format_path",
    "name_problem",
    "note_problem",
    "score_problem",
    "show_source",
    "show_value",
    "top_level_clean",
    "v3_reference_problem",
]
