"""Records signed by the host that wrote them, on a real PostgreSQL server.

The database owner makes the fleet's HMAC key (`floorctl chain init`) and owns the tables:
with triggers off it can rewrite any record and recompute every link and MAC, so a chain
authenticated by the shared key proves nothing against the owner. A host that holds its own
Ed25519 key (FLOORGUARD_HOST_KEY_FILE) signs its records instead; an auditor holding the
hosts' public keys (`verify chain --host-keys`) then catches any record the owner (or another
host) altered or forged, and learns which host wrote each record.

The owner's tampering here is plain owner SQL: turn the tables' triggers off, UPDATE or
INSERT rows, turn them on again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.chain_support import execute, receipt
from helpers.cli import isolated_env
from helpers.pg_chain import CANARY, Chain
from hosts import Host, floor

from floorctl import keys
from floorguard._chain.chain import (
    AuditChain,
    body_text,
    canonical_json,
    record_digest,
    record_mac,
)
from floorguard.chainstore import store_from_env
from floorguard.errors import ChainWriteError, KeyFileError

FLOORCTL = [sys.executable, "-m", "floorctl"]
FLOORGUARD = [sys.executable, "-m", "floorguard"]


@dataclass(frozen=True)
class SigningHost:
    """A host of the fleet with its own key pair (from `floorctl keygen`)."""

    name: str
    home: Path
    private: Path
    public: Path


def _host(tmp_path: Path, name: str) -> SigningHost:
    folder = tmp_path / name
    private, public = keys.generate(folder / "keys")
    return SigningHost(name, folder, private, public)


def _host_keys(path: Path, *hosts: SigningHost) -> Path:
    document = {"hosts": {host.name: host.public.read_text() for host in hosts}}
    path.write_text(json.dumps(document))
    return path


def _signing_chain(pg: Chain, host: SigningHost, **extra: str) -> AuditChain:
    """The chain as a signing host opens it: its own key, no fleet HMAC key."""
    env = pg.env(host.home, FLOORGUARD_HOST_KEY_FILE=str(host.private), **extra)
    env["FLOORGUARD_CHAIN_KEY_FILE"] = str(host.home / "no-fleet.key")
    return AuditChain.from_env(env)


def _lines(chain: AuditChain) -> list[str]:
    return [line + "\n" for line in chain.export_lines()]


def _verify(
    lines: list[str], tmp_path: Path, *options: str | Path, tool: list[str] = FLOORCTL
) -> subprocess.CompletedProcess[str]:
    slice_file = tmp_path / "slice.jsonl"
    slice_file.write_text("".join(lines))
    return subprocess.run(
        [*tool, "verify", "chain", str(slice_file), *map(str, options)],
        capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("FLOORGUARD_", "FLOORCTL_"))},
    )  # fmt: skip


# --- what the owner can do with plain SQL ---------------------------------------------------------


def _owner_rows(pg: Chain) -> list[dict[str, Any]]:
    with psycopg.connect(pg.owner_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT seq, ts, chain_id, event, receipt_id, receipt, prev, mac"
            " FROM floorguard.records ORDER BY seq"
        ).fetchall()
    names = ("seq", "ts", "chain_id", "event", "receipt_id", "receipt", "prev", "mac")
    return [dict(zip(names, row, strict=True)) for row in rows]


def _owner_write(pg: Chain, rows: list[dict[str, Any]], *, new: bool = False) -> None:
    """Write ``rows`` as the owner, with the tables' triggers off (the owner may do that)."""
    with psycopg.connect(pg.owner_url) as conn:
        triggers = conn.execute(
            "SELECT tgname, tgenabled FROM pg_catalog.pg_trigger"
            " WHERE tgrelid = 'floorguard.records'::regclass AND NOT tgisinternal"
        ).fetchall()
        conn.execute("ALTER TABLE floorguard.records DISABLE TRIGGER USER")
        for row in rows:
            if new:
                conn.execute(
                    "INSERT INTO floorguard.records"
                    " (seq, ts, chain_id, event, receipt_id, receipt, prev, mac)"
                    " VALUES (%(seq)s, %(ts)s, %(chain_id)s, %(event)s, %(receipt_id)s,"
                    " %(receipt)s, %(prev)s, %(mac)s)",
                    row,
                )
            else:
                conn.execute(
                    "UPDATE floorguard.records SET receipt = %(receipt)s,"
                    " receipt_id = %(receipt_id)s, prev = %(prev)s, mac = %(mac)s"
                    " WHERE seq = %(seq)s",
                    row,
                )
        modes = {"A": "ENABLE ALWAYS", "O": "ENABLE", "R": "ENABLE REPLICA", "D": "DISABLE"}
        for name, mode in triggers:  # as they were
            conn.execute(f'ALTER TABLE floorguard.records {modes[mode]} TRIGGER "{name}"')
        conn.commit()


def _body(row: dict[str, Any]) -> bytes:
    return body_text(
        seq=row["seq"], ts=row["ts"], chain_id=row["chain_id"], event=row["event"],
        receipt_id=row["receipt_id"], receipt_json=row["receipt"], prev=row["prev"],
    ).encode("utf-8")  # fmt: skip


def _owner_rewrite(
    pg: Chain, seq: int, change: dict[str, Any], *, fleet_key: bytes, to_hmac: bool = False
) -> None:
    """The owner changes record ``seq``'s receipt and repairs everything it can: the content
    address, every later ``prev``, and every MAC it can compute with the fleet key (with
    ``to_hmac``, host-signed records too, turned into HMAC records)."""
    rows = _owner_rows(pg)
    target = rows[seq]
    new_receipt = {**json.loads(target["receipt"]), **change}
    target["receipt"] = canonical_json(new_receipt)
    target["receipt_id"] = record_digest(target["receipt"].encode("utf-8"))
    for row in rows[seq:]:
        if row["seq"] > 0:
            row["prev"] = record_digest(_body(rows[row["seq"] - 1]))
        if len(row["mac"]) == 64 or to_hmac:
            row["mac"] = record_mac(fleet_key, _body(row))
    _owner_write(pg, rows[seq:])


def _fleet_key(pg: Chain) -> bytes:
    return bytes.fromhex(pg.key_file.read_text().strip())


# --- the attack -----------------------------------------------------------------------------------


def test_the_owner_rewrites_an_hmac_chain_and_the_fleet_key_cannot_tell(
    pg: Chain, tmp_path: Path
) -> None:
    # Why host signatures exist: the shared key is the owner's too.
    chain = pg.chain()
    for n in range(4):
        chain.append(CANARY, receipt(n=n))
    _owner_rewrite(pg, 1, {"n": 99}, fleet_key=_fleet_key(pg))
    lines = _lines(chain)
    assert json.loads(lines[1])["receipt"]["n"] == 99
    done = _verify(lines, tmp_path, "--key-file", pg.key_file)
    assert done.returncode == 0 and done.stdout.startswith("PROVEN"), done.stdout


def _two_host_chain(pg: Chain, tmp_path: Path, count: int = 6) -> tuple[SigningHost, SigningHost]:
    one, two = _host(tmp_path, "web-1"), _host(tmp_path, "web-2")
    chains = [_signing_chain(pg, one), _signing_chain(pg, two)]
    for n in range(count):
        chains[n % 2].append(CANARY, receipt(n=n))
    return one, two


def test_the_owner_rewriting_a_host_signed_record_is_named_by_host_key_verification(
    pg: Chain, tmp_path: Path
) -> None:
    one, two = _two_host_chain(pg, tmp_path)
    hosts = _host_keys(tmp_path / "hosts.json", one, two)
    _owner_rewrite(pg, 2, {"n": 99}, fleet_key=_fleet_key(pg))
    lines = _lines(pg.chain())
    assert json.loads(lines[2])["receipt"]["n"] == 99
    done = _verify(lines, tmp_path, "--host-keys", hosts, "--format", "json")
    assert done.returncode == 1, done.stdout
    errors = json.loads(done.stdout)["integrity_errors"]
    # The altered record, and every later one (its prev changed), no longer verify.
    assert {e["seq"] for e in errors} == {2, 3, 4, 5}
    assert "signature of host web-1" in errors[0]["reason"]
    assert "does not verify" in errors[0]["reason"]


def test_the_owner_turning_host_signed_records_into_hmac_records_is_unverified(
    pg: Chain, tmp_path: Path
) -> None:
    one, two = _two_host_chain(pg, tmp_path)
    hosts = _host_keys(tmp_path / "hosts.json", one, two)
    _owner_rewrite(pg, 2, {"n": 99}, fleet_key=_fleet_key(pg), to_hmac=True)
    done = _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts)
    assert done.returncode == 1
    assert "seq 2: unverified: an HMAC record, and no chain key" in done.stdout
    # Given the fleet key too, the auditor accepts the fleet key's records, and is told whose.
    both = _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts, "--key-file", pg.key_file)
    assert both.returncode == 0
    assert "fleet key (HMAC, any holder of the key, the owner included): 4 record(s)" in both.stdout


def test_a_record_the_owner_forges_under_a_hosts_key_id_fails(pg: Chain, tmp_path: Path) -> None:
    one, two = _two_host_chain(pg, tmp_path, count=3)
    hosts = _host_keys(tmp_path / "hosts.json", one, two)
    rows = _owner_rows(pg)
    head = rows[-1]
    forged = {**head, "seq": head["seq"] + 1, "prev": record_digest(_body(head)),
              "receipt": canonical_json(receipt(n=1000))}  # fmt: skip
    forged["receipt_id"] = record_digest(forged["receipt"].encode("utf-8"))
    kid = rows[0]["mac"].split(":")[1]  # web-1's key id, as its records show it
    forged["mac"] = f"ed25519:{kid}:" + "ab" * 64
    _owner_write(pg, [forged], new=True)
    done = _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts)
    assert done.returncode == 1
    assert "seq 3: the signature of host web-1" in done.stdout


def test_a_record_signed_by_a_host_the_auditor_does_not_list_fails(
    pg: Chain, tmp_path: Path
) -> None:
    one, two = _two_host_chain(pg, tmp_path, count=2)
    stranger = _host(tmp_path, "stranger")
    _signing_chain(pg, stranger).append(CANARY, receipt(n=2))
    hosts = _host_keys(tmp_path / "hosts.json", one, two)
    done = _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts)
    assert done.returncode == 1
    assert "seq 2: signed by key id" in done.stdout
    assert "do not list: unverified, no key for it" in done.stdout


def test_an_honest_two_host_chain_is_proven_naming_each_records_host(
    pg: Chain, tmp_path: Path
) -> None:
    one, two = _two_host_chain(pg, tmp_path)
    hosts = _host_keys(tmp_path / "hosts.json", one, two)
    lines = _lines(pg.chain())
    assert all(json.loads(line)["mac"].startswith("ed25519:") for line in lines)
    assert all(len(json.loads(line)) == 8 for line in lines)  # the export line is unchanged
    text = _verify(lines, tmp_path, "--host-keys", hosts)
    assert text.returncode == 0, text.stdout
    assert "authenticated: every record's host signature verified" in text.stdout
    assert "web-1: 3 record(s)" in text.stdout and "web-2: 3 record(s)" in text.stdout
    documents = [
        json.loads(_verify(lines, tmp_path, "--host-keys", hosts, "--json", tool=tool).stdout)
        for tool in (FLOORCTL, FLOORGUARD)
    ]
    assert documents[0] == documents[1]
    document = documents[0]
    assert document["proven"] is True
    assert document["authenticated_by"] == "host-signatures"
    assert document["hosts"] == {"web-1": 3, "web-2": 3}
    assert [w["host"] for w in document["writers"]] == ["web-1", "web-2"] * 3
    assert [(w["first_seq"], w["last_seq"]) for w in document["writers"]] == [
        (n, n) for n in range(6)
    ]


def test_a_signing_host_needs_no_fleet_key(pg: Chain, tmp_path: Path) -> None:
    host = _host(tmp_path, "web-1")
    chain = _signing_chain(pg, host)
    chain.append(CANARY, receipt())
    chain.append(CANARY, receipt())
    assert not (host.home / "no-fleet.key").exists()
    assert chain.head() is not None and chain.head().mac.startswith("ed25519:")  # type: ignore[union-attr]


# --- the host's key file --------------------------------------------------------------------------


def test_a_host_key_file_group_or_others_may_read_is_refused(pg: Chain, tmp_path: Path) -> None:
    host = _host(tmp_path, "web-1")
    host.private.chmod(0o640)
    with pytest.raises(KeyFileError, match="accessible by group or others"):
        _signing_chain(pg, host).append(CANARY, receipt())
    assert pg.chain().head() is None


@pytest.mark.parametrize(
    "problem", ["missing", "unreadable", "public key", "rsa", "a folder", "empty", "blank"]
)
def test_an_unusable_host_key_refuses_the_spawn_and_never_falls_back_to_hmac(
    pg: Chain, tmp_path: Path, problem: str
) -> None:
    host = _host(tmp_path, "web-1")
    key = host.private
    if problem == "missing":
        key = tmp_path / "nowhere.key"
    elif problem == "unreadable":
        key = host.private / "inner"  # a file where a folder should be (root reads any mode)
    elif problem == "public key":
        key = host.public
        key.chmod(0o600)
    elif problem == "rsa":
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )  # fmt: skip
        key = tmp_path / "rsa.key"
        key.write_bytes(pem)
        key.chmod(0o600)
    elif problem == "a folder":
        key = tmp_path
    spawner = Host(tmp_path / "h", {"aider": floor("0.60.0")})
    # The fleet key is there too: an unusable host key must not fall back to it.
    result = spawner.preflight("aider", version="0.70.0", FLOORGUARD_CHAIN_URL=pg.url,
                               FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                               FLOORGUARD_HOST_KEY_FILE={"empty": "", "blank": " \t"}.get(
                                   problem, str(key)))  # fmt: skip
    assert result["raised"] == "SpawnRefused", result
    assert (
        "host key file" in result["message"]
        or "HOST_KEY_FILE is set but empty" in result["message"]
    )
    assert pg.chain().head() is None


def test_floorctl_keygen_makes_a_key_a_host_signs_with(pg: Chain, tmp_path: Path) -> None:
    done = subprocess.run([*FLOORCTL, "keygen", "--out", str(tmp_path / "k"), "--json"],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    made = json.loads(done.stdout)
    host = SigningHost("web-1", tmp_path / "web-1", Path(made["private_key"]),
                       Path(made["public_key"]))  # fmt: skip
    record = _signing_chain(pg, host).append(CANARY, receipt())
    # The record names the key by the first 16 hex digits of keygen's keyid.
    assert record.mac.split(":")[1] == made["keyid"][:16]
    hosts = _host_keys(tmp_path / "hosts.json", host)
    assert _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts).returncode == 0


# --- the head check before an append --------------------------------------------------------------


def _unverified_heads(chain: AuditChain) -> list[dict[str, object]]:
    assert chain.views is not None
    lines = chain.views.refusals_path.read_text().splitlines()
    return [entry for entry in map(json.loads, lines) if entry["event"] == "unverified-head"]


def test_an_altered_signed_head_is_recorded_by_a_host_that_checks_it_and_appended_after(
    pg: Chain, tmp_path: Path
) -> None:
    # Refusing would hand any one host a switch that stops every other: a well-formed record
    # with a wrong signature is all it takes. The host records what it saw; the audit names
    # the record, which stays linked in the chain.
    one, two = _two_host_chain(pg, tmp_path, count=2)
    hosts = _host_keys(tmp_path / "hosts.json", one, two)
    _owner_rewrite(pg, 1, {"n": 99}, fleet_key=_fleet_key(pg))
    checking = _signing_chain(pg, one, FLOORGUARD_HOST_KEYS=str(hosts))
    checking.append(CANARY, receipt())
    (seen,) = _unverified_heads(checking)
    assert seen["seq"] == 1 and "web-2" in str(seen["message"])
    done = _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts)
    assert done.returncode == 1 and "seq 1: the signature of host web-2" in done.stdout


def test_a_host_records_its_own_last_record_altered_and_appends_after(
    pg: Chain, tmp_path: Path
) -> None:
    host = _host(tmp_path, "web-1")
    chain = _signing_chain(pg, host)
    chain.append(CANARY, receipt(n=0))
    _owner_rewrite(pg, 0, {"n": 99}, fleet_key=_fleet_key(pg))
    chain.append(CANARY, receipt(n=1))
    (seen,) = _unverified_heads(chain)
    assert seen["seq"] == 0 and "this host's key" in str(seen["message"])
    hosts = _host_keys(tmp_path / "hosts.json", host)
    done = _verify(_lines(pg.chain()), tmp_path, "--host-keys", hosts)
    assert done.returncode == 1 and "seq 0" in done.stdout


def test_a_local_chain_refuses_to_append_after_its_own_record_was_altered(
    tmp_path: Path,
) -> None:
    # A chain only this host writes has no other writer to be stopped by a refusal.
    host = _host(tmp_path, "web-1")
    env = isolated_env(tmp_path / "local", FLOORGUARD_HOST_KEY_FILE=str(host.private))
    chain = AuditChain.from_env(env)
    chain.append(CANARY, receipt(n=0))
    chain.close()
    execute(chain.db_path, "UPDATE records SET receipt = replace(receipt, '\"n\":0', '\"n\":9')")
    with pytest.raises(ChainWriteError, match=r"cannot append to .*last record \(seq 0\)"):
        AuditChain.from_env(env).append(CANARY, receipt(n=1))


def test_a_head_whose_mac_has_neither_form_refuses_the_append(pg: Chain, tmp_path: Path) -> None:
    host = _host(tmp_path, "web-1")
    _signing_chain(pg, host).append(CANARY, receipt())
    rows = _owner_rows(pg)
    rows[0]["mac"] = "ed25519:zz"
    _owner_write(pg, rows)
    with pytest.raises(ChainWriteError, match="neither an HMAC nor a host signature"):
        _signing_chain(pg, host).append(CANARY, receipt())


# --- moving a chain from the fleet key to host keys -----------------------------------------------


def _mixed_chain(pg: Chain, tmp_path: Path) -> SigningHost:
    """Two HMAC records (the fleet key), then two signed by web-1, then one HMAC record of a
    host not moved yet."""
    host = _host(tmp_path, "web-1")
    fleet, signing = pg.chain(), _signing_chain(pg, host)
    fleet.append(CANARY, receipt(n=0))
    fleet.append(CANARY, receipt(n=1))
    signing.append(CANARY, receipt(n=2))  # accepts the HMAC head it cannot check
    signing.append(CANARY, receipt(n=3))
    fleet.append(CANARY, receipt(n=4))  # an HMAC host accepts a signed head by its form
    return host


def test_a_chain_moving_to_host_keys_needs_both_keys_to_be_proven(
    pg: Chain, tmp_path: Path
) -> None:
    host = _mixed_chain(pg, tmp_path)
    hosts = _host_keys(tmp_path / "hosts.json", host)
    lines = _lines(pg.chain())
    assert [json.loads(line)["mac"][:8] == "ed25519:" for line in lines] == [
        False, False, True, True, False
    ]  # fmt: skip
    only_hosts = _verify(lines, tmp_path, "--host-keys", hosts)
    assert only_hosts.returncode == 1
    assert {line.split(":")[0] for line in only_hosts.stdout.splitlines()[1:]} == {
        "seq 0", "seq 1", "seq 4"
    }  # fmt: skip
    only_fleet = _verify(lines, tmp_path, "--key-file", pg.key_file)
    assert only_fleet.returncode == 1
    assert "seq 2: unverified: signed by host key" in only_fleet.stdout
    both = _verify(lines, tmp_path, "--key-file", pg.key_file, "--host-keys", hosts, "--json")
    assert both.returncode == 0, both.stdout
    document = json.loads(both.stdout)
    assert document["authenticated_by"] == "mac+host-signatures"
    assert document["hosts"] == {"web-1": 2}
    assert [(w["first_seq"], w["last_seq"], w["host"]) for w in document["writers"]] == [
        (0, 1, None), (2, 3, "web-1"), (4, 4, None)
    ]  # fmt: skip


def test_checkpoints_and_projections_verify_signed_records_with_the_hosts_keys(
    pg: Chain, tmp_path: Path
) -> None:
    from floorguard._proofs import checkpoint
    from floorguard._proofs.canary import chain_projection
    from floorguard.errors import VerificationError

    host = _mixed_chain(pg, tmp_path)
    hosts = _host_keys(tmp_path / "hosts.json", host)
    # Without the hosts' keys the signed records cannot be checked: nothing is signed.
    with pytest.raises(VerificationError, match="seq 2: unverified"):
        checkpoint.of_chain(pg.chain())
    with pytest.raises(VerificationError, match="seq 2: unverified"):
        chain_projection(pg.chain())
    auditor = pg.chain(FLOORGUARD_HOST_KEYS=str(hosts))
    assert checkpoint.of_chain(auditor).size == 5
    assert chain_projection(auditor) == {}
    _owner_rewrite(pg, 3, {"n": 99}, fleet_key=_fleet_key(pg))
    with pytest.raises(VerificationError, match="seq 3: the signature of host web-1"):
        checkpoint.of_chain(auditor)


# --- SQLite ---------------------------------------------------------------------------------------


def test_host_signatures_work_on_a_sqlite_chain(tmp_path: Path) -> None:

    host = _host(tmp_path, "laptop")
    env = isolated_env(tmp_path / "state", FLOORGUARD_HOST_KEY_FILE=str(host.private))
    chain = AuditChain.from_env(env)
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    assert not chain.key_file.exists()  # no HMAC key is made for a signing host
    hosts = _host_keys(tmp_path / "hosts.json", host)
    lines = _lines(chain)
    done = _verify(lines, tmp_path, "--host-keys", hosts)
    assert done.returncode == 0, done.stdout
    assert "laptop: 3 record(s)" in done.stdout


def test_a_host_holding_another_fleet_key_is_refused_after_a_signed_head(
    pg: Chain, tmp_path: Path
) -> None:
    # A signed head says nothing of the fleet key: the chain's check value does.
    _signing_chain(pg, _host(tmp_path, "web-1")).append(CANARY, receipt())
    wrong = tmp_path / "wrong.key"
    wrong.write_text(os.urandom(32).hex() + "\n")
    wrong.chmod(0o600)
    env = pg.env(tmp_path / "web-2")
    env["FLOORGUARD_CHAIN_KEY_FILE"] = str(wrong)
    macing = AuditChain.from_env(env)
    with pytest.raises(ChainWriteError, match="is not the chain's key"):
        macing.append(CANARY, receipt())
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    pg.chain().append(CANARY, receipt())  # the fleet's own key still appends
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "2"


def test_a_chain_built_without_the_hosts_files_appends_after_a_head_that_does_not_verify(
    pg: Chain, tmp_path: Path
) -> None:
    # The library's own AuditChain(store, key) has no chain-view to record in: it logs, and
    # still does not hand the head's writer a switch that stops it.
    pg.chain().append(CANARY, receipt(n=0))
    _owner_rewrite(pg, 0, {"n": 99}, fleet_key=bytes(32))  # a MAC no fleet key makes
    bare = AuditChain(store_from_env(pg.env(tmp_path / "bare")), pg.key_file)
    assert bare.views is None
    bare.append(CANARY, receipt(n=1))
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "2"
