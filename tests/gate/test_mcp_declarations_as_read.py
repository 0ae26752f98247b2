"""MCP declarations read as each client really reads them: argument spellings its parser
takes (commander for claude, clap for codex), the environment a client gives its servers
beyond a declaration's own ``env`` (claude's settings files, gemini's ``.env`` and its
``$VAR`` expansion), and text a reader must refuse by name rather than fail on (integers
past Python's limit, escapes that are no text).

Real files in a temporary home and project; the readers are called in process, and one
case goes through the gate with native stand-ins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gate.test_mcp_config import home, project, read, servers, write_json
from gate.test_mcp_servers import Agents, agents

__all__ = ["agents", "home", "project"]  # fixtures, shared


# ------------------------------------------------------------------ argument spellings


def test_claude_takes_the_first_mcp_config_value_even_when_it_starts_with_a_dash(
    home: Path, project: Path
) -> None:
    """commander gives a required option the next argument whatever it looks like."""
    write_json(project / "-servers.json", servers(s={"command": "aider"}))
    found = read("claude", home, project, "-p", "--mcp-config", "-servers.json", "task")
    assert [(d.name, d.command) for d in found.declarations] == [("s", "aider")], found


def test_codex_reads_a_short_option_written_with_an_equals_sign(home: Path, project: Path) -> None:
    """clap reads ``-c=KEY=VALUE`` as ``-c KEY=VALUE`` (and ``-C=DIR``, ``-p=NAME``)."""
    found = read("codex", home, project, "-c=mcp_servers.s.command=aider")
    assert [(d.name, d.command) for d in found.declarations] == [("s", "aider")], found


def test_codex_trims_an_override_value_as_codex_does(home: Path, project: Path) -> None:
    found = read("codex", home, project, "-c", "mcp_servers.s.command= aider ")
    assert [(d.name, d.command) for d in found.declarations] == [("s", "aider")], found


# ------------------------------------------------------------------ text the readers refuse


def test_a_toml_integer_past_pythons_limit_is_a_doubt_naming_the_file(
    home: Path, project: Path
) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("startup = " + "1" * 5000 + "\n", encoding="utf-8")
    found = read("codex", home, project)
    assert len(found.doubts) == 1 and found.doubts[0].startswith(str(config)), found


def test_a_json_escape_that_is_no_text_is_a_doubt_naming_the_file(
    home: Path, project: Path
) -> None:
    """``\\ud800`` alone decodes to no character: no receipt could record it."""
    path = project / ".mcp.json"
    path.write_text('{"mcpServers": {"s": {"command": "aider\\ud800"}}}', encoding="utf-8")
    found = read("claude", home, project)
    assert found.declarations == () and len(found.doubts) == 1, found
    assert found.doubts[0].startswith(str(path)) and "surrogate" in found.doubts[0]


def test_an_argument_that_is_no_text_is_a_doubt(home: Path, project: Path) -> None:
    """Bytes that are not UTF-8 in the agent's arguments reach Python as lone surrogates."""
    inline = '{"mcpServers": {"s": {"command": "aider\udc80"}}}'
    found = read("claude", home, project, "--mcp-config", inline)
    assert found.declarations == () and len(found.doubts) == 1, found
    found = read("codex", home, project, "-c", "mcp_servers.s.command=aider\udc80")
    assert found.declarations == () and len(found.doubts) == 1, found


def test_a_file_name_that_is_no_text_refuses_the_agent_on_the_record(agents: Agents) -> None:
    """A refusal whose reason could not be recorded would be no decision at all."""
    name = os.fsdecode(b"\xff.json")
    (agents.project / name).write_text(json.dumps(servers(s={"command": "aider"})))
    decision = agents.decide("claude", "--mcp-config", name)
    assert decision.verdict == "refuse" and decision.receipt_id, decision
    assert "\\udcff.json" in decision.reason and "not UTF-8" in decision.reason


# ------------------------------------------------------------------ the servers' environment


def test_claude_servers_get_the_env_of_claudes_settings_files(home: Path, project: Path) -> None:
    """Claude Code applies the ``env`` of its settings files to itself, and its servers
    inherit it: a project's ``.claude/settings.json`` decides a server's NODE_OPTIONS."""
    write_json(project / ".mcp.json", servers(s={"command": "x", "env": {"MODE": "m"}}))
    write_json(project / ".claude" / "settings.json", {"env": {"NODE_OPTIONS": "--require e"}})
    write_json(home / ".claude" / "settings.json", {"env": {"MODE": "user", "A": "1"}})
    [declared] = read("claude", home, project).declarations
    assert dict(declared.env) == {"A": "1", "MODE": "m", "NODE_OPTIONS": "--require e"}
    assert declared.env[-1] == ("MODE", "m")  # the declaration's own value wins


def test_claude_refuses_a_settings_env_it_cannot_read(home: Path, project: Path) -> None:
    write_json(project / ".mcp.json", servers(s={"command": "x"}))
    settings = write_json(project / ".claude" / "settings.local.json", {"env": {"PATH": 1}})
    found = read("claude", home, project)
    assert len(found.doubts) == 1 and found.doubts[0].startswith(str(settings)), found


def test_a_settings_path_refuses_claude_with_a_below_floor_server(agents: Agents) -> None:
    """The server ``helper-aider`` is not on the agent's PATH; the project's settings put
    a folder holding an old aider under that name first."""
    (agents.bin / "old").mkdir()
    (agents.bin / "old" / "helper-aider").symlink_to(agents.bin / "aider")
    agents.mcp_json(s={"command": "helper-aider"})
    settings = agents.project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"env": {"PATH": f"{agents.bin / 'old'}:/usr/bin:/bin"}}))
    decision = agents.decide("claude", "-p", "task")
    assert decision.verdict == "refuse", decision
    assert "aider 0.50.0" in decision.reason and "below the floor" in decision.reason


def test_gemini_expands_dollar_variables_in_env_values(home: Path, project: Path) -> None:
    entry = {"command": "x", "env": {"PATH": "$BIN:/usr/bin", "TOKEN": "${T}"}}
    write_json(project / ".gemini" / "settings.json", servers(s=entry))
    [declared] = read("gemini", home, project, BIN="/opt/bin", T="t").declarations
    assert dict(declared.env) == {"PATH": "/opt/bin:/usr/bin", "TOKEN": "t"}
    found = read("gemini", home, project, T="t")  # $BIN unset: PATH is not known
    assert found.declarations == () and "env.PATH" in found.doubts[0], found


def test_gemini_servers_get_the_variables_of_the_env_file_it_loads(
    home: Path, project: Path
) -> None:
    """Gemini CLI loads the nearest ``.gemini/.env`` or ``.env`` into its environment
    (without replacing a variable already set), and its servers inherit it."""
    write_json(project / ".gemini" / "settings.json", servers(s={"command": "x"}))
    (project / ".env").write_text("PYTHONPATH='./lib dir'\nexport HOME=/nope\n")
    [declared] = read("gemini", home, project).declarations
    assert dict(declared.env) == {"PYTHONPATH": "./lib dir"}  # HOME was set
    (project / ".env").write_text('PYTHONPATH="./lib\ndir"\n')
    found = read("gemini", home, project)
    assert found.doubts and str(project / ".env") in found.doubts[0], found


def test_gemini_takes_the_env_file_of_its_cli_home_when_no_folder_up_has_one(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """Past the working directory's folders, Gemini CLI takes the home's ``.env``, and its
    home is ``GEMINI_CLI_HOME`` when that is set (as for its settings)."""
    cli_home = tmp_path / "cli-home"
    write_json(project / ".gemini" / "settings.json", servers(s={"command": "x"}))
    (cli_home / ".gemini").mkdir(parents=True)
    (cli_home / ".gemini" / ".env").write_text("PYTHONPATH=./lib\n")
    [declared] = read("gemini", home, project, GEMINI_CLI_HOME=str(cli_home)).declarations
    assert dict(declared.env) == {"PYTHONPATH": "./lib"}


def test_gemini_env_file_in_home_that_a_cli_home_would_hide_is_a_doubt(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """Releases differ on which home's ``.env`` they take (HOME's, or GEMINI_CLI_HOME's):
    a HOME ``.env`` that is not the one GEMINI_CLI_HOME gives may reach the servers
    unjudged, so it is a doubt naming both."""
    cli_home = tmp_path / "cli-home"
    cli_home.mkdir()
    write_json(project / ".gemini" / "settings.json", servers(s={"command": "x"}))
    (home / ".env").write_text("NODE_OPTIONS=--require ./e.js\n")
    found = read("gemini", home, project, GEMINI_CLI_HOME=str(cli_home))
    assert len(found.doubts) == 1 and str(home / ".env") in found.doubts[0], found
    assert "GEMINI_CLI_HOME" in found.doubts[0], found
    # The same file either way is no doubt: a project .env comes first for every release.
    (project / ".env").write_text("A=1\n")
    [declared] = read("gemini", home, project, GEMINI_CLI_HOME=str(cli_home)).declarations
    assert dict(declared.env) == {"A": "1"}


# ------------------------------------------------------------------ more declaration sources


def test_gemini_reads_the_servers_of_its_installed_extensions(home: Path, project: Path) -> None:
    """An extension's declared settings take their values from its ``.env`` and reach its
    servers; a variable of that file no setting names does not. Releases without
    extension settings give the servers none: both readings are judged."""
    extension = home / ".gemini" / "extensions" / "tools"
    entry = {"command": "node", "args": ["${extensionPath}${/}server.js", "${workspacePath}"]}
    setting = {"name": "Options", "description": "d", "envVar": "NODE_OPTIONS"}
    write_json(extension / "gemini-extension.json", {"name": "tools", "version": "1.0.0",
                                                     "settings": [setting],
                                                     "mcpServers": {"t": entry}})  # fmt: skip
    (extension / ".env").write_text("NODE_OPTIONS=--require ./e.js\nOTHER=1\n")
    write_json(home / ".gemini" / "extensions" / "extension-enablement.json", {})
    without, given = read("gemini", home, project).declarations
    for declared in (without, given):
        assert declared.args == (f"{extension}/server.js", str(project)), declared
        assert declared.declared_in == (str(extension / "gemini-extension.json"),)
    assert dict(without.env) == {}
    assert dict(given.env) == {"NODE_OPTIONS": "--require ./e.js"}


def test_gemini_refuses_an_extension_linked_from_elsewhere(home: Path, project: Path) -> None:
    extension = home / ".gemini" / "extensions" / "linked"
    write_json(extension / ".gemini-extension-install.json", {"source": "/x", "type": "link"})
    found = read("gemini", home, project)
    assert found.doubts and "linked extension" in found.doubts[0], found


def test_claude_refuses_declaration_sources_it_does_not_read(home: Path, project: Path) -> None:
    """Enabled plugins, agent files naming MCP servers and ``--plugin-dir`` start servers
    nobody judged: each is a doubt naming the file or the argument."""
    write_json(home / ".claude" / "settings.json", {"enabledPlugins": {"tools@market": True}})
    agent = project / ".claude" / "agents" / "helper.md"
    agent.parent.mkdir(parents=True)
    agent.write_text("---\nname: helper\nmcpServers:\n  s:\n    command: npx\n---\nHelp.\n")
    (project / ".claude" / "agents" / "plain.md").write_text("---\nname: plain\n---\nmcpServers:\n")
    other = project.parent / "other"
    (other / ".claude" / "agents").mkdir(parents=True)
    (other / ".claude" / "agents" / "x.md").write_text("---\nmcpServers: {}\n---\n")
    found = read("claude", home, project, "--plugin-dir", "./plugins", "--add-dir", "../other")
    assert len(found.doubts) == 4, found.doubts
    assert any(d.startswith(str(other / ".claude" / "agents" / "x.md")) for d in found.doubts)
    assert any("tools@market" in d for d in found.doubts)
    assert any(d.startswith(str(agent)) for d in found.doubts)
    assert any("--plugin-dir" in d for d in found.doubts)


def test_codex_reads_the_profile_file_its_config_selects(home: Path, project: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text('profile = "work"\n')
    (home / ".codex" / "work.config.toml").write_text('[mcp_servers.w]\ncommand = "aider"\n')
    found = read("codex", home, project)
    assert [(d.name, d.command) for d in found.declarations] == [("w", "aider")], found


def test_gemini_refuses_a_working_folder_it_would_expand(home: Path, project: Path) -> None:
    """Gemini CLI expands every string of its settings; the folder a server starts in
    decides what a relative command or a launcher's project files are."""
    write_json(project / ".gemini" / "settings.json", servers(s={"command": "x", "cwd": "$W"}))
    found = read("gemini", home, project, W="/elsewhere")
    assert found.declarations == () and "mcpServers.s.cwd" in found.doubts[0], found


def test_a_bare_command_looked_up_in_a_relative_path_entry_refuses_the_agent(
    agents: Agents,
) -> None:
    """Node's spawn looks ``srv`` up in ``tools`` (or an empty entry) from the server's
    folder: an old aider there, under another name, would run unjudged as not found."""
    (agents.project / "tools").mkdir()
    (agents.project / "tools" / "srv").symlink_to(agents.bin / "aider")
    for search in ("tools:/usr/bin:/bin", ":/usr/bin"):
        agents.mcp_json(s={"command": "srv", "env": {"PATH": search}})
        decision = agents.decide("claude", "-p", "task")
        assert decision.verdict == "refuse", decision
        assert "relative PATH entry" in decision.reason and ".mcp.json" in decision.reason


def test_strict_mcp_config_leaves_nothing_out(home: Path, project: Path) -> None:
    """``--strict-mcp-config`` may be the value of another option (``--model
    --strict-mcp-config``: commander gives an option its next argument), so it limits no
    source: an enabled plugin is still a doubt, and the settings' env reaches the servers."""
    write_json(
        home / ".claude" / "settings.json",
        {"enabledPlugins": {"tools@market": True}, "env": {"A": "1"}},
    )
    write_json(project / "only.json", servers(s={"command": "x"}))
    found = read("claude", home, project, "--strict-mcp-config", "--mcp-config", "only.json")
    assert [dict(d.env) for d in found.declarations] == [{"A": "1"}]
    assert any("enabledPlugins" in doubt for doubt in found.doubts), found.doubts


def test_gemini_records_the_url_it_connects_to_not_one_that_expands_to_nothing(
    home: Path, project: Path
) -> None:
    """An ``httpUrl`` that expands to nothing is no URL: Gemini CLI connects to ``url``,
    and that is the address recorded (as written)."""
    entry = {"httpUrl": "$E", "url": "https://u.example/$P", "command": "aider"}
    write_json(project / ".gemini" / "settings.json", servers(s=entry))
    [declared] = read("gemini", home, project, E="", P="mcp").declarations
    assert (declared.transport, declared.url) == ("remote", "https://u.example/$P"), declared
