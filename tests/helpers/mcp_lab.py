"""The MCP lab: stand-ins for claude and codex (native, as both are published) and gemini
(a script of its npm package, run by a native stand-in for node; each leaves a marker when
it really runs), an aider below its floor (pip's console script in a virtual environment)
and the package launchers on their PATH, a host map
with the agents' floors, aider's, mcp-server-fetch's and mcp-remote's advisory, and a chain
of the lab's own. ``lab`` in tests/gate/conftest.py builds one per test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from probes import aider_install, node_with_npm, write_executable
from probes.native import Run, native_agent

import floorguard
from floorguard._chain.chain import AuditChain
from helpers.advisory_maps import advisory, entry, extended_module, span

MCP_REMOTE = {
    **entry("npm", advisory("GHSA-6xpm-ggf7-wc3p", span("0.0.5", fixed="0.1.16"))),
    "package": "mcp-remote",
    "kind": "mcp-server",
}
FETCH = {
    **entry("PyPI", floor="2025.1.0", floor_id="BSA-0100"),
    "package": "mcp-server-fetch",
    "kind": "mcp-server",
}
MAP = {
    "claude": entry("npm", floor="1.0.20", floor_id="BSA-0002"),
    "codex": entry("npm", floor="0.2.0", floor_id="BSA-0003"),
    "gemini": entry("npm", floor="0.1.14", floor_id="BSA-0004"),
    "aider": entry("PyPI", floor="0.60.0", floor_id="BSA-0001"),
    "mcp-remote": MCP_REMOTE,
    "mcp-server-fetch": FETCH,
}
VERSIONS = {"claude": b"1.0.30 (Claude Code)\n", "codex": b"codex-cli 0.5.0\n"}
GEMINI = "0.2.0"  # (its npm package's version)
SECRET = "SECRETTOKEN9"


@dataclass
class Lab:
    root: Path
    bin: Path
    home: Path
    project: Path

    def marker(self, agent: str) -> Path:
        return self.root / f"{agent}-ran"

    def aider(self, folder: Path, version: str) -> Path:
        """``folder/aider``: pip's console script of aider ``version``, in a virtual
        environment of its own outside every folder of the lab's (linked there)."""
        return aider_command(folder, version, venvs=self.root / "venvs")

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.home), **extra}

    def spawn(
        self, agent: str, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> tuple[bool, str]:
        """(started, reason); a gate that takes over 60 s is a hang and fails the test."""

        def hang(*_: object) -> None:
            raise TimeoutError("the gate hung for 60 s")

        previous = signal.signal(signal.SIGALRM, hang)
        signal.alarm(60)
        try:
            try:
                child = floorguard.spawn(
                    agent, list(argv), env=env or self.env(), cwd=str(cwd or self.project)
                )
            except floorguard.SpawnRefused as refused:
                assert refused.decision is not None and refused.decision.receipt_id, refused
                assert not self.marker(agent).exists()
                return False, str(refused)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        child.wait(timeout=30)
        assert self.marker(agent).exists()
        self.marker(agent).unlink()
        return True, ""

    def last_receipt(self) -> dict:
        chain = AuditChain.shared({"FLOORGUARD_HOME": str(self.root / "fg")})
        return dict(list(chain.records())[-1].receipt)


def aider_command(folder: Path, version: str, *, venvs: Path) -> Path:
    """``folder/aider`` linked to pip's console script of aider ``version`` in a new virtual
    environment under ``venvs``."""
    venvs.mkdir(parents=True, exist_ok=True)
    prefix = Path(tempfile.mkdtemp(prefix=f"aider-{version}-", dir=venvs))
    script = aider_install(prefix, version)
    folder.mkdir(parents=True, exist_ok=True)
    command = folder / "aider"
    command.unlink(missing_ok=True)
    command.symlink_to(script)
    return command


def exec_with_etc(
    lab: Lab, files: dict[str, str], *command: str
) -> subprocess.CompletedProcess[str]:
    """``python -I -m floorguard exec COMMAND`` (the real CLI) in a private mount namespace
    whose /etc is a copy of the host's with ``files`` added: the host's /etc is never
    written. Skips without root or unshare."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a private /etc needs root and unshare")
    etc = lab.root / "etc"
    subprocess.run(["cp", "-a", "/etc/.", str(etc)], check=False, capture_output=True)
    for relative, text in files.items():
        write(etc / relative, text)
    env = {**lab.env(), "LANG": "C.UTF-8"}
    for name in ("FLOORGUARD_HOME", "FLOORGUARD_FLOOR_MAP"):
        env[name] = os.environ[name]
    bind = 'mount --bind "$0" /etc && exec "$@"'
    argv = [sys.executable, "-I", "-m", "floorguard", "exec", *command]
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", bind, str(etc), *argv],
        cwd=lab.project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def project_claude(app: Path, version: str = "1.0.30") -> None:
    """claude ``version`` installed in ``app``'s node_modules, its bin link made, as npm
    installs it for a project (a node script: launchers' tests find it there)."""
    package = app / "node_modules" / "@anthropic-ai" / "claude-code"
    manifest = {"name": "@anthropic-ai/claude-code", "version": version,
                "bin": {"claude": "cli.js"}}  # fmt: skip
    write(package / "package.json", json.dumps(manifest))
    write(package / "cli.js", "#!/usr/bin/env node\n").chmod(0o755)
    link = app / "node_modules" / ".bin" / "claude"
    link.parent.mkdir(parents=True)
    link.symlink_to(Path("..") / "@anthropic-ai" / "claude-code" / "cli.js")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def servers(**declared: dict) -> str:
    return json.dumps({"mcpServers": declared})


OLD_AIDER = {"command": "aider"}
NPX_OLD = {"command": "npx", "args": ["-y", "mcp-remote@0.1.15"]}
OLD_NPX = {"command": "npx", "args": ["-y", "mcp-remote@0.1.15", "https://x.invalid"]}
NPX_FIXED = {"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
CODEX_OLD = '[mcp_servers.o]\ncommand = "aider"\n'
AGENT_SERVERS = "  o:\n    command: aider\n"


def make_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    for variable in ("FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_UNTRACKED_POLICY"):
        monkeypatch.delenv(variable, raising=False)
    module = write(tmp_path / "host_map.py", extended_module(MAP))
    monkeypatch.setenv("FLOORGUARD_FLOOR_MAP", str(module))
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "fg"))
    made = Lab(tmp_path, tmp_path / "bin", tmp_path / "home", tmp_path / "project")
    for folder in (made.bin, made.home, made.project):
        folder.mkdir()
    for agent, version in VERSIONS.items():
        native_agent(made.bin / agent, version=version, run=Run(marker=made.marker(agent)))
    # gemini is a node package only: its cli.js, run by a node that leaves gemini's marker.
    node = native_agent(tmp_path / "node" / "bin" / "node", version=b"v20.20.2\n",
                        run=Run(marker=made.marker("gemini")))  # fmt: skip
    package = tmp_path / "npm" / "lib" / "node_modules" / "@google" / "gemini-cli"
    write(package / "package.json", json.dumps(
        {"name": "@google/gemini-cli", "version": GEMINI, "bin": {"gemini": "cli.js"}}
    ))  # fmt: skip
    (made.bin / "gemini").symlink_to(write_executable(package / "cli.js", f"#!{node}\n"))
    # aider is a Python package only: pip's console script, below its floor 0.60.0.
    made.aider(made.bin, "0.50.0")
    for launcher in ("pnpm", "bunx", "bun"):
        native_agent(made.bin / launcher, version=b"10.0.0\n")
    # yarn is yarn's own node script, as npm installs it.
    yarn = tmp_path / "yarnpkg"
    write(yarn / "package.json", json.dumps({"name": "yarn", "version": "1.22.22"}))
    write(yarn / "bin" / "yarn.js", "#!/usr/bin/env node\n").chmod(0o755)
    (made.bin / "yarn").symlink_to(yarn / "bin" / "yarn.js")
    # uv's must say they are uv; pipx must be a Python program the gate judges.
    native_agent(made.bin / "uvx", version=b"uvx 0.9.4\n")
    native_agent(made.bin / "uv", version=b"uv 0.9.4\n")
    write(made.bin / "pipx", f"#!{sys.executable}\nimport sys\nsys.exit(0)\n").chmod(0o755)
    npm = node_with_npm(tmp_path / "nodejs")  # npx and npm: npm's own scripts, as installed
    for launcher in ("npx", "npm"):
        (made.bin / launcher).symlink_to(npm / launcher)
    yield made
    AuditChain.shared({"FLOORGUARD_HOME": str(tmp_path / "fg")}).close()


def mcp_remote(folder: Path, version: str = "0.1.16") -> Path:
    """mcp-remote ``version`` as npm installs it in ``folder/node_modules``; its entry."""
    package = folder / "node_modules" / "mcp-remote"
    write(package / "package.json", json.dumps({"name": "mcp-remote", "version": version}))
    return write(package / "index.js", "process.exit(0)\n")


def assert_server_permitted(lab: Lab, adapter: str, version: str) -> None:
    """The last receipt permits its one MCP server as ``adapter`` ``version``."""
    [judged] = lab.last_receipt()["mcp_servers"]
    assert (judged["adapter"], judged["version"], judged["verdict"]) == (adapter, version, "permit")


IN_THE_WORKSPACE = "lies in the workspace, and vouches for nothing: its version is unknown"


def assert_refused_in_the_workspace(outcome: tuple[bool, str]) -> None:
    """The agent was refused for a server whose tree lies in the workspace."""
    started, reason = outcome
    assert not started
    assert IN_THE_WORKSPACE in reason, reason
