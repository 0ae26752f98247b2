"""Third outside review of issue 10 (round-2 fixes): ways around the map-change check, the
waiver margin, and what nobody tried yet.

Every test runs the real runtime in a host process (a private copy of floorguard with its
own floor_map.py), the real ``floorctl`` CLI in subprocesses and the real audit chain. Each
one fails while the attack succeeds.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.advisory_maps import advisory, entry, extended_module, span, waiver
from helpers.cli import floorctl
from helpers.races import preflight_across, spawn_after_update
from hosts import HOST, Host, write_script

from floorguard._time import format_ts, utc_now

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

AIDER_FEED = {
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


# --- 1. the map-change check is skipped for an adapter the old map did not track ----------
#
# Fix (b) refuses when active_map.current()'s hash changed between reading the map and
# judging, but gate._judge_opened returns UNTRACKED (allowed) *before* that check. A refresh
# that starts tracking aider (its first advisory) while an aider spawn is being probed does
# not stop that spawn: it is allowed as untracked, with its record after the floor update
# that made 2.0.1 affected.


def test_an_advisory_added_while_an_untracked_binary_is_probed_is_not_ignored(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map("# floor-map:begin\n# floor-map:end\n")
    project = tmp_path / "project"
    project.mkdir()
    gptme = {"gptme": {**AIDER_FEED["adapters"]["aider"]}}  # type: ignore[dict-item]
    first = {"schema_version": 3, "adapters": gptme}
    (project / "first.json").write_text(json.dumps(first))
    both = {"schema_version": 3, "adapters": {**gptme, **AIDER_FEED["adapters"]}}
    (project / "feed.json").write_text(json.dumps(both))
    home = {"FLOORGUARD_HOME": str(host.home)}
    state = tmp_path / "state"
    started = floorctl("refresh", "--feed", "first.json", "--module", str(host.map_file),
                       "--write", "--anchor", cwd=project, state=state, **home)  # fmt: skip
    assert started.returncode == 0, started.stderr  # aider untracked
    decision, tracked = preflight_across(
        host, tmp_path, "aider", "aider 2.0.1",
        lambda: floorctl("refresh", "--feed", "feed.json", "--module", str(host.map_file),
                         "--write", "--anchor", cwd=project, state=state, **home),
    )  # fmt: skip
    assert tracked.returncode == 0, tracked.stderr
    update, spawned = spawn_after_update(host)
    assert spawned > update, decision  # decided after aider 2.0.1 became affected
    # verify chain proves it (the record pins the old map), though the map in force at that
    # point of the chain tracked aider and made 2.0.1 affected.
    from helpers.advisory_maps import verify_chain

    proof = verify_chain(host, tmp_path, [])
    assert decision["verdict"] == "refuse", (decision, proof.get("proven"))


# --- 2. the doctor shows as waived a version the gate refuses ------------------------------
#
# Fix (b) makes the gate ask a waiver to hold WAIVER_MARGIN (120 s) past the decision, but
# doctor.examine still judges waivers at the bare moment: in a waiver's last two minutes the
# doctor reports aider 2.0.1 "waived" (exit 0) while every spawn of it is refused. The
# verdict module's promise is "one rule decides everywhere".


def test_doctor_agrees_with_the_gate_in_a_waivers_last_two_minutes(tmp_path: Path) -> None:
    expires = format_ts(utc_now() + dt.timedelta(seconds=60))
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
    aider = write_script(bin_dir / "aider", "echo 'aider 2.0.1'")
    request = json.dumps({"adapter": "aider", "binary": str(aider), "version": None})
    spawn = subprocess.run(
        [sys.executable, "-c", HOST, request], env=host.env(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert spawn.returncode == 0, spawn.stderr
    assert json.loads(spawn.stdout)["verdict"] == "refuse", spawn.stdout
    done = host.python("-m", "floorguard", "doctor", "--json", PATH=str(bin_dir))
    document = json.loads(done.stdout)
    (posture,) = [a for a in document["adapters"] if a["adapter"] == "aider"]
    assert posture["status"] != "waived", (posture, "the gate refuses this version now")
