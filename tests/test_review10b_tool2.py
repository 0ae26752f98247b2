"""Second outside review of issue 10 (build-time side): attacks on the fixes that succeed on main.

Every test drives the real ``floorctl`` in a subprocess over files laid out here. Each one
fails while the attack works and passes once it is fixed.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl

from floorguard.map_model import floor_map_hash, from_entries

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'
CLAUDE = "@anthropic-ai/claude-code"
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


class Project:
    def __init__(self, root: Path) -> None:
        self.dir = root / "project"
        self.state = root / "state"
        (self.dir / MODULE.parent).mkdir(parents=True)
        self.module.write_text(EMPTY_MODULE)

    @property
    def module(self) -> Path:
        return self.dir / MODULE

    def put(self, name: str, document: Any) -> str:
        (self.dir / name).write_text(json.dumps(document))
        return name

    def run(self, *args: str | Path) -> Any:
        return floorctl(*args, cwd=self.dir, state=self.state)

    def refresh(self, feed: str, *extra: str) -> Any:
        return self.run(
            "refresh",
            "--feed",
            feed,
            "--write",
            "--receipt-out",
            "receipt.json",
            "--anchor",
            *extra,
        )

    def receipt(self) -> dict[str, Any]:
        envelope = json.loads((self.dir / "receipt.json").read_text())
        predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        return predicate


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


# --- 1. the --force baseline trusts the block's own stated hash --------------------------------


# Known gap (named in the README): refresh trusts the block's own stated hash as the map it
# replaces; a hand edit that restates the hash (or drops it from a bernstein block) is not
# seen. Catching it needs each module's last anchored update receipt in the chain, which
# receipts do not name yet. Strict: these turn into failures the day the gap is closed.
HAND_EDIT_GAP = pytest.mark.xfail(
    strict=True, reason="refresh trusts the block's stated hash (README: known gap)"
)


@HAND_EDIT_GAP
@pytest.mark.parametrize("earlier_map_archived", [True, False], ids=["archived", "not-archived"])
def test_a_hand_edit_that_restates_the_hash_hides_a_removed_advisory(
    project: Project, earlier_map_archived: bool
) -> None:
    """Fix (7) diffs a hand-edited block against maps/<stated hash>.json. But the stated hash
    is as editable as the data: delete GHSA-aaaa-... by hand and write the edited data's own
    hash (computed with floorguard's public floor_map_hash) into FLOOR_MAP_HASH. Then there
    is no drift at all: refresh needs neither --force nor --allow-downgrade, finds "no data
    change" from a feed without the advisory, anchors a receipt with downgrade false, and
    (with the earlier map archived) even reuses map version 2 for another map. README:
    deleting an advisory by hand and refreshing from a feed without it is refused without
    --allow-downgrade. A fix: judge the block against the last map this module's refresh
    recorded (the chain's last update receipt / highest archived version), not its own claim;
    at least refuse a stated hash that refresh never archived."""
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
    assert done.returncode == 1 and "downgrade" in done.stderr, (
        f"the removal of GHSA-aaaa-bbbb-cccc went through without --allow-downgrade: "
        f"rc={done.returncode}, receipt downgrade={project.receipt().get('downgrade')}, "
        f"map version {project.receipt().get('new_map_version')} after "
        f"{recorded['new_map_version']}\n{done.stdout}{done.stderr}"
    )


# --- 2. a bernstein block without hash and version is never a hand edit -----------------------


@HAND_EDIT_GAP
def test_a_bernstein_block_stripped_of_its_hash_hides_a_removed_adapter(project: Project) -> None:
    """The bernstein layout may omit its hash and version "until floorctl first renders into
    it". After floorctl has rendered it, delete codex's entry and the two hash/version lines:
    the block no longer states a hash, so it is no hand edit; refresh from a feed without
    codex passes with no --force and no --allow-downgrade, the receipt says downgrade false,
    forced false, old map version 0 (the chain already holds version 1). Dropping an adapter
    must be refused without --allow-downgrade. A fix: once maps/ (or the chain) holds a map
    for this module, a block without a stated hash is a hand edit like any other."""
    project.put("a.json", v1_feed(aider="0.50.0", codex="0.2.0"))
    project.put("b.json", v1_feed(aider="0.50.0"))
    assert project.refresh("a.json", "--template", "bernstein").returncode == 0

    text = project.module.read_text()
    start = text.index('    "codex": AdapterAdvisory(')
    end = text.index("    ),\n", start) + len("    ),\n")
    text = text[:start] + text[end:]
    text = re.sub(r"ADAPTER_FLOOR_MAP_(HASH|VERSION) = .*\n", "", text)
    project.module.write_text(text)

    done = project.refresh("b.json", "--template", "bernstein")
    assert done.returncode == 1 and "codex" in done.stderr, (
        f"codex was dropped without --allow-downgrade: rc={done.returncode}, "
        f"receipt downgrade={project.receipt().get('downgrade')}, "
        f"diff={project.receipt().get('diff')}\n{done.stdout}{done.stderr}"
    )


# --- 3. --skip-invalid drops a valid advisory a hostile alias pushed past a cap ----------------


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
    Merged, the group passes the cap; with --skip-invalid the whole group is "skipped" and
    the import exits 0 with a feed in which claude 1.0.4 is no longer refused (the warning
    even blames the real record's file). One record cannot be skipped without dropping the
    other: the import's own rule for such a case (more advisories than a feed holds) is "not
    one record's fault, so not skippable". A fix: refuse (exit 1) whatever --skip-invalid,
    or skip only the record that pushed the group past the cap."""
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
