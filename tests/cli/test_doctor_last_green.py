"""The doctor's ``ahead_of_last_green``: an installed version the map allows but newer than
the adapter's last-green canary version (as Bernstein's doctor reports it). A warning: exit
0, unless ``--strict``.

Real probe binaries on a PATH made by the test; last-green comes from real canary records
(``floorctl canary record``, or the runtime's ``canary.record_run`` on a host without
floorctl), replayed from the verified chain by both doctors.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from hosts import Host, floor, receipt_in_chain, write_script
from probes import aider_at

REPO = Path(__file__).resolve().parents[2]

RECORD_CANARY = """
import sys
from floorguard._proofs import canary
from floorguard._chain.chain import AuditChain
outcome = canary.record_run(AuditChain.from_env(), sys.argv[1], sys.argv[2], sys.argv[3])
print(outcome.judgement.verdict)
"""


class Machine:
    """floorctl's side: the repository's map (aider >= 0.60.0, claude >= 1.0.20 by SemVer),
    a state folder and a PATH holding only the probes the test writes."""

    def __init__(self, root: Path) -> None:
        self.state = root / "state"
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)

    def install(self, adapter: str, version_line: str) -> None:
        if adapter == "aider":  # a Python package only: as pip installs it
            aider_at(self.bin / "aider", version_line.removeprefix("aider "))
        else:
            write_script(self.bin / adapter, f"echo '{version_line}'")

    def canary(self, adapter: str, version: str, result: str = "pass") -> str:
        done = floorctl(
            "canary", "record", "--adapter", adapter, "--version", version, "--result", result,
            cwd=REPO, state=self.state,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        return done.stdout.split(":")[0]

    def doctor(self, *args: str) -> subprocess.CompletedProcess[str]:
        return floorctl("doctor", *args, cwd=REPO, state=self.state, PATH=str(self.bin))

    def records(self) -> list[dict[str, Any]]:
        done = floorctl("chain", "export", cwd=REPO, state=self.state)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def adapter_of(document: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [a for a in document["adapters"] if a["adapter"] == name]
    return found


def test_a_version_newer_than_last_green_is_a_warning_that_exits_0(machine: Machine) -> None:
    assert machine.canary("aider", "0.61.0") == "certify"
    machine.install("aider", "aider 0.62.0")
    done = machine.doctor("--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    aider = adapter_of(document, "aider")
    assert (aider["status"], aider["version"], aider["last_green"]) == (
        "ahead_of_last_green",
        "0.62.0",
        "0.61.0",
    )
    assert "newer than last-green 0.61.0" in aider["reason"]
    # The posture receipt records the status and the last-green it was judged against.
    [posture] = [r for r in machine.records() if r["event"] == "adapter.version_posture"]
    assert posture["receipt_id"] == document["receipt_id"]
    [recorded] = [a for a in posture["receipt"]["adapters"] if a["adapter"] == "aider"]
    assert (recorded["status"], recorded["last_green"]) == ("ahead_of_last_green", "0.61.0")


def test_strict_fails_on_a_version_ahead_of_last_green(machine: Machine) -> None:
    machine.canary("aider", "0.61.0")
    machine.install("aider", "aider 0.62.0")
    done = machine.doctor("--strict")
    assert done.returncode == 1
    assert "ahead_of_last_green (last-green 0.61.0)" in done.stdout
    assert (
        done.stderr == "floorctl: error: not ok or waived (--strict): aider (ahead_of_last_green)\n"
    )


def test_the_text_table_shows_the_warning_and_exits_0(machine: Machine) -> None:
    machine.canary("aider", "0.61.0")
    machine.install("aider", "aider 0.62.0")
    done = machine.doctor()
    assert done.returncode == 0, done.stderr
    [row] = [line for line in done.stdout.splitlines() if line.startswith("aider ")]
    assert row.endswith("ahead_of_last_green (last-green 0.61.0)")


@pytest.mark.parametrize("installed", ["0.61.0", "0.60.5", "0.61.0+ubuntu1"])
def test_the_last_green_version_or_an_older_one_stays_ok_even_strict(
    machine: Machine, installed: str
) -> None:
    # A local label is a rebuild of its release: certified as the release was.
    machine.canary("aider", "0.61.0")
    machine.install("aider", f"aider {installed}")
    done = machine.doctor("--json", "--strict")
    assert done.returncode == 0, done.stderr
    aider = adapter_of(json.loads(done.stdout), "aider")
    assert (aider["status"], aider["last_green"]) == ("ok", "0.61.0")


def test_without_any_canary_there_is_nothing_to_be_ahead_of(machine: Machine) -> None:
    machine.install("aider", "aider 9.0.0")
    done = machine.doctor("--json", "--strict")
    assert done.returncode == 0, done.stderr
    aider = adapter_of(json.loads(done.stdout), "aider")
    assert (aider["status"], aider["last_green"]) == ("ok", None)


def test_failed_and_refused_canaries_give_no_last_green(machine: Machine) -> None:
    assert machine.canary("aider", "0.61.0", "fail") == "record"
    assert machine.canary("aider", "0.50.0") == "refuse"
    machine.install("aider", "aider 0.62.0")
    aider = adapter_of(json.loads(machine.doctor("--json", "--strict").stdout), "aider")
    assert (aider["status"], aider["last_green"]) == ("ok", None)


def test_only_an_ok_version_can_be_ahead(machine: Machine) -> None:
    # claude's last-green is 1.0.30; what is installed is below its floor 1.0.20.
    machine.canary("claude", "1.0.30")
    machine.install("claude", "1.0.3 (Claude Code)")
    done = machine.doctor("--json")
    assert done.returncode == 1
    claude = adapter_of(json.loads(done.stdout), "claude")
    assert (claude["status"], claude["last_green"]) == ("below_floor", "1.0.30")


def test_versions_compare_in_the_adapters_ecosystem(machine: Machine) -> None:
    # claude is an npm CLI: by SemVer 1.1.0-1 is a pre-release of 1.1.0, so 1.1.0 is newer
    # than a last-green 1.1.0-1 (by PEP 440, 1.1.0-1 is the post-release 1.1.0.post1, and
    # 1.1.0 would be older).
    assert machine.canary("claude", "1.1.0-1") == "certify"
    machine.install("claude", "1.1.0 (Claude Code)")
    claude = adapter_of(json.loads(machine.doctor("--json").stdout), "claude")
    assert (claude["status"], claude["last_green"]) == ("ahead_of_last_green", "1.1.0-1")
    # And numerically, never as text: 1.1.10 is newer than 1.1.9.
    assert machine.canary("claude", "1.1.9") == "certify"
    machine.install("claude", "1.1.10 (Claude Code)")
    claude = adapter_of(json.loads(machine.doctor("--json").stdout), "claude")
    assert (claude["status"], claude["last_green"]) == ("ahead_of_last_green", "1.1.9")


def tamper(db: Path) -> None:
    """Change the first record only: the head stays intact, so only a replay notices."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE records SET receipt = replace(receipt, '0.61.0', '0.99.0') WHERE seq = 0")
    conn.close()


def test_doctor_refuses_a_chain_that_does_not_verify_and_records_nothing(
    machine: Machine,
) -> None:
    # A forged last-green (0.99.0) would hide a version ahead of the real one: fail closed.
    machine.canary("aider", "0.61.0")
    assert machine.canary("aider", "0.60.5") == "record"
    machine.install("aider", "aider 0.62.0")
    tamper(machine.state / "floorguard" / "chain.sqlite3")
    done = machine.doctor("--json")
    assert done.returncode == 1
    # --json: the failure is one error document, and no posture.
    error = json.loads(done.stdout)["error"]
    assert error["exit_status"] == 1
    assert "does not verify" in error["message"]
    assert done.stderr.startswith("floorctl: error: the audit chain ")
    assert "does not verify" in done.stderr
    db = sqlite3.connect(machine.state / "floorguard" / "chain.sqlite3")
    assert db.execute("SELECT count(*) FROM records").fetchone() == (2,)
    db.close()


# --- the runtime's doctor, without floorctl ----------------------------------------------------


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "host", {"aider": floor("0.60.0")})


def runtime_canary(host: Host, adapter: str, version: str) -> str:
    done = host.python("-c", RECORD_CANARY, adapter, version, "pass")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_runtime_doctor_reports_ahead_of_last_green_and_strict_fails(
    host: Host, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aider_at(bin_dir / "aider", "0.62.0")
    assert runtime_canary(host, "aider", "0.61.0") == "certify"
    done = host.python("-m", "floorguard", "doctor", "--json", PATH=str(bin_dir))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    aider = adapter_of(document, "aider")
    assert (aider["status"], aider["last_green"]) == ("ahead_of_last_green", "0.61.0")
    receipt = receipt_in_chain(host, document["receipt_id"])
    assert receipt["adapters"][0]["status"] == "ahead_of_last_green"
    strict = host.python("-m", "floorguard", "doctor", "--strict", PATH=str(bin_dir))
    assert strict.returncode == 1
    assert "ahead_of_last_green (last-green 0.61.0)" in strict.stdout
    assert strict.stderr == (
        "floorguard: error: not ok or waived (--strict): aider (ahead_of_last_green)\n"
    )


def test_runtime_doctor_refuses_a_chain_that_does_not_verify(host: Host, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir / "aider", "echo 'aider 0.62.0'")
    runtime_canary(host, "aider", "0.61.0")
    assert runtime_canary(host, "aider", "0.60.5") == "record"
    tamper(host.home / "chain.sqlite3")
    done = host.python("-m", "floorguard", "doctor", PATH=str(bin_dir))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "does not verify (seq 0: " in done.stderr
    assert len(host.chain_records()) == 2
