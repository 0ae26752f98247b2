"""A map that changes while a binary is probed is the map the decision uses, for an adapter
the old map did not track too. The real runtime in a host process, the real CLI and chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import floorctl
from helpers.races import preflight_across, spawn_after_update
from hosts import Host

pytestmark = pytest.mark.attack

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
