"""A signed update receipt names its inputs as given, never by an absolute path of the
build machine: two checkouts of one commit in different folders sign the same predicate,
apart from the time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl

from floorguard._crypto import dsse

REPO = Path(__file__).resolve().parents[2]
MODULE = Path("generated/floorguard/floor_map.py")
NOW = "2026-12-01T00:00:00Z"
TIME_FIELDS = ("ts", "reference_time")


def checkout(root: Path) -> Path:
    """The inputs of a refresh, as a clone at ``root`` would hold them."""
    for name in ("feeds", "templates"):
        shutil.copytree(REPO / name, root / name)
    (root / MODULE).parent.mkdir(parents=True)
    shutil.copyfile(REPO / MODULE, root / MODULE)
    return root


def predicate(receipt: Path) -> dict[str, Any]:
    statement = json.loads(dsse.parse_envelope(receipt.read_bytes()).payload)
    found: dict[str, Any] = statement["predicate"]
    return found


def refresh(project: Path, state: Path, *, absolute: bool) -> dict[str, Any]:
    def named(relative: str) -> str:
        return str(project / relative) if absolute else relative

    done = floorctl(
        "refresh",
        "--feed", named("feeds/example.v1.json"),
        "--feed", named("feeds/example.v3.json"),
        "--waivers", named("feeds/example-waivers.json"),
        "--template", named("templates/floorguard.py.j2"),
        "--module", named(str(MODULE)),
        "--now", NOW,
        "--write", "--receipt-out", named("receipt.json"),
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return predicate(project / "receipt.json")


def without_time(found: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in found.items() if key not in TIME_FIELDS}


@pytest.mark.parametrize("absolute", [True, False], ids=["absolute-paths", "relative-paths"])
def test_two_checkouts_in_different_folders_sign_the_same_predicate(
    absolute: bool, tmp_path: Path
) -> None:
    one = checkout(tmp_path / "ci-runner-1" / "work" / "floorguard")
    other = checkout(tmp_path / "laptop" / "src" / "deeper" / "floorguard")
    first = refresh(one, tmp_path / "state-1", absolute=absolute)
    second = refresh(other, tmp_path / "state-2", absolute=absolute)
    assert without_time(first) == without_time(second)
    # Each checkout's own folder appears nowhere in what was signed.
    for project, found in ((one, first), (other, second)):
        assert str(project) not in json.dumps(found)
        assert str(tmp_path) not in json.dumps(found)


def test_receipt_names_each_input_as_given_relative_to_the_current_folder(
    tmp_path: Path,
) -> None:
    project = checkout(tmp_path / "project")
    found = refresh(project, tmp_path / "state", absolute=True)
    assert [feed["source"] for feed in found["feeds"]] == [
        "feeds/example.v1.json",
        "feeds/example.v3.json",
    ]
    assert found["waivers"]["source"] == "feeds/example-waivers.json"
    assert found["template"] == "templates/floorguard.py.j2"


def test_an_input_outside_the_current_folder_is_still_named_by_a_relative_path(
    tmp_path: Path,
) -> None:
    project = checkout(tmp_path / "project")
    elsewhere = tmp_path / "shared" / "feed.json"
    elsewhere.parent.mkdir()
    shutil.copyfile(REPO / "feeds" / "example.v1.json", elsewhere)
    done = floorctl(
        "refresh", "--feed", elsewhere, "--write", "--receipt-out", "receipt.json",
        cwd=project, state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (feed,) = predicate(project / "receipt.json")["feeds"]
    assert feed["source"] == "../shared/feed.json"
