"""A block that states a map version claims a refresh wrote it, and a refresh archives every
map it writes in ``maps/`` beside the module: a block whose map is not there (its data
edited by hand and its hash restated to match) is a hand edit like one whose data no longer
matches its hash. Without ``--force`` it is refused; with ``--force`` there is no map to check
a downgrade against, so only ``--allow-downgrade`` as well overwrites it, and the receipt
says so. A module without ``maps/`` (copied without it) and a new module's version-0 block
claim nothing of the archive."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.host_project import Project

from floorguard._maps.map_model import floor_map_hash, from_entries

KEPT = {"id": "GHSA-2222-3333-4444", "summary": "Listed.", "versions": ["4.0.0"]}
GONE = {"id": "GHSA-aaaa-bbbb-cccc", "summary": "Ranged.",
        "affected": [{"introduced": "0", "fixed": "2.0.0"}]}  # fmt: skip


def _feed(*advisories: dict) -> dict:
    adapters = {"claude": {"ecosystem": "npm", "advisories": list(advisories)}}
    return {"schema_version": 3, "adapters": adapters}


@pytest.fixture
def edited(tmp_path) -> Project:
    """A module refreshed once from a feed with GONE, then GONE deleted from its block by
    hand and FLOOR_MAP_HASH restated to the edited data's hash."""
    project = Project(tmp_path)
    project.put("a.json", _feed(KEPT, GONE))
    project.put("b.json", _feed(KEPT))
    assert project.refresh("a.json").returncode == 0
    stated = project.receipt()["new_floor_map_hash"]
    text = project.module.read_text()
    start = text.index('            {\n                "id": "GHSA-aaaa')
    end = text.index("            },\n", start) + len("            },\n")
    edited = {"claude": {"ecosystem": "npm", "advisories": [
        {**KEPT, "aliases": [], "affected": [], "severity": [], "references": []}
    ], "waivers": []}}  # fmt: skip
    restated = floor_map_hash(from_entries(edited))
    project.module.write_text((text[:start] + text[end:]).replace(stated, restated))
    return project


def test_a_block_whose_map_is_not_archived_is_refused_as_a_hand_edit(edited: Project) -> None:
    before = edited.module.read_bytes()
    done = edited.refresh("b.json")
    assert done.returncode == 1
    assert "edited by hand" in done.stderr and "maps/sha256-" in done.stderr, done.stderr
    assert "--force --allow-downgrade" in done.stderr
    assert edited.module.read_bytes() == before


def test_force_alone_cannot_check_the_downgrade_and_is_refused(edited: Project) -> None:
    done = edited.refresh("b.json", "--force")
    assert done.returncode == 1 and "--allow-downgrade" in done.stderr, done.stderr


def test_force_with_allow_downgrade_overwrites_it_and_the_receipt_says_so(
    edited: Project,
) -> None:
    done = edited.refresh("b.json", "--force", "--allow-downgrade")
    assert done.returncode == 0, done.stderr
    receipt = edited.receipt()
    # (checked against the last map refresh wrote here, which maps/ holds)
    assert receipt["forced"] is True and receipt["diff_baseline"] == "archived_map"
    assert receipt["downgrade"] is True
    assert receipt["old_map_version"] == 1 and receipt["new_map_version"] == 2


def test_check_reports_the_hand_edit_too(edited: Project) -> None:
    done = edited.run("refresh", "--feed", "b.json", "--check")
    assert done.returncode == 1 and "edited by hand" in done.stderr, done.stderr


def test_a_block_refresh_wrote_refreshes_as_before(tmp_path) -> None:
    project = Project(tmp_path)
    project.put("a.json", _feed(KEPT))
    project.put("b.json", _feed(KEPT, GONE))
    assert project.refresh("a.json").returncode == 0
    done = project.refresh("b.json")
    assert done.returncode == 0, done.stderr
    assert project.receipt()["new_map_version"] == 2


def test_a_module_copied_without_its_archive_folder_refreshes_as_before(tmp_path) -> None:
    project = Project(tmp_path)
    project.put("a.json", _feed(KEPT))
    project.put("b.json", _feed(KEPT, GONE))
    assert project.refresh("a.json").returncode == 0
    shutil.rmtree(project.module.parent / "maps")
    done = project.refresh("b.json")
    assert done.returncode == 0, done.stderr


def test_a_new_modules_version_0_block_needs_no_archive(tmp_path) -> None:
    project = Project(tmp_path)
    project.module.unlink()
    assert project.run("init", "--module", project.module).returncode == 0
    (project.module.parent / "maps").mkdir()
    project.put("a.json", _feed(KEPT))
    done = project.refresh("a.json")
    assert done.returncode == 0, done.stderr
    assert json.loads(json.dumps(project.receipt()))["new_map_version"] == 1


# --------------------------------------------- the record of the maps refresh wrote here


def _refreshed_twice(tmp_path: Path) -> Project:
    """A module refreshed from a.json (version 1) then b.json, which adds GONE (version 2)."""
    project = Project(tmp_path)
    project.put("a.json", _feed(KEPT))
    project.put("b.json", _feed(KEPT, GONE))
    assert project.refresh("a.json").returncode == 0
    assert project.refresh("b.json").returncode == 0
    return project


def test_refresh_records_each_map_it_writes_by_version(tmp_path: Path) -> None:
    project = _refreshed_twice(tmp_path)
    record = project.module.parent / "maps" / ".floor_map.py.written.json"
    written = json.loads(record.read_text())
    assert sorted(written) == ["1", "2"]
    assert written["2"] == project.receipt()["new_floor_map_hash"]


@pytest.mark.parametrize(
    "edit", ["version set to 0", "block emptied", "earlier map under the later version"]
)
def test_a_block_that_is_not_the_last_map_written_here_is_a_hand_edit(
    tmp_path: Path, edit: str
) -> None:
    """Each edit makes the block a map a refresh could have written (its data matches its
    hash, or it states none) but not the last one written here: refused without --force,
    and with --force what it dropped is checked against that last map."""
    project = _refreshed_twice(tmp_path)
    last = project.receipt()["new_floor_map_hash"]
    text = project.module.read_text()
    if edit == "version set to 0":
        first = json.loads((project.module.parent / "maps" / ".floor_map.py.written.json")
                           .read_text())["1"]  # fmt: skip
        text = text.replace("FLOOR_MAP_VERSION = 2", "FLOOR_MAP_VERSION = 0").replace(last, first)
        text = _without_gone(text)
    elif edit == "block emptied":
        text = (
            text[: text.index("# floor-map:begin\n") + 18] + text[text.index("# floor-map:end") :]
        )
    else:
        first = json.loads((project.module.parent / "maps" / ".floor_map.py.written.json")
                           .read_text())["1"]  # fmt: skip
        text = _without_gone(text).replace(last, first)
    project.module.write_text(text)
    project.put("c.json", _feed(KEPT))
    refused = project.refresh("c.json")
    assert refused.returncode == 1 and "edited by hand" in refused.stderr, refused.stderr
    forced = project.refresh("c.json", "--force")
    assert forced.returncode == 1 and "downgrade" in forced.stderr, forced.stderr
    done = project.refresh("c.json", "--force", "--allow-downgrade")
    assert done.returncode == 0, done.stderr
    receipt = project.receipt()
    assert (receipt["old_map_version"], receipt["new_map_version"]) == (2, 3)
    assert receipt["old_floor_map_hash"] == last and receipt["diff_baseline"] == "archived_map"


def _without_gone(text: str) -> str:
    start = text.index('            {\n                "id": "GHSA-aaaa')
    end = text.index("            },\n", start) + len("            },\n")
    return text[:start] + text[end:]


def test_init_refuses_a_new_module_where_a_record_of_an_old_one_remains(tmp_path: Path) -> None:
    """A new empty module in place of one refresh wrote into would be that module set back
    to version 0: init refuses, naming the record, until it is removed too."""
    project = _refreshed_twice(tmp_path)
    project.module.unlink()
    refused = project.run("init", "--module", project.module)
    assert refused.returncode != 0 and ".floor_map.py.written.json" in refused.stderr
    assert not project.module.exists()
    (project.module.parent / "maps" / ".floor_map.py.written.json").unlink()
    assert project.run("init", "--module", project.module).returncode == 0
    project.put("c.json", _feed(KEPT))
    assert project.refresh("c.json").returncode == 0


@pytest.mark.parametrize(
    "text", ["[]", "{not json", '{"1": "md5:00"}', '{"0": "sha256:' + "0" * 64 + '"}'],
    ids=["a-list", "not-json", "not-a-map-hash", "version-0"],
)  # fmt: skip
def test_a_record_that_cannot_be_read_exactly_refuses_and_changes_nothing(
    tmp_path: Path, text: str
) -> None:
    project = _refreshed_twice(tmp_path)
    (project.module.parent / "maps" / ".floor_map.py.written.json").write_text(text)
    before = project.module.read_bytes()
    project.put("c.json", _feed(KEPT))
    done = project.refresh("c.json")
    assert done.returncode == 1 and ".floor_map.py.written.json" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert project.module.read_bytes() == before
