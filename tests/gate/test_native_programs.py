"""The native stand-ins for agent CLIs behave exactly as asked: bytes out, status, side effects.

The runtime will only probe native executables, so detection and spawn tests rely on these
programs; each property they rely on is pinned here by running the programs for real.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from probes.native import Run, native_agent, native_program, require_native


@pytest.fixture(autouse=True)
def _native() -> None:
    require_native()


def run(binary: Path, *args: str, timeout: float = 10) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(binary), *args], capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout
    )


def test_a_program_is_a_static_elf_executable_and_not_a_script(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "tool", stdout=b"1.0.0\n")
    head = binary.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    assert head[4] == 2  # 64-bit
    assert head[18:20] == b"\x3e\x00"  # x86-64
    assert binary.stat().st_mode & 0o777 == 0o755


def test_it_writes_exactly_the_given_bytes_and_exits_with_the_given_status(
    tmp_path: Path,
) -> None:
    binary = native_program(
        tmp_path / "tool", stdout=b"aider 0.86.1\n", stderr=b"warning\n", exit_status=3
    )
    done = run(binary)
    assert (done.stdout, done.stderr, done.returncode) == (b"aider 0.86.1\n", b"warning\n", 3)


@pytest.mark.parametrize("args", [(), ("--version",), ("chat", "--yes")])
def test_a_plain_program_ignores_its_arguments(tmp_path: Path, args: tuple[str, ...]) -> None:
    binary = native_program(tmp_path / "tool", stdout=b"0.1.12\n")
    assert run(binary, *args).stdout == b"0.1.12\n"


def test_it_can_print_nothing_or_arbitrary_bytes(tmp_path: Path) -> None:
    assert run(native_program(tmp_path / "silent")).stdout == b""
    garbage = b"\xff\xfe\x00garbage\n"
    assert run(native_program(tmp_path / "garbage", stdout=garbage)).stdout == garbage


def test_the_marker_is_created_empty_with_mode_0644_and_only_if_asked(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run(native_program(tmp_path / "quiet", stdout=b"x\n"))
    assert not marker.exists()
    run(native_program(tmp_path / "tool", stdout=b"x\n", marker=marker))
    assert marker.read_bytes() == b""
    assert marker.stat().st_mode & 0o777 == 0o644 & ~_umask()


def test_an_existing_marker_is_truncated(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    marker.write_text("old contents")
    run(native_program(tmp_path / "tool", marker=marker))
    assert marker.read_bytes() == b""


def test_the_counter_gains_one_line_per_run(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    binary = native_program(tmp_path / "tool", stdout=b"0.1.12\n", counter=counter)
    for _ in range(3):
        run(binary)
    assert counter.read_text().splitlines() == ["run", "run", "run"]


def test_it_can_fail_silently_until_a_file_exists(tmp_path: Path) -> None:
    ready, counter = tmp_path / "ready", tmp_path / "runs"
    binary = native_program(tmp_path / "tool", stdout=b"0.1.12\n", counter=counter, requires=ready)
    assert (run(binary).stdout, run(binary).returncode) == (b"", 1)
    ready.touch()
    assert (run(binary).stdout, run(binary).returncode) == (b"0.1.12\n", 0)
    assert len(counter.read_text().splitlines()) == 4  # counted before the check


def test_it_waits_for_a_file_before_answering(tmp_path: Path) -> None:
    started, released = tmp_path / "started", tmp_path / "released"
    binary = native_program(tmp_path / "tool", stdout=b"done\n", marker=started, wait_for=released)
    child = subprocess.Popen([str(binary)], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists()
        time.sleep(0.3)
        assert child.poll() is None, "answered before the file appeared"
        released.touch()
        out, _ = child.communicate(timeout=10)
    finally:
        child.kill()
    assert out == b"done\n"


def test_it_can_sleep_before_answering(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "slow", stdout=b"late\n", sleep=0.5)
    began = time.monotonic()
    assert run(binary).stdout == b"late\n"
    assert time.monotonic() - began >= 0.5
    with pytest.raises(subprocess.TimeoutExpired):
        run(native_program(tmp_path / "slower", sleep=30), timeout=0.5)


def test_rewriting_a_program_makes_a_new_inode(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "tool", stdout=b"1.0.0\n")
    before = binary.stat().st_ino
    native_program(binary, stdout=b"2.0.0\n")
    assert binary.stat().st_ino != before
    assert run(binary).stdout == b"2.0.0\n"


def test_the_mode_is_the_one_asked_for(tmp_path: Path) -> None:
    binary = native_program(tmp_path / "tool", mode=0o644)
    assert binary.stat().st_mode & 0o777 == 0o644


def test_an_agent_answers_version_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    agent = native_agent(
        tmp_path / "aider", version=b"aider 0.61.0\n", run=Run(stdout=b"ran\n", marker=marker)
    )
    done = run(agent, "--version")
    assert (done.stdout, done.returncode) == (b"aider 0.61.0\n", 0)
    assert not marker.exists()


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("chat",),
        ("--versio",),
        ("--versionx",),
        ("-version",),
        ("--Version",),
        ("x", "--version"),
    ],
)
def test_anything_but_version_as_first_argument_runs_the_agent(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    marker = tmp_path / "ran"
    agent = native_agent(
        tmp_path / "aider",
        version=b"aider 0.61.0\n",
        run=Run(stdout=b"ran\n", exit_status=5, marker=marker),
    )
    done = run(agent, *args)
    assert (done.stdout, done.returncode) == (b"ran\n", 5)
    assert marker.exists()


def test_version_followed_by_more_arguments_still_answers_version(tmp_path: Path) -> None:
    agent = native_agent(tmp_path / "claude", version=b"1.0.3 (Claude Code)\n")
    assert run(agent, "--version", "--json").stdout == b"1.0.3 (Claude Code)\n"


def test_the_version_answer_can_leave_its_own_marker(tmp_path: Path) -> None:
    probed, ran = tmp_path / "probed", tmp_path / "ran"
    agent = native_agent(
        tmp_path / "claude", version=b"1.0.3\n", version_marker=probed, run=Run(marker=ran)
    )
    run(agent, "--version")
    assert probed.exists() and not ran.exists()


def test_an_agent_run_can_hand_over_to_a_shell_with_its_arguments_and_environment(
    tmp_path: Path,
) -> None:
    agent = native_agent(
        tmp_path / "aider",
        version=b"aider 0.61.0\n",
        run=Run(sh='echo "receipt=$RECEIPT args=$*"; exit 4'),
    )
    done = subprocess.run(
        [str(agent), "chat", "two words"], capture_output=True, env={"RECEIPT": "r-1"}
    )
    assert (done.stdout, done.returncode) == (b"receipt=r-1 args=chat two words\n", 4)
    assert run(agent, "--version").stdout == b"aider 0.61.0\n"


def _umask() -> int:
    import os

    current = os.umask(0)
    os.umask(current)
    return current
