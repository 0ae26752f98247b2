"""Advisory feeds: read, check and turn into a floor map.

A feed is untrusted input whose notes end up in a generated Python module, so every check
fails closed and every problem is reported (file, JSON path, message), not only the first.
The JSON Schema (``schemas/feed.v<N>.schema.json``) checks the structure; the semantic checks
here make the whole-string, PEP 440 and printable-text checks a pattern cannot make safely.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from floorctl import advisories
from floorctl.bulk import without_cyclic_gc
from floorctl.errors import FeedError
from floorguard._base._canonical import sha256_digest
from floorguard._base._time import format_ts, parse_ts
from floorguard._base.files import read_regular
from floorguard._maps import map_model, versions
from floorguard.errors import FloorguardError, FloorMapError, UnreadableFileError

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError

MAX_FEED_BYTES = 16 * 1024 * 1024
MAX_ADAPTERS = 100_000
MAX_VERSION_CHARS = 128
MAX_ADVISORY_ID_CHARS = 64
MAX_NOTE_CHARS = 1000

MAX_URL_CHARS = 2048

# Schema versions this floorctl reads, each with its own schema file.
SCHEMA_FILES = {1: "feed.v1.schema.json", 2: "feed.v2.schema.json", 3: "feed.v3.schema.json"}
# Schema 3 caps (kept in step with feed.v3.schema.json by a test): within 16 MiB anyway, but
# a cap per list keeps one adapter or one advisory from holding the whole budget.
MAX_ADVISORIES = 2048
MAX_ALIASES = 64
MAX_RANGES = 128
MAX_LISTED_VERSIONS = 4096
MAX_SEVERITY = 8
MAX_REFERENCES = 64
MAX_SCORE_CHARS = 256
SEVERITY_TYPES = ("CVSS_V2", "CVSS_V3", "CVSS_V4", "Ubuntu")
# The optional identity and freshness of a schema 3 feed: all four or none.
IDENTITY_FIELDS = ("feed_id", "version", "published", "expires")

Problem = tuple[str, str, str]
_Path = tuple[str | int, ...]

# `\Z`, not `$`: in Python `$` also matches before a trailing newline ("aider\n").
# The classes are ASCII ranges, so look-alike letters (Cyrillic, fullwidth) cannot match.
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
_FEED_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}\Z")
_ADVISORY_ID = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\Z")
# Characters PEP 440 can use; checked before packaging parses (its regex is case-insensitive,
# so non-ASCII letters could in principle fold onto ASCII ones).
_VERSION_CHARS = re.compile(r"[A-Za-z0-9.!+_-]+\Z")
# Notes are rendered into a generated Python module: no string delimiter (`"`, hence `"""`),
# no escape character (`\`), and no jinja2 syntax, so a note can never close its literal or
# be read as template code. Apostrophes stay allowed because English needs them.
_NOTE_FORBIDDEN = re.compile(r'"|\\|\{\{|\}\}|\{%|%\}|\{#|#\}')
_NOTE_FORBIDDEN_WHY = {
    '"': "a double quote (notes become string literals in generated code)",
    "\\": "a backslash (notes become string literals in generated code)",
}
# Keys shown as `.key` in a JSON path; anything else is shown quoted, as `["key"]`.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\Z")
_MAX_SHOWN_KEY = 100

# Names for characters that unicodedata.name() does not know (controls, surrogates, ...).
_CATEGORY_WORDS = {
    "Cc": "a control character",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
}

_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


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
    if version >= 3:
        entries = {name: _v3_map_entry(entry) for name, entry in document["adapters"].items()}
    else:
        # References are for people; the floor map (and its hash) keeps exactly the three fields.
        entries = {
            name: {key: entry[key] for key in map_model.ENTRY_FIELDS}
            for name, entry in document["adapters"].items()
        }
    try:
        floor_map = map_model.from_entries(entries)
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


def format_path(parts: _Path) -> str:
    """A ``$``-rooted JSON path; unusual keys are quoted with every non-ASCII char escaped."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif len(part) > _MAX_SHOWN_KEY:
            # A megabyte-long key must not become a megabyte-long error line.
            out.append("[" + _quote(part[:_MAX_SHOWN_KEY], ascii_only=True)[:-1] + '..."]')
        elif _PLAIN_KEY.match(part):
            out.append("." + part)
        else:
            out.append("[" + _quote(part, ascii_only=True) + "]")
    return "".join(out)


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

    try:
        document = json.loads(text, object_pairs_hook=object_hook, parse_constant=refuse_constant)
    except _Refused as exc:
        return None, [("$", str(exc))]
    except json.JSONDecodeError as exc:
        return None, [("$", f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        return None, [("$", f"malformed JSON: {_show(str(exc), limit=120)}")]
    except RecursionError:
        return None, [("$", "malformed JSON: nested too deeply")]

    if not isinstance(document, dict):
        return None, [("$", f"the top level must be a JSON object, not {_json_type(document)}")]
    problems = [
        (format_path((*path, key)), "duplicate key (each key may appear only once per object)")
        for path, key in _find_duplicates(document, duplicates)
    ]
    return document, problems


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


# --- checking ---------------------------------------------------------------------------------


@functools.cache
def _validator(version: int) -> Draft202012Validator:
    """The compiled schema of one version, loaded once from the installed package."""
    # Imported here: a feed whose every part the hand checks prove clean never needs it.
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    resource = importlib.resources.files("floorctl._schemas") / SCHEMA_FILES[version]
    schema = json.loads(resource.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _check(document: dict[str, Any], version: int, *, whole: bool = False) -> list[tuple[str, str]]:
    """Schema and semantic problems of a decoded document.

    The schema is run on the top level and on every adapter entry that is not provably
    clean; ``whole=True`` runs it on every entry (tests compare both ways). An entry is clean
    when it has exactly the three string fields and passes the semantic checks, which are
    each at least as strict as the schema's keywords for that field (a test holds the two
    in step). Running jsonschema on 100,000 clean entries would cost seconds and find nothing.
    """
    semantic: dict[str, str] = {}
    target = document
    adapters = document.get("adapters")
    entry_problems = _v3_entry_problems if version >= 3 else _entry_problems
    if isinstance(adapters, dict):
        doubtful = {}
        for name, entry in adapters.items():
            if not entry_problems(name, entry, semantic) and not whole:
                continue
            doubtful[name] = entry
        target = {**document, "adapters": doubtful}
        if not doubtful and not whole and top_level_clean(document, version):
            # Nothing for the schema to find: jsonschema is not even loaded.
            return []
    problems: list[tuple[str, str]] = []
    for error in _validator(version).iter_errors(target):
        for path, message, superseded in describe_schema_error(error):
            # A semantic message says the same thing as a pattern or length error, better.
            if superseded and path in semantic:
                continue
            problems.append((path, message))
    problems.extend(semantic.items())
    return problems


_TOP_FIELDS = {
    1: frozenset({"schema_version", "adapters"}),
    2: frozenset({"schema_version", "adapters", *IDENTITY_FIELDS}),
    3: frozenset({"schema_version", "adapters", *IDENTITY_FIELDS}),
}
_MAX_FEED_VERSION = 2**53 - 1
_MAX_TIME_CHARS = 64


def top_level_clean(document: dict[str, Any], version: int) -> bool:
    """True only when the feed schema of ``version`` finds nothing wrong with the top level
    of ``document`` once its adapters are taken as clean (a mutation test holds this and
    the schemas in step); False means "ask the schema", not "invalid".

    Each test here is at least as strict as the schema's keywords: exact types (no bool for
    an integer, no 1.0), whole-string matches, the same length limits.
    """
    keys = document.keys()
    if "schema_version" not in keys or "adapters" not in keys:
        return False
    if version == 3:
        identity = keys & set(IDENTITY_FIELDS)
        if not keys <= _TOP_FIELDS[3] or identity not in (set(), set(IDENTITY_FIELDS)):
            return False
    elif keys != _TOP_FIELDS.get(version):
        return False
    value, adapters = document["schema_version"], document["adapters"]
    if type(value) is not int or value != version or type(adapters) is not dict:
        return False
    if len(adapters) > MAX_ADAPTERS:
        return False
    if "feed_id" not in keys:
        return True
    feed_id, number = document["feed_id"], document["version"]
    if type(feed_id) is not str or not _FEED_ID.match(feed_id):
        return False
    if type(number) is not int or not 1 <= number <= _MAX_FEED_VERSION:
        return False
    return all(
        type(document[name]) is str and 1 <= len(document[name]) <= _MAX_TIME_CHARS
        for name in ("published", "expires")
    )


def describe_schema_error(error: ValidationError) -> Iterator[tuple[str, str, bool]]:
    """Schema errors as (path, message, superseded-by-a-semantic-check) in our own words.

    jsonschema's messages embed the whole offending value; ours stay one short line.
    """
    parts: _Path = tuple(error.absolute_path)
    instance = error.instance
    keyword = error.validator
    if "propertyNames" in error.absolute_schema_path:
        # jsonschema reports a bad key at its object; point at the key itself.
        yield format_path((*parts, str(instance))), "not a valid adapter name", True
    elif keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        names = ", ".join(allowed)
        for key in instance:
            if key not in allowed:
                yield format_path((*parts, key)), f"unknown field (allowed: {names})", False
    elif keyword == "required" and isinstance(instance, dict):
        required = error.validator_value
        for key in required if isinstance(required, list) else []:
            if key not in instance:
                yield format_path((*parts, key)), "required field missing", False
    elif keyword == "type":
        expected = error.validator_value
        yield format_path(parts), f"must be {_a(expected)}, not {_json_type(instance)}", False
    elif keyword == "minLength":
        yield format_path(parts), "must not be empty", True
    elif keyword == "maxLength" and isinstance(instance, str):
        limit = error.validator_value
        yield (
            format_path(parts),
            f"too long: {len(instance):,} characters (at most {limit:,})",
            True,
        )
    elif keyword == "pattern":
        yield format_path(parts), f"{show_value(instance)} does not have the required form", True
    elif keyword == "maxProperties":
        yield format_path(parts), f"too many entries (at most {error.validator_value:,})", False
    elif keyword == "maxItems" and isinstance(instance, list):
        limit = error.validator_value
        yield format_path(parts), f"too many items: {len(instance):,} (at most {limit:,})", False
    elif keyword == "enum" and isinstance(error.validator_value, list):
        allowed = ", ".join(str(v) for v in error.validator_value)
        yield format_path(parts), f"{show_value(instance)} is not one of {allowed}", False
    elif (
        keyword == "dependentRequired"
        and isinstance(instance, dict)
        and isinstance(error.validator_value, dict)
    ):
        # Each field of a group names the others; one message per missing field.
        group = ", ".join(error.validator_value)
        for present, needed in error.validator_value.items():
            for key in needed if present in instance else []:
                if key not in instance:
                    yield format_path((*parts, key)), f"give all of {group}, or none", False
    elif keyword == "not" and isinstance(instance, dict):
        yield format_path(parts), "a range ends with fixed or last_affected, not both", False
    else:
        yield format_path(parts), _show(error.message, limit=200), False


def _v2_problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Semantic checks of schema version 2 that a JSON Schema pattern cannot make safely."""
    problems: list[tuple[str, str]] = []
    feed_id = document.get("feed_id")
    if isinstance(feed_id, str) and not _FEED_ID.match(feed_id):
        problems.append(
            (
                "$.feed_id",
                f"{show_value(feed_id)} is not a feed id (letters, digits and . _ : / -, "
                "starting with a letter or digit, at most 128 characters)",
            )
        )
    version = document.get("version")
    # `type(...) is int`: JSON 1.0 passes the schema's "integer", and true equals 1 in Python.
    if isinstance(version, float):
        problems.append(("$.version", f"must be an integer, not the number {version!r}"))
    times = {}
    for name in ("published", "expires"):
        value = document.get(name)
        if not isinstance(value, str):
            continue  # the schema reports the type
        try:
            times[name] = parse_ts(value)
        except FloorguardError:
            problems.append(
                (f"$.{name}", f"{show_value(value)} is not an RFC 3339 time with Z or an offset")
            )
    if len(times) == 2 and times["expires"] < times["published"]:
        problems.append(("$.expires", "expires before it was published"))
    adapters = document.get("adapters")
    if isinstance(adapters, dict):
        for name, entry in adapters.items():
            references = entry.get("references") if isinstance(entry, dict) else None
            if not isinstance(references, list):
                continue
            for index, url in enumerate(references):
                if isinstance(url, str):
                    reason = _reference_problem(url)
                    if reason is not None:
                        path = format_path(("adapters", name, "references", index))
                        problems.append((path, reason))
    return problems


def _reference_problem(url: str) -> str | None:
    if len(url) > MAX_URL_CHARS:
        return f"too long: {len(url):,} characters (at most {MAX_URL_CHARS:,})"
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        return f"{show_value(url)} is not a plain https URL (printable ASCII, no spaces)"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a malformed port)
    except ValueError:
        return f"{show_value(url)} is not a valid URL"
    if parts.scheme != "https" or not parts.hostname:
        return f"{show_value(url)} is not an https URL with a host"
    if parts.username is not None or parts.password is not None:
        return f"{show_value(url)} carries credentials; references must not"
    return None


def _entry_problems(name: str, entry: Any, found: dict[str, str]) -> bool:
    """Add the semantic problems of one adapter entry to ``found``; True unless it is clean."""
    doubtful = False
    reason = name_problem(name)
    if reason is not None:
        found[format_path(("adapters", name))] = reason
        doubtful = True
    if type(entry) is not dict or entry.keys() != _ENTRY_FIELDS:
        doubtful = True  # the schema says what is wrong with its shape
        if type(entry) is not dict:
            return True
    for field, check in _FIELD_CHECKS:
        value = entry.get(field)
        if type(value) is not str:
            doubtful = True
            continue
        reason = check(value)
        if reason is not None:
            found[format_path(("adapters", name, field))] = reason
            doubtful = True
    return doubtful


def name_problem(name: str) -> str | None:
    if _NAME.match(name):
        return None
    if not name.isascii():
        return "adapter names are ASCII only (look-alike letters are refused): " + _quote(
            name, ascii_only=True
        )
    return (
        f"{_quote(name, ascii_only=True)} is not a valid adapter name "
        "(lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, "
        "at most 64 characters)"
    )


def _version_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if value != value.strip():
        return f"{show_value(value)} has surrounding whitespace"
    if len(value) > MAX_VERSION_CHARS:
        return f"too long: {len(value):,} characters (at most {MAX_VERSION_CHARS})"
    if not _VERSION_CHARS.match(value):
        return f"{show_value(value)} is not a valid PEP 440 version"
    try:
        Version(value)
    except (InvalidVersion, ValueError):  # ValueError: e.g. a number past the digit limit
        return f"{show_value(value)} is not a valid PEP 440 version"
    return None


def _shaped_problem(value: str, limit: int, shape: re.Pattern[str], what: str) -> str | None:
    """A short token of a fixed shape: not empty, at most ``limit`` characters, and
    matching ``shape`` as a whole; ``what`` names the shape in the message."""
    if not value:
        return "must not be empty"
    if len(value) > limit:
        return f"too long: {len(value):,} characters (at most {limit})"
    if not shape.match(value):
        return f"{show_value(value)} is not {what}"
    return None


def advisory_id_problem(value: str) -> str | None:
    return _shaped_problem(
        value,
        MAX_ADVISORY_ID_CHARS,
        _ADVISORY_ID,
        "an advisory id (letters, digits and single hyphens, such as BSA-0001 or CVE-2024-1234)",
    )


def _listed_advisory_id_problem(value: str) -> str | None:
    """An advisory's own id or alias (schema 3): an advisory id, and never the pseudo-id
    "floor" in any case. Waivers name the below-floor refusal "floor"; an advisory called so
    would be waived by a waiver reviewed for the floor only."""
    problem = advisory_id_problem(value)
    if problem is None and value.casefold() == map_model.FLOOR_ID:
        return (
            f'{show_value(value)} is reserved: waivers name the floor "{map_model.FLOOR_ID}", '
            "so no advisory may be called so"
        )
    return problem


def note_problem(value: str) -> str | None:
    if not value:
        return "must not be empty (say why the floor exists)"
    if len(value) > MAX_NOTE_CHARS:
        return f"too long: {len(value):,} characters (at most {MAX_NOTE_CHARS:,})"
    # isprintable() refuses newlines, control and format characters (Cc, Cf: bidi overrides),
    # line and paragraph separators (Zl, Zp), surrogates and unassigned code points.
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        category = unicodedata.category(bad)
        what = unicodedata.name(bad, "") or _CATEGORY_WORDS.get(category, category)
        return (
            f"contains the non-printable character U+{ord(bad):04X} ({what}); "
            "a note is one line of printable text"
        )
    found = _NOTE_FORBIDDEN.search(value)
    if found is not None:
        text = found.group()
        why = _NOTE_FORBIDDEN_WHY.get(text, f"template syntax {text!r} (notes are data, not code)")
        return f"contains {why}"
    return None


_ENTRY_FIELDS = frozenset(map_model.ENTRY_FIELDS)
_FIELD_CHECKS = (
    ("min_safe_version", _version_problem),
    ("advisory_id", advisory_id_problem),
    ("note", note_problem),
)


# --- schema version 3 -------------------------------------------------------------------------

_V3_ENTRY_KEYS = frozenset({"ecosystem", "advisories", *map_model.ENTRY_FIELDS})
_V3_REQUIRED = frozenset({"ecosystem", "advisories"})
_ADVISORY_KEYS = frozenset(map_model.ADVISORY_FIELDS)
_ADVISORY_REQUIRED = frozenset({"id", "summary"})
_RANGE_KEYS = frozenset(map_model.RANGE_BOUNDS)
_SEVERITY_KEYS = frozenset(map_model.SEVERITY_FIELDS)
# A CVSS vector or a word; no quote, backslash, space or template syntax can appear.
_SCORE = re.compile(r"[A-Za-z0-9.:/_+()-]+\Z")


class _Findings:
    """Semantic problems of one entry, and whether the schema must look at it too."""

    def __init__(self, found: dict[str, str]) -> None:
        self.found = found
        self.doubtful = False

    def add(self, parts: _Path, reason: str | None) -> None:
        if reason is not None:
            self.found[format_path(parts)] = reason
            self.doubtful = True

    def items(self, value: Any, limit: int) -> list[Any]:
        """A list field's items, or none (and doubtful) when it is no list or too long:
        the schema says what is wrong with it."""
        if type(value) is not list or len(value) > limit:
            self.doubtful = True
            return []
        return value

    def string(self, parts: _Path, value: Any, check: Any) -> bool:
        """Check a string field; a value that is no string is left to the schema."""
        if type(value) is not str:
            self.doubtful = True
            return False
        reason = check(value)
        self.add(parts, reason)
        return reason is None


def _v3_entry_problems(name: str, entry: Any, found: dict[str, str]) -> bool:
    """The semantic problems of one schema 3 entry; True unless it is provably clean.

    Every check here is at least as strict as the schema's keywords for the same value (a
    test holds them in step), so the schema need not run on a clean entry. Structure (a
    wrong type, a missing or unknown field, too many items) is left to the schema.
    """
    findings = _Findings(found)
    findings.add(("adapters", name), name_problem(name))
    if type(entry) is not dict:
        return True
    at: _Path = ("adapters", name)
    keys = entry.keys()
    floor = keys & _ENTRY_FIELDS
    if (
        not keys <= _V3_ENTRY_KEYS
        or not keys >= _V3_REQUIRED
        or floor not in (set(), _ENTRY_FIELDS)
    ):
        findings.doubtful = True
    ecosystem = entry.get("ecosystem")
    if ecosystem not in versions.ECOSYSTEMS:
        # The schema names the ecosystem; versions cannot be judged without one.
        return True
    for field, check in _FIELD_CHECKS:
        if field in entry:
            value = entry[field]
            if field == "min_safe_version":
                findings.string((*at, field), value, lambda v: eco_version_problem(v, ecosystem))
            else:
                findings.string((*at, field), value, check)
    seen: dict[str, int] = {}
    for index, advisory in enumerate(findings.items(entry.get("advisories"), MAX_ADVISORIES)):
        _v3_advisory(
            findings,
            (*at, "advisories", index),
            advisory,
            ecosystem=ecosystem,
            seen=seen,
            index=index,
        )
    return findings.doubtful


def _v3_advisory(
    findings: _Findings,
    at: _Path,
    advisory: Any,
    *,
    ecosystem: str,
    seen: dict[str, int],
    index: int,
) -> None:
    if type(advisory) is not dict:
        findings.doubtful = True
        return
    keys = advisory.keys()
    if not keys <= _ADVISORY_KEYS or not keys >= _ADVISORY_REQUIRED:
        findings.doubtful = True
    ident = advisory.get("id")
    if findings.string((*at, "id"), ident, _listed_advisory_id_problem) and isinstance(ident, str):
        if ident in seen:
            findings.add((*at, "id"), f"the id of advisories[{seen[ident]}] again")
        seen.setdefault(ident, index)
    for i, alias in enumerate(findings.items(advisory.get("aliases", []), MAX_ALIASES)):
        findings.string((*at, "aliases", i), alias, _listed_advisory_id_problem)
    findings.string((*at, "summary"), advisory.get("summary"), _summary_problem)

    def version_check(value: str) -> str | None:
        return eco_version_problem(value, ecosystem)

    spans = findings.items(advisory.get("affected", []), MAX_RANGES)
    for i, span in enumerate(spans):
        _v3_range(findings, (*at, "affected", i), span, ecosystem)
    listed = findings.items(advisory.get("versions", []), MAX_LISTED_VERSIONS)
    for i, version in enumerate(listed):
        findings.string((*at, "versions", i), version, version_check)
    if advisory.get("affected", []) == [] and advisory.get("versions", []) == []:
        findings.add(at, "affects no version: give affected ranges or versions")
    for i, item in enumerate(findings.items(advisory.get("severity", []), MAX_SEVERITY)):
        if type(item) is not dict or item.keys() != _SEVERITY_KEYS:
            findings.doubtful = True
            continue
        if item["type"] not in SEVERITY_TYPES:
            findings.doubtful = True  # the schema lists the types
        findings.string((*at, "severity", i, "score"), item["score"], score_problem)
    for i, url in enumerate(findings.items(advisory.get("references", []), MAX_REFERENCES)):
        findings.string((*at, "references", i), url, v3_reference_problem)


def _v3_range(findings: _Findings, at: _Path, span: Any, ecosystem: str) -> None:
    if type(span) is not dict or not span.keys() <= _RANGE_KEYS or "introduced" not in span:
        findings.doubtful = True
        return
    if "fixed" in span and "last_affected" in span:
        findings.doubtful = True  # the schema says a range has one end
        return
    valid = True
    for bound in map_model.RANGE_BOUNDS:
        if bound not in span:
            continue
        value = span[bound]
        if bound == "introduced" and value == versions.FROM_THE_START:
            continue
        valid &= findings.string((*at, bound), value, lambda v: eco_version_problem(v, ecosystem))
    introduced = span["introduced"]
    if not valid or introduced == versions.FROM_THE_START:
        return
    if "fixed" in span and versions.compare(introduced, span["fixed"], ecosystem) >= 0:
        findings.add(
            (*at, "fixed"),
            f"fixed {show_value(span['fixed'])} is not above introduced "
            f"{show_value(introduced)} (the range would hold no version)",
        )
    last = span.get("last_affected")
    if last is not None and versions.compare(introduced, last, ecosystem) > 0:
        findings.add(
            (*at, "last_affected"),
            f"last_affected {show_value(last)} is below introduced {show_value(introduced)} "
            "(the range would hold no version)",
        )


def eco_version_problem(value: str, ecosystem: str) -> str | None:
    """A version of the adapter's ecosystem: strict SemVer 2.0.0 for npm, PEP 440 for PyPI."""
    if not value:
        return "must not be empty"
    if value != value.strip():
        return f"{show_value(value)} has surrounding whitespace"
    if len(value) > MAX_VERSION_CHARS:
        return f"too long: {len(value):,} characters (at most {MAX_VERSION_CHARS})"
    # The character check first: ASCII only, whole string (no trailing newline slips by).
    if not _VERSION_CHARS.match(value) or not versions.is_valid(value, ecosystem):
        return (
            f"{show_value(value)} is not a valid {versions.order_name(ecosystem)} version "
            f"(the {ecosystem} ecosystem)"
        )
    return None


def _summary_problem(value: str) -> str | None:
    if not value:
        return "must not be empty (say what the advisory is about)"
    return note_problem(value)


def score_problem(value: str) -> str | None:
    return _shaped_problem(
        value,
        MAX_SCORE_CHARS,
        _SCORE,
        "a severity score (a CVSS vector or a word: letters, digits and . : / _ + ( ) -)",
    )


def v3_reference_problem(url: str) -> str | None:
    # The schema's pattern is case-sensitive where urlsplit lowers the scheme: be as strict.
    if not url.startswith("https://"):
        return f"{show_value(url)} is not an https URL with a host"
    return _reference_problem(url)


def _v3_map_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The extended floor-map entry of a checked schema 3 entry, in canonical form."""
    ecosystem = entry["ecosystem"]
    mapped: dict[str, Any] = {key: entry[key] for key in map_model.ENTRY_FIELDS if key in entry}
    mapped["ecosystem"] = ecosystem
    mapped["advisories"] = advisories.union(entry["advisories"], ecosystem)
    mapped["waivers"] = []  # feeds never carry waivers
    return mapped


def _ordered(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Problems without repeats, sorted by path so that output is stable."""
    return sorted(dict.fromkeys(problems), key=lambda problem: problem[0])


# --- display ----------------------------------------------------------------------------------


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _a(expected: object) -> str:
    names = [expected] if isinstance(expected, str) else list(expected)  # type: ignore[call-overload]
    words = [f"an {n}" if str(n)[0] in "aeiou" else f"a {n}" for n in names]
    return " or ".join(words)


def _quote(text: str, *, ascii_only: bool = False) -> str:
    """Text in double quotes with every non-printable (and, if asked, non-ASCII) char escaped,
    so that nothing from a feed can move the cursor or fake a line on a terminal."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable() and (code < 0x80 or not ascii_only):
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _show(text: str, *, limit: int = 80) -> str:
    """Free text for a message: escaped like ``_quote`` but without quotes, and shortened."""
    short = text if len(text) <= limit else text[:limit] + "..."
    return _quote(short)[1:-1]


def show_value(value: object, *, limit: int = 80) -> str:
    if isinstance(value, str):
        short = value if len(value) <= limit else value[:limit] + "..."
        return "'" + _quote(short)[1:-1].replace("'", "\\'") + "'"
    return _show(json.dumps(value) if isinstance(value, bool | int | None) else repr(value))


def show_source(source: str) -> str:
    """A file name or URL as given, with non-printable characters escaped."""
    return source if source.isprintable() else _show(source, limit=len(source))
