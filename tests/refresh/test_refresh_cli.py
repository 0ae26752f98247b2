"""``floorctl refresh`` end to end: the real command on real files, state and chain.

Every attack must end with exit 1, one clear line naming the file (and for a feed the JSON
path), and the module, the receipt file and the audit chain exactly as they were.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import floorctl

REPO = Path(__file__).resolve().parents[2]
MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'


def entry(version: str, advisory: str = "BSA-0001", note: str = "Upgrade.") -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": advisory, "note": note}


def feed(**adapters: dict[str, str]) -> dict[str, object]:
    return {"schema_version": 1, "adapters": adapters}


BASELINE = feed(aider=entry("0.60.0"), claude=entry("1.0.20", "BSA-0002"))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose module, receipt and chain were written by one refresh --anchor."""
    root = tmp_path_factory.mktemp("baseline")
    project, state = root / "project", root / "state"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(BASELINE))
    done = floorctl(
        "refresh",
        "--feed",
        "feed.json",
        "--write",
        "--receipt-out",
        "receipt.json",
        "--anchor",
        cwd=project,
        state=state,
    )
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def project(baseline: Path, tmp_path: Path) -> Path:
    shutil.copytree(baseline, tmp_path / "copy")
    return tmp_path / "copy"


def run(root: Path, *args: str) -> tuple[int, str, str]:
    done = floorctl(*args, cwd=root / "project", state=root / "state")
    return done.returncode, done.stdout, done.stderr


def export(root: Path) -> str:
    code, out, err = run(root, "chain", "export")
    assert code == 0, err
    return out


def snapshot(root: Path) -> tuple[bytes, bytes, str]:
    project = root / "project"
    return (project / MODULE).read_bytes(), (project / "receipt.json").read_bytes(), export(root)


def bad_write(root: Path, *args: str) -> tuple[int, str, str]:
    return run(root, "refresh", *args, "--write", "--receipt-out", "receipt.json", "--anchor")


def test_first_refresh_wrote_the_block_receipt_and_chain_record(baseline: Path) -> None:
    text = (baseline / "project" / MODULE).read_text()
    assert text.startswith('"""Host module."""\n\n# floor-map:begin\nFLOOR_MAP_VERSION = 1\n')
    assert text.endswith("# floor-map:end\n\nTAIL = 1\n")
    lines = export(baseline).splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["adapter.floor_update_receipt"]
    code, out, err = run(baseline, "verify", "receipt", "receipt.json", "--floor-map", str(MODULE))
    assert code == 0, err
    assert json.loads(lines[0])["receipt_id"] in out


def test_same_data_again_is_a_no_op_that_leaves_the_module_untouched(project: Path) -> None:
    before = (project / "project" / MODULE).stat()
    code, out, _ = run(project, "refresh", "--feed", "feed.json", "--write")
    assert code == 0
    assert "unchanged" in out
    after = (project / "project" / MODULE).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_raising_a_floor_writes_a_data_only_diff_and_bumps_the_version(project: Path) -> None:
    old_text = (project / "project" / MODULE).read_text()
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.61.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    code, out, err = bad_write(project, "--feed", "feed.json")
    assert code == 0, err
    assert "~ aider min_safe_version: '0.60.0' -> '0.61.0'" in out
    new_text = (project / "project" / MODULE).read_text()
    changed = [
        (a.strip(), b.strip())
        for a, b in zip(old_text.splitlines(), new_text.splitlines(), strict=True)
        if a != b
    ]
    first_hash = json.loads(export(project).splitlines()[0])["receipt"]["new_floor_map_hash"]
    assert [pair[0] for pair in changed] == [
        "FLOOR_MAP_VERSION = 1",
        f'FLOOR_MAP_HASH = "{first_hash}"',
        '"min_safe_version": "0.60.0",',
    ]
    assert changed[-1][1] == '"min_safe_version": "0.61.0",'
    assert "FLOOR_MAP_VERSION = 2" in new_text
    assert len(export(project).splitlines()) == 2


def test_dry_run_reports_the_diff_and_writes_nothing(project: Path) -> None:
    before = snapshot(project)
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.61.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    code, out, _ = run(project, "refresh", "--feed", "feed.json")
    assert code == 0
    assert "dry run: nothing written" in out
    assert snapshot(project) == before


def test_check_exits_1_when_the_module_is_stale_and_0_when_current(project: Path) -> None:
    assert run(project, "refresh", "--feed", "feed.json", "--check")[0] == 0
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.61.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    code, _, err = run(project, "refresh", "--feed", "feed.json", "--check", "--diff")
    assert code == 1
    assert "stale" in err


def test_check_of_a_module_whose_update_would_be_a_downgrade_reports_it_stale(
    project: Path,
) -> None:
    """A check reports: stale (its exit status), and that the update needs --allow-downgrade;
    it does not refuse the downgrade as a write would."""
    before = snapshot(project)
    (project / "project" / "feed.json").write_text(json.dumps(feed(aider=entry("0.50.0"))))
    code, out, err = run(project, "refresh", "--feed", "feed.json", "--check")
    assert code == 1
    assert "refusing" not in err
    [line] = err.splitlines()
    assert f"{MODULE}: stale:" in line
    assert "--allow-downgrade" in line
    assert "lowers the floor of aider" in line
    assert "downgrade (needs --allow-downgrade)" in out
    code, out, _ = run(project, "refresh", "--feed", "feed.json", "--check", "--json")
    assert code == 1
    document = json.loads(out)
    assert (document["stale"], document["downgrade"]) == (True, True)
    assert snapshot(project) == before


def test_dry_run_of_a_downgrade_reports_its_diff_then_refuses_it(project: Path) -> None:
    """Without --write the data diff is reported, a downgrade's too: what would be lowered
    is shown, and the run still exits 1 naming --allow-downgrade."""
    before = snapshot(project)
    (project / "project" / "feed.json").write_text(json.dumps(feed(aider=entry("0.50.0"))))
    code, out, err = run(project, "refresh", "--feed", "feed.json", "--diff")
    assert code == 1
    assert "~ aider min_safe_version: '0.60.0' -> '0.50.0'" in out
    assert "  - claude" in out.splitlines()
    assert "downgrade (needs --allow-downgrade)" in out
    assert '+        "min_safe_version": "0.50.0",' in out
    [line] = err.splitlines()
    assert "refusing a downgrade" in line and "--allow-downgrade" in line
    code, out, err = run(project, "refresh", "--feed", "feed.json", "--json")
    assert code == 1
    document = json.loads(out)
    assert (document["stale"], document["downgrade"]) == (True, True)
    assert "refusing a downgrade" in err
    assert snapshot(project) == before


def test_diff_prints_a_unified_diff_of_the_module(project: Path) -> None:
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.61.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    _, out, _ = run(project, "refresh", "--feed", "feed.json", "--diff")
    assert f"--- a/{MODULE}" in out
    assert '-        "min_safe_version": "0.60.0",' in out
    assert '+        "min_safe_version": "0.61.0",' in out


def test_json_output_is_one_document(project: Path) -> None:
    code, out, _ = run(project, "refresh", "--feed", "feed.json", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["stale"] is False
    assert document["adapters"] == 2


def test_merges_feeds_highest_floor_wins_and_reports_the_conflict(project: Path) -> None:
    (project / "project" / "other.json").write_text(json.dumps(feed(aider=entry("0.70.0"))))
    code, _, err = bad_write(project, "--feed", "feed.json", "--feed", "other.json")
    assert code == 0, err
    assert "feeds disagree" in err
    assert '"min_safe_version": "0.70.0"' in (project / "project" / MODULE).read_text()


def test_allow_downgrade_is_recorded_in_the_receipt(project: Path) -> None:
    (project / "project" / "feed.json").write_text(json.dumps(feed(aider=entry("0.50.0"))))
    code, _, err = bad_write(project, "--feed", "feed.json", "--allow-downgrade")
    assert code == 0, err
    record = json.loads(export(project).splitlines()[-1])
    assert record["receipt"]["downgrade_allowed"] is True
    assert record["receipt"]["downgrade"] is True
    assert record["receipt"]["diff"]["removed"] == ["claude"]


def test_forced_overwrite_of_a_hand_edit_is_recorded(project: Path) -> None:
    module = project / "project" / MODULE
    module.write_text(module.read_text().replace('"0.60.0"', '"0.10.0"'))
    code, _, err = bad_write(project, "--feed", "feed.json", "--force")
    assert code == 0, err
    assert '"0.60.0"' in module.read_text()
    assert json.loads(export(project).splitlines()[-1])["receipt"]["forced"] is True


def test_receipt_out_without_write_is_a_usage_error(project: Path) -> None:
    code, _, err = run(project, "refresh", "--feed", "feed.json", "--receipt-out", "r.json")
    assert code == 2
    assert "--write" in err


# ---------------------------------------------------------------- attacks: nothing changes

FeedAttack = Callable[[Path], str]


def raw(text: str | bytes) -> FeedAttack:
    def write(path: Path) -> str:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path.name

    return write


def doc(document: object) -> FeedAttack:
    return raw(json.dumps(document))


def huge(path: Path) -> str:
    with path.open("wb") as handle:
        handle.write(b'{"schema_version": 1, "adapters": {}, "x": "')
        handle.write(b"a" * (16 * 1024 * 1024))
        handle.write(b'"}')
    return path.name


FEED_ATTACKS: dict[str, tuple[FeedAttack, str]] = {
    "malformed_json": (raw('{"schema_version": 1, "adapters": {'), "$"),
    "duplicate_keys": (
        raw('{"schema_version": 1, "adapters": {"aider": {"min_safe_version": "1.0", '
            '"min_safe_version": "0.1", "advisory_id": "BSA-1", "note": "n"}}}'),
        "$.adapters.aider",
    ),
    "wrong_type": (doc(feed(aider={**entry("1.0"), "min_safe_version": 1})), "$.adapters.aider"),
    "unknown_field": (doc(feed(aider={**entry("1.0"), "exec": "x"})), "$.adapters.aider"),
    "unknown_top_field": (doc({**feed(aider=entry("1.0")), "extra": 1}), "$"),
    "unknown_schema_version": (doc({"schema_version": 9, "adapters": {}}), "$.schema_version"),
    "non_pep440_version": (doc(feed(aider=entry("latest"))), "$.adapters.aider.min_safe_version"),
    "empty_version": (doc(feed(aider=entry(""))), "$.adapters.aider.min_safe_version"),
    "name_with_path_separator": (doc({"schema_version": 1, "adapters": {"../x": entry("1")}}),
                                 "$.adapters"),
    "name_upper_case": (doc(feed(Aider=entry("1.0"))), "$.adapters"),
    "name_unicode_lookalike": (doc({"schema_version": 1, "adapters": {"\u0430ider": entry("1")}}),
                               "$.adapters"),
    "note_with_newline": (doc(feed(aider=entry("1.0", note="a\nb"))), "$.adapters.aider.note"),
    "note_with_quote": (doc(feed(aider=entry("1.0", note='say "hi"'))), "$.adapters.aider.note"),
    "note_with_backslash": (doc(feed(aider=entry("1.0", note="a\\b"))), "$.adapters.aider.note"),
    "note_with_triple_quote": (doc(feed(aider=entry("1.0", note='x"""; import os; """'))),
                               "$.adapters.aider.note"),
    "note_with_control_char": (doc(feed(aider=entry("1.0", note="a\x1b[2Jb"))),
                               "$.adapters.aider.note"),
    "note_with_template_syntax": (doc(feed(aider=entry("1.0", note="{{ cycler.__init__ }}"))),
                                  "$.adapters.aider.note"),
    "huge_file": (huge, "$"),
}  # fmt: skip


@pytest.mark.parametrize("attack", sorted(FEED_ATTACKS))
def test_refuses_bad_feed_and_changes_nothing(project: Path, attack: str) -> None:
    make, json_path = FEED_ATTACKS[attack]
    name = make(project / "project" / "evil.json")
    before = snapshot(project)
    code, out, err = bad_write(project, "--feed", name)
    assert code == 1, out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"floorctl: error: {name}: {json_path}")
    assert "Traceback" not in err
    assert snapshot(project) == before


MODULE_ATTACKS: dict[str, Callable[[str], bytes]] = {
    "missing_markers": lambda text: text.replace("# floor-map:begin\n", "").encode(),
    "missing_end_marker": lambda text: text.replace("# floor-map:end\n", "").encode(),
    "duplicated_marker": lambda text: text.replace(
        "# floor-map:end\n", "# floor-map:end\n# floor-map:begin\n# floor-map:end\n"
    ).encode(),
    "reversed_markers": lambda text: (
        text.replace("# floor-map:begin", "# floor-map:TMP")
        .replace("# floor-map:end", "# floor-map:begin")
        .replace("# floor-map:TMP", "# floor-map:end")
        .encode()
    ),
    "not_utf8": lambda text: text.encode() + b"\n# \xff\xfe\n",
    "code_in_block": lambda text: text.replace(
        "FLOOR_MAP_VERSION = 1", "import os\nFLOOR_MAP_VERSION = 1"
    ).encode(),
    # Outside the block, what floorguard refuses in a map module (it would empty the map
    # on import): refresh must not write, nor --check pass, a module every host refuses.
    "namespace_reached_after": lambda text: (
        text + 'globals()["FLOOR_MAP_ENTRIES"] = {}\n'
    ).encode(),
    "map_bound_again_after": lambda text: (text + "FLOOR_MAP_ENTRIES = {}\n").encode(),
}


@pytest.mark.parametrize("attack", sorted(MODULE_ATTACKS))
def test_refuses_bad_module_and_changes_nothing(project: Path, attack: str) -> None:
    module = project / "project" / MODULE
    module.write_bytes(MODULE_ATTACKS[attack](module.read_text()))
    (project / "project" / "feed.json").write_text(json.dumps(feed(aider=entry("0.61.0"))))
    before = snapshot(project)
    code, _, err = bad_write(project, "--feed", "feed.json")
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"floorctl: error: {MODULE}")
    assert snapshot(project) == before


@pytest.mark.parametrize("attack", ["namespace_reached_after", "map_bound_again_after"])
def test_check_fails_for_a_module_floorguard_refuses_though_its_block_is_current(
    project: Path, attack: str
) -> None:
    module = project / "project" / MODULE
    module.write_bytes(MODULE_ATTACKS[attack](module.read_text()))
    code, _, err = run(project, "refresh", "--feed", "feed.json", "--check")
    assert code == 1, err
    assert "floorguard" in err and "Traceback" not in err, err


def test_refuses_floor_downgrade_and_changes_nothing(project: Path) -> None:
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.59.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    before = snapshot(project)
    code, _, err = bad_write(project, "--feed", "feed.json")
    assert code == 1
    assert "lowers the floor of aider" in err
    assert snapshot(project) == before


def test_refuses_dropping_an_adapter_and_changes_nothing(project: Path) -> None:
    (project / "project" / "feed.json").write_text(json.dumps(feed(aider=entry("0.60.0"))))
    before = snapshot(project)
    code, _, err = bad_write(project, "--feed", "feed.json")
    assert code == 1
    assert "removes claude" in err
    assert snapshot(project) == before


def archives(root: Path) -> list[str]:
    return sorted(path.name for path in (root / "project" / MODULE.parent / "maps").iterdir())


@pytest.mark.parametrize("failure", ["receipt-out-in-a-missing-folder", "chain-key-damaged"])
def test_a_refresh_failing_after_planning_leaves_no_archive_of_the_map_it_never_wrote(
    project: Path, failure: str
) -> None:
    # maps/ keeps every map written; a map that never reached the module is not one.
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.61.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    receipt_out = "receipt.json"
    if failure == "chain-key-damaged":
        (project / "state" / "floorguard" / "chain.key").write_text("zz")
    else:
        receipt_out = "missing/receipt.json"
    files = [project / "project" / name for name in (MODULE, Path("receipt.json"))]
    before, archived = [path.read_bytes() for path in files], archives(project)
    code, _, err = run(
        project, "refresh", "--feed", "feed.json", "--write", "--receipt-out", receipt_out,
        "--anchor",
    )  # fmt: skip
    assert code == 1, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("floorctl: error: ")
    assert [path.read_bytes() for path in files] == before
    assert archives(project) == archived


def test_refuses_to_overwrite_a_hand_edited_block_without_force(project: Path) -> None:
    module = project / "project" / MODULE
    module.write_text(module.read_text().replace('"0.60.0"', '"0.10.0"'))
    before = snapshot(project)
    code, _, err = bad_write(project, "--feed", "feed.json")
    assert code == 1
    assert "edited by hand" in err and "--force" in err
    assert snapshot(project) == before


def test_refuses_an_unwritable_chain_and_restores_module_and_receipt(project: Path) -> None:
    (project / "project" / "feed.json").write_text(
        json.dumps(feed(aider=entry("0.61.0"), claude=entry("1.0.20", "BSA-0002")))
    )
    before = snapshot(project)
    key = project / "state" / "floorguard" / "chain.key"
    key.write_text("corrupted\n")
    code, _, err = bad_write(project, "--feed", "feed.json")
    assert code == 1, err
    key_text = key.read_text()
    assert key_text == "corrupted\n"
    project_files = (
        (project / "project" / MODULE).read_bytes(),
        (project / "project" / "receipt.json").read_bytes(),
    )
    assert project_files == before[:2]


def test_write_and_check_together_are_a_usage_error(project: Path) -> None:
    code, _, err = run(project, "refresh", "--feed", "feed.json", "--write", "--check")
    assert code == 2
    assert "exclude each other" in err
