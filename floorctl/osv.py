"""OSV records to a schema-3 feed: check each record, keep what maps to an adapter, merge
aliases, and turn OSV affected ranges into the feed's intervals.

Pure apart from the caller's input: records arrive as bytes with a name for messages
(``floorctl.osv_sources`` reads them), and the result is the feed as a JSON value.

Checking is in two steps, for speed. ``_fast_clean`` is a hand check that is at least as
strict as ``schemas/osv.schema.json`` for every record it accepts (a test holds the two in
step); jsonschema runs only on a record the hand check doubts, to say what is wrong. The
semantic checks the schema cannot make (calendar times, advisory-id forms, versions in the
package's ecosystem, duplicate keys) run on records that map to an adapter, the only ones
whose content reaches the feed.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from floorctl import feeds
from floorctl.errors import FeedError, RecordError
from floorctl.feeds import format_path
from floorguard._base._time import parse_ts
from floorguard._maps import map_model, versions
from floorguard._maps.catalog import ADAPTER_OF_NPM_PACKAGE, ADAPTER_OF_PIP_DISTRIBUTION
from floorguard.errors import FloorguardError, InvalidInput

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


# --- mapping packages to adapters -------------------------------------------------------------


def normalise_pypi(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PackageMap:
    """Which OSV package belongs to which adapter, and each adapter's ecosystem."""

    npm: Mapping[str, str]
    pypi: Mapping[str, str]  # keys PEP 503-normalised

    def adapter_of(self, ecosystem: str, name: str) -> str | None:
        if ecosystem == NPM:
            return self.npm.get(name)
        if ecosystem == PYPI:
            return self.pypi.get(normalise_pypi(name))
        return None


def package_map(options: Sequence[str] = ()) -> PackageMap:
    """The catalog's npm packages and pip distributions, plus ``ECOSYSTEM:NAME=ADAPTER``
    options (which win over the catalog for their package).

    Raises InvalidInput (a usage error) for an option that is not of that form, names
    another ecosystem than npm or PyPI, an invalid package or adapter name, or gives one
    adapter packages in both ecosystems (its versions would have no single order).
    """
    npm = dict(ADAPTER_OF_NPM_PACKAGE)
    pypi = dict(ADAPTER_OF_PIP_DISTRIBUTION)
    for option in options:
        match = _PACKAGE_OPTION.match(option)
        shown = json.dumps(option)
        if match is None:
            raise InvalidInput(f"--package {shown}: expected ECOSYSTEM:NAME=ADAPTER")
        ecosystem, name, adapter = match["eco"], match["name"], match["adapter"]
        if ecosystem not in ECOSYSTEMS:
            raise InvalidInput(f"--package {shown}: the ecosystem must be npm or PyPI")
        if not _ADAPTER.match(adapter):
            raise InvalidInput(
                f"--package {shown}: {json.dumps(adapter)} is not an adapter name "
                "(lower-case letters, digits, '.', '_' and '-', at most 64 characters)"
            )
        if ecosystem == NPM:
            if not _NPM_NAME.match(name):
                raise InvalidInput(f"--package {shown}: not an npm package name")
            npm[name] = adapter
        else:
            if not _PYPI_NAME.match(name):
                raise InvalidInput(f"--package {shown}: not a PyPI distribution name")
            pypi[normalise_pypi(name)] = adapter
    both = set(npm.values()) & set(pypi.values())
    if both:
        raise InvalidInput(
            "--package: an adapter's packages must all be npm or all PyPI, not both: "
            + ", ".join(sorted(both))
        )
    return PackageMap(npm=npm, pypi=pypi)


# --- counts and result ------------------------------------------------------------------------


@dataclass
class Counts:
    """What an import read and what it did with it. Skipped counts name their unit."""

    records_read: int = 0
    advisories: int = 0
    adapters: int = 0
    merged_aliases: int = 0
    invalid: int = 0
    withdrawn_records: int = 0
    other_package_records: int = 0
    superseded_records: int = 0
    unsupported_ranges: int = 0
    empty_affected_entries: int = 0
    dropped_severity: int = 0
    dropped_references: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "records_read": self.records_read,
            "imported_advisories": self.advisories,
            "adapters": self.adapters,
            "merged_aliases": self.merged_aliases,
            "invalid_records": self.invalid,
            "skipped": {
                "withdrawn_records": self.withdrawn_records,
                "other_package_records": self.other_package_records,
                "superseded_records": self.superseded_records,
                "unsupported_ranges": self.unsupported_ranges,
                "empty_affected_entries": self.empty_affected_entries,
                "dropped_severity": self.dropped_severity,
                "dropped_references": self.dropped_references,
            },
        }

    def describe(self) -> str:
        return (
            f"{self.records_read:,} records read, {self.advisories:,} advisories imported "
            f"for {self.adapters:,} adapters, {self.merged_aliases:,} merged as aliases; "
            f"skipped {self.withdrawn_records:,} withdrawn, {self.other_package_records:,} "
            f"for other packages, {self.superseded_records:,} superseded, "
            f"{self.unsupported_ranges:,} unsupported ranges, {self.empty_affected_entries:,} "
            f"affected entries without a supported range; dropped "
            f"{self.dropped_severity:,} severity scores and {self.dropped_references:,} "
            f"references the feed cannot carry; {self.invalid:,} invalid"
        )


@dataclass(frozen=True)
class ImportResult:
    feed: dict[str, Any]
    counts: Counts


# --- the import -------------------------------------------------------------------------------


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


class Importer:
    """Accumulates records (``add``) and builds the feed (``result``).

    Memory holds only the records that map to an adapter, reduced to their feed fields.
    """

    def __init__(self, packages: PackageMap) -> None:
        self._packages = packages
        self._ecosystem_of = {a: NPM for a in packages.npm.values()} | {
            a: PYPI for a in packages.pypi.values()
        }
        self.counts = Counts()
        self._kept: dict[str, _Kept] = {}
        self._withdrawn: dict[str, Any] = {}  # id -> latest withdrawn modified time

    def add(self, data: bytes, source: str) -> None:
        """Read the OSV record (or array of records) in ``data``, named ``source``.

        Raises RecordError for the first invalid record (after counting it); records of
        the same array before it are kept, those after it are not read.
        """
        document = _decode(data, source, self.counts)
        if isinstance(document, list):
            items: Iterable[tuple[tuple[str | int, ...], Any]] = (
                ((i,), item) for i, item in enumerate(document)
            )
        else:
            items = (((), document),)
        duplicates_checked = False
        for prefix, record in items:
            self.counts.records_read += 1
            try:
                mapped = self._check(record, source, prefix)
                if mapped is None:
                    continue
                if not duplicates_checked:
                    _refuse_duplicate_keys(data, source, prefix)
                    duplicates_checked = True
                self._keep(record, mapped, source, prefix)
            except RecordError:
                self.counts.invalid += 1
                raise

    def _check(
        self, record: Any, source: str, prefix: tuple[str | int, ...]
    ) -> list[tuple[str, str, int, dict[str, Any]]] | None:
        """Structure and times; None for a record skipped (withdrawn, other packages), else
        its affected entries that map: (adapter, ecosystem, index, entry)."""
        if not _fast_clean(record):
            problems = _schema_problems(record)
            if problems:
                raise _record_error(source, prefix, problems)
        problems = []
        for name in ("modified", "withdrawn"):
            value = record.get(name)
            if value is not None and _parse_time(value) is None:
                problems.append(
                    ((name,), f"{_show(value)} is not an RFC 3339 time (a real date and time)")
                )
        if problems:
            raise _record_error(source, prefix, problems)
        mapped = []
        for index, entry in enumerate(record.get("affected") or ()):
            package = entry.get("package")
            if package is None:
                continue
            adapter = self._packages.adapter_of(package["ecosystem"], package["name"])
            if adapter is not None:
                mapped.append((adapter, self._ecosystem_of[adapter], index, entry))
        if "withdrawn" in record:
            self.counts.withdrawn_records += 1
            if mapped:
                # A withdrawn record supersedes older copies of itself in other sources.
                moment = _parse_time(record["modified"])
                previous = self._withdrawn.get(record["id"])
                if previous is None or moment > previous:
                    self._withdrawn[record["id"]] = moment
            return None
        if not mapped:
            self.counts.other_package_records += 1
            return None
        return mapped

    def _keep(
        self,
        record: dict[str, Any],
        mapped: list[tuple[str, str, int, dict[str, Any]]],
        source: str,
        prefix: tuple[str | int, ...],
    ) -> None:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        record_id = record["id"]
        reason = advisory_id_problem(record_id)
        if reason is not None:
            problems.append((("id",), reason))
        aliases = set()
        for index, alias in enumerate(record.get("aliases") or ()):
            reason = advisory_id_problem(alias)
            if reason is not None:
                problems.append((("aliases", index), reason))
            elif alias != record_id:
                aliases.add(alias)
        if len(aliases) > feeds.MAX_ALIASES:
            # Aliases decide which waivers name an advisory: refused, never cut.
            problems.append((("aliases",), _too_many(len(aliases), "aliases", feeds.MAX_ALIASES)))
        severity: set[tuple[str, str]] = set()
        dropped = _collect_severity(record.get("severity"), ("severity",), severity, problems)
        affected: dict[str, tuple[set[Interval], set[str]]] = {}
        for adapter, ecosystem, index, entry in mapped:
            where: tuple[str | int, ...] = ("affected", index)
            dropped += _collect_severity(
                entry.get("severity"), (*where, "severity"), severity, problems
            )
            ranges, listed = set(), set()
            for r_index, range_ in enumerate(entry.get("ranges") or ()):
                events = range_["events"]
                if range_["type"] not in SUPPORTED_RANGE_TYPES or any(
                    "limit" in event for event in events
                ):
                    self.counts.unsupported_ranges += 1
                    continue
                try:
                    ranges.update(intervals(events, ecosystem))
                except _BadVersion as bad:
                    path = (*where, "ranges", r_index, "events", bad.index, bad.kind)
                    problems.append((path, bad.message))
            for v_index, version in enumerate(entry.get("versions") or ()):
                reason = _version_problem(version, ecosystem)
                if reason is not None:
                    problems.append(((*where, "versions", v_index), reason))
                else:
                    listed.add(version)
            if not ranges and not listed:
                self.counts.empty_affected_entries += 1
                continue
            known = affected.setdefault(adapter, (set(), set()))
            known[0].update(ranges)
            known[1].update(listed)
            # Ranges and listed versions decide verdicts: too many is refused, never cut.
            problems.extend(_span_problems(where, known))
        if problems:
            raise _record_error(source, prefix, problems)
        if not affected:
            return
        references = record.get("references") or ()
        kept_references = frozenset(_https_references(references))
        self.counts.dropped_severity += dropped
        self.counts.dropped_references += len(references) - len(
            [r for r in references if r["url"] in kept_references]
        )
        kept = _Kept(
            id=record_id,
            aliases=frozenset(aliases),
            modified=_parse_time(record["modified"]),
            summary=summary_of(record),
            severity=frozenset(severity),
            references=kept_references,
            affected=affected,
            source=source,
            prefix=prefix,
        )
        previous = self._kept.get(record_id)
        if previous is None:
            self._kept[record_id] = kept
        elif kept.modified > previous.modified:
            self._kept[record_id] = kept  # OSV: the later modification is authoritative
            self.counts.superseded_records += 1
        elif kept.modified < previous.modified:
            self.counts.superseded_records += 1
        else:
            self._kept[record_id] = _union(previous, kept)
            self.counts.merged_aliases += 1

    def result(self) -> ImportResult:
        """The schema-3 feed of everything added so far, and the counts.

        Records merged as aliases may together exceed a cap of the feed that each one
        keeps (aliases, ranges, listed versions): RecordError naming the group's first
        record, even under --skip-invalid. Each record was valid alone, so no single one
        can be blamed and left out, and leaving out the group would drop a real advisory
        because another record names it. More advisories for one adapter than a feed
        holds is a FeedError for the same reason.
        """
        kept = []
        for record in self._kept.values():
            withdrawn_at = self._withdrawn.get(record.id)
            if withdrawn_at is not None and withdrawn_at >= record.modified:
                self.counts.superseded_records += 1
                continue
            kept.append(record)
        groups = _alias_groups(kept)
        adapters: dict[str, list[dict[str, Any]]] = {}
        for group in groups:
            try:
                merged = _merge(group, self._ecosystem_of, self.counts)
            except RecordError:
                self.counts.invalid += len(group)
                raise
            self.counts.merged_aliases += len(group) - 1
            for adapter, advisory in merged.items():
                adapters.setdefault(adapter, []).append(advisory)
        feed: dict[str, Any] = {"schema_version": FEED_SCHEMA_VERSION, "adapters": {}}
        for adapter in sorted(adapters):
            advisories = sorted(adapters[adapter], key=lambda a: a["id"])
            if len(advisories) > feeds.MAX_ADVISORIES:
                # Not one record's fault, so not skippable: dropping any would change verdicts.
                raise FeedError(
                    [
                        (
                            "import osv",
                            format_path(("adapters", adapter, "advisories")),
                            f"{adapter} would get {len(advisories):,} advisories; a feed "
                            f"holds at most {feeds.MAX_ADVISORIES:,} per adapter",
                        )
                    ]
                )
            feed["adapters"][adapter] = {
                "ecosystem": self._ecosystem_of[adapter],
                "advisories": advisories,
            }
            self.counts.advisories += len(advisories)
        self.counts.adapters = len(adapters)
        return ImportResult(feed=feed, counts=self.counts)


def import_records(
    items: Iterable[tuple[str, bytes | RecordError]],
    packages: PackageMap,
    *,
    skip_invalid: bool,
    on_invalid: Callable[[RecordError], None] = lambda error: None,
    progress: Callable[[int], None] | None = None,
    progress_every: int = 10_000,
) -> ImportResult:
    """Import every ``(source, bytes)`` item; an item may instead carry the RecordError
    its reader met (a FIFO, a link out of the tree, an oversized zip member).

    Raises RecordError at the first invalid record unless ``skip_invalid``, in which case
    each is passed to ``on_invalid``, counted, and the import goes on.
    """
    importer = Importer(packages)
    next_progress = progress_every
    for source, data in items:
        try:
            if isinstance(data, RecordError):
                importer.counts.records_read += 1
                importer.counts.invalid += 1
                raise data
            importer.add(data, source)
        except RecordError as error:
            if not skip_invalid:
                raise
            on_invalid(error)
        if progress is not None and importer.counts.records_read >= next_progress:
            progress(importer.counts.records_read)
            next_progress = importer.counts.records_read + progress_every
    return importer.result()


def feed_bytes(feed: dict[str, Any], out: str) -> bytes:
    """The feed as the file ``out`` will hold it, checked by the feed's own parser: the
    import never writes what ``floorctl validate`` refuses. Raises FeedError (naming
    ``out``) if it would not validate, a bug here or a feed past 16 MiB."""
    data = (json.dumps(feed, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        feeds.parse_feed(data, out)
    except FeedError as error:
        raise FeedError(
            [
                (source, path, f"{message} (the imported feed would not validate; nothing written)")
                for source, path, message in error.problems
            ]
        ) from error
    return data


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
        what = path[-1] if path else "value"
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
