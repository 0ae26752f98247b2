"""A published floor map needs signature checks, so the `verify` extra (cryptography).

Without it the host must not silently fall back to the built-in map, nor fail with an
import error: every spawn is refused, and the reason names `floorguard[verify]`. Here the
package is hidden from a host process (a None entry in sys.modules makes every import of it
fail, as a missing package does); tests/release/test_wheel_install.py does the same in a real
environment where it is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.published_site import NEWER, Site, document
from hosts import Host, floor, map_module
from probes import aider_at

WITHOUT_CRYPTOGRAPHY = r"""
import json, os, sys
sys.modules["cryptography"] = None
import floorguard
os.environ.pop("PYTHONPATH", None)  # (the host's own, for its copy of floorguard)
try:
    d = floorguard.preflight("aider", binary=sys.argv[1])
    print(json.dumps({"refused": False, "verdict": d.verdict}))
except floorguard.SpawnRefused as exc:
    print(json.dumps({"refused": True, "message": str(exc),
                      "verdict": exc.decision.verdict if exc.decision else None}))
"""


def test_a_published_map_without_the_verify_extra_refuses_tracked_spawns(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.write(document(NEWER, 4), site.key)
    aider = aider_at(tmp_path / "bin" / "aider", "0.90.0")
    done = site.host.python(
        "-c", WITHOUT_CRYPTOGRAPHY, str(aider),
        FLOORGUARD_FLOOR_MAP=str(site.map), FLOORGUARD_TRUSTED_KEYS=str(site.public),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["refused"] is True and result["verdict"] == "refuse"
    assert "floorguard[verify]" in result["message"]
    assert "ModuleNotFoundError" not in result["message"]


def test_without_a_published_map_the_verify_extra_is_not_needed(tmp_path: Path) -> None:
    host = Host(tmp_path, {})
    host.set_map(map_module({"aider": floor("0.50.0")}))
    aider = aider_at(tmp_path / "bin" / "aider", "0.90.0")
    done = host.python("-c", WITHOUT_CRYPTOGRAPHY, str(aider))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"refused": False, "verdict": "permit"}
