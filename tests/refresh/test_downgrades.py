"""A refresh that would lower what a map refuses is a downgrade, however it is reached: a
schema-1 floor re-read in SemVer order, or ``--force`` over a hand edit that removed an
advisory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.host_project import Project
from hosts import Host


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


# --- a schema-1 floor re-read in SemVer order -----------------------------------------------------


def test_a_floor_moved_from_pep440_to_semver_order_is_a_downgrade(
    project: Project, tmp_path: Path
) -> None:
    """goose's schema-1 floor 2.0.0-beta.2 is judged in PEP 440 order (no ecosystem stated,
    none in the catalog): 2.0.0-dev.1 is a dev release below it, refused. Adding a schema-3
    feed for goose gives the same floor the npm ecosystem, where "dev.1" sorts after
    "beta.2": 2.0.0-dev.1 would be permitted. A version once refused let through is a
    downgrade (README: a switch of version order is one), so --allow-downgrade is needed.
    (claude, an npm CLI in the catalog, is judged by SemVer under a schema-1 floor already.)"""
    project.put(
        "v1.json",
        {
            "schema_version": 1,
            "adapters": {
                "goose": {
                    "min_safe_version": "2.0.0-beta.2",
                    "advisory_id": "BSA-0001",
                    "note": "Upgrade past the beta.",
                }
            },
        },
    )
    project.put(
        "osv.json",
        {
            "schema_version": 3,
            "adapters": {
                "goose": {
                    "ecosystem": "npm",
                    "advisories": [
                        {
                            "id": "GHSA-aaaa-bbbb-cccc",
                            "summary": "Old line.",
                            "affected": [{"introduced": "0", "fixed": "1.0.0"}],
                        }
                    ],
                }
            },
        },
    )
    first = project.run("refresh", "--feed", "v1.json", "--write")
    assert first.returncode == 0, first.stderr
    host = Host(tmp_path / "host", {})
    host.set_map(project.module.read_text())
    before = host.preflight("goose", version="2.0.0-dev.1")
    assert before["verdict"] == "refuse", before

    second = project.run("refresh", "--feed", "v1.json", "--feed", "osv.json", "--write")
    host.set_map(project.module.read_text())
    after = host.preflight("goose", version="2.0.0-dev.1")
    # Either the refresh is refused as a downgrade, or the version stays refused.
    assert second.returncode == 1 or after["verdict"] == "refuse", (second.stderr, after)
    if second.returncode == 1:
        assert "--allow-downgrade" in second.stderr


# --- --force diffs against the map in force, not the hand-edited block ----------------------------


def test_force_over_a_hand_edit_still_refuses_removing_an_advisory(project: Project) -> None:
    """The block states hash H1 (its map has GHSA-aaaa...). Someone deletes that advisory from
    the block by hand; a refresh --force from a feed without it must still see the removal:
    the downgrade is refused, never a signed receipt binding old hash H1 with a diff that
    names no removed advisory. --force is for overwriting a hand edit, not for downgrades."""
    kept = {"id": "GHSA-2222-3333-4444", "summary": "Listed.", "versions": ["4.0.0"]}
    gone = {
        "id": "GHSA-aaaa-bbbb-cccc",
        "summary": "Ranged.",
        "affected": [{"introduced": "0", "fixed": "2.0.0"}],
    }

    def feed(*advisories: dict[str, Any]) -> dict[str, Any]:
        return {
            "schema_version": 3,
            "adapters": {"claude": {"ecosystem": "npm", "advisories": list(advisories)}},
        }

    project.put("a.json", feed(kept, gone))
    project.put("b.json", feed(kept))
    assert project.run("refresh", "--feed", "a.json", "--write").returncode == 0
    plain = project.run("refresh", "--feed", "b.json", "--write")
    assert plain.returncode == 1 and "removes advisory GHSA-aaaa-bbbb-cccc" in plain.stderr

    text = project.module.read_text()
    start = text.index('            {\n                "id": "GHSA-aaaa')
    end = text.index("            },\n", start) + len("            },\n")
    project.module.write_text(text[:start] + text[end:])

    forced = project.run(
        "refresh", "--feed", "b.json", "--write", "--force", "--receipt-out", "receipt.json"
    )
    receipt = project.receipt() if forced.returncode == 0 else None
    assert forced.returncode == 1, receipt and receipt["diff"]
    assert "GHSA-aaaa-bbbb-cccc" in forced.stderr and "--allow-downgrade" in forced.stderr
