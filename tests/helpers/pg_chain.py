"""The PostgreSQL chain's test kit: a database with an initialised chain (``Chain``, made by
conftest's ``pg`` fixture), the CLIs and appender processes run against it, an honest host's
next record built by hand, and a proxy that makes the server go silent mid-conversation."""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import select
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pgserver
import psycopg
import pytest

from floorguard._chain.chain import (
    GENESIS_PREV,
    AuditChain,
    _row_body,
    _row_line,
    canonical_json,
    record_mac,
)
from floorguard._crypto import merkle
from floorguard._proofs.slice_verify import verify_slice
from floorguard.chainstore.interface import Node, Row
from floorguard.chainstore.postgres import PostgresStore
from floorguard.errors import ChainWriteError
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.tree_support import assert_tree_matches_records

FLOORCTL = [sys.executable, "-m", "floorctl"]
CANARY = "adapter.canary_receipt"
# The server's clock as the chain stamps records, for rows a test writes by hand.
NOW_TS = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""


@dataclass(frozen=True)
class Chain:
    """One database with an initialised chain: its owner's and an appender's URLs."""

    server: pgserver.PgServer
    database: str
    owner: str
    appender: str
    key_file: Path

    @property
    def owner_url(self) -> str:
        return self.server.url(self.owner, self.database)

    @property
    def url(self) -> str:
        return self.server.url(self.appender, self.database)

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """A host's environment: its own FLOORGUARD_HOME, the fleet's key and database."""
        return isolated_env(home, FLOORGUARD_CHAIN_URL=self.url,
                            FLOORGUARD_CHAIN_KEY_FILE=str(self.key_file), **extra)  # fmt: skip

    def chain(self, **extra: str) -> AuditChain:
        return AuditChain.from_env(self.env(self.key_file.parent, **extra))

    def sql(self, statement: str, *, as_owner: bool = True, timeout: float = 60) -> str:
        role = self.owner if as_owner else self.appender
        return self.server.psql(statement, user=role, database=self.database, timeout=timeout)


_NODE_SQL = "SELECT hash FROM floorguard_api.tree_nodes(ARRAY[%s], ARRAY[%s]::bigint[])"


# PostgreSQL locks a statement's tables when it parses it and checks privileges only when
# it runs it: each of these, left open in a transaction by a role with no privilege on the
# table, holds a lock that every append's EXCLUSIVE lock on append_lock waits for.
PARSE_TIME_LOCKS = {
    "prepared-delete": "PREPARE p AS DELETE FROM floorguard.append_lock",
    "prepared-for-update": "PREPARE p AS SELECT * FROM floorguard.append_lock FOR UPDATE",
    "temp-view-for-update": (
        "CREATE TEMP VIEW v AS SELECT * FROM floorguard.append_lock FOR UPDATE"
    ),
    "temp-rule": (
        "CREATE TEMP TABLE tt (x int); "
        "CREATE RULE rr AS ON INSERT TO tt DO INSTEAD DELETE FROM floorguard.append_lock"
    ),
}


def floorctl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLOORCTL, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip


APPENDER = textwrap.dedent(
    """
    import os, sys, time
    from floorguard._base._time import now_ts
    from floorguard._chain.chain import AuditChain
    from floorguard.errors import ChainError

    worker, count, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    chain = AuditChain.shared()
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    sys.stdin.readline()  # start together
    n = 0
    while (count < 0 or n < count) and not os.path.exists(stop):
        started = time.monotonic()
        try:
            record = chain.append(
                "adapter.canary_receipt",
                {"kind": "adapter.canary_receipt", "schema_version": 1, "ts": now_ts(),
                 "worker": worker, "n": n},
            )
        except ChainError as exc:
            line = f"refused {time.monotonic() - started:.3f} {exc}"
            sys.stdout.write(" ".join(line.split()) + "\\n")
            sys.stdout.flush()
            time.sleep(0.05)
            continue
        # Acknowledged only once append has returned, i.e. once the record is committed.
        sys.stdout.write(f"ok {record.seq} {record.receipt_id}\\n")
        sys.stdout.flush()
        n += 1
    """
)


def _start(env: dict[str, str], workers: int, count: int, stop: Path, tag: str
           ) -> list[subprocess.Popen[str]]:  # fmt: skip
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, f"{tag}{w}", str(count), str(stop)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for w in range(workers)
    ]  # fmt: skip
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return procs


def _go(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def _export(pg: Chain) -> list[str]:
    done = floorctl("chain", "export", env=pg.env(pg.key_file.parent))
    assert done.returncode == 0, done.stderr
    # Lines end at "\n" only: a receipt may hold U+2028, which splitlines would split at.
    return [line + "\n" for line in done.stdout.split("\n")[:-1]]


def _verified(pg: Chain) -> int:
    """Export with floorctl, verify with the key and the stored tree; the record count."""
    lines = _export(pg)
    report = verify_slice(lines, key=bytes.fromhex(pg.key_file.read_text().strip()))
    assert report.intact, report.integrity_errors[:5]
    assert [json.loads(line)["seq"] for line in lines] == list(range(len(lines)))
    assert assert_tree_matches_records(pg.chain()) == len(lines)
    return len(lines)


def signed_checkpoint(pg: Chain, folder: Path) -> tuple[Path, Path]:
    """An auditor's key (``folder/keys``) and a checkpoint of the chain signed with it: the
    checkpoint's path and the signing key's."""
    env = pg.env(folder / "auditor")
    assert floorctl("keygen", "--out", str(folder / "keys"), env=env).returncode == 0
    checkpoint, key = folder / "head.cp", folder / "keys" / "signing.key"
    done = floorctl("chain", "checkpoint", "--signing-key", str(key), "--out", str(checkpoint),
                    env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return checkpoint, key


# --- an honest host's next record, built by hand -------------------------------------------

APPEND_RECORD_SQL = (
    "SELECT floorguard_api.append_record(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def right_edge(conn: psycopg.Connection[Any], size: int) -> list[Node]:
    """The stored right edge of the tree of ``size`` leaves as a host sends it to
    append_next: the last leaf, then the roots of the complete subtrees above level 0,
    levels rising."""
    edge: list[Node] = []
    for level in range(size.bit_length()):
        if level == 0 or size >> level & 1:
            index = size - 1 if level == 0 else (size >> level) - 1
            found = conn.execute(_NODE_SQL, (level, index)).fetchone()
            assert found is not None
            edge.append((level, index, bytes(found[0])))
    return edge


def _next(
    conn: psycopg.Connection[Any], key: bytes, *, ts: str | None = None, **fields: Any
) -> tuple[Row, list[Node]]:
    """Open an append on ``conn`` and build the next record as an honest host would (the
    fields given replace the honest values before the MAC and the tree nodes are made)."""
    got = conn.execute("SELECT * FROM floorguard_api.open_append(NULL)").fetchone()
    assert got is not None
    clock, seq, head_ts, chain_id, *_, stored = got
    if chain_id is None:
        meta = conn.execute("SELECT floorguard_api.read_meta('chain_id')")
        chain_id = meta.fetchone()[0]  # type: ignore[index]
    head = None if seq is None else tuple(got[1:9])
    receipt_json = canonical_json(receipt(n=secrets.randbelow(1000)))
    row: dict[str, Any] = {
        "seq": 0 if head is None else head[0] + 1,
        "ts": ts or max(clock, head_ts or clock),
        "chain_id": chain_id,
        "event": CANARY,
        "receipt_id": "sha256:" + hashlib.sha256(receipt_json.encode()).hexdigest(),
        "receipt": receipt_json,
        "prev": GENESIS_PREV
        if head is None
        else "sha256:" + hashlib.sha256(_row_body(head).encode()).hexdigest(),  # type: ignore[arg-type]
    }
    row.update({k: v for k, v in fields.items() if k != "mac"})
    record: Row = (*row.values(), "")  # type: ignore[assignment]
    record = (*record[:7], fields.get("mac", record_mac(key, _row_body(record).encode())))
    known = {
        (int(level), int(index)): bytes.fromhex(digest)
        for level, index, digest in (item.split(":") for item in (stored or "").split(",") if item)
    }
    nodes: list[Node] = [(0, record[0], merkle.leaf_hash(_row_line(record).encode()))]
    at, level, current = record[0], 0, nodes[0][2]
    while at > 0 and at & 1:  # (a negative seq shifts to -1 for ever: it has no parents)
        # (a seq given out of line has no stored siblings: any hash will do)
        current = merkle.node_hash(known.get((level, at - 1), bytes(32)), current)
        level, at = level + 1, at >> 1
        nodes.append((level, at, current))
    return record, nodes


def _call(conn: psycopg.Connection[Any], record: Row, nodes: list[Node]) -> None:
    columns = ([n[0] for n in nodes], [n[1] for n in nodes], [n[2] for n in nodes])
    conn.execute(APPEND_RECORD_SQL, (*record, *columns))


def _filled(pg: Chain, count: int) -> None:
    chain = pg.chain()
    for n in range(count):
        chain.append(CANARY, receipt(n=n))


# --- appends and checkpoints in a subprocess -----------------------------------------------

APPEND_SCRIPT = textwrap.dedent(
    """
    import sys
    from floorguard._base._time import now_ts
    from floorguard._chain.chain import AuditChain
    from floorguard.errors import FloorguardError
    event = "adapter.canary_receipt"
    try:
        record = AuditChain.from_env().append(
            event, {"kind": event, "schema_version": 1, "ts": now_ts()})
    except FloorguardError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        raise SystemExit(1)
    print(record.seq)
    """
)


def append(env: dict[str, str], *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", APPEND_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)  # fmt: skip


def verify(pg: Chain) -> subprocess.CompletedProcess[str]:
    return floorctl("chain", "checkpoint", env=pg.env(pg.key_file.parent))


# --- a server that stops answering -----------------------------------------------------------


class StallingProxy:
    """A loopback TCP port that forwards to the server's Unix socket, until the client sends
    ``trigger``: from then on the server's answers are swallowed (the proxy's kernel still
    acknowledges every byte, as a frozen server's or a half-dead middlebox's would)."""

    def __init__(self, socket_path: Path, trigger: bytes) -> None:
        self.socket_path = str(socket_path)
        self.trigger = trigger
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stalled = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.socket_path)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        stalled = False
        with client, upstream:
            while not self._stop.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 0.2)
                for source in ready:
                    data = source.recv(65536)
                    if not data and stalled:
                        self._stop.wait()  # a black hole never hangs up either
                    if not data:
                        return
                    if source is client:
                        stalled = stalled or self.trigger in data
                        upstream.sendall(data)
                    elif stalled:
                        self.stalled.set()  # swallowed: the client never hears back
                    else:
                        client.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.listener.close()


@contextlib.contextmanager
def stalling_proxy(socket_path: Path, trigger: bytes) -> Iterator[StallingProxy]:
    proxy = StallingProxy(socket_path, trigger)
    try:
        yield proxy
    finally:
        proxy.close()


# --- what several attack files share ------------------------------------------------------


def _appending(pg: Chain, stop: threading.Event, errors: list[str], done: list[int],
               tag: str) -> threading.Thread:  # fmt: skip
    def run() -> None:
        chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="5")
        n = 0
        try:
            while not stop.is_set():
                try:
                    chain.append(CANARY, receipt(n=n, blob=tag))
                    done.append(n)
                except ChainWriteError as exc:
                    errors.append(str(exc))
                n += 1
        finally:
            chain.close()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker


def _bounded(call: Any, seconds: float = 30) -> Any:
    """``call()`` on a thread: its result or exception, or a failure if it hangs."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"the append hung for {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _count(pg: Chain) -> int:
    return int(pg.sql("SELECT count(*) FROM floorguard.records"))


def _insert_trigger(
    pg: Chain, name: str, table: str, body: str, *, when: str = "BEFORE", deferred: bool = False
) -> None:
    """The owner adds a plpgsql trigger on INSERT into floorguard.TABLE running ``body``
    (deferred: a constraint trigger run at COMMIT)."""
    kind = "CONSTRAINT TRIGGER" if deferred else "TRIGGER"
    timing = " DEFERRABLE INITIALLY DEFERRED" if deferred else ""
    pg.sql(
        f"CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN {body} END$$;"
        f" CREATE {kind} {name} {when} INSERT ON floorguard.{table}{timing}"
        f" FOR EACH ROW EXECUTE FUNCTION public.{name}()"
    )


def _owner_trigger(pg: Chain, name: str, body: str, *, when: str = "AFTER INSERT",
                   constraint: bool = False) -> None:  # fmt: skip
    """A trigger on records owned by the chain's owner (as a DBA could add one)."""
    pg.sql(
        f"CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN {body} RETURN NEW; END $$;"
        f" GRANT EXECUTE ON FUNCTION public.{name}() TO PUBLIC;"
        + (
            f" CREATE CONSTRAINT TRIGGER {name} AFTER INSERT ON floorguard.records"
            f" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.{name}()"
            if constraint
            else f" CREATE TRIGGER {name} {when} ON floorguard.records"
            f" FOR EACH ROW EXECUTE FUNCTION public.{name}()"
        )
    )


def _refused(chain: AuditChain, **extra: object) -> ChainWriteError:
    with pytest.raises(ChainWriteError) as caught:
        chain.append(CANARY, receipt(**extra))
    message = str(caught.value)
    assert "\n" not in message and "cannot append to the audit chain" in message, message
    return caught.value


def _store(chain: AuditChain) -> PostgresStore:
    store = chain.store
    assert isinstance(store, PostgresStore)
    return store


def timed_append(pg: Chain, **extra: str) -> float:
    """Seconds one append of a fresh chain object of ``pg`` (with ``extra`` settings) took."""
    chain = pg.chain(**extra)
    started = time.monotonic()
    try:
        chain.append(CANARY, receipt())
    finally:
        chain.close()
    return time.monotonic() - started
