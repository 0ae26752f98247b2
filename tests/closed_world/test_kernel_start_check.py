"""What the kernel start check reads of a file started by name (env's command, an MCP
server): each way the kernel would refuse to start a file as it is, on real files, and the
forms it does start. (The end-to-end refusals, through env and through an agent's server,
are in test_env_command_the_kernel_would_not_run.py and
test_mcp_server_the_kernel_would_not_run.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from floorguard._identify.kernel_exec import NotStarted, check_kernel_starts
from floorguard._identify.target import open_target

PROGRAM = Path("/usr/bin/true")  # an ELF program of this machine, dynamically linked


def _check(path: Path) -> None:
    with open_target(str(path), path_env=None) as opened:
        check_kernel_starts(opened)


def _file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o755)
    return path


def _patched(tmp_path: Path, at: int, value: bytes) -> Path:
    """A copy of PROGRAM with ``value`` written at byte ``at`` of its ELF header."""
    data = bytearray(PROGRAM.read_bytes())
    data[at : at + len(value)] = value
    return _file(tmp_path / "patched", bytes(data))


def _scripts(tmp_path: Path, depth: int) -> Path:
    """A #! script whose interpreter is a script, ``depth`` scripts deep, the last run by
    /bin/sh."""
    interpreter = "/bin/sh"
    for level in range(depth):
        interpreter = str(_file(tmp_path / f"script{level}", f"#!{interpreter}\n".encode()))
    return Path(interpreter)


def test_a_program_of_this_machine_and_a_script_run_by_one_are_started(tmp_path: Path) -> None:
    _check(PROGRAM)
    _check(_scripts(tmp_path, 1))
    _check(_scripts(tmp_path, 4))  # as deep as the kernel follows


@pytest.mark.parametrize(
    ("at", "value", "why"),
    [
        (18, b"\x00\x00", "not an ELF program of this machine"),  # e_machine: none
        (4, b"\x03", "not an ELF program of this machine"),  # a class that does not exist
        (16, b"\x01\x00", "an ELF file the kernel does not run as a program"),  # ET_REL
        (54, b"\x10\x00", "an ELF file the kernel does not run as a program"),  # e_phentsize
        (56, b"\x00\x00", "an ELF program header table the kernel rejects"),  # no headers
    ],
)
def test_an_elf_file_the_kernel_would_not_start_is_refused_naming_why(
    tmp_path: Path, at: int, value: bytes, why: str
) -> None:
    with pytest.raises(NotStarted, match=why):
        _check(_patched(tmp_path, at, value))


def test_a_program_header_table_past_the_end_of_the_file_is_refused(tmp_path: Path) -> None:
    header = PROGRAM.read_bytes()[:64]  # the header alone: its table lies beyond it
    with pytest.raises(NotStarted, match="past the end of the file"):
        _check(_file(tmp_path / "cut", header))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"echo hello\n", "neither an ELF program nor a #! script"),
        (b"#!sh\n", "names no absolute interpreter"),
        (b"#!\n", "names no absolute interpreter"),
        (b"#!/nonexistent/interpreter\n", "cannot be opened"),
        (b"#!/etc\n", "is not an executable file"),
    ],
)
def test_a_file_the_kernel_would_hand_to_the_shell_or_pass_over_is_refused(
    tmp_path: Path, content: bytes, why: str
) -> None:
    with pytest.raises(NotStarted, match=why):
        _check(_file(tmp_path / "command", content))


def test_scripts_nested_deeper_than_the_kernel_follows_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotStarted, match="nested deeper than the kernel follows"):
        _check(_scripts(tmp_path, 5))
