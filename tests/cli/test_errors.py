"""Failures as a script sees them: with ``--json`` (or ``--format json``) exactly one JSON
document on stdout, ``{"error": {"message", "exit_status"}}``, the exit status kept and the
one line on stderr still there; usage errors one line, ``floorctl: error: ...``, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from feedserver import NOW, FeedServer, envelope, new_key, v2_feed
from helpers.cli import floorctl, isolated_env
from probes.native import native_program

REPO = Path(__file__).resolve().parents[2]
MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'


def entry(version: str) -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": "BSA-0001", "note": "Upgrade."}


def run(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=cwd, state=cwd / "state")


def error_document(done: subprocess.CompletedProcess[str], status: int) -> dict[str, Any]:
    """The one JSON document a failure prints, checked against its exit status and the line
    on stderr (json.loads refuses a second document after the first)."""
    assert done.returncode == status, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"error"}
    assert set(document["error"]) == {"message", "exit_status"}
    assert document["error"]["exit_status"] == status
    errors = [line for line in done.stderr.splitlines() if line.startswith("floorctl: error: ")]
    assert errors == [f"floorctl: error: {document['error']['message']}"], done.stderr
    error: dict[str, Any] = document["error"]
    return error


@pytest.fixture
def server() -> Iterator[FeedServer]:
    running = FeedServer()
    yield running
    running.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A module refreshed once from a feed with aider's floor at 0.60.0."""
    (tmp_path / MODULE.parent).mkdir(parents=True)
    (tmp_path / MODULE).write_text(EMPTY_MODULE)
    (tmp_path / "feed.json").write_text(
        json.dumps({"schema_version": 1, "adapters": {"aider": entry("0.60.0")}})
    )
    done = run(tmp_path, "refresh", "--feed", "feed.json", "--write")
    assert done.returncode == 0, done.stderr
    return tmp_path


# --- refusals with --json ----------------------------------------------------------------------


@pytest.mark.parametrize("flag", [("--json",), ("--format", "json")])
def test_refused_downgrade_prints_one_json_error_and_exits_1(
    project: Path, flag: tuple[str, ...]
) -> None:
    (project / "feed.json").write_text(
        json.dumps({"schema_version": 1, "adapters": {"aider": entry("0.59.0")}})
    )
    before = (project / MODULE).read_bytes()
    done = run(project, "refresh", "--feed", "feed.json", "--write", *flag)
    error = error_document(done, 1)
    assert "lowers the floor of aider" in error["message"]
    assert (project / MODULE).read_bytes() == before


def test_fetch_404_prints_one_json_error(server: FeedServer, tmp_path: Path) -> None:
    done = run(
        tmp_path, "fetch", server.url("/missing.json"), "--out", "feed.json",
        "--state-file", "feeds-state.json", "--json",
    )  # fmt: skip
    error = error_document(done, 1)
    assert "HTTP status 404" in error["message"]
    assert not (tmp_path / "feed.json").exists()


def test_bad_signature_prints_one_json_error(server: FeedServer, tmp_path: Path) -> None:
    _, _, trusted = new_key(tmp_path / "publisher")
    stranger, _, _ = new_key(tmp_path / "stranger")
    data = v2_feed(1)
    server.serve("/feed.json", data)
    server.serve("/feed.json.dsse", envelope(data, stranger))
    done = run(
        tmp_path, "fetch", server.url("/feed.json"), "--out", "feed.json",
        "--state-file", "feeds-state.json", "--trusted-keys", trusted, "--now", NOW, "--json",
    )  # fmt: skip
    error = error_document(done, 1)
    assert "bad signature" in error["message"]
    assert not (tmp_path / "feed.json").exists()


def test_missing_signing_key_file_prints_one_json_error(tmp_path: Path) -> None:
    done = floorctl(
        "publish", "--out", tmp_path / "out", "--signing-key", tmp_path / "missing.key",
        "--json", cwd=REPO, state=tmp_path / "state",
    )  # fmt: skip
    error = error_document(done, 1)
    assert str(tmp_path / "missing.key") in error["message"]
    assert not (tmp_path / "out").exists()


def test_an_unwritable_output_is_an_os_error_with_one_json_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = run(tmp_path, "keygen", "--out", tmp_path / "file" / "keys", "--json")
    error = error_document(done, 1)
    assert str(tmp_path / "file") in error["message"]


def test_usage_error_with_json_prints_one_json_error_and_exits_2(tmp_path: Path) -> None:
    done = run(tmp_path, "refresh", "--json", "--bogus")
    error = error_document(done, 2)
    assert error["message"] == "No such option '--bogus' (see 'floorctl refresh --help')"


def test_a_command_that_printed_its_document_prints_no_second_one(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    native_program(bin_dir / "claude", stdout=b"1.0.3 (Claude Code)\n")
    done = floorctl("doctor", "--json", cwd=REPO, state=tmp_path / "state", PATH=str(bin_dir))
    assert done.returncode == 1
    assert "adapters" in json.loads(done.stdout)  # one document: the posture, no error one
    assert done.stderr.startswith("floorctl: error: not ok or waived: claude (below_floor)")


def test_validate_json_of_a_bad_feed_is_its_report_alone(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"schema_version": 1}')
    done = run(tmp_path, "validate", "bad.json", "--format", "json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["valid"] is False and "error" not in document


def test_without_json_a_failure_prints_nothing_on_stdout(project: Path) -> None:
    (project / "feed.json").write_text(json.dumps({"schema_version": 1, "adapters": {}}))
    done = run(project, "refresh", "--feed", "feed.json", "--write")
    assert done.returncode == 1
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("floorctl: error: ")


def test_runtime_failure_with_json_prints_one_json_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "chain", "missing.jsonl", "--json",
         "--unauthenticated"],
        cwd=tmp_path, env=isolated_env(tmp_path / "state"), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["error"]["exit_status"] == 1
    assert "missing.jsonl" in document["error"]["message"]
    assert f"floorguard: error: {document['error']['message']}" in done.stderr.splitlines()


# --- usage errors: one line, exit 2 --------------------------------------------------------------


@pytest.mark.parametrize("command", ["fetch", "refresh"])
@pytest.mark.parametrize(
    "now",
    [
        "2026-01-01T00:00:00.Z",  # a fraction point without digits
        "2026-01-01T00:00:00.+01:00",
        "2026-01-01T00:00:00,5Z",  # ISO 8601 forms datetime.fromisoformat takes, not RFC 3339
        "2026-01-01T00:00Z",
        "2026-01-01T00Z",
        "20260101T000000Z",
        "2026-W01-1T00:00:00Z",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+01",
        "2026-01-01T00:00:00+01:60",  # time-minute is 00-59, in an offset too
        "2026-01-01T00:00:00+00:60",
    ],
)
def test_now_that_is_not_rfc_3339_is_a_usage_error(tmp_path: Path, command: str, now: str) -> None:
    args = {
        "fetch": ("fetch", "http://127.0.0.1:1/f.json", "--out", "f.json"),
        "refresh": ("refresh", "--feed", "f.json"),
    }[command]
    done = run(tmp_path, *args, "--now", now)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"floorctl: error: Invalid value for --now: not an RFC 3339 timestamp: {now!r} "
        f"(see 'floorctl {command} --help')\n"
    )


@pytest.mark.parametrize("now", ["2026-01-01t00:00:00.5z", "2026-01-01T01:00:00.123456789+01:00"])
def test_now_in_rfc_3339_is_accepted(tmp_path: Path, now: str) -> None:
    # Lower-case t and z, and a fraction longer than microseconds, are RFC 3339: the command
    # goes on to the download (nothing listens on port 1).
    done = run(tmp_path, "fetch", "http://127.0.0.1:1/f.json", "--out", "f.json", "--now", now)
    assert done.returncode == 1, done.stderr
    assert "--now" not in done.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("refresh", "--feed", "f.json", "--bogus"),
            "No such option '--bogus' (see 'floorctl refresh --help')",
        ),
        (
            ("canary", "record", "--adapter", "aider", "--version", "1.0.0"),
            "Missing option '--result'. Choose from: fail, pass "
            "(see 'floorctl canary record --help')",
        ),
        (
            ("canary", "record", "--adapter", "aider", "--version", "1.0.0", "--result", "maybe"),
            "Invalid value for '--result': 'maybe' is not one of 'fail', 'pass' "
            "(see 'floorctl canary record --help')",
        ),
        (
            ("fetch", "https://example.invalid/f.json", "--out", "f.json", "--now", "yesterday"),
            "Invalid value for --now: not an RFC 3339 timestamp: 'yesterday' "
            "(see 'floorctl fetch --help')",
        ),
        (("verify", "chain"), "Missing argument 'SLICE' (see 'floorctl verify chain --help')"),
        (("frobnicate",), "No such command 'frobnicate' (see 'floorctl --help')"),
    ],
)
def test_usage_errors_are_one_documented_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    done = run(tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr == f"floorctl: error: {line}\n"
    assert done.stdout == ""
