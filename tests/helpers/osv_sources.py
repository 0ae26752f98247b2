"""A GitHub advisory database tree and an OSV zip of real-shaped records: the import's sources."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

CLAUDE = "@anthropic-ai/claude-code"


GEMINI = "@google/gemini-cli"


MODIFIED = "2025-06-01T12:00:00Z"


def record(record_id: str, *affected: dict[str, Any], **fields: Any) -> dict[str, Any]:
    made: dict[str, Any] = {
        "schema_version": "1.6.0",
        "id": record_id,
        "modified": MODIFIED,
        "published": MODIFIED,
        "affected": list(affected),
    }
    made.update(fields)
    return made


def npm(name: str, *ranges: dict[str, Any], versions: list[str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"package": {"ecosystem": "npm", "name": name}, "ranges": list(ranges)}
    if versions is not None:
        entry["versions"] = versions
    return entry


def pypi(name: str, *ranges: dict[str, Any]) -> dict[str, Any]:
    return {"package": {"ecosystem": "PyPI", "name": name}, "ranges": list(ranges)}


def rng(*events: tuple[str, str], kind: str = "SEMVER", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "events": [{k: v} for k, v in events], **extra}


# The advisory fixed on two release lines (1.x at 1.4.7, 2.x at 2.1.3), with its CVE.
BACKPORT = record(
    "GHSA-2222-3333-4444",
    npm(
        CLAUDE,
        rng(("introduced", "0"), ("fixed", "1.4.7"), ("introduced", "2.0.0"), ("fixed", "2.1.3")),
    ),
    aliases=["CVE-2025-1111"],
    summary="Command injection in hooks",
    severity=[{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
    references=[
        {"type": "ADVISORY", "url": "https://github.com/advisories/GHSA-2222-3333-4444"},
        {"type": "WEB", "url": "http://insecure.example/only-http"},
        {"type": "WEB", "url": "https://user:pw@example.com/credentials"},
    ],
)


# The same vulnerability as published under its CVE (in the zip): an explicit version list.
BACKPORT_CVE = record(
    "CVE-2025-1111",
    npm(CLAUDE, versions=["2.5.0", "2.4.0"]),
    aliases=["GHSA-2222-3333-4444"],
    details="### Impact\nHooks run commands from the workspace.",
    references=[{"type": "WEB", "url": "https://nvd.nist.gov/vuln/detail/CVE-2025-1111"}],
)


WITHDRAWN = record(
    "GHSA-wwww-wwww-wwww",
    npm(CLAUDE, rng(("introduced", "0"))),
    withdrawn="2025-06-02T00:00:00Z",
    summary="Withdrawn: not a vulnerability",
)


OTHER = record("GHSA-oooo-oooo-oooo", npm("left-pad", rng(("introduced", "0"))), summary="x")


OTHER_PYPI = record("PYSEC-2025-9", pypi("requests", rng(("introduced", "0"), kind="ECOSYSTEM")))


# aider on PyPI under an unnormalised name: a GIT range (skipped) and an ECOSYSTEM range
# with last_affected, its events out of order.
AIDER = record(
    "GHSA-aaaa-5555-6666",
    pypi(
        "Aider_Chat",
        rng(("introduced", "0"), ("fixed", "deadbeef"), kind="GIT", repo="https://x.test/r"),
        rng(("last_affected", "0.50.1"), ("introduced", "0.40.0"), kind="ECOSYSTEM"),
    ),
    summary="Path traversal\nin the /add command",
)


# npm pre-releases; a range with a limit event (unsupported) and an entry left empty.
GEMINI_PRE = record(
    "GHSA-gggg-7777-8888",
    npm(GEMINI, rng(("introduced", "2.0.0-beta.1"), ("fixed", "2.1.3"))),
    npm(GEMINI, rng(("introduced", "3.0.0"), ("limit", "3.5.0"))),
    summary="Sandbox escape",
)


UNFIXED = record(
    "PYSEC-2025-77",
    pypi("gptme", rng(("introduced", "0.20.0"), kind="ECOSYSTEM")),
    details="\n\nNo fix yet.\nSecond line.",
)


def ghsa_tree(root: Path, records: list[dict[str, Any]]) -> Path:
    """The GitHub advisory database layout: advisories/github-reviewed/YYYY/MM/ID/ID.json."""
    for index, item in enumerate(records):
        folder = root / "advisories" / "github-reviewed" / "2025" / f"{index % 12 + 1:02d}"
        path = folder / item["id"] / f"{item['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(item, indent=2), encoding="utf-8")
    return root


def osv_zip(path: Path, records: list[dict[str, Any]], **raw: bytes) -> Path:
    """The OSV per-ecosystem export: one ``ID.json`` member per record."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in records:
            archive.writestr(f"{item['id']}.json", json.dumps(item))
        for name, data in raw.items():
            archive.writestr(name, data)
    return path


def sources(tmp_path: Path) -> tuple[Path, Path]:
    tree = ghsa_tree(
        tmp_path / "advisory-database", [BACKPORT, WITHDRAWN, OTHER, AIDER, GEMINI_PRE]
    )
    archive = osv_zip(tmp_path / "all.zip", [BACKPORT_CVE, OTHER_PYPI, UNFIXED])
    return tree, archive
