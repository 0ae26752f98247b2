"""A local build of a listed version (PEP 440 ``+local``) is that version: the gate refuses it,
the doctor reports it and ``verify chain`` proves the refusal, through the real CLIs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hosts import EXEC_COPY
from probes import aider_at

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

FLOORCTL = [sys.executable, "-m", "floorctl"]


def _env(tmp: Path, site: Path | None = None, path_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(tmp / "home")
    env["FLOORGUARD_HOME"] = str(tmp / "fg")
    env.pop("FLOORGUARD_ADAPTER_FLOOR_POLICY", None)
    env.pop("FLOORGUARD_FLOOR_MAP", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    if path_dir is not None:
        env["PATH"] = f"{path_dir}{os.pathsep}{env['PATH']}"
    (tmp / "home").mkdir(exist_ok=True)
    return env


def _site_with_example_v3(tmp: Path) -> Path:
    """A copy of the runtime whose map is written by `floorctl refresh` from the shipped v3 feed."""
    site = tmp / "site"
    shutil.copytree(REPO / "generated" / "floorguard", site / "floorguard")
    r = subprocess.run(
        [
            *FLOORCTL,
            "refresh",
            "--module",
            str(site / "floorguard" / "floor_map.py"),
            "--feed",
            str(REPO / "feeds" / "example.v3.json"),
            "--write",
            "--allow-downgrade",
        ],
        env=_env(tmp),
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    return site


HOST = """
import json, sys, floorguard
try:
    d = floorguard.preflight(sys.argv[1], version=sys.argv[2])
    print(json.dumps({"verdict": d.verdict, "reason": d.reason}))
except floorguard.SpawnRefused as e:
    print(json.dumps({"verdict": e.decision.verdict, "reason": e.decision.reason}))
"""


def _preflight(tmp: Path, site: Path, adapter: str, version: str) -> dict[str, str]:
    r = subprocess.run(
        [sys.executable, "-c", HOST, adapter, version],
        env=_env(tmp, site),
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_pep440_local_build_of_listed_version_is_refused(tmp_path: Path) -> None:
    """example.v3.json lists aider 0.64.0 as affected. Under PEP 440 a candidate's local label
    is ignored when matching a public version (`==0.64.0` matches `0.64.0+local`), and
    `<=0.63.1` (last_affected, inclusive) contains `0.63.1+local`. A local rebuild of an
    affected release (a distro or vendored build) is the same vulnerable code; it must not
    be permitted."""
    site = _site_with_example_v3(tmp_path)
    assert _preflight(tmp_path, site, "aider", "0.64.0")["verdict"] == "refuse"
    for version in ("0.64.0+local", "0.63.1+ubuntu1"):
        d = _preflight(tmp_path, site, "aider", version)
        assert d["verdict"] == "refuse", (version, d)


def test_doctor_reports_local_build_of_affected_aider(tmp_path: Path) -> None:
    """The doctor judges as the gate judges: an aider printing `aider 0.64.0+local` is inside
    GHSA-exam-ple0-0002 (0.64.0 listed) and must not be `ok` (exit 1)."""
    site = _site_with_example_v3(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    aider_at(bindir / "aider", "0.64.0+local")  # as pip installs it
    # (the site's copy of floorguard on the doctor's own path, not PYTHONPATH: the doctor
    # judges aider, a Python agent, with this environment)
    r = subprocess.run(
        [sys.executable, "-I", "-c", EXEC_COPY, str(site), "doctor", "--json"],
        env=_env(tmp_path, None, bindir),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    doc = json.loads(r.stdout)
    aider = next(a for a in doc["adapters"] if a["adapter"] == "aider")
    assert aider["version"] == "0.64.0+local", aider
    assert aider["status"] != "ok", aider
    assert r.returncode == 1, r.stdout


def test_verify_chain_proves_the_refusal_of_a_local_build_of_a_listed_version(
    tmp_path: Path,
) -> None:
    """The runtime's record for aider 0.64.0+local (listed affected, PEP 440) is a refusal,
    and the slice holding it is proven. (A forged permit of such a version is a violation:
    test_runtime_advisories.py,
    test_window_proof_refuses_a_permit_of_a_local_build_inside_an_advisory.)"""
    site = _site_with_example_v3(tmp_path)
    _preflight(tmp_path, site, "aider", "0.64.0+local")
    env = _env(tmp_path, site)
    sl = tmp_path / "slice.jsonl"
    r = subprocess.run(
        [*FLOORCTL, "chain", "export", "--out", str(sl)],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "floorguard",
            "verify",
            "chain",
            str(sl),
            "--key-file",
            str(tmp_path / "fg" / "chain.key"),
            "--maps",
            str(site / "floorguard" / "maps"),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    out = json.loads(r.stdout)
    assert out["integrity_errors"] == [], out
    assert out["records"] == 1, out
    assert out["proven"] is True, out
    assert r.returncode == 0
    (record,) = [json.loads(line) for line in sl.read_text().splitlines()]
    assert record["receipt"]["verdict"] == "refuse", record
