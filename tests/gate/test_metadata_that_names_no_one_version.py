"""A package whose metadata does not state one version is refused, and the reason says why:
two distributions claiming the same package (an older install's dist-info left over the
same files), or a METADATA with two ``Version`` headers."""

from __future__ import annotations

import shutil

import pytest
from helpers.closed_world import DEFAULT, World

pytestmark = pytest.mark.attack


def test_two_distributions_claiming_the_package_are_named_as_such(world: World) -> None:
    new, old = world.new_aider(), world.old_aider()
    [left_over] = old.site.glob("aider_chat-*.dist-info")
    shutil.copytree(left_over, new.site / left_over.name)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_refused(outcome, new.marker, "several claim it")


def test_metadata_with_two_versions_is_named_as_such(world: World) -> None:
    new = world.new_aider()
    [info] = new.site.glob("aider_chat-*.dist-info")
    metadata = info / "METADATA"
    metadata.write_text(
        "Metadata-Version: 2.1\nName: aider-chat\nVersion: 0.70.0\nVersion: 0.50.0\n",
        encoding="utf-8",
    )
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"))
    world.assert_refused(outcome, new.marker, f"{metadata} does not state exactly one version")
