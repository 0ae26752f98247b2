"""A waiver of "floor" (the reserved pseudo-id of the floor) waives the floor only, never an
advisory whose alias is "floor": not at the gate, not when floorctl writes the map."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from helpers.host_project import Project
from hosts import Host

ALIASED_FEED = {
    "schema_version": 3,
    "adapters": {
        "claude": {
            "ecosystem": "npm",
            "min_safe_version": "1.0.20",
            "advisory_id": "BSA-0002",
            "note": "Upgrade.",
            "advisories": [
                {
                    "id": "GHSA-aaaa-bbbb-cccc",
                    "aliases": ["floor"],
                    "summary": "Remote code execution through a crafted prompt.",
                    "affected": [{"introduced": "0", "fixed": "1.4.7"}],
                }
            ],
        }
    },
}

FLOOR_ONLY_WAIVER = {
    "schema_version": 1,
    "waivers": [
        {
            "id": "WVR-0001",
            "adapter": "claude",
            "version": "1.0.10",
            "advisories": ["floor"],
            "reason": "the example floor only; reviewed",
            "approved_by": "security team",
            "expires": "2099-01-01T00:00:00Z",
        }
    ],
}


@pytest.mark.slow
def test_a_waiver_of_the_floor_does_not_waive_an_advisory_aliased_floor(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map("# floor-map:begin\n# floor-map:end\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "feed.json").write_text(json.dumps(ALIASED_FEED))
    (project / "waivers.json").write_text(json.dumps(FLOOR_ONLY_WAIVER))
    refreshed = floorctl(
        "refresh", "--feed", "feed.json", "--waivers", "waivers.json", "--module",
        str(host.map_file), "--write", cwd=project, state=tmp_path / "state",
    )  # fmt: skip
    if refreshed.returncode != 0:
        return  # refusing the feed or the waiver is a fix too
    decision = host.preflight("claude", version="1.0.10")
    # 1.0.10 is inside GHSA-aaaa-bbbb-cccc, which the waiver does not list.
    assert decision["verdict"] == "refuse", decision


CLAUDE = "@anthropic-ai/claude-code"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def osv_record(record_id: str = "GHSA-aaaa-bbbb-cccc", **fields: Any) -> dict[str, Any]:
    made: dict[str, Any] = {
        "schema_version": "1.6.0",
        "id": record_id,
        "modified": "2025-06-01T12:00:00Z",
        "summary": "Command injection in hooks",
        "affected": [
            {
                "package": {"ecosystem": "npm", "name": CLAUDE},
                "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.0.5"}]}],
            }
        ],
    }
    made.update(fields)
    return made


# --- the map floorctl writes ----------------------------------------------------------------------


def test_a_waiver_for_the_floor_does_not_waive_an_advisory_aliased_floor(
    project: Project, tmp_path: Path
) -> None:
    """A waiver that names only "floor" is reviewed as covering the below-floor refusal. An
    OSV record may carry the alias "floor"; that waiver must not then also waive the
    record's advisory, which it never names by id."""
    project.put(
        "record.json",
        osv_record(
            "GHSA-hhhh-jjjj-kkkk",
            aliases=["floor"],
            affected=[
                {
                    "package": {"ecosystem": "npm", "name": CLAUDE},
                    "ranges": [
                        {"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "2.0.0"}]}
                    ],
                }
            ],
        ),
    )
    project.put(
        "floor.json",
        {
            "schema_version": 3,
            "adapters": {
                "claude": {
                    "ecosystem": "npm",
                    "min_safe_version": "1.0.20",
                    "advisory_id": "BSA-0002",
                    "note": "Upgrade.",
                    "advisories": [],
                }
            },
        },
    )
    project.put(
        "waivers.json",
        {
            "schema_version": 1,
            "waivers": [
                {
                    "id": "WVR-0001",
                    "adapter": "claude",
                    "version": "1.0.10",
                    "advisories": ["floor"],
                    "reason": "below the floor only; reviewed",
                    "approved_by": "security team",
                    "expires": "2099-01-01T00:00:00Z",
                }
            ],
        },
    )
    imported = project.run("import", "osv", "record.json", "--out", "osv.json")
    if imported.returncode != 0:
        assert imported.returncode == 1 and "record.json" in imported.stderr, imported.stderr
        return  # the reserved name refused at import: fixed
    refreshed = project.run(
        "refresh",
        "--feed",
        "floor.json",
        "--feed",
        "osv.json",
        "--waivers",
        "waivers.json",
        "--write",
    )
    if refreshed.returncode != 0:
        assert refreshed.returncode == 1, refreshed.stderr
        return  # refused at refresh (the waiver does not cover GHSA-hhhh-...): fixed
    host = Host(tmp_path / "host", {})
    host.set_map(project.module.read_text())
    decision = host.preflight("claude", version="1.0.10")
    assert decision["verdict"] == "refuse", decision
