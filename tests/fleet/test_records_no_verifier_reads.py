"""The server stores only records every verifier reads: a receipt nesting deeper than a
record line may (199 levels, the receipt itself the first) is refused by both append
functions, as floorguard's own writer refuses it. Stored, it would be a record whose
writer's signature is valid but which no verifier, checkpoint or doctor reads past: one
host's switch to stop the others' audits."""

from __future__ import annotations

import hashlib

import psycopg
import pytest
from helpers.hostile_appender import _ahead, _key, _record_call, _refused, _stored, honest_edge
from helpers.pg_chain import Chain, _filled

pytestmark = pytest.mark.fleet

DEEPEST = 199  # _canonical.MAX_NESTING - 1: its record line then nests 200 deep


def _nested(depth: int) -> str:
    """A canonical canary receipt whose containers nest ``depth`` deep (itself the first)."""
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    return (
        '{"kind":"adapter.canary_receipt","schema_version":1,'
        f'"ts":"2026-12-03T00:00:00.000000Z","zz":{inner}}}'
    )


def test_append_record_stores_a_receipt_as_deep_as_a_verifier_reads(pg: Chain) -> None:
    _filled(pg, 1)
    _stored(pg, _record_call(_key(pg), receipt=_nested(DEEPEST)))


@pytest.mark.parametrize("depth", [DEEPEST + 1, 400])
def test_append_record_refuses_a_receipt_deeper_than_a_verifier_reads(
    pg: Chain, depth: int
) -> None:
    _filled(pg, 1)
    _refused(pg, _record_call(_key(pg), receipt=_nested(depth)))


def test_append_next_refuses_a_receipt_deeper_than_a_verifier_reads(pg: Chain) -> None:
    _filled(pg, 5)
    text = _nested(DEEPEST + 1)
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    _refused(pg, _ahead(_key(pg), honest_edge, receipt=text, receipt_id=digest))


# (With a NUL too: the nesting check reads the receipt as jsonb only past 200 brackets, and
# jsonb cannot read a \u0000 escape; it reads it as the canonical check does, the NUL
# standing in as U+FFFF, rather than refuse a receipt floorguard's own writer makes.)
@pytest.mark.parametrize("before", ["", "a\\u0000"], ids=["plain", "with-a-nul"])
def test_brackets_inside_strings_are_no_nesting(pg: Chain, before: str) -> None:
    _filled(pg, 1)
    text = (
        f'{{"kind":"adapter.canary_receipt","note":"{before}' + "[{" * 300 + '",'
        '"schema_version":1,"ts":"2026-12-03T00:00:00.000000Z"}'
    )
    _stored(pg, _record_call(_key(pg), receipt=text))


def test_a_receipt_holding_a_nul_nested_too_deep_is_refused_for_its_depth(pg: Chain) -> None:
    _filled(pg, 1)
    inner = "[" * DEEPEST + "]" * DEEPEST
    text = (
        '{"kind":"adapter.canary_receipt","note":"a\\u0000","schema_version":1,'
        f'"ts":"2026-12-03T00:00:00.000000Z","zz":{inner}}}'
    )
    with psycopg.connect(pg.url) as conn, pytest.raises(psycopg.Error, match="nests deeper"):
        _record_call(_key(pg), receipt=text)(conn)
