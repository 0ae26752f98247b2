"""The PostgreSQL chain stores a receipt only in the form every verifier re-derives.

A record's link (the next record's ``prev``) and its leaf are digests of the text stored;
a verifier re-derives that text from the parsed record in RFC 8785 form. A receipt that is
valid JSON in any other form (spaces, another key order, a repeated key, ``1.0``, ``1e2``,
an escape such as ``\\u0041``) would make the next honest record fail its check in every
verifier, and stop every checkpoint, so ``append_record`` refuses it:

- each way of writing an honest receipt otherwise is refused, and the chain goes on and
  verifies;
- what floorguard's own writer produces (floats, non-ASCII, keys beyond the BMP, nesting)
  is what the server rebuilds, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import Chain, _call, _filled, _next, _verified
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorguard._chain.chain import canonical_json
from floorguard._chain.chain_key import load_key
from floorguard.chainstore.postgres_schema import canonical_receipt_sql
from floorguard.errors import FloorguardError


@pytest.fixture
def appender(pg: Chain) -> Iterator[psycopg.Connection[Any]]:
    """A session of the appenders' role, as a host's floorguard opens it."""
    with psycopg.connect(pg.url) as conn:
        yield conn


HONEST = canonical_json(receipt(n=7))
assert HONEST.startswith('{"kind":')

# Each is valid JSON that reads as an honest receipt (or as one a host could write), in a
# form other than RFC 8785's.
OTHER_FORMS = {
    "a space after a colon": HONEST.replace('"kind":', '"kind": ', 1),
    "a newline at the end": HONEST + "\n",
    "keys out of order": '{"schema_version":1,' + HONEST[1:].replace(',"schema_version":1', ""),
    "a repeated key": HONEST[:-1] + ',"n":7}',
    "an integer written 7.0": HONEST.replace('"n":7', '"n":7.0'),
    "an integer written 7e0": HONEST.replace('"n":7', '"n":7e0'),
    "a negative zero": HONEST.replace('"n":7', '"n":-0'),
    "a float not in its shortest form": HONEST.replace('"n":7', '"n":0.50'),
    "a float in exponent form below 1e21": HONEST.replace('"n":7', '"n":1e20'),
    "an integer beyond 2^53": HONEST.replace('"n":7', '"n":9007199254740993'),
    "a float beyond 2^53 in digits": HONEST.replace('"n":7', '"n":100000000000000000000'),
    "an escaped letter": HONEST.replace('"kind"', '"\\u006bind"'),
    "an escaped slash": HONEST[:-1] + ',"z":"a\\/b"}',
    "a control character as \\u000a": HONEST[:-1] + ',"z":"a\\u000ab"}',
    "an upper-case hex escape": HONEST[:-1] + ',"z":"a\\u001Fb"}',
    "keys sorted by code point, not UTF-16": '{"\ufb01":2,"\U0001f600":1}',
    "a NUL and a space": HONEST[:-1] + ',"z":"a\\u0000b", "zz":1}',
    "a NUL and a repeated key": HONEST[:-1] + ',"z":"a\\u0000b","z":1}',
    "a NUL and 7.0": HONEST[:-1] + ',"z":["\\u0000",7.0]}',
    "a key holding a NUL, out of order": '{"a":2,"\\u0000":1}',
    "a double with 17 digits where 1 reads back": '{"a":4.9999999999999996e+22}',
    "another such, nested": '{"a":[-7.0000000000000004e+22]}',
}


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("case", list(OTHER_FORMS))
def test_a_receipt_in_another_form_is_refused_and_the_chain_goes_on(
    pg: Chain, appender: psycopg.Connection[Any], case: str
) -> None:
    text = OTHER_FORMS[case]
    json.loads(text)  # valid JSON, every one
    _filled(pg, 2)
    key = load_key(pg.key_file)
    record, nodes = _next(appender, key, receipt=text, receipt_id=_digest(text))
    with pytest.raises(psycopg.IntegrityError, match="in canonical form"):
        _call(appender, record, nodes)
    appender.rollback()
    _filled(pg, 1)
    assert _verified(pg) == 3


def test_the_honest_form_of_the_same_receipts_is_stored(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    key = load_key(pg.key_file)
    for text in (
        HONEST,
        '{"\U0001f600":1,"\ufb01":2}',
        '{"z":"a\\u001fb\\n"}',
        '{"z":["\\u0000",0.5,{"a":"\\\\u0000"}]}',
        '{"a":5e+22,"b":[-1e+23]}',
        '{"a":"\\\\u0000","b":"\uffff"}',
    ):
        record, nodes = _next(appender, key, receipt=text, receipt_id=_digest(text))
        _call(appender, record, nodes)
        appender.commit()
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "6"


# --- the server's form is the writer's ----------------------------------------------------------

_KEYS = st.text(max_size=6).filter(lambda key: "\x00" not in key)  # (refused: see docs)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


def _written(value: dict[str, Any]) -> str | None:
    """The receipt text floorguard's writer stores for ``value``, or None if it refuses or
    the server refuses it as documented (a NUL beside U+FFFF: see the test below)."""
    try:
        text = canonical_json(value)
    except FloorguardError:
        return None
    holds_nul = re.search(r"(?<!\\)(?:\\\\)*\\u0000", text) is not None
    return None if holds_nul and "\uffff" in text else text


@pytest.fixture
def owner(pg: Chain) -> Iterator[psycopg.Connection[Any]]:
    """One session of the chain's owner, for every example of a property (a connection
    each cost more than the example)."""
    with psycopg.connect(pg.owner_url, autocommit=True) as conn:
        yield conn


@pytest.mark.fleet  # (200 batches of 20 receipts)
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=5), min_size=20, max_size=20))
def test_the_server_rebuilds_every_receipt_the_writer_stores_byte_for_byte(
    owner: psycopg.Connection[Any], batch: list[dict[str, Any]]
) -> None:
    texts = [text for text in map(_written, batch) if text is not None]
    rows = owner.execute(
        f"SELECT t, {canonical_receipt_sql('t')} FROM unnest(%s::text[]) AS t",  # noqa: S608
        (texts,),
    ).fetchall()
    assert [rebuilt for _, rebuilt in rows] == texts


@pytest.mark.parametrize(
    "number",
    [0.1, 1e21, 1e-7, 1.5e-7, 1.2345678901234568e21, 5e-324, 1.7976931348623157e308,
     -2.5, 0.000001, 1e-6, 100.0, 2**-1074, math.pi, 5e22, 1e23, 1.4e23, 1.6e24, 0.1 + 0.2],
)  # fmt: skip
def test_a_float_is_written_as_ecmascript_writes_it(pg: Chain, number: float) -> None:
    text = canonical_json({"x": number})
    with psycopg.connect(pg.owner_url) as conn:
        row = conn.execute("SELECT floorguard.canonical_json(%s::jsonb, false)", (text,)).fetchone()
    assert row is not None and row[0] == text


def test_a_receipt_holding_both_a_nul_and_u_ffff_is_refused_as_documented(
    pg: Chain, appender: psycopg.Connection[Any]
) -> None:
    # jsonb cannot read \u0000: it stands in as U+FFFF while the server reads the text, so
    # a receipt that also holds U+FFFF itself has no form the server can rebuild.
    text = canonical_json({"a": "\x00", "b": "\uffff"})
    record, nodes = _next(appender, load_key(pg.key_file), receipt=text, receipt_id=_digest(text))
    with pytest.raises(psycopg.IntegrityError, match="in canonical form"):
        _call(appender, record, nodes)
