"""The environment an agent gives its servers is the one it builds, source by source, in
its own order. Claude Code: the working directory's ``.env`` files as Bun loads them (only
those of the mode NODE_ENV selects, the first file to set a variable keeping it, its values
trimmed byte by byte), then the global file's ``env``, then the settings files' (user,
project, local, ``--settings``), the organisation's settings last of all. Codex: its
``$CODEX_HOME/.env`` and the conditional overlays over it. A source ranked otherwise, or
credited though the agent skips it (``--setting-sources``), could hide the value a server
really runs with: here an aider 0.86.0 folder the gate would judge, where the agent runs the
lab's aider 0.50.0. A server's ``env`` name holding ``=`` sets another variable.

Real files in a temporary home and project, stand-ins (tests/helpers/mcp_lab.py).
"""

from __future__ import annotations

import json

import pytest
from helpers.mcp_lab import Lab, servers, write

pytestmark = pytest.mark.attack


def _new_aider_path(lab: Lab) -> str:
    """A PATH whose aider is 0.86.0, then the lab's folder (claude, and aider 0.50.0)."""
    lab.aider(lab.root / "newbin", "0.86.0")
    return f"{lab.root / 'newbin'}:{lab.bin}:/usr/bin:/bin"


def _refused_for_the_old_aider(lab: Lab, *argv: str, **env: str) -> None:
    started, reason = lab.spawn("claude", *argv, env=lab.env(**env))
    assert not started, "claude started a server that runs aider 0.50.0"
    assert "0.50.0" in reason, reason


@pytest.mark.parametrize(
    ("node_env", "loaded", "not_loaded"),
    [
        (None, ".env.local", ".env.test.local"),  # development: test's files never load
        ("test", ".env.test", ".env.local"),  # test: .env.local never loads
        (None, ".env.development.local", ".env.development"),  # the first file keeps it
        ("production", ".env.production", ".env"),
    ],
)
def test_the_env_files_bun_loads_give_a_server_its_values(
    lab: Lab, node_env: str | None, loaded: str, not_loaded: str
) -> None:
    safe = _new_aider_path(lab)
    server = {"command": "aider", "env": {"PATH": f"${{TOOLS_PATH:-{safe}}}"}}
    write(lab.project / ".mcp.json", servers(helper=server))
    write(lab.project / loaded, f"TOOLS_PATH={lab.bin}:/usr/bin:/bin\n")
    write(lab.project / not_loaded, f"TOOLS_PATH={safe}\n")
    extra = {} if node_env is None else {"NODE_ENV": node_env}
    _refused_for_the_old_aider(lab, "-p", "t", **extra)


def test_the_settings_files_env_wins_over_the_global_files(lab: Lab) -> None:
    safe = _new_aider_path(lab)
    write(lab.home / ".claude.json", json.dumps({"env": {"PATH": safe}}))
    write(lab.project / ".claude" / "settings.json", json.dumps({"env": {"PATH": str(lab.bin)}}))
    write(lab.project / ".mcp.json", servers(helper={"command": "aider"}))
    _refused_for_the_old_aider(lab, "-p", "t", PATH=safe)


def test_the_organisations_settings_win_over_the_projects(lab: Lab) -> None:
    safe = _new_aider_path(lab)
    write(lab.home / ".claude" / "remote-settings.json",
          json.dumps({"env": {"PATH": f"{lab.bin}:/usr/bin:/bin"}}))  # fmt: skip
    write(lab.project / ".claude" / "settings.json", json.dumps({"env": {"PATH": safe}}))
    write(lab.project / ".mcp.json", servers(helper={"command": "aider"}))
    _refused_for_the_old_aider(lab, "-p", "t", PATH=safe)


@pytest.mark.parametrize("sources", ["user", "", "user,local"])
def test_settings_files_setting_sources_leaves_out_are_not_credited(lab: Lab, sources: str) -> None:
    safe = _new_aider_path(lab)
    write(lab.project / ".claude" / "settings.json", json.dumps({"env": {"PATH": safe}}))
    write(lab.home / ".claude.json", json.dumps({"mcpServers": {"helper": {"command": "aider"}}}))
    _refused_for_the_old_aider(lab, "--setting-sources", sources, "-p", "t")


@pytest.mark.parametrize("where", ["the environment", "a .env file"])
def test_claudes_cowork_settings_switch_refuses(lab: Lab, where: str) -> None:
    # With it, claude's user settings file is cowork_settings.json, not read here.
    write(lab.home / ".claude" / "cowork_settings.json",
          json.dumps({"env": {"PATH": f"{lab.bin}:/usr/bin:/bin"}}))  # fmt: skip
    env = lab.env()
    if where == "the environment":
        env["CLAUDE_CODE_USE_COWORK_PLUGINS"] = "1"
    else:
        write(lab.project / ".env", "CLAUDE_CODE_USE_COWORK_PLUGINS=1\n")
    started, reason = lab.spawn("claude", "-p", "t", env=env)
    assert not started
    assert "CLAUDE_CODE_USE_COWORK_PLUGINS" in reason, reason


@pytest.mark.parametrize("name", ["OPENSSL_CONF=/w/ssl.cnf", "BASH_ENV=/w/start.sh", ""])
def test_a_server_env_name_that_is_no_variable_name_refuses(lab: Lab, name: str) -> None:
    # node writes NAME=VALUE as given: "OPENSSL_CONF=/w/ssl.cnf": "" sets OPENSSL_CONF.
    server = {"command": "aider", "env": {name: ""}}
    lab.aider(lab.root / "newbin", "0.86.0")
    write(
        lab.project / ".mcp.json",
        servers(helper={**server, "command": str(lab.root / "newbin" / "aider")}),
    )
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "not a variable name" in reason, reason


@pytest.mark.parametrize("value", ["{folder}/toolsà", "é{folder}"])
def test_an_unquoted_env_file_value_bun_may_trim_refuses(lab: Lab, value: str) -> None:
    # Bun trims blank bytes from the ends of a value byte by byte: 0xA0 ends "à" (C3 A0).
    safe = _new_aider_path(lab)
    server = {"command": "aider", "env": {"PATH": f"${{TOOLS_DIR:-{safe}}}"}}
    write(lab.project / ".mcp.json", servers(helper=server))
    write(lab.project / ".env", f"TOOLS_DIR={value.format(folder=lab.root)}\n")
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "Bun's loader may trim" in reason, reason


def test_a_conditional_env_overlay_of_codex_refuses(lab: Lab) -> None:
    # Codex loads $CODEX_HOME/.env.<suffix> files whose first line is a condition, over its
    # .env: one putting aider 0.50.0 first on PATH would hide behind the .env read here.
    safe = _new_aider_path(lab)
    write(lab.home / ".codex" / ".env", f"PATH={safe}\n")
    write(lab.home / ".codex" / ".env.ci", f"# codex-env-if: true\nPATH={lab.bin}:/usr/bin:/bin\n")
    write(lab.home / ".codex" / "config.toml", '[mcp_servers.helper]\ncommand = "aider"\n')
    started, reason = lab.spawn("codex", "exec", "t", env=lab.env(PATH=safe))
    assert not started
    assert "conditional overlay" in reason, reason


def test_another_file_beside_codex_s_env_is_not_an_overlay(lab: Lab) -> None:
    safe = _new_aider_path(lab)
    write(lab.home / ".codex" / ".env.backup", "PATH=/nowhere\n")
    write(lab.home / ".codex" / "config.toml", '[mcp_servers.helper]\ncommand = "aider"\n')
    started, reason = lab.spawn("codex", "exec", "t", env=lab.env(PATH=safe))
    assert started, reason


@pytest.mark.parametrize("where", ["project settings", "global file"])
def test_a_servers_env_is_expanded_with_claudes_settings_env(lab: Lab, where: str) -> None:
    # Claude Code expands ${VAR} in a server's env from its own process's environment,
    # which holds the settings files' and the global file's env by then.
    safe = _new_aider_path(lab)
    server = {"command": "aider", "env": {"PATH": f"${{TOOLS_PATH:-{safe}}}"}}
    write(lab.project / ".mcp.json", servers(helper=server))
    given = json.dumps({"env": {"TOOLS_PATH": f"{lab.bin}:/usr/bin:/bin"}})
    if where == "project settings":
        write(lab.project / ".claude" / "settings.json", given)
    else:
        write(lab.home / ".claude.json", given)
    _refused_for_the_old_aider(lab, "-p", "t")


def test_node_env_set_in_an_env_file_refuses(lab: Lab) -> None:
    # Which files Bun loads is decided by NODE_ENV as the process starts: one set in a
    # file it loads would choose otherwise than this reading did.
    write(lab.project / ".env", "NODE_ENV=test\n")
    write(lab.project / ".mcp.json", servers(helper={"command": "aider"}))
    started, reason = lab.spawn("claude", "-p", "t", env=lab.env(PATH=_new_aider_path(lab)))
    assert not started
    assert "NODE_ENV" in reason and "Bun's .env files" in reason, reason


def test_setting_sources_given_with_equals_is_read_alike(lab: Lab) -> None:
    safe = _new_aider_path(lab)
    write(lab.project / ".claude" / "settings.json", json.dumps({"env": {"PATH": safe}}))
    write(lab.home / ".claude.json", json.dumps({"mcpServers": {"helper": {"command": "aider"}}}))
    _refused_for_the_old_aider(lab, "--setting-sources=user", "-p", "t")
