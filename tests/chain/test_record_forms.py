"""The forms a stored record's fields must have, and its two texts: what a tree is built
from (its body's digest links the next record, its line is its leaf)."""

from __future__ import annotations

import pytest

from floorguard._chain.chain_record import _row_body, _row_body_and_line, _row_line, is_chain_id
from floorguard._chain.record_signature import is_hmac

HEX = "0123456789abcdef"


def _not_hex_of(n: int) -> dict[str, object]:
    """Texts that are not ``n`` lowercase hex digits, each by one thing."""
    good = (HEX * 8)[:n]
    half = n // 2
    return {
        "short": good[:-1], "long": good + "0", "uppercase": good.upper(),
        "g-inside": good[:half] + "g" + good[half + 1 :],
        "space-inside": good[:half] + " " + good[half + 1 :], "space-first": " " + good[1:],
        "newline-last": good[:-1] + "\n", "arabic-indic-zeros": "\u0660" * n,
        "fullwidth-zeros": "\uff10" * n, "bytes": good.encode(), "none": None, "int": 7,
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_not_hex_of(64)))
def test_an_hmac_or_chain_id_is_lowercase_hex_of_its_length_and_nothing_else(name: str) -> None:
    assert not is_hmac(_not_hex_of(64)[name])
    assert not is_chain_id(_not_hex_of(32)[name])


def test_lowercase_hex_of_the_length_is_an_hmac_or_a_chain_id() -> None:
    assert is_hmac(HEX * 4) and is_hmac("f" * 64)
    assert is_chain_id(HEX * 2) and not is_chain_id(HEX * 4) and not is_hmac(HEX * 2)


@pytest.mark.parametrize(
    "row",
    [
        (0, "2026-01-01T00:00:00.000000Z", "a" * 32, "adapter.canary_receipt", "sha256:" + "0" * 64,
         '{"kind":"adapter.canary_receipt"}', "sha256:" + "0" * 64, "f" * 64),
        (2**53, 'quote" back\\slash', "tab\there", "nul\x00ctl\x1f", "é ü ☃ 𝄞",
         '{"a":[1,2,{"b":null}]}', "\ud7ff\ue000", "ed25519:" + "1" * 16 + ":" + "2" * 128),
    ],
    ids=["plain", "every-escape"],
)  # fmt: skip
def test_a_records_body_and_line_written_together_are_the_ones_written_apart(
    row: tuple[int, str, str, str, str, str, str, str],
) -> None:
    assert _row_body_and_line(row) == (_row_body(row), _row_line(row))
