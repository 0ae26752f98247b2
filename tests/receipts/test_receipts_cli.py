"""keygen, signed update receipts and ``verify receipt``, through the real CLI.

Also the second template: floorctl maintaining a host file in Bernstein's layout.
"""

from __future__ import annotations

import base64
import json
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env

ASSETS = Path(__file__).parents[1] / "assets"


def entry(version: str) -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": "BSA-0001", "note": "Upgrade."}


@pytest.fixture(scope="module")
def signed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a release key, a module and a receipt signed by that key, made once."""
    state = tmp_path_factory.mktemp("signed")
    project = state / "p"
    project.mkdir()
    done = floorctl("keygen", "--out", "keys", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    (project / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (project / "feed.json").write_text(
        json.dumps({"schema_version": 1, "adapters": {"aider": entry("0.60.0")}})
    )
    done = floorctl(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
        "--receipt-out", "receipt.json", "--signing-key", "keys/signing.key",
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return state


@pytest.fixture
def signed(signed_once: Path, tmp_path: Path) -> Path:
    """A copy of that project and its state for one test (none of their files names the
    folder they are in)."""
    shutil.copytree(signed_once, tmp_path, dirs_exist_ok=True)
    return tmp_path / "p"


def verify(project: Path, *args: str) -> tuple[int, str]:
    done = floorctl("verify", "receipt", *args, cwd=project, state=project.parent)
    return done.returncode, done.stdout + done.stderr


def test_keygen_writes_a_0600_private_key_and_a_public_key(signed: Path) -> None:
    private, public = signed / "keys" / "signing.key", signed / "keys" / "signing.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")


def test_keygen_refuses_to_overwrite_a_key(signed: Path) -> None:
    before = (signed / "keys" / "signing.key").read_bytes()
    done = floorctl("keygen", "--out", "keys", cwd=signed, state=signed.parent)
    assert done.returncode == 1
    assert "refusing to overwrite" in done.stderr
    assert (signed / "keys" / "signing.key").read_bytes() == before


def test_receipt_verifies_against_the_public_key_and_the_map(signed: Path) -> None:
    code, out = verify(
        signed, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map", "floor_map.py"
    )
    assert code == 0, out
    assert out.startswith("OK adapter.floor_update_receipt sha256:")


def test_receipt_fails_when_the_map_changed_after_it_was_sealed(signed: Path) -> None:
    module = signed / "floor_map.py"
    module.write_text(module.read_text().replace('"0.60.0"', '"0.10.0"'))
    code, out = verify(
        signed, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map", "floor_map.py"
    )
    assert code == 1
    assert "floor-map hash mismatch" in out


def test_receipt_checks_against_an_archived_map_json(signed: Path) -> None:
    [archived] = [
        p
        for p in (signed / "maps").glob("sha256-*.json")
        if json.loads(p.read_text())  # the non-empty map
    ]
    code, out = verify(signed, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map",
                       str(archived))  # fmt: skip
    assert code == 0, out


def test_receipt_signed_by_another_key_is_refused(signed: Path, tmp_path: Path) -> None:
    assert floorctl("keygen", "--out", "other", cwd=signed, state=tmp_path).returncode == 0
    code, out = verify(signed, "receipt.json", "--pubkey", "other/signing.pub")
    assert code == 1
    assert "no signature verifies" in out


@pytest.mark.parametrize("field", ["new_floor_map_hash", "downgrade_allowed", "ts"])
def test_receipt_with_an_edited_field_is_refused(signed: Path, field: str) -> None:
    envelope = json.loads((signed / "receipt.json").read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"][field] = {"ts": "2020-01-01T00:00:00Z"}.get(field, True)
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (signed / "receipt.json").write_text(json.dumps(envelope))
    code, out = verify(signed, "receipt.json", "--pubkey", "keys/signing.pub")
    assert code == 1
    assert "Traceback" not in out


def test_receipt_without_pubkey_or_dev_key_is_a_clear_error(signed: Path) -> None:
    code, out = verify(signed, "receipt.json")
    assert code == 1
    assert "no key given" in out


def test_bernstein_host_file_is_maintained_in_its_own_layout(tmp_path: Path) -> None:
    host = tmp_path / "advisories.py"
    shutil.copy(ASSETS / "bernstein_advisories.py", host)
    original = host.read_text()
    feed = {
        "schema_version": 1,
        "adapters": {
            "aider": entry("0.61.0"),
            "goose": {**entry("1.0.0"), "advisory_id": "BSA-0007",
                      "note": "Pre-1.0 goose lacks the sandbox flag the orchestrator relies on."},
        },
    }  # fmt: skip
    (tmp_path / "feed.json").write_text(json.dumps(feed))
    done = floorctl("refresh", "--feed", "feed.json", "--module", host, "--template",
                    "bernstein", "--write", cwd=tmp_path, state=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = host.read_text()
    assert 'min_safe_version="0.61.0"' in text
    assert "ADAPTER_MIN_SAFE_VERSIONS: dict[str, AdapterAdvisory] = {" in text
    head, tail = original.split("# floor-map:begin\n")[0], original.split("# floor-map:end\n")[1]
    assert text.startswith(head) and text.endswith(tail)
    namespace: dict[str, object] = {}
    exec(compile(text, str(host), "exec"), namespace)  # noqa: S102 - the host file itself
    advisories = namespace["ADAPTER_MIN_SAFE_VERSIONS"]
    assert isinstance(advisories, dict)
    assert advisories["aider"].min_safe_version == "0.61.0"


def runtime_verify(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "receipt", *args],
        capture_output=True, text=True, cwd=project, env=isolated_env(project.parent),
        timeout=60, check=False,
    )  # fmt: skip


def test_runtime_verifies_the_receipt_without_floorctl(signed: Path) -> None:
    [archived] = [p for p in (signed / "maps").glob("sha256-*.json") if json.loads(p.read_text())]
    done = runtime_verify(
        signed, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map", str(archived)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK adapter.floor_update_receipt sha256:")


def test_runtime_reports_a_map_that_is_not_the_one_pinned(signed: Path) -> None:
    [empty] = [p for p in (signed / "maps").glob("sha256-*.json") if not json.loads(p.read_text())]
    done = runtime_verify(
        signed, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map", str(empty)
    )
    assert done.returncode == 1
    assert "floor-map hash mismatch" in done.stderr


def test_runtime_checks_a_chain_line_by_its_content_address(signed: Path) -> None:
    done = floorctl(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write", "--anchor",
        cwd=signed, state=signed.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = floorctl("chain", "export", cwd=signed, state=signed.parent).stdout.splitlines()[-1]
    (signed / "line.json").write_text(line)
    assert runtime_verify(signed, "line.json", "--content-only").returncode == 0
    record = json.loads(line)
    record["receipt"]["downgrade_allowed"] = True
    (signed / "line.json").write_text(json.dumps(record))
    done = runtime_verify(signed, "line.json", "--content-only")
    assert done.returncode == 1
    assert "content address mismatch" in done.stderr


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (lambda signed: b"not a key\n", "not an unencrypted PEM private key"),
        (lambda signed: (signed / "keys" / "signing.key").read_bytes() + b"junk\n",
         "holds text after its key"),
    ],
    ids=["not-a-key", "text-after-the-key"],
)  # fmt: skip
def test_refresh_refuses_a_signing_key_file_that_is_not_one_key_and_writes_nothing(
    signed: Path, key: Callable[[Path], bytes], said: str
) -> None:
    (signed / "bad.key").write_bytes(key(signed))
    (signed / "feed.json").write_text(
        json.dumps({"schema_version": 1, "adapters": {"aider": entry("0.61.0")}})
    )
    files = signed / "floor_map.py", signed / "receipt.json"
    before = [f.read_bytes() for f in files]
    done = floorctl(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
        "--receipt-out", "receipt.json", "--signing-key", "bad.key",
        cwd=signed, state=signed.parent,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(f"floorctl: error: bad.key: {said}"), done.stderr
    assert [f.read_bytes() for f in files] == before


def test_verify_refuses_a_pubkey_file_that_is_not_a_key(signed: Path) -> None:
    (signed / "junk.pub").write_text("not a key\n")
    code, out = verify(signed, "receipt.json", "--pubkey", "junk.pub")
    assert code == 1
    assert "junk.pub: not a PEM public key" in out


@pytest.mark.parametrize(
    ("after", "said"),
    [
        (b"trailing junk\n", "holds text after its key"),
        (b"-----BEGIN PUBLIC KEY-----\n", "holds more than one key"),
        (None, "holds more than one key"),  # another key after the right one
    ],
    ids=["text-after", "a-second-begin-line", "another-key-after"],
)
def test_verify_refuses_a_pubkey_file_holding_more_than_its_key(
    signed: Path, tmp_path: Path, after: bytes | None, said: str
) -> None:
    # PEM loading reads the first block alone: this file held the right key first.
    if after is None:
        done = floorctl("keygen", "--out", str(tmp_path / "other"), cwd=signed, state=tmp_path)
        assert done.returncode == 0, done.stderr
        after = (tmp_path / "other" / "signing.pub").read_bytes()
    (signed / "more.pub").write_bytes((signed / "keys" / "signing.pub").read_bytes() + after)
    code, out = verify(signed, "receipt.json", "--pubkey", "more.pub")
    assert code == 1, out
    assert f"more.pub: {said}" in out
    done = runtime_verify(signed, "receipt.json", "--pubkey", "more.pub")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"floorguard: error: more.pub: {said}" in done.stderr
    # the same key alone, in white space, verifies
    (signed / "one.pub").write_bytes(
        b"\n" + (signed / "keys" / "signing.pub").read_bytes() + b"\n\n"
    )
    code, out = verify(signed, "receipt.json", "--pubkey", "one.pub")
    assert code == 0, out


def either(tool: str, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``verify receipt`` through ``floorctl`` or through ``python -m floorguard``."""
    if tool == "floorctl":
        return floorctl("verify", "receipt", *args, cwd=project, state=project.parent)
    return runtime_verify(project, *args)


TOOLS = ("floorctl", "floorguard")
UNSIGNED = "unsigned: only its content address was checked"


def forged_update(project: Path) -> dict[str, object]:
    """The signed receipt's predicate with aider's floor lowered to 0.01, every hash and the
    content address recomputed: consistent in itself, signed by nobody."""
    from floorguard._base._canonical import content_address
    from floorguard._maps.map_model import entries_hash

    envelope = json.loads((project / "receipt.json").read_text())
    receipt = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    receipt["new_floor_map"]["aider"]["min_safe_version"] = "0.01"
    receipt["new_floor_map_hash"] = entries_hash(receipt["new_floor_map"])
    return {"receipt_id": content_address(receipt), "receipt": receipt}


@pytest.mark.parametrize("tool", TOOLS)
def test_refuses_a_hand_made_unsigned_update_receipt_even_with_a_pubkey(
    signed: Path, tool: str
) -> None:
    (signed / "forged.json").write_text(json.dumps(forged_update(signed)))
    done = either(tool, signed, "forged.json", "--pubkey", "keys/signing.pub")
    assert done.returncode == 1
    assert UNSIGNED in done.stderr
    assert "OK" not in done.stdout
    done = either(tool, signed, "forged.json", "--pubkey", "keys/signing.pub", "--json")
    assert done.returncode == 1
    assert '"verified": true' not in done.stdout


@pytest.mark.parametrize("tool", TOOLS)
def test_content_only_checks_the_content_address_and_says_it_is_unsigned(
    signed: Path, tool: str
) -> None:
    forged = forged_update(signed)
    (signed / "forged.json").write_text(json.dumps(forged))
    done = either(tool, signed, "forged.json", "--content-only")
    assert done.returncode == 0, done.stderr
    assert UNSIGNED in done.stdout
    done = either(tool, signed, "forged.json", "--content-only", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["signed"], document["content_only"]) == (False, True)
    assert document["signed_by"] == [] and document["receipt_id"] == forged["receipt_id"]
    # The content address is still checked: an edit after sealing is refused.
    forged["receipt"]["forced"] = True  # type: ignore[index]
    (signed / "forged.json").write_text(json.dumps(forged))
    done = either(tool, signed, "forged.json", "--content-only")
    assert done.returncode == 1
    assert "content address mismatch" in done.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_a_signed_receipt_reports_signed_and_not_content_only(signed: Path, tool: str) -> None:
    done = either(tool, signed, "receipt.json", "--pubkey", "keys/signing.pub", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["verified"], document["signed"], document["content_only"]) == (
        True, True, False,
    )  # fmt: skip
    assert len(document["signed_by"]) == 1
    # --content-only never weakens the check of a signed receipt: the signature still counts.
    done = either(tool, signed, "receipt.json", "--pubkey", "keys/signing.pub", "--content-only",
                  "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["signed"], json.loads(done.stdout)["content_only"]) == (
        True, False,
    )  # fmt: skip


@pytest.mark.parametrize("tool", TOOLS)
def test_refuses_an_envelope_with_zero_signatures(signed: Path, tool: str) -> None:
    envelope = json.loads((signed / "receipt.json").read_text())
    envelope["signatures"] = []
    (signed / "receipt.json").write_text(json.dumps(envelope))
    for extra in ((), ("--content-only",)):
        done = either(tool, signed, "receipt.json", "--pubkey", "keys/signing.pub", *extra)
        assert done.returncode == 1
        assert "no signatures" in done.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_refuses_an_envelope_signed_by_a_key_not_the_given_one_even_content_only(
    signed: Path, tool: str
) -> None:
    assert floorctl("keygen", "--out", "other", cwd=signed, state=signed.parent).returncode == 0
    for extra in ((), ("--content-only",)):
        done = either(tool, signed, "receipt.json", "--pubkey", "other/signing.pub", *extra)
        assert done.returncode == 1
        assert "no signature verifies" in done.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_refuses_a_chain_export_line_unless_content_only(signed: Path, tool: str) -> None:
    done = floorctl(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write", "--anchor",
        cwd=signed, state=signed.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = floorctl("chain", "export", cwd=signed, state=signed.parent).stdout.splitlines()[-1]
    (signed / "line.json").write_text(line)
    done = either(tool, signed, "line.json", "--pubkey", "keys/signing.pub")
    assert done.returncode == 1
    assert UNSIGNED in done.stderr
    done = either(tool, signed, "line.json", "--content-only", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["signed"] is False


@pytest.mark.parametrize("tool", TOOLS)
def test_refuses_a_forged_receipt_carried_beside_a_genuine_envelope(
    signed: Path, tool: str
) -> None:
    # The envelope signs the real receipt, not this one: it must not lend its signature.
    document = {
        **forged_update(signed),
        "envelope": json.loads((signed / "receipt.json").read_text()),
    }
    (signed / "forged.json").write_text(json.dumps(document))
    done = either(tool, signed, "forged.json", "--pubkey", "keys/signing.pub", "--json")
    assert done.returncode == 1
    assert UNSIGNED in done.stderr
    done = either(tool, signed, "forged.json", "--content-only", "--json")
    assert json.loads(done.stdout)["signed"] is False
