"""OSV records to a schema-3 feed: the import that counts what it reads, keeps what maps to
an adapter and writes the feed.

Pure apart from the caller's input: records arrive as bytes with a name for messages
(``floorctl.osv_sources`` reads them), and the result is the feed as a JSON value. Checking a
record is in ``floorctl.osv_checks``, mapping packages to adapters in ``floorctl.osv_packages``,
merging aliases in ``floorctl.osv_merge``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from floorctl import feeds
from floorctl.errors import FeedError, RecordError
from floorctl.feeds import format_path
from floorctl.osv_checks import (
    FEED_SCHEMA_VERSION,
    NPM,
    PYPI,
    SUPPORTED_RANGE_TYPES,
    Interval,
    _BadVersion,
    _collect_severity,
    _decode,
    _fast_clean,
    _https_references,
    _parse_time,
    _record_error,
    _refuse_duplicate_keys,
    _schema_problems,
    _show,
    _span_problems,
    _too_many,
    _version_problem,
    advisory_id_problem,
    intervals,
    summary_of,
    validator,
)
from floorctl.osv_merge import _alias_groups, _Kept, _merge, _union
from floorctl.osv_packages import PackageMap, package_map

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
            feed["adapters"][adapter] = {"ecosystem": self._ecosystem_of[adapter]}
            if adapter in self._packages.named:
                package, kind = self._packages.named[adapter]
                feed["adapters"][adapter] |= {"package": package, "kind": kind}
            feed["adapters"][adapter]["advisories"] = advisories
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


# Used by other modules and tests from here (they moved to osv_checks and osv_packages).
__all__ = ["_fast_clean", "intervals", "package_map", "validator"]
