"""Every host is a witness of the shared chain it has seen.

A host remembers, in its FLOORGUARD_HOME, the largest tree (size and root) of each chain it
appended to or read, and before each append checks that the server's tree extends it:

- Restoring an older backup of the database (pg_dump, drop, pg_restore) is a rollback: the
  next append of a host that had seen the lost records is refused, naming a rollback, and
  so is its spawn; a host that never saw them is not refused (it witnessed nothing lost).
- Appending other records onto the restored backup until the tree is larger than what the
  host remembers is a fork: refused, naming a fork.
- A refusal is recorded on the host itself (the shared chain cannot be trusted with it).
- ``floorctl chain view --accept-current`` re-anchors a host on the server's tree, keeping
  the view it replaces in the same local record.
- Eight processes of one host appending at once leave the view at the final size, and an
  unreadable view file refuses appends (fail closed).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.chain_support import CANARY, receipt
from helpers.cli import isolated_env
from helpers.pg_chain import Chain, floorctl
from hosts import Host, floor

from floorguard._chain.chain import AuditChain
from floorguard._chain.chain_key import key_check, load_or_create_key
from floorguard._proofs import checkpoint
from floorguard.chainstore.postgres_init import init_schema
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet  # (a long PostgreSQL suite: run by .ci/run)


APPEND = textwrap.dedent(
    """
    import json, sys
    from floorguard._chain.chain import AuditChain
    from floorguard.errors import FloorguardError
    chain = AuditChain.from_env()
    out = []
    for n in range(int(sys.argv[1])):
        try:
            record = chain.append("adapter.canary_receipt", {"kind": "adapter.canary_receipt",
                                  "schema_version": 1, "ts": "2026-11-30T03:05:18Z",
                                  "n": n, "tag": sys.argv[2]})
            out.append({"seq": record.seq})
        except FloorguardError as exc:
            out.append({"refused": str(exc)})
    print(json.dumps(out))
    """
)


class FleetHost:
    """A host of the fleet: its own FLOORGUARD_HOME, the fleet's key and database."""

    def __init__(self, pg: Chain, root: Path, name: str) -> None:
        self.pg = pg
        self.home = root / name / "floorguard"
        self.env = pg.env(root / name)

    def append(self, count: int, tag: str = "x") -> list[dict[str, object]]:
        """``count`` appends in one new process; a dict per append (seq or refused)."""
        done = subprocess.run([sys.executable, "-c", APPEND, str(count), tag], env=self.env,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        result: list[dict[str, object]] = json.loads(done.stdout)
        return result

    def appended(self, count: int, tag: str = "x") -> list[int]:
        results = self.append(count, tag)
        assert all("seq" in r for r in results), results
        return [int(str(r["seq"])) for r in results]

    def floorctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return floorctl(*args, env=self.env)


def _dump(pg: Chain, path: Path) -> None:
    """pg_dump of the chain's database, as its owner (what a backup job does)."""
    subprocess.run([str(pg.server.bin_dir / "pg_dump"), "-Fc", "-f", str(path),
                    "-d", pg.owner_url], check=True, capture_output=True, timeout=120)  # fmt: skip


def _restore(pg: Chain, path: Path) -> None:
    """Drop the database, create it anew and pg_restore the dump into it, as its owner."""
    pg.server.psql(f"DROP DATABASE {pg.database} WITH (FORCE)")
    pg.server.psql(f"CREATE DATABASE {pg.database} OWNER {pg.owner}")
    restore = [str(pg.server.bin_dir / "pg_restore"), "--exit-on-error", "-d", pg.owner_url]
    subprocess.run([*restore, str(path)], check=True, capture_output=True, timeout=120)


def _head_seq(pg: Chain) -> int:
    return int(pg.sql("SELECT max(seq) FROM floorguard.records"))


def test_a_restored_older_backup_refuses_the_next_append_of_a_host_that_saw_the_lost_records(
    pg: Chain, tmp_path: Path
) -> None:
    a, b, c = (FleetHost(pg, tmp_path, name) for name in ("host-a", "host-b", "host-c"))
    a.appended(3)
    b.appended(3)
    c.appended(2)
    _dump(pg, tmp_path / "backup.dump")
    assert b.appended(4, "lost") == [8, 9, 10, 11]  # acknowledged, then lost
    _restore(pg, tmp_path / "backup.dump")
    assert _head_seq(pg) == 7

    refused = b.append(1)[0]
    assert "refused" in refused, "a host that saw 12 records appended to a chain of 8"
    message = str(refused["refused"])
    assert "rollback" in message
    assert "12" in message and "8" in message
    assert "floorctl chain view --accept-current" in message
    assert _head_seq(pg) == 7  # nothing was written

    # Host C saw only the first 8: it witnessed nothing that was lost.
    assert c.appended(1) == [8]

    # Its spawn is refused too, and the refusal is recorded on the host, not in the chain.
    host = Host(tmp_path / "host-b-spawn", {"aider": floor("0.60.0")})
    host.home = b.home
    spawned = host.preflight("aider", version="0.70.0", **b.env)
    assert spawned["raised"] == "SpawnRefused" and "rollback" in spawned["message"]
    refusals = _refusals(b)
    assert [r["event"] for r in refusals] == ["rollback", "rollback"]
    assert refusals[0]["remembered"]["size"] == 12 and refusals[0]["found"]["size"] == 8
    assert refusals[1]["found"]["size"] == 9
    assert refusals[1]["refused"]["event"] == "adapter.spawn_preflight_receipt"
    assert refusals[1]["refused"]["receipt"]["adapter"] == "aider"
    assert _head_seq(pg) == 8


def _refusals(host: FleetHost) -> list[dict[str, Any]]:
    path = host.home / "chain-refusals.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _view(host: FleetHost) -> dict[str, Any]:
    done = host.floorctl("chain", "view", "--json")
    assert done.returncode == 0, done.stderr
    chains: dict[str, Any] = json.loads(done.stdout)["chains"]
    return chains


def test_appending_other_records_onto_a_restored_backup_is_refused_as_a_fork(
    pg: Chain, tmp_path: Path
) -> None:
    a, b = FleetHost(pg, tmp_path, "host-a"), FleetHost(pg, tmp_path, "host-b")
    a.appended(5)
    _dump(pg, tmp_path / "backup.dump")
    b.appended(3, "seen by b")  # b now remembers 8 records
    _restore(pg, tmp_path / "backup.dump")
    assert a.appended(6, "rewritten") == list(range(5, 11))  # a saw only the first 5
    refused = b.append(1)[0]
    assert "refused" in refused
    message = str(refused["refused"])
    assert "fork" in message and "first 8 records" in message
    assert "floorctl chain view --accept-current" in message
    (entry,) = _refusals(b)
    assert entry["event"] == "fork" and entry["remembered"]["size"] == 8
    assert entry["found"]["size"] == 11 and entry["found"]["root"] != entry["remembered"]["root"]
    assert _head_seq(pg) == 10


def test_accept_current_re_anchors_the_host_and_records_the_view_it_replaced(
    pg: Chain, tmp_path: Path
) -> None:
    a, b = FleetHost(pg, tmp_path, "host-a"), FleetHost(pg, tmp_path, "host-b")
    a.appended(3)
    _dump(pg, tmp_path / "backup.dump")
    b.appended(2)
    before = _view(b)
    (chain_id,) = before
    assert before[chain_id]["size"] == 5
    _restore(pg, tmp_path / "backup.dump")
    assert "refused" in b.append(1)[0]

    done = b.floorctl("chain", "view", "--accept-current", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["accepted"]["size"] == 3 and result["replaced"]["size"] == 5
    assert _view(b)[chain_id]["size"] == 3
    assert b.appended(1) == [3]
    assert _view(b)[chain_id]["size"] == 4
    rollback, accepted = _refusals(b)
    assert rollback["event"] == "rollback"
    assert accepted["event"] == "accept-current"
    assert accepted["remembered"] == {k: before[chain_id][k] for k in ("size", "root", "seen")}
    assert accepted["found"] == {"size": 3, "root": result["accepted"]["root"]}


def test_eight_processes_of_one_host_appending_at_once_leave_the_view_at_the_final_size(
    pg: Chain, tmp_path: Path
) -> None:
    host = FleetHost(pg, tmp_path, "host")
    argv = [sys.executable, "-c", APPEND, "25"]
    procs = [
        subprocess.Popen([*argv, f"w{n}"], env=host.env, stdout=subprocess.PIPE, text=True)
        for n in range(8)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        assert all("seq" in r for r in json.loads(out)), out
    assert _head_seq(pg) == 199
    (seen,) = _view(host).values()
    assert seen["size"] == 200
    done = host.floorctl("chain", "checkpoint")
    assert done.returncode == 0, done.stderr
    assert seen["root"] == checkpoint.parse_body(done.stdout.split("\n\n")[0]).root.hex()
    assert not list(host.home.glob(".chain-view.*"))  # no temporary file left behind


@pytest.mark.parametrize("content", [b"", b"{", b'{"format": 1, "chains": {"x": 1}}', None])
def test_an_unreadable_or_malformed_view_refuses_appends(
    pg: Chain, tmp_path: Path, content: bytes | None
) -> None:
    host = FleetHost(pg, tmp_path, "host")
    host.appended(1)
    view_file = host.home / "chain-view"
    if content is None:
        view_file.unlink()
        view_file.mkdir()
    else:
        view_file.write_bytes(content)
    refused = host.append(1)[0]
    assert "refused" in refused
    assert str(view_file) in str(refused["refused"])
    assert _head_seq(pg) == 0
    # recorded on the host, the record that was not written with it
    entry = json.loads((host.home / "chain-refusals.jsonl").read_text().splitlines()[-1])
    assert entry["event"] == "unreadable-view", entry
    assert str(view_file) in entry["message"] and entry["refused"]["receipt_id"], entry


def test_a_restored_copy_of_a_local_sqlite_chain_is_refused_as_a_rollback(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    home = tmp_path / "floorguard"
    local = LocalHost(env)
    local.appended(3)
    shutil.copy(home / "chain.sqlite3", tmp_path / "backup.sqlite3")
    local.appended(4)
    shutil.copy(tmp_path / "backup.sqlite3", home / "chain.sqlite3")
    for companion in ("-wal", "-shm"):
        (home / f"chain.sqlite3{companion}").unlink(missing_ok=True)
    refused = local.append(1)[0]
    assert "rollback" in str(refused.get("refused")), refused
    assert json.loads((home / "chain-refusals.jsonl").read_text())["event"] == "rollback"


def test_two_chains_a_host_has_seen_swapped_between_their_places_are_refused_as_replaced(
    pg: Chain, tmp_path: Path
) -> None:
    """A host that appends to two chains (prod and staging) remembers each where it saw it:
    the operator swapping the two databases' names makes each URL reach the other chain,
    which the host knows, but not there. Each append is refused as a replaced chain, not
    written to the chain the other URL's auditors read."""
    other = f"{pg.database}_b"
    pg.server.psql(f"CREATE DATABASE {other} OWNER {pg.owner}")
    try:
        staging = dataclasses.replace(pg, database=other)
        key = load_or_create_key(pg.key_file)  # (one key for both: the key check passes)
        init_schema(staging.owner_url, timeout=60, grant_to=[pg.appender], key_check=key_check(key))
        prod_host, staging_host = (
            FleetHost(pg, tmp_path, "host"),
            FleetHost(staging, tmp_path, "host"),
        )
        prod_host.appended(3)
        staging_host.appended(2)
        pg.server.psql(f"ALTER DATABASE {pg.database} RENAME TO {pg.database}_swap")
        pg.server.psql(f"ALTER DATABASE {other} RENAME TO {pg.database}")
        pg.server.psql(f"ALTER DATABASE {pg.database}_swap RENAME TO {other}")
        for host, held in ((prod_host, 1), (staging_host, 2)):
            refused = host.append(1)[0]
            assert "replaced by another chain" in str(refused.get("refused")), refused
            assert _head_seq(host.pg) == held  # (the other chain, now at this host's URL)
        assert [r["event"] for r in _refusals(prod_host)] == ["replaced", "replaced"]
    finally:
        pg.server.psql(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")


def test_accepting_a_swapped_chain_keeps_the_other_chain_known_and_its_rollback_refused(
    pg: Chain, tmp_path: Path
) -> None:
    """Accepting, at prod's URL, the chain the swap put there does not forget the chain that
    was there: found at the other URL rolled back (an older backup restored), it is refused
    as a rollback, not adopted."""
    other = f"{pg.database}_b"
    pg.server.psql(f"CREATE DATABASE {other} OWNER {pg.owner}")
    try:
        staging = dataclasses.replace(pg, database=other)
        key = load_or_create_key(pg.key_file)
        init_schema(staging.owner_url, timeout=60, grant_to=[pg.appender], key_check=key_check(key))
        prod_host = FleetHost(pg, tmp_path, "host")
        staging_host = FleetHost(staging, tmp_path, "host")
        prod_host.appended(3)
        staging_host.appended(2)
        _dump(pg, tmp_path / "prod.dump")  # (prod's chain at 3 records)
        prod_host.appended(1)
        pg.server.psql(f"ALTER DATABASE {pg.database} RENAME TO {pg.database}_swap")
        pg.server.psql(f"ALTER DATABASE {other} RENAME TO {pg.database}")
        pg.server.psql(f"ALTER DATABASE {pg.database}_swap RENAME TO {other}")
        assert "replaced" in str(prod_host.append(1)[0].get("refused"))
        done = prod_host.floorctl("chain", "view", "--accept-current")
        assert done.returncode == 0, done.stderr
        _restore(staging, tmp_path / "prod.dump")  # prod's chain, now at staging's URL, rolled back
        refused = staging_host.append(1)[0]
        assert "rollback" in str(refused.get("refused")), refused
    finally:
        pg.server.psql(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")


def test_two_databases_whose_names_are_shown_masked_are_both_used_by_one_host(
    pg: Chain, tmp_path: Path
) -> None:
    """Names a message shows as ``***`` (a space in them) cannot be told apart by the
    place a host remembers: the second chain is not taken for the first one replaced."""
    names = [f"{pg.database} one", f"{pg.database} two"]
    key = load_or_create_key(pg.key_file)
    try:
        hosts = []
        for name in names:
            pg.server.psql(f'CREATE DATABASE "{name}" OWNER {pg.owner}')
            chain = dataclasses.replace(pg, database=name.replace(" ", "%20"))
            init_schema(
                chain.owner_url, timeout=60, grant_to=[pg.appender], key_check=key_check(key)
            )
            hosts.append(FleetHost(chain, tmp_path, "host"))
        assert hosts[0].appended(2) == [0, 1]
        assert hosts[1].appended(2) == [0, 1]
        assert hosts[0].appended(1) == [2]
    finally:
        for name in names:
            pg.server.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class LocalHost(FleetHost):
    """A host whose chain is the SQLite file in its FLOORGUARD_HOME."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.home = Path(env["FLOORGUARD_HOME"])


def test_a_host_that_signed_a_checkpoint_is_a_witness_of_it(pg: Chain, tmp_path: Path) -> None:
    a, auditor = FleetHost(pg, tmp_path, "host-a"), FleetHost(pg, tmp_path, "auditor")
    a.appended(3)
    _dump(pg, tmp_path / "backup.dump")
    a.appended(2)
    assert auditor.floorctl("chain", "checkpoint").returncode == 0
    (seen,) = _view(auditor).values()
    assert seen["size"] == 5
    _restore(pg, tmp_path / "backup.dump")
    again = auditor.floorctl("chain", "checkpoint")
    assert again.returncode == 1
    assert "refusing to sign a checkpoint" in again.stderr and "rollback" in again.stderr
    assert again.stdout == ""  # nothing signed
    assert [r["event"] for r in _refusals(auditor)] == ["rollback"]


def test_an_exports_checkpoint_of_a_prefix_is_refused_on_a_rolled_back_chain(
    tmp_path: Path,
) -> None:
    # A checkpoint of a prefix is judged by the whole chain it was read from: a host that
    # saw 7 records signs nothing of a chain restored to 3.
    env = isolated_env(tmp_path)
    home = tmp_path / "floorguard"
    local = LocalHost(env)
    local.appended(3)
    shutil.copy(home / "chain.sqlite3", tmp_path / "backup.sqlite3")
    local.appended(4)
    assert local.floorctl("chain", "checkpoint").returncode == 0
    shutil.copy(tmp_path / "backup.sqlite3", home / "chain.sqlite3")
    for companion in ("-wal", "-shm"):
        (home / f"chain.sqlite3{companion}").unlink(missing_ok=True)
    cp = tmp_path / "prefix.cp"
    done = local.floorctl("chain", "export", "--out", str(tmp_path / "slice.jsonl"),
                          "--checkpoint-out", str(cp))  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "refusing to sign a checkpoint" in done.stderr and "rollback" in done.stderr
    assert not cp.exists()


def _slots(view_file: Path) -> list[tuple[int, int]]:
    """(counter, offset of the body) of each slot of a view file, newest first."""
    data = view_file.read_bytes()
    half = len(data) // 2
    slots = []
    for start in (0, half):
        header = data[start : data.index(b"\n", start)].split()
        slots.append((int(header[1]), data.index(b"\n", start) + 1))
    return sorted(slots, reverse=True)


def test_a_view_write_torn_by_a_crash_leaves_the_view_before_it(pg: Chain, tmp_path: Path) -> None:
    host = FleetHost(pg, tmp_path, "host")
    host.appended(3)
    view_file = host.home / "chain-view"
    (_, newest), _ = _slots(view_file)
    with view_file.open("r+b") as torn:
        torn.seek(newest + 5)
        torn.write(b"#")
    (seen,) = _view(host).values()
    assert seen["size"] == 2  # the slot before: an older, still true tree
    assert host.appended(1) == [3]
    (seen,) = _view(host).values()
    assert seen["size"] == 4
    # Both slots damaged: nothing whole is left, and appends refuse.
    with view_file.open("r+b") as torn:
        for _, body in _slots(view_file):
            torn.seek(body + 5)
            torn.write(b"#")
    refused = host.append(1)[0]
    assert "no slot holds a whole view" in str(refused.get("refused")), refused
    assert _head_seq(pg) == 3


def test_a_local_chain_started_afresh_is_refused_until_the_host_accepts_it(
    tmp_path: Path,
) -> None:
    local = LocalHost(isolated_env(tmp_path))
    local.appended(2)
    for name in ("chain.sqlite3", "chain.sqlite3-wal", "chain.sqlite3-shm"):
        (local.home / name).unlink(missing_ok=True)
    refused = local.append(1)[0]
    assert "replaced by another chain" in str(refused.get("refused")), refused
    done = local.floorctl("chain", "view", "--accept-current")
    assert done.returncode == 0, done.stderr
    assert "(empty)" in done.stdout and "it remembered nothing" in done.stdout
    assert local.appended(1) == [0]
    replaced = _refusals(local)[-1]
    assert replaced["event"] == "accept-current" and len(replaced["replaced_chains"]) == 1


def test_a_process_holding_a_hosts_view_lock_stalls_that_host_only(
    pg: Chain, tmp_path: Path
) -> None:
    a, b = FleetHost(pg, tmp_path, "host-a"), FleetHost(pg, tmp_path, "host-b")
    a.appended(1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(a.home / "chain-view.lock"), "6"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    patient = {**a.env, "FLOORGUARD_CHAIN_TIMEOUT": "20"}  # waits for the view lock that long
    waiting = subprocess.Popen([sys.executable, "-c", APPEND, "1", "a"], env=patient,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    started = time.monotonic()
    assert b.appended(3) == [1, 2, 3]  # not waiting for host A's lock, nor for the chain's
    assert time.monotonic() - started < 5
    out, _ = waiting.communicate(timeout=60)
    assert json.loads(out) == [{"seq": 4}]  # host A went on once the lock was free
    holder.wait(timeout=60)


HOLD = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    """
)


def test_a_long_running_host_follows_a_view_file_moved_aside_and_re_anchored(
    tmp_path: Path,
) -> None:
    env = isolated_env(tmp_path)
    chain = AuditChain.from_env(env)
    chain.append(CANARY, receipt())
    view_file = Path(env["FLOORGUARD_HOME"]) / "chain-view"
    view_file.write_bytes(b"\0" * 16384)  # damaged in place: no whole slot
    with pytest.raises(ChainWriteError, match="no slot holds a whole view"):
        chain.append(CANARY, receipt())
    view_file.rename(view_file.with_name("chain-view.damaged"))
    done = LocalHost(env).floorctl("chain", "view", "--accept-current")
    assert done.returncode == 0, done.stderr
    assert chain.append(CANARY, receipt()).seq == 1  # the same process, the new file


def test_an_append_waits_for_its_hosts_view_lock_no_longer_than_the_chain_timeout(
    pg: Chain, tmp_path: Path
) -> None:
    host = FleetHost(pg, tmp_path, "host")
    host.appended(1)
    lock = host.home / "chain-view.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "30"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        host.env["FLOORGUARD_CHAIN_TIMEOUT"] = "1"
        started = time.monotonic()
        refused = host.append(1)[0]
        assert time.monotonic() - started < 10
        assert f"held {lock} for more than 1s" in str(refused.get("refused")), refused
    finally:
        holder.kill()
        holder.wait()


def test_accept_current_of_a_database_holding_no_chain_is_refused(
    pg: Chain, tmp_path: Path
) -> None:
    # A database named wrongly while recovering (here the server's own "postgres"): there is
    # nothing to adopt, and saying it was adopted would hide that the chain is elsewhere.
    host = FleetHost(pg, tmp_path, "host-a")
    host.appended(2)
    before = _view(host)
    other = pg.server.url(pg.appender, "postgres")
    done = host.floorctl("chain", "view", "--accept-current", "--url", other)
    assert done.returncode != 0, done.stdout
    assert "no floorguard chain" in done.stderr and "chain init" in done.stderr, done.stderr
    assert _view(host) == before
