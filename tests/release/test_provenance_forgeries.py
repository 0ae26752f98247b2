"""`verify provenance` accepts only the statement floorctl writes: a statement the release key
signed but of another shape (two subjects, sha512 only, a builder object, trailing data) is
refused naming what is wrong."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.release import (
    Built,
    Project,
    build_shipped,
    only,
    payload,
)

from floorguard._base._canonical import canonical_bytes
from floorguard._crypto import dsse

pytestmark = pytest.mark.attack


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_shipped(tmp_path_factory.mktemp("build"))


def _key(project: Project) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(project.key.read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    return key


def _append(raw: bytes, member: bytes) -> bytes:
    return raw[:-1] + b"," + member + b"}"


def _two_subjects(statement: dict[str, Any]) -> bytes:
    statement["subject"].append({"name": "other.whl", "digest": {"sha256": "0" * 64}})
    return canonical_bytes(statement)


def _sha512_only(statement: dict[str, Any]) -> bytes:
    statement["subject"][0]["digest"] = {"sha512": "ab" * 64}
    return canonical_bytes(statement)


def _builder_object(statement: dict[str, Any]) -> bytes:
    statement["predicate"]["runDetails"]["builder"]["id"] = {"id": "urn:x"}
    return canonical_bytes(statement)


FORGERIES: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "two-subjects": _two_subjects,
    "sha512-only": _sha512_only,
    "duplicate-key": lambda s: _append(canonical_bytes(s), b'"_type":"x"'),
    "not-canonical": lambda s: json.dumps(s, indent=1).encode(),
    "nan": lambda s: _append(canonical_bytes(s), b'"zz":NaN'),
    "huge-integer": lambda s: _append(canonical_bytes(s), b'"zz":' + b"9" * 30),
    "builder-id-object": _builder_object,
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_statement_the_key_signed_but_floorctl_never_writes_is_refused_naming_it(
    built: Built, tmp_path: Path, forgery: str
) -> None:
    wheel = only(built.dist, "*.whl")
    statement = payload(Path(f"{wheel}.provenance.dsse"))
    raw = FORGERIES[forgery](copy.deepcopy(statement))
    envelope = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, raw, _key(built.project))
    forged = tmp_path / "forged.dsse"
    forged.write_bytes(envelope.to_bytes())
    done = built.project.floorctl(
        "verify", "provenance", wheel, "--provenance", forged, "--pubkey", built.project.pub
    )
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"floorctl: error: {forged}: "), done.stderr
    assert len(done.stderr.splitlines()) == 1
