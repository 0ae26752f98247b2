"""Outside review of issue 10, run-time side: ways the gate, the canary and the window proof
let through what the promises say must be refused.

Every test runs the real runtime in a host process (a private copy of floorguard with its
own floor_map.py), the real ``floorctl`` CLI in subprocesses and the real audit chain.
Each one fails while the attack succeeds.
"""

from __future__ import annotations

import datetime as dt
import json
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
from hosts import Host, floor, write_script

from floorguard._time import format_ts, parse_ts, utc_now

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

# --- 1. amp's "-g<hex>" SemVer pre-release is rewritten into "+g<hex>" build metadata --------
#
# For an npm entry, 0.0.1755000000-g1234abc is a SemVer pre-release of 0.0.1755000000 (below
# it); the catalog's git-suffix rewrite turns it into 0.0.1755000000+g1234abc, which SemVer
# orders *equal* to the release. An advisory fixed at the release, listing the very version
# the binary prints, then permits it. "No npm version is ever translated" (issue 10, item 4);
# "Detection keeps a version exactly as printed" (README, Decisions).

AMP_PRINTED = "0.0.1755000000-g1234abc"
AMP_ADVISORY = advisory(
    "GHSA-ampa-ampa-ampa", span("0", fixed="0.0.1755000000"), versions=(AMP_PRINTED,)
)


def test_amp_prerelease_printed_by_the_binary_is_judged_as_printed_in_semver(
    tmp_path: Path,
) -> None:
    entries = {"amp": entry("npm", AMP_ADVISORY)}
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    amp = write_script(tmp_path / "amp", f"echo '{AMP_PRINTED}'")
    probed = host.preflight("amp", binary=str(amp))
    stated = host.preflight("amp", version=AMP_PRINTED)
    for decision in (probed, stated):
        # The advisory lists exactly this version, and SemVer puts it below the fix.
        assert decision["verdict"] == "refuse", decision
        assert decision["version"] == AMP_PRINTED, decision
    assert verify_chain(host, tmp_path, [entries])["proven"] is True


# --- 2. an npm adapter under a floor-only (schema 1/2) entry is judged by PEP 440 ------------
#
# claude is an npm CLI (the catalog says so). "1.0.20-0" (what `npm version prerelease`
# makes) is a SemVer pre-release *below* 1.0.20; PEP 440 reads it as the post-release
# 1.0.20.post0, *above* the floor. The shipped map is floor-only, so every npm adapter in it
# is judged this way: the pre-release of the floor is permitted, certified by the canary and
# proven. Issue 10 item 4: "versions of an npm adapter compare by SemVer 2.0.0 precedence
# ... No npm version is ever translated into PEP 440".


def test_npm_prerelease_of_the_floor_is_not_permitted_as_a_pep440_post_release(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "host", {"claude": floor("1.0.20", "BSA-0002")})
    claude = write_script(tmp_path / "claude", "echo '1.0.20-0 (Claude Code)'")
    decision = host.preflight("claude", binary=str(claude))
    assert decision["version"] == "1.0.20-0"
    assert decision["verdict"] == "refuse", decision


def test_canary_does_not_certify_an_npm_prerelease_of_the_floor(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {"claude": floor("1.0.20", "BSA-0002")})
    env = {"PYTHONPATH": str(host.site), "FLOORGUARD_HOME": str(host.home)}
    done = floorctl(
        "canary", "record", "--adapter", "claude", "--version", "1.0.20-1", "--result", "pass",
        "--json", cwd=tmp_path, state=tmp_path / "state", **env,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    green = floorctl("canary", "last-green", "--json", cwd=tmp_path, state=tmp_path / "state",
                     **env)  # fmt: skip
    assert "claude" not in json.loads(green.stdout or "{}"), green.stdout


# --- 3. a waiver of "floor" also waives an advisory whose alias is "floor" --------------------
#
# "floor" is a valid advisory-id form, so a feed (or an OSV record) may give an advisory the
# alias (or id) "floor". A waiver reviewed and approved for the below-floor refusal only
# (advisories: ["floor"]) then also covers that advisory: refresh accepts it, and the runtime
# waives a version the advisory affects. A waiver must cover only the advisories it lists.

ALIASED_FEED = {
    "schema_version": 3,
    "adapters": {
        "claude": {
            "ecosystem": "npm",
            "min_safe_version": "1.0.20",
            "advisory_id": "BSA-0002",
            "note": "Upgrade.",
            "advisories": [
                {
                    "id": "GHSA-aaaa-bbbb-cccc",
                    "aliases": ["floor"],
                    "summary": "Remote code execution through a crafted prompt.",
                    "affected": [{"introduced": "0", "fixed": "1.4.7"}],
                }
            ],
        }
    },
}
FLOOR_ONLY_WAIVER = {
    "schema_version": 1,
    "waivers": [
        {
            "id": "WVR-0001",
            "adapter": "claude",
            "version": "1.0.10",
            "advisories": ["floor"],
            "reason": "the example floor only; reviewed",
            "approved_by": "security team",
            "expires": "2099-01-01T00:00:00Z",
        }
    ],
}


def test_a_waiver_of_the_floor_does_not_waive_an_advisory_aliased_floor(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map("# floor-map:begin\n# floor-map:end\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "feed.json").write_text(json.dumps(ALIASED_FEED))
    (project / "waivers.json").write_text(json.dumps(FLOOR_ONLY_WAIVER))
    refreshed = floorctl(
        "refresh", "--feed", "feed.json", "--waivers", "waivers.json", "--module",
        str(host.map_file), "--write", cwd=project, state=tmp_path / "state",
    )  # fmt: skip
    if refreshed.returncode != 0:
        return  # refusing the feed or the waiver is a fix too
    decision = host.preflight("claude", version="1.0.10")
    # 1.0.10 is inside GHSA-aaaa-bbbb-cccc, which the waiver does not list.
    assert decision["verdict"] == "refuse", decision


# --- 4. the waiver's expiry is judged before the probe, not when the decision is made ---------
#
# The gate takes its moment before identifying and probing the binary; a probe may take up
# to FLOORGUARD_PROBE_TIMEOUT. A waiver that expires meanwhile still waives: the spawn is
# allowed after the expiry, its receipt is back-dated to the judging moment, its chain record
# is stamped after the expiry, and verify chain (which judges at the record's time) says NOT
# PROVEN about a decision the gate made itself.


def test_a_waiver_that_expires_while_the_binary_is_probed_does_not_waive(tmp_path: Path) -> None:
    expires = format_ts(utc_now() + dt.timedelta(seconds=5))
    entries = {
        "aider": entry(
            "PyPI",
            advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")),
            waivers=(waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=expires),),
        )
    }
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    aider = write_script(tmp_path / "aider", "sleep 10; echo 'aider 2.0.1'")
    decision = host.preflight("aider", binary=str(aider), FLOORGUARD_PROBE_TIMEOUT="60")
    (record,) = host.chain_records()
    if decision["verdict"] == "waived":
        assert parse_ts(record["ts"]) < parse_ts(expires), (
            f"waived by WVR-0001 (expired {expires}) in a decision recorded at {record['ts']}"
        )
    assert verify_chain(host, tmp_path, [entries])["proven"] is True
