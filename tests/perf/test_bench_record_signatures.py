"""Benchmarks of host-signed records (run with ``-m perf``; excluded from the default run).

- Signing and checking one record body: Ed25519 against HMAC-SHA256.
- A durable PostgreSQL append signed with a host key, against one MACed with the fleet key
  and a bare INSERT+COMMIT of the same row (interleaved, so all three see the same load).
- Verifying a slice: host signatures against MACs, per record.

The figures are printed (``-s`` shows them); the assertions allow for noisy shared machines.
"""

from __future__ import annotations

import hmac
import json
import statistics
import time
from pathlib import Path

import pgserver
import pytest
from helpers.bench_chain import SPAWN, _database, _receipt

from floorctl import keys
from floorguard._chain import record_signature
from floorguard._chain.chain import AuditChain
from floorguard._chain.record_signature import load_host_key, parse_host_keys
from floorguard._proofs.slice_verify import verify_slice

pytestmark = pytest.mark.perf

server = pytest.fixture(scope="module")(pgserver.provide)


def _per_op(action: object, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        action()  # type: ignore[operator]
    return (time.perf_counter() - started) / count


def test_bench_signing_a_record_body(tmp_path: Path) -> None:
    private, public = keys.generate(tmp_path / "k")
    host = load_host_key(private)
    listed = parse_host_keys(json.dumps({"hosts": {"web-1": public.read_text()}}).encode(), "b")
    body = b'{"chain_id":"' + b"a" * 32 + b'","receipt":' + b"x" * 700 + b"}"
    key = b"k" * 32
    mac = host.sign(body)
    sign = _per_op(lambda: host.sign(body), 5000)
    check = _per_op(lambda: listed.check(mac, body), 5000)
    hmac_sign = _per_op(lambda: hmac.digest(key, body, "sha256").hex(), 5000)
    print(
        f"\nper record body: Ed25519 sign {sign * 1e6:.1f} us, verify {check * 1e6:.1f} us; "
        f"HMAC-SHA256 {hmac_sign * 1e6:.1f} us"
    )
    assert record_signature.is_signature(mac)
    assert sign < 0.005 and check < 0.005


def test_bench_postgres_signed_append_against_mac_and_bare_insert(
    server: pgserver.PgServer, tmp_path: Path
) -> None:
    """One database per case, appends interleaved across them: MACed; signed by one host
    (its own head, which it knows); two signing hosts in turn with FLOORGUARD_HOST_KEYS
    (each append verifies the other host's head)."""
    import psycopg

    one, one_public = keys.generate(tmp_path / "one")
    two, two_public = keys.generate(tmp_path / "two")
    hosts = tmp_path / "hosts.json"
    hosts.write_text(
        json.dumps({"hosts": {"one": one_public.read_text(), "two": two_public.read_text()}})
    )
    mac_env = _database(server, tmp_path / "mac")
    signed_env = _database(server, tmp_path / "signed")
    pair_env = {**_database(server, tmp_path / "pair"), "FLOORGUARD_HOST_KEYS": str(hosts)}
    macs = AuditChain.from_env(mac_env)
    signs = AuditChain.from_env({**signed_env, "FLOORGUARD_HOST_KEY_FILE": str(one)})
    pair = [
        AuditChain.from_env({**pair_env, "FLOORGUARD_HOST_KEY_FILE": str(key)})
        for key in (one, two)
    ]
    macs.append(SPAWN, _receipt(0))
    head = macs.head()
    assert head is not None
    bare = psycopg.connect(mac_env["FLOORGUARD_CHAIN_URL"])
    row = (head.ts, head.chain_id, head.event, head.receipt_id, next(macs.export_lines()),
           head.prev, head.mac)  # fmt: skip
    timings: dict[str, list[float]] = {"mac": [], "signed": [], "pair": [], "bare": []}
    for n in range(1, 300):
        for name, chain in (("mac", macs), ("signed", signs), ("pair", pair[n % 2])):
            started = time.perf_counter()
            chain.append(SPAWN, _receipt(n))
            timings[name].append(time.perf_counter() - started)
        started = time.perf_counter()
        bare.execute("INSERT INTO bare VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", (n, *row))
        bare.commit()
        timings["bare"].append(time.perf_counter() - started)
    bare.close()
    median = {name: statistics.median(values) for name, values in timings.items()}
    print(
        f"\npostgres append (median): MACed {median['mac'] * 1e6:.0f} us; host-signed "
        f"{median['signed'] * 1e6:.0f} us; two signing hosts checking each other's head "
        f"{median['pair'] * 1e6:.0f} us; bare INSERT+COMMIT {median['bare'] * 1e6:.0f} us "
        f"(ratios to bare: {median['mac'] / median['bare']:.2f}x, "
        f"{median['signed'] / median['bare']:.2f}x, {median['pair'] / median['bare']:.2f}x)"
    )
    assert median["signed"] < 2 * median["mac"]


def test_bench_verifying_a_signed_slice_against_a_maced_one(tmp_path: Path) -> None:
    from helpers.cli import isolated_env

    count = 5000
    private, public = keys.generate(tmp_path / "host")
    signed = AuditChain.from_env(
        isolated_env(tmp_path / "s", FLOORGUARD_HOST_KEY_FILE=str(private))
    )
    maced = AuditChain.from_env(isolated_env(tmp_path / "m"))
    for n in range(count):
        signed.append(SPAWN, _receipt(n))
        maced.append(SPAWN, _receipt(n))
    listed = parse_host_keys(json.dumps({"hosts": {"web-1": public.read_text()}}).encode(), "b")
    key = bytes.fromhex(maced.key_file.read_text().strip())
    lines = {name: list(chain.export_lines()) for name, chain in (("s", signed), ("m", maced))}
    started = time.perf_counter()
    assert verify_slice(lines["s"], host_keys=listed).intact
    with_signatures = (time.perf_counter() - started) / count
    started = time.perf_counter()
    assert verify_slice(lines["m"], key=key).intact
    with_macs = (time.perf_counter() - started) / count
    print(
        f"\nverify per record: host signatures {with_signatures * 1e6:.1f} us, "
        f"MACs {with_macs * 1e6:.1f} us"
    )
