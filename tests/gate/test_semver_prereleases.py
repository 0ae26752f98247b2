"""An npm CLI's version is judged by SemVer as the binary prints it: a ``-g<hex>`` pre-release
is not rewritten into build metadata, a pre-release of the floor is below it (not a PEP 440
post-release), the canary does not certify one, and a feed cannot make the runtime read it
as PEP 440. The real runtime in a host process, the real CLI and audit chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.advisory_maps import (
    advisory,
    entry,
    extended_module,
    span,
    verify_chain,
)
from helpers.cli import floorctl
from hosts import Host, floor, write_script

pytestmark = pytest.mark.slow

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
