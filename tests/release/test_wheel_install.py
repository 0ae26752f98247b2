"""The floorguard wheel that `floorctl build` writes, installed alone in a fresh virtual
environment: it imports, runs a real preflight and a published-map check, and pulls in none
of floorctl's toolchain. Without the `verify` extra a configured published map is refused
with a reason naming `floorguard[verify]`.

Needs the wheel's dependencies from somewhere: ``FLOORGUARD_TEST_WHEELHOUSE`` (a folder,
installed from with ``--no-index``; .ci/run downloads it) or else the normal index. Not in
the default run (marker ``wheelhouse``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.release import SHIPPED_FEED, Project, only, raised_feed
from probes import aider_install

pytestmark = pytest.mark.wheelhouse

TOOLCHAIN = {"click", "jinja2", "jsonschema", "httpx", "floorctl"}

HOST = r"""
import json, sys
import floorguard
try:
    d = floorguard.preflight(sys.argv[1], binary=sys.argv[2])
    out = {"refused": False, "verdict": d.verdict, "version": d.version}
except floorguard.SpawnRefused as exc:
    out = {"refused": True, "message": str(exc)}
out["map"] = floorguard.FLOOR_MAP_HASH if not out["refused"] else None
out["file"] = floorguard.__file__
print(json.dumps(out))
"""


def pip_install(venv: Path, *requirements: str) -> None:
    wheelhouse = os.environ.get("FLOORGUARD_TEST_WHEELHOUSE")
    source = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *source, *requirements],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def installed(venv: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {p["name"].lower(): p["version"] for p in json.loads(done.stdout)}


class Fresh:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = Project(root / "project")
        receipt = self.project.refresh(SHIPPED_FEED, "v1")
        done = self.project.build("dist", receipt)
        assert done.returncode == 0, done.stderr
        self.wheel = only(self.project.root / "dist", "*.whl")
        # A newer map, published (signed) for the installed package to pick up.
        self.project.refresh(raised_feed(root / "v2.json", "aider", "0.70.0"), "v2")
        done = self.project.floorctl(
            "publish", "--module", "mod/floor_map.py", "--out", root / "published",
            "--signing-key", self.project.key,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.published = root / "published" / "floor-map.json"
        self.venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True, timeout=300)
        pip_install(self.venv, str(self.wheel))

    def preflight(self, version: str, **extra: str) -> dict[str, Any]:
        binary = aider_install(self.root / f"aider-{version}", version)  # as pip installs it
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FLOORGUARD_", "FLOORCTL_", "PYTHON", "VIRTUAL_ENV"))
        }
        env["FLOORGUARD_HOME"] = str(self.root / "home")
        env.update(extra)
        done = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", HOST, "aider", str(binary)],
            capture_output=True,
            text=True,
            cwd=self.root,  # not the checkout: only the installed package can be imported
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def published_env(self) -> dict[str, str]:
        return {
            "FLOORGUARD_FLOOR_MAP": str(self.published),
            "FLOORGUARD_TRUSTED_KEYS": str(self.project.pub),
        }


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Fresh:
    return Fresh(tmp_path_factory.mktemp("fresh"))


def test_the_wheel_alone_installs_none_of_the_toolchain(fresh: Fresh) -> None:
    packages = installed(fresh.venv)
    print("installed in the fresh venv:", json.dumps(packages, sort_keys=True))
    assert packages["floorguard"] == "0.2.0.1"
    assert {"packaging", "rfc8785", "semver"} <= set(packages)
    assert not TOOLCHAIN & set(packages)
    assert "cryptography" not in packages  # only with the verify extra


def test_the_installed_wheel_runs_a_real_preflight(fresh: Fresh) -> None:
    permitted = fresh.preflight("0.90.0")
    assert permitted["refused"] is False and permitted["verdict"] == "permit"
    assert permitted["file"].startswith(str(fresh.venv))
    refused = fresh.preflight("0.50.0")
    assert refused["refused"] is True and "below" in refused["message"]


def test_without_the_verify_extra_a_published_map_is_refused_naming_it(fresh: Fresh) -> None:
    assert "cryptography" not in installed(fresh.venv)
    result = fresh.preflight("0.90.0", **fresh.published_env())
    assert result["refused"] is True
    assert "floorguard[verify]" in result["message"]


def test_with_the_verify_extra_the_published_map_is_in_force(fresh: Fresh) -> None:
    pip_install(fresh.venv, f"{fresh.wheel}[verify]")
    assert "cryptography" in installed(fresh.venv)
    assert not TOOLCHAIN & set(installed(fresh.venv))
    published = json.loads(fresh.published.read_text())
    # 0.65.0 passes the wheel's own map (floor 0.60.0) but not the published one (0.70.0).
    result = fresh.preflight("0.65.0", **fresh.published_env())
    assert result["refused"] is True and "0.70.0" in result["message"], result
    result = fresh.preflight("0.90.0", **fresh.published_env())
    assert result["refused"] is False and result["map"] == published["floor_map_hash"]
