"""``refresh --force`` over a hand edit diffs against the map the block's stated hash vouches
for (archived in ``maps/`` beside the module), never the edited data; without that map it
needs --allow-downgrade too. The receipt says what was compared against. The real CLI in
subprocesses over real files.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'
KEPT = {"id": "GHSA-2222-3333-4444", "summary": "Listed.", "versions": ["4.0.0"]}
GONE = {
    "id": "GHSA-aaaa-bbbb-cccc",
    "summary": "Ranged.",
    "affected": [{"introduced": "0", "fixed": "2.0.0"}],
}


def feed(*advisories: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": 3,
        "adapters": {"claude": {"ecosystem": "npm", "advisories": list(advisories)}},
    }


class Project:
    def __init__(self, root: Path) -> None:
        self.dir = root / "project"
        self.state = root / "state"
        (self.dir / MODULE.parent).mkdir(parents=True)
        self.module.write_text(EMPTY_MODULE)
        (self.dir / "a.json").write_text(json.dumps(feed(KEPT, GONE)))
        (self.dir / "b.json").write_text(json.dumps(feed(KEPT)))
        (self.dir / "c.json").write_text(json.dumps(feed(KEPT, GONE, {**KEPT, "id": "CVE-1-2"})))

    @property
    def module(self) -> Path:
        return self.dir / MODULE

    def run(self, *args: str) -> Any:
        return floorctl(*args, cwd=self.dir, state=self.state)

    def refresh(self, name: str, *extra: str) -> Any:
        return self.run(
            "refresh", "--feed", name, "--write", "--receipt-out", "receipt.json", *extra
        )

    def receipt(self) -> dict[str, Any]:
        envelope = json.loads((self.dir / "receipt.json").read_text())
        predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        return predicate

    def vouched(self) -> Path:
        """The archived map the block's stated hash names (the last refresh's new map)."""
        stated = self.receipt()["new_floor_map_hash"]
        return self.module.parent / "maps" / (stated.replace(":", "-") + ".json")

    def hand_edit(self) -> None:
        """Delete GHSA-aaaa-... from the block, leaving its stated hash as it was."""
        text = self.module.read_text()
        start = text.index('            {\n                "id": "GHSA-aaaa')
        end = text.index("            },\n", start) + len("            },\n")
        self.module.write_text(text[:start] + text[end:])


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = Project(tmp_path)
    assert made.refresh("a.json").returncode == 0
    made.hand_edit()
    return made


def test_force_with_allow_downgrade_records_the_removal_against_the_archived_map(
    project: Project,
) -> None:
    done = project.refresh("b.json", "--force", "--allow-downgrade")
    assert done.returncode == 0, done.stderr
    receipt = project.receipt()
    assert receipt["forced"] is True and receipt["diff_baseline"] == "archived_map"
    assert receipt["downgrade"] is True
    assert {"adapter": "claude", "id": "GHSA-aaaa-bbbb-cccc"} in receipt["diff"]["advisories"][
        "removed"
    ]


def test_force_that_only_adds_needs_no_allow_downgrade(project: Project) -> None:
    done = project.refresh("c.json", "--force")
    assert done.returncode == 0, done.stderr
    receipt = project.receipt()
    assert (receipt["diff_baseline"], receipt["downgrade"]) == ("archived_map", False)
    assert receipt["diff"]["advisories"]["removed"] == []
    assert receipt["diff"]["advisories"]["added"] == [{"adapter": "claude", "id": "CVE-1-2"}]


@pytest.mark.parametrize("how", ["missing", "another map under its name"])
def test_force_without_the_vouched_map_needs_allow_downgrade(project: Project, how: str) -> None:
    archived = project.vouched()
    assert archived.is_file()
    if how == "missing":
        archived.unlink()
    else:
        archived.write_text(json.dumps({}))  # content-addressed: it vouches for nothing
    before = project.module.read_text()
    refused = project.refresh("c.json", "--force")
    assert refused.returncode == 1
    assert "is not in" in refused.stderr and "--allow-downgrade" in refused.stderr
    assert project.module.read_text() == before
    done = project.refresh("c.json", "--force", "--allow-downgrade")
    assert done.returncode == 0, done.stderr
    receipt = project.receipt()
    assert (receipt["forced"], receipt["diff_baseline"]) == (True, "hand_edited_block")
    assert receipt["downgrade_allowed"] is True


def test_a_refresh_without_a_hand_edit_keeps_the_receipt_fields(tmp_path: Path) -> None:
    made = Project(tmp_path)
    assert made.refresh("a.json").returncode == 0
    assert "diff_baseline" not in made.receipt()
