"""``floorctl validate FEED...``, run as a real subprocess of the real command."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import floorctl

from floorctl.feeds import MAX_FEED_BYTES

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "feeds" / "example.v1.json"

GOOD = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "upgrade."}
    },
}


def write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def three_problems(tmp_path: Path) -> Path:
    adapters = {
        "aider": {"min_safe_version": "1.0 beta", "advisory_id": "BSA-0001", "note": "a"},
        "Codex": {"min_safe_version": "1.0", "advisory_id": "BSA-0002", "note": "b"},
        "goose": {"min_safe_version": "1.0", "advisory_id": "BSA-0003", "note": "two\nlines"},
    }
    return write(tmp_path / "bad.json", {"schema_version": 1, "adapters": adapters})


def test_accepts_the_shipped_example_feed(tmp_path: Path) -> None:
    result = floorctl("validate", EXAMPLE, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"ok  {EXAMPLE} (6 adapters)\n"
    assert result.stderr == ""


def test_reports_every_problem_one_line_each(tmp_path: Path) -> None:
    bad = three_problems(tmp_path)
    result = floorctl("validate", bad, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"floorctl: error: {bad}: $.adapters.Codex: "
        + '"Codex" is not a valid adapter name (lower-case letters, digits, '
        + "'.', '_' and '-', starting with a letter or digit, at most 64 characters)",
        f"floorctl: error: {bad}: $.adapters.aider.min_safe_version: "
        + "'1.0 beta' is not a valid PEP 440 version",
        f"floorctl: error: {bad}: $.adapters.goose.note: contains the non-printable "
        + "character U+000A (a control character); a note is one line of printable text",
    ]


def test_an_npm_clis_floor_must_be_semver_as_refresh_requires(tmp_path: Path) -> None:
    """claude compares by SemVer at run time: a floor of ``1.0`` (PEP 440, not SemVer) is
    refused by validate, with its JSON path, as refresh refuses it; aider's ``1.0`` is fine."""
    feed = write(tmp_path / "f.json", {"schema_version": 1, "adapters": {
        "claude": {"min_safe_version": "1.0", "advisory_id": "BSA-0001", "note": "a"},
        "aider": {"min_safe_version": "1.0", "advisory_id": "BSA-0002", "note": "b"},
    }})  # fmt: skip
    module = tmp_path / "m.py"
    assert floorctl("init", "--module", module, cwd=tmp_path, state=tmp_path).returncode == 0
    before = module.read_bytes()
    expected = (
        f"floorctl: error: {feed}: $.adapters.claude.min_safe_version: '1.0' is not a valid "
        "SemVer version, and claude is an npm CLI (its versions compare by SemVer)\n"
    )
    for command in (["validate", feed], ["refresh", "--module", module, "--feed", feed]):
        result = floorctl(*command, cwd=tmp_path, state=tmp_path)
        assert (result.returncode, result.stderr) == (1, expected), command
    assert module.read_bytes() == before


def test_a_floor_that_is_no_version_at_all_is_named_in_the_clis_own_order(tmp_path: Path) -> None:
    """``x.y`` is no version in either order: claude's floor is named as SemVer (not PEP
    440, which would send an npm CLI's maintainer the wrong way), aider's as PEP 440."""
    feed = write(tmp_path / "f.json", {"schema_version": 1, "adapters": {
        "claude": {"min_safe_version": "x.y", "advisory_id": "BSA-0001", "note": "a"},
        "aider": {"min_safe_version": "x.y", "advisory_id": "BSA-0002", "note": "b"},
    }})  # fmt: skip
    result = floorctl("validate", feed, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"floorctl: error: {feed}: $.adapters.aider.min_safe_version: 'x.y' is not a valid PEP "
        "440 version",
        f"floorctl: error: {feed}: $.adapters.claude.min_safe_version: 'x.y' is not a valid "
        "SemVer version, and claude is an npm CLI (its versions compare by SemVer)",
    ], result.stderr


def test_reports_a_single_problem_on_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "array.json"
    bad.write_text("[]", encoding="utf-8")
    result = floorctl("validate", bad, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"floorctl: error: {bad}: $: the top level must be a JSON object, not array\n"
    )


def test_checks_every_file_given(tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", GOOD)
    bad = tmp_path / "dup.json"
    bad.write_text('{"schema_version": 1, "schema_version": 1, "adapters": {}}', encoding="utf-8")
    missing = tmp_path / "missing.json"
    result = floorctl("validate", bad, good, missing, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert result.stdout == f"ok  {good} (1 adapters)\n"
    lines = result.stderr.splitlines()
    assert lines == [
        f"floorctl: error: {bad}: $.schema_version: "
        + "duplicate key (each key may appear only once per object)",
        f"floorctl: error: {missing}: $: cannot read the feed: No such file or directory",
    ]


def test_json_output_for_valid_and_invalid_feeds(tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", GOOD)
    bad = three_problems(tmp_path)
    result = floorctl("validate", "--json", good, bad, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["valid"] is False
    first, second = document["files"]
    assert first == {"file": str(good), "valid": True, "adapters": 1, "errors": []}
    assert second["file"] == str(bad)
    assert second["valid"] is False
    assert [error["path"] for error in second["errors"]] == [
        "$.adapters.Codex",
        "$.adapters.aider.min_safe_version",
        "$.adapters.goose.note",
    ]
    assert all(error["message"] for error in second["errors"])


def test_json_output_exits_0_when_all_feeds_are_valid(tmp_path: Path) -> None:
    result = floorctl("validate", "--json", EXAMPLE, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "valid": True,
        "files": [{"file": str(EXAMPLE), "valid": True, "adapters": 6, "errors": []}],
    }


def test_missing_feed_argument_is_a_usage_error(tmp_path: Path) -> None:
    result = floorctl("validate", cwd=tmp_path, state=tmp_path)
    assert result.returncode == 2
    assert "Missing argument" in result.stderr


def test_refuses_a_feed_over_16_mib(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as stream:
        stream.write(json.dumps(GOOD).encode())
        stream.write(b" " * MAX_FEED_BYTES)
    result = floorctl("validate", huge, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"floorctl: error: {huge}: $: "
        "feed is larger than 16,777,216 bytes (16 MiB); refused unread\n"
    )


def test_never_prints_a_traceback_for_hostile_bytes(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.json"
    hostile.write_bytes(b"[" * 200_000)
    result = floorctl("validate", hostile, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"floorctl: error: {hostile}: $: malformed JSON")


def test_keeps_terminal_escapes_in_a_feed_off_the_terminal(tmp_path: Path) -> None:
    entry = {"min_safe_version": "1.0", "advisory_id": "BSA-1", "note": "x"}
    sneaky = write(
        tmp_path / "sneaky.json",
        {"schema_version": 1, "adapters": {"\x1b[2Jaider": entry}, "\x1b]0;t\x07": 1},
    )
    result = floorctl("validate", sneaky, cwd=tmp_path, state=tmp_path)
    assert result.returncode == 1
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert '$.adapters["\\x1b[2Jaider"]' in result.stderr
