"""Host signatures of chain records: their form, the host-keys document, and what a verifier
makes of a signature that was moved, relabelled or malformed (SQLite chains, no server)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.chain_support import CANARY, receipt
from helpers.cli import isolated_env

from floorctl import keys
from floorguard._chain import record_signature
from floorguard._chain.chain import AuditChain
from floorguard._chain.record_signature import MAC_FORM, load_host_key, parse_host_keys
from floorguard._crypto import dsse
from floorguard._proofs.slice_verify import MALFORMED_MAC, verify_slice
from floorguard.errors import ChainWriteError, KeyFileError


def _pair(folder: Path) -> tuple[Path, Path]:
    return keys.generate(folder)


def _document(**hosts: str | list[str]) -> bytes:
    return json.dumps({"hosts": hosts}).encode()


def _signed_chain(
    tmp_path: Path, private: Path, count: int = 3, *, host_keys: Path | None = None
) -> AuditChain:
    listed = {} if host_keys is None else {"FLOORGUARD_HOST_KEYS": str(host_keys)}
    env = isolated_env(tmp_path / "state", FLOORGUARD_HOST_KEY_FILE=str(private), **listed)
    chain = AuditChain.from_env(env)
    for n in range(count):
        chain.append(CANARY, receipt(n=n))
    return chain


def test_a_signed_mac_has_the_shared_form_and_names_keygens_key_id(tmp_path: Path) -> None:
    private, public = _pair(tmp_path / "k")
    record = _signed_chain(tmp_path, private, 1).head()
    assert record is not None
    assert re.fullmatch(MAC_FORM, record.mac)
    assert re.fullmatch(MAC_FORM, "ab" * 32)
    assert record.mac.split(":")[1] == dsse.key_id(keys.load_public(public))[:16]


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        (b"not json", "not JSON"),
        (b'{"hosts": {}}', "at least one host"),
        (b'{"hosts": {"a": "x"}, "threshold": 1}', "exactly"),
        (b'{"hosts": {"a": 1}}', "not a PEM string"),
        (
            b'{"hosts": {"a": "-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----\\n"}}',
            "not a PEM public key",
        ),
        (b'{"hosts": {"bad name\\n": "x"}}', "host name"),
        (b'{"hosts": {"a": "x", "a": "y"}}', "listed twice"),
    ],
)
def test_a_malformed_host_keys_document_is_refused_saying_why(
    document: bytes, complaint: str
) -> None:
    with pytest.raises(KeyFileError, match=complaint):
        parse_host_keys(document, "hosts.json")


@pytest.mark.parametrize(
    ("hosts", "complaint"),
    [
        ({"web-1": "{one}junk"}, "hosts.json: host web-1: holds text after its key"),
        ({"web-1": "junk\n{one}"}, "hosts.json: host web-1: holds text before its key"),
        ({"web-1": "{two}{one}"}, "hosts.json: host web-1: holds more than one key"),
        ({"web-1": "{one}{two}"}, "hosts.json: host web-1: holds more than one key"),
        ({"web-1": ["{one}", "{two}junk"]}, r"hosts.json: host web-1 \[1\]: holds text after"),
        ({"web-1": ["{two}{one}"]}, r"hosts.json: host web-1 \[0\]: holds more than one key"),
    ],
    ids=["text-after", "text-before", "two-keys", "two-keys-right-first", "list-text-after",
         "list-two-keys"],
)  # fmt: skip
def test_a_host_key_string_holding_more_than_one_key_is_refused_naming_the_host(
    tmp_path: Path, hosts: dict[str, str | list[str]], complaint: str
) -> None:
    # PEM loading reads the first block alone: each string must be exactly one key.
    one = _pair(tmp_path / "one")[1].read_text()
    two = _pair(tmp_path / "two")[1].read_text()

    def filled(pem: str) -> str:
        return pem.replace("{one}", one).replace("{two}", two)

    listed = {
        name: [filled(pem) for pem in pems] if isinstance(pems, list) else filled(pems)
        for name, pems in hosts.items()
    }
    with pytest.raises(KeyFileError, match=complaint):
        parse_host_keys(_document(**listed), "hosts.json")
    # The same keys, one a string (white space around it allowed), are read.
    apart = parse_host_keys(_document(**{"web-1": ["\n" + one + "\n ", two]}), "hosts.json")
    assert set(apart.names.values()) == {"web-1"} and len(apart.keys) == 2


def test_verify_chain_refuses_a_host_keys_document_with_text_after_a_key(tmp_path: Path) -> None:
    private, public = _pair(tmp_path / "a")
    chain = _signed_chain(tmp_path, private, 2)
    (tmp_path / "slice.jsonl").write_text("".join(line + "\n" for line in chain.export_lines()))
    for pem, code in ((public.read_text() + "junk", 1), (public.read_text(), 0)):
        (tmp_path / "hosts.json").write_bytes(_document(**{"web-1": pem}))
        for tool in ("floorctl", "floorguard"):
            done = subprocess.run(
                [sys.executable, "-m", tool, "verify", "chain", "slice.jsonl", "--host-keys",
                 "hosts.json"],
                cwd=tmp_path, env=isolated_env(tmp_path / "state"), capture_output=True,
                text=True, timeout=120, check=False,
            )  # fmt: skip
            assert done.returncode == code, (tool, done.stdout, done.stderr)
            if code:
                assert done.stderr == (
                    f"{tool}: error: hosts.json: host web-1: holds text after its key: it "
                    "must hold the PEM key alone\n"
                )
            else:
                assert "web-1: 2 record(s)" in done.stdout, done.stdout


def test_a_host_key_file_with_text_after_its_key_is_refused(tmp_path: Path) -> None:
    private, _ = _pair(tmp_path / "a")
    private.write_bytes(private.read_bytes() + b"junk\n")
    with pytest.raises(KeyFileError, match="holds text after its key"):
        load_host_key(private)


def test_one_key_under_two_host_names_is_refused(tmp_path: Path) -> None:
    _, public = _pair(tmp_path / "k")
    pem = public.read_text()
    with pytest.raises(KeyFileError, match="list the same key"):
        parse_host_keys(_document(a=pem, b=pem), "hosts.json")


def test_a_host_with_a_replaced_key_keeps_its_name_for_old_and_new_records(
    tmp_path: Path,
) -> None:
    old, old_public = _pair(tmp_path / "old")
    new, new_public = _pair(tmp_path / "new")
    document = tmp_path / "hosts.json"
    document.write_bytes(_document(**{"web-1": [old_public.read_text(), new_public.read_text()]}))
    _signed_chain(tmp_path, old, 2)
    # (a local chain: the new key appends after the old one's record only when both are listed)
    chain = _signed_chain(tmp_path, new, 2, host_keys=document)
    listed = parse_host_keys(document.read_bytes(), "h")
    report = verify_slice(list(chain.export_lines()), host_keys=listed)
    assert report.intact and report.hosts == (("web-1", 4),)
    with pytest.raises(KeyFileError, match="not a PEM string"):
        parse_host_keys(json.dumps({"hosts": {"web-1": []}}).encode(), "h")


def test_a_signature_relabelled_with_another_hosts_key_id_fails(tmp_path: Path) -> None:
    private, public = _pair(tmp_path / "a")
    _, other = _pair(tmp_path / "b")
    listed = parse_host_keys(_document(a=public.read_text(), b=other.read_text()), "h")
    lines = [json.loads(line) for line in _signed_chain(tmp_path, private).export_lines()]
    other_kid = record_signature.key_id(keys.load_public(other))
    _, _, signature = lines[1]["mac"].split(":")
    lines[1]["mac"] = f"ed25519:{other_kid}:{signature}"
    report = verify_slice([json.dumps(line) for line in lines], host_keys=listed)
    assert [(e.seq, e.reason.split(" (")[0]) for e in report.integrity_errors] == [
        (1, "the signature of host b")
    ]
    # (host a wrote it: the report must not read as b's doing)
    assert "this does not show that b wrote it" in report.integrity_errors[0].reason


def test_a_signature_copied_onto_another_record_fails(tmp_path: Path) -> None:
    private, public = _pair(tmp_path / "a")
    listed = parse_host_keys(_document(a=public.read_text()), "h")
    lines = [json.loads(line) for line in _signed_chain(tmp_path, private).export_lines()]
    lines[2]["mac"] = lines[1]["mac"]
    report = verify_slice([json.dumps(line) for line in lines], host_keys=listed)
    assert [e.seq for e in report.integrity_errors] == [2]


def test_a_mac_of_neither_form_is_malformed_with_or_without_keys(tmp_path: Path) -> None:
    private, public = _pair(tmp_path / "a")
    listed = parse_host_keys(_document(a=public.read_text()), "h")
    lines = [json.loads(line) for line in _signed_chain(tmp_path, private).export_lines()]
    lines[0]["mac"] = "ed25519:" + lines[0]["mac"][8:].upper()
    for options in ({}, {"host_keys": listed}, {"key": b"k" * 32}):
        report = verify_slice([json.dumps(line) for line in lines], **options)  # type: ignore[arg-type]
        assert (0, MALFORMED_MAC) in [(e.seq, e.reason) for e in report.integrity_errors]


def test_a_host_key_of_group_readable_mode_is_refused_even_for_the_owner(tmp_path: Path) -> None:
    private, _ = _pair(tmp_path / "a")
    private.chmod(0o604)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_host_key(private)


def test_a_replaced_host_key_file_is_read_again(tmp_path: Path) -> None:
    """The new key is read at the next append; on a local chain it appends after the old
    key's record once both are listed as this host's."""
    first, first_public = _pair(tmp_path / "a")
    second, second_public = _pair(tmp_path / "b")
    key_file = tmp_path / "host.key"
    key_file.write_bytes(first.read_bytes())
    key_file.chmod(0o600)
    chain = _signed_chain(tmp_path, key_file, 1)
    replacement = tmp_path / "new.key"
    replacement.write_bytes(second.read_bytes())
    replacement.chmod(0o600)
    replacement.replace(key_file)
    with pytest.raises(ChainWriteError, match=f"key id {load_host_key(first).key_id}.*"
                                              "FLOORGUARD_HOST_KEYS"):  # fmt: skip
        chain.append(CANARY, receipt())
    document = tmp_path / "hosts.json"
    document.write_bytes(
        _document(**{"web-1": [first_public.read_text(), second_public.read_text()]})
    )
    record = _signed_chain(tmp_path, key_file, 1, host_keys=document).head()
    assert record is not None and record.mac.split(":")[1] == load_host_key(second).key_id


def test_a_head_signed_by_another_key_on_a_local_chain_is_refused(tmp_path: Path) -> None:
    """No other host writes a local chain: a last record signed by a key that is not this
    host's (a well-formed signature of anyone's) refuses the append, as a wrong HMAC does."""
    private, public = _pair(tmp_path / "a")
    other, other_public = _pair(tmp_path / "b")
    chain = _signed_chain(tmp_path, private, 2)
    # (the forger's append passes only where its key is listed under the writer's name)
    as_mine = tmp_path / "as-mine.json"
    as_mine.write_bytes(_document(mine=[public.read_text(), other_public.read_text()]))
    _signed_chain(tmp_path, other, 1, host_keys=as_mine)
    with pytest.raises(ChainWriteError, match=r"seq 2\).*signed by key id .* no other host"):
        chain.append(CANARY, receipt())
    # Listed under another host's name is no better: only this host's own name is.
    apart = tmp_path / "apart.json"
    apart.write_bytes(_document(mine=public.read_text(), forger=other_public.read_text()))
    listed = _signed_chain(tmp_path, private, 0, host_keys=apart)
    with pytest.raises(ChainWriteError, match=r"signed by host forger's key.*this host is mine"):
        listed.append(CANARY, receipt())
    assert chain.head() is not None and chain.head().seq == 2


def test_an_unusable_host_keys_document_refuses_the_append(tmp_path: Path) -> None:
    private, _ = _pair(tmp_path / "a")
    broken = tmp_path / "hosts.json"
    broken.write_text('{"hosts": []}')
    env = isolated_env(tmp_path / "state", FLOORGUARD_HOST_KEY_FILE=str(private),
                       FLOORGUARD_HOST_KEYS=str(broken))  # fmt: skip
    with pytest.raises(KeyFileError, match=r"hosts\.json"):
        AuditChain.from_env(env).append(CANARY, receipt())
    assert AuditChain.from_env(env).head() is None


def test_a_signing_host_checks_a_chain_only_it_wrote_with_its_own_key(tmp_path: Path) -> None:
    from floorguard._proofs import checkpoint
    from floorguard._proofs.canary import chain_projection
    from floorguard.errors import VerificationError

    private, _ = _pair(tmp_path / "a")
    other, _ = _pair(tmp_path / "b")
    private_public = private.with_name("signing.pub")
    other_public = other.with_name("signing.pub")
    document = tmp_path / "hosts.json"
    # (one host's two keys, as after a replacement: the local chain takes both)
    document.write_bytes(_document(a=[private_public.read_text(), other_public.read_text()]))
    chain = _signed_chain(tmp_path, private, 2)
    assert chain_projection(chain) == {}
    assert checkpoint.of_chain(chain).size == 2
    # a record of the other key (appended where both are listed): not this host's key
    _signed_chain(tmp_path, other, 1, host_keys=document)
    with pytest.raises(
        VerificationError, match=r"seq 2: signed by key id .* set FLOORGUARD_HOST_KEYS"
    ):
        chain_projection(chain)
