"""Attacks on the toolchain (verify receipt, verify chain, refresh, outputs), each on a
promise of the README; each test asserts the promise. Real CLIs in subprocesses, real
files.
"""

from __future__ import annotations

import itertools
import json
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl, isolated_env
from helpers.proof_support import (
    MAP_V1,
    SPAWN,
    UPDATE,
    at,
    build,
    spawn_receipt,
    update_receipt,
)

pytestmark = pytest.mark.attack

EMPTY_MODULE = '"""host module"""\n\n# floor-map:begin\n# floor-map:end\n'
EXAMPLE_FEED = Path(__file__).resolve().parents[2] / "feeds" / "example.v1.json"


def floorguard_cli(*args: str | Path, cwd: Path, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=isolated_env(state),
        timeout=120,
        check=False,
    )


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(("floorctl: error:", "floorguard: error:")), done.stderr


def feed_v1(floor: str) -> dict[str, Any]:
    entry = {"min_safe_version": floor, "advisory_id": "BSA-0001", "note": "n"}
    return {"schema_version": 1, "adapters": {"aider": entry}}


def feed_v2(feed_id: str, version: int, floor: str) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "feed_id": feed_id,
        "version": version,
        "published": "2026-01-01T00:00:00Z",
        "expires": "2099-01-01T00:00:00Z",
        **{k: v for k, v in feed_v1(floor).items() if k == "adapters"},
    }


def hold_chain_write_lock(state: Path) -> sqlite3.Connection:
    """Take SQLite's write lock on the chain, as another appender mid-transaction would."""
    conn = sqlite3.connect(state / "floorguard" / "chain.sqlite3", isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def start_refresh(project: Path, state: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "floorctl", "refresh", *args],
        cwd=project,
        env=isolated_env(state),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_changed(path: Path, before: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while path.read_text() == before:
        assert time.monotonic() < deadline, f"{path} never changed"
        time.sleep(0.01)


def update_receipts(project: Path, state: Path) -> list[dict[str, Any]]:
    done = floorctl("chain", "export", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [r["receipt"] for r in records if r["event"] == UPDATE]


# --- 1. verify chain: a prefix checkpoint "closes" a window it says nothing about ---


def test_a_prefix_checkpoint_from_export_does_not_prove_a_window_hiding_a_violation(
    tmp_path: Path,
) -> None:
    """`chain export --until T --checkpoint-out C` signs a checkpoint of an OLD prefix of the
    chain but stamps it with the current time. `verify chain --until T2` then accepts that
    checkpoint as "issued after T2 whose size is the last seq + 1" and says PROVEN for a
    window [T0, T2] although the chain holds a below-floor permit inside it (seq 4),
    which is not in the slice at all."""
    state = tmp_path / "state"
    home = state / "floorguard"
    build(
        home,
        [
            (UPDATE, update_receipt(MAP_V1)),  # seq 0, t=0: the map (aider >= 0.60.0)
            (SPAWN, spawn_receipt("aider", "0.61.0", "permit")),  # seq 1, t=1
            (SPAWN, spawn_receipt("aider", "0.62.0", "permit")),  # seq 2, t=2
            (SPAWN, spawn_receipt("aider", "0.63.0", "permit")),  # seq 3, t=3
            (SPAWN, spawn_receipt("aider", "0.10.0", "permit")),  # seq 4, t=4: VIOLATION
            (SPAWN, spawn_receipt("aider", "0.64.0", "permit")),  # seq 5, t=5
        ],
    )
    assert floorctl("keygen", "--out", tmp_path / "k", cwd=tmp_path, state=state).returncode == 0
    exported = floorctl(
        "chain", "export", "--until", at(1), "--out", tmp_path / "slice.jsonl",
        "--checkpoint-out", tmp_path / "cp.txt", "--signing-key", tmp_path / "k" / "signing.key",
        cwd=tmp_path, state=state,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    slice_lines = (tmp_path / "slice.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in slice_lines] == [0, 1, 2]

    done = floorctl(
        "verify", "chain", tmp_path / "slice.jsonl", "--since", at(0), "--until", at(10),
        "--key-file", home / "chain.key", "--checkpoint", tmp_path / "cp.txt",
        "--pubkey", tmp_path / "k" / "signing.pub", "--json",
        cwd=tmp_path, state=state,
    )  # fmt: skip
    document = json.loads(done.stdout)
    # The window [t0, t10] contains seq 4 (a permit of aider 0.10.0 below 0.60.0): never PROVEN.
    assert not document["proven"], (
        "PROVEN for a window the slice does not cover (it ends at seq 2, t=2; the chain "
        f"has a below-floor permit at seq 4, t=4): {done.stdout}"
    )
    assert done.returncode == 1


# --- 2. concurrent refreshes of two modules lose the shared feed state ---


def test_concurrent_refreshes_of_two_modules_keep_every_accepted_feed_version(
    tmp_path: Path,
) -> None:
    """`feeds-state.json` is shared by every module but written under the per-module lock
    only: refresh A (module a.py) loads the state, refresh B (module b.py) accepts feed-b
    v2 and saves, then A saves its stale copy. feed-b's record is lost, and a rolled-back
    feed-b v1 is then accepted ("A lower version is refused even if validly signed")."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    for name in ("init.py", "a.py", "b.py"):
        (project / name).write_text(EMPTY_MODULE)
    (project / "fa.json").write_text(json.dumps(feed_v2("feed-a", 1, "0.60.0")))
    (project / "fb2.json").write_text(json.dumps(feed_v2("feed-b", 2, "0.60.0")))
    (project / "fb1.json").write_text(json.dumps(feed_v2("feed-b", 1, "0.50.0")))
    first = floorctl(
        "refresh", "--feed", EXAMPLE_FEED, "--module", "init.py", "--write", "--anchor",
        cwd=project, state=state,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr

    lock = hold_chain_write_lock(state)  # refresh A now waits in its chain append
    try:
        before = (project / "a.py").read_text()
        a = start_refresh(
            project, state, "--feed", "fa.json", "--module", "a.py", "--write", "--anchor"
        )
        wait_until_changed(project / "a.py", before)
        # B either finishes at once (the state is not shared safely) or waits for A's lock on
        # the shared state; either way it is under way before A is let go.
        b_err = tmp_path / "b.err"
        with b_err.open("w") as err:
            b = subprocess.Popen(
                [sys.executable, "-m", "floorctl", "refresh", "--feed", "fb2.json",
                 "--module", "b.py", "--write"],
                cwd=project, env=isolated_env(state), stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while b.poll() is None and "waiting for" not in b_err.read_text():
            assert time.monotonic() < deadline, "refresh B neither finished nor waited"
            time.sleep(0.01)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert a.wait(timeout=60) == 0, a.communicate()[1]
    assert b.wait(timeout=60) == 0, b_err.read_text()

    accepted = json.loads((state / "floorctl" / "feeds-state.json").read_text())["feeds"]
    rollback = floorctl(
        "refresh", "--feed", "fb1.json", "--module", "b.py", "--write", "--allow-downgrade",
        cwd=project, state=state,
    )  # fmt: skip
    assert set(accepted) == {"feed-a", "feed-b"}, f"feed state lost an accepted feed: {accepted}"
    assert rollback.returncode == 1, "feed-b v1 accepted after v2 (rollback)"


# --- 3. kill -9 between the module write and the chain append ---


def test_a_killed_refresh_leaves_no_unanchored_map_and_the_receipts_chain(tmp_path: Path) -> None:
    """A refresh killed (kill -9) after it renamed the module but before its chain append
    leaves a map in force that no anchored receipt names; the next refresh's receipt then
    has an old hash that is not the previous anchored receipt's new hash. Map versions
    increase strictly in the chain; the killed run's version 2 (in force, unrecorded) is
    skipped, never given to another map."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    for n, floor in enumerate(("0.60.0", "0.61.0", "0.62.0")):
        (project / f"f{n}.json").write_text(json.dumps(feed_v1(floor)))

    def refresh(n: int) -> None:
        done = floorctl(
            "refresh", "--feed", f"f{n}.json", "--module", "m.py", "--write", "--anchor",
            "--receipt-out", f"r{n}.json", cwd=project, state=state,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    refresh(0)
    lock = hold_chain_write_lock(state)
    try:
        before = (project / "m.py").read_text()
        killed = start_refresh(
            project, state, "--feed", "f1.json", "--module", "m.py", "--write", "--anchor",
            "--receipt-out", "r1.json",
        )  # fmt: skip
        wait_until_changed(project / "m.py", before)
        time.sleep(0.2)  # it is now waiting on the chain's write lock
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    refresh(2)  # the lock was released by the kernel: this one runs

    chain = update_receipts(project, state)
    links = [(r["old_floor_map_hash"], r["new_floor_map_hash"]) for r in chain]
    for previous, current in itertools.pairwise(chain):
        assert current["old_floor_map_hash"] == previous["new_floor_map_hash"], (
            f"anchored receipts do not chain (a map was in force unanchored): {links}"
        )
    versions = [r["new_map_version"] for r in chain]
    assert versions == [1, 3], versions


# --- 4. publish: a failed write changes floor-map.json ---


def _fsize_limit(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_failed_publish_keeps_the_old_map_and_signature_pair(tmp_path: Path) -> None:
    """`publish` writes floor-map.json, then floor-map.json.dsse. When the second write fails
    (here the file size limit) the command exits 1 but floor-map.json was already replaced:
    the published pair no longer verifies (hosts fall back), although "a failed write
    leaves whatever was there"."""
    state = tmp_path / "state"
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    assert (
        floorctl(
            "refresh", "--feed", EXAMPLE_FEED, "--module", "m.py", "--write",
            cwd=tmp_path, state=state,
        ).returncode
        == 0
    )  # fmt: skip
    assert floorctl("keygen", "--out", tmp_path / "k", cwd=tmp_path, state=state).returncode == 0
    publish = ["publish", "--out", "out", "--module", "m.py", "--signing-key", "k/signing.key"]
    assert floorctl(*publish, cwd=tmp_path, state=state).returncode == 0
    map_file, sig_file = (
        tmp_path / "out" / "floor-map.json",
        tmp_path / "out" / "floor-map.json.dsse",
    )
    before = (map_file.read_bytes(), sig_file.read_bytes())
    # Between the two sizes: the map fits, its (larger) envelope does not.
    limit = (len(before[0]) + len(before[1])) // 2
    done = subprocess.run(
        [sys.executable, "-m", "floorctl", *publish, "--expires-in", "3"],
        cwd=tmp_path, env=isolated_env(state), capture_output=True, text=True,
        preexec_fn=_fsize_limit(limit), timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert (map_file.read_bytes(), sig_file.read_bytes()) == before, (
        "publish failed but replaced floor-map.json; its .dsse is the old one"
    )


# --- 5. tracebacks instead of one-line errors ---


def _huge_int_receipt(path: Path) -> Path:
    path.write_text(
        '{"receipt_id": "x", "receipt": {"kind": "adapter.canary_receipt", "n": '
        + "9" * 5000
        + "}}"
    )
    return path


def _deep_json(path: Path) -> Path:
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


@pytest.mark.parametrize("cli", ["floorctl", "floorguard"])
@pytest.mark.parametrize("shape", ["huge-int", "deep"])
def test_verify_receipt_odd_json_is_a_one_line_error(tmp_path: Path, cli: str, shape: str) -> None:
    """A receipt file with a 5000-digit integer, or nested 100,000 deep, crashes
    `verify receipt` with a ValueError / RecursionError traceback ("never a traceback")."""
    state = tmp_path / "state"
    maker = _huge_int_receipt if shape == "huge-int" else _deep_json
    receipt = maker(tmp_path / "r.json")
    run = floorctl if cli == "floorctl" else floorguard_cli
    done = run("verify", "receipt", receipt, "--content-only", cwd=tmp_path, state=state)
    assert done.returncode == 1
    no_traceback(done)


@pytest.mark.parametrize("cli", ["floorctl", "floorguard"])
def test_verify_chain_deeply_nested_line_is_an_integrity_error(tmp_path: Path, cli: str) -> None:
    """A slice line nested 100,000 deep escapes the slice verifier (it catches ValueError
    only) as a RecursionError traceback instead of `NOT PROVEN` / a one-line error."""
    state = tmp_path / "state"
    slice_file = _deep_json(tmp_path / "slice.jsonl")
    run = floorctl if cli == "floorctl" else floorguard_cli
    done = run("verify", "chain", slice_file, "--unauthenticated", cwd=tmp_path, state=state)
    assert "Traceback" not in done.stderr, done.stderr[-400:]
    assert done.returncode == 1
    assert "NOT PROVEN" in done.stdout


@pytest.mark.parametrize("cli", ["floorctl", "floorguard"])
def test_verify_receipt_deep_floor_map_is_a_one_line_error(tmp_path: Path, cli: str) -> None:
    """`--floor-map` given a deeply nested JSON file: RecursionError traceback."""
    state = tmp_path / "state"
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    assert (
        floorctl(
            "refresh", "--feed", EXAMPLE_FEED, "--module", "m.py", "--write",
            "--receipt-out", "r.json", cwd=tmp_path, state=state,
        ).returncode
        == 0
    )  # fmt: skip
    pub = state / "floorctl" / "dev-key" / "signing.pub"
    deep = _deep_json(tmp_path / "map.json")
    run = floorctl if cli == "floorctl" else floorguard_cli
    done = run(
        "verify", "receipt", "r.json", "--pubkey", pub, "--floor-map", deep,
        cwd=tmp_path, state=state,
    )  # fmt: skip
    assert done.returncode == 1
    no_traceback(done)


# --- 6. verify receipt --floor-map cannot check an archived map with an adapter "adapters" ---


@pytest.mark.parametrize("cli", ["floorctl", "floorguard"])
def test_archived_map_with_adapter_named_adapters_verifies(tmp_path: Path, cli: str) -> None:
    """`adapters` is a valid adapter name. refresh archives the map under its hash, but
    `verify receipt --floor-map maps/sha256-<hex>.json` mistakes the entry for a published
    map's `adapters` member and refuses the receipt's own map ("floor map entry
    'advisory_id' is malformed"), so the documented check fails for a genuine map."""
    state = tmp_path / "state"
    entry = {"min_safe_version": "1.0", "advisory_id": "BSA-0001", "note": "n"}
    feed = {"schema_version": 1, "adapters": {"adapters": entry, "aider": entry}}
    (tmp_path / "f.json").write_text(json.dumps(feed))
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    done = floorctl(
        "refresh", "--feed", "f.json", "--module", "m.py", "--write", "--receipt-out",
        "r.json", "--json", cwd=tmp_path, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    new_hash = json.loads(done.stdout)["new_floor_map_hash"]
    archived = tmp_path / "maps" / (new_hash.replace(":", "-") + ".json")
    assert archived.is_file()
    pub = state / "floorctl" / "dev-key" / "signing.pub"
    run = floorctl if cli == "floorctl" else floorguard_cli
    checked = run(
        "verify", "receipt", "r.json", "--pubkey", pub, "--floor-map", archived,
        cwd=tmp_path, state=state,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr


# --- 7. exit codes: the two CLIs disagree on a usage error ---


def test_floorguard_verify_chain_since_after_until_is_a_usage_error(tmp_path: Path) -> None:
    """`floorctl verify chain --since T2 --until T1` exits 2 (usage); `python -m floorguard
    verify chain` ("same options and output") exits 1, as if the check had failed."""
    state = tmp_path / "state"
    built = build(state / "floorguard", [(UPDATE, update_receipt(MAP_V1))])
    (tmp_path / "s.jsonl").write_text("".join(built.lines()))
    args = ("verify", "chain", "s.jsonl", "--since", at(5), "--until", at(1), "--unauthenticated")
    via_floorctl = floorctl(*args, cwd=tmp_path, state=state)
    via_floorguard = floorguard_cli(*args, cwd=tmp_path, state=state)
    assert via_floorctl.returncode == 2, via_floorctl.stderr
    assert via_floorguard.returncode == 2, via_floorguard.stderr


def _refreshed_with_leftovers(tmp_path: Path, copy: str, receipt_id: str | None) -> Path:
    """Refresh 0 committed; then the leftovers of an interrupted refresh are planted: an undo
    copy holding ``copy`` and a journal naming ``receipt_id`` (None: refresh 0's own id, as
    a run killed after its chain append, before cleaning up, leaves them)."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    for n, floor in enumerate(("0.60.0", "0.61.0")):
        (project / f"f{n}.json").write_text(json.dumps(feed_v1(floor)))
    done = floorctl(
        "refresh", "--feed", "f0.json", "--module", "m.py", "--write", "--anchor", "--json",
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    committed = json.loads(done.stdout)["receipt_id"]
    (project / ".m.py.refresh.undo").write_text(copy)
    journal = {"receipt_id": committed if receipt_id is None else receipt_id}
    (project / ".m.py.refresh.json").write_text(json.dumps(journal))
    return project


def test_a_refresh_killed_after_its_chain_append_is_finished_not_undone(tmp_path: Path) -> None:
    project = _refreshed_with_leftovers(tmp_path, EMPTY_MODULE, None)
    state = tmp_path / "s"
    done = floorctl(
        "refresh", "--feed", "f1.json", "--module", "m.py", "--write", "--anchor",
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "had committed" in done.stderr
    assert sorted(p.name for p in project.glob(".m.py.refresh.*")) == []
    chain = update_receipts(project, state)
    assert [r["new_map_version"] for r in chain] == [1, 2]
    assert chain[1]["old_floor_map_hash"] == chain[0]["new_floor_map_hash"]


def test_refuses_to_put_back_a_leftover_that_is_not_a_module(tmp_path: Path) -> None:
    project = _refreshed_with_leftovers(tmp_path, "not a module\n", "sha256:" + "0" * 64)
    assert "not a floor-map module" in _recovery_refused(project, tmp_path / "s")
    assert len(update_receipts(project, tmp_path / "s")) == 1


def _recovery_refused(project: Path, state: Path) -> str:
    """The one line of a refresh refused while recovering what a killed one left; the
    module is as it was."""
    before = (project / "m.py").read_bytes()
    done = floorctl(
        "refresh", "--feed", "f1.json", "--module", "m.py", "--write", "--anchor",
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert (project / "m.py").read_bytes() == before
    return line


@pytest.mark.parametrize(
    "undone",
    ["2", True, -1, 2.5, 2**53 - 1, 10**30],
    ids=["text", "bool", "negative", "float", "the largest map version", "beyond JSON's integers"],
)
def test_refuses_a_journal_whose_undone_map_version_is_not_a_version(
    tmp_path: Path, undone: object
) -> None:
    project = _refreshed_with_leftovers(tmp_path, EMPTY_MODULE, "sha256:" + "0" * 64)
    journal = {"receipt_id": None, "undone_map_version": undone}
    (project / ".m.py.refresh.json").write_text(json.dumps(journal))
    line = _recovery_refused(project, tmp_path / "s")
    assert "undone_map_version is not a map version" in line
