"""node's ``require`` looks last in ``$HOME/.node_modules`` and ``$HOME/.node_libraries``:
a module there answers a ``require`` that nothing installed beside the program answers (an
optional dependency), so either folder being there refuses a node agent."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from helpers.closed_world import DEFAULT, World

pytestmark = [
    pytest.mark.attack,
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
]


@pytest.mark.parametrize("folder", [".node_modules", ".node_libraries"])
def test_a_global_folder_in_home_refuses_a_node_agent(world: World, folder: str) -> None:
    new = world.new_claude()
    ran = world.root / "optional-ran"
    text = new.cli.read_text(encoding="utf-8").split("\n", 1)
    new.cli.write_text(
        text[0] + "\ntry { require('optional-extra'); } catch (e) {}\n" + text[1], encoding="utf-8"
    )
    module = world.home / folder / "optional-extra"
    module.mkdir(parents=True)
    (module / "index.js").write_text(
        f"require('fs').writeFileSync({json.dumps(str(ran))}, 'ran');\n", encoding="utf-8"
    )
    outcome = world.spawn("claude", ["task"], policy=DEFAULT, env=world.env(new.bin_dir))
    world.assert_refused(outcome, new.marker, folder)
    assert not ran.exists()


def test_without_them_the_node_agent_runs(world: World) -> None:
    new = world.new_claude()
    outcome = world.spawn("claude", ["task"], policy=DEFAULT, env=world.env(new.bin_dir))
    world.assert_permitted_and_ran(outcome, new.marker)


def test_lib_node_beside_node_s_own_prefix_refuses_a_node_agent(world: World) -> None:
    # The third global folder: lib/node two folders above node's real file (an nvm-style
    # install under HOME, say).
    node = shutil.which("node")
    assert node is not None
    prefix = world.root / "node-prefix"
    (prefix / "bin").mkdir(parents=True)
    # (a copy: a hard link of the machine's node would change its file under every other
    # test judging it at the same time)
    shutil.copy2(os.path.realpath(node), prefix / "bin" / "node")
    (prefix / "lib" / "node" / "optional-extra").mkdir(parents=True)
    new = world.new_claude()
    outcome = world.spawn("claude", ["task"], policy=DEFAULT,
                          env=world.env(new.bin_dir, prefix / "bin"))  # fmt: skip
    world.assert_refused(outcome, new.marker, "lib/node")
