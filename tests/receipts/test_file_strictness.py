"""``verify receipt`` (both CLIs) reads a receipt file as strict JSON: UTF-8 without a
byte-order mark, no NaN or Infinity, integers where the format has integers; every refusal
names the file and what was found in it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.cli import floorctl, isolated_env

from floorguard._base._canonical import content_address
from floorguard._crypto import dsse

TOOLS = ("floorctl", "floorguard")
FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signed update receipt (receipt.json) and the chain line of one (line.json)."""
    root = tmp_path_factory.mktemp("receipts")
    project = root / "p"
    project.mkdir()
    (project / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (project / "feed.json").write_text(json.dumps(FEED))
    steps = [
        ("keygen", "--out", "keys"),
        ("refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
         "--receipt-out", "receipt.json", "--signing-key", "keys/signing.key", "--anchor"),
    ]  # fmt: skip
    for step in steps:
        done = floorctl(*step, cwd=project, state=root)
        assert done.returncode == 0, done.stderr
    export = floorctl("chain", "export", cwd=project, state=root)
    assert export.returncode == 0, export.stderr
    (project / "line.json").write_text(export.stdout.splitlines()[-1])
    return project


def verify(tool: str, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if tool == "floorctl":
        return floorctl("verify", "receipt", *args, cwd=project, state=project.parent)
    return subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "receipt", *args],
        capture_output=True, text=True, cwd=project, env=isolated_env(project.parent),
        timeout=60, check=False,
    )  # fmt: skip


def variant(project: Path, name: str, data: bytes) -> str:
    (project / name).write_bytes(data)
    return name


def refused(done: subprocess.CompletedProcess[str], tool: str, name: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr
    message = done.stderr.strip()
    assert message.startswith(f"{tool}: error: {name}: "), message
    return message


@pytest.mark.parametrize("tool", TOOLS)
def test_the_untouched_files_verify(project: Path, tool: str) -> None:
    assert verify(tool, project, "receipt.json", "--pubkey", "keys/signing.pub").returncode == 0
    assert verify(tool, project, "line.json", "--content-only").returncode == 0


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("source", "extra"), [
    ("receipt.json", ("--pubkey", "keys/signing.pub")),
    ("line.json", ("--content-only",)),
])  # fmt: skip
def test_refuses_a_receipt_file_that_starts_with_a_byte_order_mark(
    project: Path, tool: str, source: str, extra: tuple[str, ...]
) -> None:
    name = variant(project, "bom.json", b"\xef\xbb\xbf" + (project / source).read_bytes())
    message = refused(verify(tool, project, name, *extra), tool, name)
    assert "starts with a UTF-8 byte-order mark" in message


@pytest.mark.parametrize("tool", TOOLS)
def test_refuses_a_receipt_file_in_utf_16(project: Path, tool: str) -> None:
    text = (project / "line.json").read_text()
    name = variant(project, "utf16.json", text.encode("utf-16"))
    refused(verify(tool, project, name, "--content-only"), tool, name)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_refuses_nan_or_infinity_naming_the_file_and_what_was_found(
    project: Path, tool: str, constant: str
) -> None:
    line = (project / "line.json").read_text()
    name = variant(
        project, "nan.json", line.replace('"changed":true', f'"changed":{constant}').encode()
    )
    assert constant.encode() in (project / name).read_bytes()
    message = refused(verify(tool, project, name, "--content-only"), tool, name)
    assert f"{constant} is not JSON" in message


def signed_statement(project: Path, payload: bytes) -> bytes:
    key = serialization.load_pem_private_key(
        (project / "keys" / "signing.key").read_bytes(), password=None
    )
    assert isinstance(key, Ed25519PrivateKey)
    envelope = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, payload, key)
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
def test_refuses_nan_inside_a_signed_payload_naming_the_file(project: Path, tool: str) -> None:
    envelope = json.loads((project / "receipt.json").read_text())
    payload = base64.b64decode(envelope["payload"]).replace(b'"changed":true', b'"changed":NaN')
    name = variant(project, "signed-nan.json", signed_statement(project, payload))
    message = refused(verify(tool, project, name, "--pubkey", "keys/signing.pub"), tool, name)
    assert "signed payload" in message and "NaN is not JSON" in message


@pytest.mark.parametrize("tool", TOOLS)
def test_an_integer_beyond_json_precision_is_refused_naming_the_file(
    project: Path, tool: str
) -> None:
    record = json.loads((project / "line.json").read_text())
    receipt = {**record["receipt"], "old_map_version": 2**60}
    document = {"receipt_id": "sha256:" + "0" * 64, "receipt": receipt}
    name = variant(project, "huge.json", json.dumps(document).encode())
    refused(verify(tool, project, name, "--content-only"), tool, name)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("value", [True, 1.0, 0, "1"])
def test_schema_version_must_be_a_positive_json_integer(
    project: Path, tool: str, value: object
) -> None:
    # 1.0 and true read back as 1 in Python, and 1.0 even hashes the same in RFC 8785:
    # the content address alone cannot tell them from the integer.
    name = with_field(project, "schema_version", value)
    message = refused(verify(tool, project, name, "--content-only"), tool, name)
    assert "schema_version" in message


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("field", ["old_map_version", "new_map_version"])
@pytest.mark.parametrize("value", [True, 1.0, -1, "1", None])
def test_an_update_receipts_map_versions_are_json_integers(
    project: Path, tool: str, field: str, value: object
) -> None:
    name = with_field(project, field, value)
    message = refused(verify(tool, project, name, "--content-only"), tool, name)
    assert f"update receipt {field} is not a map version (an integer of at least 0)" in message


def with_field(project: Path, field: str, value: object) -> str:
    """The chain line's update receipt with ``field`` set to ``value``, its content address
    recomputed: consistent in itself, so only the field's type can refuse it."""
    record = json.loads((project / "line.json").read_text())
    receipt = {**record["receipt"], field: value}
    document = {"receipt_id": content_address(receipt), "receipt": receipt}
    return variant(project, "edited.json", json.dumps(document).encode())


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("key", ["payload", "payloadType", "signatures"])
def test_refuses_an_envelope_that_repeats_a_key_naming_the_file(
    project: Path, tool: str, key: str
) -> None:
    # Parsers differ on which copy counts: the payload one verifier reads would not be
    # another's. The decoy goes first; Python's json would keep the real, later copy.
    text = (project / "receipt.json").read_text()
    decoy = {"payload": '"e30="', "payloadType": '"text/plain"', "signatures": "[]"}[key]
    assert text.startswith("{")
    name = variant(project, f"repeated-{key}.json", ("{" + f'"{key}":{decoy},' + text[1:]).encode())
    message = refused(verify(tool, project, name, "--pubkey", "keys/signing.pub"), tool, name)
    assert f"repeats the key {key!r}" in message
