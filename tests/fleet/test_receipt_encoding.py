"""A receipt's text reaches the PostgreSQL chain byte for byte: binary UTF-8 parameters, lone
surrogates and huge receipts, and sessions whose client encoding is not UTF-8."""

from __future__ import annotations

import contextlib
import json

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _export,
    _verified,
    verify,
)
from helpers.tree_support import assert_tree_matches_records

from floorguard._chain.chain import AuditChain
from floorguard.chainstore.postgres import PostgresStore
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet

# --- receipts whose text stresses the binary text parameters ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "caf\u00e9 \u20ac \u4e2d\u6587",  # 2- and 3-byte UTF-8
        "\U0001f600\U00010348",  # non-BMP: 4-byte UTF-8
        "nul \u0000 inside, \\u0000 escaped, and \\\\x00",  # JSON escapes NUL
        "quotes ' \" and a backslash \\ and E'\\x00'",
        "\ufeff\u200b\u2028\u2029",  # BOM, zero-width space, line/paragraph separators
    ],
)
def test_receipt_text_round_trips_byte_for_byte_through_binary_parameters(
    pg: Chain, text: str
) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(note=text, n=n))
    lines = "".join(_export(pg)).split("\n")[:-1]  # not splitlines: U+2028 is in a line
    assert [json.loads(line)["receipt"]["note"] for line in lines] == [text] * 3
    done = verify(pg)
    assert done.returncode == 0, done.stderr
    assert assert_tree_matches_records(pg.chain()) == 3
    chain.append(CANARY, receipt(note=text, n=3))  # the head with this text, read back


def test_a_lone_surrogate_in_a_receipt_is_a_chain_write_error_not_a_unicode_error(
    pg: Chain,
) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt())
    with pytest.raises(ChainWriteError):
        chain.append(CANARY, receipt(note="half \ud800 a pair"))
    chain.append(CANARY, receipt())
    assert _verified(pg) == 2


def test_a_receipt_of_a_million_four_byte_characters_is_stored_whole_or_refused(
    pg: Chain,
) -> None:
    """The size limit counts characters: 1 M non-BMP characters are 4 MB of UTF-8 in one
    binary parameter."""
    chain = pg.chain()
    chain.append(CANARY, receipt())
    base = len(json.dumps(receipt(note=""), separators=(",", ":")))
    note = "\U0001f600" * ((1 << 20) - base - 64)
    try:
        chain.append(CANARY, receipt(note=note))
        stored = 3
    except ChainWriteError:
        stored = 2
    chain.append(CANARY, receipt())
    assert _verified(pg) == stored


# --- a client encoding other than UTF-8 --------------------------------------------------------


def test_a_latin1_client_encoding_never_stores_a_record_other_than_the_one_maced(
    pg: Chain,
) -> None:
    """With client_encoding=LATIN1 (in the URL, or PGCLIENTENCODING, or ALTER DATABASE ... SET
    client_encoding), UTF-8 bytes sent as binary text parameters would be read as LATIN1:
    "café" stored as "cafÃ©" after the append was acknowledged, a record that no longer
    verifies, and the next append decoding LATIN1 bytes of the head as UTF-8. The record
    stored must be the one MACed."""
    chain = AuditChain.from_env(
        pg.env(pg.key_file.parent) | {"FLOORGUARD_CHAIN_URL": pg.url + "&client_encoding=LATIN1"}
    )
    chain.append(CANARY, receipt(note="caf\u00e9"))
    # Whatever the append did, what is stored must be what was MACed.
    assert [json.loads(line)["receipt"]["note"] for line in _export(pg)] == ["caf\u00e9"]
    with contextlib.suppress(ChainWriteError):
        chain.append(CANARY, receipt(note="caf\u00e9 again"))
    _verified(pg)


def test_a_latin1_database_default_client_encoding_keeps_the_chain_verifiable(
    pg: Chain,
) -> None:
    """As above, set by the database's owner (ALTER DATABASE ... SET client_encoding): no
    non-ASCII receipt is stored altered after being acknowledged."""
    pg.sql(f"ALTER DATABASE {pg.database} SET client_encoding = 'LATIN1'")
    chain = pg.chain()
    chain.append(CANARY, receipt(note="\u00fcber"))
    with PostgresStore(pg.url, timeout=5).read() as view:
        assert view is not None
        row = view.row(0)
    assert row is not None and json.loads(row[5])["note"] == "\u00fcber"


def test_a_latin1_host_appending_after_a_utf8_host_raises_only_chain_write_error(
    pg: Chain,
) -> None:
    """A UTF-8 host stores "é"; a host whose session is LATIN1 receives the head's receipt in
    LATIN1 (0xE9): whatever it makes of it, AuditChain.append raises a ChainWriteError, never
    a UnicodeDecodeError escaping after BEGIN and the lock."""
    pg.chain().append(CANARY, receipt(note="\u00e9"))
    latin1 = AuditChain.from_env(
        pg.env(pg.key_file.parent) | {"FLOORGUARD_CHAIN_URL": pg.url + "&client_encoding=LATIN1"}
    )
    with contextlib.suppress(ChainWriteError):
        latin1.append(CANARY, receipt(note="ascii"))
    pg.chain().append(CANARY, receipt(note="after"))
    _verified(pg)
