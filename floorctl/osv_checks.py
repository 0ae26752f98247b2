"""Checking one OSV record: decoding, the fast hand check, the schema, the semantic checks
the schema cannot make, and turning affected ranges into intervals.

Checking is in two steps, for speed. ``_fast_clean`` is a hand check that is at least as
strict as ``schemas/osv.schema.json`` for every record it accepts (a test holds the two in
step); jsonschema runs only on a record the hand check doubts, to say what is wrong. The
semantic checks the schema cannot make (calendar times, advisory-id forms, versions in the
package's ecosystem, duplicate keys) run on records that map to an adapter, the only ones
whose content reaches the feed.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator, ValidationError

from floorctl import feeds
from floorctl.errors import RecordError
from floorctl.feeds import format_path
from floorguard._base._time import parse_ts
from floorguard._maps import map_model, versions
from floorguard.errors import FloorguardError

if TYPE_CHECKING:
    from floorctl.osv import Counts


SCHEMA_FILE = "osv.schema.json"
FEED_SCHEMA_VERSION = 3
NPM, PYPI = versions.NPM, versions.PYPI
ECOSYSTEMS = (NPM, PYPI)

MAX_SUMMARY_CHARS = 1000  # the schema-1 note rule
MAX_ADVISORY_ID_CHARS = 64
MAX_URL_CHARS = 2048
MAX_SCORE_CHARS = 256
MAX_PROBLEMS_SHOWN = 20

SUPPORTED_RANGE_TYPES = frozenset({"SEMVER", "ECOSYSTEM"})
_EVENT_KINDS = frozenset({"introduced", "fixed", "last_affected", "limit"})

# The feed's rules (schema 1): ids of letters, digits and single hyphens; adapter names.
_ADVISORY_ID = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\Z")
_ADAPTER = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
# Mirrors of the schema's patterns, with \Z (a $ would also match before a final newline).
_ID_CHARS = re.compile(r"[!-~]+\Z")
_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)
_SCHEMA_VERSION = re.compile(r"1(?:\.[0-9]+){0,2}\Z")
_SEVERITY_TYPE = re.compile(r"[A-Za-z0-9_]{1,64}\Z")
# Package names as the registries allow them: npm (lower case, optional scope), PEP 508.
_NPM_NAME = re.compile(r"(?:@[a-z0-9~-][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]{0,213}\Z")
_PYPI_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?\Z")
_PACKAGE_OPTION = re.compile(r"(?P<eco>[^:=]+):(?P<name>[^=]+)=(?P<adapter>.*)\Z", re.DOTALL)
# What a schema-1 note may not hold: a string delimiter, an escape, jinja2 delimiters.
_NOTE_FORBIDDEN = re.compile(r'"|\\|\{\{|\}\}|\{%|%\}|\{#|#\}')
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Interval:
    introduced: str
    fixed: str | None = None
    last_affected: str | None = None

    def as_json(self) -> dict[str, str]:
        out = {"introduced": self.introduced}
        if self.fixed is not None:
            out["fixed"] = self.fixed
        if self.last_affected is not None:
            out["last_affected"] = self.last_affected
        return out


# --- decoding ---------------------------------------------------------------------------------


class _Refused(Exception):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not valid JSON (only finite numbers are)")


def _decode(data: bytes, source: str, counts: Counts) -> Any:
    """Bytes to a JSON object or array; raises RecordError (counted as one record)."""
    reason = None
    document: Any = None
    if data.startswith(b"\xef\xbb\xbf"):
        reason = "starts with a byte order mark; OSV records are UTF-8 without one"
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"not valid UTF-8 (byte offset {exc.start})"
        else:
            try:
                document = json.loads(text, parse_constant=_refuse_constant)
            except _Refused as exc:
                reason = str(exc)
            except json.JSONDecodeError as exc:
                reason = f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            except (ValueError, RecursionError):
                reason = "malformed JSON (a number past the digit limit, or nested too deeply)"
    if reason is None and not isinstance(document, dict | list):
        reason = "an OSV record is a JSON object (or an array of them)"
    if reason is not None:
        counts.records_read += 1
        counts.invalid += 1
        raise RecordError([(source, "$", reason)])
    return document


def _refuse_duplicate_keys(data: bytes, source: str, prefix: tuple[str | int, ...]) -> None:
    """Decode again refusing duplicate keys: only for documents with a record that maps
    (their content reaches the feed; two readers must not see two records)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(items)
        if len(made) != len(items):
            seen: set[str] = set()
            twice = next(key for key, _ in items if key in seen or seen.add(key))  # type: ignore[func-returns-value]
            raise _Refused(f"duplicate key {json.dumps(twice)} (a key may appear once)")
        return made

    try:
        json.loads(data, object_pairs_hook=pairs, parse_constant=_refuse_constant)
    except _Refused as exc:
        raise RecordError([(source, format_path(prefix), str(exc))]) from None


# --- the fast check ---------------------------------------------------------------------------


def _is_str_list(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def _id_ok(value: Any) -> bool:
    return type(value) is str and len(value) <= 256 and _ID_CHARS.match(value) is not None


def _time_ok(value: Any) -> bool:
    return type(value) is str and len(value) <= 64 and _TIME.match(value) is not None


def _severity_ok(value: Any) -> bool:
    if value is None:
        return True
    if type(value) is not list:
        return False
    for item in value:
        if type(item) is not dict:
            return False
        kind, score = item.get("type"), item.get("score")
        if type(kind) is not str or type(score) is not str or not _SEVERITY_TYPE.match(kind):
            return False
    return True


def _event_ok(event: Any) -> bool:
    if type(event) is not dict or len(event) != 1:
        return False
    ((kind, value),) = event.items()
    return kind in _EVENT_KINDS and type(value) is str


def _range_ok(range_: Any) -> bool:
    if type(range_) is not dict:
        return False
    kind, events = range_.get("type"), range_.get("events")
    if kind not in ("GIT", "SEMVER", "ECOSYSTEM") or type(kind) is not str:
        return False
    if kind == "GIT" and type(range_.get("repo")) is not str:
        return False
    if "repo" in range_ and type(range_["repo"]) is not str:
        return False
    if "database_specific" in range_ and type(range_["database_specific"]) is not dict:
        return False
    if type(events) is not list or not events or not all(_event_ok(e) for e in events):
        return False
    kinds = {next(iter(e)) for e in events}
    return "introduced" in kinds and not {"fixed", "last_affected"} <= kinds


def _affected_ok(entry: Any) -> bool:
    if type(entry) is not dict:
        return False
    if "package" in entry:
        package = entry["package"]
        if type(package) is not dict:
            return False
        if type(package.get("ecosystem")) is not str or type(package.get("name")) is not str:
            return False
        if "purl" in package and type(package["purl"]) is not str:
            return False
    if not _severity_ok(entry.get("severity")):
        return False
    ranges = entry.get("ranges")
    if ranges is not None and (type(ranges) is not list or not all(map(_range_ok, ranges))):
        return False
    listed = entry.get("versions")
    if listed is not None and not _is_str_list(listed):
        return False
    for name in ("ecosystem_specific", "database_specific"):
        if name in entry and type(entry[name]) is not dict:
            return False
    return True


def _fast_clean(record: Any) -> bool:
    """True only for a record that ``schemas/osv.schema.json`` accepts (a test holds the
    two in step); False means "ask the schema", not "invalid"."""
    if type(record) is not dict:
        return False
    if not _id_ok(record.get("id")) or not _time_ok(record.get("modified")):
        return False
    if "withdrawn" in record and not _time_ok(record["withdrawn"]):
        return False
    if "schema_version" in record:
        value = record["schema_version"]
        if type(value) is not str or not _SCHEMA_VERSION.match(value):
            return False
    aliases = record.get("aliases")
    if aliases is not None and (type(aliases) is not list or not all(map(_id_ok, aliases))):
        return False
    for name in ("summary", "details"):
        if name in record and type(record[name]) is not str:
            return False
    if not _severity_ok(record.get("severity")):
        return False
    affected = record.get("affected")
    if affected is not None and (
        type(affected) is not list or not all(map(_affected_ok, affected))
    ):
        return False
    references = record.get("references")
    if references is not None:
        if type(references) is not list:
            return False
        for item in references:
            if type(item) is not dict:
                return False
            if type(item.get("type")) is not str or type(item.get("url")) is not str:
                return False
    return not ("database_specific" in record and type(record["database_specific"]) is not dict)


# --- the schema, for records the fast check doubts --------------------------------------------


@functools.cache
def validator() -> Draft202012Validator:
    """The OSV subset schema, compiled once."""
    resource = importlib.resources.files("floorctl._schemas") / SCHEMA_FILE
    schema = json.loads(resource.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _schema_problems(record: Any) -> list[tuple[tuple[str | int, ...], str]]:
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for error in validator().iter_errors(record):
        problems.extend(_describe(error))
    return sorted(dict.fromkeys(problems), key=lambda p: format_path(p[0]))


def _describe(error: ValidationError) -> Iterator[tuple[tuple[str | int, ...], str]]:
    path: tuple[str | int, ...] = tuple(error.absolute_path)
    keyword = error.validator
    instance = error.instance
    if keyword == "required" and isinstance(instance, dict):
        for key in error.validator_value or ():  # type: ignore[union-attr]
            if key not in instance:
                yield (*path, key), "required field missing"
    elif keyword == "type":
        expected = error.validator_value
        names = " or ".join(expected) if isinstance(expected, list) else str(expected)
        yield path, f"must be of type {names}, not {_json_type(instance)}"
    elif keyword == "enum":
        allowed = ", ".join(str(v) for v in error.validator_value)  # type: ignore[union-attr]
        yield path, f"{_show(instance)} is not one of {allowed}"
    elif keyword in {"pattern", "maxLength", "minLength"}:
        # (named by its field; an item of a list, ``aliases[0]``, by the list's)
        field = next((part for part in reversed(path) if isinstance(part, str)), "value")
        what = f"{field} entry" if path and isinstance(path[-1], int) else field
        yield path, f"{_show(instance)} is not a valid {what}"
    elif keyword == "contains":
        yield path, "the events must include an introduced event"
    elif keyword == "not":
        yield path, "the events may end ranges with fixed or last_affected, not both"
    elif keyword == "minItems":
        yield path, "must not be empty"
    elif keyword in ("minProperties", "maxProperties", "additionalProperties"):
        yield path, "an event holds exactly one of introduced, fixed, last_affected, limit"
    else:
        yield path, _show(error.message, limit=200)


# --- semantic checks --------------------------------------------------------------------------


def _parse_time(value: str) -> Any:
    """The UTC datetime of an RFC 3339 string the schema's pattern accepted, or None."""
    text = value.upper()
    # fromisoformat takes at most six fraction digits; OSV times may carry nanoseconds.
    match = re.match(r"(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)\Z", text)
    if match is None:
        return None
    fraction = (match[2] or "")[:7]
    try:
        return parse_ts(match[1] + fraction + match[3])
    except FloorguardError:
        return None


def advisory_id_problem(value: str) -> str | None:
    if len(value) > MAX_ADVISORY_ID_CHARS or not _ADVISORY_ID.match(value):
        return (
            f"{_show(value)} is not an advisory id of the feed (letters, digits and single "
            f"hyphens, at most {MAX_ADVISORY_ID_CHARS} characters)"
        )
    if value.casefold() == map_model.FLOOR_ID:
        # A waiver naming "floor" covers the below-floor refusal; an advisory (or alias)
        # of that name would be waived by it too.
        return f'{_show(value)} is reserved: "{map_model.FLOOR_ID}" names the below-floor refusal'
    return None


def _version_problem(version: str, ecosystem: str) -> str | None:
    if version != version.strip() or not versions.is_valid(version, ecosystem):
        return f"{_show(version)} is not a valid {versions.order_name(ecosystem)} version"
    # The feed's own rule too (ASCII, at most 128 characters).
    return feeds.eco_version_problem(version, ecosystem)


def _too_many(count: int, what: str, cap: int) -> str:
    return f"too many {what}: {count:,} (a feed advisory carries at most {cap:,})"


def _span_problems(
    where: tuple[str | int, ...], known: tuple[set[Interval], set[str]]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    ranges, listed = known
    if len(ranges) > feeds.MAX_RANGES:
        yield (*where, "ranges"), _too_many(len(ranges), "ranges", feeds.MAX_RANGES)
    if len(listed) > feeds.MAX_LISTED_VERSIONS:
        yield (
            (*where, "versions"),
            _too_many(len(listed), "listed versions", feeds.MAX_LISTED_VERSIONS),
        )


def _collect_severity(
    value: Any,
    where: tuple[str | int, ...],
    into: set[tuple[str, str]],
    problems: list[tuple[tuple[str | int, ...], str]],
) -> int:
    """Add the severity items the feed can carry to ``into``; the number dropped.

    A score that could inject (a quote, backslash, template syntax, a control) marks a
    hostile record: a problem. A type the feed does not list, or a score that is not a
    feed score (a CVSS vector or a word), is only decorative: dropped and counted.
    """
    dropped = 0
    for index, item in enumerate(value or ()):
        score = item["score"]
        if (
            not score
            or len(score) > MAX_SCORE_CHARS
            or not score.isprintable()
            or _NOTE_FORBIDDEN.search(score)
        ):
            problems.append(
                (
                    (*where, index, "score"),
                    f"{_show(score)} is not a severity score the feed can carry (one printable "
                    f'line of at most {MAX_SCORE_CHARS} characters, no " or \\ or template '
                    "syntax)",
                )
            )
        elif item["type"] not in feeds.SEVERITY_TYPES or feeds.score_problem(score):
            dropped += 1
        else:
            into.add((item["type"], score))
    return dropped


class _BadVersion(Exception):
    def __init__(self, index: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.index, self.kind, self.message = index, kind, message


def _order(version: str, ecosystem: str, introduced: bool) -> tuple[Any, ...]:
    """Sort key of a bound: introduced "0" before every version."""
    if introduced and version == versions.FROM_THE_START:
        return (0,)
    return (1, versions.parse(version, ecosystem))


def intervals(events: Sequence[Mapping[str, str]], ecosystem: str) -> list[Interval]:
    """An OSV SEMVER or ECOSYSTEM range's events as intervals.

    The events are ordered by version in the ecosystem's order (introduced "0" first; at
    one version, introduced before what closes), then walked: introduced opens an
    interval, fixed (exclusive) or last_affected (inclusive) closes the open one, and an
    interval still open at the end has no end. An empty interval (fixed at its own
    introduced version) is dropped. Raises _BadVersion for a version that is not valid in
    ``ecosystem``.
    """
    keyed = []
    for index, event in enumerate(events):
        ((kind, version),) = event.items()
        if not (kind == "introduced" and version == versions.FROM_THE_START):
            reason = _version_problem(version, ecosystem)
            if reason is not None:
                raise _BadVersion(index, kind, reason)
        is_intro = kind == "introduced"
        keyed.append((_order(version, ecosystem, is_intro), 0 if is_intro else 1, kind, version))
    keyed.sort(key=lambda item: (item[0], item[1]))
    found: list[Interval] = []
    opened: tuple[Any, str] | None = None
    for order, _, kind, version in keyed:
        if kind == "introduced":
            if opened is None:
                opened = (order, version)
            continue
        if opened is None:
            continue
        if kind == "fixed":
            if order != opened[0]:
                found.append(Interval(opened[1], fixed=version))
        else:
            found.append(Interval(opened[1], last_affected=version))
        opened = None
    if opened is not None:
        found.append(Interval(opened[1]))
    return found


def summary_of(record: Mapping[str, Any]) -> str:
    """One printable line within the schema-1 note rules: ``summary``, else the first
    non-blank line of ``details`` (without Markdown heading marks), else the id."""
    text = record.get("summary") or ""
    if not text.strip():
        for line in (record.get("details") or "").splitlines():
            if line.strip():
                text = line.strip().lstrip("#")
                break
    text = normalise_summary(text)
    return text or normalise_summary(record["id"]) or "advisory"


def normalise_summary(text: str) -> str:
    """``text`` as a schema-1 note: every run of white space and non-printable characters
    (newlines, controls, bidi overrides) one space; ``"`` as ``'`` and ``\\`` as ``/``;
    jinja2 delimiters ({{ }} {% %} {# #}) split by a space; at most 1000 characters."""
    text = "".join(c if c.isprintable() else " " for c in text)
    text = _SPACES.sub(" ", text).strip().replace('"', "'").replace("\\", "/")
    while True:
        found = _NOTE_FORBIDDEN.search(text)
        if found is None:
            break
        text = _NOTE_FORBIDDEN.sub(lambda m: m.group()[0] + " " + m.group()[1], text)
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 3].rstrip() + "..."
    return text


def _https_references(value: Any) -> Iterator[str]:
    for item in value or ():
        url = item["url"]
        # The feed's rule as well (it wants "https://" exactly; urlsplit lowers a scheme).
        if _is_https_url(url) and feeds.v3_reference_problem(url) is None:
            yield url


def _is_https_url(url: str) -> bool:
    """The feed's rule for references: a plain https URL with a host and no credentials."""
    if len(url) > MAX_URL_CHARS or not url.isascii() or not url.isprintable():
        return False
    if any(c.isspace() for c in url) or '"' in url or "\\" in url:
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a malformed port)
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and bool(parts.hostname)
        and parts.username is None
        and parts.password is None
    )


# --- messages ---------------------------------------------------------------------------------

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer"}


def _json_type(value: object) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), "number")


def _show(value: object, *, limit: int = 80) -> str:
    """A value for a message: JSON-quoted (so controls are escaped), shortened."""
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _record_error(
    source: str, prefix: tuple[str | int, ...], problems: list[tuple[tuple[str | int, ...], str]]
) -> RecordError:
    shown = problems[:MAX_PROBLEMS_SHOWN]
    listed = [(source, format_path((*prefix, *path)), message) for path, message in shown]
    if len(problems) > len(shown):
        listed.append((source, format_path(prefix), f"and {len(problems) - len(shown)} more"))
    return RecordError(listed)
