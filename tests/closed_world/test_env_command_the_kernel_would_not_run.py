"""env starts its command with ``execvp``, which does not stop where ``execve`` fails: a file
the kernel will not run as a program (``ENOEXEC``) is run by ``/bin/sh`` as a shell script,
and a file the kernel cannot start for want of its interpreter (``ENOENT``, ``EACCES``) is
passed over for the next one of that name on the PATH. So a command judged through env must
be one the kernel will start as it is: an ELF program of this machine whose program
interpreter is there and executable, or a ``#!`` script whose interpreter is one; anything
else is a refusal naming it, whatever the policy.

The attacker's file sits first on the PATH inside an at-floor claude package (judged from its
``package.json`` without being run); a below-floor claude comes next, and must never run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from probes.native import Run, native_agent

from closed_world import test_env_wrapper
from closed_world.test_env_wrapper import Setup

setup = test_env_wrapper.setup  # the same stand-ins, map and chain as the env tests

DYNAMIC = "/usr/bin/true"  # a dynamically linked program: its PT_INTERP names the loader


def first_on_path(setup: Setup, content: bytes) -> Path:
    """A folder holding ``claude``, a link to ``content`` inside claude 1.0.30's package."""
    package = setup.root / "lib" / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "bin").mkdir(parents=True)
    manifest = {"name": "@anthropic-ai/claude-code", "version": "1.0.30"}
    manifest["bin"] = {"claude": "bin/claude"}  # type: ignore[assignment]
    (package / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    entry = package / "bin" / "claude"
    entry.write_bytes(content)
    entry.chmod(0o755)
    first = setup.root / "first"
    first.mkdir()
    (first / "claude").symlink_to(entry)
    return first


def test_a_file_that_only_looks_like_elf_is_refused_not_left_to_the_shell(setup: Setup) -> None:
    """The kernel refuses it (ENOEXEC); execvp then runs it with /bin/sh, which skips the
    first line and execs the old claude."""
    script = b"\x7fELF\nexec " + str(setup.old / "claude").encode() + b' "$@"\n'
    first = first_on_path(setup, script)
    decision = setup.spawn("claude", "-p", "task", env=setup.run_env(first, setup.fixed))
    assert decision.verdict == "refuse", decision.reason
    assert "the kernel would not run" in decision.reason, decision.reason
    assert not setup.marker(setup.old).exists()


def test_an_elf_whose_program_interpreter_is_missing_is_refused_not_passed_over(
    setup: Setup,
) -> None:
    """execve fails with ENOENT; execvp moves on to the next claude on the PATH."""
    data = Path(DYNAMIC).read_bytes()
    loader = next(p for p in (b"/lib64/ld-linux-x86-64.so.2", b"/lib/ld-linux-aarch64.so.1")
                  if p in data)  # fmt: skip
    first = first_on_path(setup, data.replace(loader, loader[:-1] + b"9"))
    decision = setup.spawn("claude", env=setup.run_env(first, setup.old))
    assert decision.verdict == "refuse", decision.reason
    assert "interpreter" in decision.reason and "claude" in decision.reason, decision.reason
    assert not setup.marker(setup.old).exists()


def test_a_script_whose_interpreter_cannot_be_executed_is_refused(setup: Setup) -> None:
    """execve fails with EACCES on the interpreter; execvp moves on to the next claude."""
    interpreters = setup.root / "interpreters"
    interpreters.mkdir()
    native_agent(interpreters / "node", version=b"v20.0.0\n", run=Run())
    (interpreters / "node").chmod(0o644)
    first = first_on_path(setup, f"#!{interpreters / 'node'}\nconsole.log(1)\n".encode())
    decision = setup.spawn("claude", env=setup.run_env(first, setup.old))
    assert decision.verdict == "refuse", decision.reason
    assert not setup.marker(setup.old).exists()


def test_a_dynamically_linked_command_whose_loader_is_there_still_runs(setup: Setup) -> None:
    first = first_on_path(setup, Path(DYNAMIC).read_bytes())
    decision = setup.spawn("claude", env=setup.run_env(first, setup.old))
    assert decision.verdict == "permit", decision.reason
    assert (decision.version, decision.identified_by) == ("1.0.30", "npm-package")
    assert not setup.marker(setup.old).exists()


def test_a_static_command_still_runs(setup: Setup) -> None:
    static = setup.root / "static"
    static.mkdir()
    shutil.copy2(setup.fixed / "claude", static / "claude")
    decision = setup.spawn("FOO=1", "claude", env=setup.run_env(static, setup.old))
    assert decision.verdict == "permit", decision.reason
    assert not setup.marker(setup.old).exists()
    assert os.path.exists(setup.marker(setup.fixed))
