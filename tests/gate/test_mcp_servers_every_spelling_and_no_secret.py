"""The MCP servers claude, codex and gemini would start, in every spelling that reaches them,
and refusals that carry no credential:

- an empty HOME (node's home is then the working directory, npm's cache ``<cwd>/~/.npm``), a relative gemini system
  settings path, a codex profile a project layer names;
- ``--strict-mcp-config`` limits nothing (it may be another option's value);
- uv's options between ``tool`` and ``uvx``/``run`` are not understood, so refused;
- a codex ``-c`` override judged both merged and put in place (``enabled``, ``env``);
- a remote URL in any spelling node reads is recorded without its user information or
  path parameters, a refusal's reason hides what may be a credential it quotes, and a
  relative PATH entry is named by its place;
- agent files the workspace fills (large, many, paths too long to open) refuse the agent
  promptly instead of stalling it;
- a package manager running a local install is not followed (a named gap): untracked,
  refused under deny-by-default.

Every case spawns a native stand-in agent for real (it leaves a marker when it runs) and
asserts the outcome on the record: never a start of what must be refused, a hang or a
traceback.
"""

# The attack tables keep one case a line, as written.
# ruff: noqa: E501

from __future__ import annotations

import contextlib
import json
import os
import re

import pytest
from helpers.mcp_lab import (
    AGENT_SERVERS,
    CODEX_OLD,
    NPX_FIXED,
    OLD_AIDER,
    SECRET,
    Lab,
    mcp_remote,
    servers,
    write,
)


def lay_out(lab: Lab, files: dict[str, str]) -> None:
    """Files under the lab root: text, ``@FIFO@``, ``@LINK:target@`` (a symbolic link),
    ``@DIR@``; ``@P@`` and ``@R@`` in text stand for the project and the root."""
    for relative, given in files.items():
        path = lab.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if given == "@FIFO@":
            os.mkfifo(path)
        elif given == "@DIR@":
            path.mkdir(exist_ok=True)
        elif given.startswith("@LINK:"):
            target = given[len("@LINK:") : -1].replace("@R@", str(lab.root))
            os.symlink(target, path)
        else:
            text = given.replace("@P@", str(lab.project)).replace("@R@", str(lab.root))
            path.write_text(text, encoding="utf-8")


def run_case(lab: Lab, agent: str, files: dict[str, str], argv: tuple[str, ...],
             extra: dict[str, str]) -> tuple[bool, str]:  # fmt: skip
    lay_out(lab, files)
    extra = dict(extra)
    cwd = lab.project / extra.pop("@CWD@", ".")
    cwd.mkdir(parents=True, exist_ok=True)
    return lab.spawn(agent, *argv, cwd=cwd, env=lab.env(**extra))


def agent_md(front: str) -> str:
    return f"---\n{front}---\nBody.\n"


EXT = ".gemini/extensions/x/gemini-extension.json"


def extension(**declared: dict) -> str:
    return json.dumps({"name": "x", "version": "1.0.0", "mcpServers": declared})


# (id, agent, files, argv, extra environment): each must refuse the agent.
# ================================================================ every spelling


def test_claude_with_an_empty_home_reads_the_claude_json_of_its_working_directory(
    lab: Lab,
) -> None:
    """node's ``os.homedir()`` returns an empty HOME as given (libuv only falls back to the
    password database when HOME is unset), so claude's ``~/.claude.json`` is
    ``path.join("", ".claude.json")``: the working directory's ``.claude.json``, which the
    workspace writes. An empty HOME is a relative one; the docs take a relative HOME
    against the working directory."""
    write(lab.project / ".claude.json", servers(o=OLD_AIDER))
    started, _ = lab.spawn("claude", "-p", "t", env=lab.env(HOME=""))
    assert not started, "claude started: HOME='' makes ./.claude.json its user file"


@pytest.mark.parametrize("agent", ["gemini", "npx"])
def test_an_empty_home_refuses_an_npx_whose_cache_it_puts_in_the_working_directory(
    lab: Lab, agent: str
) -> None:
    """With HOME empty, npm keeps the ``~`` of its cache ``~/.npm``: ``<cwd>/~/.npm``, whose
    ``_npx`` trees the workspace can ship with any code under the version pinned. So for a
    server npx runs (the agent's HOME passed on) and for npx run itself."""
    write(lab.project / ".gemini" / "settings.json", servers(s=NPX_FIXED))
    argv = ("-p", "t") if agent == "gemini" else tuple(NPX_FIXED["args"])
    started, reason = lab.spawn(agent, *argv, env=lab.env(HOME=""))
    assert not started, f"{agent} started with npm's cache in the working directory"
    assert "HOME is set but empty" in reason, reason


@pytest.mark.parametrize(
    ("layer", "argv"),
    [("project/.codex/config.toml", ()), (".codex/config.toml", ()),
     ("elsewhere/.codex/config.toml", ("-C", "../elsewhere"))],
    ids=["working-directory-layer", "parent-folder-layer", "cd-folder-layer"],
)  # fmt: skip
def test_codex_reads_the_profile_a_project_layer_names(
    lab: Lab, layer: str, argv: tuple[str, ...]
) -> None:
    """The docs read ``$CODEX_HOME/NAME.config.toml`` for config.toml's ``profile``; a
    project layer is a config.toml codex merges before it reads ``profile``, so a
    workspace's ``profile = "p"`` chooses the profile that declares a below-floor aider."""
    write(lab.home / ".codex" / "p.config.toml", CODEX_OLD)
    write(lab.root / layer, 'profile = "p"\n')
    started, _ = lab.spawn("codex", *argv)
    assert not started, "codex started with the profile a project layer chose"


@pytest.mark.parametrize(
    "argv",
    [("--append-system-prompt", "--strict-mcp-config", "-p", "t"),
     ("--system-prompt", "--strict-mcp-config"), ("--model", "--strict-mcp-config"),
     ("--fallback-model", "--strict-mcp-config", "-p", "t"),
     ("--session-id", "--strict-mcp-config"), ("--add-dir", "--strict-mcp-config"),
     ("--allowedTools", "--strict-mcp-config")],
    ids=["append-system-prompt", "system-prompt", "model", "fallback-model", "session-id",
         "add-dir", "allowed-tools"],
)  # fmt: skip
def test_strict_mcp_config_as_another_options_value_limits_nothing(
    lab: Lab, argv: tuple[str, ...]
) -> None:
    """commander gives an option with a required value the next argument whatever it looks
    like (the docs rely on that for ``--mcp-config``): here ``--strict-mcp-config`` is a
    prompt, a model or a folder, not the flag, so claude loads ``.mcp.json`` and starts
    the below-floor aider. The gate takes it as the flag and reads nothing."""
    write(lab.project / ".mcp.json", servers(o=OLD_AIDER))
    started, _ = lab.spawn("claude", *argv)
    assert not started, "claude started: --strict-mcp-config was another option's value"


@pytest.mark.parametrize(
    "args",
    [["tool", "-q", "uvx", "mcp-server-fetch==2024.1.0"],
     ["tool", "-v", "uvx", "mcp-server-fetch==2024.1.0"],
     ["tool", "--offline", "run", "mcp-server-fetch==2024.1.0"],
     ["tool", "--directory", "x", "uvx", "mcp-server-fetch==2024.1.0"]],
    ids=["quiet", "verbose", "offline", "directory"],
)  # fmt: skip
def test_uv_global_options_between_tool_and_uvx_do_not_hide_the_launch(
    lab: Lab, args: list[str]
) -> None:
    """uv's global options (``-q``, ``-v``, ``--offline``, ``--directory``) are accepted
    after any subcommand, so ``uv tool -q uvx mcp-server-fetch==2024.1.0`` runs
    mcp-server-fetch 2024.1.0, below its floor. The docs refuse options before the
    subcommand; here the server is judged as plain uv (untracked) and claude starts."""
    write(lab.project / ".mcp.json", servers(s={"command": "uv", "args": args}))
    started, _ = lab.spawn("claude", "-p", "t")
    assert not started, f"claude started with uv {' '.join(args)}"


@pytest.mark.parametrize(
    ("variable", "path", "cwd"),
    [("GEMINI_CLI_SYSTEM_SETTINGS_PATH", "sys.json", "."),
     ("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", "sys.json", "."),
     ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", "../sys.json", "sub")],
    ids=["settings", "defaults", "settings-parent"],
)  # fmt: skip
def test_a_relative_gemini_system_settings_path_is_read_from_the_working_directory(
    lab: Lab, variable: str, path: str, cwd: str
) -> None:
    """Gemini CLI opens the path these variables name as given, so a relative one is read
    against its working directory. An absolute one is read and judged; a relative one is
    silently skipped (a FIFO there is not even noticed), and gemini starts."""
    write(lab.project / "sys.json", servers(o=OLD_AIDER))
    (lab.project / "sub").mkdir()
    started, _ = lab.spawn("gemini", cwd=lab.project / cwd, env=lab.env(**{variable: path}))
    assert not started, f"gemini started with {variable}={path} declaring a below-floor aider"


@pytest.mark.parametrize(
    ("user", "override"),
    [('command = "aider"\nenabled = false\n', 'mcp_servers.o={command="aider"}'),
     ('command = "aider"\nenabled = false\n', 'mcp_servers={o={command="aider"}}'),
     ('command = "aider"\nexperimental_environment = "remote"\n',
      'mcp_servers.o={command="aider"}')],
    ids=["server-table", "whole-table", "remote-environment"],
)  # fmt: skip
def test_a_codex_table_override_replaces_what_disabled_the_server(
    lab: Lab, user: str, override: str
) -> None:
    """Codex applies a ``-c KEY=VALUE`` override by putting VALUE at KEY, replacing the
    table there: ``-c mcp_servers.o={command="aider"}`` drops the ``enabled = false`` (or
    the remote environment) config.toml gave ``o``, and codex starts aider 0.50.0. The gate
    merges the override key by key, keeps ``o`` disabled, and lets codex start."""
    write(lab.home / ".codex" / "config.toml", "[mcp_servers.o]\n" + user)
    started, _ = lab.spawn("codex", "-c", override)
    assert not started, "codex started: the override replaced the disabled server's table"


@pytest.mark.parametrize(
    "override",
    ['mcp_servers.o.command="ai\\x64er"', 'mcp_servers.o.cwd="/t\\x6dp"',
     'mcp_servers.o={command="aider",}', 'mcp_servers.o={\ncommand="aider"\n}'],
    ids=["hex-escape", "hex-escape-in-cwd", "inline-table-trailing-comma", "inline-table-lines"],
)  # fmt: skip
def test_a_codex_override_only_toml_1_1_reads_is_refused(lab: Lab, override: str) -> None:
    """Codex reads ``-c`` values with a TOML 1.1 reader (``\\xHH``, inline tables over
    lines or with a trailing comma); taken as raw text here, ``"ai\\x64er"`` would be a
    missing program of that odd name, where Codex starts aider."""
    started, reason = lab.spawn("codex", "-c", override)
    assert not started and "TOML 1.1" in reason, reason


def test_a_codex_override_that_is_plain_text_is_taken_as_codex_takes_it(lab: Lab) -> None:
    assert lab.spawn("codex", "-c", "model=gpt-5", "-c", "model_reasoning_effort=high")[0]


def test_a_codex_env_override_replaces_the_path_that_found_a_safe_program(lab: Lab) -> None:
    """config.toml gives ``o`` a PATH where aider is 0.70.0; ``-c mcp_servers.o.env={X="1"}``
    replaces ``o``'s whole env in codex, so the server gets the agent's PATH and codex
    starts the aider 0.50.0 found there. The gate keeps the layer's PATH (key-by-key merge)
    and judges the safe aider."""
    safe = lab.root / "safe"
    safe.mkdir()
    lab.aider(safe, "0.70.0")
    write(lab.home / ".codex" / "config.toml",
          f'[mcp_servers.o]\ncommand = "aider"\nenv = {{PATH = "{safe}:/usr/bin"}}\n')  # fmt: skip
    assert lab.spawn("codex")[0]  # the safe aider: allowed, rightly
    started, _ = lab.spawn("codex", "-c", 'mcp_servers.o.env={X="1"}')
    assert not started, "codex started: the override's env dropped the PATH to the safe aider"


@pytest.mark.parametrize(
    "args", [["exec", "mcp-remote"], ["run", "mcp-remote"]], ids=["pnpm-exec", "yarn-run"]
)
def test_a_package_manager_running_a_local_install_is_refused_under_deny_by_default(
    lab: Lab, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pnpm exec mcp-remote`` and ``yarn run mcp-remote`` run the project's
    ``node_modules/.bin/mcp-remote`` (here mcp-remote 0.1.15, below its fix). They are not
    followed to it (a named gap): judged as the package manager, untracked, which
    deny-by-default refuses."""
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    package = lab.project / "node_modules" / "mcp-remote"
    write(package / "package.json", json.dumps(
        {"name": "mcp-remote", "version": "0.1.15", "bin": {"mcp-remote": "dist/proxy.js"}}))  # fmt: skip
    write(package / "dist" / "proxy.js", "#!/usr/bin/env node\nconsole.log(1)\n")
    (package / "dist" / "proxy.js").chmod(0o755)
    (lab.project / "node_modules" / ".bin").mkdir()
    os.symlink("../mcp-remote/dist/proxy.js", lab.project / "node_modules" / ".bin" / "mcp-remote")
    write(lab.project / "package.json", json.dumps({"name": "proj", "version": "1.0.0"}))
    command = "pnpm" if args[0] == "exec" else "yarn"
    write(lab.project / ".mcp.json", servers(s={"command": command, "args": args}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started, f"claude started with {command} {' '.join(args)} running mcp-remote 0.1.15"
    assert "not a tracked adapter" in reason or "untracked" in reason, reason


def test_an_agent_file_that_cannot_be_opened_is_a_doubt(lab: Lab) -> None:
    """An agent file below ``.claude/agents`` whose path is longer than the kernel opens
    (here 420 folders down) cannot be read exactly: the docs make that a doubt. It is
    skipped without a word and claude starts."""
    agents = lab.project / ".claude" / "agents"
    agents.mkdir(parents=True)
    fd = os.open(agents, os.O_RDONLY)
    try:
        for _ in range(420):
            os.mkdir("d" * 10, dir_fd=fd)
            new = os.open("d" * 10, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
        made = os.open("a.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(made, agent_md(f"mcpServers:\n{AGENT_SERVERS}").encode())
        os.close(made)
    finally:
        os.close(fd)
    started, _ = lab.spawn("claude", "-p", "t")
    assert not started, "claude started with an agent file the gate could not open"


def test_agent_files_the_workspace_fills_do_not_stall_the_gate(lab: Lab) -> None:
    """300 agent files (the cap is 5,000), each an unclosed front matter padded to 16 MB
    with zeros (sparse: no disk is used): the gate reads each one whole, about 0.15 s a
    file on this machine (45 s here; 1,000 files took 137 s, 5,000 would take over ten
    minutes), at every spawn, and cannot be interrupted meanwhile. A workspace can stall
    its host's every claude start."""
    import time

    agents = lab.project / ".claude" / "agents"
    agents.mkdir(parents=True)
    for number in range(300):
        with open(agents / f"a{number}.md", "wb") as out:
            out.write(b"---\nname: a\n")
            out.truncate(16_000_000)

    began = time.monotonic()
    with contextlib.suppress(TimeoutError):  # Lab.spawn gives up after 60 s
        lab.spawn("claude", "-p", "t")
    assert time.monotonic() - began < 20, "the gate stalled on the workspace's agent files"


# ======================================================================== credentials

# A URL node's WHATWG parser reads with user information that Python's urlsplit does not
# see: the receipt's ``url`` keeps the password.
URL_LEAKS: list[tuple[str, str, dict[str, str], tuple[str, ...]]] = [
    ("claude-special-scheme-without-slashes", "claude", {},
     ("--mcp-config", servers(r={"type": "http", "url": f"https:u:{SECRET}@h.example/p"}))),
    ("claude-single-slash", "claude", {},
     ("--mcp-config", servers(r={"type": "http", "url": f"https:/u:{SECRET}@h.example/p"}))),
    ("claude-backslashes", "claude", {},
     ("--mcp-config", servers(r={"type": "http", "url": f"https:\\\\u:{SECRET}@h.example\\p"}))),
    ("gemini-httpurl-backslashes", "gemini",
     {"project/.gemini/settings.json": servers(r={"httpUrl": f"https:\\\\u:{SECRET}@h.example\\p"})},
     ()),
    ("gemini-tcp-user-info", "gemini",
     {"project/.gemini/settings.json": servers(r={"tcp": f"u:{SECRET}@h.example:9"})}, ()),
    ("codex-without-slashes", "codex",
     {"home/.codex/config.toml": f'[mcp_servers.r]\nurl = "https:u:{SECRET}@h.example/p"\n'}, ()),
    ("claude-path-parameter", "claude", {},
     ("--mcp-config", servers(r={"type": "sse", "url": f"https://h.example/p;token={SECRET}"}))),
    ("claude-path-parameter-mid-path", "claude", {},
     ("--mcp-config", servers(r={"type": "http", "url": f"https://h.example/a;k={SECRET}/mcp"}))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("agent", "files", "argv"),
    [case[1:] for case in URL_LEAKS],
    ids=[case[0] for case in URL_LEAKS],
)
def test_a_remote_servers_url_is_recorded_without_its_password_in_every_spelling(
    lab: Lab, agent: str, files: dict[str, str], argv: tuple[str, ...]
) -> None:
    """The docs record a remote server's URL without user information; node parses
    ``https:u:PW@h``, ``https:/u:PW@h`` and ``https:\\\\u:PW@h`` as ``https://u:PW@h``."""
    run_case(lab, agent, files, argv, {})
    receipt = json.dumps(lab.last_receipt())
    assert SECRET not in receipt, receipt


# A refusal's reason (and the receipt that carries it) quoting the argument or value it
# refuses, credentials and all.
REASON_LEAKS: list[tuple[str, dict]] = [
    ("npx-registry-option", {"command": "npx", "args": [f"--registry=https://u:{SECRET}@e/", "-y", "mcp-remote@0.1.16"]}),
    ("npx-url-spec", {"command": "npx", "args": ["-y", f"https://u:{SECRET}@h.example/p.tgz"]}),
    ("npx-git-spec", {"command": "npx", "args": ["-y", f"git+https://u:{SECRET}@h.example/x.git"]}),
    ("npm-exe-registry-option", {"command": "npm", "args": ["exe", f"--registry=https://u:{SECRET}@e/", "--", "mcp-remote@0.1.16"]}),
    ("npm-exec-option-after-package", {"command": "npm", "args": ["exec", "mcp-remote@0.1.16", f"--token={SECRET}"]}),
    ("uvx-index-url", {"command": "uvx", "args": [f"--index-url=https://u:{SECRET}@h/simple", "mcp-server-fetch==2025.2.0"]}),
    ("uvx-git-spec", {"command": "uvx", "args": ["--from", f"git+https://u:{SECRET}@h/x.git", "x"]}),
    ("pipx-pip-args", {"command": "pipx", "args": ["run", f"--pip-args=--index-url=https://u:{SECRET}@h/", "mcp-server-fetch==2025.2.0"]}),
    ("env-nameless-assignment", {"command": "env", "args": [f"={SECRET}", "npx", "-y", "mcp-remote@0.1.16"]}),
    ("argument-with-a-variable", {"command": "npx", "args": ["-y", "mcp-remote@0.1.16", f"--header=Authorization:{SECRET}${{X}}"]}),
    ("python-glued-warning-filter", {"command": "@PYTHON@", "args": [f"-Werror::a.{SECRET}.W", "-m", "aider"]}),
    ("python-warning-filter-in-pieces", {"command": "@PYTHON@", "args": ["-W", f"error::a.{SECRET}.W", "-m", "aider"]}),
    ("python-glued-x-option", {"command": "@PYTHON@", "args": [f"-Xpycache_prefix=/tmp/{SECRET}", "-m", "aider"]}),
    ("python-warnings-variable", {"command": "@PYTHON@", "args": ["-m", "aider"], "env": {"PYTHONWARNINGS": f"error::{SECRET}.W"}}),
]  # fmt: skip


@pytest.mark.parametrize(
    "server", [case[1] for case in REASON_LEAKS], ids=[case[0] for case in REASON_LEAKS]
)
def test_a_refused_servers_reason_quotes_no_credential(lab: Lab, server: dict) -> None:
    """A server's arguments are bound by a digest, never recorded, because they may be
    credentials; the refusal of a launcher option, a spec or an expansion quotes the
    whole argument instead. (@PYTHON@: the Python of the lab's aider, 0.50.0.)"""
    if server["command"] == "@PYTHON@":
        python = (lab.bin / "aider").resolve().parent / "python3"
        server = {**server, "command": str(python)}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert SECRET not in reason, reason
    assert SECRET not in json.dumps(lab.last_receipt())


@pytest.mark.parametrize(
    "args",
    [["--experimental-loader=@REL@", "x.js"], ["--experimental-loader", "@ABS@", "x.js"],
     ["--import", "@URL@", "x.js"], ["--import=@URL@", "x.js"], ["-r", "@REL@", "x.js"]],
)  # fmt: skip
def test_a_refused_node_preload_is_named_by_its_place_however_long(lab: Lab, args: list) -> None:
    """node told to load code from the workspace first (a path or a file: URL, alone or
    glued to its option, long enough to be shortened in the reason) is refused, and the
    reason names the argument by its place, never by its text, shortened or split. (The
    file the gate judged is named by its path: that is what the refusal is about.)"""
    entry = mcp_remote(lab.project / "deps" / "a-folder-name-long-enough-to-be-cut-short")
    spelt = {"@REL@": "./" + str(entry.relative_to(lab.project)), "@ABS@": str(entry),
             "@URL@": entry.as_uri()}  # fmt: skip
    for mark, text in spelt.items():
        args = [arg.replace(mark, text) for arg in args]
    write(lab.project / ".mcp.json", servers(s={"command": "node", "args": args}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    # (an option's name is no value: "-r <argument 2>")
    assert re.search(r"node option (<argument \d> |\S+ )?<argument \d> loads code", reason), reason
    assert "file:" not in reason and "..." not in reason, reason


@pytest.mark.parametrize(
    "spelling",
    ["elsewhere/tok_SECRT", "/usr/lib:elsewhere/tok_SECRT", "x/../elsewhere/tok_SECRT",
     "elsewhere/tok_SECRT/", "elsewhere//tok_SECRT", "@ABS@", ":@ABS@/"],
)  # fmt: skip
def test_a_servers_pythonpath_folder_is_named_by_its_place_however_spelt(
    lab: Lab, spelling: str
) -> None:
    """The folder a server's PYTHONPATH puts first, holding code the reason refuses, is a
    value: named ``<env PYTHONPATH>`` whether given alone, in a list, relative, or spelt
    with ``..``, a trailing or a doubled ``/``."""
    folder = lab.project / "elsewhere" / "tok_SECRT"
    write(folder / "helper.py", "")
    (lab.project / "x").mkdir(exist_ok=True)
    python = (lab.bin / "aider").resolve().parent / "python3"
    value = spelling.replace("@ABS@", str(folder))
    server = {"command": str(python), "args": ["-m", "aider"], "env": {"PYTHONPATH": value}}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "SECRT" not in reason and "SECRT" not in json.dumps(lab.last_receipt()), reason


def test_a_token_of_short_pieces_joined_by_underscores_is_hidden_whole(lab: Lab) -> None:
    python = (lab.bin / "aider").resolve().parent / "python3"
    server = {"command": str(python), "args": ["-W", "error::tokZQ_SECRJ.W", "-m", "aider"]}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "SECRJ" not in reason and "SECRJ" not in json.dumps(lab.last_receipt()), reason


@pytest.mark.parametrize(
    ("where", "search"),
    [("server env", f"rel/{SECRET}:/usr/bin"), ("settings env", f"/usr/bin:{SECRET}/bin")],
)
def test_a_relative_path_entry_is_named_by_its_place_not_its_text(
    lab: Lab, where: str, search: str
) -> None:
    """A bare command looked up in a relative PATH entry is refused; the entry is a value
    like any other, so the refusal names which entry of which PATH, never its text. (In the
    settings' env it is claude's own PATH too, and refuses claude itself so.)"""
    if where == "server env":
        write(lab.project / ".mcp.json", servers(s={"command": "node", "env": {"PATH": search}}))
    else:
        write(lab.project / ".mcp.json", servers(s={"command": "node"}))
        write(lab.project / ".claude" / "settings.json", json.dumps({"env": {"PATH": search}}))
    started, reason = lab.spawn("claude", "-p", "t")
    named = "relative PATH entry" if where == "server env" else "entry 2 of PATH is relative"
    assert not started and named in reason, reason
    assert SECRET not in reason, reason
    assert SECRET not in json.dumps(lab.last_receipt())


# ======================================================= other spellings, refused

HELD: list[tuple[str, str, dict[str, str], tuple[str, ...], dict[str, str]]] = [
    ("gemini-relative-home", "gemini",
     {"project/hh/.gemini/settings.json": servers(o=OLD_AIDER)}, (), {"HOME": "hh"}),
    ("server-relative-home-npmrc-against-the-servers-cwd", "gemini",
     {"project/.gemini/settings.json": servers(s={**NPX_FIXED, "cwd": "w", "env": {"HOME": "hh"}}),
      "project/w/hh/.npmrc": "registry=https://e/\n"}, (), {}),
    ("gemini-url-zero-is-no-url", "gemini",
     {"project/.gemini/settings.json": servers(o={"command": "aider", "url": 0})}, (), {}),
    ("gemini-workspace-extension-linked-from-elsewhere", "gemini",
     {"elsewhere/x/gemini-extension.json": extension(o=OLD_AIDER),
      "project/.gemini/extensions/x": "@LINK:@R@/elsewhere/x@"}, (), {}),
    ("gemini-workspace-extension-command-through-extension-path", "gemini",
     {"project/" + EXT: extension(o={"command": "${extensionPath}${/}aider"}),
      "project/.gemini/extensions/x/aider": "@LINK:@R@/bin/aider@"}, (), {}),
    ("codex-exec-cd-elsewhere", "codex",
     {"elsewhere/.codex/config.toml": CODEX_OLD, "elsewhere/keep": ""},
     ("exec", "-C", "../elsewhere", "task"), {}),
    ("codex-e-alias-profile", "codex", {"home/.codex/p.config.toml": CODEX_OLD},
     ("e", "-p", "p", "task"), {}),
    ("codex-spaced-profile-override", "codex", {"home/.codex/p.config.toml": CODEX_OLD},
     ("-c", ' profile = "p" '), {}),
    ("codex-project-layer-enables-a-user-disabled-server", "codex",
     {"home/.codex/config.toml": '[mcp_servers.o]\ncommand = "aider"\nenabled = false\n',
      "project/.codex/config.toml": "[mcp_servers.o]\nenabled = true\n"}, (), {}),
    ("agent-flow-mapping-front-matter", "claude",
     {"project/.claude/agents/a.md": agent_md("{name: a, mcpServers: {o: {command: aider}}}\n")},
     (), {}),
    ("agent-alias-as-key", "claude",
     {"project/.claude/agents/a.md": agent_md('x: &k "mcp\\x53ervers"\n*k : {o: {command: aider}}\n')},
     (), {}),
    ("agent-fence-with-zero-width-no-break-space", "claude",
     {"project/.claude/agents/a.md": f"---\ufeff\nmcpServers:\n{AGENT_SERVERS}---\nB\n"}, (), {}),
    ("agent-fifo-does-not-block", "claude", {"project/.claude/agents/a.md": "@FIFO@"}, (), {}),
    ("agents-folder-linked-from-elsewhere", "claude",
     {"elsewhere/a.md": agent_md(f"mcpServers:\n{AGENT_SERVERS}"),
      "project/.claude/agents": "@LINK:@R@/elsewhere@"}, (), {}),
    ("agents-json-every-letter-escaped", "claude", {},
     ("--agents", '{"a": {"prompt": "p", "' + "".join(f"\\u{ord(c):04x}" for c in "mcpServers")
      + '": {"o": {"command": "aider"}}}}'), {}),
    ("npm-exe-through-env", "claude",
     {"project/.mcp.json": servers(s={"command": "env", "args": ["A=1", "npm", "exe", "--", "mcp-remote@0.1.15"]})},
     (), {}),
    ("uv-tool-uvx-unpinned", "claude",
     {"project/.mcp.json": servers(s={"command": "uv", "args": ["tool", "uvx", "mcp-server-fetch"]})},
     (), {}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("agent", "files", "argv", "extra"),
    [case[1:] for case in HELD],
    ids=[case[0] for case in HELD],
)
def test_each_other_spelling_is_refused(
    lab: Lab, agent: str, files: dict[str, str], argv: tuple[str, ...], extra: dict[str, str]
) -> None:
    started, reason = run_case(lab, agent, files, argv, extra)
    assert not started, f"{agent} started"
    assert reason


def test_more_than_five_thousand_entries_below_agents_is_a_doubt(lab: Lab) -> None:
    agents = lab.project / ".claude" / "agents"
    agents.mkdir(parents=True)
    for number in range(5001):
        (agents / f"n{number}.txt").write_bytes(b"")
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and "agents" in reason, reason


def test_a_codex_override_value_is_not_recorded(lab: Lab) -> None:
    started, reason = lab.spawn(
        "codex", "-c", 'mcp_servers.o.command="aider"', "-c", f'mcp_servers.o.env.TOKEN="{SECRET}"'
    )
    assert not started and SECRET not in reason
    assert SECRET not in json.dumps(lab.last_receipt())


@pytest.mark.parametrize(
    "override", [f"mcp_servers={SECRET}", f"mcp_servers.o={SECRET}"],
    ids=["servers-not-a-table", "server-not-a-table"],
)  # fmt: skip
def test_a_codex_override_codex_cannot_read_is_refused_without_its_text(
    lab: Lab, override: str
) -> None:
    """A ``-c`` override giving ``mcp_servers`` or a server a value that is no table is a
    doubt; the refusal names the option and the key, never the value given."""
    started, reason = lab.spawn("codex", "-c", override)
    assert not started and "-c" in reason, reason
    assert SECRET not in reason, reason
    assert SECRET not in json.dumps(lab.last_receipt())


# ======================================================== reasons show no argument

S = SECRET
V = "${X}"
# A refused server's reason never shows its arguments (each may be a credential, whatever
# it is called or however it is spelt): here each is refused for a variable it names.
ARG_LEAKS = [
    ("password-as-next-argument", ["--password", f"{S}{V}"]),
    ("token-as-next-argument", ["--token", f"{S}{V}"]),
    ("api-key-dash", [f"--api-key={S}{V}"]),
    ("api-key-camel", [f"--apiKey={S}{V}"]),
    ("secret-name", [f"--secret={S}{V}"]),
    ("bearer-header", [f"--header=Authorization: Bearer {S}{V}"]),
    ("header-next-argument", ["--header", f"Authorization: Bearer {S}{V}"]),
    ("colon-token", [f"token:{S}{V}"]),
    ("pwd-name", [f"--pwd={S}{V}"]),
    ("pass-name", [f"--pass={S}{V}"]),
    ("credentials-name", [f"--credentials={S}{V}"]),
    ("cookie-name", [f"--cookie=session={S}{V}"]),
    ("url-user-only", [f"https://{S}@h.example/{V}"]),
    ("url-query-token", [f"https://h.example/p?token={S}&x={V}"]),
    ("url-encoded-at", [f"https://u:{S}%40x@h.example/{V}"]),
    ("url-userinfo-two-ats", [f"https://u:{S}@x@h.example/{V}"]),
    ("json-token", ['{"token": "' + S + V + '"}']),
    ("upper-env-style", [f"GITHUB_PERSONAL_ACCESS_TOKEN={S}{V}"]),
    ("lower-assignment", [f"x={S}{V}"]),
    ("private-key-name", [f"--private_key={S}{V}"]),
    ("space-separated-token", [f"token {S}{V}"]),
    ("dsn-postgres", [f"postgresql://u:{S}@h/db{V}"]),
    ("dsn-no-scheme-slashes", [f"redis:u:{S}@h{V}"]),
]


@pytest.mark.parametrize("args", [c[1] for c in ARG_LEAKS], ids=[c[0] for c in ARG_LEAKS])
def test_a_refused_servers_argument_quotes_no_credential(lab: Lab, args: list) -> None:
    server = {"command": "npx", "args": ["-y", "mcp-remote@0.1.16", *args]}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert SECRET not in reason, reason
    assert SECRET not in json.dumps(lab.last_receipt())


@pytest.mark.parametrize(
    "declared",
    [
        {"command": "/proc/self/cwd/bin/aider"},
        {"command": "aider", "args": ["/proc/self/cwd/task.txt"]},
        {"command": "aider", "env": {"PYTHONUSERBASE": "/proc/self/cwd/ub"}},
    ],
    ids=["command", "argument", "environment"],
)
def test_a_server_declared_through_the_process_refuses_the_agent(
    lab: Lab, declared: dict[str, object]
) -> None:
    """The client starts the server, and /proc/self is then the client's own: what the
    gate would read there, in the host, is not what the server runs. Judged as the agent's
    own inputs are: refused."""
    write(lab.project / ".mcp.json", servers(s=declared))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "leads into /proc" in reason, reason


@pytest.mark.parametrize("links", ["loop", "41 links", "the script"])
def test_a_file_reached_through_a_loop_of_links_refuses_and_says_so(lab: Lab, links: str) -> None:
    """No process reads a file reached through a loop of links, or a chain of more links
    than the kernel follows (ELOOP): the agent is refused, and the reason says why, not
    that the path leads into /proc."""
    if links == "loop":
        os.symlink("l2", lab.project / "l1")
        os.symlink("l1", lab.project / "l2")
        os.symlink("l1", lab.project / ".mcp.json")
    elif links == "41 links":
        write(lab.project / "real.json", servers(s={"command": "aider"}))
        os.symlink("real.json", lab.project / "l0")
        for n in range(1, 41):
            os.symlink(f"l{n - 1}", lab.project / f"l{n}")
        os.symlink("l40", lab.project / ".mcp.json")
    else:
        os.symlink("s2", lab.project / "s1")
        os.symlink("s1", lab.project / "s2")
        write(lab.project / ".mcp.json", servers(s={"command": "aider", "args": ["./s1"]}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "/proc" not in reason and "loop of links" in reason, reason


def test_a_server_env_naming_a_proxy_and_a_certificate_authority_refuses_the_agent(
    lab: Lab,
) -> None:
    """npx fetches a pinned version nothing local holds: a proxy and a certificate
    authority the workspace's declaration names serve it whatever code they like."""
    env = {"HTTPS_PROXY": "http://127.0.0.1:9", "NODE_EXTRA_CA_CERTS": "ca.pem"}
    write(lab.project / ".mcp.json", servers(s={**NPX_FIXED, "env": env}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "HTTPS_PROXY" in reason and "NODE_EXTRA_CA_CERTS" in reason, reason
