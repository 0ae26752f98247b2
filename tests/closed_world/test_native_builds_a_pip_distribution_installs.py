"""A native build a pip distribution installs (its RECORD lists it, in the environment's
``bin`` or inside the distribution's package) is asked its version, and its answer must be
the version the distribution's metadata states: a map-added PyPI agent shipped as a native
build, as wheels of compiled tools are.

A virtual environment on a 64-bit Linux has ``lib64`` linked to ``lib``: the distribution
seen through both is one distribution, not two that might disagree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.advisory_maps import entry, extended_module
from hosts import Host
from probes.native import native_program

PYTOOL = {**entry("PyPI", floor="1.0.0", floor_id="BSA-0200"), "package": "pytool", "kind": "agent"}

ASK = """
import json, sys
import floorguard
try:
    decision = floorguard.preflight("pytool", binary=sys.argv[1])
except floorguard.SpawnRefused as exc:
    decision = exc.decision
print(json.dumps({"verdict": decision.verdict, "version": decision.version,
                  "reason": decision.reason}))
"""


@pytest.fixture
def host(tmp_path: Path) -> Host:
    made = Host(tmp_path, {})
    made.set_map(extended_module({"pytool": PYTOOL}))
    return made


def _installed(prefix: Path, stated: str, answers: str, *, in_bin: bool) -> Path:
    """pytool ``stated`` installed by pip into the environment ``prefix`` (``lib64`` a link
    to ``lib``), its native build answering ``pytool ANSWERS``, in ``bin`` or in its package."""
    site = prefix / "lib" / "python3.11" / "site-packages"
    (site / "pytool").mkdir(parents=True)
    (site / "pytool" / "__init__.py").write_text("", encoding="utf-8")
    (prefix / "lib64").symlink_to("lib")
    build = prefix / "bin" / "pytool" if in_bin else site / "pytool" / "_bin" / "pytool"
    build.parent.mkdir(parents=True, exist_ok=True)
    native_program(build, stdout=f"pytool {answers}\n".encode())
    info = site / f"pytool-{stated.replace('-', '_')}.dist-info"  # (as wheels escape it)
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: pytool\nVersion: {stated}\n", encoding="utf-8"
    )
    listed = "../../../bin/pytool" if in_bin else "pytool/_bin/pytool"
    (info / "RECORD").write_text(
        f"pytool/__init__.py,,\n{listed},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n",
        encoding="utf-8",
    )
    return build


@pytest.mark.parametrize("in_bin", [True, False], ids=["in-bin", "in-its-package"])
def test_a_build_answering_its_distribution_s_version_is_judged_at_it(
    host: Host, tmp_path: Path, in_bin: bool
) -> None:
    build = _installed(tmp_path / "venv", "1.0.0", "1.0.0", in_bin=in_bin)
    done = host.python("-c", ASK, str(build))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "permit", done.stdout
    assert json.loads(done.stdout)["version"] == "1.0.0"


@pytest.mark.parametrize(
    ("stated", "in_bin"),
    [("0.9.0", True), ("0.9.0", False), ("1.0.0rc1", True), ("1.0.0-linux", True)],
    ids=["in-bin", "in-its-package", "a-pre-release", "npm-s-platform-label-is-not-pep-440"],
)
def test_a_build_answering_another_version_than_its_distribution_is_refused(
    host: Host, tmp_path: Path, stated: str, in_bin: bool
) -> None:
    build = _installed(tmp_path / "venv", stated, "1.0.0", in_bin=in_bin)
    done = host.python("-c", ASK, str(build))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["verdict"] == "refuse", answer
    assert "a build of another version" in answer["reason"] and stated in answer["reason"]
