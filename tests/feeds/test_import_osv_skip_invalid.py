"""``import osv --skip-invalid`` drops only invalid records: a valid advisory merged with a
hostile one (aliases or ranges pushed past a cap) is never dropped with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.host_project import Project

pytestmark = pytest.mark.slow


CLAUDE = "@anthropic-ai/claude-code"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def osv_record(record_id: str, aliases: list[str], events: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "schema_version": "1.6.0",
        "id": record_id,
        "modified": "2025-06-01T12:00:00Z",
        "summary": "Command injection in hooks",
        "aliases": aliases,
        "affected": [
            {
                "package": {"ecosystem": "npm", "name": CLAUDE},
                "ranges": [{"type": "SEMVER", "events": events}],
            }
        ],
    }


@pytest.mark.parametrize("cap", ["aliases", "ranges"])
def test_skip_invalid_never_drops_a_valid_record_merged_with_a_hostile_one(
    project: Project, cap: str
) -> None:
    """A real advisory (claude < 1.0.5, alias CVE-2025-1111) and one more record, valid on its
    own (64 aliases, or 128 ranges, each within the feed's caps), that names the same CVE.
    Merged, the group passes the cap. One record cannot be skipped without dropping the
    other: the import's own rule for such a case (more advisories than a feed holds) is "not
    one record's fault, so not skippable". So --skip-invalid must not skip the whole group
    and exit 0 with a feed in which claude 1.0.4 is no longer refused (blaming the real
    record's file): it refuses (exit 1), or skips only the record that pushed the group past
    the cap."""
    tree = project.dir / "tree" / "advisories" / "github-reviewed" / "2025" / "06"
    real = osv_record(
        "GHSA-r3al-r3al-r3al", ["CVE-2025-1111"], [{"introduced": "0"}, {"fixed": "1.0.5"}]
    )
    if cap == "aliases":
        hostile = osv_record(
            "GHSA-zzzz-zzzz-zzzz",
            ["CVE-2025-1111", *(f"CVE-2025-{20000 + i}" for i in range(63))],
            [{"introduced": "9.0.0"}, {"fixed": "9.0.1"}],
        )
    else:
        events = []
        for i in range(128):
            events += [{"introduced": f"9.{i}.0"}, {"fixed": f"9.{i}.1"}]
        hostile = osv_record("GHSA-zzzz-zzzz-zzzz", ["CVE-2025-1111"], events)
    for record in (real, hostile):
        folder = tree / record["id"]
        folder.mkdir(parents=True)
        (folder / f"{record['id']}.json").write_text(json.dumps(record))

    imported = project.run("import", "osv", "tree", "--out", "feed.json", "--skip-invalid")
    if imported.returncode != 0:
        return  # refusing is a fix
    feed = json.loads((project.dir / "feed.json").read_text())
    advisories = feed["adapters"].get("claude", {}).get("advisories", [])
    names = {name for a in advisories for name in (a["id"], *a["aliases"])}
    assert "GHSA-r3al-r3al-r3al" in names, (
        "the valid advisory GHSA-r3al-r3al-r3al (claude < 1.0.5) vanished from the feed; "
        f"exit 0\n{imported.stderr}"
    )
