"""The interpreter of a ``#!`` script is what the kernel opens by name at the exec: a file
swapped in for it after the check (the decision may wait seconds for the chain) must not
be what runs. Right before the exec, the ``#!`` line's program, and for
``#!/usr/bin/env NAME`` the file env finds on the child's PATH, must still be the files
judged; otherwise the spawn is refused and recorded, and nothing runs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hosts import Host, floor, receipt_in_chain
from probes import pip_install, write_executable

pytestmark = pytest.mark.attack

NODE = shutil.which("node")


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path, {"claude": floor("1.0.100"), "aider": floor("0.60.0")})


def _refused_and_recorded(host: Host, result: dict[str, object], *markers: Path) -> None:
    assert not result["started"], result
    assert receipt_in_chain(host, str(result["receipt_id"]))["verdict"] == "refuse"
    for marker in markers:
        assert not marker.exists(), f"{marker} ran"


def test_the_console_script_s_python_replaced_after_the_check_is_refused(
    host: Host, tmp_path: Path
) -> None:
    new_ran, old_ran = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(tmp_path / "new", dist="aider-chat", module="aider", version="0.70.0",
                         marker=new_ran)  # fmt: skip
    old = pip_install(tmp_path / "old", dist="aider-chat", module="aider", version="0.50.0",
                      marker=old_ran)  # fmt: skip
    staged = write_executable(tmp_path / "staged-python", f'#!/bin/sh\nexec {old} "$@"\n')
    [result] = host.spawn(
        adapter="aider", argv=["task"], binary=str(script),
        swap={"kind": "replace", "path": str(tmp_path / "new" / "bin" / "python"),
              "with": str(staged)},
    )  # fmt: skip
    _refused_and_recorded(host, result, new_ran, old_ran)
    assert "between check and exec" in str(result["message"]) or "now resolves to" in str(
        result["message"]
    ), result


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("how", ["put earlier on PATH", "replaced where it was found"])
def test_the_node_env_finds_after_the_check_is_refused(
    host: Host, tmp_path: Path, how: str
) -> None:
    assert NODE is not None
    ran, other_ran = tmp_path / "ran", tmp_path / "other-node-ran"
    package = tmp_path / "lib" / "node_modules" / "@anthropic-ai" / "claude-code"
    package.mkdir(parents=True)
    write_executable(
        package / "cli.js",
        f"#!/usr/bin/env node\nrequire('fs').writeFileSync({str(ran)!r}, 'ran');\n",
    )
    (package / "package.json").write_text(
        '{"name": "@anthropic-ai/claude-code", "version": "1.0.100", "bin": {"claude": "cli.js"}}',
        encoding="utf-8",
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(package / "cli.js")
    first, nodes = tmp_path / "first", tmp_path / "nodes"
    first.mkdir()
    nodes.mkdir()
    (nodes / "node").symlink_to(NODE)
    staged = write_executable(tmp_path / "staged-node", f"#!/bin/sh\n: > '{other_ran}'\n")
    where = first if how == "put earlier on PATH" else nodes
    [result] = host.spawn(
        adapter="claude", argv=["task"],
        child_env={"PATH": os.pathsep.join([str(bin_dir), str(first), str(nodes), "/usr/bin",
                                            "/bin"])},
        swap={"kind": "replace", "path": str(where / "node"), "with": str(staged)},
    )  # fmt: skip
    _refused_and_recorded(host, result, ran, other_ran)
