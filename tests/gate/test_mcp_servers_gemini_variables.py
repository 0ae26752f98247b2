"""The variables Gemini CLI gives its MCP servers from its ``.env`` files, each spawned for
real: the value Gemini CLI would use is the one judged, so a server it would start below
its floor (an aider 0.50.0) refuses gemini, whatever the agent's environment says.

- An extension's ``gemini-extension.json`` is expanded from the extension's variables
  first (``~/.gemini/extensions/<its name>/.env``, then the workspace's ``.env``), before
  the environment; its ``settings`` give their variables to its servers over it.
- ``--ignore-env`` and ``advanced.ignoreLocalEnv`` make Gemini CLI pass a plain ``.env``
  by and load a farther ``.gemini/.env``.
- A ``.env`` that chooses Gemini CLI's sandbox (what it re-runs itself and its servers in)
  is refused, as one that moves its home is.

Real files in the lab's home and project (tests/helpers/mcp_lab.py): its ``bin`` holds
gemini and the old aider; ``good`` holds an aider above the floor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, servers, write
from probes.native import native_agent


def _good(lab: Lab) -> Path:
    """A folder holding an aider above its floor (0.70.0)."""
    folder = lab.root / "good"
    folder.mkdir(exist_ok=True)
    native_agent(folder / "aider", version=b"aider 0.70.0\n")
    return folder


def _good_first(lab: Lab) -> dict[str, str]:
    """The lab's environment with the good aider first on PATH (the old one after it)."""
    return lab.env(PATH=f"{_good(lab)}:{lab.bin}:/usr/bin:/bin")


def _extension(lab: Lab, declared: dict, *, folder: str = "ext", **more: object) -> None:
    document = {"name": folder, "version": "1.0.0", "mcpServers": {"s": declared}, **more}
    write(lab.home / ".gemini" / "extensions" / folder / "gemini-extension.json",
          json.dumps(document))  # fmt: skip


_PATH_SETTING = [{"name": "Search path", "description": "where tools are", "envVar": "PATH"}]


# ---------------------------------------------------------------- what a .env may not set


@pytest.mark.parametrize(
    "line",
    ["GEMINI_SANDBOX=docker\nGEMINI_SANDBOX_IMAGE=ghcr.io/attacker/old-agent:latest",
     "GEMINI_SANDBOX_PROXY_COMMAND=./proxy", "SANDBOX_FLAGS=--privileged",
     "SEATBELT_PROFILE=open", "BUILD_SANDBOX=1", "TMPDIR=./t"],
    ids=["sandbox-image", "sandbox-proxy", "sandbox-flags", "seatbelt", "build", "tmpdir"],
)  # fmt: skip
def test_a_gemini_env_file_that_chooses_its_sandbox_refuses_gemini(lab: Lab, line: str) -> None:
    """Gemini CLI loads its ``.env`` before it decides whether (and in what image, with
    what proxy command and flags) it re-runs itself and its servers in a sandbox: the
    agent and servers the gate judged on the host would not be what runs."""
    write(lab.project / ".gemini" / "settings.json", servers(s={"command": "aider"}))
    write(lab.project / ".env", line + "\n")
    started, reason = lab.spawn("gemini", "-p", "t", env=_good_first(lab))
    variable = line.partition("=")[0]
    assert not started, f"gemini started with a .env setting {variable}"
    assert variable in reason and ".env" in reason, reason
