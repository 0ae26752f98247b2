"""``python -m floorguard`` as a shell would use it: ``-V``, and ``exec``'s exit statuses.

The shell convention: 127 when the command is not found (nothing by that name, or a name
that leads nowhere), 126 when it is found but cannot be run; for floorguard every refusal
is "cannot be run" too. Each case runs the real ``python -m floorguard`` in a subprocess
against real files; a binary that ran would leave a marker, and none may.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hosts import Host, floor
from probes.native import Run, native_agent

from floorguard._version import __version__


def agent(path: Path, version: str, marker: Path) -> Path:
    """A native codex: answers ``--version``; otherwise proves that it ran."""
    return native_agent(path, version=f"codex-cli {version}\n".encode(), run=Run(marker=marker))


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "host", {"aider": floor("0.60.0"), "codex": floor("0.60.0")})


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


def exec_(
    host: Host, adapter: str, bin_dir: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    # Only bin_dir on PATH: nothing else on this machine can stand in for the adapter.
    return host.python(
        "-m", "floorguard", "exec", adapter, "--", "task", **{"PATH": str(bin_dir), **extra}
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert done.stdout == ""
    return lines[0]


def refusals(host: Host) -> list[dict[str, object]]:
    return [r["receipt"] for r in host.chain_records() if r["receipt"]["verdict"] == "refuse"]


# --- -V / --version ---------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag_prints_the_distribution_version_on_stdout(flag: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "floorguard", flag],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"floorguard {__version__}\n", "")


def test_version_flag_reads_the_version_of_the_installed_copy(host: Host) -> None:
    # A built wheel rewrites _version.py; -V must say what that copy says, not a constant.
    version_file = host.site / "floorguard" / "_version.py"
    version_file.write_text('RELEASE = "0.2.0"\n__version__ = "0.2.0.7"\n', encoding="utf-8")
    done = host.python("-m", "floorguard", "-V")
    assert (done.returncode, done.stdout) == (0, "floorguard 0.2.0.7\n")


# --- 127: not found ---------------------------------------------------------------------------


def test_exec_exits_127_when_the_tracked_adapter_is_not_on_path(host: Host, bin_dir: Path) -> None:
    done = exec_(host, "aider", bin_dir)
    assert done.returncode == 127, done.stderr
    line = one_line(done)
    assert line.startswith("floorguard: refusing to spawn aider: ")
    assert "binary not found: 'aider' is not on PATH" in line
    # Fail closed and on the record: the attempt is a recorded refusal, as before.
    [refusal] = refusals(host)
    assert refusal["adapter"] == "aider" and "binary not found" in str(refusal["reason"])


def test_exec_exits_127_when_an_untracked_adapter_is_not_on_path(host: Host, bin_dir: Path) -> None:
    done = exec_(host, "newagent", bin_dir)
    assert done.returncode == 127, done.stderr
    assert "binary not found: 'newagent' is not on PATH" in one_line(done)


def test_exec_exits_127_when_the_name_on_path_is_a_dangling_link(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    (bin_dir / "aider").symlink_to(tmp_path / "uninstalled" / "aider")
    done = exec_(host, "aider", bin_dir)
    assert done.returncode == 127, done.stderr
    assert "binary not found" in one_line(done)


def test_exec_exits_127_when_only_a_folder_has_the_name(host: Host, bin_dir: Path) -> None:
    # A folder on PATH is passed over by every shell: the command is not found.
    (bin_dir / "aider").mkdir()
    done = exec_(host, "aider", bin_dir)
    assert done.returncode == 127, done.stderr
    assert "binary not found" in one_line(done)


# --- 126: found, but cannot be run ------------------------------------------------------------


def test_exec_exits_126_when_the_only_binary_on_path_is_not_executable(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    script = agent(bin_dir / "codex", "0.61.0", marker)
    script.chmod(0o644)
    done = exec_(host, "codex", bin_dir)
    assert done.returncode == 126, done.stderr
    line = one_line(done)
    assert f"binary is not executable: {script}" in line
    assert not marker.exists()
    assert len(refusals(host)) == 1


@pytest.mark.parametrize("entry", ["relbin", "./relbin", ".", ""])
def test_exec_exits_126_when_the_name_could_be_found_only_through_a_relative_path_entry(
    host: Host, bin_dir: Path, entry: str
) -> None:
    # The child would search such an entry in its working directory, which the gate does
    # not: whether the name is there is not known, so this is no "not found".
    done = exec_(host, "aider", bin_dir, PATH=f"{entry}{os.pathsep}{bin_dir}")
    assert done.returncode == 126, done.stderr
    line = one_line(done)
    assert "entry 1 of PATH is relative" in line and "not on PATH" not in line
    assert len(refusals(host)) == 1


def test_exec_exits_126_naming_the_script_an_interpreter_is_told_to_run_when_it_is_missing(
    host: Host, bin_dir: Path
) -> None:
    # The interpreter was found (not 127): what is missing is its script, "task".
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    done = exec_(host, "python3", bin_dir)
    assert done.returncode == 126, done.stderr
    line = one_line(done)
    assert "script not found" in line and "binary not found" not in line, line


def test_exec_exits_126_when_refused_below_the_floor(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    agent(bin_dir / "codex", "0.50.0", marker)
    done = exec_(host, "codex", bin_dir)
    assert done.returncode == 126, done.stderr
    assert "below the floor" in one_line(done)
    assert not marker.exists()


def test_exec_from_a_removed_working_directory_is_a_recorded_refusal(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    """The child would start in exec's own working directory: one that was removed is a
    refusal on the record, exit 126, and nothing runs."""
    marker = tmp_path / "ran"
    agent(bin_dir / "codex", "0.70.0", marker)
    gone = tmp_path / "gone"
    gone.mkdir()
    done = host.python(
        "-m", "floorguard", "exec", "codex", "--", "task", PATH=str(bin_dir),
        wrap=("/bin/sh", "-c", 'cd "$0" && /bin/rmdir "$0" && exec "$@"', str(gone)),
    )  # fmt: skip
    assert done.returncode == 126, done.stderr
    assert "working directory" in one_line(done)
    assert not marker.exists()
    [refusal] = refusals(host)
    assert "working directory" in str(refusal["reason"])


def test_exec_exits_126_for_an_invalid_adapter_name(host: Host, bin_dir: Path) -> None:
    done = exec_(host, "../aider", bin_dir)
    assert done.returncode == 126, done.stderr
    assert "invalid adapter name" in one_line(done)
    assert "never by a path" in one_line(done)


def test_exec_exits_126_when_the_missing_binary_cannot_even_be_recorded(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    # Without a record nothing may be claimed about the binary either: the chain comes first.
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    done = exec_(host, "aider", bin_dir, FLOORGUARD_HOME=str(home))
    assert done.returncode == 126, done.stderr
    assert "could not be recorded in the audit chain" in one_line(done)


def test_exec_exits_126_when_a_permitted_binary_cannot_be_executed(
    host: Host, bin_dir: Path
) -> None:
    # Neither a #! script nor a program the kernel knows: allowed (untracked), then the exec
    # itself fails. That is "found but cannot be executed", not an error of floorguard's.
    binary = bin_dir / "newagent"
    binary.write_text("this is not a program\n")
    binary.chmod(0o755)
    done = exec_(host, "newagent", bin_dir)
    assert done.returncode == 126, done.stderr
    lines = done.stderr.splitlines()
    # The untracked warning, then the one line about the exec.
    assert len(lines) == 2 and "untracked" in lines[0], done.stderr
    assert lines[1].startswith(f"floorguard: cannot execute {binary}: ")


def test_exec_exits_127_when_a_permitted_scripts_interpreter_is_missing(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    # The kernel answers a #! line naming nothing with "not found", and so does the shell.
    binary = bin_dir / "newagent"
    binary.write_text(f"#!{tmp_path}/no-such-interpreter\n")
    binary.chmod(0o755)
    done = exec_(host, "newagent", bin_dir)
    assert done.returncode == 127, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"floorguard: cannot execute {binary}: ")


def test_exec_still_returns_the_childs_status(host: Host, bin_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    agent(bin_dir / "codex", "0.61.0", marker)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    done = host.python("-m", "floorguard", "exec", "codex", "--", "task", PATH=path)
    assert done.returncode == 0, done.stderr
    assert marker.exists()


PREFLIGHT_FROM_A_REMOVED_FOLDER = r"""
import json, os, sys
import floorguard
os.chdir(sys.argv[1]); os.rmdir(sys.argv[1])
try:
    floorguard.preflight("codex", binary=sys.argv[2])
    print(json.dumps({"refused": None}))
except floorguard.SpawnRefused as exc:
    print(json.dumps({"refused": str(exc)}))
"""


def test_a_preflight_from_a_removed_working_directory_is_refused_in_words(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    binary = agent(bin_dir / "codex", "0.70.0", tmp_path / "ran")
    gone = tmp_path / "gone"
    gone.mkdir()
    done = host.python("-c", PREFLIGHT_FROM_A_REMOVED_FOLDER, str(gone), str(binary))
    assert done.returncode == 0, done.stderr
    refused = json.loads(done.stdout)["refused"]
    assert refused is not None and "working directory" in refused, refused
    assert "FileNotFoundError" not in refused
    [refusal] = refusals(host)
    assert "working directory" in str(refusal["reason"])
