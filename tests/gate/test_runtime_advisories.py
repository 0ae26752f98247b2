"""The runtime judges by the map's whole rule: floors, OSV ranges (backports), listed
versions, each ecosystem's order, and waivers that expire; decided by the real preflight in a
host process, on real binaries, sealed in the real chain and proven (or not) by verify chain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.advisory_maps import (
    LONG_AGO,
    advisory,
    entry,
    extended_module,
    map_hash,
    span,
    waiver,
)
from helpers.cli import floorctl
from helpers.proof_support import at
from hosts import Host, receipt_in_chain, write_script
from hypothesis import given
from hypothesis import strategies as st
from probes import aider_at, aider_install, node_cli_install

from floorguard._base._canonical import canonical_bytes

MANY = r"""
import dataclasses, json, os, sys
import floorguard
os.environ.pop("PYTHONPATH", None)  # (the host's own, for its copy of floorguard)
out = []
for request in json.loads(sys.argv[1]):
    try:
        d = floorguard.preflight(request["adapter"], binary=request["binary"])
        raised = None
    except floorguard.SpawnRefused as exc:
        d, raised = exc.decision, "SpawnRefused"
    out.append({"raised": raised, "allowed": d.allowed, **dataclasses.asdict(d)})
print(json.dumps(out))
"""

BACKPORT_PYPI = advisory(
    "GHSA-back-port-pypi", span("0", fixed="1.4.7"), span("2.0.0", fixed="2.1.3")
)
BACKPORT_NPM = advisory(
    "GHSA-back-port-npmx",
    span("0", fixed="1.4.7"),
    span("2.0.0-beta.1", fixed="2.1.3"),
    aliases=("CVE-2025-0001",),
)
NIGHTLY = advisory("GHSA-nigh-tly0-0000", span("0.4.0", fixed="0.5.0"))
# PEP 440 would read 0.6.0-preview.1 as 0.6.0rc1, after rc0: outside. SemVer: inside.
PREVIEW = advisory("GHSA-prev-iew0-0000", span("0.6.0-alpha.1", last_affected="0.6.0-rc.0"))


def install(folder: Path, adapter: str, version: str) -> Path:
    """``adapter`` at ``version`` as it is published: aider as pip installs it, gemini and
    qwen as npm does (the version in its package's metadata), claude and others as a native
    program printing the version."""
    if adapter == "aider":
        return aider_install(folder / "venv", version)
    packages = {"gemini": "@google/gemini-cli", "qwen": "@qwen-code/qwen-code"}
    if adapter in packages:
        return node_cli_install(folder, package=packages[adapter], bin_name=adapter,
                                version=version)  # fmt: skip
    line = {"claude": "{} (Claude Code)"}.get(adapter, "{}")
    folder.mkdir(parents=True, exist_ok=True)
    return write_script(folder / adapter, f"echo '{line.format(version)}'")


def decide(host: Host, tmp_path: Path, adapter: str, printed: list[str], **env: str) -> list[Any]:
    """One real preflight per version, each against its own install of that version."""
    requests = []
    for i, version in enumerate(printed):
        script = install(tmp_path / "bins" / f"{adapter}-{i}", adapter, version)
        requests.append({"adapter": adapter, "binary": str(script)})
    done = host.python("-c", MANY, json.dumps(requests), **env)
    assert done.returncode == 0, done.stderr
    decisions: list[Any] = json.loads(done.stdout)
    for decision, version in zip(decisions, printed, strict=True):
        assert decision["version"] == version, decision["reason"]  # judged exactly as read
        assert decision["allowed"] == (decision["raised"] is None)
    return decisions


def verdicts(decisions: list[Any]) -> list[str]:
    return [d["verdict"] for d in decisions]


# --- ranges and backports -----------------------------------------------------------------------


def test_backport_table_pypi(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module({"aider": entry("PyPI", BACKPORT_PYPI)}))
    printed = ["1.4.6", "1.4.7", "1.9.0", "2.0.0", "2.1.3"]
    decisions = decide(host, tmp_path, "aider", printed)
    assert verdicts(decisions) == ["refuse", "permit", "permit", "refuse", "permit"]
    refused = decisions[0]
    assert refused["advisory_id"] == "GHSA-back-port-pypi"
    assert refused["floor"] is None
    assert "inside the affected range from the start, < 1.4.7" in refused["reason"]
    assert ">= 2.0.0, < 2.1.3" in decisions[3]["reason"]
    receipt = receipt_in_chain(host, refused["receipt_id"])
    assert (receipt["verdict"], receipt["advisory_id"], receipt["waiver_id"]) == (
        "refuse",
        "GHSA-back-port-pypi",
        None,
    )
    assert receipt["floor_map_hash"] == map_hash({"aider": entry("PyPI", BACKPORT_PYPI)})


def test_backport_table_npm_with_prereleases(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module({"gemini": entry("npm", BACKPORT_NPM)}))
    cases = {
        "1.4.6": "refuse",
        "1.4.7": "permit",
        "1.9.0": "permit",
        "2.0.0-alpha.9": "permit",  # before the range's first pre-release
        "2.0.0-beta.1": "refuse",
        "2.0.0-beta.3": "refuse",  # inside a range that starts at 2.0.0-beta.1
        "2.0.0": "refuse",
        "2.1.3-rc.1": "refuse",  # a pre-release of the fix is below the fix
        "2.1.3": "permit",
        "2.1.3+build.7": "permit",  # build metadata does not take part in the order
    }
    decisions = decide(host, tmp_path, "gemini", list(cases))
    assert verdicts(decisions) == list(cases.values())
    beta = decisions[5]
    assert beta["advisory_id"] == "GHSA-back-port-npmx"
    assert "GHSA-back-port-npmx (also CVE-2025-0001)" in beta["reason"]
    assert "inside the affected range >= 2.0.0-beta.1, < 2.1.3" in beta["reason"]


def test_nightly_and_preview_versions_are_judged_by_semver_not_pep_440(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module({"qwen": entry("npm", NIGHTLY, PREVIEW)}))
    cases = {
        "0.5.0-nightly.20250911.a1b2c3": "refuse",  # a pre-release of the 0.5.0 fix
        "0.5.0": "permit",
        "0.6.0-preview.1": "refuse",  # SemVer: preview < rc.0 (PEP 440 would say rc1 > rc0)
        "0.6.0-rc.1": "permit",
        "0.6.0": "permit",
    }
    decisions = decide(host, tmp_path, "qwen", list(cases))
    assert verdicts(decisions) == list(cases.values())
    assert decisions[0]["advisory_id"] == "GHSA-nigh-tly0-0000"
    assert decisions[2]["advisory_id"] == "GHSA-prev-iew0-0000"


def test_a_pep_440_spelling_is_an_unknown_version_of_an_npm_adapter(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module({"qwen": entry("npm", NIGHTLY)}))
    (blocked,) = decide(host, tmp_path / "block", "qwen", ["0.6.0rc1"])
    assert blocked["verdict"] == "refuse"
    assert "unknown version of qwen" in blocked["reason"] and "SemVer" in blocked["reason"]
    (warned,) = decide(
        host, tmp_path / "warn", "qwen", ["0.6.0rc1"], FLOORGUARD_ADAPTER_FLOOR_POLICY="warn"
    )
    assert warned["verdict"] == "warn_override"


def test_an_npm_cli_under_a_schema_1_floor_compares_by_semver(tmp_path: Path) -> None:
    # gemini is an npm CLI (the catalog says so): its versions are SemVer whatever the
    # schema of the feed its floor came from. Read as PEP 440, 0.6.0-preview.1 would be
    # 0.6.0rc1, equal to this floor, and permitted; by SemVer "preview" sorts before "rc".
    floor_only = {"min_safe_version": "0.6.0-rc.1", "advisory_id": "BSA-0004", "note": "n"}
    host = Host(tmp_path / "host", {"gemini": floor_only})
    cases = ["0.6.0-preview.1", "0.6.0-nightly.20250911.a1b2c3", "0.6.0-rc.2", "0.6.0rc2"]
    preview, nightly, rc2, pep440 = decide(host, tmp_path, "gemini", cases)
    assert preview["verdict"] == "refuse"
    assert "below the floor 0.6.0-rc.1" in preview["reason"]
    assert nightly["verdict"] == "refuse"  # "nightly" sorts before "rc" too
    assert rc2["verdict"] == "permit"
    # A PEP 440 spelling is no SemVer version: unknown, never translated.
    assert pep440["verdict"] == "refuse"
    assert "unknown version of gemini" in pep440["reason"]
    assert "SemVer" in pep440["reason"]


def test_a_pypi_cli_under_a_schema_1_floor_keeps_pep_440(tmp_path: Path) -> None:
    floor_only = {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "n"}
    host = Host(tmp_path / "host", {"aider": floor_only})
    # (as the caller states them: pip installs no version that is not PEP 440)
    rc, nightly = (
        host.preflight("aider", version=v) for v in ("0.60.0rc1", "0.61.0-nightly.2025.a1b2c3")
    )
    assert rc["verdict"] == "refuse"
    assert "below the floor 0.60.0" in rc["reason"]
    assert nightly["verdict"] == "refuse"
    assert "unknown version of aider" in nightly["reason"]
    assert "PEP 440" in nightly["reason"]


def test_floor_and_advisory_together_last_affected_listed_versions_and_aliases(
    tmp_path: Path,
) -> None:
    ghsa = advisory(
        "GHSA-aaaa-bbbb-cccc",
        span("0", last_affected="1.1.0"),
        versions=("1.3.0",),
        aliases=("CVE-2025-1111", "PYSEC-2025-7"),
    )
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module({"aider": entry("PyPI", ghsa, floor="1.0.0")}))
    cases = {"0.9.0": "refuse", "1.1.0": "refuse", "1.1.1": "permit", "1.3.0": "refuse",
             "1.3.1": "permit"}  # fmt: skip
    decisions = decide(host, tmp_path, "aider", list(cases))
    assert verdicts(decisions) == list(cases.values())
    both = decisions[0]
    assert both["advisory_id"] == "BSA-0001"  # the floor comes first
    assert both["floor"] == "1.0.0"
    assert "is below the floor 1.0.0 (BSA-0001)" in both["reason"]
    assert "GHSA-aaaa-bbbb-cccc (also CVE-2025-1111, PYSEC-2025-7)" in both["reason"]
    assert decisions[1]["advisory_id"] == "GHSA-aaaa-bbbb-cccc"
    assert "<= 1.1.0" in decisions[1]["reason"]
    assert "version 1.3.0 is listed as affected" in decisions[3]["reason"]
    assert "meets the floor 1.0.0" in decisions[2]["reason"]


# --- waivers ------------------------------------------------------------------------------------

GHSA_W = advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3"), aliases=("CVE-2025-2222",))
GHSA_X = advisory("GHSA-xxxx-xxxx-xxxx", span("2.0.5", fixed="2.0.6"))
WAIVERS = (
    waiver("WVR-0001", "2.0.1", "CVE-2025-2222"),  # by alias
    waiver("WVR-0002", "2.0.2", "GHSA-wwww-wwww-wwww", expires=LONG_AGO),
    waiver("WVR-0003", "2.0.5", "GHSA-wwww-wwww-wwww"),  # not GHSA-x
)
WAIVED_MAP = {"aider": entry("PyPI", GHSA_W, GHSA_X, waivers=WAIVERS)}
# The same map after a later refresh dropped WVR-0001.
UNWAIVED_MAP = {"aider": entry("PyPI", GHSA_W, GHSA_X, waivers=WAIVERS[1:])}


def test_waivers_unexpired_expired_wrong_version_and_uncovered(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(WAIVED_MAP))
    decisions = decide(host, tmp_path, "aider", ["2.0.1", "2.0.2", "2.0.3", "2.0.5"])
    assert verdicts(decisions) == ["waived", "refuse", "refuse", "refuse"]
    waived, expired, other_version, uncovered = decisions
    assert waived["waiver_id"] == "WVR-0001" and waived["allowed"] is True
    assert waived["advisory_id"] == "GHSA-wwww-wwww-wwww"
    assert "waived by WVR-0001" in waived["reason"]
    receipt = receipt_in_chain(host, waived["receipt_id"])
    assert (receipt["verdict"], receipt["waiver_id"]) == ("waived", "WVR-0001")
    assert all(d["waiver_id"] is None for d in decisions[1:])
    assert f"waiver WVR-0002 expired at {LONG_AGO}" in expired["reason"]
    assert "waiver WVR-0001 is for version 2.0.1, not 2.0.3" in other_version["reason"]
    assert "waiver WVR-0003 does not cover GHSA-xxxx-xxxx-xxxx" in uncovered["reason"]
    assert uncovered["advisory_id"] == "GHSA-wwww-wwww-wwww"


def test_a_waiver_of_the_floor_never_covers_an_advisory_called_floor(tmp_path: Path) -> None:
    # A hand-written map (no feed: feeds refuse the name) with an advisory aliased "floor".
    # A waiver reviewed for the floor only must not waive it; naming its id as well does.
    aliased = advisory("GHSA-aaaa-bbbb-cccc", span("0", fixed="2.0.0"), aliases=("floor",))
    entries = {
        "claude": entry(
            "npm",
            aliased,
            floor="1.0.20",
            waivers=(
                waiver("WVR-0001", "1.0.10", "floor"),
                waiver("WVR-0002", "1.0.11", "floor", "GHSA-aaaa-bbbb-cccc"),
            ),
        )
    }
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(entries))
    floor_only, both = decide(host, tmp_path, "claude", ["1.0.10", "1.0.11"])
    assert floor_only["verdict"] == "refuse" and floor_only["waiver_id"] is None
    assert "waiver WVR-0001 does not cover GHSA-aaaa-bbbb-cccc" in floor_only["reason"]
    assert (both["verdict"], both["waiver_id"]) == ("waived", "WVR-0002")
    done = export_and_verify(host, tmp_path, [entries])
    assert done.returncode == 0 and json.loads(done.stdout)["proven"] is True, done.stdout


def test_a_waiver_takes_precedence_over_the_warn_policy_and_is_logged(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(WAIVED_MAP))
    script = aider_install(tmp_path / "venv", "2.0.1")
    request = json.dumps([{"adapter": "aider", "binary": str(script)}])
    done = host.python("-c", MANY, request, FLOORGUARD_ADAPTER_FLOOR_POLICY="warn")
    assert done.returncode == 0, done.stderr
    (decision,) = json.loads(done.stdout)
    assert (decision["verdict"], decision["waiver_id"], decision["policy"]) == (
        "waived",
        "WVR-0001",
        "warn",
    )
    assert "floorguard: waived: " in done.stderr and decision["receipt_id"] in done.stderr


def export_and_verify(host: Host, tmp_path: Path, maps: list[dict[str, Any]]) -> Any:
    """verify chain (floorctl) over the host's whole chain, with an archive of ``maps``."""
    archive = tmp_path / "maps"
    archive.mkdir(exist_ok=True)
    for entries in maps:
        name = map_hash(entries).replace(":", "-") + ".json"
        (archive / name).write_bytes(canonical_bytes(entries))
    state = tmp_path / "state"
    home = {"FLOORGUARD_HOME": str(host.home)}
    exported = floorctl("chain", "export", "--out", "slice.jsonl", cwd=tmp_path, state=state,
                        **home)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    return floorctl(
        "verify", "chain", "slice.jsonl", "--key-file", str(host.home / "chain.key"),
        "--maps", str(archive), "--json", cwd=tmp_path, state=state, **home,
    )  # fmt: skip


def test_a_waiver_removed_later_refuses_the_next_spawn_and_the_earlier_stays_proven(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(WAIVED_MAP))
    (before,) = decide(host, tmp_path / "before", "aider", ["2.0.1"])
    assert before["verdict"] == "waived"
    host.set_map(extended_module(UNWAIVED_MAP, version=2))
    (after,) = decide(host, tmp_path / "after", "aider", ["2.0.1"])
    assert after["verdict"] == "refuse" and after["waiver_id"] is None
    assert after["floor_map_hash"] == map_hash(UNWAIVED_MAP)
    done = export_and_verify(host, tmp_path, [WAIVED_MAP, UNWAIVED_MAP])
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["proven"] is True and document["violations"] == []


def test_every_waiver_verdict_is_proven_by_verify_chain(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(WAIVED_MAP))
    decide(host, tmp_path, "aider", ["2.0.1", "2.0.2", "2.0.3", "2.0.5", "2.1.3"])
    done = export_and_verify(host, tmp_path, [WAIVED_MAP])
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["proven"] is True


# --- the doctor and the canary ------------------------------------------------------------------

DOCTOR_MAP = {
    "aider": entry("PyPI", GHSA_W, waivers=WAIVERS),
    "claude": entry("npm", BACKPORT_NPM, floor="1.0.20", floor_id="BSA-0002"),
    "gemini": entry("npm", NIGHTLY),
}


@pytest.fixture
def doctor_host(tmp_path: Path) -> tuple[Host, Path]:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(DOCTOR_MAP))
    bins = tmp_path / "bin"
    bins.mkdir()
    aider_at(bins / "aider", "2.0.1")  # waived by WVR-0001
    write_script(bins / "claude", "echo '2.0.0-beta.3 (Claude Code)'")  # affected
    return host, bins


def test_doctor_shows_a_waived_and_an_affected_adapter(
    doctor_host: tuple[Host, Path],
) -> None:
    host, bins = doctor_host
    done = host.python("-m", "floorguard", "doctor", "--json", PATH=str(bins))
    assert done.returncode == 1, done.stderr  # claude is affected
    document = json.loads(done.stdout)
    by_name = {a["adapter"]: a for a in document["adapters"]}
    aider, claude = by_name["aider"], by_name["claude"]
    assert (aider["status"], aider["waiver_id"]) == ("waived", "WVR-0001")
    assert aider["waiver_days_left"] > 365 * 50
    assert (claude["status"], claude["advisory_id"]) == ("affected", "GHSA-back-port-npmx")
    assert "CVE-2025-0001" in claude["reason"]
    assert by_name["gemini"]["status"] == "not_installed"
    posture = receipt_in_chain(host, document["receipt_id"])
    assert posture["adapters"] == document["adapters"]
    text = host.python("-m", "floorguard", "doctor", PATH=str(bins))
    assert text.returncode == 1
    assert f"waived (WVR-0001, {aider['waiver_days_left']} day(s) left)" in text.stdout
    assert "affected (GHSA-back-port-npmx)" in text.stdout


def test_doctor_exits_0_when_every_installed_adapter_is_ok_or_waived(
    doctor_host: tuple[Host, Path],
) -> None:
    host, bins = doctor_host
    write_script(bins / "claude", "echo '2.1.3 (Claude Code)'")
    done = host.python("-m", "floorguard", "doctor", PATH=str(bins))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waived (WVR-0001" in done.stdout


def test_floorctl_doctor_uses_the_same_rule(doctor_host: tuple[Host, Path], tmp_path: Path) -> None:
    host, bins = doctor_host
    # (the host's map named, not its copy of floorguard put on PYTHONPATH: the doctor judges
    # aider, a Python agent, with this environment, and PYTHONPATH there would refuse it)
    done = floorctl(
        "doctor", "--json", cwd=tmp_path, state=tmp_path / "state", PATH=str(bins),
        FLOORGUARD_FLOOR_MAP=str(host.map_file), FLOORGUARD_HOME=str(host.home),
    )  # fmt: skip
    assert done.returncode == 1
    statuses = {a["adapter"]: a["status"] for a in json.loads(done.stdout)["adapters"]}
    assert statuses == {"aider": "waived", "claude": "affected", "gemini": "not_installed"}
    assert "claude (affected)" in done.stderr


def test_canary_refuses_to_certify_an_affected_or_waived_version(tmp_path: Path) -> None:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(DOCTOR_MAP))
    env = {"PYTHONPATH": str(host.site), "FLOORGUARD_HOME": str(host.home)}
    state = tmp_path / "state"

    def record(adapter: str, version: str) -> Any:
        return floorctl("canary", "record", "--adapter", adapter, "--version", version,
                        "--result", "pass", "--json", cwd=tmp_path, state=state, **env)  # fmt: skip

    affected = record("claude", "2.0.0-beta.3")
    assert affected.returncode == 1, affected.stderr
    judged = json.loads(affected.stdout)
    assert (judged["verdict"], judged["certified"]) == ("refuse", False)
    assert "GHSA-back-port-npmx (also CVE-2025-0001)" in judged["reason"]
    waived = record("aider", "2.0.1")  # runs under WVR-0001, but a waiver vouches for nothing
    assert waived.returncode == 1 and json.loads(waived.stdout)["verdict"] == "refuse"
    good = record("claude", "2.1.3")
    assert good.returncode == 0 and json.loads(good.stdout)["verdict"] == "certify"
    newer_pre = record("claude", "2.1.4-rc.1")  # SemVer order: newer than 2.1.3
    assert json.loads(newer_pre.stdout)["verdict"] == "certify", newer_pre.stdout
    pep440_only = record("claude", "2.1.5rc1")
    assert pep440_only.returncode == 2 and "not a SemVer version" in pep440_only.stderr
    green = floorctl("canary", "last-green", "--json", cwd=tmp_path, state=state, **env)
    assert json.loads(green.stdout)["claude"]["version"] == "2.1.4-rc.1"
    assert "aider" not in json.loads(green.stdout)


# --- the window proof over records the gate did not write ---------------------------------------


def spawn(
    verdict: str, version: str, entries: dict[str, Any], waiver_id: str | None, decided: str
) -> Any:
    """A spawn receipt with its decision time ``decided`` (the gate's: before its record)."""
    from helpers.proof_support import spawn_receipt

    receipt = spawn_receipt("aider", version, verdict, map_hash=map_hash(entries), floor=None)
    receipt["waiver_id"] = waiver_id
    receipt["ts"] = decided
    return receipt


def prove_records(tmp_path: Path, records: list[Any], maps: list[dict[str, Any]]) -> Any:
    """A real chain (seq n stamped 2026-01-01 00:00:0n) holding ``records``, then the proof."""
    from helpers.proof_support import SPAWN, build

    from floorguard._proofs.window_report import prove

    archive = tmp_path / "maps"
    archive.mkdir(parents=True)
    for entries in maps:
        name = map_hash(entries).replace(":", "-") + ".json"
        (archive / name).write_bytes(canonical_bytes(entries))
    built = build(tmp_path / "chain", [(SPAWN, r) for r in records])
    report = prove(built.lines(), key=built.key, map_dirs=[archive])
    return [(v.seq, v.reason) for v in report.violations], report.proven


def test_window_proof_refuses_a_waived_record_whose_map_lacks_the_waiver(tmp_path: Path) -> None:
    violations, proven = prove_records(
        tmp_path,
        [spawn("waived", "2.0.1", WAIVED_MAP, "WVR-0001", at(0)),  # backed: proven
         spawn("waived", "2.0.1", UNWAIVED_MAP, "WVR-0001", at(1)),  # the map had none
         spawn("waived", "2.0.3", WAIVED_MAP, "WVR-0001", at(2)),  # another version
         spawn("waived", "2.0.5", WAIVED_MAP, "WVR-0003", at(3)),  # does not cover GHSA-x
         spawn("waived", "2.0.1", WAIVED_MAP, None, at(4))],
        [WAIVED_MAP, UNWAIVED_MAP],
    )  # fmt: skip
    assert not proven
    assert violations == [
        (1, "waived spawn of aider 2.0.1: the pinned map carries no waiver 'WVR-0001' for it"),
        (2, "waived spawn of aider 2.0.3: waiver WVR-0001 is for version 2.0.1"),
        (3, "waived spawn of aider 2.0.5: waiver WVR-0003 of the pinned map does not cover "
            "GHSA-xxxx-xxxx-xxxx: inside the affected range >= 2.0.5, < 2.0.6"),
        (4, "waived spawn of 'aider' names no version or no waiver id"),
    ]  # fmt: skip


def test_window_proof_refuses_a_waived_record_after_its_waiver_expired(tmp_path: Path) -> None:
    # Records are stamped 2026-01-01T00:00:00Z + seq seconds; the waiver ends at 00:00:01.
    ending = {"aider": entry("PyPI", GHSA_W, waivers=(
        waiver("WVR-0009", "2.0.1", "GHSA-wwww-wwww-wwww", expires="2026-01-01T00:00:01Z"),
    ))}  # fmt: skip
    violations, proven = prove_records(
        tmp_path,
        [
            spawn("waived", "2.0.1", ending, "WVR-0009", at(0)),
            spawn("waived", "2.0.1", ending, "WVR-0009", at(1)),
        ],
        [ending],
    )
    assert not proven
    assert violations == [
        (1, "waived spawn of aider 2.0.1 recorded at 2026-01-01T00:00:01.000000Z: waiver "
            "WVR-0009 of the pinned map expired at 2026-01-01T00:00:01Z"),
    ]  # fmt: skip


def test_a_waived_record_is_judged_at_its_records_time_and_never_dated_after_it(
    tmp_path: Path,
) -> None:
    # The waiver ends at 00:00:02; records are stamped at seq seconds. The spawn starts only
    # once its record is written, so a waiver that held at the decision but had expired when
    # the record landed waived nothing (the gate keeps two minutes to spare for this). A
    # receipt dated after its own record (back-dated, or forged into the waiver's lifetime)
    # proves nothing either.
    ending = {"aider": entry("PyPI", GHSA_W, waivers=(
        waiver("WVR-0009", "2.0.1", "GHSA-wwww-wwww-wwww", expires="2026-01-01T00:00:02Z"),
    ))}  # fmt: skip
    before_expiry = "2026-01-01T00:00:00.900000Z"
    in_time = [
        spawn("refuse", "2.0.1", ending, None, at(0)),
        spawn("waived", "2.0.1", ending, "WVR-0009", before_expiry),  # sealed at 00:00:01
    ]
    assert prove_records(tmp_path / "in-time", in_time, [ending]) == ([], True)

    sealed_later = [
        spawn("refuse", "2.0.1", ending, None, at(0)),
        spawn("refuse", "2.0.1", ending, None, at(1)),
        spawn("waived", "2.0.1", ending, "WVR-0009", "2026-01-01T00:00:01.900000Z"),
    ]
    violations, proven = prove_records(tmp_path / "later", sealed_later, [ending])
    assert not proven
    assert violations == [
        (2, "waived spawn of aider 2.0.1 recorded at 2026-01-01T00:00:02.000000Z: waiver "
            "WVR-0009 of the pinned map expired at 2026-01-01T00:00:02Z"),
    ]  # fmt: skip

    sealed_earlier = [spawn("waived", "2.0.1", ending, "WVR-0009", before_expiry)]
    violations, proven = prove_records(tmp_path / "earlier", sealed_earlier, [ending])
    assert not proven
    assert violations == [
        (0, "waived spawn of aider 2.0.1: its receipt is dated 2026-01-01T00:00:00.900000Z, "
            "after its record at 2026-01-01T00:00:00.000000Z"),
    ]  # fmt: skip


def test_window_proof_refuses_a_permit_of_a_local_build_inside_an_advisory(
    tmp_path: Path,
) -> None:
    # 2.0.1+ubuntu1 is a rebuild of 2.0.1, inside the range: a permit of it is a violation.
    violations, proven = prove_records(
        tmp_path, [spawn("permit", "2.0.1+ubuntu1", WAIVED_MAP, None, at(0))], [WAIVED_MAP]
    )
    assert not proven
    assert [seq for seq, _ in violations] == [0]
    assert "GHSA-wwww-wwww-wwww" in violations[0][1]


def test_window_proof_refuses_a_permit_inside_an_advisory(tmp_path: Path) -> None:
    violations, proven = prove_records(
        tmp_path,
        [
            spawn("permit", "2.1.3", WAIVED_MAP, None, at(0)),
            spawn("permit", "2.0.1", WAIVED_MAP, None, at(1)),
        ],
        [WAIVED_MAP],
    )
    assert not proven
    assert violations == [
        (1, "permit of aider 2.0.1, affected by GHSA-wwww-wwww-wwww (also CVE-2025-2222): "
            "inside the affected range >= 2.0.0, < 2.1.3 of the pinned map"),
    ]  # fmt: skip


def test_a_published_map_with_extended_entries_is_loaded_and_judged_by(tmp_path: Path) -> None:
    import datetime as dt

    from feedserver import envelope, new_key

    from floorguard._base._time import format_ts, utc_now
    from floorguard._maps import published_map
    from floorguard._maps.map_model import from_entries

    key, _, public = new_key(tmp_path / "publisher")
    host = Host(tmp_path / "host", {})
    document = published_map.document(
        from_entries(WAIVED_MAP), 5, format_ts(utc_now() + dt.timedelta(days=5))
    )
    data = canonical_bytes(document)
    assert published_map.parse(data, "floor-map.json").floor_map_hash == map_hash(WAIVED_MAP)
    site = tmp_path / "floor-map.json"
    site.write_bytes(data)
    Path(str(site) + ".dsse").write_bytes(
        envelope(data, key, payload_type=published_map.PAYLOAD_TYPE)
    )
    published = {"FLOORGUARD_FLOOR_MAP": str(site), "FLOORGUARD_TRUSTED_KEYS": str(public)}
    decisions = decide(host, tmp_path, "aider", ["2.0.1", "2.0.2"], **published)
    assert verdicts(decisions) == ["waived", "refuse"]
    assert {d["floor_map_hash"] for d in decisions} == {map_hash(WAIVED_MAP)}


# --- the SemVer order the runtime compares by ---------------------------------------------------

_IDENT = st.one_of(
    st.integers(min_value=0, max_value=30).map(str),
    st.text(alphabet="abz-09", min_size=1, max_size=4).filter(
        lambda t: not t.isdigit() or t == "0" or not t.startswith("0")
    ),
)
_SEMVER = st.builds(
    lambda core, pre, build: (
        ".".join(map(str, core))
        + (f"-{'.'.join(pre)}" if pre else "")
        + (f"+{build}" if build else "")
    ),
    st.tuples(*(st.integers(min_value=0, max_value=3),) * 3),
    st.lists(_IDENT, max_size=3),
    st.sampled_from(["", "b.1", "sha.0a1"]),
)


@given(_SEMVER, _SEMVER)
def test_npm_versions_compare_exactly_as_semver_precedence(left: str, right: str) -> None:
    import semver

    from floorguard._maps import versions

    expected = semver.Version.parse(left).compare(right)
    assert versions.compare(left, right, "npm") == expected


def test_a_waived_receipt_dated_a_fraction_of_a_microsecond_after_its_record_is_refused(
    tmp_path: Path,
) -> None:
    # The chain stamps microseconds; a receipt time with more digits is still an instant,
    # and 0.9 us after its record is after it (cut to microseconds it looked the same).
    ending = {"aider": entry("PyPI", GHSA_W, waivers=(
        waiver("WVR-0009", "2.0.1", "GHSA-wwww-wwww-wwww", expires="2026-01-01T00:00:02Z"),
    ))}  # fmt: skip
    sealed_after = [spawn("waived", "2.0.1", ending, "WVR-0009", "2026-01-01T00:00:00.0000009Z")]
    violations, proven = prove_records(tmp_path / "after", sealed_after, [ending])
    assert not proven
    assert [seq for seq, _ in violations] == [0]
    assert "after its record" in violations[0][1]
    sealed_at = [spawn("waived", "2.0.1", ending, "WVR-0009", "2026-01-01T00:00:00.0000000Z")]
    assert prove_records(tmp_path / "at", sealed_at, [ending]) == ([], True)
