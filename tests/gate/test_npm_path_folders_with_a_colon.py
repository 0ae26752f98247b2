"""npm puts folders of its own on the PATH it gives the bin, each as it is: the npx
cache's ``<cache>/_npx/<hash>/node_modules/.bin`` (the cache under HOME by default), the
global prefix's ``bin``, its own ``node-gyp-bin``. A ``:`` in any of them splits that entry,
and the part after it is a relative entry searched from the working directory, where a file
of the bin's name (or a ``node``, a ``sh``) runs instead of what was judged: refused."""

from __future__ import annotations

import shutil

import pytest
from helpers.mcp_lab import Lab, servers, write
from probes import node_with_npm

import floorguard

SPEC = "mcp-remote@0.1.16"


def test_a_home_with_a_colon_refuses_npx(lab: Lab) -> None:
    home = lab.root / "a:b"
    home.mkdir()
    started, reason = lab.spawn("npx", "-y", SPEC, env=lab.env(HOME=str(home)))
    assert not started
    assert "':'" in reason and "HOME" in reason, reason


@pytest.mark.parametrize("key", ["cache", "prefix"])
def test_a_user_npm_folder_with_a_colon_refuses_npx(lab: Lab, key: str) -> None:
    folder = lab.root / "c:x"
    write(lab.home / ".npmrc", f"{key}={folder}\n")
    started, reason = lab.spawn("npx", "-y", SPEC)
    assert not started
    assert "':'" in reason and key in reason, reason


def test_an_mcp_server_given_a_home_with_a_colon_refuses_the_agent(lab: Lab) -> None:
    home = lab.root / "a:b"
    home.mkdir()
    server = {"command": "npx", "args": ["-y", SPEC], "env": {"HOME": str(home)}}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "':'" in reason, reason


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_npm_installed_in_a_folder_with_a_colon_refuses_npx(lab: Lab) -> None:
    """npm's own ``node-gyp-bin`` is on the bin's PATH too: ``<d>/x:y/...`` splits."""
    npm_bin = node_with_npm(lab.root / "x:y")
    script = npm_bin.parent / "lib" / "node_modules" / "npm" / "bin" / "npx-cli.js"
    with pytest.raises(floorguard.SpawnRefused) as refused:
        floorguard.spawn("node", [str(script), "-y", SPEC], env=lab.env(), cwd=str(lab.project))
    assert "':'" in str(refused.value) and "x:y" in str(refused.value), refused.value


def test_npm_folders_without_a_colon_still_run_npx(lab: Lab) -> None:
    write(lab.home / ".npmrc", f"cache={lab.root / 'cache'}\nprefix={lab.root / 'prefix'}\n")
    child = floorguard.spawn("npx", ["-y", SPEC], env=lab.env(), cwd=str(lab.project))
    child.wait(timeout=30)
    assert (lab.last_receipt()["verdict"], lab.last_receipt()["version"]) == ("permit", "0.1.16")
