"""Where claude, codex and gemini find the MCP servers and package launches they start, each
form spawned for real: an agent whose configuration would start a server that must be
judged and refused (an aider below its floor, mcp-remote below its fix, an unpinned
launch) is refused on the record and never started.

- Every source a client reads: a workspace's gemini extensions, every codex project layer
  whatever its project root markers, a codex profile chosen by ``-c profile=``, a home
  given relative to the working directory, agent files in folders below ``agents/`` and
  keys spelled through escapes.
- Every spelling of a launcher a client's command may use: ``npm exe``, ``uv tool uvx``.
- Gemini picks a server's transport by truth, on the values it expanded: an empty URL, or
  one that expands to nothing, is no URL, and ``tcp`` is none; an env value it would
  expand a second time is refused.
- Claude's arguments as commander reads them (a lone ``-`` is one more value), and its
  global file under every name Claude Code gives it (``.config.json``,
  ``.claude-custom-oauth.json``, ...).
- The spellings that were always refused stay refused, and no refusal names a credential.

Real files in a temporary home and project, native stand-in agents that leave a marker
when they run, a chain of the test's own, a host map (FLOORGUARD_FLOOR_MAP) holding the
agents' floors, aider's floor and the GHSA-6xpm-ggf7-wc3p shape for mcp-remote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.mcp_lab import (
    AGENT_SERVERS,
    CODEX_OLD,
    NPX_FIXED,
    OLD_AIDER,
    OLD_NPX,
    Lab,
    project_claude,
    servers,
    write,
)

# ---------------------------------------------------------------------------- baseline


def test_baseline_mcp_json_with_old_aider_refuses_claude(lab: Lab) -> None:
    write(lab.project / ".mcp.json", servers(old=OLD_AIDER))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and "aider 0.50.0" in reason


def test_baseline_mcp_json_with_old_npx_refuses_claude(lab: Lab) -> None:
    write(lab.project / ".mcp.json", servers(old=OLD_NPX))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and "0.1.15" in reason


def test_baseline_clean_claude_starts(lab: Lab) -> None:
    started, _ = lab.spawn("claude", "-p", "t")
    assert started


# ============================================================================ every source


def test_gemini_refuses_a_below_floor_server_of_a_workspace_extension(lab: Lab) -> None:
    """Gemini CLI releases above the floor (0.1.x) load extensions from
    ``<workspace>/.gemini/extensions`` as well as from the home, the workspace's taking
    precedence: a project can ship an extension whose server is an old aider."""
    extension = {"name": "x", "version": "1.0.0", "mcpServers": {"o": OLD_AIDER}}
    write(lab.project / ".gemini" / "extensions" / "x" / "gemini-extension.json",
          json.dumps(extension))  # fmt: skip
    started, reason = lab.spawn("gemini")
    assert not started, "gemini started with a workspace extension's below-floor server"
    assert "aider 0.50.0" in reason or "extension" in reason


@pytest.mark.parametrize("how", ["user config", "-c override"])
def test_codex_reads_the_project_layers_its_project_root_markers_reach(lab: Lab, how: str) -> None:
    """Codex finds the project root by ``project_root_markers`` (default ``.git``): with
    ``[".hg"]`` the root is the folder holding ``.hg``, and its ``.codex/config.toml`` is a
    layer codex loads for a working directory below it."""
    (lab.project / ".hg").mkdir()
    below = lab.project / "sub"
    below.mkdir()
    write(lab.project / ".codex" / "config.toml", '[mcp_servers.o]\ncommand = "aider"\n')
    argv: tuple[str, ...] = ()
    if how == "user config":
        write(lab.home / ".codex" / "config.toml", 'project_root_markers = [".hg"]\n')
    else:
        argv = ("-c", 'project_root_markers=[".hg"]')
    started, reason = lab.spawn("codex", *argv, cwd=below)
    assert not started, "codex started with a below-floor server of a project layer it reads"
    assert "aider 0.50.0" in reason


def test_codex_profile_chosen_by_a_config_override_is_read_as_the_profile_flag_is(
    lab: Lab,
) -> None:
    """The docs read ``$CODEX_HOME/<profile>.config.toml`` for ``--profile`` and for a
    ``profile = "NAME"`` in config.toml; ``-c profile=NAME`` sets that same key."""
    write(lab.home / ".codex" / "p.config.toml", '[mcp_servers.o]\ncommand = "aider"\n')
    assert not lab.spawn("codex", "--profile", "p")[0]  # the flag: refused
    started, reason = lab.spawn("codex", "-c", "profile=p")
    assert not started, "codex started with the profile's below-floor server"
    assert "aider 0.50.0" in reason


def test_npm_exec_by_an_abbreviated_command_name_is_judged_as_npm_exec(lab: Lab) -> None:
    """npm resolves any unambiguous abbreviation of a command (``npm exe`` is ``npm
    exec``), so this server runs mcp-remote 0.1.15, below the fix."""
    write(lab.project / ".mcp.json",
          servers(s={"command": "npm", "args": ["exe", "--", "mcp-remote@0.1.15"]}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started, "claude started with npm exe mcp-remote@0.1.15 as a server"
    assert "0.1.15" in reason or "npm exe" in reason


def test_uv_tool_uvx_is_judged_as_uvx(lab: Lab) -> None:
    """``uv tool uvx`` is uv's (hidden) spelling of uvx: it runs mcp-server-fetch 2024.1.0,
    below its floor."""
    uvx = {"command": "uv", "args": ["tool", "uvx", "mcp-server-fetch==2024.1.0"]}
    write(lab.project / ".mcp.json", servers(s=uvx))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started, "claude started with uv tool uvx mcp-server-fetch==2024.1.0"
    assert "2024.1.0" in reason or "uv tool uvx" in reason


def test_codex_cd_climbing_out_of_a_link_reads_the_folder_the_kernel_lands_in(lab: Lab) -> None:
    """``-C lnk/..`` with ``lnk`` a link to ``elsewhere/x``: by its letters the project, for
    the kernel ``elsewhere``, whose project layer declares the old aider."""
    elsewhere = lab.root / "elsewhere"
    write(elsewhere / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(elsewhere / ".codex" / "config.toml", CODEX_OLD)
    (elsewhere / "x").mkdir()
    (lab.project / "lnk").symlink_to(elsewhere / "x")
    started, reason = lab.spawn("codex", "-C", "lnk/..", "exec", "t")
    assert not started and "aider 0.50.0" in reason, reason


@pytest.mark.parametrize(
    ("agent", "variable", "relative"),
    [
        ("claude", "HOME", "hh/.claude.json"),
        ("codex", "HOME", "hh/.codex/config.toml"),
        ("gemini", "GEMINI_CLI_HOME", "hh/.gemini/settings.json"),
    ],
)
def test_a_relative_home_is_the_folder_the_client_reads_from(
    lab: Lab, agent: str, variable: str, relative: str
) -> None:
    """node's ``os.homedir()`` and Rust's home lookup return HOME as given: a relative
    home is taken against the agent's working directory, so that folder's configuration
    is what the agent reads (or, at least, a home that is not absolute is a doubt)."""
    text = (
        '[mcp_servers.o]\ncommand = "aider"\n' if agent == "codex"
        else servers(o=OLD_AIDER)
    )  # fmt: skip
    write(lab.project / relative, text)
    started, _ = lab.spawn(agent, env=lab.env(**{variable: "hh"}))
    assert not started, f"{agent} started with {variable}=hh declaring a below-floor server"


def test_the_npmrc_of_a_relative_home_is_read_below_the_working_directory(lab: Lab) -> None:
    """npm finds its user configuration under HOME as given: with a relative HOME, in the
    server's working directory, where the workspace wrote it (held to a project's rules: no
    registry of its own)."""
    write(lab.project / ".mcp.json", servers(s=NPX_FIXED))
    write(lab.project / "hh" / ".npmrc", "registry=https://e.invalid/\n")
    started, reason = lab.spawn("claude", "-p", "t", env=lab.env(HOME="hh"))
    assert not started
    assert ".npmrc" in reason and "registry" in reason, reason


@pytest.mark.parametrize("key", ["httpUrl", "url"])
def test_gemini_takes_an_empty_url_for_no_url_as_gemini_does(lab: Lab, key: str) -> None:
    """Gemini CLI picks the transport by truth (``if (config.httpUrl) ... if (config.url)
    ... if (config.command)``): an empty URL is no URL, so the command runs over stdio.
    Recording the server as remote lets a below-floor aider start unjudged."""
    write(lab.project / ".gemini" / "settings.json", servers(o={"command": "aider", key: ""}))
    started, _ = lab.spawn("gemini")
    assert not started, f"gemini started with an empty {key} hiding a below-floor server"


@pytest.mark.parametrize(
    ("key", "value", "extra", "env_file"),
    [("url", "$E", {"E": ""}, None), ("httpUrl", "${E}", {"E": ""}, None),
     ("url", "$E", {}, "E=\n"), ("tcp", "${NOPE:-}", {}, None), ("tcp", "h.example:9", {}, None)],
    ids=["url-dollar-empty-in-env", "httpurl-braced-empty-in-env", "url-empty-in-dotenv",
         "tcp-empty-default", "tcp-is-no-transport"],
)  # fmt: skip
def test_gemini_takes_a_url_that_expands_to_nothing_for_no_url(
    lab: Lab, key: str, value: str, extra: dict[str, str], env_file: str | None
) -> None:
    """Gemini CLI expands every string of its settings (``$VAR``, ``${VAR}``,
    ``${VAR:-default}``, from its environment and its ``.env``) before it picks the
    transport by truth: a URL that expands to the empty string is no URL, and the command
    runs. Taking the text as written (``$E``, not empty) for a remote server lets a
    below-floor aider start unjudged. ``tcp`` is no transport in ``createTransport`` at all:
    beside a command, the command runs."""
    write(lab.project / ".gemini" / "settings.json", servers(o={"command": "aider", key: value}))
    if env_file is not None:
        write(lab.project / ".env", env_file)
    started, reason = lab.spawn("gemini", env=lab.env(**extra))
    assert not started, f"gemini started with {key} {value!r} expanding to nothing"
    assert "aider 0.50.0" in reason, reason


def test_gemini_still_takes_a_url_that_expands_to_an_address_for_remote(lab: Lab) -> None:
    write(lab.project / ".gemini" / "settings.json",
          servers(o={"command": "aider", "httpUrl": "https://$HOST/mcp"}))  # fmt: skip
    assert lab.spawn("gemini", env=lab.env(HOST="h.example"))[0]
    [server] = lab.last_receipt()["mcp_servers"]
    assert server["transport"] == "remote", server


def test_gemini_env_value_expanded_twice_refuses_when_the_second_expansion_changes_it(
    lab: Lab,
) -> None:
    """Gemini CLI expands a server's ``env`` values at load and again when it starts the
    server: a PATH entry ``/nonexist$B`` with ``B='$C'`` becomes ``/nonexist$C`` and then
    C's text, here an empty entry and a folder holding an old aider under the name the
    server runs. Judging the value expanded once looks only in the absolute entries."""
    old = lab.root / "old"
    old.mkdir()
    (old / "srv").symlink_to(lab.bin / "aider")
    entry = {"command": "srv", "env": {"PATH": f"/nonexist$B:{lab.bin}:/usr/bin:/bin"}}
    write(lab.project / ".gemini" / "settings.json", servers(s=entry))
    started, reason = lab.spawn(
        "gemini", env=lab.env(B="$C", C=f":{old}", FLOORGUARD_UNTRACKED_POLICY="refuse")
    )
    assert not started, "gemini started: its second expansion of env.PATH finds an old aider"
    assert "mcpServers.s.env.PATH" in reason, reason


@pytest.mark.parametrize(
    ("argv", "layout"),
    [(("--mcp-config", "a.json", "-", "-p", "t"), {"a.json": servers(), "-": servers(o=OLD_AIDER)}),
     (("--add-dir", "../other", "-", "-p", "t"),
      {"-/.claude/agents/a.md": f"---\nname: a\nmcpServers:\n{AGENT_SERVERS}---\nBody.\n"})],
    ids=["mcp-config", "add-dir"],
)  # fmt: skip
def test_claude_takes_a_lone_dash_for_one_more_value_as_commander_does(
    lab: Lab, argv: tuple[str, ...], layout: dict[str, str]
) -> None:
    """commander takes an argument for an option only when it is longer than one character
    and starts with ``-`` (``maybeOption``): a lone ``-`` after ``--mcp-config a.json`` or
    ``--add-dir /x`` is one more value, the file or folder ``./-``, which claude reads."""
    (lab.root / "other").mkdir()
    for relative, text in layout.items():
        write(lab.project / relative, text)
    started, _ = lab.spawn("claude", *argv)
    assert not started, "claude started with servers declared in ./- unread"


@pytest.mark.parametrize(
    ("relative", "extra"),
    [("home/.claude/.config.json", {}),
     ("home/.claude-custom-oauth.json", {"CLAUDE_CODE_CUSTOM_OAUTH_URL": "https://a.example"}),
     ("cc/.config.json", {"CLAUDE_CONFIG_DIR": "@R@/cc"}),
     ("cc/.claude-custom-oauth.json",
      {"CLAUDE_CONFIG_DIR": "@R@/cc", "CLAUDE_CODE_CUSTOM_OAUTH_URL": "https://a.example"}),
     ("home/.claude-staging-oauth.json", {"USER_TYPE": "ant", "USE_STAGING_OAUTH": "1"}),
     ("xdg/claude/.config.json", {"XDG_CONFIG_HOME": "@R@/xdg"}),
     ("xdg/claude/.claude.json", {"XDG_CONFIG_HOME": "@R@/xdg"}),
     ("project/x/claude/.config.json", {"XDG_CONFIG_HOME": "x"})],
    ids=["legacy-config-json", "custom-oauth", "config-dir-legacy", "config-dir-custom-oauth",
         "staging-oauth", "xdg-config-home-legacy", "xdg-config-home-claude-json",
         "relative-xdg-config-home"],
)  # fmt: skip
def test_claude_reads_the_global_file_claude_code_picks(
    lab: Lab, relative: str, extra: dict[str, str]
) -> None:
    """Claude Code's global file (``getGlobalClaudeFile``) is the legacy ``.config.json``
    of its config folder whenever that exists, else ``.claude<suffix>.json`` in
    CLAUDE_CONFIG_DIR or the home, the suffix ``-custom-oauth`` when
    CLAUDE_CODE_CUSTOM_OAUTH_URL is set (``-local-oauth``, ``-staging-oauth`` for
    Anthropic's own builds): its ``mcpServers`` start as ``~/.claude.json``'s do. Releases
    of mid-2025 (1.0.28 to about 1.0.4x, above claude's floor) took
    ``$XDG_CONFIG_HOME/claude`` for their config folder whenever XDG_CONFIG_HOME was set."""
    write(lab.root / relative, servers(o=OLD_AIDER))
    given = {k: v.replace("@R@", str(lab.root)) for k, v in extra.items()}
    started, reason = lab.spawn("claude", "-p", "t", env=lab.env(**given))
    assert not started, f"claude started with a below-floor server in {relative}"
    assert "aider 0.50.0" in reason and os.path.basename(relative) in reason, reason


@pytest.mark.parametrize(
    ("relative", "extra"),
    [("home/.claude/settings.json", {}),
     ("cc/settings.json", {"CLAUDE_CONFIG_DIR": "@R@/cc"}),
     ("xdg/claude/settings.json", {"XDG_CONFIG_HOME": "@R@/xdg"})],
    ids=["home", "claude-config-dir", "xdg-config-home"],
)  # fmt: skip
def test_claude_reads_the_settings_env_of_every_config_folder_a_release_takes(
    lab: Lab, relative: str, extra: dict[str, str]
) -> None:
    """The user settings' ``env`` reaches claude's own process and every command it runs,
    from whichever config folder the release takes: ``~/.claude``, CLAUDE_CONFIG_DIR, or
    ``$XDG_CONFIG_HOME/claude`` (mid-2025 releases)."""
    write(lab.root / relative, json.dumps({"env": {"BASH_ENV": str(lab.root / "evil.sh")}}))
    given = {k: v.replace("@R@", str(lab.root)) for k, v in extra.items()}
    started, reason = lab.spawn("claude", "-p", "t", env=lab.env(**given))
    assert not started, f"claude started with BASH_ENV in {relative}"
    assert "BASH_ENV" in reason, reason


def test_an_xdg_config_home_claude_does_not_read_starts_claude(lab: Lab) -> None:
    (lab.root / "xdg").mkdir()
    started, _ = lab.spawn("claude", "-p", "t", env=lab.env(XDG_CONFIG_HOME=str(lab.root / "xdg")))
    assert started


@pytest.mark.parametrize("where", ["settings", "extension"])
def test_gemini_with_its_own_home_named_reads_the_home_s_gemini_folder_too(
    lab: Lab, where: str
) -> None:
    """Releases before GEMINI_CLI_HOME (up to 0.6, above gemini's floor) read HOME's
    ``.gemini`` whatever it says: with it set, the settings and extensions of both homes
    are judged, as their ``.env`` files are."""
    if where == "settings":
        write(lab.home / ".gemini" / "settings.json", servers(o=OLD_AIDER))
    else:
        extension = {"name": "x", "version": "1.0.0", "mcpServers": {"o": OLD_AIDER}}
        write(lab.home / ".gemini" / "extensions" / "x" / "gemini-extension.json",
              json.dumps(extension))  # fmt: skip
    cli_home = lab.root / "cli-home"
    cli_home.mkdir()
    started, reason = lab.spawn("gemini", env=lab.env(GEMINI_CLI_HOME=str(cli_home)))
    assert not started, f"gemini started with a below-floor server in HOME's {where}"
    assert "aider 0.50.0" in reason, reason


@pytest.mark.parametrize(
    ("name", "text", "named"),
    [(".env", "BASH_ENV=./evil.sh\n", "BASH_ENV"),
     (".env.local", "NODE_OPTIONS=--require ./hook.js\n", "NODE_OPTIONS"),
     (".env.development", "PYTHONPATH=lib\n", "PYTHONPATH"),
     (".env.production", "LD_PRELOAD=./x.so\n", "LD_PRELOAD"),
     (".env", "CLAUDE_CONFIG_DIR=./cc\n", "CLAUDE_CONFIG_DIR"),
     (".env", "XDG_CONFIG_HOME=./x\n", "XDG_CONFIG_HOME"),
     (".env", 'API_KEY="a b\\c"\n', "line 1"),
     (".env.development.local", "BASH_ENV=./evil.sh\n", "BASH_ENV"),
     (".env.test.local", "LD_PRELOAD=./x.so\n", "LD_PRELOAD"),
     (".env", "PYTHONSAFEPATH=$NOPE\n", "PYTHONSAFEPATH"),
     (".env", "PYTHONSAFEPATH='${NOPE}'\n", "PYTHONSAFEPATH"),
     (".env", "PYTHONSAFEPATH=#x\n", "PYTHONSAFEPATH"),
     # Bun keeps a Unicode blank around a value, and reads no name after one: the line
     # is not the one a Python strip reads
     (".env", "API_KEY=k\u00a0\n", "(the file)"),
     (".env", "API_KEY=k\n\u3000API_KEY=j\n", "(the file)"),
     # Bun ends a quoted value at its first closing quote
     (".env", 'API_KEY="a"b"\n', "line 1")],
    ids=["bash-env", "local-node-options", "development-pythonpath", "production-ld-preload",
         "config-dir", "xdg-config-home", "not-read-plainly", "development-local",
         "test-local", "expanded", "expanded-in-single-quotes", "a-comment-for-bun",
         "unicode-blank-after-a-value", "unicode-blank-before-a-name", "a-quote-in-quotes"],
)  # fmt: skip
def test_claude_is_judged_with_the_project_env_files_it_loads(
    lab: Lab, name: str, text: str, named: str
) -> None:
    """Claude Code loads the working directory's ``.env`` files into its own process (a
    Bun-built executable does so unless built not to; releases have been reported loading
    it into their bash tool's environment): every command and server it starts inherits
    them (a variable the environment holds keeps its value). A variable there is judged as
    the spawn's own are, and one deciding where it reads its configuration is a doubt."""
    write(lab.project / name, text)
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started, f"claude started with {text!r} in {name}"
    assert named in reason and name in reason, reason


@pytest.mark.parametrize(
    "relative", ["home/.claude.json", "home/.claude/.config.json", "xdg/claude/.config.json"]
)
def test_claude_is_judged_with_its_global_configuration_s_env(lab: Lab, relative: str) -> None:
    """Claude Code copies its global configuration's ``env`` into its own process (1.0.31's
    cli.js: ``Object.assign(process.env, config.env)``; 2.1 too): every command and server
    it starts inherits it, as its settings files' ``env``."""
    write(lab.root / relative, json.dumps({"env": {"BASH_ENV": str(lab.root / "evil.sh")}}))
    env = lab.env(XDG_CONFIG_HOME=str(lab.root / "xdg"))
    started, reason = lab.spawn("claude", "-p", "t", env=env)
    assert not started, f"claude started with BASH_ENV in {relative}'s env"
    assert "BASH_ENV" in reason, reason


@pytest.mark.parametrize("variable", ["CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME"])
def test_a_settings_env_that_moves_claude_s_configuration_refuses(lab: Lab, variable: str) -> None:
    write(lab.project / ".claude" / "settings.json", json.dumps({"env": {variable: "elsewhere"}}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and variable in reason, reason


def test_a_project_env_file_that_loads_nothing_starts_claude(lab: Lab) -> None:
    write(lab.project / ".env", "# the app's\nDATABASE_URL=postgres://db/app\nDEBUG=1\n")
    started, reason = lab.spawn("claude", "-p", "t")
    assert started, reason


def test_a_virtual_environment_called_env_is_no_env_file(lab: Lab) -> None:
    (lab.project / ".env" / "bin").mkdir(parents=True)
    started, reason = lab.spawn("claude", "-p", "t")
    assert started, reason


@pytest.mark.parametrize(
    ("relative", "text"),
    [("project/bunfig.toml", 'preload = ["./evil.ts"]\n'),
     ("project/bunfig.toml", '[test]\npreload = ["./evil.ts"]\n'),
     ("project/bunfig.toml", '[env]\nfile = [".env.other"]\n'),
     ("project/bunfig.toml", "not toml = = \n"),
     ("home/.bunfig.toml", 'preload = ["/tmp/evil.ts"]\n')],
    ids=["preload", "test-preload", "env-files", "not-toml", "home-preload"],
)  # fmt: skip
def test_a_bun_configuration_that_runs_code_refuses_claude(
    lab: Lab, relative: str, text: str
) -> None:
    """Claude Code's native build is a Bun executable, which reads ``bunfig.toml`` unless
    built not to: its ``preload`` runs code in claude's process before claude's own."""
    write(lab.root / relative, text)
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started, f"claude started with {relative} holding {text!r}"
    assert "bunfig" in reason, reason


def test_a_bun_configuration_of_the_package_manager_only_starts_claude(lab: Lab) -> None:
    write(lab.project / "bunfig.toml", '[install]\nregistry = "https://registry.npmjs.org/"\n')
    started, reason = lab.spawn("claude", "-p", "t")
    assert started, reason


# ============================================================================ other spellings


def _other_spellings() -> list[tuple[str, str, dict[str, str], tuple[str, ...], dict[str, str]]]:
    """(id, agent, files under the lab root, argv, extra environment)."""
    home_json = json.dumps({"projects": {"@P@/": {"mcpServers": {"o": OLD_AIDER}}}})
    return [
        ("claude-projects-key-trailing-slash", "claude", {"home/.claude.json": home_json}, (), {}),
        ("claude-mcp-json-in-a-parent-folder", "claude",
         {"project/.mcp.json": servers(o=OLD_AIDER), "project/sub/keep": ""}, (), {"@CWD@": "sub"}),
        ("claude-second-mcp-config-value", "claude",
         {"project/a.json": servers(), "project/b.json": servers(o=OLD_AIDER)},
         ("--mcp-config", "a.json", "b.json"), {}),
        ("claude-inline-mcp-config-with-leading-space", "claude", {},
         ("--mcp-config", " " + servers(o=OLD_AIDER)), {}),
        ("claude-settings-env-names-a-registry-for-npx", "claude",
         {"project/.mcp.json": servers(s=NPX_FIXED),
          "project/.claude/settings.json": json.dumps({"env": {"npm_config_registry": "e"}})},
         (), {}),
        ("claude-inline-settings-env-names-a-registry", "claude",
         {"project/.mcp.json": servers(s=NPX_FIXED)},
         ("--settings=" + json.dumps({"env": {"npm_config_registry": "https://e/"}}),), {}),
        ("claude-mcp-json-in-utf16", "claude", {"project/.mcp.json": "@UTF16@"}, (), {}),
        ("claude-relative-claude-config-dir", "claude",
         {"project/cc/.claude.json": servers(o=OLD_AIDER)}, (), {"CLAUDE_CONFIG_DIR": "cc"}),
        ("codex-quoted-key-override", "codex", {}, ("-c", 'mcp_servers."o".command="aider"'), {}),
        ("codex-whole-table-override", "codex", {},
         ("-c", 'mcp_servers={o={command="aider"}}'), {}),
        ("codex-exec-subcommand-override", "codex", {},
         ("exec", "-c", "mcp_servers.o.command=aider", "task"), {}),
        ("codex-dotted-key-in-table", "codex",
         {"home/.codex/config.toml": '[mcp_servers]\no.command = "aider"\n'}, (), {}),
        ("codex-layer-at-a-git-worktree-root", "codex",
         {"project/.git": "gitdir: /x\n", "project/.codex/config.toml": CODEX_OLD,
          "project/sub/keep": ""}, (), {"@CWD@": "sub"}),
        ("codex-relative-codex-home", "codex", {"project/ch/config.toml": CODEX_OLD}, (),
         {"CODEX_HOME": "ch"}),
        ("gemini-comment-holding-a-brace", "gemini",
         {"project/.gemini/settings.json":
          '{"a": "http://x", /* "} */ "mcpServers": {"o": {"command": "aider"}}}'}, (), {}),
        ("gemini-env-file-with-crlf-names-a-registry", "gemini",
         {"project/.gemini/settings.json": servers(s=NPX_FIXED),
          "project/.env": "X=1\r\nnpm_config_registry=https://e/\r\n"}, (), {}),
        ("gemini-env-file-multiline-quote", "gemini",
         {"project/.gemini/settings.json": servers(s=NPX_FIXED),
          "project/.env": "X='a\nnpm_config_registry=https://e/\nb'\n"}, (), {}),
        ("npx-home-npmrc-globalconfig", "claude",
         {"project/.mcp.json": servers(s=NPX_FIXED), "home/.npmrc": "globalconfig=/tmp/g\n"},
         (), {}),
        ("npx-project-npmrc-key-through-a-variable", "claude",
         {"project/.mcp.json": servers(s=NPX_FIXED), "project/.npmrc": "${RK}=https://e/\n"},
         (), {"RK": "registry"}),
        ("npx-prefix-etc-npmrc-script-shell", "claude",
         {"project/.mcp.json": servers(s=NPX_FIXED), "home/.npmrc": "prefix=@R@/pfx\n",
          "pfx/etc/npmrc": "script-shell=/tmp/evil\n"}, (), {}),
        ("npx-mixed-case-config-variable", "claude",
         {"project/.mcp.json": servers(s={**NPX_FIXED, "env": {"Npm_Config_UserConfig": "/x"}})},
         (), {}),
        ("npm-exec-package-option", "claude",
         {"project/.mcp.json": servers(s={"command": "npm", "args": [
             "exec", "--package=mcp-remote@0.1.15", "--", "mcp-remote"]})}, (), {}),
        ("uvx-from-below-floor", "claude",
         {"project/.mcp.json": servers(s={"command": "uvx", "args": [
             "--from=mcp-server-fetch==2024.1.0", "x"]})}, (), {}),
        ("uvx-name-in-another-spelling", "claude",
         {"project/.mcp.json": servers(s={"command": "uvx",
                                          "args": ["MCP_Server.Fetch==2024.1.0"]})},
         (), {}),
        ("uvx-user-uv-toml-python-preference", "claude",
         {"project/.mcp.json": servers(s={"command": "uvx",
                                          "args": ["mcp-server-fetch==2025.2.0"]}),
          "home/.config/uv/uv.toml": 'python-preference = "system"\n'}, (), {}),
        ("env-long-option-abbreviated-split-string", "claude",
         {"project/.mcp.json": servers(s={"command": "env", "args": [
             "--split-s=npx -y mcp-remote@0.1.15"]})}, (), {}),
        ("env-absolute-path-running-old-npx", "claude",
         {"project/.mcp.json": servers(s={"command": "/usr/bin/env", "args": [
             "npx", "-y", "mcp-remote@0.1.15"]})}, (), {}),
        ("mcp-config-names-stdin", "claude", {}, ("--mcp-config", "/dev/stdin"), {}),
        ("fifo-as-home-claude-json", "claude", {"home/.claude.json": "@FIFO@"}, (), {}),
        ("fifo-as-project-npmrc", "claude",
         {"project/.mcp.json": servers(s=NPX_FIXED), "project/.npmrc": "@FIFO@"}, (), {}),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("agent", "files", "argv", "extra"),
    [case[1:] for case in _other_spellings()],
    ids=[case[0] for case in _other_spellings()],
)
def test_each_other_spelling_of_a_below_floor_server_is_refused(
    lab: Lab, agent: str, files: dict[str, str], argv: tuple[str, ...], extra: dict[str, str]
) -> None:
    for relative, given in files.items():
        path = lab.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if given == "@FIFO@":
            os.mkfifo(path)
        elif given == "@UTF16@":
            path.write_bytes(servers(o=OLD_AIDER).encode("utf-16"))
        else:
            text = given.replace("@P@", str(lab.project)).replace("@R@", str(lab.root))
            path.write_text(text, encoding="utf-8")
    extra = dict(extra)
    cwd = lab.project / extra.pop("@CWD@", ".")
    started, reason = lab.spawn(agent, *argv, cwd=cwd, env=lab.env(**extra))
    assert not started and reason, reason


def test_refusals_name_no_credentials(lab: Lab) -> None:
    """A remote URL's user information, query and fragment, a refused server's arguments
    and environment, and a broken inline configuration's header never reach the record."""
    secret = "SECRETTOKEN9"
    remote = {"type": "http", "url": f"https://u:{secret}@h.example/p?k={secret}#{secret}"}
    assert lab.spawn("claude", "--mcp-config", servers(r=remote))[0]
    assert secret not in json.dumps(lab.last_receipt())
    bad = ('{"mcpServers":{"r":{"type":"http","url":"https://h","headers":'
           f'{{"Authorization":"Bearer {secret}"}}}}}}, "x": NaN}}')  # fmt: skip
    started, reason = lab.spawn("claude", "--mcp-config", bad)
    assert not started and secret not in reason and secret not in json.dumps(lab.last_receipt())
    write(lab.project / ".mcp.json", servers(s={
        "command": "npx", "args": ["-y", "mcp-remote@0.1.15", "--header", f"A: {secret}"],
        "env": {"API_KEY": secret}}))  # fmt: skip
    started, reason = lab.spawn("claude")
    assert not started and secret not in reason and secret not in json.dumps(lab.last_receipt())


@pytest.mark.parametrize(
    "key",
    ['"mcp\\x53ervers"', '"mcp\\u0053ervers"', '"mcp\\\n  Servers"'],
    ids=["hex-escape", "unicode-escape", "folded-line"],
)
def test_an_agent_file_declaring_servers_under_an_escaped_key_refuses_claude(
    lab: Lab, key: str
) -> None:
    """A YAML double-quoted key is decoded before it is a key: ``"mcp\\x53ervers"`` is
    ``mcpServers``, so this agent file declares a server (an old aider) as much as the
    plain spelling does, which the docs say refuses claude."""
    write(lab.project / ".claude" / "agents" / "a.md",
          f"---\nname: a\n{key}:\n{AGENT_SERVERS}---\nBody.\n")  # fmt: skip
    started, _ = lab.spawn("claude", "-p", "t")
    assert not started, "claude started with an agent file declaring MCP servers"


def test_an_agent_file_in_a_subfolder_of_the_agents_folder_refuses_claude(lab: Lab) -> None:
    """Claude Code collects the Markdown files of ``.claude/agents`` recursively, so an
    agent in ``.claude/agents/team/`` is loaded, and its ``mcpServers`` started."""
    write(lab.project / ".claude" / "agents" / "team" / "a.md",
          f"---\nname: a\nmcpServers:\n{AGENT_SERVERS}---\nBody.\n")  # fmt: skip
    started, _ = lab.spawn("claude", "-p", "t")
    assert not started, "claude started with a nested agent file declaring MCP servers"


# ============================================================================ gemini's .env


@pytest.mark.parametrize("variable", ["GEMINI_CLI_HOME", "HOME", "XDG_CONFIG_HOME"])
def test_a_gemini_env_file_that_moves_its_home_refuses_gemini(lab: Lab, variable: str) -> None:
    """Gemini CLI loads its ``.env`` into its own environment (variables not set already)
    after its settings and before its extensions and agents, which it finds under
    ``homedir()``: GEMINI_CLI_HOME, else HOME, read then. A workspace ``.env`` setting
    either moves them to a folder of the workspace's choosing; XDG folders likewise."""
    moved = lab.project / ".h"
    extension = {"name": "x", "version": "1.0.0", "mcpServers": {"o": OLD_AIDER}}
    write(moved / ".gemini" / "extensions" / "x" / "gemini-extension.json", json.dumps(extension))
    write(lab.project / ".env", f"{variable}={moved}\n")
    env = lab.env()
    if variable == "HOME":
        del env["HOME"]  # (set in the agent's environment, gemini keeps its own)
    started, reason = lab.spawn("gemini", env=env)
    assert not started, f"gemini started with a .env setting {variable}"
    assert variable in reason and ".env" in reason, reason


def test_a_gemini_env_file_with_keys_and_a_home_already_set_lets_gemini_start(lab: Lab) -> None:
    """The usual ``.env``: credentials and a model; a HOME there is ignored when the
    agent's environment has one, as Gemini CLI ignores it."""
    write(lab.project / ".env", "GEMINI_API_KEY=k\nGEMINI_MODEL=m\nHOME=/elsewhere\n")
    started, reason = lab.spawn("gemini")
    assert started, reason


# ============================================================================ git worktrees


def _git(*args: str) -> None:
    quiet = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
                   check=True, capture_output=True, env=quiet)  # fmt: skip


def _worktree(lab: Lab, *, bare: bool = False) -> tuple[Path, Path]:
    """A repository under the lab's root and a linked worktree of it: (the folder Claude
    Code keys the repository's projects entry by, the worktree)."""
    main, worktree = lab.root / "main", lab.root / "wt"
    seed = lab.root / "seed" if bare else main
    _git("init", "-q", str(seed))
    write(seed / "README", "x")
    _git("-C", str(seed), "add", ".")
    _git("-C", str(seed), "commit", "-qm", "x")
    repository = main / ".bare" if bare else main
    if bare:
        _git("clone", "-q", "--bare", str(seed), str(repository))
    _git("-C", str(repository), "worktree", "add", "-q", str(worktree))
    return main, worktree


@pytest.mark.parametrize("bare", [False, True], ids=["main-checkout", "bare-repository"])
def test_claude_in_a_linked_worktree_reads_the_main_repository_project_entry(
    lab: Lab, bare: bool
) -> None:
    """Claude Code shares project configuration across the worktrees of one repository
    (changelog 2.1.63): a session in a linked worktree takes ``~/.claude.json``'s
    ``projects[<repository root>]``, the folder holding the common git folder."""
    main, worktree = _worktree(lab, bare=bare)
    write(lab.home / ".claude.json",
          json.dumps({"projects": {str(main): {"mcpServers": {"o": OLD_AIDER}}}}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t", cwd=worktree)
    assert not started, "claude started in a worktree whose repository entry has an old aider"
    assert "aider 0.50.0" in reason, reason


@pytest.mark.parametrize("pointer", [".git", "commondir"])
def test_claude_in_a_linked_worktree_whose_pointer_climbs_out_of_a_link_reads_git_s_repository(
    lab: Lab, pointer: str
) -> None:
    """git resolves ``lnk/..`` in a ``.git`` file's gitdir, or in a ``commondir``, through
    the link (as the kernel does), not by its letters: the repository it lands in is the
    one whose project entry is read."""
    main, worktree = _worktree(lab)
    gitdir = main / ".git" / "worktrees" / "wt"
    if pointer == ".git":
        # (lnk/.. is .git/worktrees through the link; by its letters it is the worktree)
        (worktree / "lnk").symlink_to(gitdir / "logs")
        write(worktree / ".git", "gitdir: lnk/../\n")
    else:
        (lab.root / "lnk2").symlink_to(main / ".git" / "hooks")
        write(gitdir / "commondir", f"{lab.root / 'lnk2'}/..\n")
    gitdir.joinpath("logs").mkdir(exist_ok=True)
    write(lab.home / ".claude.json",
          json.dumps({"projects": {str(main): {"mcpServers": {"o": OLD_AIDER}}}}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t", cwd=worktree)
    assert not started, "claude started in a worktree whose repository entry has an old aider"
    assert "aider 0.50.0" in reason, reason


def test_claude_in_a_linked_worktree_without_servers_in_the_entry_starts(lab: Lab) -> None:
    main, worktree = _worktree(lab)
    write(lab.home / ".claude.json",
          json.dumps({"projects": {str(main): {"allowedTools": []}}}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t", cwd=worktree)
    assert started, reason


def test_claude_under_a_git_file_not_read_exactly_is_refused(lab: Lab) -> None:
    """A ``.git`` file that does not say ``gitdir: <path>``: which repository Claude Code
    takes the project entry of is not known."""
    write(lab.project / ".git", "not a gitdir line\n")
    write(lab.home / ".claude.json", json.dumps({"projects": {"/elsewhere": {}}}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and ".git" in reason, reason


@pytest.mark.parametrize("variable", ["GIT_DIR", "GIT_COMMON_DIR"])
@pytest.mark.parametrize("given_by", ["environment", "settings"])
def test_claude_told_its_repository_by_git_variables_is_refused(
    lab: Lab, variable: str, given_by: str
) -> None:
    """GIT_DIR or GIT_COMMON_DIR (in the agent's environment, or a settings file's ``env``)
    may name another repository, whose project entry Claude Code could take: how it
    finds the repository root under them is not known, so with project entries present
    claude is refused."""
    main, _ = _worktree(lab)
    write(lab.home / ".claude.json",
          json.dumps({"projects": {str(main): {"mcpServers": {"o": OLD_AIDER}}}}))  # fmt: skip
    env = lab.env()
    if given_by == "environment":
        env[variable] = str(main / ".git")
    else:
        write(lab.home / ".claude" / "settings.json",
              json.dumps({"env": {variable: str(main / ".git")}}))  # fmt: skip
    started, reason = lab.spawn("claude", "-p", "t", env=env)
    assert not started, f"claude started with {variable} naming a repository with an old aider"
    assert variable in reason and ".claude.json" in reason, reason


def test_claude_with_git_variables_and_no_project_entries_starts(lab: Lab) -> None:
    main, _ = _worktree(lab)
    write(lab.home / ".claude.json", json.dumps({"numStartups": 1}))
    started, reason = lab.spawn("claude", "-p", "t", env=lab.env(GIT_DIR=str(main / ".git")))
    assert started, reason


# ------------------------------------------------------- the agent's arguments after a --


@pytest.mark.parametrize(
    "launch",
    [
        ("npx", "-y", "--"),
        ("npm", "exec", "--yes", "--"),
        ("npm", "x", "--yes", "--"),
    ],
)
def test_claude_run_by_a_launcher_after_its_double_dash_has_its_mcp_config_read(
    lab: Lab, launch: tuple[str, ...]
) -> None:
    # npm ends its own options at `--` and hands the package every argument after it:
    # claude's --mcp-config among them.
    app = lab.project / "app"
    project_claude(app)
    write(app / "old.json", servers(old=OLD_AIDER))
    started, reason = lab.spawn(
        *launch, "@anthropic-ai/claude-code@1.0.30", "--mcp-config", "old.json", cwd=app
    )
    assert not started
    assert "MCP server 'old'" in reason and "aider 0.50.0" in reason, reason


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize(
    "wrappers", [("node", "--no-warnings", "--"), ("env", "-u", "X", "--", "node", "--")]
)
def test_claude_run_by_node_after_its_double_dash_has_its_mcp_config_read(
    lab: Lab, wrappers: tuple[str, ...]
) -> None:
    # Each wrapper ends its own options with a `--` the agent never sees.
    app = lab.project / "app"
    project_claude(app)
    write(app / "old.json", servers(old=OLD_AIDER))
    cli = app / "node_modules" / "@anthropic-ai" / "claude-code" / "cli.js"
    started, reason = lab.spawn(*wrappers, str(cli), "--mcp-config", "old.json", cwd=app)
    assert not started
    assert "MCP server 'old'" in reason and "aider 0.50.0" in reason, reason


def test_an_agent_behind_more_double_dashes_than_wrappers_need_is_refused(lab: Lab) -> None:
    # Each `--` is one more reading of every configuration file: their count is bounded.
    app = lab.project / "app"
    project_claude(app)
    started, reason = lab.spawn(
        "npx", "-y", "--", "@anthropic-ai/claude-code@1.0.30", *["--"] * 40, cwd=app
    )
    assert not started
    assert "hold 41 `--`" in reason, reason
