"""SARIF 2.1.0 and Markdown renderings of the ``doctor`` and ``verify chain`` documents.

Pure functions over the JSON documents both CLIs already print (``doctor --json``,
``verify chain --json``), so that ``floorctl`` and ``python -m floorguard`` print the same
bytes for every ``--format``. Imported only when one of these formats is asked for.

Rule ids are stable: a code-scanning service tracks an alert across runs by its rule id, so
an id is never reused for another meaning or renamed (README.md lists them).
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from floorguard._base._text import terminal_json
from floorguard._version import __version__

FORMATS = ("text", "json", "sarif", "markdown")
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
TOOL_NAME = "floorguard"
INFORMATION_URI = "https://pypi.org/project/floorguard/"


@dataclass(frozen=True)
class Rule:
    """A SARIF reportingDescriptor: a stable id, a readable name, the level of its results."""

    id: str
    name: str
    level: str  # SARIF result.level: "error", "warning" or "note"
    description: str


# The doctor's statuses and what each becomes in SARIF: one table, so that a new status
# joins by one row. A status absent from both this table and NO_FINDING is reported under
# UNCLASSIFIED at error level (fail closed: an unknown status is never silently dropped).
DOCTOR_RULES: Mapping[str, Rule] = {
    "below_floor": Rule(
        "FG001", "BelowFloor", "error", "The installed version is below the adapter's floor."
    ),
    "affected": Rule(
        "FG002", "AffectedByAdvisory", "error", "The installed version is inside an advisory."
    ),
    "unknown_version": Rule(
        "FG003",
        "UnknownVersion",
        "error",
        "The installed version cannot be read or is not a version of its ecosystem.",
    ),
    "ahead_of_last_green": Rule(
        "FG004",
        "AheadOfLastGreen",
        "warning",
        "The installed version is newer than the adapter's last green canary run.",
    ),
}
NO_FINDING = frozenset({"ok", "waived", "not_installed"})
# An MCP server an installed agent would start, refused as the gate would refuse it (below
# its floor, inside an advisory, or a declaration or program it cannot identify).
SERVER_REFUSED = Rule(
    "FG005",
    "McpServerRefused",
    "error",
    "An MCP server an installed agent would start is refused: below its floor, inside an "
    "advisory, or not identifiable.",
)
UNCLASSIFIED = Rule(
    "FG000", "UnclassifiedStatus", "error", "A doctor status this renderer has no rule for."
)
CHAIN_VIOLATION = Rule(
    "FG101",
    "SpawnPermittedWhileUnsafe",
    "error",
    "A spawn was permitted while the adapter was unsafe under the floor map it pins.",
)
CHAIN_INTEGRITY = Rule(
    "FG102",
    "ChainIntegrity",
    "error",
    "The slice is not intact, continuous, authenticated or covering the window.",
)
ALL_RULES = (
    *DOCTOR_RULES.values(),
    UNCLASSIFIED,
    SERVER_REFUSED,
    CHAIN_VIOLATION,
    CHAIN_INTEGRITY,
)


def doctor_rule(status: str) -> Rule | None:
    """The rule a doctor status is reported under, or None when it is no finding."""
    if status in NO_FINDING:
        return None
    return DOCTOR_RULES.get(status, UNCLASSIFIED)


# --- SARIF ------------------------------------------------------------------------------------


def _rule_descriptor(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.description},
        "defaultConfiguration": {"level": rule.level},
        "helpUri": INFORMATION_URI,
    }


def _log(rules: Sequence[Rule], results: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": [_rule_descriptor(r) for r in rules],
                    }
                },
                "results": results,
                **run,
            }
        ],
    }


def _result(
    rules: Sequence[Rule], rule: Rule, text: str, location: dict[str, Any], identity: str
) -> dict[str, Any]:
    # Several results share one file and no line (every adapter's floor is in the map): a
    # fingerprint of what the finding is about keeps a code-scanning service from merging
    # them into one alert, and matches the same finding across runs.
    fingerprint = hashlib.sha256(f"{rule.id}\0{identity}".encode()).hexdigest()
    return {
        "ruleId": rule.id,
        "ruleIndex": list(rules).index(rule),
        "level": rule.level,
        "message": {"text": text},
        "locations": [location],
        "partialFingerprints": {"floorguardFinding/v1": fingerprint},
    }


def _physical(uri: str | None, line: int | None = None) -> dict[str, Any]:
    if not uri:
        return {}
    region = {} if line is None else {"region": {"startLine": line}}
    return {"physicalLocation": {"artifactLocation": {"uri": uri}, **region}}


def doctor_sarif(
    document: Mapping[str, Any],
    *,
    map_uri: str | None,
    map_lines: Mapping[str, int] | None = None,
    strict: bool = False,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """The SARIF log of a ``doctor --json`` document: one result per adapter whose status is
    a finding, located in the floor map in force (``map_uri``) at the line of the adapter's
    entry (``map_lines``; line 1 when not known: a physical location always has a region)
    and at the adapter; and one per refused MCP server, located in the file that declares
    it (relative to ``cwd`` when inside it) and at the agent's server. The invocation's exit
    code is the doctor's: a warning alone fails only under ``strict``."""
    rules = [*DOCTOR_RULES.values(), UNCLASSIFIED, SERVER_REFUSED]
    results = []
    for adapter in document["adapters"]:
        rule = doctor_rule(adapter["status"])
        if rule is None:
            continue
        name = adapter["adapter"]
        version = adapter.get("version") or "(version unknown)"
        text = f"{name} {version} is {adapter['status']}: {adapter.get('reason') or '-'}"
        location = {
            **_physical(map_uri, (map_lines or {}).get(name, 1)),
            "logicalLocations": [{"name": name, "fullyQualifiedName": name, "kind": "module"}],
        }
        found = _result(rules, rule, text, location, f"{name}\0{adapter.get('version')}")
        found["properties"] = {
            key: adapter.get(key)
            for key in ("binary", "version", "floor", "refuses_below", "advisory_id")
        }
        results.append(found)
    results += [_server_result(rules, server, cwd) for server in _refused_servers(document)]
    failed = any(r["level"] == "error" for r in results) or (strict and bool(results))
    invocation = {"executionSuccessful": True, "exitCode": 1 if failed else 0}
    return _log(
        rules,
        results,
        invocations=[invocation],
        properties={
            "floor_map_hash": document["floor_map_hash"],
            "posture_receipt": document["receipt_id"],
        },
    )


# The verdicts of a server that are no finding: let run, by the floor or by the policy (a
# warn-override, an untracked program allowed), or not judged (remote, disabled). Any other,
# "refuse" or one this renderer does not know, is reported: never silently dropped.
SERVER_NO_FINDING = frozenset({"permit", "warn_override", "untracked", "remote", "disabled"})


def _refused_servers(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    servers = document.get("mcp_servers") or []
    return [s for s in servers if s.get("verdict") not in SERVER_NO_FINDING]


def _server_label(server: Mapping[str, Any]) -> str:
    return f"{server['agent']}'s MCP server {server.get('name') or '(its configuration)'}"


def _server_result(
    rules: Sequence[Rule], server: Mapping[str, Any], cwd: Path | None
) -> dict[str, Any]:
    declared = server.get("declared_in")
    if not declared:
        uri = None
    elif cwd is None:  # (no repository to be relative to)
        uri = Path(declared).absolute().as_uri()
    else:
        uri = artifact_uri(declared, cwd)
    label = _server_label(server)
    what = " ".join(filter(None, [server.get("command"), server.get("version")]))
    text = f"{label}{f' ({what})' if what else ''} is refused: {server.get('reason') or '-'}"
    qualified = f"{server['agent']}/{server.get('name') or '-'}"
    location = {
        **_physical(uri, 1),
        "logicalLocations": [
            {"name": qualified, "fullyQualifiedName": qualified, "kind": "module"}
        ],
    }
    identity = f"{qualified}\0{declared}\0{server.get('at')}\0{server.get('version')}"
    found = _result(rules, SERVER_REFUSED, text, location, identity)
    found["properties"] = {
        key: server.get(key)
        for key in ("agent", "name", "declared_in", "at", "command", "version", "verdict")
    }
    return found


def chain_sarif(document: Mapping[str, Any], *, slice_uri: str | None) -> dict[str, Any]:
    """The SARIF log of a ``verify chain --json`` document: one result per integrity error
    and per violation, located in the slice file and at the record's seq; the verdict
    (``proven``) is in the run's properties and its invocation's exit code."""
    rules = [CHAIN_VIOLATION, CHAIN_INTEGRITY]
    results = []
    findings = [(CHAIN_INTEGRITY, e) for e in document["integrity_errors"]] + [
        (CHAIN_VIOLATION, v) for v in document["violations"]
    ]
    for rule, finding in findings:
        seq = finding["seq"]
        where = f"seq {seq}" if seq is not None else "slice"
        logical = {"name": where, "fullyQualifiedName": f"{slice_uri or '-'}#{where}"}
        location = {**_physical(slice_uri), "logicalLocations": [{**logical, "kind": "object"}]}
        text = f"{where}: {finding['reason']}"
        found = _result(rules, rule, text, location, f"{slice_uri}\0{seq}\0{finding['reason']}")
        found["properties"] = {"seq": seq}
        results.append(found)
    proven = bool(document["proven"])
    return _log(
        rules,
        results,
        invocations=[{"executionSuccessful": True, "exitCode": 0 if proven else 1}],
        properties={
            "verdict": "PROVEN" if proven else "NOT PROVEN",
            **{k: document[k] for k in ("proven", "since", "until", "records", "authenticated_by")},
        },
    )


# --- Markdown ---------------------------------------------------------------------------------


def _cell(value: object) -> str:
    """A table cell: one line, with the characters that would end or format a cell escaped."""
    text = "-" if value is None or value == "" else str(value)
    text = " ".join(text.split())
    # A control or format character (a bidi override above all) would reorder what a
    # reader sees of the row: shown as its escape.
    text = "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf") else c for c in text
    )
    for char in ("\\", "|", "`", "*", "_", "<", ">", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text


def _status_cell(adapter: Mapping[str, Any]) -> str:
    status = str(adapter["status"])
    if status == "waived" and adapter.get("waiver_id"):
        return f"{status} ({adapter['waiver_id']}, {adapter.get('waiver_days_left')} day(s) left)"
    if adapter.get("advisory_id") and status in ("below_floor", "affected"):
        return f"{status} ({adapter['advisory_id']})"
    return status


def doctor_markdown(document: Mapping[str, Any]) -> str:
    """A pull-request comment: a heading with the count of findings, then one row per
    adapter (adapter, installed, floor, status)."""
    adapters = document["adapters"]
    refused = _refused_servers(document)
    findings = sum(doctor_rule(a["status"]) is not None for a in adapters) + len(refused)
    heading = "all installed adapters ok" if not findings else f"{findings} finding(s)"
    lines = [
        f"### floorguard doctor: {heading}",
        "",
        "| adapter | installed | floor | status |",
        "|---|---|---|---|",
    ]
    for a in adapters:
        # The boundary the gate refuses below; a document from before it was a field: the floor.
        floor = a["refuses_below"] if "refuses_below" in a else a.get("floor")
        cells = (a["adapter"], a.get("version"), floor, _status_cell(a))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    servers = document.get("mcp_servers") or []
    if servers:
        lines += [
            "",
            "| agent | MCP server | runs | version | verdict | declared in |",
            "|---|---|---|---|---|---|",
        ]
        for s in servers:
            where = f"{s['declared_in']} at {s.get('at')}" if s.get("declared_in") else None
            row = (s["agent"], s.get("name"), s.get("command"), s.get("version"),
                   s.get("verdict"), where)  # fmt: skip
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    lines += [
        "",
        f"floor map `{document['floor_map_hash']}`, posture receipt `{document['receipt_id']}`",
    ]
    return "\n".join(lines) + "\n"


def chain_markdown(document: Mapping[str, Any]) -> str:
    """A pull-request comment: **PROVEN** or **NOT PROVEN**, then one row per finding."""
    verdict = "PROVEN" if document["proven"] else "NOT PROVEN"
    window = f"{document['since'] or 'start of slice'} .. {document['until'] or 'end of slice'}"
    by = document["authenticated_by"] or "nothing (not authenticated)"
    lines = [
        f"### floorguard verify chain: **{verdict}**",
        "",
        f"{document['records']} record(s); window {_cell(window)}; authenticated by {by}",
    ]
    findings = [("integrity", e) for e in document["integrity_errors"]] + [
        ("violation", v) for v in document["violations"]
    ]
    if findings:
        lines += ["", "| seq | finding | reason |", "|---|---|---|"]
        lines += [f"| {_cell(f['seq'])} | {kind} | {_cell(f['reason'])} |" for kind, f in findings]
    return "\n".join(lines) + "\n"


# --- the edge both CLIs share -----------------------------------------------------------------


def artifact_uri(path: str | PurePath | None, cwd: Path) -> str | None:
    """A SARIF artifact URI for a file: relative to ``cwd`` when inside it (as code-scanning
    services expect: a path in the repository), else an absolute ``file:`` URI; None for
    standard input."""
    if path is None or str(path) == "-":
        return None
    from urllib.parse import quote

    absolute = Path(cwd, path).absolute()
    try:
        relative = absolute.relative_to(cwd.absolute()).as_posix()
    except ValueError:
        return absolute.as_uri()
    # A URI reference, percent-encoded as as_uri() encodes: a '#', '?' or space in a file
    # name would otherwise end the path (a fragment, a query) or make the URI invalid.
    # (its bytes: a name that is not UTF-8 holds surrogates, which only they can spell)
    return quote(os.fsencode(relative), safe="/")


@dataclass(frozen=True)
class MapArtifact:
    """The floor map in force as the doctor's SARIF locates findings in it: its URI and the
    line of each adapter's entry."""

    uri: str | None
    lines: Mapping[str, int]


def doctor_map_artifact(cwd: Path) -> MapArtifact:
    """The floor map in force (the doctor's findings are about its entries). A module is
    parsed for its entries' lines; a published map is canonical JSON, all on line 1.
    Raises FloorMapError, as the doctor itself does, when no map can be trusted."""
    from floorguard._base.files import read_regular
    from floorguard._maps import active_map
    from floorguard.errors import FloorMapError, UnreadableFileError

    in_force = active_map.current()
    lines: dict[str, int] = dict.fromkeys(in_force.floor_map, 1)
    if in_force.source.endswith(".py"):
        try:
            text = read_regular(
                in_force.source, max_bytes=active_map.MAX_MAP_FILE_BYTES, what="floor map"
            )
        except UnreadableFileError as exc:
            raise FloorMapError(str(exc)) from exc
        lines.update(active_map.entry_lines(text, in_force.source))
    return MapArtifact(artifact_uri(in_force.source, cwd), lines)


def render(
    report: str,
    output_format: str,
    document: Mapping[str, Any],
    artifact: str | None,
    *,
    strict: bool = False,
    lines: Mapping[str, int] | None = None,
    cwd: Path | None = None,
) -> str:
    """What ``doctor`` (``report="doctor"``) or ``verify chain`` (``report="chain"``) prints
    for a ``--format`` other than text, ending in a newline. ``artifact`` is the floor map's
    or the slice's URI (see ``artifact_uri``); ``strict`` is the doctor's ``--strict``;
    ``lines`` the line of each adapter's entry in the map (``doctor_map_artifact``); ``cwd``
    what the files declaring MCP servers are located relative to.
    Raises ValueError for another format."""
    if output_format == "json":
        return _dumps(document)
    if output_format == "sarif":
        if report == "doctor":
            sarif = doctor_sarif(
                document, map_uri=artifact, map_lines=lines, strict=strict, cwd=cwd
            )
            return _dumps(sarif)
        return _dumps(chain_sarif(document, slice_uri=artifact))
    if output_format == "markdown":
        return doctor_markdown(document) if report == "doctor" else chain_markdown(document)
    raise ValueError(f"no rendering of {report} as {output_format!r}")


def _dumps(document: Mapping[str, Any]) -> str:
    return terminal_json(document) + "\n"
