"""Second outside review of issue 10, run-time side: ways around the fixes of the first review
(waivers judged after the probe and proven at the receipt's time; npm CLIs always judged by
SemVer), and what nobody tried yet.

Every test runs the real runtime in a host process (a private copy of floorguard with its
own floor_map.py), the real ``floorctl`` CLI in subprocesses and the real audit chain (read
with plain sqlite3). Each one fails while the attack succeeds.
"""

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
from hosts import Host, write_script

from floorguard._time import format_ts, parse_ts, utc_now

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

# --- 1. a waiver that expires while the gate waits for the chain still waives ---------------
#
# Fix (4) takes the judging moment after detection and stamps the receipt with it, but the
# decision only takes effect once its record is durable, and the append waits for the chain's
# write lock for up to 30 s (BUSY_TIMEOUT_SECONDS) after that moment. Any other writer (a
# doctor, a canary, another spawn, a chain maintenance command) holding the lock lets a waiver
# that expired meanwhile still waive: the spawn is allowed after the expiry, its record is
# stamped after the expiry, and verify chain says PROVEN because the receipt's time is only
# required to be "not after" the record's. The same gap opens when the wall clock steps back
# (the chain's time never does), so a receipt may even predate the record before it.

HOLD_LOCK = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def test_a_waiver_that_expires_while_the_decision_waits_for_the_chain_does_not_waive(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "host", {})
    aider = write_script(tmp_path / "aider", "echo 'aider 2.0.1'")
    # A first decision creates the chain (and its key) under a map without the waiver.
    plain = {"aider": entry("PyPI", advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")))}
    host.set_map(extended_module(plain))
    assert host.preflight("aider", binary=str(aider))["verdict"] == "refuse"

    expires = format_ts(utc_now() + dt.timedelta(seconds=4))
    entries = {
        "aider": entry(
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
        decision = host.preflight("aider", binary=str(aider))
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


# --- 2. the doctor judges a waiver before it probes ------------------------------------------
#
# Fix (4) moved the gate's judging moment after detection; the doctor still takes its moment
# before resolving and probing each adapter (doctor.examine). A waiver that expires during the
# probe is shown as "waived" (healthy, exit 0) in a posture receipt stamped after the expiry.
# "The doctor shows waived adapters and the days left" and "Doctor ... use the same rule".


def test_doctor_does_not_show_a_waiver_that_expired_during_its_probe_as_waived(
    tmp_path: Path,
) -> None:
    expires = format_ts(utc_now() + dt.timedelta(seconds=4))
    entries = {
        "aider": entry(
            "PyPI",
            advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")),
            waivers=(waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=expires),),
        )
    }
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir / "aider", "/bin/sleep 8; echo 'aider 2.0.1'")
    done = host.python(
        "-m", "floorguard", "doctor", "--json", PATH=str(bin_dir), FLOORGUARD_PROBE_TIMEOUT="60"
    )
    document = json.loads(done.stdout)
    (aider,) = [a for a in document["adapters"] if a["adapter"] == "aider"]
    (record,) = host.chain_records()
    assert parse_ts(record["receipt"]["ts"]) > parse_ts(expires)
    # The posture is sealed after the waiver expired: aider 2.0.1 is affected, not waived.
    assert aider["status"] == "affected", (aider, record["receipt"]["ts"], expires)
    assert done.returncode == 1, done.stdout


# --- 3. a feed's stated ecosystem turns an npm CLI's printed version into PEP 440 ------------
#
# Fix (2) makes an entry without a stated ecosystem take the catalog's. An entry that states
# the other one is believed over the catalog: a schema-3 feed (hand-written, or an import
# with --package PyPI:...=claude) saying claude is "PyPI" is refreshed without a word, and
# the runtime then reads what the npm binary prints by PEP 440. ``1.0.20-0`` (what
# ``npm version prerelease`` makes: a SemVer pre-release *below* 1.0.20) becomes the post
# release 1.0.20.post0, *above* the fix, and is permitted, certified by the canary and
# proven. "No npm version is ever translated into PEP 440" (issue 10, item 4).

PYPI_CLAUDE_FEED = {
    "schema_version": 3,
    "adapters": {
        "claude": {
            "ecosystem": "PyPI",
            "advisories": [
                {
                    "id": "GHSA-cccc-dddd-eeee",
                    "aliases": [],
                    "summary": "Remote code execution through a crafted prompt.",
                    "affected": [{"introduced": "0", "fixed": "1.0.20"}],
                }
            ],
        }
    },
}


def test_a_feed_cannot_make_the_runtime_read_an_npm_cli_version_as_pep440(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map("# floor-map:begin\n# floor-map:end\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "feed.json").write_text(json.dumps(PYPI_CLAUDE_FEED))
    refreshed = floorctl(
        "refresh", "--feed", "feed.json", "--module", str(host.map_file), "--write",
        cwd=project, state=tmp_path / "state",
    )  # fmt: skip
    # Refresh refuses the contrary ecosystem, naming the catalog...
    assert refreshed.returncode == 1, refreshed.stderr
    assert "claude is an npm CLI in floorguard's catalog" in refreshed.stderr
    # ...and a map written by other means (by hand, with its hash restated) still gets the
    # catalog's order at run time.
    stated_pypi = {
        "claude": entry("PyPI", advisory("GHSA-cccc-dddd-eeee", span("0", fixed="1.0.20")))
    }
    host.set_map(extended_module(stated_pypi))
    claude = write_script(tmp_path / "claude", "echo '1.0.20-0 (Claude Code)'")
    decision = host.preflight("claude", binary=str(claude))
    assert decision["version"] == "1.0.20-0"
    # SemVer: 1.0.20-0 < 1.0.20, inside GHSA-cccc-dddd-eeee.
    assert decision["verdict"] == "refuse", decision


# --- 4. a time past year 9999 in UTC crashes the proof and the tools with a traceback --------
#
# floorguard._time.parse_ts turns an offset time into UTC with ``astimezone``, which raises
# OverflowError (not FloorguardError) for ``9999-12-31T23:59:59-23:59``: a valid RFC 3339
# string whose UTC moment is in year 10000. Every caller catches FloorguardError only, so a
# hostile chain slice (a receipt's ts; verify chain, with or without the key), a waivers
# document (a waiver's expires), a feed (expires) or an OSV record (modified) ends the
# command with a Python traceback instead of an error naming the file and the JSON path.

OUT_OF_RANGE = "9999-12-31T23:59:59-23:59"


def _hostile_slice(tmp_path: Path) -> tuple[Path, Host]:
    host = Host(tmp_path / "host", {})
    entries = {
        "aider": entry("PyPI", advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")))
    }
    host.set_map(extended_module(entries))
    assert host.preflight("aider", version="2.0.1")["verdict"] == "refuse"
    exported = floorctl("chain", "export", "--out", "slice.jsonl", cwd=tmp_path,
                        state=tmp_path / "state", FLOORGUARD_HOME=str(host.home))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    from floorguard._canonical import content_address

    (record,) = [json.loads(line) for line in (tmp_path / "slice.jsonl").read_text().splitlines()]
    record["receipt"]["ts"] = OUT_OF_RANGE
    record["receipt_id"] = content_address(record["receipt"])
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n")
    return hostile, host


def test_verify_chain_reports_an_out_of_range_receipt_time_without_a_traceback(
    tmp_path: Path,
) -> None:
    hostile, host = _hostile_slice(tmp_path)
    for how in (["--unauthenticated"], ["--key-file", str(host.home / "chain.key")]):
        done = floorctl("verify", "chain", str(hostile), *how, cwd=tmp_path,
                        state=tmp_path / "state")  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr[-600:]
        assert done.returncode == 1 and "NOT PROVEN" in done.stdout, (done.stdout, done.stderr)


def test_tools_refuse_an_out_of_range_time_naming_the_file_not_with_a_traceback(
    tmp_path: Path,
) -> None:
    (tmp_path / "waivers.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "waivers": [
                    {
                        "id": "WVR-0001",
                        "adapter": "aider",
                        "version": "2.0.1",
                        "advisories": ["GHSA-wwww-wwww-wwww"],
                        "reason": "reviewed",
                        "approved_by": "security team",
                        "expires": OUT_OF_RANGE,
                    }
                ],
            }
        )
    )
    (tmp_path / "feed.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "feed_id": "acme",
                "version": 1,
                "published": "2026-01-01T00:00:00Z",
                "expires": OUT_OF_RANGE,
                "adapters": {
                    "aider": {
                        "min_safe_version": "0.60.0",
                        "advisory_id": "BSA-0001",
                        "note": "Upgrade.",
                    }
                },
            }
        )
    )
    records = tmp_path / "osv"
    records.mkdir()
    (records / "GHSA-abcd-abcd-abcd.json").write_text(
        json.dumps(
            {
                "schema_version": "1.6.0",
                "id": "GHSA-abcd-abcd-abcd",
                "modified": OUT_OF_RANGE,
                "summary": "s",
                "aliases": [],
                "affected": [
                    {
                        "package": {"ecosystem": "PyPI", "name": "aider-chat"},
                        "ranges": [
                            {
                                "type": "ECOSYSTEM",
                                "events": [{"introduced": "0"}, {"fixed": "2.1.3"}],
                            }
                        ],
                    }
                ],
            }
        )
    )
    commands = {
        "waivers.json": ("validate", "waivers.json"),
        "feed.json": ("validate", "feed.json"),
        "GHSA-abcd-abcd-abcd.json": ("import", "osv", "osv", "--out", "out.json"),
    }
    for named, args in commands.items():
        done = floorctl(*args, cwd=tmp_path, state=tmp_path / "state")
        assert "Traceback" not in done.stderr, (args, done.stderr[-600:])
        assert done.returncode in (1, 2) and named in done.stderr, (args, done.stderr)


# --- 5. a waiver revoked by a refresh still waives a spawn decided after the revocation -----
#
# Fix (4) moved the judging *moment* after the probe, but the *map* is still read before it
# (gate.judge reads active_map.current() first, then identifies and probes). A security team
# revoking a waiver with ``floorctl refresh --write --anchor`` (no --waivers: the map keeps none)
# while a spawn is being probed does not stop it: the spawn is waived by the revoked waiver,
# its chain record comes *after* the floor-update record that removed the waiver, and verify
# chain says PROVEN (it judges the map the record pins, not the map in force at that point of
# the chain). Issue 10: "a waiver removed by a later refresh" is a refusal, and "the window
# proof accepts a waived spawn only if the map in force then carried that waiver".

WAIVED_FEED = {
    "schema_version": 3,
    "adapters": {
        "aider": {
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
                        "adapter": "aider",
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
        host, tmp_path, "aider", "aider 2.0.1",
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
