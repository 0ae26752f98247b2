"""A receipt has one shape, and every verifier checks it the same way: ``verify chain`` (with
a key or without), ``verify receipt --content-only`` and signed ``verify receipt``, in both
CLIs. A field the format gives as an integer is a JSON integer (``1.0`` hashes like ``1`` in
RFC 8785, so neither the content address nor the record's MAC can tell them apart), a flag is
a JSON boolean, and each refusal names the file, the line and the field's JSON path."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.cli import floorctl, isolated_env

from floorguard._base._canonical import canonical_bytes, content_address
from floorguard._chain.chain import body_text
from floorguard._chain.receipts import update_statement
from floorguard._crypto import dsse

TOOLS = ("floorguard", "floorctl")
FEED = {
    "schema_version": 2,
    "feed_id": "example",
    "version": 3,
    "published": "2026-01-01T00:00:00Z",
    "expires": "2099-01-01T00:00:00Z",
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose chain holds an anchored floor update (seq 0), a canary run (seq 1) and
    the doctor's posture (seq 2): slice.jsonl is its export, receipt.json the signed update
    receipt."""
    root = tmp_path_factory.mktemp("shapes")
    project = root / "p"
    project.mkdir()
    (project / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (project / "feed.json").write_text(json.dumps(FEED))
    steps = [
        ("keygen", "--out", "keys"),
        ("refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
         "--receipt-out", "receipt.json", "--signing-key", "keys/signing.key", "--anchor"),
        ("canary", "record", "--adapter", "aider", "--version", "0.70.0", "--result", "pass"),
    ]  # fmt: skip
    for step in steps:
        done = floorctl(*step, cwd=project, state=root)
        assert done.returncode == 0, done.stderr
    doctor = subprocess.run(
        [sys.executable, "-m", "floorguard", "doctor"], capture_output=True, text=True,
        cwd=project, env=isolated_env(root, PATH=str(project)), timeout=120, check=False,
    )  # fmt: skip
    assert "Traceback" not in doctor.stderr, doctor.stderr
    export = floorctl("chain", "export", cwd=project, state=root)
    assert export.returncode == 0, export.stderr
    (project / "slice.jsonl").write_text(export.stdout)
    assert [json.loads(line)["event"] for line in export.stdout.splitlines()] == [
        "adapter.floor_update_receipt",
        "adapter.canary_receipt",
        "adapter.version_posture",
    ]
    return project


def run(tool: str, project: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    if tool == "floorctl":
        return floorctl(*args, cwd=project, state=project.parent)
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        capture_output=True, text=True, cwd=project, env=isolated_env(project.parent),
        timeout=120, check=False,
    )  # fmt: skip


REMOVED = object()  # (set_path's value for a member taken out)


def set_path(document: Any, path: str, value: object) -> None:
    """Set ``document``'s member at a dotted path (``feeds.0.schema_version``), or remove
    it (``REMOVED``)."""
    *parents, last = path.split(".")
    for step in parents:
        document = document[int(step)] if isinstance(document, list) else document[step]
    where = int(last) if isinstance(document, list) else last
    if value is REMOVED:
        del document[where]
    else:
        document[where] = value


def edited_slice(project: Path, seq: int, path: str, value: object, name: str) -> str:
    """slice.jsonl with record ``seq``'s receipt member at ``path`` set to ``value``, then
    re-sealed as anyone can: receipt ids and links recomputed, each line in plain json
    (so ``1.0`` stays ``1.0``). The MACs are kept: where the canonical bytes do not change
    (``1.0`` is ``1`` in RFC 8785) they still verify."""
    records = [json.loads(line) for line in (project / "slice.jsonl").read_text().splitlines()]
    set_path(records[seq]["receipt"], path, value)
    prev = None
    for record in records:
        record["receipt_id"] = content_address(record["receipt"])
        if prev is not None:
            record["prev"] = prev
        body = body_text(
            seq=record["seq"], ts=record["ts"], chain_id=record["chain_id"],
            event=record["event"], receipt_id=record["receipt_id"],
            receipt_json=canonical_bytes(record["receipt"]).decode(), prev=record["prev"],
        )  # fmt: skip
        prev = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
    lines = [json.dumps(record, sort_keys=True, separators=(",", ":")) for record in records]
    (project / name).write_text("".join(line + "\n" for line in lines))
    return name


def refused_chain(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.startswith("NOT PROVEN"), done.stdout
    assert "Traceback" not in done.stderr
    return done.stdout


def test_the_untouched_slice_proves_with_and_without_the_key(project: Path) -> None:
    key = project.parent / "floorguard" / "chain.key"
    for tool in TOOLS:
        for extra in (("--unauthenticated",), ("--key-file", key)):
            done = run(tool, project, "verify", "chain", "slice.jsonl", *extra)
            assert done.returncode == 0, (tool, done.stdout, done.stderr)


# --- integers: 1.0 is not 1 ---------------------------------------------------------------------

INTEGER_FIELDS = [
    (0, "schema_version"),
    (0, "old_map_version"),
    (0, "new_map_version"),
    (0, "feeds.0.schema_version"),
    (0, "feeds.0.version"),
    (1, "schema_version"),
    (2, "schema_version"),
]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("seq", "path"), INTEGER_FIELDS)
def test_an_integer_field_written_as_a_float_fails_the_slice_even_with_the_key(
    project: Path, tool: str, seq: int, path: str
) -> None:
    records = [json.loads(line) for line in (project / "slice.jsonl").read_text().splitlines()]
    receipt = records[seq]["receipt"]
    for step in path.split("."):
        receipt = receipt[int(step)] if isinstance(receipt, list) else receipt[step]
    assert type(receipt) is int
    name = edited_slice(project, seq, path, float(receipt), "float.jsonl")
    json_path = path.replace(".0.", "[0].")
    # The canonical bytes are unchanged, so the MAC still verifies: only the type refuses it.
    key = project.parent / "floorguard" / "chain.key"
    for extra in (("--unauthenticated",), ("--key-file", key)):
        out = refused_chain(run(tool, project, "verify", "chain", name, *extra))
        where = f"seq {seq}: {name} line {seq + 1}: "
        found = [line for line in out.splitlines() if line.startswith(where)]
        assert len(found) == 1 and f"receipt {json_path} " in found[0], out


# --- one shape check for verify chain and verify receipt ----------------------------------------

WRONG_TYPES = [
    ("new_map_version", True, "update receipt new_map_version is not a map version"),
    ("old_map_version", "1", "update receipt old_map_version is not a map version"),
    ("changed", 0, "receipt changed is not a JSON boolean (0)"),
    ("forced", "no", 'receipt forced is not a JSON boolean ("no")'),
    ("downgrade", 1, "receipt downgrade is not a JSON boolean (1)"),
    ("downgrade_allowed", "false", "update receipt downgrade_allowed is not a boolean"),
    ("schema_version", True, "receipt schema_version is not a positive JSON integer (true)"),
    ("feeds.0.version", "3", 'receipt feeds[0].version is not a JSON integer ("3")'),
    ("feeds.0.schema_version", True, "receipt feeds[0].schema_version is not a JSON integer"),
    ("feeds", {}, "receipt feeds is not a list"),
    ("template", 1, "receipt template is not a string"),
]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("path", "value", "message"), WRONG_TYPES)
def test_verify_chain_refuses_what_verify_receipt_refuses_with_the_same_words(
    project: Path, tool: str, path: str, value: object, message: str
) -> None:
    name = edited_slice(project, 0, path, value, "typed.jsonl")
    out = refused_chain(run(tool, project, "verify", "chain", name, "--unauthenticated"))
    assert f"seq 0: {name} line 1: {message}" in out, out
    # The same receipt as a file of its own, as verify receipt --content-only reads it.
    line = (project / name).read_text().splitlines()[0]
    (project / "line.json").write_text(line)
    done = run(tool, project, "verify", "receipt", "line.json", "--content-only")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"{tool}: error: line.json: {message}"), done.stderr


def signed(project: Path, receipt: dict[str, Any]) -> bytes:
    """An envelope signed with the project's own key over the canonical statement of
    ``receipt``: everything about it checks except the receipt's own shape."""
    key = serialization.load_pem_private_key(
        (project / "keys" / "signing.key").read_bytes(), password=None
    )
    assert isinstance(key, Ed25519PrivateKey)
    envelope = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, canonical_bytes(update_statement(receipt)), key)
    return json.dumps(
        {
            "payload": base64.b64encode(envelope.payload).decode(),
            "payloadType": envelope.payload_type,
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode()}
                for s in envelope.signatures
            ],
        }
    ).encode()


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("path", "value", "message"), WRONG_TYPES)
def test_a_signed_receipt_gets_the_same_shape_check_as_an_unsigned_one(
    project: Path, tool: str, path: str, value: object, message: str
) -> None:
    envelope = json.loads((project / "receipt.json").read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    receipt = statement["predicate"]
    set_path(receipt, path, value)
    (project / "signed.json").write_bytes(signed(project, receipt))
    done = run(tool, project, "verify", "receipt", "signed.json", "--pubkey", "keys/signing.pub")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"{tool}: error: signed.json: {message}"), done.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_the_shape_is_checked_before_the_signature(project: Path, tool: str) -> None:
    # A receipt of the wrong shape is refused for its shape, whoever signed it.
    envelope = json.loads((project / "receipt.json").read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    receipt = {**statement["predicate"], "downgrade": 1}
    (project / "stranger.json").write_bytes(signed(project, receipt))
    other = Ed25519PrivateKey.generate().public_key()
    (project / "other.pub").write_bytes(
        other.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    done = run(tool, project, "verify", "receipt", "stranger.json", "--pubkey", "other.pub")
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"{tool}: error: stranger.json: receipt downgrade is not a JSON boolean (1)"
    ), done.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_the_untouched_receipts_still_verify(project: Path, tool: str) -> None:
    done = run(tool, project, "verify", "receipt", "receipt.json", "--pubkey", "keys/signing.pub")
    assert done.returncode == 0, done.stderr
    line = (project / "slice.jsonl").read_text().splitlines()[0]
    (project / "first.json").write_text(line)
    done = run(tool, project, "verify", "receipt", "first.json", "--content-only")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("value", [3.0, "3", True])
def test_a_posture_records_waiver_days_left_is_a_json_integer_or_null(
    project: Path, tool: str, value: object
) -> None:
    name = edited_slice(project, 2, "adapters.0.waiver_days_left", value, "posture.jsonl")
    out = refused_chain(run(tool, project, "verify", "chain", name, "--unauthenticated"))
    assert (
        f"seq 2: {name} line 3: receipt adapters[0].waiver_days_left is not a JSON integer or "
        f"null ({json.dumps(value)})"
    ) in out, out


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("value", [1, "true", None])
def test_a_canary_records_certified_flag_is_a_json_boolean(
    project: Path, tool: str, value: object
) -> None:
    name = edited_slice(project, 1, "certified", value, "canary.jsonl")
    out = refused_chain(run(tool, project, "verify", "chain", name, "--unauthenticated"))
    shown = json.dumps(value)
    assert f"seq 1: {name} line 2: receipt certified is not a JSON boolean ({shown})" in out, out


# --- what a kind must hold ------------------------------------------------------------------------

POSTURE_WITHOUT = [
    ("adapters", "receipt has no adapters (a list)"),
    ("floor_map_hash", "receipt has no floor_map_hash (a string)"),
]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("field", "message"), POSTURE_WITHOUT)
def test_a_posture_record_without_its_fields_fails_the_slice(
    project: Path, tool: str, field: str, message: str
) -> None:
    # What doctor records is the map in force and each adapter's posture: a posture record
    # without them (a bare receipt, or one carrying a spawn permit's fields) is no posture.
    name = edited_slice(project, 2, field, REMOVED, "posture.jsonl")
    out = refused_chain(run(tool, project, "verify", "chain", name, "--unauthenticated"))
    assert f"seq 2: {name} line 3: " in out and message in out, out
