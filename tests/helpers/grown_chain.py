"""Large chains for the benchmarks, written straight into the store: well-formed records
(canary receipts, real HMACs under the chain's key, real links) and the tree nodes an append
would have written, in one transaction, so that a million records take a minute, not the
hours a million durable appends take. Everything a verifier checks holds of them."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from floorguard._chain.chain import AuditChain, _row_body, line_text, record_mac
from floorguard._chain.chain_record import body_text, record_digest
from floorguard._crypto import merkle
from floorguard.chainstore.interface import Node, Row

CANARY = "adapter.canary_receipt"
BATCH = 20_000


def _records(
    head: Row, count: int, key: bytes, subtree: Callable[[int, int], bytes]
) -> Iterator[tuple[list[Row], list[Node]]]:
    """Batches of the ``count`` records after ``head``, and the tree nodes they complete."""
    seq, ts, chain_id = head[0] + 1, head[1], head[2]
    edge = merkle.CompactRange.of(seq, subtree)
    prev = record_digest(_row_body(head).encode())
    rows: list[Row] = []
    nodes: list[Node] = []
    for n in range(seq, seq + count):
        receipt = f'{{"adapter":"aider","kind":"{CANARY}","n":{n},"schema_version":1,"ts":"{ts}"}}'
        receipt_id = "sha256:" + hashlib.sha256(receipt.encode()).hexdigest()
        fields: dict[str, Any] = {
            "seq": n, "ts": ts, "chain_id": chain_id, "event": CANARY,
            "receipt_id": receipt_id, "receipt_json": receipt, "prev": prev,
        }  # fmt: skip
        body = body_text(**fields).encode()
        mac = record_mac(key, body)
        rows.append((n, ts, chain_id, CANARY, receipt_id, receipt, prev, mac))
        nodes.extend(edge.append(merkle.leaf_hash(line_text(**fields, mac=mac).encode())))
        prev = record_digest(body)
        if len(rows) >= BATCH:
            yield rows, nodes
            rows, nodes = [], []
    if rows:
        yield rows, nodes


def grow_sqlite(chain: AuditChain, count: int) -> None:
    """Append ``count`` records to the SQLite chain (it must hold one already)."""
    key = bytes.fromhex(chain.key_file.read_text().strip())
    chain.close()
    conn = sqlite3.connect(chain.db_path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        head = conn.execute("SELECT * FROM records ORDER BY seq DESC LIMIT 1").fetchone()

        def stored(level: int, index: int) -> bytes:
            row = conn.execute(
                "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)
            ).fetchone()
            return bytes(row[0])

        for rows, nodes in _records(head, count, key, stored):
            conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            conn.executemany("INSERT INTO tree VALUES (?, ?, ?)", nodes)
        conn.execute("COMMIT")
    finally:
        conn.close()


def grow_postgres(owner_url: str, key: bytes, count: int) -> None:
    """Append ``count`` records to the PostgreSQL chain at ``owner_url``, as its owner with
    the tables' triggers off while the rows are copied in (they hold the same rules an
    append would check; the benchmark's chain is the owner's to fill)."""
    import psycopg

    with psycopg.connect(owner_url) as conn:
        conn.execute("ALTER TABLE floorguard.records DISABLE TRIGGER USER")
        conn.execute("ALTER TABLE floorguard.tree DISABLE TRIGGER USER")
        head = conn.execute(
            "SELECT seq, ts, chain_id, event, receipt_id, receipt, prev, mac"
            " FROM floorguard.records ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        assert head is not None

        def stored(level: int, index: int) -> bytes:
            row = conn.execute(
                "SELECT hash FROM floorguard.tree WHERE level = %s AND idx = %s", (level, index)
            ).fetchone()
            assert row is not None
            return bytes(row[0])

        with conn.cursor() as cursor:
            for rows, nodes in _records(tuple(head), count, key, stored):  # type: ignore[arg-type]
                with cursor.copy("COPY floorguard.records FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                with cursor.copy("COPY floorguard.tree (level, idx, hash) FROM STDIN") as copy:
                    for node in nodes:
                        copy.write_row(node)
        conn.execute("ALTER TABLE floorguard.records ENABLE TRIGGER USER")
        conn.execute("ALTER TABLE floorguard.tree ENABLE TRIGGER USER")
