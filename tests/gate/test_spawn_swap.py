"""The file checked is the file run: swaps of a directory on the binary's path between the
check and the exec, and the program name the child sees.

The swaps are real renames of real install trees. One attack pauses the victim the way an
attacker would, with a FIFO planted in the install tree; the others use the launcher's test
hooks, which run right after the binary is opened and right before the exec.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hosts import Host, floor, receipt_in_chain
from probes import real_venv, sh_script
from probes.native import Run, native_agent

CLAUDE = "@anthropic-ai/claude-code"

# --version answers like claude; otherwise the script proves it ran.
CLI = """\
if [ "$1" = "--version" ]; then {before}echo "{version} (Claude Code)"; exit 0; fi
: > '{marker}'
echo ran
"""


def claude_tree(
    root: Path, version: str, marker: Path, *, manifest: str | None = "json", before: str = ""
) -> Path:
    """An npm-style install of claude under ``root``; returns ``root/bin``."""
    package = root / "lib" / "node_modules" / CLAUDE
    package.mkdir(parents=True)
    if before:
        # A --version answer that acts first (the FIFO race below) needs a shell.
        sh_script(package / "cli.js", CLI.format(version=version, marker=marker, before=before))
    else:
        # A native entry in the package, as the bundled CLIs ship: scripts by a shell are
        # launchers, refused before any swap could matter.
        native_agent(
            package / "cli.js",
            version=f"{version} (Claude Code)\n".encode(),
            run=Run(stdout=b"ran\n", marker=marker),
        )
    if manifest == "json":
        (package / "package.json").write_text(
            json.dumps({"name": CLAUDE, "version": version, "bin": {"claude": "cli.js"}})
        )
    elif manifest == "fifo":
        os.mkfifo(package / "package.json")
    (root / "bin").mkdir()
    (root / "bin" / "claude").symlink_to(package / "cli.js")
    return root / "bin"


@pytest.fixture
def host(tmp_path: Path) -> Host:
    floors = {"claude": floor("1.0.100"), "aider": floor("0.60.0"), "codex": floor("0.60.0")}
    return Host(tmp_path, floors)


def no_permit_in(host: Host) -> None:
    verdicts = [r["receipt"]["verdict"] for r in host.chain_records()]
    assert "permit" not in verdicts, verdicts


def test_swapping_the_install_directory_while_the_victim_reads_a_fifo_runs_nothing(
    host: Host, tmp_path: Path
) -> None:
    # The attack as an outsider mounts it: the victim opens the old 1.0.51, then blocks on
    # a FIFO in the install tree; meanwhile the tree is swapped for a 1.0.200 whose
    # --version swaps the old tree back. A path-based probe saw 1.0.200, the re-check saw
    # the old file again, and the old file ran under a permit for 1.0.200.
    old_marker, new_marker = tmp_path / "old-ran", tmp_path / "new-ran"
    opt = tmp_path / "opt"
    claude_tree(opt, "1.0.51", old_marker, manifest="fifo")
    staged = tmp_path / "staged"
    swap_back = f"mv '{opt}' '{tmp_path}/opt-new'; mv '{tmp_path}/opt-old' '{opt}'; "
    claude_tree(staged, "1.0.200", new_marker, before=swap_back)
    fifo = opt / "lib" / "node_modules" / CLAUDE / "package.json"
    request = {"adapter": "claude", "argv": [], "child_env": {"PATH": str(opt / "bin")}}
    victim = subprocess.Popen(
        [sys.executable, "-c", host_spawn_code(), json.dumps(request)],
        env=host.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while victim.poll() is None and time.monotonic() < deadline:
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            assert exc.errno == errno.ENXIO  # no reader yet
            time.sleep(0.01)
            continue
        # The victim is blocked reading the FIFO: swap the tree under it, then let it go.
        os.rename(opt, tmp_path / "opt-old")
        os.rename(staged, opt)
        os.write(writer, b"{")
        os.close(writer)
        break
    out, err = victim.communicate(timeout=60)
    assert victim.returncode == 0, err
    [result] = json.loads(out)
    assert not result["started"], result
    assert not old_marker.exists() and not new_marker.exists()
    no_permit_in(host)


def host_spawn_code() -> str:
    from hosts import SPAWN_HOST

    return SPAWN_HOST


def codex_program(path: Path, version: str, marker: Path) -> Path:
    """A native codex: ``--version`` answers, anything else proves it ran."""
    return native_agent(path, version=f"codex-cli {version}\n".encode(), run=Run(marker=marker))


def swap_dirs(live: Path, other: Path) -> dict[str, str]:
    return {"kind": "exchange", "path": str(live), "with": str(other)}


def test_metadata_is_read_from_the_opened_tree_not_the_tree_swapped_in(
    host: Host, tmp_path: Path
) -> None:
    old_marker, new_marker = tmp_path / "old-ran", tmp_path / "new-ran"
    opt, staged = tmp_path / "opt", tmp_path / "staged"
    claude_tree(opt, "1.0.51", old_marker)
    claude_tree(staged, "1.0.200", new_marker)
    [result] = host.spawn(
        adapter="claude",
        argv=[],
        child_env={"PATH": str(opt / "bin")},
        after_open=swap_dirs(opt, staged),
        swap=swap_dirs(opt, staged),
    )
    assert not result["started"], result
    assert "1.0.51 is below the floor" in result["message"]
    receipt = receipt_in_chain(host, result["receipt_id"])
    assert (receipt["version"], receipt["detected_by"]) == ("1.0.51", "npm-metadata")
    assert not old_marker.exists() and not new_marker.exists()


def test_probe_runs_the_opened_file_not_the_file_swapped_in_under_its_path(
    host: Host, tmp_path: Path
) -> None:
    old_marker, new_marker = tmp_path / "old-ran", tmp_path / "new-ran"
    live, staged = tmp_path / "bin", tmp_path / "staged"
    codex_program(live / "codex", "0.50.0", old_marker)
    codex_program(staged / "codex", "0.99.0", new_marker)
    [result] = host.spawn(
        adapter="codex",
        argv=[],
        child_env={"PATH": str(live)},
        after_open=swap_dirs(live, staged),
        swap=swap_dirs(live, staged),
    )
    assert not result["started"], result
    receipt = receipt_in_chain(host, result["receipt_id"])
    assert (receipt["version"], receipt["detected_by"]) == ("0.50.0", "probe")
    assert not old_marker.exists() and not new_marker.exists()


def test_directory_swapped_between_check_and_exec_is_refused_and_recorded(
    host: Host, tmp_path: Path
) -> None:
    good_marker, bad_marker = tmp_path / "good-ran", tmp_path / "bad-ran"
    live, staged = tmp_path / "bin", tmp_path / "staged"
    codex_program(live / "codex", "0.70.0", good_marker)
    codex_program(staged / "codex", "0.10.0", bad_marker)
    [result] = host.spawn(
        adapter="codex", argv=[], child_env={"PATH": str(live)}, swap=swap_dirs(live, staged)
    )
    assert not result["started"], result
    assert "changed between check and exec" in result["message"]
    assert receipt_in_chain(host, result["receipt_id"])["verdict"] == "refuse"
    assert not good_marker.exists() and not bad_marker.exists()


def test_a_venvs_python_started_through_spawn_runs_inside_the_venv(
    host: Host, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    real_venv(venv)
    probe = "import sys; print(sys.prefix)"
    [result] = host.spawn(
        adapter="python3", argv=["-c", probe], child_env={"PATH": str(venv / "bin")}
    )
    assert result["started"], result
    assert result["stdout"].strip() == str(venv)


def test_a_venvs_python_started_through_exec_runs_inside_the_venv(
    host: Host, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    real_venv(venv)
    path = os.pathsep.join([str(venv / "bin"), os.environ.get("PATH", "")])
    done = host.python(
        "-m", "floorguard", "exec", "python3", "--", "-c", "import sys; print(sys.prefix)",
        PATH=path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(venv)


def test_the_child_sees_the_path_its_name_led_to_ending_in_that_name(
    host: Host, tmp_path: Path
) -> None:
    # A binary (not a script) reads argv[0]: busybox-style tools dispatch on its last part,
    # which is the name asked for; the whole is the path the check found, so that CPython
    # does not search PATH for itself again (it may lead elsewhere by then).
    # (a real program: the python3 first on PATH may be a shim, a script running another)
    echo = os.path.realpath(sys.executable)
    link = tmp_path / "bin" / "my-tool"
    link.parent.mkdir()
    link.symlink_to(echo)
    [result] = host.spawn(
        adapter="my-tool",
        argv=["-c", "import sys; print(sys.orig_argv[0])"],
        child_env={"PATH": str(link.parent)},
    )
    assert result["started"], result
    assert result["stdout"].strip() == str(link), result


def test_a_fifo_planted_as_the_binary_is_refused_without_blocking(
    host: Host, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "aider")
    [result] = host.spawn(adapter="aider", argv=[], binary=str(tmp_path / "aider"))
    assert not result["started"]
    assert "not a regular file" in result["message"]
    assert receipt_in_chain(host, result["receipt_id"])["verdict"] == "refuse"
