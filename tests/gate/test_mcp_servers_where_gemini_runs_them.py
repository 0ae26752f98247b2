"""Where Gemini CLI finds and starts its MCP servers when its environment, settings or
arguments move them, each form spawned for real: an agent the gate cannot follow there is
refused on the record and never started; the honest forms nearby still start.

- An empty HOME: Gemini CLI's home folder is then the temporary folder's ``.gemini``
  (``$TMPDIR/.gemini``, else ``/tmp/.gemini``), for the releases before GEMINI_CLI_HOME
  whatever it names.
- The system defaults: beside the file GEMINI_CLI_SYSTEM_SETTINGS_PATH names, unless
  GEMINI_CLI_SYSTEM_DEFAULTS_PATH names another.
- A sandbox that is on (settings ``tools.sandbox``, ``--sandbox``/``-s``,
  ``--sandbox-image``, GEMINI_SANDBOX): Gemini CLI runs itself and every server in a
  container image the gate cannot look into.
- ``--worktree``/``-w``: Gemini CLI moves into a fresh git worktree of HEAD before it
  starts its servers, whose files are not the ones judged.
- GEMINI_CLI_IDE_SERVER_STDIO_COMMAND, or an IDE connection file's ``stdio``: a command
  Gemini CLI starts as the IDE companion's MCP server.

Real files in a temporary home and project, native stand-in agents that leave a marker
when they run, a host map holding aider's floor (the lab of tests/helpers/mcp_lab.py).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers.mcp_lab import OLD_AIDER, Lab, servers, write

# ============================================================================ an empty HOME


@pytest.mark.parametrize("where", ["settings", "extension"])
def test_gemini_with_an_empty_home_reading_the_temporary_folder_is_refused(
    lab: Lab, where: str
) -> None:
    """With HOME empty, node's ``os.homedir()`` is empty and Gemini CLI takes
    ``os.tmpdir()/.gemini`` for its home folder (``Storage.getGlobalGeminiDir``): a folder
    anyone may write, whose settings the gate did not read."""
    temporary = lab.root / "tmp"
    if where == "settings":
        write(temporary / ".gemini" / "settings.json", servers(o=OLD_AIDER))
    else:
        extension = {"name": "x", "version": "1.0.0", "mcpServers": {"o": OLD_AIDER}}
        write(temporary / ".gemini" / "extensions" / "x" / "gemini-extension.json",
              json.dumps(extension))  # fmt: skip
    started, reason = lab.spawn("gemini", env=lab.env(HOME="", TMPDIR=str(temporary)))
    assert not started, "gemini started with an empty HOME"
    assert "HOME" in reason and "empty" in reason, reason


def test_gemini_with_its_own_home_named_is_judged_by_it_and_an_empty_home_refuses(
    lab: Lab,
) -> None:
    """GEMINI_CLI_HOME names Gemini CLI's home: its settings are read there and judged (a
    below-floor server there refuses), and a clean one starts. An empty HOME still refuses:
    the releases before GEMINI_CLI_HOME take their home from HOME whatever it says."""
    cli_home = lab.root / "cli-home"
    write(cli_home / ".gemini" / "settings.json", servers())
    started, reason = lab.spawn("gemini", env=lab.env(GEMINI_CLI_HOME=str(cli_home)))
    assert started, reason
    started, reason = lab.spawn("gemini", env=lab.env(HOME="", GEMINI_CLI_HOME=str(cli_home)))
    assert not started and "HOME" in reason and "empty" in reason, reason
    write(cli_home / ".gemini" / "settings.json", servers(o=OLD_AIDER))
    started, reason = lab.spawn("gemini", env=lab.env(GEMINI_CLI_HOME=str(cli_home)))
    assert not started and "aider 0.50.0" in reason, reason


# ============================================================================ system defaults


@pytest.mark.parametrize("named", ["absolute", "relative", "trailing slash"])
def test_gemini_reads_the_system_defaults_beside_the_system_settings_it_is_told(
    lab: Lab, named: str
) -> None:
    """``getSystemDefaultsPath()``: GEMINI_CLI_SYSTEM_DEFAULTS_PATH, else
    ``path.join(path.dirname(getSystemSettingsPath()), 'system-defaults.json')``; node's
    dirname drops a trailing slash, so ``sys/absent/`` still means ``sys``."""
    folder = lab.root / "sys"
    write(folder / "custom.json", "{}")
    write(folder / "system-defaults.json", servers(o=OLD_AIDER))
    path = {
        "absolute": str(folder / "custom.json"),
        "relative": "../sys/custom.json",
        "trailing slash": str(folder / "absent") + "/",
    }[named]
    started, reason = lab.spawn("gemini", env=lab.env(GEMINI_CLI_SYSTEM_SETTINGS_PATH=path))
    assert not started, f"gemini started with a below-floor server in {folder}"
    assert "aider 0.50.0" in reason and "system-defaults.json" in reason, reason


def test_gemini_reads_the_system_defaults_it_is_told_instead(lab: Lab) -> None:
    """GEMINI_CLI_SYSTEM_DEFAULTS_PATH, when set, is the defaults file: the one beside the
    system settings is not Gemini CLI's then, and gemini starts."""
    folder = lab.root / "sys"
    write(folder / "custom.json", "{}")
    write(folder / "system-defaults.json", servers(o=OLD_AIDER))
    write(lab.root / "defaults.json", servers())
    env = lab.env(
        GEMINI_CLI_SYSTEM_SETTINGS_PATH=str(folder / "custom.json"),
        GEMINI_CLI_SYSTEM_DEFAULTS_PATH=str(lab.root / "defaults.json"),
    )
    started, reason = lab.spawn("gemini", env=env)
    assert started, reason


# ============================================================================ the sandbox


@pytest.mark.parametrize(
    "sandbox",
    [True, "docker", "1", {"enabled": True, "command": "docker", "image": "ghcr.io/x/old:1"},
     {"enabled": True}, {"enabled": "yes"}, {"enabled": False, "profile": "p"}, 7, ["docker"]],
    ids=["true", "command", "one", "object", "enabled", "enabled-string", "unknown-key",
         "number", "list"],
)  # fmt: skip
@pytest.mark.parametrize("place", ["workspace", "home", "legacy key"])
def test_gemini_with_its_sandbox_on_in_settings_is_refused(
    lab: Lab, sandbox: object, place: str
) -> None:
    """``tools.sandbox`` (``sandbox`` in the settings of releases before the nested form)
    on: Gemini CLI re-runs itself, and so its servers, inside a container image
    (``loadSandboxConfig`` -> ``start_sandbox``), where nothing the gate judged runs. A
    shape the gate does not know (a number, a list, an unknown key) is refused too."""
    document = {"sandbox": sandbox} if place == "legacy key" else {"tools": {"sandbox": sandbox}}
    folder = lab.home if place == "home" else lab.project
    write(folder / ".gemini" / "settings.json", json.dumps(document))
    started, reason = lab.spawn("gemini", "-p", "t")
    assert not started, f"gemini started with its sandbox {sandbox!r} in {place} settings"
    assert "sandbox" in reason and "settings.json" in reason, reason


@pytest.mark.parametrize(
    "sandbox",
    [False, "", "0", "false", None, {"enabled": False, "image": "x"}, {}, 0,
     {"enabled": ""}, {"enabled": 0}],
    ids=["false", "empty", "zero", "false-string", "null", "disabled-object", "empty-object",
         "number-zero", "enabled-empty", "enabled-zero"],
)  # fmt: skip
def test_gemini_with_its_sandbox_off_in_settings_starts(lab: Lab, sandbox: object) -> None:
    write(lab.project / ".gemini" / "settings.json", json.dumps({"tools": {"sandbox": sandbox}}))
    started, reason = lab.spawn("gemini", "-p", "t")
    assert started, reason


@pytest.mark.parametrize(
    "argv",
    [["--sandbox"], ["-s"], ["-ys"], ["-p", "t", "--sandbox=true"], ["--sandbox", "0"],
     ["--sandbox", "False"], ["-sy", "false"], ["--sandbox-image", "ghcr.io/x/old:1"],
     ["--sandbox-image=x"], ["--sandboxImage=x"], ["-s.x"], ["--sandbox.x", "false"],
     ["--sandbox", "false", "-s"]],
    ids=["long", "short", "grouped", "equals", "spaced-zero", "spaced-capital",
         "group-not-ending-in-s", "image", "image-equals", "camel-case", "dotted",
         "dotted-spaced-false", "off-then-on"],
)  # fmt: skip
def test_gemini_told_to_use_its_sandbox_by_an_argument_is_refused(
    lab: Lab, argv: list[str]
) -> None:
    """``-s``/``--sandbox`` (in any spelling yargs reads: grouped short options, ``=``,
    dotted keys) and the older releases' ``--sandbox-image``."""
    started, reason = lab.spawn("gemini", *argv)
    assert not started, f"gemini started with {argv}"
    assert "sandbox" in reason, reason


def test_gemini_told_to_leave_its_sandbox_off_or_given_a_prompt_after_dashes_starts(
    lab: Lab,
) -> None:
    started, reason = lab.spawn("gemini", "--no-sandbox", "-p", "t")
    assert started, reason
    started, reason = lab.spawn("gemini", "-p", "t", "--", "-s", "--sandbox")
    assert started, reason


@pytest.mark.parametrize(
    "argv",
    [["--no-sandbox"], ["--sandbox=false"], ["-s=false"], ["--sandbox=0"],
     ["--sandbox", "false"], ["-s", "false"], ["-ys", "false"]],
    ids=["negated", "equals-false", "short-equals-false", "equals-zero", "spaced-false",
         "short-spaced-false", "grouped-spaced-false"],
)  # fmt: skip
@pytest.mark.parametrize("settings", ["none", "sandbox on"])
def test_gemini_told_by_an_argument_to_leave_its_sandbox_off_starts(
    lab: Lab, argv: list[str], settings: str
) -> None:
    """``loadSandboxConfig`` takes ``argv.sandbox ?? settings.tools.sandbox``: a sandbox
    argument that is false wins over a settings file that turns it on. ``--sandbox false``
    is false whether yargs reads the option as a boolean (it takes a following ``false``)
    or as a string (``"false"`` is off); ``--sandbox 0`` is not (as a boolean, the option is
    on and ``0`` the prompt)."""
    if settings == "sandbox on":
        write(lab.project / ".gemini" / "settings.json",
              json.dumps({"tools": {"sandbox": True}}))  # fmt: skip
    started, reason = lab.spawn("gemini", *argv, "-p", "t")
    assert started, reason


@pytest.mark.parametrize("value", ["false", "0", " FALSE "])
def test_gemini_with_its_sandbox_off_in_its_environment_over_its_settings_starts(
    lab: Lab, value: str
) -> None:
    """GEMINI_SANDBOX, when not empty, is taken before the arguments and the settings."""
    write(lab.project / ".gemini" / "settings.json", json.dumps({"sandbox": "docker"}))
    started, reason = lab.spawn("gemini", "-p", "t", env=lab.env(GEMINI_SANDBOX=value))
    assert started, reason


def test_a_sandbox_argument_with_a_value_not_read_as_off_is_refused_without_saying_on(
    lab: Lab,
) -> None:
    """A valued sandbox argument the gate does not read as off (here one spelled with a
    capital) is refused, and the reason does not claim it turns the sandbox on."""
    started, reason = lab.spawn("gemini", "--sandbox=False", "-p", "t")
    assert not started, "gemini started with --sandbox=False"
    assert "sandbox" in reason and "turns" not in reason, reason


@pytest.mark.parametrize("value", ["docker", "true", " TRUE ", "podman", "x"])
def test_gemini_with_its_sandbox_named_in_its_environment_is_refused(lab: Lab, value: str) -> None:
    """GEMINI_SANDBOX (lower-cased and trimmed) takes precedence over the arguments and
    the settings: anything but ``0``, ``false`` or nothing turns the sandbox on."""
    started, reason = lab.spawn("gemini", env=lab.env(GEMINI_SANDBOX=value))
    assert not started, f"gemini started with GEMINI_SANDBOX={value!r}"
    assert "GEMINI_SANDBOX" in reason, reason


@pytest.mark.parametrize("value", ["", "0", "false", " False "])
def test_gemini_with_its_sandbox_off_in_its_environment_starts(lab: Lab, value: str) -> None:
    started, reason = lab.spawn("gemini", env=lab.env(GEMINI_SANDBOX=value))
    assert started, reason


# ============================================================================ a worktree


def _repository_with_worktrees_on(lab: Lab) -> None:
    """A git repository with one commit whose settings turn Gemini CLI's worktrees on."""

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=lab.project, check=True, capture_output=True)  # fmt: skip

    git("init", "-q")
    settings = {"experimental": {"worktrees": True}, "mcpServers": {}}
    write(lab.project / ".gemini" / "settings.json", json.dumps(settings))
    git("add", "-A")
    git("commit", "-q", "-m", "init")


@pytest.mark.parametrize(
    "argv",
    [["-w", "f1"], ["--worktree=f1"], ["--worktree", "f1"], ["--worktree"], ["-yw", "f1"],
     ["-wf1"], ["--no-worktree"], ["-p", "t", "-w"]],
    ids=["short", "equals", "long", "no-name", "grouped", "attached", "negated", "after-prompt"],
)  # fmt: skip
def test_gemini_told_to_start_in_a_new_worktree_is_refused(lab: Lab, argv: list[str]) -> None:
    """With ``experimental.worktrees``, ``-w``/``--worktree`` makes Gemini CLI run
    ``git worktree add`` and move into that checkout of HEAD before it starts its servers
    (``setupWorktree``): a server found from there is HEAD's file, not the working
    tree's the gate judged. Every spelling yargs reads (a negated one, too, which asks
    for a generated name)."""
    _repository_with_worktrees_on(lab)
    started, reason = lab.spawn("gemini", *argv)
    assert not started, f"gemini started with {argv}"
    assert "worktree" in reason, reason
    assert not (lab.project / ".gemini" / "worktrees").exists()


def test_gemini_without_a_worktree_argument_starts_in_its_repository(lab: Lab) -> None:
    _repository_with_worktrees_on(lab)
    started, reason = lab.spawn("gemini", "-p", "write", "--", "-w")
    assert started, reason


# ============================================================================ the IDE companion


def test_gemini_given_an_ide_companion_command_is_refused(lab: Lab) -> None:
    """In IDE mode Gemini CLI connects to its IDE companion's MCP server, starting
    GEMINI_CLI_IDE_SERVER_STDIO_COMMAND (with GEMINI_CLI_IDE_SERVER_STDIO_ARGS) over stdio
    when the environment names one (``getStdioConfigFromEnv``): a server not judged."""
    write(lab.project / ".gemini" / "settings.json", json.dumps({"ide": {"enabled": True}}))
    env = lab.env(
        TERM_PROGRAM="vscode",
        GEMINI_CLI_IDE_WORKSPACE_PATH=str(lab.project),
        GEMINI_CLI_IDE_SERVER_STDIO_COMMAND="aider",
        GEMINI_CLI_IDE_SERVER_STDIO_ARGS="[]",
    )
    started, reason = lab.spawn("gemini", env=env)
    assert not started, "gemini started with an IDE companion command"
    assert "GEMINI_CLI_IDE_SERVER_STDIO_COMMAND" in reason, reason


def test_gemini_in_an_ide_terminal_without_a_companion_command_starts(lab: Lab) -> None:
    """The VS Code companion gives a port, not a command: that terminal still starts."""
    write(lab.project / ".gemini" / "settings.json", json.dumps({"ide": {"enabled": True}}))
    env = lab.env(
        TERM_PROGRAM="vscode",
        GEMINI_CLI_IDE_WORKSPACE_PATH=str(lab.project),
        GEMINI_CLI_IDE_SERVER_PORT="4242",
        GEMINI_CLI_IDE_SERVER_STDIO_COMMAND="",
    )
    started, reason = lab.spawn("gemini", env=env)
    assert started, reason


@pytest.mark.parametrize("name", ["gemini-ide-server-4242-1.json", "gemini-ide-server-4242.json"])
def test_gemini_with_an_ide_connection_file_giving_a_command_is_refused(
    lab: Lab, name: str
) -> None:
    """The companion's connection file in ``os.tmpdir()/gemini/ide`` may give the same
    ``stdio`` command (``getConnectionConfigFromFile``), also spelled through escapes."""
    temporary = lab.root / "tmp"
    connection = {"port": 1, "stdio": {"command": "aider", "args": []}}
    write(temporary / "gemini" / "ide" / name, json.dumps(connection).replace("s", "\\u0073"))
    started, reason = lab.spawn("gemini", env=lab.env(TMPDIR=str(temporary)))
    assert not started, "gemini started with an IDE connection file giving a command"
    assert name in reason and "stdio" in reason, reason


def test_gemini_with_an_ide_connection_file_giving_a_port_starts(lab: Lab) -> None:
    temporary = lab.root / "tmp"
    connection = {"port": 4242, "workspacePath": str(lab.project), "authToken": "t"}
    write(temporary / "gemini" / "ide" / "gemini-ide-server-1-1.json", json.dumps(connection))
    write(temporary / "gemini" / "ide" / "notes.json", json.dumps({"stdio": {}}))
    started, reason = lab.spawn("gemini", env=lab.env(TMPDIR=str(temporary) + "/"))
    assert started, reason


@pytest.mark.parametrize("variable", ["TMP", "TEMP"])
@pytest.mark.parametrize("env_file", ["workspace", "workspace .gemini", "home"])
def test_gemini_whose_env_file_moves_its_temporary_folder_to_a_connection_file_is_refused(
    lab: Lab, variable: str, env_file: str
) -> None:
    """node's ``os.tmpdir()`` is TMPDIR, else TMP, else TEMP, read when Gemini CLI looks
    for its IDE connection files, after it loaded its ``.env``: a ``.env`` giving TMP or
    TEMP (here a folder inside the workspace) points it at a connection file naming a
    command, with nothing from the host but an agent without TMPDIR."""
    write(lab.project / ".gemini" / "settings.json", json.dumps({"ide": {"enabled": True}}))
    connection = {"stdio": {"command": "aider", "args": []}, "workspacePath": "."}
    write(lab.project / "tmpx" / "gemini" / "ide" / "gemini-ide-server-1-1.json",
          json.dumps(connection))  # fmt: skip
    folder = {"workspace": lab.project, "workspace .gemini": lab.project / ".gemini",
              "home": lab.home / ".gemini"}[env_file]  # fmt: skip
    write(folder / ".env", f"{variable}={lab.project / 'tmpx'}\n")
    started, reason = lab.spawn("gemini")
    assert not started, f"gemini started with a .env giving {variable}"
    assert variable in reason and ".env" in reason, reason


@pytest.mark.parametrize("variable", ["TMP", "TEMP"])
def test_gemini_reads_the_connection_files_in_the_temporary_folder_node_takes(
    lab: Lab, variable: str
) -> None:
    """Without TMPDIR, node takes TMP, then TEMP: the connection file there is read."""
    temporary = lab.root / "tmp"
    connection = {"stdio": {"command": "aider", "args": []}}
    write(temporary / "gemini" / "ide" / "gemini-ide-server-7-1.json", json.dumps(connection))
    started, reason = lab.spawn("gemini", env=lab.env(**{variable: str(temporary)}))
    assert not started, f"gemini started with a connection file under {variable}"
    assert "gemini-ide-server-7-1.json" in reason, reason
