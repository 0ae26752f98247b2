"""Where Gemini CLI finds and starts its MCP servers when its environment, settings or
arguments move them, each form spawned for real: an agent the gate cannot follow there is
refused on the record and never started; the honest forms nearby still start.

- An empty HOME: Gemini CLI's home folder is then the temporary folder's ``.gemini``
  (``$TMPDIR/.gemini``, else ``/tmp/.gemini``), unless GEMINI_CLI_HOME names one.
- The system defaults: beside the file GEMINI_CLI_SYSTEM_SETTINGS_PATH names, unless
  GEMINI_CLI_SYSTEM_DEFAULTS_PATH names another.

Real files in a temporary home and project, native stand-in agents that leave a marker
when they run, a host map holding aider's floor (the lab of tests/helpers/mcp_lab.py).
"""

from __future__ import annotations

import json

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


def test_gemini_with_an_empty_home_and_its_own_home_named_starts(lab: Lab) -> None:
    """GEMINI_CLI_HOME names Gemini CLI's home whatever HOME is: its settings are read
    there and judged (a below-floor server there refuses), and a clean one starts."""
    cli_home = lab.root / "cli-home"
    write(cli_home / ".gemini" / "settings.json", servers())
    started, reason = lab.spawn("gemini", env=lab.env(HOME="", GEMINI_CLI_HOME=str(cli_home)))
    assert started, reason
    write(cli_home / ".gemini" / "settings.json", servers(o=OLD_AIDER))
    started, reason = lab.spawn("gemini", env=lab.env(HOME="", GEMINI_CLI_HOME=str(cli_home)))
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
