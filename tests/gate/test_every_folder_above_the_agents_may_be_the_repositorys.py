"""Where a checkout's root is cannot be told: a repository needs no marker (an exported
tarball, a CI artifact), and version control systems, monorepo tools and submodules mark
it in ways of their own. So every folder above the agent's working directory, and above
the folder of each file that declares its servers, is taken as the repository's, whole:
an install tree anywhere in it vouches for no MCP server. The folders shared with other
installs are the exception: the user's home and the folders above it, and the system's
(``/usr``, ``/opt``, ...), where only a ``node_modules`` (which node and npx search from
below) is the repository's, unless a repository marks one as its root.

Once only the nearest ``.git`` and the nearest npm ``workspaces`` root counted: a
Mercurial monorepo's root ``node_modules`` holding gemini's code of 0.1.0 under a
package.json saying 0.2.0 ran as a server of claude under a permit recording gemini 0.2.0.
"""

from __future__ import annotations

import json
import subprocess
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
from probes import aider_install, plain_interpreter


@pytest.fixture(autouse=True)
def _deny_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")


def _claude_in(lab: Lab, folder: Path, entry: Path) -> tuple[bool, str]:
    """claude run in ``folder``, whose .mcp.json runs ``entry`` with node."""
    write(folder / ".mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    return lab.spawn("claude", "-p", "t", cwd=folder)


def _permitted_as_mcp_remote(lab: Lab, outcome: tuple[bool, str]) -> None:
    started, reason = outcome
    assert started, reason
    assert_server_permitted(lab, "mcp-remote", "0.1.16")


def _mcp_remote_bin(folder: Path) -> Path:
    """mcp-remote installed in ``folder/node_modules`` with its bin link; the bin folder."""
    entry = mcp_remote(folder)
    manifest = {"name": "mcp-remote", "version": "0.1.16", "bin": {"mcp-remote": "index.js"}}
    write(entry.parent / "package.json", json.dumps(manifest))
    entry.write_text("#!/usr/bin/env node\nprocess.exit(0)\n")
    entry.chmod(0o755)
    bins = folder / "node_modules" / ".bin"
    bins.mkdir()
    (bins / "mcp-remote").symlink_to(entry)
    return bins


@pytest.mark.parametrize(
    "mark", ["none", ".hg", ".jj", ".svn", ".git", "pnpm-workspace.yaml", "lerna.json"]
)
@pytest.mark.parametrize("tree", [".", "tools/server"])
def test_a_tree_anywhere_in_a_folder_above_the_agents_vouches_for_nothing(
    lab: Lab, mark: str, tree: str
) -> None:
    root = lab.project
    if mark.startswith("."):
        (root / mark).mkdir(parents=True)
    elif mark != "none":
        write(root / mark, "{}\n")
    entry = mcp_remote(root / tree)
    assert_refused_in_the_workspace(_claude_in(lab, root / "packages" / "app", entry))


def test_a_superprojects_tree_above_a_submodule_vouches_for_nothing(lab: Lab) -> None:
    write(lab.project / ".git" / "HEAD", "ref: refs/heads/main\n")
    submodule = lab.project / "libs" / "sub"
    write(submodule / ".git", "gitdir: ../../.git/modules/sub\n")
    assert_refused_in_the_workspace(_claude_in(lab, submodule, mcp_remote(lab.project)))


def test_an_outer_workspaces_root_above_a_nested_one_is_the_repositorys_too(lab: Lab) -> None:
    write(lab.project / "package.json", json.dumps({"workspaces": ["packages/*"]}))
    inner = lab.project / "packages" / "sub"
    write(inner / "package.json", json.dumps({"workspaces": ["apps/*"]}))
    entry = mcp_remote(lab.project)
    assert_refused_in_the_workspace(_claude_in(lab, inner / "apps" / "app", entry))


def test_the_folders_above_codexs_working_folder_are_the_repositorys(lab: Lab) -> None:
    # codex started elsewhere with -C: its folder's repository is above that folder.
    (lab.project / ".git").mkdir()
    entry = mcp_remote(lab.project)
    folder = lab.project / "pkg"
    write(folder / ".codex" / "config.toml",
          f'[mcp_servers.s]\ncommand = "node"\nargs = [{json.dumps(str(entry))}]\n')  # fmt: skip
    scratch = lab.root / "scratch"
    scratch.mkdir()
    assert_refused_in_the_workspace(lab.spawn("codex", "-C", str(folder), "exec", "t", cwd=scratch))


def test_a_tree_beside_a_configuration_file_named_on_the_command_line_vouches_for_nothing(
    lab: Lab,
) -> None:
    other = lab.root / "checkouts" / "tools-repo"
    entry = mcp_remote(other)
    config = write(other / "mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    assert_refused_in_the_workspace(lab.spawn("claude", "--mcp-config", str(config), "-p", "t"))


def test_a_configuration_file_named_through_a_link_is_its_checkouts_where_it_lies(
    lab: Lab,
) -> None:
    # (the link lies in a folder above the home, which is shared: its target's is not)
    tools = lab.root / "checkouts" / "repo" / "tools"
    entry = mcp_remote(tools)
    write(tools / "mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    (lab.root / "cfg.json").symlink_to(tools / "mcp.json")
    named = str(lab.root / "cfg.json")
    assert_refused_in_the_workspace(lab.spawn("claude", "--mcp-config", named, "-p", "t"))


def test_a_home_given_as_the_project_has_its_node_modules_taken_as_the_repositorys(
    lab: Lab,
) -> None:
    # A container that makes the checkout the home, with no marker: ~/node_modules is what
    # node and npx search from the agent's folder below it.
    app = lab.project / "app"
    write(lab.project / ".mcp.json", servers(
        s={"command": "node", "args": [str(mcp_remote(lab.project))]}
    ))  # fmt: skip
    app.mkdir()
    started, reason = lab.spawn("claude", "-p", "t", cwd=app, env=lab.env(HOME=str(lab.project)))
    assert not started
    assert IN_THE_WORKSPACE in reason, reason


@pytest.mark.parametrize("where", [".", ".home"])
def test_a_home_at_or_below_the_agents_folder_shares_nothing_above_it(lab: Lab, where: str) -> None:
    # The host made the agent's folder (or a folder in it) the home: the folders above the
    # agent stay the repository's, whole.
    agent = lab.project / "packages" / "app"
    entry = mcp_remote(lab.project / "tools" / "x")
    write(agent / ".mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    home = agent / where
    home.mkdir(exist_ok=True)
    started, reason = lab.spawn("claude", "-p", "t", cwd=agent, env=lab.env(HOME=str(home)))
    assert not started
    assert IN_THE_WORKSPACE in reason, reason


@pytest.mark.parametrize(
    "mark", ["_darcs", ".sl", "CVS", ".repo", "go.work", "pyproject.toml", ".git"]
)
def test_a_home_a_repository_marks_as_its_root_is_the_repositorys_whole(
    lab: Lab, mark: str
) -> None:
    # HOME set to the checkout: a mark of a root makes all of it the repository's.
    if mark.startswith((".", "_")) or mark == "CVS":
        (lab.project / mark).mkdir()
    else:
        write(lab.project / mark, "\n")
    entry = mcp_remote(lab.project / "tools" / "x")
    app = lab.project / "app"
    write(app / ".mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    started, reason = lab.spawn("claude", "-p", "t", cwd=app, env=lab.env(HOME=str(lab.project)))
    assert not started
    assert IN_THE_WORKSPACE in reason, reason


def test_a_project_entry_of_the_global_file_makes_its_folder_the_repositorys(lab: Lab) -> None:
    # A linked worktree takes ~/.claude.json's entry of the main checkout, whose servers
    # may run from the main checkout's own trees.
    main, worktree = lab.root / "main", lab.root / "wt"
    write(main / ".git" / "HEAD", "ref: refs/heads/main\n")
    gitdir = main / ".git" / "worktrees" / "wt"
    write(gitdir / "commondir", "../..\n")
    write(gitdir / "gitdir", f"{worktree}/.git\n")
    write(worktree / ".git", f"gitdir: {gitdir}\n")
    entry = mcp_remote(main)
    write(lab.home / ".claude.json", json.dumps({"projects": {str(main): {"mcpServers": {
        "s": {"command": "node", "args": [str(entry)]}}}}}))  # fmt: skip
    assert_refused_in_the_workspace(lab.spawn("claude", "-p", "t", cwd=worktree))


def test_a_configuration_home_a_host_puts_in_a_checkout_is_that_checkouts(lab: Lab) -> None:
    # CODEX_HOME in a checkout outside the user's home: its config.toml is the checkout's.
    checkout = lab.root / "checkouts" / "repo"
    entry = mcp_remote(checkout / "tools")
    write(checkout / ".codex-home" / "config.toml",
          f'[mcp_servers.s]\ncommand = "node"\nargs = [{json.dumps(str(entry))}]\n')  # fmt: skip
    env = lab.env(CODEX_HOME=str(checkout / ".codex-home"))
    assert_refused_in_the_workspace(lab.spawn("codex", "exec", "t", env=env))


@pytest.mark.parametrize("variable", ["CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME"])
def test_a_configuration_folder_a_host_keeps_in_a_checkout_in_the_home_is_that_checkouts(
    lab: Lab, variable: str
) -> None:
    checkout = lab.home / "src" / "repo"
    (checkout / ".git").mkdir(parents=True)
    entry = mcp_remote(checkout / "tools")
    folder = checkout / "cfg" if variable == "CLAUDE_CONFIG_DIR" else checkout / "cfg" / "claude"
    write(folder / ".claude.json", servers(s={"command": "node", "args": [str(entry)]}))
    agent = lab.root / "elsewhere"
    agent.mkdir()
    env = lab.env(**{variable: str(checkout / "cfg")})
    assert_refused_in_the_workspace(lab.spawn("claude", "-p", "t", cwd=agent, env=env))


def test_a_settings_file_in_a_checkout_that_leads_path_there_is_that_checkouts(
    lab: Lab,
) -> None:
    # It declares no server, but its env sends a bare server name into the checkout's tree.
    checkout = lab.root / "checkouts" / "repo"
    bins = _mcp_remote_bin(checkout)
    settings = write(checkout / "settings.json", json.dumps(
        {"env": {"PATH": f"{bins}:{lab.bin}:/usr/bin:/bin"}}
    ))  # fmt: skip
    write(lab.home / ".claude.json", servers(s={"command": "mcp-remote"}))
    assert_refused_in_the_workspace(lab.spawn("claude", "--settings", str(settings), "-p", "t"))


def test_a_python_whose_standard_library_a_checkout_above_the_agent_holds_is_refused(
    lab: Lab,
) -> None:
    # The user's own venv, made from an interpreter the checkout vendors: that standard
    # library's encodings and sitecustomize run first, and the repository wrote them.
    (lab.project / ".git").mkdir()
    python = plain_interpreter(lab.project / ".python")
    if python is None:
        pytest.skip("this interpreter cannot be relocated")
    env = lab.home / "tools" / "venv"
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(env)], check=True)
    script = aider_install(env, "0.70.0")
    agent = lab.project / "app"
    write(agent / ".mcp.json", servers(s={"command": str(script)}))
    started, reason = lab.spawn("claude", "-p", "t", cwd=agent)
    assert not started
    assert "standard library" in reason and "lies in the workspace" in reason, reason


def _codex_runs_a_relative_server_from(lab: Lab, folder: Path) -> Path:
    """``folder`` holding mcp-remote, which the user's codex config runs by a relative path
    (codex takes it from the folder it works in)."""
    mcp_remote(folder)
    relative = '["node_modules/mcp-remote/index.js"]'
    config = f'[mcp_servers.s]\ncommand = "node"\nargs = {relative}\n'
    write(lab.home / ".codex" / "config.toml", config)
    return folder


def test_the_folder_codex_is_told_to_work_in_is_the_repositorys_without_a_config_of_its_own(
    lab: Lab,
) -> None:
    # The user's own config declares a relative command, which codex runs from -C's folder.
    other = _codex_runs_a_relative_server_from(lab, lab.home / "work" / "other")
    assert_refused_in_the_workspace(lab.spawn("codex", "-C", str(other), "exec", "t"))


def test_the_folder_an_agent_started_as_a_server_works_in_is_an_anchor_of_its_servers(
    lab: Lab,
) -> None:
    # gemini starts `codex mcp-server` in another folder; codex's own config runs a server
    # relative to that folder, whose tree the checkout there wrote.
    other = _codex_runs_a_relative_server_from(lab, lab.home / "work" / "other")
    write(lab.project / ".gemini" / "settings.json", servers(
        c={"command": "codex", "args": ["mcp-server"], "cwd": str(other)}
    ))  # fmt: skip
    assert_refused_in_the_workspace(lab.spawn("gemini", "-p", "t"))


@pytest.mark.parametrize("option", ["--settings", "--mcp-config", "CLAUDE_CONFIG_DIR"])
def test_every_folder_a_configuration_link_leads_through_is_an_anchor(
    lab: Lab, option: str
) -> None:
    # ~/cfg/x -> ~/b/x -> ~/c/x: the middle checkout's tree is reached too.
    middle, last = lab.home / "b", lab.home / "c"
    bins = _mcp_remote_bin(middle)
    if option == "CLAUDE_CONFIG_DIR":
        # the folder itself: ~/cfg -> ~/b/cfg -> ~/c/cfg
        write(last / "cfg" / ".claude.json", servers(s={"command": str(bins / "mcp-remote")}))
        (middle / "cfg").symlink_to(last / "cfg")
        (lab.home / "cfg").symlink_to(middle / "cfg")
        env = lab.env(CLAUDE_CONFIG_DIR=str(lab.home / "cfg"))
        assert_refused_in_the_workspace(lab.spawn("claude", "-p", "t", env=env))
        return
    if option == "--settings":
        body = json.dumps({"env": {"PATH": f"{bins}:{lab.bin}:/usr/bin:/bin"}})
        write(lab.home / ".claude.json", servers(s={"command": "mcp-remote"}))
    else:
        body = servers(s={"command": str(bins / "mcp-remote")})
    write(last / "x.json", body)
    (middle / "x.json").symlink_to(last / "x.json")
    (lab.home / "cfg").mkdir()
    (lab.home / "cfg" / "x.json").symlink_to(middle / "x.json")
    named = str(lab.home / "cfg" / "x.json")
    assert_refused_in_the_workspace(lab.spawn("claude", option, named, "-p", "t"))


@pytest.mark.parametrize("link", ["tools", "a/tools"])
def test_a_folder_a_workspace_link_leads_to_is_the_repositorys_even_in_a_dot_folder(
    lab: Lab, link: str
) -> None:
    # pre-commit clones the repositories a project's config names into ~/.cache/pre-commit:
    # a link from the project there reaches a checkout the repository chose.
    cache = lab.home / ".cache" / "pre-commit" / "repo1"
    mcp_remote(cache)
    project = lab.home / "src" / "proj"
    (project / link).parent.mkdir(parents=True)
    (project / link).symlink_to(cache)
    entry = project / link / "node_modules" / "mcp-remote" / "index.js"
    assert_refused_in_the_workspace(_claude_in(lab, project, entry))


def test_a_folder_a_command_climbs_to_from_a_workspace_links_target_is_the_repositorys(
    lab: Lab,
) -> None:
    # l -> elsewhere/other/sub: the kernel takes "l/../node_modules/.bin/x" from the target.
    other = lab.root / "elsewhere" / "other"
    _mcp_remote_bin(other)
    (other / "sub").mkdir()
    (lab.project / "l").symlink_to(other / "sub")
    command = "l/../node_modules/.bin/mcp-remote"
    write(lab.project / ".mcp.json", servers(s={"command": command}))
    assert_refused_in_the_workspace(lab.spawn("claude", "-p", "t"))


@pytest.mark.parametrize("how", ["the server's env", "an env PATH= argument"])
def test_a_path_entry_that_is_a_workspace_link_makes_its_target_the_repositorys(
    lab: Lab, how: str
) -> None:
    # A bare command found through <project>/bin -> a tree in a dot-folder of the home.
    bins = _mcp_remote_bin(lab.home / ".cache" / "pre-commit" / "repo1")
    (lab.project / "bin").symlink_to(bins)
    path = f"{lab.project / 'bin'}:{lab.bin}:/usr/bin:/bin"
    if how == "the server's env":
        server: dict[str, object] = {"command": "mcp-remote", "env": {"PATH": path}}
    else:
        server = {"command": "env", "args": [f"PATH={path}", "mcp-remote"]}
    write(lab.project / ".mcp.json", servers(s=server))
    assert_refused_in_the_workspace(lab.spawn("claude", "-p", "t"))


def test_a_workspace_node_modules_that_is_a_link_is_the_repositorys_where_it_leads(
    lab: Lab,
) -> None:
    # npx runs the pinned package from the project's node_modules, wherever that leads.
    cache = lab.home / ".cache" / "pre-commit" / "repo1"
    _mcp_remote_bin(cache)
    (lab.project / "node_modules").symlink_to(cache / "node_modules")
    write(lab.project / ".gemini" / "settings.json", servers(
        s={"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
    ))  # fmt: skip
    assert_refused_in_the_workspace(lab.spawn("gemini", "-p", "t"))


def test_an_extension_the_workspace_links_into_a_dot_folder_of_the_home_is_the_repositorys(
    lab: Lab,
) -> None:
    extension = lab.home / ".config" / "ext"
    entry = mcp_remote(extension)
    write(extension / "gemini-extension.json", json.dumps({
        "name": "x", "version": "1.0.0",
        "mcpServers": {"s": {"command": "node", "args": [str(entry)]}},
    }))  # fmt: skip
    (lab.project / ".gemini" / "extensions").mkdir(parents=True)
    (lab.project / ".gemini" / "extensions" / "x").symlink_to(extension)
    assert_refused_in_the_workspace(lab.spawn("gemini", "-p", "t"))


def test_a_configuration_folder_in_a_dot_folder_of_the_home_is_the_users_own(lab: Lab) -> None:
    # XDG_CONFIG_HOME at its default holds claude's config and nvm's installs alike.
    config = lab.home / ".config"
    entry = mcp_remote(config / "nvm" / "versions" / "node" / "v20.0.0" / "lib")
    write(config / "claude" / ".claude.json", servers(s={"command": "node", "args": [str(entry)]}))
    _permitted_as_mcp_remote(
        lab, lab.spawn("claude", "-p", "t", env=lab.env(CLAUDE_CONFIG_DIR=str(config / "claude")))
    )


def test_a_users_global_install_in_the_home_above_the_project_is_an_installation(
    lab: Lab,
) -> None:
    # The home is shared with the user's installs: only its node_modules is the project's.
    entry = mcp_remote(lab.home / ".npm-global" / "lib")
    project = lab.home / "src" / "proj"
    _permitted_as_mcp_remote(lab, _claude_in(lab, project, entry))


def test_a_home_named_through_a_link_is_shared_by_both_names(lab: Lab) -> None:
    # (as /home is on systems where it leads to /var/home)
    named = lab.root / "users" / "me"
    named.parent.mkdir()
    named.symlink_to(lab.home)
    entry = mcp_remote(named / ".npm-global" / "lib")
    project = named / "src" / "proj"
    write(project / ".mcp.json", servers(s={"command": "node", "args": [str(entry)]}))
    env = lab.env(HOME=str(named))
    _permitted_as_mcp_remote(lab, lab.spawn("claude", "-p", "t", cwd=project, env=env))


def test_a_tree_in_a_folder_beside_the_project_below_the_home_is_refused_too(
    lab: Lab,
) -> None:
    # The price of not knowing the root: ~/src may be the repository's (no marker needed),
    # so an install in ~/src/tools serves no agent working in ~/src/proj.
    entry = mcp_remote(lab.home / "src" / "tools")
    assert_refused_in_the_workspace(_claude_in(lab, lab.home / "src" / "proj", entry))
