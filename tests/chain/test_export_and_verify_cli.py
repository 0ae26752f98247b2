"""``floorctl chain export`` and ``python -m floorguard chain export``, ``floorctl verify chain``
and ``python -m floorguard verify chain``, run as real commands on a real chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.chain_support import filled_chain

FLOORCTL = [sys.executable, "-m", "floorctl"]
FLOORGUARD = [sys.executable, "-m", "floorguard"]
VERIFIERS = {"floorctl": FLOORCTL, "floorguard": FLOORGUARD}
EXPORTERS = {name: [*tool, "chain", "export"] for name, tool in VERIFIERS.items()}

GAP = "(records missing, duplicated or out of order)"


def run(argv: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "FLOORGUARD_HOME": str(home), **env}
    environ.pop("FLOORGUARD_CHAIN_KEY_FILE", None)
    environ.update(env)
    return subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=60)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    filled_chain(folder, 6)
    return folder


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_prints_the_whole_chain_as_json_lines(home: Path, tool: str) -> None:
    done = run(EXPORTERS[tool], home)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["seq"] for r in records] == list(range(6))
    assert all(
        set(r) == {"seq", "ts", "chain_id", "event", "receipt_id", "receipt", "prev", "mac"}
        for r in records
    )


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_with_a_window_and_out_file(home: Path, tmp_path: Path, tool: str) -> None:
    out = tmp_path / "slice.jsonl"
    done = run(
        [
            *EXPORTERS[tool],
            "--since",
            "2026-01-01T00:00:02Z",
            "--until",
            "2026-01-01T01:00:03+01:00",
            "--out",
            str(out),
        ],
        home,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert [json.loads(line)["seq"] for line in out.read_text().splitlines()] == [1, 2, 3, 4]
    assert not list(tmp_path.glob(".slice.jsonl.*"))


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
@pytest.mark.parametrize("option", ["--since", "--until"])
def test_export_rejects_a_malformed_time_as_a_usage_error(
    home: Path, option: str, tool: str
) -> None:
    done = run([*EXPORTERS[tool], option, "2026-01-01 00:00"], home)
    assert done.returncode == 2
    assert "RFC 3339" in done.stderr


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_without_a_chain_fails_and_creates_nothing(tmp_path: Path, tool: str) -> None:
    home = tmp_path / "empty"
    done = run(EXPORTERS[tool], home)
    assert done.returncode == 1
    assert done.stderr.startswith(f"{tool}: error: no audit chain at")
    assert not home.exists()


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_beside_a_left_rollback_journal_names_the_journal_not_permissions(
    home: Path, tool: str
) -> None:
    # (a journal header: SQLite's magic, then the rest of a 512-byte header)
    (home / "chain.sqlite3-journal").write_bytes(bytes.fromhex("d9d505f920a163d7") + bytes(504))
    done = run(EXPORTERS[tool], home)
    assert done.returncode == 1
    assert "a rollback journal, the file's -journal, lies beside it" in done.stderr, done.stderr
    assert "read-only" not in done.stderr


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_never_creates_a_key(home: Path, tool: str) -> None:
    (home / "chain.key").unlink()
    done = run(EXPORTERS[tool], home)
    assert done.returncode == 0
    assert not (home / "chain.key").exists()


def test_both_command_lines_export_the_same_bytes(home: Path, tmp_path: Path) -> None:
    window = ["--since", "2026-01-01T00:00:02Z", "--until", "2026-01-01T00:00:04Z"]
    outputs = {tool: run([*EXPORTERS[tool], *window], home) for tool in EXPORTERS}
    assert all(done.returncode == 0 for done in outputs.values())
    assert outputs["floorctl"].stdout == outputs["floorguard"].stdout != ""
    out = tmp_path / "slice.jsonl"
    done = run([*EXPORTERS["floorguard"], *window, "--out", str(out)], home)
    assert done.stderr == f"floorguard: wrote 5 record(s) to {out}\n"
    assert out.read_text() == outputs["floorctl"].stdout


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_with_since_after_until_is_a_usage_error(home: Path, tool: str) -> None:
    window = ["--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z"]
    done = run([*EXPORTERS[tool], *window], home)
    assert done.returncode == 2
    assert "--since is later than --until" in done.stderr


@pytest.mark.parametrize("tool", sorted(VERIFIERS))
def test_round_trip_export_then_verify_is_proven(home: Path, tmp_path: Path, tool: str) -> None:
    out = tmp_path / "slice.jsonl"
    assert run([*FLOORCTL, "chain", "export", "--out", str(out)], home).returncode == 0
    done = run(
        [*VERIFIERS[tool], "verify", "chain", str(out), "--key-file", str(home / "chain.key")],
        home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "PROVEN"
    assert "MACs not checked" not in done.stderr


@pytest.mark.parametrize("tool", sorted(VERIFIERS))
def test_refuses_a_slice_checked_without_key_or_checkpoint_unless_told_to_accept_it(
    home: Path, tmp_path: Path, tool: str
) -> None:
    out = tmp_path / "slice.jsonl"
    run([*FLOORCTL, "chain", "export", "--out", str(out)], home)
    done = run([*VERIFIERS[tool], "verify", "chain", str(out)], home)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "NOT PROVEN"
    assert "unauthenticated: no --key-file, --host-keys or --checkpoint" in done.stdout
    assert "MACs not checked: no --key-file or --host-keys" in done.stderr
    accepted = run([*VERIFIERS[tool], "verify", "chain", str(out), "--unauthenticated"], home)
    assert accepted.returncode == 0, accepted.stdout
    assert "NOT authenticated" in accepted.stdout
    document = json.loads(
        run([*VERIFIERS[tool], "verify", "chain", str(out), "--unauthenticated", "--json"],
            home).stdout
    )  # fmt: skip
    assert (document["proven"], document["authenticated_by"]) == (True, None)


@pytest.mark.parametrize("tool", sorted(VERIFIERS))
def test_verify_reports_every_tampered_record_and_exits_1(
    home: Path, tmp_path: Path, tool: str
) -> None:
    lines = run([*FLOORCTL, "chain", "export"], home).stdout.splitlines(keepends=True)
    first = json.loads(lines[1])
    first["receipt"]["adapter"] = "claude"
    lines[1] = json.dumps(first) + "\n"
    del lines[4]
    out = tmp_path / "tampered.jsonl"
    out.write_text("".join(lines))
    done = run(
        [*VERIFIERS[tool], "verify", "chain", str(out), "--key-file", str(home / "chain.key")],
        home,
    )
    assert done.returncode == 1
    report = done.stdout.splitlines()
    assert report[0] == "NOT PROVEN"
    assert "seq 1: receipt_id is not the content address of the receipt" in report
    assert (
        "seq 5: expected seq 4 after seq 3 (records missing, duplicated or out of order)" in report
    )


def test_both_verifiers_print_the_same_json_document(home: Path, tmp_path: Path) -> None:
    lines = run([*FLOORCTL, "chain", "export"], home).stdout.splitlines(keepends=True)
    out = tmp_path / "slice.jsonl"
    out.write_text("".join([*lines[:2], *lines[3:]]))
    outputs = []
    for tool in (FLOORCTL, FLOORGUARD):
        done = run([*tool, "verify", "chain", str(out), "--unauthenticated", "--json"], home)
        assert done.returncode == 1
        outputs.append(json.loads(done.stdout))
    assert (
        outputs[0]
        == outputs[1]
        == {
            "proven": False,
            "since": None,
            "until": None,
            "records": 5,
            "authenticated_by": None,
            "violations": [],
            "integrity_errors": [
                {
                    "seq": 3,
                    "reason": "expected seq 2 after seq 1 " + GAP,
                }
            ],
        }
    )


def test_verify_reads_the_slice_from_stdin(home: Path) -> None:
    exported = run([*FLOORCTL, "chain", "export"], home).stdout
    environ = {**os.environ, "FLOORGUARD_HOME": str(home)}
    done = subprocess.run(
        [*FLOORGUARD, "verify", "chain", "-", "--unauthenticated", "--json"],
        input=exported,
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["records"] == 6


@pytest.mark.parametrize("tool", sorted(VERIFIERS))
def test_verify_refuses_a_corrupt_key_file(home: Path, tmp_path: Path, tool: str) -> None:
    out = tmp_path / "slice.jsonl"
    run([*FLOORCTL, "chain", "export", "--out", str(out)], home)
    bad_key = tmp_path / "bad.key"
    bad_key.write_text("not a key\n")
    bad_key.chmod(0o600)
    done = run([*VERIFIERS[tool], "verify", "chain", str(out), "--key-file", str(bad_key)], home)
    assert done.returncode == 1
    assert done.stderr.startswith(f"{tool}: error: chain key file {bad_key}")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tool", sorted(VERIFIERS))
def test_verify_of_a_missing_slice_is_one_error_line(tmp_path: Path, tool: str) -> None:
    done = run([*VERIFIERS[tool], "verify", "chain", str(tmp_path / "nope.jsonl")], tmp_path)
    assert done.returncode in (1, 2)
    assert "Traceback" not in done.stderr
    assert "nope.jsonl" in done.stderr


def test_verify_never_creates_state(tmp_path: Path) -> None:
    slice_file = tmp_path / "slice.jsonl"
    slice_file.write_text("")
    home = tmp_path / "state"
    done = run([*FLOORGUARD, "verify", "chain", str(slice_file), "--unauthenticated"], home)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["NOT PROVEN", "the slice holds no records"]
    assert not home.exists()


def test_floorguard_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run([*FLOORGUARD, "verify"], tmp_path).returncode == 2
    assert run([*FLOORGUARD, "verify", "chain"], tmp_path).returncode == 2


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
def test_export_into_a_closed_pipe_exits_1_without_a_traceback(tmp_path: Path, tool: str) -> None:
    filled_chain(tmp_path, 400)  # more than a pipe buffer holds
    environ = {**os.environ, "FLOORGUARD_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        EXPORTERS[tool],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'{"chain_id":')
    proc.stdout.close()  # the reader goes away, as `| head -1` would
    assert proc.wait(timeout=60) == 1
    assert proc.stderr.read() == b""


@pytest.mark.parametrize("tool", sorted(EXPORTERS))
@pytest.mark.parametrize("target", ["chain.sqlite3", "chain.key", "chain.sqlite3-wal"])
def test_export_over_a_file_the_chain_is_kept_in_is_refused_and_changes_nothing(
    home: Path, tool: str, target: str
) -> None:
    key = (home / "chain.key").read_bytes()
    records = run([*FLOORCTL, "chain", "export"], home).stdout
    done = run([*EXPORTERS[tool], "--out", str(home / target)], home)
    assert done.returncode == 1
    assert "a file floorguard keeps the audit chain or this host's map record in" in done.stderr
    assert (home / "chain.key").read_bytes() == key
    assert (home / "chain.sqlite3").read_bytes().startswith(b"SQLite format 3\x00")
    again = run([*FLOORCTL, "chain", "export"], home)
    assert again.returncode == 0 and again.stdout == records and len(records.splitlines()) == 6


def test_every_chain_output_over_the_chains_key_is_refused(home: Path, tmp_path: Path) -> None:
    key = home / "chain.key"
    link = tmp_path / "to-key"
    link.symlink_to(key)
    before = key.read_bytes()
    for argv in (
        [*FLOORGUARD, "chain", "export", "--out", str(link)],
        [*FLOORCTL, "chain", "export", "--checkpoint-out", str(key)],
        [*FLOORCTL, "chain", "checkpoint", "--out", str(key)],
        [*FLOORCTL, "chain", "prove", "--seq", "0", "--out", str(key)],
    ):
        done = run(argv, home)
        assert done.returncode == 1, done.stderr
        assert "a file floorguard keeps the audit chain or this host's map record in" in done.stderr
    assert key.read_bytes() == before and link.is_symlink()


@pytest.fixture
def home_seen_elsewhere(home: Path, tmp_path: Path) -> Iterator[Path]:
    """The chain's folder bind-mounted at another path: one folder, two names that no
    path comparison links (skipped where this process may not mount)."""
    alias = tmp_path / "alias"
    alias.mkdir()
    if subprocess.run(["mount", "--bind", str(home), str(alias)], capture_output=True,
                      check=False).returncode != 0:  # fmt: skip
        pytest.skip("no bind mount here (needs CAP_SYS_ADMIN)")
    try:
        yield alias
    finally:
        subprocess.run(["umount", str(alias)], check=False)


@pytest.mark.parametrize("target", ["chain.sqlite3", "chain.key"])
def test_an_output_over_a_chain_file_through_a_bind_mount_is_refused(
    home: Path, home_seen_elsewhere: Path, target: str
) -> None:
    kept = {name: (home / name).read_bytes() for name in ("chain.sqlite3", "chain.key")}
    for argv in (
        [*FLOORCTL, "chain", "export", "--out", str(home_seen_elsewhere / target)],
        [*FLOORGUARD, "chain", "export", "--out", str(home_seen_elsewhere / target)],
        [*FLOORCTL, "chain", "checkpoint", "--out", str(home_seen_elsewhere / target)],
    ):
        done = run(argv, home)
        assert done.returncode == 1, done.stderr
        assert "a file floorguard keeps the audit chain or this host's map record in" in done.stderr
    assert {name: (home / name).read_bytes() for name in kept} == kept


def test_no_output_of_floorctl_is_written_over_a_file_the_chain_is_kept_in(
    home: Path, tmp_path: Path
) -> None:
    feed = Path(__file__).resolve().parents[2] / "feeds" / "example.v1.json"
    module = tmp_path / "floor_map.py"
    assert run([*FLOORCTL, "init", "--module", str(module)], home).returncode == 0
    records = run([*FLOORCTL, "chain", "export"], home).stdout
    done = run(
        [*FLOORCTL, "refresh", "--module", str(module), "--feed", str(feed), "--write",
         "--receipt-out", str(home / "chain.sqlite3")],
        home,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"refusing to write over {home / 'chain.sqlite3'}" in done.stderr
    assert run([*FLOORCTL, "chain", "export"], home).stdout == records
