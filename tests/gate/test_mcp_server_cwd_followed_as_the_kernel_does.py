"""A server's declared ``cwd`` is where its client's child changes directory to: the kernel
follows a link there to its target, and ``..`` from it is the target's parent. node then
resolves the server's script from that folder (``process.cwd()`` is the real one), so the
gate judges the script found there, never the one the declared text would name.

Each case lays two claude packages out: one at the path the text names, one at the path
the kernel reaches. The agent is refused exactly when the one the kernel reaches is below
the floor (1.0.20).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, servers, write


def _claude_package(store: Path, version: str) -> Path:
    """claude ``version`` as npm installs it under ``store``; its cli.js."""
    package = store / version / "node_modules" / "@anthropic-ai" / "claude-code"
    write(package / "package.json", json.dumps(
        {"name": "@anthropic-ai/claude-code", "version": version, "bin": {"claude": "cli.js"}}
    ))  # fmt: skip
    cli = write(package / "cli.js", "#!/usr/bin/env node\n")
    cli.chmod(0o755)
    return cli


def _layout(lab: Lab, *, textual: str, physical: str) -> None:
    """``project/lnk`` a link to ``far/deep/dir``; ``project/x.js`` claude ``textual`` (what
    ``lnk/../x.js`` names as text), ``far/deep/x.js`` claude ``physical`` (what it is)."""
    store = lab.root / "store"
    (lab.root / "far" / "deep" / "dir").mkdir(parents=True)
    (lab.project / "lnk").symlink_to(lab.root / "far" / "deep" / "dir")
    (lab.project / "x.js").symlink_to(_claude_package(store, textual))
    (lab.root / "far" / "deep" / "x.js").symlink_to(_claude_package(store, physical))


DECLARATIONS = {
    "a relative cwd, the script above it": {"cwd": "lnk", "args": ["../x.js"]},
    "a cwd climbing out of the link": {"cwd": "lnk/..", "args": ["./x.js"]},
}


def _gemini_with(lab: Lab, declared: dict[str, object]) -> tuple[bool, str]:
    """gemini spawned in the project, which declares the node server ``declared``."""
    write(lab.project / ".gemini" / "settings.json", servers(s={"command": "node", **declared}))
    return lab.spawn("gemini", "-p", "t")


@pytest.mark.parametrize("declared", DECLARATIONS.values(), ids=DECLARATIONS.keys())
def test_the_script_the_kernel_reaches_below_its_floor_refuses_the_agent(
    lab: Lab, declared: dict[str, object]
) -> None:
    _layout(lab, textual="1.0.30", physical="1.0.0")
    started, reason = _gemini_with(lab, declared)
    assert not started, "gemini started a server running claude 1.0.0 from the link's target"
    # (named as what it is: claude, run by node; reached through links of the repository's,
    # x.js among them, its metadata vouches for nothing, below the floor or not)
    assert "MCP server 's' (claude" in reason and "run by node" in reason, reason
    assert "naming it claude 1.0.0" in reason or "claude 1.0.0" in reason, reason
    assert "1.0.30" not in reason, reason


def test_an_absolute_cwd_through_a_link_is_followed_too(lab: Lab) -> None:
    _layout(lab, textual="1.0.30", physical="1.0.0")
    started, reason = _gemini_with(lab, {"args": ["../x.js"], "cwd": str(lab.project / "lnk")})
    assert not started
    assert "1.0.0" in reason, reason


@pytest.mark.parametrize("declared", DECLARATIONS.values(), ids=DECLARATIONS.keys())
def test_the_script_the_kernel_reaches_at_its_floor_is_judged_there(
    lab: Lab, declared: dict[str, object]
) -> None:
    # (the reverse placement: the text names the old one, which never runs)
    _layout(lab, textual="1.0.0", physical="1.0.30")
    started, reason = _gemini_with(lab, declared)
    if "cwd" in declared and declared["cwd"] == "lnk/..":
        # x.js, a link the repository put in the folder its link leads to, makes the package
        # it leads to the repository's too: judged there, of no version its metadata vouches
        assert not started
        assert "naming it claude 1.0.30" in reason and "1.0.0" not in reason, reason
        return
    assert started, reason
    [server] = lab.last_receipt()["mcp_servers"]
    assert (server["adapter"], server["version"]) == ("claude", "1.0.30"), server


def test_a_cwd_no_folder_can_have_refuses_the_agent_with_a_reason(lab: Lab) -> None:
    # (a NUL: no chdir can take it, and no path holding one can be followed)
    started, reason = _gemini_with(lab, {"args": ["x.js"], "cwd": "lnk\u0000/.."})
    assert not started
    assert "cwd" in reason, reason


@pytest.mark.parametrize("cwd", ["absent", "/absent-everywhere"], ids=["relative", "absolute"])
def test_a_cwd_that_does_not_exist_refuses_the_agent_naming_that_folder(lab: Lab, cwd: str) -> None:
    # claude as the server (a native program, asked its version in the folder it would start
    # in): what cannot start there is the folder's fault, not the program's
    write(lab.project / ".gemini" / "settings.json",
          servers(s={"command": "claude", "args": ["mcp", "serve"], "cwd": cwd}))  # fmt: skip
    started, reason = lab.spawn("gemini", "-p", "t")
    assert not started, "gemini started with a server declared to start in no folder"
    assert f"working directory {lab.project / cwd if cwd == 'absent' else cwd}" in reason, reason
    assert "claude: No such file" not in reason, reason
