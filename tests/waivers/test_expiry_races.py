"""A waiver is judged at the moment of the decision, never earlier: one that expires, or is
revoked by a refresh, while the binary is probed or the decision waits for the chain does
not waive; the doctor agrees with the gate to the last minutes of a waiver. The real
runtime in a host process, the real CLI and audit chain (read with plain sqlite3). The
agent is a native goose (published as a native program: judged by its --version answer,
which the probe waits for), its versions ordered by PEP 440 as the map's entry says."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.advisory_maps import (
    advisory,
    entry,
    extended_module,
    span,
    verify_chain,
    waiver,
)
from helpers.cli import floorctl
from helpers.races import preflight_across, spawn_after_update
from hosts import HOST, Host, write_script

from floorguard._base._time import format_ts, parse_ts, utc_now

pytestmark = pytest.mark.attack


def test_a_waiver_that_expires_while_the_binary_is_probed_does_not_waive(tmp_path: Path) -> None:
    expires = format_ts(utc_now() + dt.timedelta(seconds=5))
    entries = {
        "goose": entry(
            "PyPI",
            advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")),
            waivers=(waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=expires),),
        )
    }
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    goose = write_script(tmp_path / "goose", "sleep 10; echo 'goose 2.0.1'")
    decision = host.preflight("goose", binary=str(goose), FLOORGUARD_PROBE_TIMEOUT="60")
    (record,) = host.chain_records()
    if decision["verdict"] == "waived":
        assert parse_ts(record["ts"]) < parse_ts(expires), (
            f"waived by WVR-0001 (expired {expires}) in a decision recorded at {record['ts']}"
        )
    assert verify_chain(host, tmp_path, [entries])["proven"] is True


HOLD_LOCK = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


WAIVED_FEED = {
    "schema_version": 3,
    "adapters": {
        "goose": {
            "ecosystem": "PyPI",
            "advisories": [
                {
                    "id": "GHSA-wwww-wwww-wwww",
                    "aliases": [],
                    "summary": "Remote code execution through a crafted prompt.",
                    "affected": [{"introduced": "2.0.0", "fixed": "2.1.3"}],
                }
            ],
        }
    },
}


def test_a_waiver_that_expires_while_the_decision_waits_for_the_chain_does_not_waive(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "host", {})
    goose = write_script(tmp_path / "goose", "echo 'goose 2.0.1'")
    # A first decision creates the chain (and its key) under a map without the waiver.
    plain = {"goose": entry("PyPI", advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")))}
    host.set_map(extended_module(plain))
    assert host.preflight("goose", binary=str(goose))["verdict"] == "refuse"

    expires = format_ts(utc_now() + dt.timedelta(seconds=4))
    entries = {
        "goose": entry(
            "PyPI",
            advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")),
            waivers=(waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=expires),),
        )
    }
    host.set_map(extended_module(entries))
    # Another writer holds the chain's write lock for 8 s (plain sqlite3, no floorguard code).
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(host.home / "chain.sqlite3"), "8"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        decision = host.preflight("goose", binary=str(goose))
    finally:
        holder.wait(timeout=60)
    allowed_at = utc_now()
    record = host.chain_records()[-1]
    if decision["verdict"] == "waived":
        proof = verify_chain(host, tmp_path, [plain, entries])
        assert parse_ts(record["ts"]) < parse_ts(expires), (
            f"waived by WVR-0001 (expired {expires}): the decision took effect at "
            f"{record['ts']} (allowed at {format_ts(allowed_at)}); verify chain: "
            f"proven={proof['proven']}"
        )
    assert decision["verdict"] == "refuse", decision


def test_doctor_does_not_show_a_waiver_that_expired_during_its_probe_as_waived(
    tmp_path: Path,
) -> None:
    expires = format_ts(utc_now() + dt.timedelta(seconds=4))
    entries = {
        "goose": entry(
            "PyPI",
            advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")),
            waivers=(waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=expires),),
        )
    }
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir / "goose", "/bin/sleep 8; echo 'goose 2.0.1'")
    done = host.python(
        "-m", "floorguard", "doctor", "--json", PATH=str(bin_dir), FLOORGUARD_PROBE_TIMEOUT="60"
    )
    document = json.loads(done.stdout)
    (goose,) = [a for a in document["adapters"] if a["adapter"] == "goose"]
    (record,) = host.chain_records()
    assert parse_ts(record["receipt"]["ts"]) > parse_ts(expires)
    # The posture is sealed after the waiver expired: goose 2.0.1 is affected, not waived.
    assert goose["status"] == "affected", (goose, record["receipt"]["ts"], expires)
    assert done.returncode == 1, done.stdout


def test_a_waiver_revoked_while_the_binary_is_probed_does_not_waive(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map("# floor-map:begin\n# floor-map:end\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "feed.json").write_text(json.dumps(WAIVED_FEED))
    (project / "waivers.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "waivers": [
                    {
                        "id": "WVR-0001",
                        "adapter": "goose",
                        "version": "2.0.1",
                        "advisories": ["GHSA-wwww-wwww-wwww"],
                        "reason": "reviewed",
                        "approved_by": "security team",
                        "expires": "2099-01-01T00:00:00Z",
                    }
                ],
            }
        )
    )
    home = {"FLOORGUARD_HOME": str(host.home)}
    state = tmp_path / "state"
    granted = floorctl("refresh", "--feed", "feed.json", "--waivers", "waivers.json", "--module",
                       str(host.map_file), "--write", "--anchor", cwd=project, state=state,
                       **home)  # fmt: skip
    assert granted.returncode == 0, granted.stderr
    decision, revoked = preflight_across(
        host, tmp_path, "goose", "goose 2.0.1",
        lambda: floorctl("refresh", "--feed", "feed.json", "--module", str(host.map_file),
                         "--write", "--anchor", cwd=project, state=state, **home),
    )  # fmt: skip
    assert revoked.returncode == 0, revoked.stderr
    revocation, spawned = spawn_after_update(host)
    assert spawned > revocation  # decided after the revocation was recorded
    proof = verify_chain(host, tmp_path, [])
    assert decision["verdict"] == "refuse", (decision, proof["proven"])
    (receipt,) = [
        r["receipt"]
        for r in host.chain_records()
        if r["event"] == "adapter.spawn_preflight_receipt"
    ]
    assert "floor map changed" in receipt["reason"]
    assert receipt["waiver_id"] is None  # the refusal carries no waiver


def test_doctor_agrees_with_the_gate_in_a_waivers_last_two_minutes(tmp_path: Path) -> None:
    expires = format_ts(utc_now() + dt.timedelta(seconds=60))
    entries = {
        "goose": entry(
            "PyPI",
            advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")),
            waivers=(waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=expires),),
        )
    }
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    goose = write_script(bin_dir / "goose", "echo 'goose 2.0.1'")
    request = json.dumps({"adapter": "goose", "binary": str(goose), "version": None})
    spawn = subprocess.run(
        [sys.executable, "-c", HOST, request], env=host.env(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert spawn.returncode == 0, spawn.stderr
    assert json.loads(spawn.stdout)["verdict"] == "refuse", spawn.stdout
    done = host.python("-m", "floorguard", "doctor", "--json", PATH=str(bin_dir))
    document = json.loads(done.stdout)
    (posture,) = [a for a in document["adapters"] if a["adapter"] == "goose"]
    assert posture["status"] != "waived", (posture, "the gate refuses this version now")
