"""A configuration source the agent may not load never makes its servers look safer.

mcp-servers.md reads every scope rather than reproducing each client's precedence, "which
can only be stricter". A source the client may skip (a codex project layer in a folder it
does not trust, above its project root, or the caller's folder under ``-C``; a claude
settings file of a parent folder, of ``$XDG_CONFIG_HOME``, a ``--settings`` that may be
another option's value, a global file of another name) must then not replace, switch off
or re-route what the sources it certainly loads declare: each server is judged as it
stands with such a source and without it.

The lab's ``aider`` on the agent's PATH is below its floor; ``good/aider`` is at 0.70.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.mcp_lab import CODEX_OLD, Lab, servers, write


def _good_aider(lab: Lab) -> Path:
    folder = lab.root / "good"
    lab.aider(folder, "0.70.0")
    return folder


# ---------------------------------------------------------------------------- codex


def test_codex_project_layer_replacing_the_users_server_does_not_hide_it(lab: Lab) -> None:
    """Codex skips the project layers of a folder it does not trust."""
    good = _good_aider(lab)
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    write(lab.project / ".codex" / "config.toml", f'[mcp_servers.o]\ncommand = "{good}/aider"\n')
    started, reason = lab.spawn("codex")
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_project_layer_switching_the_users_server_off_does_not_hide_it(lab: Lab) -> None:
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    write(lab.project / ".codex" / "config.toml", "[mcp_servers.o]\nenabled = false\n")
    started, reason = lab.spawn("codex")
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_layer_above_the_project_root_does_not_hide_the_users_server(lab: Lab) -> None:
    """Codex reads project layers from its root (here the folder holding ``.git``) down."""
    good = _good_aider(lab)
    repo = lab.project / "repo"
    (repo / ".git").mkdir(parents=True)
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    write(lab.project / ".codex" / "config.toml", f'[mcp_servers.o]\ncommand = "{good}/aider"\n')
    started, reason = lab.spawn("codex", cwd=repo)
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_callers_layer_under_cd_does_not_hide_the_users_server(
    lab: Lab, tmp_path: Path
) -> None:
    """With ``-C other`` codex reads ``other``'s layers, not those of the folder it was
    started in."""
    good = _good_aider(lab)
    other = tmp_path / "other"
    other.mkdir()
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    write(lab.project / ".codex" / "config.toml", f'[mcp_servers.o]\ncommand = "{good}/aider"\n')
    started, reason = lab.spawn("codex", "-C", str(other), "exec", "t")
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_project_layers_path_does_not_reroute_the_users_server(lab: Lab) -> None:
    good = _good_aider(lab)
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    write(lab.project / ".codex" / "config.toml",
          f'[mcp_servers.o.env]\nPATH = "{good}:/usr/bin:/bin"\n')  # fmt: skip
    started, reason = lab.spawn("codex")
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_project_layer_it_reads_still_applies(lab: Lab) -> None:
    """Both readings are judged: a project layer naming the old server refuses too."""
    (lab.project / ".git").mkdir()
    write(lab.project / ".codex" / "config.toml", CODEX_OLD)
    started, reason = lab.spawn("codex")
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_with_only_fixed_servers_in_every_reading_starts(lab: Lab) -> None:
    good = _good_aider(lab)
    write(lab.home / ".codex" / "config.toml", f'[mcp_servers.o]\ncommand = "{good}/aider"\n')
    write(lab.project / ".codex" / "config.toml", "[mcp_servers.o]\nenabled = false\n")
    assert lab.spawn("codex")[0]


# ---------------------------------------------------------------------------- claude


def _claude_settings_env(lab: Lab, where: str, path_value: str) -> tuple[tuple[str, ...], dict]:
    """Where a settings file whose env sets PATH is written, and the agent's arguments and
    extra environment that point claude at it."""
    settings = json.dumps({"env": {"PATH": path_value}})
    if where == "a parent folder's project settings":
        write(lab.project.parent / ".claude" / "settings.json", settings)
        return ("-p", "t"), {}
    if where == "XDG_CONFIG_HOME's":
        xdg = lab.root / "xdg"
        write(xdg / "claude" / "settings.json", settings)
        return ("-p", "t"), {"XDG_CONFIG_HOME": str(xdg)}
    if where == "a --settings that may be --model's value":
        given = write(lab.root / "other.json", settings)
        return ("-p", "--model", "--settings", str(given), "t"), {}
    if where == "a global file of another name":
        write(lab.home / ".claude-custom-oauth.json", settings)
        return ("-p", "t"), {}
    raise AssertionError(where)


@pytest.mark.parametrize(
    "where",
    [
        "a parent folder's project settings",
        "XDG_CONFIG_HOME's",
        "a --settings that may be --model's value",
        "a global file of another name",
    ],
)
def test_claude_settings_env_it_may_not_load_does_not_reroute_a_server(
    lab: Lab, where: str
) -> None:
    good = _good_aider(lab)
    work = lab.project / "sub"
    write(work / ".mcp.json", servers(s={"command": "aider"}))
    argv, extra = _claude_settings_env(lab, where, f"{good}:/usr/bin:/bin")
    started, reason = lab.spawn("claude", *argv, cwd=work, env=lab.env(**extra))
    assert not started and "aider 0.50.0" in reason, reason


def test_claude_settings_env_it_loads_still_reroutes_a_server(lab: Lab) -> None:
    """The user's own settings file is loaded by every release: its PATH is the server's."""
    good = _good_aider(lab)
    write(lab.project / ".mcp.json", servers(s={"command": "aider"}))
    write(lab.home / ".claude" / "settings.json",
          json.dumps({"env": {"PATH": f"{good}:/usr/bin:/bin"}}))  # fmt: skip
    assert lab.spawn("claude", "-p", "t")[0]


# ---------------------------------------------------------------------------- profiles


def test_codex_profile_a_project_layer_names_does_not_hide_the_users_server(lab: Lab) -> None:
    """Codex takes ``profile`` from the user's config only."""
    good = _good_aider(lab)
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    write(lab.home / ".codex" / "p.config.toml", f'[mcp_servers.o]\ncommand = "{good}/aider"\n')
    write(lab.project / ".codex" / "config.toml", 'profile = "p"\n')
    started, reason = lab.spawn("codex")
    assert not started and "aider 0.50.0" in reason, reason


def test_codex_profile_the_command_line_replaces_does_not_hide_the_users_server(
    lab: Lab,
) -> None:
    """Codex loads one profile: ``--profile q`` instead of the config's ``profile = "u"``,
    whose file would have replaced the old server's command."""
    good = _good_aider(lab)
    write(lab.home / ".codex" / "config.toml", 'profile = "u"\n' + CODEX_OLD)
    write(lab.home / ".codex" / "u.config.toml", f'[mcp_servers.o]\ncommand = "{good}/aider"\n')
    started, reason = lab.spawn("codex", "--profile", "q")
    assert not started and "aider 0.50.0" in reason, reason


# ---------------------------------------------------------------------------- claude keys


def test_claude_project_entry_keyed_by_a_link_to_the_working_directory_is_read(
    lab: Lab,
) -> None:
    """Claude keeps an entry for each spelling it was started under, a link's included."""
    real = lab.project / "real"
    real.mkdir()
    (lab.project / "ln").symlink_to(real)
    write(lab.home / ".claude.json",
          json.dumps({"projects": {str(lab.project / "ln"): {"mcpServers": {"o": {
              "command": "aider"}}}}}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t", cwd=real)
    assert not started and "aider 0.50.0" in reason, reason


@pytest.mark.parametrize(
    ("folder", "key"),
    [("a\\b/proj", "a/b/proj"), ("x\\/y", "x//y"), ("q/..\\z", "q/../z"), ("\\/y", "//y")],
)
def test_claude_project_entry_keyed_with_slashes_for_a_backslash_in_the_folder_is_read(
    lab: Lab, folder: str, key: str
) -> None:
    """Claude Code keys a project by its folder normalized by node and then every backslash
    made a slash, on Linux too: ``a\\b/proj`` takes the entry ``a/b/proj``, and ``x\\/y``
    the entry ``x//y``, looked up as spelled."""
    work = lab.project / folder
    work.mkdir(parents=True)
    key = f"{lab.project}/{key}"
    write(lab.home / ".claude.json",
          json.dumps({"projects": {key: {"mcpServers": {"o": {"command": "aider"}}}}}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t", cwd=work)
    assert not started and "aider 0.50.0" in reason, reason


def test_claude_project_entry_keyed_by_the_shell_s_spelling_with_a_backslash_is_read(
    lab: Lab,
) -> None:
    """Started in a link ``l\\nk`` (PWD spells it so), Claude Code may key the project by
    that spelling, its backslash made a slash: ``l/nk``, which no folder is."""
    real = lab.project / "real"
    real.mkdir()
    (lab.project / "l\\nk").symlink_to(real)
    write(lab.home / ".claude.json",
          json.dumps({"projects": {f"{lab.project}/l/nk": {"mcpServers": {"o": {
              "command": "aider"}}}}}))  # fmt: skip
    env = lab.env(PWD=str(lab.project / "l\\nk"))
    started, reason = lab.spawn("claude", "-p", "t", cwd=lab.project / "l\\nk", env=env)
    assert not started and "aider 0.50.0" in reason, reason


# ---------------------------------------------------------------------------- gemini .env


@pytest.mark.parametrize("how", ["settings", "flag"])
def test_gemini_ignoring_the_local_env_file_is_judged_both_ways(lab: Lab, how: str) -> None:
    """Releases before ``advanced.ignoreLocalEnv`` and ``--ignore-env`` load the working
    directory's .env whatever they say."""
    good = _good_aider(lab)
    settings = {"mcpServers": {"s": {"command": "aider", "env": {"PATH": "$GP"}}}}
    if how == "settings":
        settings["advanced"] = {"ignoreLocalEnv": True}
    write(lab.home / ".gemini" / "settings.json", json.dumps(settings))
    write(lab.project / ".env", f"GP={lab.bin}\n")
    write(lab.home / ".gemini" / ".env", f"GP={good}\n")
    argv = ("--ignore-env",) if how == "flag" else ()
    started, reason = lab.spawn("gemini", *argv)
    assert not started and "aider 0.50.0" in reason, reason


def test_claude_env_file_does_not_move_a_nested_agents_configuration(lab: Lab) -> None:
    """Claude's node build (and a Bun build made not to) loads no ``.env``: a CODEX_HOME
    there must not hide the configuration a nested ``codex mcp-server`` really reads."""
    harmless = lab.root / "harmless-codex"
    harmless.mkdir()
    write(lab.project / ".env.local", f"CODEX_HOME={harmless}\n")  # (codex reads no .env.local)
    write(lab.project / ".mcp.json", servers(c={"command": "codex", "args": ["mcp-server"]}))
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and "aider 0.50.0" in reason, reason


def test_claude_env_files_count_as_one_source_so_a_usual_project_is_not_refused(
    lab: Lab,
) -> None:
    """A Bun build loads its .env files together (or, the node build, none): four of them
    are one source read with and without, not four beyond the three read every way."""
    for name in (".env", ".env.local", ".env.development", ".env.development.local"):
        write(lab.project / name, f"FROM_{name.strip('.').replace('.', '_').upper()}=1\n")
    write(lab.project / ".mcp.json", servers(s={"type": "http", "url": "https://mcp.example/x"}))
    assert lab.spawn("claude", "-p", "t")[0]


def test_claude_with_more_sources_it_may_not_load_than_are_read_every_way_is_refused(
    lab: Lab,
) -> None:
    settings = json.dumps({"env": {"X_FROM_FILE": "1"}})
    write(lab.project.parent / ".claude" / "settings.json", settings)
    write(lab.root / "xdg" / "claude" / "settings.json", settings)
    write(lab.home / ".claude-custom-oauth.json", settings)
    given = write(lab.root / "given.json", settings)
    started, reason = lab.spawn(
        "claude",
        "-p",
        "--settings",
        str(given),
        "t",
        env=lab.env(XDG_CONFIG_HOME=str(lab.root / "xdg")),
    )
    assert not started and "more than the 3 read without each other" in reason, reason
