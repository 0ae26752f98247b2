"""A hand edit of the floor-map block is detected however it is disguised: one that restates
the block's hash, or a bernstein block stripped of its hash and version, cannot hide a
removed advisory or adapter from ``refresh --force``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers.host_project import Project

from floorguard._maps.map_model import floor_map_hash, from_entries

pytestmark = pytest.mark.slow


KEPT = {"id": "GHSA-2222-3333-4444", "summary": "Listed.", "versions": ["4.0.0"]}

GONE = {
    "id": "GHSA-aaaa-bbbb-cccc",
    "summary": "Ranged.",
    "affected": [{"introduced": "0", "fixed": "2.0.0"}],
}


def v3_feed(*advisories: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": 3,
        "adapters": {"claude": {"ecosystem": "npm", "advisories": list(advisories)}},
    }


def v1_feed(**floors: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "adapters": {
            name: {"min_safe_version": floor, "advisory_id": "GHSA-9999-8888-7777", "note": "n"}
            for name, floor in floors.items()
        },
    }


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@pytest.mark.parametrize(
    "earlier_map_archived",
    [True, False],
    ids=["archived", "not-archived"],
)
def test_a_hand_edit_that_restates_the_hash_hides_a_removed_advisory(
    project: Project, earlier_map_archived: bool
) -> None:
    """Delete GHSA-aaaa-... from the block by hand and write the edited data's own hash
    (computed with floorguard's public floor_map_hash) into FLOOR_MAP_HASH: the data matches
    the hash it states. README: deleting an advisory by hand and refreshing from a feed
    without it is refused without --allow-downgrade: refresh must not find "no data
    change", anchor a receipt with downgrade false, or reuse the block's map version for
    another map. A block stating a version claims a refresh wrote it, and refresh archives
    every map it writes, and records which map it wrote at which version: a block that is not
    the last map written here is a hand edit, also when the edited map is one an earlier
    refresh wrote (``archived``: the feed of the first refresh held the advisory only
    later, so maps/ holds it). With --force, the removal is a downgrade against the last map
    written here."""
    project.put("a.json", v3_feed(KEPT, GONE))
    project.put("b.json", v3_feed(KEPT))
    if earlier_map_archived:
        assert project.refresh("b.json").returncode == 0
    assert project.refresh("a.json").returncode == 0
    recorded = project.receipt()
    assert recorded["new_map_version"] == (2 if earlier_map_archived else 1)

    text = project.module.read_text()
    start = text.index('            {\n                "id": "GHSA-aaaa')
    end = text.index("            },\n", start) + len("            },\n")
    text = text[:start] + text[end:]
    edited = {"claude": {"ecosystem": "npm", "advisories": [
        {**KEPT, "aliases": [], "affected": [], "severity": [], "references": []}
    ], "waivers": []}}  # fmt: skip
    restated = floor_map_hash(from_entries(edited))
    text = text.replace(recorded["new_floor_map_hash"], restated)
    project.module.write_text(text)

    done = project.refresh("b.json")
    assert done.returncode == 1 and "edited by hand" in done.stderr, (
        f"the removal of GHSA-aaaa-bbbb-cccc went through as no hand edit: "
        f"rc={done.returncode}, receipt downgrade={project.receipt().get('downgrade')}, "
        f"map version {project.receipt().get('new_map_version')} after "
        f"{recorded['new_map_version']}\n{done.stdout}{done.stderr}"
    )
    forced = project.refresh("b.json", "--force")
    assert forced.returncode == 1 and "downgrade" in forced.stderr, forced.stderr
    assert "GHSA-aaaa-bbbb-cccc" in forced.stderr or "advisor" in forced.stderr, forced.stderr


# --- a bernstein block stripped of its hash and version -------------------------------------------


def test_a_bernstein_block_stripped_of_its_hash_hides_a_removed_adapter(project: Project) -> None:
    """The bernstein layout may omit its hash and version "until floorctl first renders into
    it". After floorctl has rendered it, delete codex's entry and the two hash/version lines:
    the block no longer states a hash. Once refresh has recorded a map written into this
    module, a block without a stated hash is a hand edit like any other: refresh from a feed
    without codex is refused, and with --force the dropped codex is a downgrade against the
    map version 1 it wrote (not a receipt saying downgrade false, old map version 0)."""
    project.put("a.json", v1_feed(aider="0.50.0", codex="0.2.0"))
    project.put("b.json", v1_feed(aider="0.50.0"))
    assert project.refresh("a.json", "--template", "bernstein").returncode == 0

    text = project.module.read_text()
    start = text.index('    "codex": AdapterAdvisory(')
    end = text.index("    ),\n", start) + len("    ),\n")
    text = text[:start] + text[end:]
    text = re.sub(r"ADAPTER_FLOOR_MAP_(HASH|VERSION) = .*\n", "", text)
    project.module.write_text(text)

    refused = project.refresh("b.json", "--template", "bernstein")
    assert refused.returncode == 1 and "edited by hand" in refused.stderr, refused.stderr
    done = project.refresh("b.json", "--template", "bernstein", "--force")
    assert done.returncode == 1 and "codex" in done.stderr, (
        f"codex was dropped without --allow-downgrade: rc={done.returncode}, "
        f"receipt downgrade={project.receipt().get('downgrade')}, "
        f"diff={project.receipt().get('diff')}\n{done.stdout}{done.stderr}"
    )
