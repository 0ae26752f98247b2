"""A configuration file or folder reached through a path that names the process reading it.

``.mcp.json -> /proc/self/cwd/servers.json`` (git stores such a link: a repository can ship
it) is one file when the gate reads it, in the host's process (its own working directory,
where nothing may be), and another when the agent does, in its own (the project, where the
link's target declares a server below its floor). threat-model.md refuses such paths in
every input; mcp-servers.md reads every file strictly. So a configuration file or folder
whose path leads, through links, into ``/proc/self``, ``/proc/thread-self``, ``/proc/PID``
or ``/dev/fd`` (or into a procfs mounted anywhere) is a doubt that refuses the agent, never
a file taken as absent.

The lab's ``aider`` on the agent's PATH is below its floor (tests/helpers/mcp_lab.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.mcp_lab import CODEX_OLD, OLD_AIDER, Lab, servers, write

THROUGH_THE_PROCESS = ["/proc/self/cwd/{}", "/proc/thread-self/cwd/{}", "/dev/fd/../cwd/{}"]


def _refused_for_the_link(
    lab: Lab, agent: str, *argv: str, env: dict[str, str] | None = None
) -> str:
    started, reason = lab.spawn(agent, *argv, env=env)
    assert not started, f"{agent} started with a configuration the gate read elsewhere"
    assert "/proc or /dev/fd" in reason, reason
    return reason


@pytest.mark.parametrize("spelling", THROUGH_THE_PROCESS)
def test_a_project_file_linked_into_the_process_refuses_claude(lab: Lab, spelling: str) -> None:
    write(lab.project / "servers.json", servers(o=OLD_AIDER))
    (lab.project / ".mcp.json").symlink_to(spelling.format("servers.json"))
    _refused_for_the_link(lab, "claude", "-p", "t")


@pytest.mark.parametrize(
    ("agent", "place", "text"),
    [
        ("claude", ".claude.json", json.dumps({"mcpServers": {"o": OLD_AIDER}})),
        ("codex", ".codex/config.toml", CODEX_OLD),
        ("gemini", ".gemini/settings.json", servers(o=OLD_AIDER)),
    ],
)
def test_a_home_file_linked_into_the_process_refuses_the_agent(
    lab: Lab, agent: str, place: str, text: str
) -> None:
    write(lab.project / "target", text)
    link = lab.home / place
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to("/proc/self/cwd/target")
    _refused_for_the_link(lab, agent)


@pytest.mark.parametrize(
    ("agent", "folder", "file", "text"),
    [
        ("codex", ".codex", "config.toml", CODEX_OLD),
        ("gemini", ".gemini", "settings.json", servers(o=OLD_AIDER)),
    ],
)
def test_a_home_folder_linked_into_the_process_refuses_the_agent(
    lab: Lab, agent: str, folder: str, file: str, text: str
) -> None:
    write(lab.project / "elsewhere" / file, text)
    (lab.home / folder).symlink_to("/proc/self/cwd/elsewhere")
    _refused_for_the_link(lab, agent)


def test_a_gemini_env_file_linked_into_the_process_refuses_gemini(lab: Lab) -> None:
    declared = {"mcpServers": {"s": {"command": "aider", "env": {"PATH": "$GP"}}}}
    write(lab.home / ".gemini" / "settings.json", json.dumps(declared))
    good = lab.root / "good"
    lab.aider(good, "0.70.0")
    write(lab.project / "vars", f"GP={lab.bin}\n")
    (lab.project / ".env").symlink_to("/proc/self/cwd/vars")
    _refused_for_the_link(lab, "gemini", env=lab.env(GP=str(good)))


def test_a_claude_agents_folder_linked_into_the_process_refuses_claude(lab: Lab) -> None:
    write(lab.project / "defs" / "agents" / "helper.md",
          "---\nname: helper\nmcpServers:\n  o:\n    command: aider\n---\nHelp.\n")  # fmt: skip
    (lab.project / ".claude").symlink_to("/proc/self/cwd/defs")
    _refused_for_the_link(lab, "claude", "-p", "t")


def test_a_codex_cd_folder_linked_into_the_process_refuses_codex(lab: Lab) -> None:
    write(lab.project / "real" / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(lab.project / "real" / ".codex" / "config.toml", CODEX_OLD)
    (lab.project / "sub").symlink_to("/proc/self/cwd/real")
    _refused_for_the_link(lab, "codex", "-C", "sub", "exec", "t")


@pytest.mark.parametrize("pointer", ["gitdir", "commondir"])
def test_a_worktree_whose_git_pointers_name_the_process_refuses_claude(
    lab: Lab, pointer: str
) -> None:
    """Claude takes a linked worktree's project entry from its repository's root; git (and
    claude) read ``gitdir: /proc/self/cwd/gd``, or a ``commondir`` through it, in their own
    working directory."""
    repo = lab.root / "repo"
    worktree_git = repo / ".git" / "worktrees" / "wt"
    write(lab.home / ".claude.json",
          json.dumps({"projects": {str(repo): {"mcpServers": {"o": OLD_AIDER}}}}))  # fmt: skip
    if pointer == "gitdir":
        write(worktree_git / "commondir", "../..\n")
        (lab.project / "gd").symlink_to(worktree_git)
        write(lab.project / ".git", "gitdir: /proc/self/cwd/gd\n")
    else:
        (lab.project / "repo").symlink_to(repo)
        write(worktree_git / "commondir", "/proc/self/cwd/repo/.git\n")
        write(lab.project / ".git", f"gitdir: {worktree_git}\n")
    _refused_for_the_link(lab, "claude", "-p", "t")


def test_a_gemini_ide_connection_file_linked_into_the_process_refuses_gemini(lab: Lab) -> None:
    """The IDE companion's connection file (``os.tmpdir()/gemini/ide``) as a link to the
    project's ``c.json``, which gives a ``stdio`` command."""
    connection = {"port": 1, "stdio": {"command": "aider", "args": []}}
    write(lab.project / "c.json", json.dumps(connection))
    folder = lab.root / "tmp" / "gemini" / "ide"
    folder.mkdir(parents=True)
    (folder / "gemini-ide-server-4242.json").symlink_to("/proc/self/cwd/c.json")
    _refused_for_the_link(lab, "gemini", env=lab.env(TMPDIR=str(lab.root / "tmp")))


def test_a_link_to_a_plain_file_in_the_project_is_still_read(lab: Lab) -> None:
    """The control: the same link without the process in it is read, and refuses for the
    server it declares, not for the link."""
    write(lab.project / "servers.json", servers(o=OLD_AIDER))
    (lab.project / ".mcp.json").symlink_to("servers.json")
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started and "aider 0.50.0" in reason, reason


# ---------------------------------------------------------------- a procfs mounted elsewhere


def _with_a_procfs_at(folder: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args...`` in a mount namespace of its own where a procfs is mounted
    at ``folder`` (root and unshare; skips where the mount is not allowed)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting a procfs needs root and unshare")
    script = 'mount -t proc proc "$0" && exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(folder),
         sys.executable, "-c", code, *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=folder.parent,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    if "mount" in done.stderr and done.returncode != 0:
        pytest.skip(f"cannot mount a procfs here: {done.stderr.strip()}")
    return done


def test_a_procfs_mounted_elsewhere_names_the_process_too(lab: Lab, tmp_path: Path) -> None:
    """A chroot's or a container's ``.../proc`` is a procfs like ``/proc``: a link through
    its ``self`` names the reading process just the same. Run in a mount namespace of its
    own (root and unshare), where the procfs is mounted at ``second-proc``."""
    second = tmp_path / "second-proc"
    second.mkdir()
    write(lab.project / "servers.json", servers(o=OLD_AIDER))
    (lab.project / ".mcp.json").symlink_to(f"{second}/self/cwd/servers.json")
    driver = (
        "import json, sys, floorguard\n"
        "try:\n"
        "    floorguard.spawn('claude', ['-p', 't'], env=json.loads(sys.argv[1]),"
        " cwd=sys.argv[2]).wait()\n"
        "    print('STARTED')\n"
        "except floorguard.SpawnRefused as refused:\n"
        "    print('REFUSED', refused)\n"
    )
    done = _with_a_procfs_at(second, driver, json.dumps(lab.env()), str(lab.project))
    assert done.stdout.startswith("REFUSED"), (done.stdout, done.stderr)
    assert "/proc or /dev/fd" in done.stdout, done.stdout


def test_a_child_s_path_through_a_procfs_mounted_elsewhere_is_refused(tmp_path: Path) -> None:
    """The same for what the child is given (identification.md: a path that names the
    process reading it is refused): ``PYTHONPATH=<a procfs elsewhere>/self/cwd/lib`` and a
    link to such a procfs, while a plain folder beside it is no such path."""
    second = tmp_path / "second proc"  # (a space: mountinfo writes it as \\040)
    second.mkdir()
    (tmp_path / "to-proc").symlink_to(second)
    (tmp_path / "plain").mkdir()
    driver = (
        "import json, sys\n"
        "from floorguard._identify.process_paths import through_the_process\n"
        "print(json.dumps([through_the_process([], {'PYTHONPATH': value}, '/', None)"
        " for value in sys.argv[1:]]))\n"
    )
    done = _with_a_procfs_at(
        second, driver, f"{second}/self/cwd/lib", f"{tmp_path}/to-proc/1/cwd",
        f"{tmp_path}/plain/lib",
    )  # fmt: skip
    through_second, through_link, plain = json.loads(done.stdout)
    assert through_second is not None and "PYTHONPATH" in through_second, done.stdout
    assert through_link is not None, done.stdout
    assert plain is None, done.stdout
