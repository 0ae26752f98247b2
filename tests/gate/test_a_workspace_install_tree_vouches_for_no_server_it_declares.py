"""An install tree inside the agent's working directory (a ``node_modules``, a ``.venv``)
vouches for no MCP server: the repository that declares the server in its own settings can
write the tree too, and its metadata can state any version over any code. A server run from
there is the package's code by its layout, at a version unknown: refused under either
policy, as it would be with no metadata (which must never turn a refusal into a permit);
below the floor it refuses as that version. The same tree outside the workspace is an
installation like any other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.mcp_lab import (
    IN_THE_WORKSPACE,
    Lab,
    assert_refused_in_the_workspace,
    assert_server_permitted,
    mcp_remote,
    servers,
    write,
)
from probes import aider_install


def _gemini_with(lab: Lab, server: dict[str, object]) -> tuple[bool, str]:
    write(lab.project / ".gemini" / "settings.json", servers(s=server))
    return lab.spawn("gemini", "-p", "t")


@pytest.mark.parametrize("policy", ["refuse", "allow"])
def test_a_node_server_from_the_workspaces_node_modules_is_of_an_unknown_version(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    # Its layout makes it mcp-remote's code, as with no metadata at all; the metadata the
    # repository wrote cannot say which version: refused under either policy, as it would be
    # with no package.json (metadata never turns a refusal into a permit).
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", policy)
    entry = mcp_remote(lab.project, "0.1.16")  # (0.0.5 to 0.1.15 are affected)
    started, reason = _gemini_with(lab, {"command": "node", "args": [str(entry)]})
    assert not started
    assert IN_THE_WORKSPACE in reason and "mcp-remote 0.1.16" in reason, reason


def test_a_node_server_from_the_workspaces_node_modules_below_its_floor_refuses(
    lab: Lab,
) -> None:
    entry = mcp_remote(lab.project, "0.1.15")
    started, reason = _gemini_with(lab, {"command": "node", "args": [str(entry)]})
    assert not started
    assert "mcp-remote" in reason and "0.1.15" in reason, reason


@pytest.mark.parametrize("policy", ["refuse", "allow"])
def test_a_python_server_from_the_workspaces_venv_is_of_an_unknown_version(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", policy)
    aider_install(lab.project / ".venv", "0.70.0")
    python = lab.project / ".venv" / "bin" / "python"
    server = {"command": str(python), "args": ["-P", "-m", "aider"]}
    assert_refused_in_the_workspace(_gemini_with(lab, server))


@pytest.mark.parametrize("where", ["node_modules", ".venv"])
def test_the_same_tree_outside_the_workspace_is_an_installation(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    if where == "node_modules":
        entry = mcp_remote(lab.root / "tools", "0.1.16")
        server: dict[str, object] = {"command": "node", "args": [str(entry)]}
        expected = ("mcp-remote", "0.1.16")
    else:
        aider_install(lab.root / "tools" / ".venv", "0.70.0")
        python = lab.root / "tools" / ".venv" / "bin" / "python"
        server = {"command": str(python), "args": ["-P", "-m", "aider"]}
        expected = ("aider", "0.70.0")
    started, reason = _gemini_with(lab, server)
    assert started, reason
    assert_server_permitted(lab, *expected)


def _installed_with_its_bin(folder: Path, version: str) -> Path:
    """mcp-remote ``version`` installed in ``folder/node_modules`` with its bin link, as
    ``npm install`` leaves it (npx runs such a local install when it matches a pinned spec)."""
    package = folder / "node_modules" / "mcp-remote"
    write(package / "package.json", json.dumps(
        {"name": "mcp-remote", "version": version, "bin": {"mcp-remote": "index.js"}}
    ))  # fmt: skip
    entry = write(package / "index.js", "#!/usr/bin/env node\nprocess.exit(0)\n")
    entry.chmod(0o755)
    link = folder / "node_modules" / ".bin" / "mcp-remote"
    link.parent.mkdir()
    link.symlink_to("../mcp-remote/index.js")
    return entry


def test_a_tree_in_the_declaring_projects_folder_above_the_agents_vouches_for_nothing(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A monorepo: claude runs in a package's folder and reads the root's .mcp.json, whose
    # server runs from the root's node_modules, which the same repository wrote.
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    entry = mcp_remote(lab.project, "0.1.16")
    write(lab.project / ".mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    (lab.project / "pkg").mkdir()
    assert_refused_in_the_workspace(lab.spawn("claude", "-p", "t", cwd=lab.project / "pkg"))


def test_npx_of_a_pinned_spec_the_workspaces_own_install_matches_vouches_for_nothing(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # npx runs a local install whose package.json matches the pinned spec, without fetching.
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    _installed_with_its_bin(lab.project, "0.1.16")
    server = {"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
    assert_refused_in_the_workspace(_gemini_with(lab, server))


def test_a_home_that_is_the_agents_working_directory_holds_no_cache_a_server_may_run_from(
    lab: Lab,
) -> None:
    # (npx's cache, ~/.npm/_npx, would be the repository's: it could ship the tree npx runs)
    started, reason = _gemini_with(lab, {"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]})
    assert started, reason
    write(lab.project / ".gemini" / "settings.json", servers(
        s={"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
    ))  # fmt: skip
    started, reason = lab.spawn("gemini", "-p", "t", env=lab.env(HOME=str(lab.project)))
    assert not started
    assert f"HOME={lab.project}" in reason and "cache" in reason, reason


def test_a_servers_reason_names_the_package_to_pin_not_a_placeholder(lab: Lab) -> None:
    # A declaration's arguments are recorded by their place (any may be a credential), but
    # a package the map names is what the reason is about, and public.
    started, _ = _gemini_with(lab, {"command": "npx", "args": ["-y", "mcp-remote"]})
    assert not started
    [server] = lab.last_receipt()["mcp_servers"]
    assert "pin the version (mcp-remote@X.Y.Z)" in server["reason"], server
    assert "<argument 2>" not in server["reason"], server


def test_a_server_named_as_the_package_is_refused_naming_the_metadata_set_aside(
    lab: Lab,
) -> None:
    # The bin link npm makes, declared by its path: requested under the package's own name.
    _installed_with_its_bin(lab.project, "0.1.16")
    bin_link = lab.project / "node_modules" / ".bin" / "mcp-remote"
    outcome = _gemini_with(lab, {"command": str(bin_link)})
    assert_refused_in_the_workspace(outcome)
    assert "not recognised as" not in outcome[1], outcome


def test_npx_of_a_pinned_spec_runs_a_monorepos_hoisted_install_which_vouches_for_nothing(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # npm workspaces: the root declares them and holds the hoisted installs; the agent runs
    # in a member, whose own settings declare the server.
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    write(lab.project / "package.json", json.dumps({"name": "mono", "workspaces": ["app"]}))
    _installed_with_its_bin(lab.project, "0.1.16")
    member = lab.project / "app"
    write(member / ".gemini" / "settings.json", servers(
        s={"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
    ))  # fmt: skip
    assert_refused_in_the_workspace(lab.spawn("gemini", "-p", "t", cwd=member))


def test_a_home_at_the_repositorys_root_above_the_agent_holds_no_cache_a_server_may_run_from(
    lab: Lab,
) -> None:
    # The host gave the agent the repository's root for a home and ran it in a subfolder:
    # npx's cache (~/.npm/_npx) is the repository's to fill.
    (lab.project / ".git").mkdir()
    member = lab.project / "app"
    write(member / ".gemini" / "settings.json", servers(
        s={"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
    ))  # fmt: skip
    started, reason = lab.spawn("gemini", "-p", "t", cwd=member, env=lab.env(HOME=str(lab.project)))
    assert not started
    assert f"HOME={lab.project}" in reason and "cache" in reason, reason


def test_an_extension_folder_the_workspace_links_elsewhere_stays_the_workspaces(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    tools = lab.root / "elsewhere" / "ext"
    entry = mcp_remote(tools, "0.1.16")
    write(tools / "gemini-extension.json", json.dumps({
        "name": "x", "version": "1.0.0",
        "mcpServers": {"s": {"command": "node", "args": [str(entry)], "cwd": "${extensionPath}"}},
    }))  # fmt: skip
    (lab.project / ".gemini" / "extensions").mkdir(parents=True)
    (lab.project / ".gemini" / "extensions" / "x").symlink_to(tools)
    assert_refused_in_the_workspace(lab.spawn("gemini", "-p", "t"))


def test_a_users_own_server_runs_from_a_tree_in_the_users_home_as_an_installation(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's settings folder is no project's: its server's tree is the user's install.
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    entry = mcp_remote(lab.home / "tools", "0.1.16")
    write(lab.home / ".gemini" / "settings.json", servers(
        s={"command": "node", "args": [str(entry)]}
    ))  # fmt: skip
    started, reason = lab.spawn("gemini", "-p", "t")
    assert started, reason
    assert_server_permitted(lab, "mcp-remote", "0.1.16")


def test_a_python_server_importing_a_package_from_a_workspace_pythonpath_is_refused(
    lab: Lab, tmp_path: Path
) -> None:
    # The server's env puts a workspace folder holding aider and a dist-info claiming 0.86.0
    # on PYTHONPATH: without the dist-info it is aider of no known version, and with it too.
    outside = tmp_path / "outside"
    aider_install(outside, "0.86.0")
    [site] = outside.glob("lib/python*/site-packages")
    shutil.copytree(site, lab.project / "lib")
    python = outside / "bin" / "python"
    started, reason = _gemini_with(lab, {
        "command": str(python), "args": ["-P", "-m", "aider"],
        "env": {"PYTHONPATH": str(lab.project / "lib")},
    })  # fmt: skip
    assert not started
    assert "aider" in reason, reason
    [server] = lab.last_receipt()["mcp_servers"]
    assert server["verdict"] == "refuse" and server["adapter"] == "aider", server
