"""Real advisory data, end to end: OSV records in the GitHub advisory database's layout and in
an OSV export zip are imported, the feed validates, refresh writes it into a host's floor map,
the real runtime preflight decides by the advisories' ranges, and the window proof holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from helpers.osv_sources import sources
from hosts import Host, floor

V1_FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {
            "min_safe_version": "0.30.0",
            "advisory_id": "BSA-0001",
            "note": "aider below 0.30.0 is known-unsafe",
        }
    },
}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Host, Path]:
    """A host whose floor map was written by refresh from the imported feed plus a v1 floor."""
    work = tmp_path_factory.mktemp("e2e")
    tree, archive = sources(work)
    imported = floorctl(
        "import", "osv", tree, archive, "--out", work / "osv-feed.json", cwd=work, state=work
    )
    assert imported.returncode == 0, imported.stderr
    valid = floorctl("validate", work / "osv-feed.json", cwd=work, state=work)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    (work / "floors.json").write_text(json.dumps(V1_FEED), encoding="utf-8")
    host = Host(work / "host", {"aider": floor("0.10.0")})
    written = floorctl(
        "refresh", "--feed", work / "floors.json", "--feed", work / "osv-feed.json",
        "--module", host.map_file, "--write", cwd=work, state=work,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    return host, work


# (adapter, version, verdict, advisory the refusal must name)
TABLE = [
    ("claude", "1.4.6", "refuse", "GHSA-2222-3333-4444"),
    ("claude", "1.4.7", "permit", None),
    ("claude", "1.9.0", "permit", None),
    ("claude", "2.0.0", "refuse", "GHSA-2222-3333-4444"),
    ("claude", "2.1.3", "permit", None),
    ("claude", "2.4.0", "refuse", "GHSA-2222-3333-4444"),  # listed in `versions`
    ("gemini", "2.0.0-beta.3", "refuse", "GHSA-gggg-7777-8888"),
    ("gemini", "2.0.0-beta.0", "permit", None),  # before the range's beta.1
    ("gemini", "2.1.3-rc.1", "refuse", "GHSA-gggg-7777-8888"),  # below the fix at 2.1.3
    ("gemini", "2.1.3", "permit", None),
    ("gptme", "9.9.9", "refuse", "PYSEC-2025-77"),  # introduced, never fixed
    ("aider", "0.29.9", "refuse", "BSA-0001"),  # the v1 floor, kept beside the advisories
    ("aider", "0.45.0", "refuse", "GHSA-aaaa-5555-6666"),
    ("aider", "0.50.2", "permit", None),  # after last_affected 0.50.1
]


@pytest.mark.parametrize(("adapter", "version", "verdict", "advisory"), TABLE)
def test_imported_advisories_decide_the_real_preflight(
    deployed: tuple[Host, Path], adapter: str, version: str, verdict: str, advisory: str | None
) -> None:
    host, _ = deployed
    decided = host.preflight(adapter, version=version, PATH="/nonexistent")
    assert decided["verdict"] == verdict, decided
    if advisory is not None:
        assert decided["raised"] == "SpawnRefused"
        assert advisory in decided["reason"]


def test_a_refusal_names_the_advisory_and_its_alias(deployed: tuple[Host, Path]) -> None:
    host, _ = deployed
    decided = host.preflight("claude", version="2.0.5", PATH="/nonexistent")
    assert decided["verdict"] == "refuse"
    assert "GHSA-2222-3333-4444" in decided["reason"]
    assert "CVE-2025-1111" in decided["reason"]


def test_the_window_of_these_decisions_is_proven(deployed: tuple[Host, Path]) -> None:
    host, work = deployed
    for adapter, version, _, _ in TABLE:
        host.preflight(adapter, version=version, PATH="/nonexistent")
    state: dict[str, Any] = {"FLOORGUARD_HOME": str(host.home)}
    exported = floorctl(
        "chain", "export", "--out", work / "slice.jsonl", cwd=work, state=work, **state
    )
    assert exported.returncode == 0, exported.stderr
    proof = floorctl(
        "verify", "chain", work / "slice.jsonl", "--key-file", host.home / "chain.key",
        "--maps", host.map_file.parent / "maps", "--json", cwd=work, state=work, **state,
    )  # fmt: skip
    report = json.loads(proof.stdout)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert report["proven"] is True
    assert report["records"] >= len(TABLE)
