"""Above an agent's folder, the folders shared with other installs (the home and those above
it, and the system's) count only by their ``node_modules``; any other folder counts whole.
Judged from the paths alone: none of these folders needs to exist."""

from __future__ import annotations

import pytest

from floorguard._identify.server_workspace import repository_region

SYSTEM = [
    "/usr", "/usr/local", "/opt", "/opt/homebrew", "/opt/local", "/srv", "/home", "/var",
    "/var/lib", "/mnt", "/media", "/nix", "/nix/store", "/snap", "/tmp", "/var/tmp",
]  # fmt: skip


@pytest.mark.parametrize("shared", SYSTEM)
def test_a_system_folder_above_the_agent_counts_only_by_its_node_modules(shared: str) -> None:
    region = repository_region(f"{shared}/fg-no-such-project/app", (), ("/fg-no-such-home",))
    assert f"{shared}/node_modules" in region, region
    assert shared not in region, region
    assert f"{shared}/fg-no-such-project" in region, region  # (the project's folder, whole)


def test_the_home_and_the_folders_above_it_count_only_by_their_node_modules() -> None:
    region = repository_region("/w/x/home/u/src/proj", (), ("/w/x/home/u",))
    for shared in ("/w/x/home/u", "/w/x/home", "/w/x", "/w", "/"):
        assert shared not in region, region
        assert f"{shared.rstrip('/')}/node_modules" in region, region
    assert "/w/x/home/u/src" in region, region


def test_a_home_at_or_below_the_agents_folder_is_the_repositorys() -> None:
    region = repository_region("/w/proj/app", (), ("/w/proj/app/.home",))
    assert "/w/proj" in region and "/w" in region, region
