"""The shipped schema-3 feed and waivers document work as the README shows: they validate,
refresh writes them beside the schema-1 floors, and the real runtime decides by them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from helpers.cli import floorctl
from hosts import Host

REPO = Path(__file__).resolve().parents[2]
FEEDS = REPO / "feeds"
WAIVERS = FEEDS / "example-waivers.json"


def test_the_examples_validate() -> None:
    done = floorctl(
        "validate", FEEDS / "example.v3.json", WAIVERS, cwd=REPO, state=Path("/nonexistent")
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Host:
    work = tmp_path_factory.mktemp("examples")
    host = Host(work / "host", {})
    written = floorctl(
        "refresh", "--feed", FEEDS / "example.v1.json", "--feed", FEEDS / "example.v3.json",
        "--waivers", WAIVERS, "--now", "2027-01-01T00:00:00Z", "--module", host.map_file,
        "--write", cwd=work, state=work,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    return host


@pytest.mark.parametrize(
    ("adapter", "version", "verdict"),
    [
        ("claude", "1.4.6", "refuse"),
        ("claude", "1.4.7", "permit"),
        ("claude", "2.0.0-beta.3", "refuse"),
        ("claude", "2.1.3", "permit"),
        ("aider", "0.59.0", "refuse"),  # the schema-1 floor 0.60.0 still holds
        ("aider", "0.63.1", "refuse"),  # last_affected is inclusive
        ("aider", "0.64.0", "refuse"),  # listed
        ("aider", "0.64.1", "permit"),
    ],
)
def test_the_examples_decide_the_real_preflight(
    host: Host, adapter: str, version: str, verdict: str
) -> None:
    assert host.preflight(adapter, version=version, PATH="/nonexistent")["verdict"] == verdict


def test_the_example_waiver_lets_exactly_its_version_run_until_it_expires(host: Host) -> None:
    waiver = json.loads(WAIVERS.read_text())["waivers"][0]
    expires = dt.datetime.fromisoformat(waiver["expires"].replace("Z", "+00:00"))
    in_force = dt.datetime.now(dt.UTC) < expires
    decided = host.preflight("claude", version=waiver["version"], PATH="/nonexistent")
    assert decided["verdict"] == ("waived" if in_force else "refuse"), decided
    assert host.preflight("claude", version="2.0.11", PATH="/nonexistent")["verdict"] == "refuse"
