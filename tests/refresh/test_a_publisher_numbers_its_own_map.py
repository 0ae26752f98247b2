"""``floorctl refresh --map-version N``: a publisher numbers its own map, so that hosts take it
over the map floorguard ships (which they keep at an equal or higher version). Numbers only
rise; a refused number leaves the module as it was; a map renumbered with unchanged data is
written, signed and anchored like any other change."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from feedserver import new_key
from helpers.cli import floorctl

from floorguard._maps.active_map import BUILTIN_MAP_FILE, load_map_file

REPO = Path(__file__).resolve().parents[2]
SHIPPED_FEED = REPO / "feeds" / "example.v1.json"
BUILTIN_VERSION = load_map_file(BUILTIN_MAP_FILE).map_version


def run(project: Path, *args: str | Path) -> tuple[int, str, str]:
    done = floorctl(*args, cwd=project, state=project.parent)
    return done.returncode, done.stdout, done.stderr


def refresh(project: Path, *args: str | Path) -> tuple[int, str, str]:
    return run(project, "refresh", "--feed", "feed.json", "--module", "floor_map.py", *args)


def block_version(module: Path) -> int:
    return load_map_file(module).map_version


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A host project whose own map a first refresh filled: the built-in map's version."""
    folder = tmp_path / "host"
    folder.mkdir()
    # The shipped example feed with a stricter codex floor: a map of the publisher's own.
    feed = json.loads(SHIPPED_FEED.read_text())
    feed["adapters"]["codex"]["min_safe_version"] = "0.9.0"
    (folder / "feed.json").write_text(json.dumps(feed))
    assert run(folder, "init", "--module", "floor_map.py")[0] == 0
    code, _, err = refresh(folder, "--write")
    assert code == 0, err
    assert block_version(folder / "floor_map.py") == BUILTIN_VERSION == 1
    return folder


def test_a_chosen_number_above_the_last_renumbers_the_map_and_the_receipt_binds_it(
    project: Path,
) -> None:
    module = project / "floor_map.py"
    before = load_map_file(module)
    code, out, err = refresh(project, "--write", "--map-version", "5", "--receipt-out",
                             "renumbered.dsse", "--json")  # fmt: skip
    assert code == 0, err
    after = load_map_file(module)
    assert after.map_version == 5
    assert after.floor_map_hash == before.floor_map_hash  # the same data, renumbered
    report = json.loads(out)
    assert (report["old_map_version"], report["new_map_version"], report["written"]) == (1, 5, True)
    dev_key = project.parent / "floorctl" / "dev-key" / "signing.pub"
    code, shown, err = run(project, "verify", "receipt", "renumbered.dsse", "--pubkey", dev_key,
                           "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(shown)["verified"] is True
    envelope = json.loads((project / "renumbered.dsse").read_text())
    signed = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert (signed["old_map_version"], signed["new_map_version"]) == (1, 5)
    assert signed["old_floor_map_hash"] == signed["new_floor_map_hash"] == after.floor_map_hash
    # Numbered so, the map stays at 5 while nothing changes.
    code, _, err = refresh(project, "--write")
    assert code == 0, err
    assert block_version(module) == 5


def test_the_publish_warning_names_the_way_out_and_goes_once_it_is_taken(project: Path) -> None:
    _, private, _ = new_key(project.parent / "publisher")
    publish = ("publish", "--out", "site", "--module", "floor_map.py", "--signing-key",
               str(private), "--json")  # fmt: skip
    code, out, err = run(project, *publish)
    assert code == 0, err
    [warning] = json.loads(out)["warnings"]
    assert f"--map-version {BUILTIN_VERSION + 1}" in warning
    assert refresh(project, "--write", "--map-version", str(BUILTIN_VERSION + 1))[0] == 0
    code, out, err = run(project, *publish)
    assert code == 0, err
    assert json.loads(out)["warnings"] == []


@pytest.mark.parametrize("chosen", ["1", "0", "-3", "two", "2147483648", "+4", "1_0"])
def test_a_number_that_does_not_rise_is_refused_and_the_module_is_left_as_it_was(
    project: Path, chosen: str
) -> None:
    module = project / "floor_map.py"
    before = module.read_bytes(), module.stat().st_mtime_ns
    code, out, err = refresh(project, "--write", "--map-version", chosen)
    if chosen == "1":
        assert code == 1
        assert "--map-version 1 is not above 1" in err and "floor_map.py" in err
    else:
        assert code == 2  # not a map version at all: a usage error
        assert "--map-version" in err
    assert out == ""
    assert (module.read_bytes(), module.stat().st_mtime_ns) == before


def test_a_number_below_one_the_module_held_before_is_refused(project: Path) -> None:
    # Versions a module held are recorded: renumbering down after a renumbering up is refused
    # even through a hand edit that put a lower number back (--force).
    assert refresh(project, "--write", "--map-version", "9")[0] == 0
    module = project / "floor_map.py"
    module.write_text(module.read_text().replace("FLOOR_MAP_VERSION = 9", "FLOOR_MAP_VERSION = 2"))
    code, _, err = refresh(project, "--write", "--force", "--map-version", "4")
    assert code == 1
    assert "--map-version 4 is not above 9" in err


def test_check_with_a_chosen_number_says_the_number_is_what_differs(project: Path) -> None:
    module = project / "floor_map.py"
    before = module.read_bytes()
    code, _, err = refresh(project, "--check", "--map-version", "7")
    assert code == 1
    assert "data matches the feeds, but it is numbered 1, not --map-version 7" in err, err
    assert "does not match the feeds" not in err
    assert module.read_bytes() == before
