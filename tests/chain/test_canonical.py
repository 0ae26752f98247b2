"""Canonical JSON: the fast path is byte-for-byte RFC 8785, as the rfc8785 library writes it."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from floorguard._base._canonical import (
    canonical_bytes,
    compact_sorted_ascii_text,
    compact_sorted_text,
    content_address,
)
from floorguard.errors import CanonicalizationError

scalars = st.none() | st.booleans() | st.integers(min_value=-(2**60), max_value=2**60) | st.text()
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=30,
)


def library_or_error(value: object) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(value)
    except Exception:
        return CanonicalizationError


@settings(max_examples=500)
@given(json_values)
def test_fast_path_agrees_with_rfc8785_on_every_value(value: object) -> None:
    expected = library_or_error(value)
    if expected is CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            canonical_bytes(value)
    else:
        assert canonical_bytes(value) == expected


@settings(max_examples=300)
@given(json_values)
def test_the_encoders_built_once_write_what_json_dumps_writes(value: object) -> None:
    # (floorguard's own files, such as the host's view of the chain, are json.dumps'
    # ASCII form; the canonical fast path its form without ensure_ascii)
    compact = {"sort_keys": True, "separators": (",", ":")}
    assert compact_sorted_text(value) == json.dumps(value, **compact, ensure_ascii=False)
    assert compact_sorted_ascii_text(value) == json.dumps(value, **compact)


def test_keys_beyond_the_bmp_sort_by_utf16_code_units() -> None:
    # U+1F600 is a surrogate pair (0xD83D...) in UTF-16 and so sorts before U+FB01.
    value = {"\ufb01": 1, "\U0001f600": 2}
    assert canonical_bytes(value) == rfc8785.dumps(value)
    assert canonical_bytes(value).index("\U0001f600".encode()) < canonical_bytes(value).index(
        "\ufb01".encode()
    )


def test_control_characters_are_escaped_as_rfc8785_says() -> None:
    value = {"s": '\x00\x08\t\n\x0c\r\x1f"\\\u2028\x7f'}
    assert canonical_bytes(value) == rfc8785.dumps(value)


def test_finite_floats_are_left_to_the_library() -> None:
    assert canonical_bytes({"x": 1.5}) == rfc8785.dumps({"x": 1.5}) == b'{"x":1.5}'


@pytest.mark.parametrize("value", [float("nan"), 2**63, {1: "x"}, "\ud800"])
def test_values_json_cannot_carry_canonically_are_refused(value: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_bytes(value)


def test_content_address_is_sha256_of_canonical_bytes() -> None:
    value = {"b": [1, True, None], "a": "é"}
    expected = hashlib.sha256(b'{"a":"\xc3\xa9","b":[1,true,null]}').hexdigest()
    assert content_address(value) == "sha256:" + expected
    assert json.loads(canonical_bytes(value)) == value
