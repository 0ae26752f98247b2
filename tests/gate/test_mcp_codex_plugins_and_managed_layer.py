"""Two more places codex takes MCP servers from, beyond its config.toml layers.

- A plugin enabled in its configuration (``[plugins."NAME@MARKETPLACE"]``, enabled unless
  ``enabled = false``): codex starts the servers of the plugin's ``.mcp.json`` (or of the
  file its manifest names) from its installed folder under ``$CODEX_HOME/plugins/cache``.
  Those are not read here: an enabled plugin refuses codex; a disabled one does not.
- ``/etc/codex/managed_config.toml``, the legacy managed layer, a whole config layer codex
  reads over every other: its ``[mcp_servers]`` are judged as /etc/codex/config.toml's are,
  and each server also as it stands without it (earlier releases do not read it).
  (Run in a private mount namespace over a copy of /etc: the host's /etc is never written.)

Real files in a temporary home and project, native stand-in agents and an aider below its
floor, a chain of the test's own.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers.mcp_lab import CODEX_OLD, OLD_AIDER, Lab, exec_with_etc, servers, write

PLUGIN = '[plugins."oldtool@local"]\n'


def _installed_plugin(lab: Lab) -> None:
    """The plugin's installed folder, as codex's plugin store lays it out."""
    root = lab.home / ".codex" / "plugins" / "cache" / "local" / "oldtool" / "1.0.0"
    manifest = {"name": "oldtool", "version": "1.0.0"}
    write(root / ".codex-plugin" / "plugin.json", json.dumps(manifest))
    write(root / ".mcp.json", servers(old=OLD_AIDER))


@pytest.mark.parametrize(
    ("layer", "text"),
    [("home/.codex/config.toml", PLUGIN + "enabled = true\n"),
     ("home/.codex/config.toml", PLUGIN),
     ("home/.codex/config.toml", PLUGIN + '[plugins."oldtool@local".mcp_servers.old]\n'),
     ("project/.codex/config.toml", PLUGIN + "enabled = true\n")],
    ids=["user-enabled", "user-enabled-by-default", "user-server-policy", "project-layer"],
)  # fmt: skip
def test_an_enabled_codex_plugin_refuses_codex(lab: Lab, layer: str, text: str) -> None:
    _installed_plugin(lab)
    write(lab.root / layer, text)
    started, reason = lab.spawn("codex", "exec", "t")
    assert not started, "codex started with an enabled plugin declaring a below-floor server"
    assert "oldtool@local" in reason and "plugin" in reason, reason


def test_a_plugin_enabled_by_a_config_override_refuses_codex(lab: Lab) -> None:
    _installed_plugin(lab)
    started, reason = lab.spawn("codex", "-c", 'plugins."oldtool@local".enabled=true', "exec", "t")
    assert not started
    assert "plugin" in reason, reason


def test_a_disabled_codex_plugin_lets_codex_start(lab: Lab) -> None:
    _installed_plugin(lab)
    write(lab.home / ".codex" / "config.toml", PLUGIN + "enabled = false\n")
    started, reason = lab.spawn("codex", "exec", "t")
    assert started, reason


def _exec_with_etc(lab: Lab, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``floorguard exec codex`` with ``files`` in a private copy of /etc."""
    return exec_with_etc(lab, files, "codex", "--", "exec", "t")


def test_the_legacy_managed_config_layer_is_judged(lab: Lab) -> None:
    ran = _exec_with_etc(lab, {"codex/managed_config.toml": CODEX_OLD})
    assert ran.returncode == 126, ran.stdout + ran.stderr
    assert "managed_config.toml" in ran.stderr and "aider 0.50.0" in ran.stderr, ran.stderr
    assert not lab.marker("codex").exists()


def test_a_server_the_managed_layer_disables_is_judged_as_earlier_releases_start_it(
    lab: Lab,
) -> None:
    """Releases before codex's config loader never read managed_config.toml: for them
    the user's server is on, whatever the managed layer says."""
    write(lab.home / ".codex" / "config.toml", CODEX_OLD)
    ran = _exec_with_etc(lab, {"codex/managed_config.toml": "[mcp_servers.o]\nenabled = false\n"})
    assert ran.returncode == 126, ran.stdout + ran.stderr
    assert "aider 0.50.0" in ran.stderr, ran.stderr


def test_a_managed_config_layer_without_servers_lets_codex_start(lab: Lab) -> None:
    ran = _exec_with_etc(lab, {"codex/managed_config.toml": 'model = "o3"\n'})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert lab.marker("codex").exists()


@pytest.mark.parametrize("where", ["environment", "workspace .env"])
def test_a_managed_layer_named_by_codex_managed_config_path_refuses_codex(
    lab: Lab, where: str
) -> None:
    """Codex up to 0.78 takes its managed layer from CODEX_MANAGED_CONFIG_PATH (removed in
    0.79): a layer over every other, not read here. So is the variable set by a ``.env``
    the first releases load whole."""
    managed = write(lab.root / "managed.toml", CODEX_OLD)
    env = lab.env()
    if where == "environment":
        env["CODEX_MANAGED_CONFIG_PATH"] = str(managed)
    else:
        write(lab.project / ".env", f"CODEX_MANAGED_CONFIG_PATH={managed}\n")
    started, reason = lab.spawn("codex", "exec", "task", env=env)
    assert not started, f"codex started with CODEX_MANAGED_CONFIG_PATH from its {where}"
    assert "CODEX_MANAGED_CONFIG_PATH" in reason, reason
