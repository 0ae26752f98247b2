"""Arguments and variables that make an agent take its servers, plugins or settings from
somewhere the gate does not read refuse the agent; the same agent without them starts.

Claude Code (2.1.332's help and code):
- ``-w``/``--worktree [name]``: creates a git worktree from HEAD (or the remote's default
  branch) and moves into it before it loads anything: its committed ``.mcp.json`` and
  ``.claude`` settings, not the working tree's that were read.
- ``--project-config-root DIR``: the project settings, ``.mcp.json`` and ``.claude`` trees
  of DIR instead of the working directory's.
- ``--plugin-dir``, ``--plugin-dir-no-mcp``, ``--plugin-url`` (any ``--plugin...``) and
  ``CLAUDE_CODE_PLUGIN_DIRS`` (in the environment or a settings ``env``): a plugin, whose
  servers, hooks and agents are not read.
- ``--await-initialize``: plugins and MCP servers from the first request on its stdin.
- ``CLAUDE_CODE_REMOTE_SETTINGS_PATH``: a settings file taken for the organisation's.
- ``--managed-settings JSON``: the policy tier of settings, read as ``--settings`` is
  (its ``env`` judged, an enabled plugin refused).

Gemini CLI ``--acp`` (``--experimental-acp``): the client's ``session/new`` gives the stdio
servers to start, and a folder whose settings are loaded, at run time.

Real spawns in the lab of tests/helpers/mcp_lab.py (native stand-ins that leave a marker).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.mcp_lab import OLD_AIDER, Lab, exec_with_etc, project_claude, servers, write

import floorguard


def _git(lab: Lab, *args: str) -> None:
    subprocess.run(["git", "-C", str(lab.project), *args], check=True, capture_output=True)


@pytest.mark.parametrize(
    "argv",
    [["-w"], ["--worktree"], ["--worktree=feature"], ["--worktree", "feature"], ["-wfeature"],
     ["-pw"], ["-p", "task", "-w"]],
    ids=["short", "long", "equals", "long-named", "attached", "grouped", "after-prompt"],
)  # fmt: skip
def test_claude_told_to_start_in_a_new_worktree_is_refused(lab: Lab, argv: list[str]) -> None:
    """The committed ``.mcp.json`` declares a below-floor aider; the working tree's does not
    exist (removed, not committed): a gate reading the working tree finds nothing."""
    _git(lab, "init", "-q")
    write(lab.project / ".mcp.json", servers(old=OLD_AIDER))
    _git(lab, "add", ".mcp.json")
    _git(lab, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "servers")
    (lab.project / ".mcp.json").unlink()
    started, reason = lab.spawn("claude", *argv)
    assert not started, f"claude started with {argv}"
    assert "worktree" in reason, reason


def test_claude_with_a_worktree_only_after_its_arguments_end_starts(lab: Lab) -> None:
    started, reason = lab.spawn("claude", "-p", "write", "--", "-w")
    assert started, reason


@pytest.mark.parametrize("spelling", ["separate", "equals"])
def test_claude_reading_its_project_configuration_elsewhere_is_refused(
    lab: Lab, spelling: str
) -> None:
    root = lab.root / "elsewhere"
    write(root / ".mcp.json", servers(old=OLD_AIDER))
    argv = (
        ["--project-config-root", str(root)]
        if spelling == "separate"
        else [f"--project-config-root={root}"]
    )
    started, reason = lab.spawn("claude", *argv, "-p", "task")
    assert not started, "claude started with its project configuration read elsewhere"
    assert "--project-config-root" in reason, reason


@pytest.mark.parametrize(
    "argv",
    [["--plugin-dir", "plug"], ["--plugin-dir-no-mcp", "plug"], ["--plugin-dir-no-mcp=plug"],
     ["--plugin-url", "https://example.invalid/p.zip"], ["--plugin-anything", "x"]],
    ids=["dir", "dir-no-mcp", "dir-no-mcp-equals", "url", "any-plugin-option"],
)  # fmt: skip
def test_claude_given_a_plugin_by_argument_is_refused(lab: Lab, argv: list[str]) -> None:
    plugin = lab.project / "plug"
    write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "p"}))
    write(plugin / ".mcp.json", servers(old=OLD_AIDER))
    started, reason = lab.spawn("claude", *argv, "-p", "task")
    assert not started, f"claude started with {argv}"
    assert argv[0].partition("=")[0] in reason and "plugin" in reason, reason


def _plugin_folder(lab: Lab) -> str:
    plugin = lab.root / "plug"
    write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "p"}))
    write(plugin / ".mcp.json", servers(old=OLD_AIDER))
    return str(plugin)


def _remote_settings(lab: Lab) -> str:
    return str(write(lab.root / "remote.json", json.dumps({"env": {"BASH_ENV": "./x.sh"}})))


# Variables naming what claude loads from where nothing is read, and what they name.
NAMING_WHAT_IS_NOT_READ = {
    "CLAUDE_CODE_PLUGIN_DIRS": _plugin_folder,
    "CLAUDE_CODE_REMOTE_SETTINGS_PATH": _remote_settings,
}


@pytest.mark.parametrize("where", ["environment", "project settings", "home settings"])
@pytest.mark.parametrize("variable", sorted(NAMING_WHAT_IS_NOT_READ))
def test_claude_given_a_variable_naming_what_is_not_read_is_refused(
    lab: Lab, variable: str, where: str
) -> None:
    value = NAMING_WHAT_IS_NOT_READ[variable](lab)
    env = lab.env()
    if where == "environment":
        env[variable] = value
    else:
        folder = lab.project if where == "project settings" else lab.home
        write(folder / ".claude" / "settings.json", json.dumps({"env": {variable: value}}))
    started, reason = lab.spawn("claude", "-p", "task", env=env)
    assert not started, f"claude started with {variable} from its {where}"
    assert variable in reason, reason


def test_claude_told_to_read_its_launch_options_from_stdin_is_refused(lab: Lab) -> None:
    started, reason = lab.spawn("claude", "--await-initialize", "-p", "task")
    assert not started, "claude started taking plugins and servers from its stdin"
    assert "--await-initialize" in reason, reason


@pytest.mark.parametrize("spelling", ["separate", "equals"])
@pytest.mark.parametrize(
    "settings",
    [{"env": {"BASH_ENV": "./start.sh"}}, {"enabledPlugins": {"p@market": True}}],
    ids=["env", "plugin"],
)
def test_claude_s_policy_settings_by_argument_are_read_as_its_other_settings(
    lab: Lab, settings: dict[str, object], spelling: str
) -> None:
    text = json.dumps(settings)
    argv = ["--managed-settings", text]
    if spelling == "equals":
        argv = [f"--managed-settings={text}"]
    started, reason = lab.spawn("claude", *argv, "-p", "task")
    assert not started, f"claude started with --managed-settings {text}"
    assert ("BASH_ENV" in reason) or ("p@market" in reason), reason


def test_claude_s_policy_settings_that_load_nothing_start_it(lab: Lab) -> None:
    text = json.dumps({"env": {"DISABLE_TELEMETRY": "1"}, "permissions": {"deny": ["Bash"]}})
    started, reason = lab.spawn("claude", "--managed-settings", text, "-p", "task")
    assert started, reason


@pytest.mark.parametrize(
    "argv",
    [["--acp"], ["--experimental-acp"], ["--experimentalAcp"], ["--acp=true"],
     ["-p", "t", "--acp"]],
    ids=["acp", "experimental", "camel", "equals", "after-prompt"],
)  # fmt: skip
def test_gemini_run_for_a_client_that_names_its_servers_is_refused(
    lab: Lab, argv: list[str]
) -> None:
    started, reason = lab.spawn("gemini", *argv)
    assert not started, f"gemini started with {argv}"
    assert "acp" in reason.lower(), reason


def test_gemini_with_acp_only_after_its_arguments_end_starts(lab: Lab) -> None:
    started, reason = lab.spawn("gemini", "-p", "write", "--", "--acp")
    assert started, reason


# ======================================================== claude's options: those known, only


@pytest.mark.parametrize(
    "argv",
    [["--channels", "plugin:srv", "-p", "task"], ["--dangerously-load-development-channels", "x"],
     ["--file", "file_abc:.mcp.json", "-p", "task"], ["-p", "task", "--bg"], ["-x"]],
    ids=["channels", "development-channels", "file-download", "background", "unknown-short"],
)  # fmt: skip
def test_claude_given_an_option_the_gate_does_not_know_is_refused(
    lab: Lab, argv: list[str]
) -> None:
    """Claude Code's hidden options (its help does not list them) include ones that start
    servers (``--channels <servers...>``) or write files before it reads its configuration
    (``--file``): a session option the gate does not know refuses, named."""
    started, reason = lab.spawn("claude", *argv)
    assert not started, f"claude started with {argv}"
    assert "does not know" in reason, reason


@pytest.mark.parametrize(
    "argv",
    [["-p", "task", "--model", "opus", "--output-format", "stream-json", "--verbose"],
     ["--system-prompt", "--channels are mentioned here", "-p", "task"],
     ["--allowedTools", "Bash(git *)", "Edit", "--max-turns", "3", "-p", "task"],
     ["-r", "-p", "task"], ["-dapi", "-p", "task"], ["-c", "-p", "t", "--fork-session"],
     ["-p", "--", "--channels"]],
    ids=["print", "value-like-an-option", "variadic", "optional-value", "attached", "continue",
         "after-double-dash"],
)  # fmt: skip
def test_claude_with_options_the_gate_knows_starts(lab: Lab, argv: list[str]) -> None:
    started, reason = lab.spawn("claude", *argv)
    assert started, reason


@pytest.mark.parametrize("declares", [True, False], ids=["servers", "no-servers"])
def test_claude_given_its_agents_in_a_file_is_judged_by_the_file(lab: Lab, declares: bool) -> None:
    """``--agents`` takes JSON, or (2.1.332, with --print) the path of a file holding it."""
    agent: dict[str, object] = {"description": "d", "prompt": "p"}
    if declares:
        agent["mcpServers"] = {"old": OLD_AIDER}
    write(lab.project / "agents.json", json.dumps({"helper": agent}))
    started, reason = lab.spawn("claude", "--agents", "agents.json", "-p", "task")
    assert started != declares, reason
    if declares:
        assert "--agents" in reason and "MCP servers" in reason, reason


@pytest.mark.parametrize(
    "launch",
    [("npx", "-y", "--"), ("npm", "exec", "--yes", "--"), ("npx", "--yes")],
    ids=["npx", "npm-exec", "npx-no-double-dash"],
)
def test_claude_run_by_a_launcher_with_an_option_the_gate_does_not_know_is_refused(
    lab: Lab, launch: tuple[str, ...]
) -> None:
    app = lab.project / "app"
    project_claude(app)
    started, reason = lab.spawn(
        *launch, "@anthropic-ai/claude-code@1.0.30", "--channels", "srv", "-p", "t", cwd=app
    )
    assert not started, f"claude started through {launch} with --channels"
    assert "--channels" in reason and "does not know" in reason, reason


# ====================================================== an agent run through env, as env runs it


def _through_env(lab: Lab, *argv: str) -> tuple[bool, str]:
    """``env ARGV`` spawned for claude: (started, reason), claude's marker checked."""
    try:
        child = floorguard.spawn("env", list(argv), env=lab.env(), cwd=str(lab.project))
    except floorguard.SpawnRefused as refused:
        assert not lab.marker("claude").exists()
        return False, str(refused)
    child.wait(timeout=30)
    assert lab.marker("claude").exists()
    lab.marker("claude").unlink()
    return True, ""


@pytest.mark.parametrize(
    "env_argv",
    [["HOME={home}"], ["-u", "HOME", "HOME={home}"], ["-i", "PATH={path}", "HOME={home}"],
     ["--", "HOME={home}"]],
    ids=["assigned", "unset-then-assigned", "emptied", "after-double-dash"],
)  # fmt: skip
def test_claude_run_through_env_is_read_with_the_environment_env_gives_it(
    lab: Lab, env_argv: list[str]
) -> None:
    """``env HOME=X claude`` reads X's ``.claude.json``: the servers declared there are
    judged, as when HOME=X is in the spawn's own environment."""
    other = lab.root / "other-home"
    write(other / ".claude.json", servers(old=OLD_AIDER))
    argv = [a.format(home=other, path=lab.env()["PATH"]) for a in env_argv]
    started, reason = _through_env(lab, *argv, "claude", "-p", "task")
    assert not started, f"claude started through env {argv} with a below-floor server"
    assert "MCP server 'old'" in reason and "aider 0.50.0" in reason, reason


def test_claude_run_through_env_is_refused_for_what_env_sets_as_its_environment_is(
    lab: Lab,
) -> None:
    started, reason = _through_env(
        lab, f"CLAUDE_CODE_PLUGIN_DIRS={_plugin_folder(lab)}", "claude", "-p", "task"
    )
    assert not started and "CLAUDE_CODE_PLUGIN_DIRS" in reason, reason


def test_claude_run_through_env_with_nothing_moved_starts(lab: Lab) -> None:
    started, reason = _through_env(lab, "LANG=C.UTF-8", "claude", "-p", "task")
    assert started, reason


def test_an_agent_sdk_host_s_own_server_starts_nothing_and_is_recorded_as_remote(
    lab: Lab,
) -> None:
    """The Agent SDK passes its in-process servers as ``{"type": "sdk", "name": ...}`` in
    --mcp-config: claude starts nothing for them (their calls go back to the SDK host)."""
    config = json.dumps({"mcpServers": {"tools": {"type": "sdk", "name": "tools"}}})
    started, reason = lab.spawn(
        "claude", "--output-format", "stream-json", "--verbose", "--input-format",
        "stream-json", "--mcp-config", config, "--thinking", "adaptive", "--session-mirror",
    )  # fmt: skip
    assert started, reason
    (server,) = lab.last_receipt()["mcp_servers"]
    assert (server["name"], server["transport"], server["verdict"]) == ("tools", "remote", "remote")


@pytest.mark.parametrize(
    "entry",
    [{"type": "sdk", "name": "t", "command": "aider"}, {"type": "sdk", "name": 5},
     {"type": "sdk"}],
    ids=["with-a-command", "a-number-for-its-name", "no-name"],
)  # fmt: skip
def test_an_sdk_server_of_another_shape_refuses(lab: Lab, entry: dict[str, object]) -> None:
    config = json.dumps({"mcpServers": {"t": entry}})
    started, reason = lab.spawn("claude", "--mcp-config", config, "-p", "t")
    assert not started and "mcpServers.t" in reason, reason


# ====================================================== claude under another name, and its shell


def _claude_package(lab: Lab) -> Path:
    """claude's npm package in the lab (its cli.js, a node script)."""
    package = lab.root / "pkgs" / "node_modules" / "@anthropic-ai" / "claude-code"
    write(package / "package.json", json.dumps(
        {"name": "@anthropic-ai/claude-code", "version": "2.1.50", "main": "cli.js",
         "bin": {"claude": "cli.js"}}
    ))  # fmt: skip
    write(package / "cli.js", f"#!{lab.root / 'node' / 'bin' / 'node'}\n").chmod(0o755)
    return package


SPELLINGS = ["a link of another name", "node, the script without .js", "node, the folder"]


def _claude_spelled(lab: Lab, spelling: str, *argv: str) -> tuple[str, list[str]]:
    """claude started as ``spelling`` says, with ``argv``: (program, arguments)."""
    package = _claude_package(lab)
    if spelling == "a link of another name":
        (lab.bin / "cc").symlink_to(package / "cli.js")
        return "cc", list(argv)
    entry = package / "cli" if spelling.endswith(".js") else package
    return "node", [str(entry), *argv]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_claude_under_another_name_with_options_it_knows_starts(lab: Lab, spelling: str) -> None:
    program, argv = _claude_spelled(lab, spelling, "-p", "t", "--model", "x", "--max-turns", "3")
    child = floorguard.spawn(program, argv, env=lab.env(), cwd=str(lab.project))
    child.kill()
    child.wait(timeout=30)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_claude_under_another_name_has_its_options_read_as_a_session_s(
    lab: Lab, spelling: str
) -> None:
    program, argv = _claude_spelled(lab, spelling, "--channels", "x", "-p", "t")
    try:
        child = floorguard.spawn(program, argv, env=lab.env(), cwd=str(lab.project))
    except floorguard.SpawnRefused as refused:
        assert "--channels" in str(refused) and "does not know" in str(refused), refused
        return
    child.wait(timeout=30)
    pytest.fail(f"claude ({spelling}) started with --channels")


@pytest.mark.parametrize(
    "variable", ["CLAUDE_ENV_FILE", "CLAUDE_CODE_SHELL_PREFIX", "CLAUDE_CODE_SHELL"]
)
@pytest.mark.parametrize("where", ["environment", "project settings"])
def test_claude_given_a_file_or_program_it_runs_before_its_commands_is_refused(
    lab: Lab, variable: str, where: str
) -> None:
    """CLAUDE_ENV_FILE is sourced before every Bash tool command (as BASH_ENV is);
    CLAUDE_CODE_SHELL_PREFIX names a program claude starts every stdio server (and command)
    through, CLAUDE_CODE_SHELL the shell of its Bash tool: none is judged."""
    value = str(lab.bin / "aider")
    env = lab.env()
    if where == "environment":
        env[variable] = value
    else:
        write(lab.project / ".claude" / "settings.json", json.dumps({"env": {variable: value}}))
    started, reason = lab.spawn("claude", "-p", "task", env=env)
    assert not started, f"claude started with {variable} from its {where}"
    assert variable in reason, reason


@pytest.mark.parametrize(
    "settings",
    [{"env": {"BASH_ENV": "./start.sh"}}, {"enabledPlugins": {"p@market": True}}, "not json"],
    ids=["env", "plugin", "unreadable"],
)
def test_claude_s_managed_settings_drop_ins_are_read_as_its_managed_settings(
    lab: Lab, settings: object
) -> None:
    text = settings if isinstance(settings, str) else json.dumps(settings)
    ran = exec_with_etc(
        lab, {"claude-code/managed-settings.d/10-team.json": text}, "claude", "--", "-p", "t"
    )
    assert ran.returncode == 126, ran.stdout + ran.stderr
    named = "BASH_ENV" if "env" in text else "managed-settings.d/10-team.json"
    assert named in ran.stderr, ran.stderr


@pytest.mark.parametrize("option", ["--settings", "--managed-settings"])
@pytest.mark.parametrize(
    "around", ["\ufeff", " \u2028", "\ufeff\n"], ids=["bom", "space-ls", "bom-nl"]
)
def test_claude_s_inline_settings_are_read_after_javascript_s_trim(
    lab: Lab, option: str, around: str
) -> None:
    """Claude trims a settings value as JavaScript trims (U+FEFF, line separators) before it
    tells inline JSON from a file: read here as it reads it, not taken for a missing file."""
    text = around + json.dumps({"env": {"CLAUDE_CODE_SHELL_PREFIX": str(lab.bin / "aider")}})
    started, reason = lab.spawn("claude", option, text, "-p", "task")
    assert not started, f"claude started with {option} {text!r}"
    assert "CLAUDE_CODE_SHELL_PREFIX" in reason, reason


@pytest.mark.parametrize(
    "settings",
    [{"env": {"BASH_ENV": "./x.sh"}}, {"enabledPlugins": {"p@market": True}}],
    ids=["env", "plugin"],
)
def test_claude_s_cached_remote_settings_are_read_as_its_settings(
    lab: Lab, settings: dict[str, object]
) -> None:
    """``remote-settings.json`` in claude's config folder: its cached copy of the
    organisation's settings, which releases apply (over the managed file, 2.1.119)."""
    write(lab.home / ".claude" / "remote-settings.json", json.dumps(settings))
    started, reason = lab.spawn("claude", "-p", "task")
    assert not started, f"claude started with remote settings {settings}"
    assert "BASH_ENV" in reason or "p@market" in reason, reason
