"""The chain key's HMAC with its pads hashed once is HMAC-SHA256, for any key and message."""

from __future__ import annotations

import hmac

from hypothesis import given
from hypothesis import strategies as st

from floorguard._crypto.hmac_sha256 import HmacSha256


@given(key=st.binary(max_size=200), messages=st.lists(st.binary(max_size=300), max_size=4))
def test_it_is_what_hmac_digest_computes(key: bytes, messages: list[bytes]) -> None:
    """Keys shorter than a block, of a block, and longer (hashed first); one keyed object
    for several messages, each unaffected by the one before."""
    keyed = HmacSha256(key)
    for message in messages:
        assert keyed.hexdigest(message) == hmac.digest(key, message, "sha256").hex()


def test_the_rfc_4231_test_vectors() -> None:
    """RFC 4231 test cases 1, 2 and 6 (a key longer than the block)."""
    cases = [
        (b"\x0b" * 20, b"Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (b"Jefe", b"what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    ]  # fmt: skip
    for key, message, expected in cases:
        assert HmacSha256(key).hexdigest(message) == expected


def test_a_different_key_gives_a_different_mac() -> None:
    assert HmacSha256(b"k" * 32).hexdigest(b"m") != HmacSha256(b"K" * 32).hexdigest(b"m")
