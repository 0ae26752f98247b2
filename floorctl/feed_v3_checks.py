"""The semantic checks of schema version 3 entries: advisories, ranges, severity, references."""

from __future__ import annotations

import re
from typing import Any

from floorctl.feed_checks import (
    _ENTRY_FIELDS,
    _FIELD_CHECKS,
    _listed_advisory_id_problem,
    _reference_problem,
    _shaped_problem,
    local_label_problem,
    name_problem,
    note_problem,
)
from floorctl.feed_messages import format_path, show_value
from floorctl.feed_rules import (
    _VERSION_CHARS,
    MAX_ADVISORIES,
    MAX_ALIASES,
    MAX_LISTED_VERSIONS,
    MAX_RANGES,
    MAX_REFERENCES,
    MAX_SCORE_CHARS,
    MAX_SEVERITY,
    MAX_VERSION_CHARS,
    SEVERITY_TYPES,
    _Path,
)
from floorguard._maps import map_model, versions
from floorguard._maps.catalog import ecosystem_of
from floorguard._maps.packages import kind_problem, package_problem

# --- schema version 3 -------------------------------------------------------------------------

_V3_ENTRY_KEYS = frozenset(
    {"ecosystem", "advisories", *map_model.ENTRY_FIELDS, *map_model.PACKAGE_FIELDS}
)
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
    known = ecosystem_of(name)
    if known is not None and ecosystem != known:
        # The runtime compares a catalogued CLI's versions in its own ecosystem's order
        # whatever a feed says: a contrary claim is refused here, as refresh refuses it.
        findings.add(
            (*at, "ecosystem"),
            f"{name} is an {known} CLI in floorguard's catalog (its versions compare by "
            f"{versions.order_name(known)}), not {show_value(ecosystem)}",
        )
    _v3_package(findings, at, entry, ecosystem)
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


def _v3_package(findings: _Findings, at: _Path, entry: dict[str, Any], ecosystem: str) -> None:
    """``package`` (the registry name, in the one spelling the ecosystem compares) and
    ``kind``, which come together."""
    present = entry.keys() & set(map_model.PACKAGE_FIELDS)
    if not present:
        return
    if len(present) == 1:
        missing = ({*map_model.PACKAGE_FIELDS} - present).pop()
        findings.add((*at, missing), f"{missing} is given with {present.pop()} (both or neither)")
        return
    findings.string((*at, "package"), entry["package"], lambda v: package_problem(ecosystem, v))
    findings.string((*at, "kind"), entry["kind"], kind_problem)


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
    if ecosystem != versions.NPM:
        return local_label_problem(value)
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
