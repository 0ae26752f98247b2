"""The audit chain on a real PostgreSQL server, shared by many processes on many "hosts".

The server is the one .ci/run started (FLOORGUARD_TEST_PG_URL), else one this module starts
from the installed PostgreSQL (tests/pgserver.py). In CI these tests must run: without a
server the fixture fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pgserver
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import (
    CANARY,
    FLOORCTL,
    Chain,
    _export,
    _go,
    _start,
    _verified,
    floorctl,
)
from hosts import Host, floor

from floorguard._chain.chain import AuditChain
from floorguard._proofs.slice_verify import verify_slice
from floorguard.chainstore import store_from_env, timeout_from_env
from floorguard.chainstore.postgres import PostgresStore, redact
from floorguard.chainstore.postgres_schema import LOCK_STATEMENT
from floorguard.errors import ChainError, ChainWriteError, KeyFileError

FLOORGUARD = [sys.executable, "-m", "floorguard"]


# --- chain init and the roles ----------------------------------------------------------------


def test_chain_init_is_idempotent_and_the_appender_may_only_call_the_chains_functions(
    pg: Chain, tmp_path: Path
) -> None:
    env = isolated_env(tmp_path / "again", FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))
    key_before = pg.key_file.read_bytes()
    again = floorctl("chain", "init", "--url", pg.owner_url, "--grant", pg.appender, env=env)
    assert again.returncode == 0, again.stderr
    assert "already in place" in again.stdout
    assert pg.key_file.read_bytes() == key_before  # the fleet's key is never replaced
    assert pg.key_file.stat().st_mode & 0o777 == 0o600
    # Not even USAGE on the tables' schema: a role that can name a table can hold a lock
    # on it (PostgreSQL locks what a statement names before it checks a privilege).
    usage = pg.sql(
        f"SELECT has_schema_privilege('{pg.appender}', 'floorguard', 'USAGE'),"
        f" has_schema_privilege('{pg.appender}', 'floorguard', 'CREATE'),"
        f" has_schema_privilege('{pg.appender}', 'floorguard_api', 'USAGE'),"
        f" has_schema_privilege('{pg.appender}', 'floorguard_api', 'CREATE')"
    )
    assert usage == "f|f|t|f"
    query = (
        "SELECT string_agg(t || ':' || p || '=' || has_table_privilege("
        "'ROLE', 'floorguard.' || t, p)::text, ',' ORDER BY t, p) FROM"
        " unnest(ARRAY['records','tree','meta','append_lock']) t,"
        " unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE']) p"
    )
    rights = pg.sql(query.replace("ROLE", pg.appender))
    assert not [item for item in rights.split(",") if item.endswith("=true")]
    callable_ = pg.sql(
        "SELECT string_agg(n.nspname || '.' || p.proname, ',' ORDER BY n.nspname, p.proname)"  # noqa: S608
        " FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname LIKE 'floorguard%'"
        f" AND has_function_privilege('{pg.appender}', p.oid, 'EXECUTE')"
    )
    assert callable_.split(",") == [
        f"floorguard_api.{name}"
        for name in (
            "add_tree_nodes", "append_next", "append_record", "extent", "first_seq_of",
            "head", "nodes_ending", "open_append", "read_meta", "records", "stray_node",
            "tree_nodes",
        )
    ]  # fmt: skip


def test_chain_init_refuses_to_grant_to_a_role_that_does_not_exist(pg: Chain) -> None:
    env = isolated_env(pg.key_file.parent, FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))
    done = floorctl("chain", "init", "--url", pg.owner_url, "--grant", "nobody_here", env=env)
    assert done.returncode == 1
    assert "nobody_here" in done.stderr and "no such role" in done.stderr


def test_an_uninitialised_database_refuses_appends_and_names_chain_init(
    server: pgserver.PgServer, tmp_path: Path
) -> None:
    database = f"bare_{secrets.token_hex(4)}"
    server.psql(f"CREATE DATABASE {database}")
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=server.url("postgres", database))
    with pytest.raises(ChainWriteError, match="floorctl chain init"):
        AuditChain.from_env(env).append(CANARY, receipt())
    assert not AuditChain.from_env(env).exists()


def test_a_shared_chain_never_creates_its_key(pg: Chain, tmp_path: Path) -> None:
    chain = AuditChain(PostgresStore(pg.url, timeout=5), tmp_path / "no.key")
    with pytest.raises(KeyFileError, match="never creates its key"):
        chain.append(CANARY, receipt())
    assert not (tmp_path / "no.key").exists()
    assert pg.chain().head() is None


# --- least privilege and tampering ------------------------------------------------------------


def test_the_appender_cannot_update_delete_or_truncate_records(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    for statement in ("UPDATE floorguard.records SET receipt = '{}' WHERE seq = 2",
                      "DELETE FROM floorguard.records WHERE seq = 4",
                      "TRUNCATE floorguard.records", "DELETE FROM floorguard.tree",
                      "UPDATE floorguard.meta SET value = 'x'"):  # fmt: skip
        with pytest.raises(RuntimeError, match="permission denied"):
            pg.sql(statement, as_owner=False)
    assert _verified(pg) == 5


def test_the_trigger_refuses_changes_even_by_a_role_granted_update(pg: Chain) -> None:
    pg.chain().append(CANARY, receipt())
    pg.sql(
        f"GRANT USAGE ON SCHEMA floorguard TO {pg.appender};"
        f" GRANT SELECT, UPDATE, DELETE ON floorguard.records TO {pg.appender}"
    )
    with pytest.raises(RuntimeError, match="append-only"):
        pg.sql("UPDATE floorguard.records SET ts = ts", as_owner=False)
    with pytest.raises(RuntimeError, match="append-only"):
        pg.sql("DELETE FROM floorguard.records", as_owner=False)
    with pytest.raises(RuntimeError, match="append-only"):  # a superuser, not the owner
        pg.server.psql("UPDATE floorguard.records SET ts = ts", database=pg.database)
    assert _verified(pg) == 1


def test_a_record_edited_by_the_owner_is_caught_by_the_verifier(pg: Chain) -> None:
    chain = pg.chain()
    for n in range(4):
        chain.append(CANARY, receipt(n=n))
    pg.sql("UPDATE floorguard.records SET receipt = replace(receipt, '\"n\":1', '\"n\":7')"
           " WHERE seq = 1")  # fmt: skip
    report = verify_slice(_export(pg), key=bytes.fromhex(pg.key_file.read_text().strip()))
    assert not report.intact
    assert any(error.seq == 1 for error in report.integrity_errors)


# --- many hosts, many processes --------------------------------------------------------------


def _host_home(pg: Chain, tmp_path: Path, name: str) -> dict[str, str]:
    """A simulated host: its own FLOORGUARD_HOME with its own copy of the fleet's key."""
    home = tmp_path / name
    home.mkdir()
    key = home / "chain.key"
    shutil.copy(pg.key_file, key)
    key.chmod(0o600)
    env = pg.env(home)
    env["FLOORGUARD_CHAIN_KEY_FILE"] = str(key)
    return env


@pytest.mark.fleet  # (a long race: run by .ci/run)
def test_two_hosts_four_processes_each_make_one_linear_chain_of_1600(
    pg: Chain, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    procs = [
        *_start(_host_home(pg, tmp_path, "host-a"), 4, 200, stop, "a"),
        *_start(_host_home(pg, tmp_path, "host-b"), 4, 200, stop, "b"),
    ]
    _go(procs)
    acknowledged: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        acknowledged += out.splitlines()
    refused = [line for line in acknowledged if not line.startswith("ok ")]
    assert not refused, refused[:5]
    assert len(acknowledged) == 1600
    assert _verified(pg) == 1600
    lines = [json.loads(line) for line in _export(pg)]
    assert {f"ok {r['seq']} {r['receipt_id']}" for r in lines} == set(acknowledged)
    assert {r["receipt"]["worker"] for r in lines} == {f"{h}{w}" for h in "ab" for w in range(4)}
    assert len({r["chain_id"] for r in lines}) == 1


class _Acknowledgements:
    """An appender's stdout, read as it comes, so a test can wait for its acknowledgements
    (not for time: a loaded machine may take seconds to commit the first record)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._count = 0
        self._ended = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                with self._changed:
                    self.lines.append(line)
                    # The last line may be cut by a kill: only whole lines were acknowledged.
                    self._count += line.startswith("ok ") and line.endswith("\n")
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def wait_for(self, count: int, *, timeout: float) -> bool:
        """Until ``count`` appends are acknowledged (True), the output ends or ``timeout``."""
        with self._changed:
            self._changed.wait_for(lambda: self._count >= count or self._ended, timeout)
            return self._count >= count

    def acknowledged(self, *, timeout: float) -> list[str]:
        """Once the output has ended: the acknowledged lines."""
        self._reader.join(timeout)
        assert not self._reader.is_alive()
        return [line.rstrip("\n") for line in self.lines
                if line.startswith("ok ") and line.endswith("\n")]  # fmt: skip


@pytest.mark.fleet  # (a long race: run by .ci/run)
def test_kill_9_of_appenders_loses_no_acknowledged_record(pg: Chain, tmp_path: Path) -> None:
    rng = random.Random(1306)
    acknowledged: list[str] = []
    for round_ in range(3):
        procs = _start(pg.env(tmp_path), 4, -1, tmp_path / "never", f"r{round_}-")
        outputs = [_Acknowledgements(proc) for proc in procs]
        try:
            _go(procs)
            # Each is killed once it has acknowledged a few appends, a different number each,
            # so the kills land at different points of an append in flight.
            for i in rng.sample(range(len(procs)), len(procs)):
                wanted = 3 + rng.randrange(5)
                assert outputs[i].wait_for(wanted, timeout=120), (
                    f"appender {i} acknowledged fewer than {wanted}: {outputs[i].lines[-3:]}"
                )
                procs[i].send_signal(signal.SIGKILL)
        finally:
            for proc in procs:
                proc.kill()  # a no-op for those already killed
        for proc, output in zip(procs, outputs, strict=True):
            assert proc.wait(timeout=60) == -signal.SIGKILL
            whole = output.acknowledged(timeout=60)
            assert len(whole) >= 3
            acknowledged += whole
    stored = {f"ok {r['seq']} {r['receipt_id']}" for r in map(json.loads, _export(pg))}
    assert set(acknowledged) <= stored
    pg.chain().append(CANARY, receipt(after="kills"))
    assert _verified(pg) == len(stored) + 1


@pytest.mark.fleet  # (a long race: run by .ci/run)
def test_a_server_stopped_mid_run_refuses_appends_within_the_timeout_then_recovers(
    pg: Chain, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    procs = _start(pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="2"), 3, -1, stop, "w")
    # Read as it comes: a refusal a line, a long outage would fill a pipe and stop them.
    outputs: list[list[str]] = [[] for _ in procs]
    readers = [threading.Thread(target=lambda p=p, o=o: o.extend(p.stdout), daemon=True)
               for p, o in zip(procs, outputs, strict=True)]  # fmt: skip
    for reader in readers:
        reader.start()
    _go(procs)
    time.sleep(0.5)
    pg.server.stop_immediately()
    try:
        time.sleep(1.5)
    finally:
        pg.server.start()
    pg.server.wait_until_ready()
    time.sleep(1.0)  # the appenders go on
    stop.touch()
    for proc, reader in zip(procs, readers, strict=True):
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=60)
    outputs = [[line.rstrip("\n") for line in lines] for lines in outputs]
    refusals = [line for lines in outputs for line in lines if line.startswith("refused ")]
    assert refusals, "no append was attempted during the outage"
    for line in refusals:
        elapsed = float(line.split()[1])
        assert elapsed < 2 + 5, line  # the timeout, plus slack for a loaded machine
        assert redact(pg.url) in line and "password" not in line
    for lines in outputs:
        # Every appender appended again once the server was back.
        last_refusal = max(i for i, line in enumerate(lines) if line.startswith("refused "))
        assert any(line.startswith("ok ") for line in lines[last_refusal:]), lines[-3:]
    acknowledged = {line for lines in outputs for line in lines if line.startswith("ok ")}
    stored = {f"ok {r['seq']} {r['receipt_id']}" for r in map(json.loads, _export(pg))}
    assert acknowledged <= stored
    assert _verified(pg) == len(stored)


def test_an_append_waiting_on_a_held_lock_refuses_within_the_timeout(pg: Chain) -> None:
    import psycopg

    with psycopg.connect(pg.owner_url) as holder:
        holder.execute(LOCK_STATEMENT)  # the owner's lock, as `chain init` holds it
        chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="1")
        with pytest.raises(ChainWriteError, match=r"the chain.s lock was not free within 0.9s"):
            chain.append(CANARY, receipt())
        holder.rollback()
    chain.append(CANARY, receipt())  # the same object goes on once the lock is free
    assert _verified(pg) == 1


# --- the spawn path -------------------------------------------------------------------------


def test_a_spawn_is_recorded_in_the_shared_chain(pg: Chain, tmp_path: Path) -> None:
    host = Host(tmp_path / "h", {"aider": floor("0.60.0")})
    extra = {"FLOORGUARD_CHAIN_URL": pg.url, "FLOORGUARD_CHAIN_KEY_FILE": str(pg.key_file)}
    result = host.preflight("aider", version="0.70.0", **extra)
    assert result["verdict"] == "permit", result
    lines = [json.loads(line) for line in _export(pg)]
    assert [r["receipt_id"] for r in lines] == [result["receipt_id"]]
    assert not (host.home / "chain.sqlite3").exists()


@pytest.mark.parametrize(
    "where",
    ["unreachable", "unknown role", "wrong password"],
)
def test_a_spawn_is_refused_when_the_database_cannot_record_it(
    pg: Chain, tmp_path: Path, where: str
) -> None:
    if where == "unreachable":
        url = f"postgresql:///{pg.database}?host={tmp_path}/nowhere&user={pg.appender}"
    elif where == "unknown role":
        url = pg.server.url("no_such_role", pg.database)
    else:
        pg.server.psql(f"ALTER ROLE {pg.appender} PASSWORD 'right'")
        url = (f"postgresql://{pg.appender}:wrong@localhost:1/{pg.database}"
               f"?host={pg.server.socket_dir}&sslmode=disable")  # fmt: skip
    host = Host(tmp_path / "h", {"aider": floor("0.60.0")})
    started = time.monotonic()
    result = host.preflight("aider", version="0.70.0", FLOORGUARD_CHAIN_URL=url,
                            FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                            FLOORGUARD_CHAIN_TIMEOUT="2")  # fmt: skip
    assert time.monotonic() - started < 60
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] is None  # nothing could be recorded, so nothing is decided
    assert "could not be recorded in the audit chain" in result["message"]
    assert "wrong" not in result["message"]  # the password is never echoed
    assert pg.chain().head() is None


# --- one verifier for both stores -------------------------------------------------------------


def test_exports_from_postgres_and_sqlite_of_the_same_decisions_verify_alike(
    pg: Chain, tmp_path: Path
) -> None:
    key = pg.key_file
    stores = {
        "postgres": store_from_env(pg.env(tmp_path)),
        "sqlite": store_from_env(isolated_env(tmp_path / "local")),
    }
    exports: dict[str, Path] = {}
    # PostgreSQL stamps with its server's clock; SQLite is given the same stamps.
    stamps: list[str] = []
    for name, store in stores.items():
        chain = AuditChain(store, key, clock=iter(stamps).__next__ if stamps else None)
        for n in range(7):
            chain.append(CANARY, {**receipt(n=n), "ts": "2026-01-01T00:00:00Z"})
        exports[name] = tmp_path / f"{name}.jsonl"
        exports[name].write_text("".join(line + "\n" for line in chain.export_lines()))
        stamps = stamps or [json.loads(line)["ts"] for line in chain.export_lines()]
    bodies = {
        name: [
            {k: v for k, v in json.loads(line).items() if k not in ("chain_id", "prev", "mac")}
            for line in path.read_text().splitlines()
        ]
        for name, path in exports.items()
    }
    assert bodies["postgres"] == bodies["sqlite"]
    for path in exports.values():
        for verifier in (FLOORCTL, FLOORGUARD):
            done = subprocess.run(
                [*verifier, "verify", "chain", str(path), "--key-file", str(key), "--json"],
                capture_output=True, text=True, env=isolated_env(tmp_path / "v"), timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr


def test_checkpoint_prove_and_verify_inclusion_work_on_the_shared_chain(
    pg: Chain, tmp_path: Path
) -> None:
    chain = pg.chain()
    for n in range(6):
        chain.append(CANARY, receipt(n=n))
    env = pg.env(tmp_path / "auditor")
    assert floorctl("keygen", "--out", str(tmp_path / "keys"), env=env).returncode == 0
    sign = ("--signing-key", str(tmp_path / "keys" / "signing.key"))
    cp = tmp_path / "head.cp"
    done = floorctl("chain", "checkpoint", *sign, "--out", str(cp), env=env)
    assert done.returncode == 0, done.stderr
    proof = tmp_path / "p.json"
    done = floorctl("chain", "prove", "--seq", "3", "--checkpoint", str(cp), "--out", str(proof),
                    env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = floorctl("verify", "inclusion", str(proof), "--checkpoint", str(cp), "--pubkey",
                    str(tmp_path / "keys" / "signing.pub"), env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_psycopg_is_imported_only_when_a_chain_url_is_set(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from floorguard._chain.chain import AuditChain\n"
        "chain = AuditChain.from_env()\n"
        "chain.append('adapter.canary_receipt', {'kind': 'adapter.canary_receipt',"
        " 'schema_version': 1, 'ts': '2026-01-01T00:00:00Z'})\n"
        "print(type(chain.store).__name__, 'psycopg' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=isolated_env(tmp_path),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SqliteStore", "False"]


@pytest.mark.parametrize(
    "value",
    # (what Python's float() also reads: digits grouped, digits of other scripts, exponents)
    ["0", "-1", "soon", "nan", "inf", "", "3_0", "\uff11", "\u0661", "1e1", "+5", " 5"],
)
def test_an_unusable_timeout_is_refused_by_name(tmp_path: Path, value: str) -> None:
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL="postgresql:///x",
                       FLOORGUARD_CHAIN_TIMEOUT=value)  # fmt: skip
    with pytest.raises(ChainError, match="FLOORGUARD_CHAIN_TIMEOUT"):
        store_from_env(env)


@pytest.mark.parametrize(("value", "seconds"), [("5", 5.0), ("0.5", 0.5), ("3600", 3600.0)])
def test_a_timeout_in_plain_decimal_seconds_is_read(value: str, seconds: float) -> None:
    assert timeout_from_env({"FLOORGUARD_CHAIN_TIMEOUT": value}) == seconds
    assert timeout_from_env({}) == 5.0


@pytest.mark.parametrize("url", ["", " ", "\t\n"])
def test_an_empty_chain_url_is_refused_not_read_as_the_local_chain(
    tmp_path: Path, url: str
) -> None:
    """A fleet host whose template left the URL empty would record its decisions where no
    one of the fleet looks (blanks alone: wherever libpq's defaults point)."""
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=url)
    with pytest.raises(ChainError, match="FLOORGUARD_CHAIN_URL is set but empty"):
        store_from_env(env)
    assert not list(tmp_path.rglob("chain.sqlite3"))


def test_a_forked_child_appends_on_its_own_connection_and_leaves_the_parents_alone(
    pg: Chain,
) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(who="parent"))
    store = chain.store
    assert isinstance(store, PostgresStore) and store._conn is not None
    session = store._conn.info.backend_pid
    pid = os.fork()
    if pid == 0:  # the child: its inherited connection is the parent's socket
        code = 1
        try:
            chain.append(CANARY, receipt(who="child"))
            chain.close()  # closing the inherited connection must not end the parent's
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    chain.append(CANARY, receipt(who="parent again"))
    assert store._conn is not None and store._conn.info.backend_pid == session  # kept
    assert [r["receipt"]["who"] for r in map(json.loads, _export(pg))] == [
        "parent", "child", "parent again"
    ]  # fmt: skip
    assert _verified(pg) == 3
