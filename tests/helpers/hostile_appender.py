"""A hostile appender's calls of the PostgreSQL chain's append functions, built by hand:
an honest host's record (the head, the stored right edge, the server's clock) with any
part of it turned into what an attacker sends, and the checks that the call was refused
(nothing stored) or stored (and the chain still verifies)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from floorguard._chain.chain import _row_body, _row_line, record_mac
from floorguard._crypto import merkle
from floorguard.chainstore.interface import Node, Row
from helpers.chain_support import receipt as honest_receipt
from helpers.pg_chain import NOW_TS, Chain, _count, _next, _verified, right_edge

CANARY = "adapter.canary_receipt"
AHEAD_RECEIPT = (
    '{"ahead":1,"kind":"adapter.canary_receipt","schema_version":1,'
    '"ts":"2026-12-03T00:00:00.000000Z"}'
)
RECORD_ARGS = "%s::bigint, %s, %s, %s, %s, %s, %s, %s"
NODE_ARGS = "%s::integer[], %s::bigint[], %s::bytea[]"
APPEND_RECORD = f"SELECT floorguard_api.append_record({RECORD_ARGS}, {NODE_ARGS})"
APPEND_NEXT = f"SELECT floorguard_api.append_next({RECORD_ARGS}, {NODE_ARGS}, {NODE_ARGS})"
ADD_TREE_NODES = f"SELECT floorguard_api.add_tree_nodes({NODE_ARGS})"


_NODE_SQL = "SELECT hash FROM floorguard_api.tree_nodes(ARRAY[%s], ARRAY[%s]::bigint[])"


def _key(pg: Chain) -> bytes:
    return bytes.fromhex(pg.key_file.read_text().strip())


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return '"\\\\x' + value.hex() + '"'
    if isinstance(value, list):
        return "{" + ",".join(_element(v) for v in value) + "}"
    return str(value)


def array(values: Sequence[Any], *, lower: int = 1) -> str:
    """An array literal (``lower``: its first subscript; nested lists: more dimensions)."""
    body = "{" + ",".join(_element(v) for v in values) + "}"
    if lower == 1 or not values:
        return body
    return f"[{lower}:{lower + len(values) - 1}]={body}"


def columns(nodes: Sequence[Node]) -> tuple[str, str, str]:
    return (
        array([n[0] for n in nodes]),
        array([n[1] for n in nodes]),
        array([n[2] for n in nodes]),
    )


def _with_receipt(key: bytes, record: Row, text: str, receipt_id: str | None = None) -> Row:
    """``record`` carrying receipt ``text`` (its digest as id unless given), MACed again."""
    digest = receipt_id or "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    changed = (*record[:4], digest, text, record[6], "")
    return (*changed[:7], record_mac(key, _row_body(changed).encode()))  # type: ignore[return-value]


def _nodes_for(conn: psycopg.Connection[Any], record: Row) -> list[Node]:
    """The tree nodes ``record`` adds, from its line and the stored siblings."""
    seq = record[0]
    nodes: list[Node] = [(0, seq, merkle.leaf_hash(_row_line(record).encode()))]
    at, level, current = seq, 0, nodes[0][2]
    while at & 1:
        got = conn.execute(_NODE_SQL, (level, at - 1)).fetchone()
        current = merkle.node_hash(bytes(got[0]) if got else bytes(32), current)
        level, at = level + 1, at >> 1
        nodes.append((level, at, current))
    return nodes


def _refused(pg: Chain, attempt: Callable[[psycopg.Connection[Any]], None]) -> None:
    """``attempt`` on an appender's connection raises, nothing is stored, the chain still
    verifies and an honest host appends after it."""
    before = _count(pg)
    with psycopg.connect(pg.url) as conn:
        with pytest.raises(psycopg.Error):
            attempt(conn)
        conn.rollback()
    assert _count(pg) == before
    pg.chain().append(CANARY, honest_receipt(after="refusal"))
    _verified(pg)


def _stored(pg: Chain, attempt: Callable[[psycopg.Connection[Any]], None]) -> None:
    """The positive control: ``attempt`` is an honest call, and is stored."""
    before = _count(pg)
    with psycopg.connect(pg.url) as conn:
        attempt(conn)
        conn.commit()
    assert _count(pg) == before + 1
    _verified(pg)


def _record_call(
    key: bytes,
    *,
    receipt: str | None = None,
    receipt_id: str | None = None,
    nodes: Callable[[list[Node]], tuple[str, str, str]] | None = None,
    setup: Sequence[str] = (),
    **fields: Any,
) -> Callable[[psycopg.Connection[Any]], None]:
    """An append_record call: the honest next record with ``fields`` replaced (MACed again),
    ``receipt`` as its receipt, and ``nodes`` turning the honest nodes into the arrays sent."""

    def call(conn: psycopg.Connection[Any]) -> None:
        for statement in setup:
            conn.execute(statement)
        record, honest = _next(conn, key, **fields)
        if receipt is not None or receipt_id is not None:
            text = receipt if receipt is not None else record[5]
            record = _with_receipt(key, record, text, receipt_id)
            honest = _nodes_for(conn, record)
        conn.execute(APPEND_RECORD, (*record, *(nodes or columns)(honest)))

    return call


# --- append_record: the record's fields -------------------------------------------------


def _shifted(conn: psycopg.Connection[Any], **delta: float) -> str:
    now = conn.execute(f"SELECT {NOW_TS}").fetchone()[0]  # type: ignore[index]
    at = datetime.strptime(now, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (at + timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


EdgeTrick = Callable[[list[Node], list[Node]], tuple[Any, Any, Any]]


def _ahead(
    key: bytes,
    edge: EdgeTrick,
    *,
    setup: Sequence[str] = (),
    ts_delta: float = 0.0,
    null_field: int | None = None,
    **fields: Any,
) -> Callable[[psycopg.Connection[Any]], None]:
    """An append_next call built as an honest host writes ahead (the head, the stored right
    edge, the server's clock), with ``edge`` turning the honest edge (and the record's
    nodes) into the arrays sent."""

    def call(conn: psycopg.Connection[Any]) -> None:
        for statement in setup:
            conn.execute(statement)
        head = conn.execute("SELECT * FROM floorguard_api.head()").fetchone()
        assert head is not None
        size = head[0] + 1
        row: dict[str, Any] = {
            "seq": size,
            "ts": _shifted(conn, seconds=ts_delta),
            "chain_id": head[2],
            "event": CANARY,
            "receipt_id": "",
            "receipt": AHEAD_RECEIPT,
            "prev": "sha256:" + hashlib.sha256(_row_body(tuple(head)).encode()).hexdigest(),
        }
        row["receipt_id"] = "sha256:" + hashlib.sha256(row["receipt"].encode()).hexdigest()
        row.update(fields)
        body: Row = (*row.values(), "")  # type: ignore[assignment]
        record: Row = (*body[:7], record_mac(key, _row_body(body).encode()))  # type: ignore[assignment]
        nodes = _nodes_for(conn, record)
        sent = list(record)
        if null_field is not None:
            sent[null_field] = None
        conn.execute(APPEND_NEXT, (*sent, *columns(nodes), *edge(right_edge(conn, size), nodes)))

    return call


def honest_edge(edge: list[Node], nodes: list[Node]) -> tuple[Any, Any, Any]:
    return columns(edge)
