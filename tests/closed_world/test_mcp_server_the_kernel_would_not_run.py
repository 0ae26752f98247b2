"""An agent starts its MCP servers by name, and node's ``child_process`` (claude's and
gemini's) searches the PATH with glibc's ``execvp``: a file the kernel rejects (ENOEXEC) is
run by ``/bin/sh``, and a file whose interpreter is missing is passed over for the next one of
that name on the PATH. So a server's command must be one the kernel starts as it is, or the
agent is refused, naming the server and why (whatever the policy).

The server's file sits first on its PATH inside an at-floor claude package (judged from its
``package.json``); a below-floor claude comes next.
"""

from __future__ import annotations

import json
from pathlib import Path

import floorguard
from closed_world import test_env_command_the_kernel_would_not_run as kernel
from closed_world import test_env_wrapper
from closed_world.test_env_wrapper import Setup

setup = test_env_wrapper.setup  # the same stand-ins, map and chain as the env tests


def spawn_with_server(setup: Setup, server: dict[str, object]) -> str | None:
    """Spawn the at-floor claude declaring ``server``: why it was refused (None: started)."""
    (setup.project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"helper": server}}), encoding="utf-8"
    )
    try:
        child = floorguard.spawn(
            "claude", ["-p", "task"], env=setup.run_env(setup.fixed), cwd=str(setup.project)
        )
    except floorguard.SpawnRefused as refused:
        return str(refused)
    child.wait(timeout=30)
    return None


def test_a_server_whose_file_the_client_would_pass_over_refuses_the_agent(setup: Setup) -> None:
    data = Path(kernel.DYNAMIC).read_bytes()
    loader = next(p for p in (b"/lib64/ld-linux-x86-64.so.2", b"/lib/ld-linux-aarch64.so.1")
                  if p in data)  # fmt: skip
    first = kernel.first_on_path(setup, data.replace(loader, loader[:-1] + b"9"))
    reason = spawn_with_server(
        setup, {"command": "claude", "env": {"PATH": f"{first}:{setup.old}:/usr/bin:/bin"}}
    )
    assert reason is not None, "claude was started with a server the client would pass over"
    for named in ("MCP server 'helper'", "the kernel would not run", "interpreter"):
        assert named in reason, reason
    assert not setup.marker(setup.fixed).exists()


def test_a_server_file_the_client_would_run_with_sh_refuses_the_agent(setup: Setup) -> None:
    script = b"\x7fELF\nexec " + str(setup.old / "claude").encode() + b' "$@"\n'
    first = kernel.first_on_path(setup, script)
    reason = spawn_with_server(setup, {"command": str(first / "claude")})
    assert reason is not None, "claude was started with a server the client would run with sh"
    assert "the kernel would not run" in reason, reason
    assert not setup.marker(setup.fixed).exists()


def test_a_dynamically_linked_server_the_kernel_starts_lets_the_agent_run(setup: Setup) -> None:
    first = kernel.first_on_path(setup, Path(kernel.DYNAMIC).read_bytes())
    # (declared on the agent's command line: the server, a claude itself, reads the
    # project's .mcp.json for servers of its own, and one there would declare it again)
    declared = json.dumps({"mcpServers": {"helper": {"command": str(first / "claude")}}})
    child = floorguard.spawn(
        "claude", ["--mcp-config", declared, "-p", "task"], env=setup.run_env(setup.fixed),
        cwd=str(setup.project),
    )  # fmt: skip
    child.wait(timeout=30)
    assert setup.marker(setup.fixed).exists()
