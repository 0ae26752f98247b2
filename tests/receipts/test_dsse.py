"""DSSE envelopes: the spec's PAE vector, signing, and every way a forgery must fail."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from floorguard._crypto import dsse
from floorguard.errors import VerificationError

TYPE = dsse.INTOTO_PAYLOAD_TYPE


def test_pae_matches_the_dsse_specification_vector() -> None:
    assert (
        dsse.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    assert dsse.pae("é", "ü".encode()) == "DSSEv1 2 é 2 ü".encode()


def test_signed_envelope_verifies_after_a_json_round_trip() -> None:
    key = Ed25519PrivateKey.generate()
    envelope = dsse.sign(TYPE, b'{"a":1}', key)
    parsed = dsse.parse_envelope(envelope.to_bytes())
    assert parsed == envelope
    assert dsse.verify(parsed, [key.public_key()], payload_type=TYPE) == {
        dsse.key_id(key.public_key())
    }


def test_refuses_signature_from_an_untrusted_key() -> None:
    envelope = dsse.sign(TYPE, b"{}", Ed25519PrivateKey.generate())
    with pytest.raises(VerificationError, match="no signature verifies"):
        dsse.verify(envelope, [Ed25519PrivateKey.generate().public_key()], payload_type=TYPE)


def test_refuses_a_changed_payload() -> None:
    key = Ed25519PrivateKey.generate()
    document = dsse.sign(TYPE, b'{"floor":"1.0"}', key).to_json()
    document["payload"] = base64.b64encode(b'{"floor":"0.1"}').decode()
    envelope = dsse.parse_envelope(json.dumps(document).encode())
    with pytest.raises(VerificationError):
        dsse.verify(envelope, [key.public_key()], payload_type=TYPE)


def test_refuses_a_changed_payload_type() -> None:
    key = Ed25519PrivateKey.generate()
    document = dsse.sign(TYPE, b"{}", key).to_json()
    document["payloadType"] = "application/json"
    envelope = dsse.parse_envelope(json.dumps(document).encode())
    with pytest.raises(VerificationError, match="payloadType"):
        dsse.verify(envelope, [key.public_key()], payload_type=TYPE)


def test_duplicate_signatures_from_one_key_do_not_pad_the_threshold() -> None:
    key = Ed25519PrivateKey.generate()
    single = dsse.sign(TYPE, b"{}", key)
    padded = dsse.Envelope(single.payload_type, single.payload, single.signatures * 3)
    with pytest.raises(VerificationError, match="only 1 of the required 2"):
        dsse.verify(padded, [key.public_key(), key.public_key()], payload_type=TYPE, threshold=2)


def test_two_distinct_keys_meet_a_threshold_of_two() -> None:
    first, second = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    a, b = dsse.sign(TYPE, b"{}", first), dsse.sign(TYPE, b"{}", second)
    both = dsse.Envelope(TYPE, b"{}", a.signatures + b.signatures)
    assert (
        len(
            dsse.verify(
                both, [first.public_key(), second.public_key()], payload_type=TYPE, threshold=2
            )
        )
        == 2
    )


def test_threshold_below_one_is_refused() -> None:
    key = Ed25519PrivateKey.generate()
    with pytest.raises(VerificationError, match="threshold"):
        dsse.verify(dsse.sign(TYPE, b"{}", key), [key.public_key()], payload_type=TYPE, threshold=0)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"payload":"e30=","payloadType":"t"}',
        b'{"payload":"e30=","payloadType":"t","signatures":[]}',
        b'{"payload":"%%%","payloadType":"t","signatures":[{"keyid":"","sig":"AA=="}]}',
        b'{"payload":"e30=","payloadType":"t","signatures":[{"keyid":"","sig":"AA=="}],"x":1}',
    ],
    ids=[
        "not-json",
        "not-object",
        "no-signatures",
        "empty-signatures",
        "bad-base64",
        "unknown-field",
    ],
)
def test_refuses_malformed_envelopes(raw: bytes) -> None:
    with pytest.raises(VerificationError):
        dsse.parse_envelope(raw)


def test_refuses_a_public_key_that_is_not_ed25519() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(VerificationError, match="not an Ed25519 public key"):
        dsse.load_public_key(pem, "ec.pub")


def test_refuses_text_that_is_not_a_pem_key() -> None:
    with pytest.raises(VerificationError, match="not a PEM public key"):
        dsse.load_public_key(b"hello", "junk.pub")


@pytest.mark.parametrize(
    ("around", "complaint"),
    [
        (lambda pem, other: pem + b"junk", "holds text after its key"),
        (lambda pem, other: pem + b"\x00", "holds text after its key"),
        (lambda pem, other: b"junk\n" + pem, "holds text before its key"),
        (lambda pem, other: other + pem, "holds more than one key"),
        (lambda pem, other: pem + other, "holds more than one key"),
        (lambda pem, other: pem + pem, "holds more than one key"),
    ],
    ids=["text-after", "a-nul-after", "text-before", "another-key-first", "another-key-after",
         "the-key-twice"],
)  # fmt: skip
def test_refuses_a_public_key_input_holding_more_than_one_key(
    around: Callable[[bytes, bytes], bytes], complaint: str
) -> None:
    pem, other = (_public_pem(Ed25519PrivateKey.generate()) for _ in range(2))
    with pytest.raises(VerificationError, match=f"^junk.pub: {complaint}"):
        dsse.load_public_key(around(pem, other), "junk.pub")


def test_a_public_key_in_white_space_is_read() -> None:
    private = Ed25519PrivateKey.generate()
    pem = _public_pem(private)
    key = dsse.load_public_key(b" \r\n\t" + pem.replace(b"\n", b"\r\n") + b"\n\n", "k.pub")
    assert dsse.key_id(key) == dsse.key_id(private.public_key())


def _public_pem(private: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
