"""Native stand-ins for agent CLIs: tiny static Linux x86-64 executables written byte by byte.

The runtime only trusts ``--version`` answers from native executables (a ``#!`` script that
answers ``--version`` may be a launcher for something else), so the tests need real native
programs with chosen behaviour. CI machines have Python and pip but no compiler: this module
assembles the few instructions it needs itself and wraps them in a minimal ELF file (one ELF
header, one PT_LOAD program header, then the program's data and code; no sections, no libc).

Each program is a straight line of raw system calls: optionally create a marker file, append a
line to a counter file, wait for a file to appear, sleep; then write fixed bytes to stdout and
stderr and exit with a fixed status. :func:`native_agent` adds a branch on ``argv[1]`` so that
``--version`` is answered differently from a real run.
"""

from __future__ import annotations

import os
import platform
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# Where the kernel maps the file: a conventional address for non-PIE executables, low enough
# that every address in the program fits a sign-extended 32-bit immediate.
BASE = 0x400000
ELF_HEADER_SIZE = 64
PROGRAM_HEADER_SIZE = 56
HEADERS = ELF_HEADER_SIZE + PROGRAM_HEADER_SIZE

# Linux x86-64 system call numbers and flags used below.
SYS_WRITE, SYS_OPEN, SYS_CLOSE, SYS_ACCESS, SYS_NANOSLEEP = 1, 2, 3, 21, 35
SYS_EXECVE, SYS_EXIT_GROUP = 59, 231
O_WRONLY, O_CREAT, O_TRUNC, O_APPEND = 0o1, 0o100, 0o1000, 0o2000

COUNTER_LINE = b"run\n"


def native_supported() -> bool:
    """Whether this machine can run the programs (Linux on x86-64)."""
    return sys.platform.startswith("linux") and platform.machine() in {"x86_64", "AMD64"}


def require_native() -> None:
    """Skip the calling test where the programs cannot run."""
    if not native_supported():
        pytest.skip("native test programs are Linux x86-64 executables")


# --- instruction encodings -------------------------------------------------------------------
# Each helper returns the machine code for one instruction; names follow Intel syntax.


def _imm32(value: int) -> bytes:
    return struct.pack("<i" if value < 0 else "<I", value)


def mov_eax(value: int) -> bytes:
    """mov eax, imm32 (also clears the upper half of rax)."""
    return b"\xb8" + _imm32(value)


def mov_ecx(value: int) -> bytes:
    """mov ecx, imm32."""
    return b"\xb9" + _imm32(value)


def mov_edx(value: int) -> bytes:
    """mov edx, imm32."""
    return b"\xba" + _imm32(value)


def mov_esi(value: int) -> bytes:
    """mov esi, imm32."""
    return b"\xbe" + _imm32(value)


def mov_edi(value: int) -> bytes:
    """mov edi, imm32."""
    return b"\xbf" + _imm32(value)


def xor_esi_esi() -> bytes:
    return b"\x31\xf6"


def mov_rdi_rax() -> bytes:
    return b"\x48\x89\xc7"


def mov_rsi_rsp() -> bytes:
    return b"\x48\x89\xe6"


def syscall() -> bytes:
    return b"\x0f\x05"


def check_eax() -> bytes:
    """test eax, eax: sets ZF when a system call returned 0."""
    return b"\x85\xc0"


def jz_short(displacement: int) -> bytes:
    """jz rel8: jump ``displacement`` bytes past the end of this instruction if ZF is set."""
    return b"\x74" + struct.pack("<b", displacement)


def jmp_short(displacement: int) -> bytes:
    """jmp rel8."""
    return b"\xeb" + struct.pack("<b", displacement)


def jl_near(displacement: int) -> bytes:
    """jl rel32 (signed less-than)."""
    return b"\x0f\x8c" + struct.pack("<i", displacement)


def jne_near(displacement: int) -> bytes:
    """jne rel32."""
    return b"\x0f\x85" + struct.pack("<i", displacement)


def push_imm32(value: int) -> bytes:
    """push imm32 (sign-extended to 64 bits)."""
    return b"\x68" + _imm32(value)


# --- named instruction sequences ---------------------------------------------------------------


@dataclass
class Image:
    """The data part of a program: byte strings placed right after the headers, each reachable
    by its absolute address (the code follows the data, so every address is known up front)."""

    data: bytearray = field(default_factory=bytearray)

    def place(self, blob: bytes) -> int:
        """Append ``blob`` and return the address it will be loaded at."""
        address = BASE + HEADERS + len(self.data)
        self.data += blob
        return address

    def string(self, text: bytes | str | os.PathLike[str]) -> int:
        """A NUL-terminated copy of ``text`` (a path or argument), for system calls."""
        raw = os.fsencode(text) if not isinstance(text, bytes) else text
        if b"\0" in raw:
            raise ValueError(f"a C string cannot hold NUL: {raw!r}")
        return self.place(raw + b"\0")


def write_fd(image: Image, fd: int, blob: bytes) -> bytes:
    """write(fd, blob, len(blob)); nothing at all for an empty blob."""
    if not blob:
        return b""
    return (
        mov_eax(SYS_WRITE) + mov_edi(fd) + mov_esi(image.place(blob)) + mov_edx(len(blob))
    ) + syscall()


def open_path(image: Image, path: Path, flags: int, mode: int = 0o644) -> bytes:
    """open(path, flags, mode); the descriptor (or -errno) is left in rax."""
    return (
        mov_eax(SYS_OPEN) + mov_edi(image.string(path)) + mov_esi(flags) + mov_edx(mode)
    ) + syscall()


def close_rax() -> bytes:
    """close(rax): rdi keeps the descriptor (a failed open makes this a harmless EBADF)."""
    return mov_rdi_rax() + mov_eax(SYS_CLOSE) + syscall()


def create_marker(image: Image, marker: Path) -> bytes:
    """Create (or truncate) ``marker``, mode 0644: proof that the program ran this far."""
    return open_path(image, marker, O_WRONLY | O_CREAT | O_TRUNC) + close_rax()


def append_counter_line(image: Image, counter: Path) -> bytes:
    """Append one ``run`` line to ``counter`` (created if missing): counts the runs."""
    line = image.place(COUNTER_LINE)
    return (
        open_path(image, counter, O_WRONLY | O_CREAT | O_APPEND)
        + mov_rdi_rax()  # the descriptor; syscalls preserve rdi
        + mov_eax(SYS_WRITE)
        + mov_esi(line)
        + mov_edx(len(COUNTER_LINE))
        + syscall()
        + mov_eax(SYS_CLOSE)
        + syscall()
    )


def _timespec(image: Image, seconds: float) -> int:
    whole = int(seconds)
    return image.place(struct.pack("<qq", whole, round((seconds - whole) * 1e9)))


def sleep_for(image: Image, seconds: float) -> bytes:
    """nanosleep(seconds): stands in for a CLI that takes its time to answer."""
    return mov_eax(SYS_NANOSLEEP) + mov_edi(_timespec(image, seconds)) + xor_esi_esi() + syscall()


def wait_until_exists(image: Image, path: Path, poll: float = 0.05) -> bytes:
    """Loop until access(path, F_OK) succeeds, sleeping ``poll`` seconds between tries."""
    check = mov_eax(SYS_ACCESS) + mov_edi(image.string(path)) + xor_esi_esi() + syscall()
    nap = sleep_for(image, poll)
    # check; test eax, eax; jz done; nap; jmp check; done:
    loop_back = -(len(check) + 2 + 2 + len(nap) + 2)
    return check + check_eax() + jz_short(len(nap) + 2) + nap + jmp_short(loop_back)


def exit_unless_exists(image: Image, path: Path, status: int) -> bytes:
    """exit_group(status) unless access(path, F_OK) succeeds."""
    check = mov_eax(SYS_ACCESS) + mov_edi(image.string(path)) + xor_esi_esi() + syscall()
    leave = exit_with(status)
    return check + check_eax() + jz_short(len(leave)) + leave


def exit_with(status: int) -> bytes:
    """exit_group(status)."""
    return mov_eax(SYS_EXIT_GROUP) + mov_edi(status & 0xFF) + syscall()


def exec_shell(image: Image, script: str) -> bytes:
    """execve("/bin/sh", ["/bin/sh", "-c", script, argv[0], argv[1], ...], envp).

    For the run path of an agent whose test needs what only a shell does easily (print an
    environment variable, echo its arguments): the program itself stays native, as a native
    CLI that starts other processes would. Exits 127 if the exec fails.
    """
    shell, dash_c, body = image.string("/bin/sh"), image.string("-c"), image.string(script)
    return (
        b"\x48\x8b\x1c\x24"  # mov rbx, [rsp]              ; rbx = argc
        + b"\x4c\x8d\x64\x24\x08"  # lea r12, [rsp+8]      ; r12 = argv
        + b"\x49\x8d\x54\xdc\x08"  # lea rdx, [r12+rbx*8+8] ; rdx = envp (after argv's NULL)
        + b"\x6a\x00"  # push 0                            ; the new argv's NULL
        + b"\x48\x89\xd9"  # mov rcx, rbx                  ; copy argv backwards...
        + b"\x48\x85\xc9"  # test rcx, rcx
        + jz_short(7)  # (argc 0: nothing to copy)
        + b"\x41\xff\x74\xcc\xf8"  # push qword [r12+rcx*8-8] ; ...argv[rcx-1]
        + b"\xe2\xf9"  # loop back to the push while --rcx != 0
        + push_imm32(body)  # the script, then "-c", then the shell's own name
        + push_imm32(dash_c)
        + push_imm32(shell)
        + mov_edi(shell)
        + mov_rsi_rsp()  # rsi = the new argv, built on the stack
        + mov_eax(SYS_EXECVE)
        + syscall()
        + exit_with(127)
    )


def argv1_differs_from(image: Image, expected: bytes, skip: int) -> bytes:
    """Jump ``skip`` bytes ahead unless argc >= 2 and argv[1] == ``expected``."""
    pattern = image.string(expected)
    # Comparing len + 1 bytes includes the terminating NUL; repe cmpsb stops at the first
    # difference, so it never reads past the end of a shorter argv[1].
    compare = (
        b"\x48\x8b\x74\x24\x10"  # mov rsi, [rsp+16]   ; argv[1]
        + mov_edi(pattern)
        + mov_ecx(len(expected) + 1)
        + b"\xfc"  # cld                               ; compare forwards
        + b"\xf3\xa6"  # repe cmpsb
    )
    differs = jne_near(skip)
    too_few = b"\x48\x83\x3c\x24\x02" + jl_near(len(compare) + len(differs) + skip)  # argc < 2
    return too_few + compare + differs


# --- programs ---------------------------------------------------------------------------------


def elf_file(image: Image, code: bytes) -> bytes:
    """A static ELF64 executable loading the headers, ``image``'s data and ``code`` (the entry
    point) in one read-write-execute segment at ``BASE``."""
    body = bytes(image.data) + code
    size = HEADERS + len(body)
    entry = BASE + HEADERS + len(image.data)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # 64-bit, little-endian, version 1
    header = struct.pack(
        "<16sHHIQQQIHHHHHH",
        ident,
        2,  # e_type: ET_EXEC
        0x3E,  # e_machine: x86-64
        1,  # e_version
        entry,
        ELF_HEADER_SIZE,  # e_phoff: the program header follows the ELF header
        0,  # e_shoff: no section headers
        0,  # e_flags
        ELF_HEADER_SIZE,
        PROGRAM_HEADER_SIZE,
        1,  # e_phnum
        64,  # e_shentsize
        0,  # e_shnum
        0,  # e_shstrndx
    )
    load = struct.pack(
        "<IIQQQQQQ",
        1,  # p_type: PT_LOAD
        7,  # p_flags: read, write, execute
        0,  # p_offset: map the whole file...
        BASE,  # ...at BASE
        BASE,
        size,  # p_filesz
        size,  # p_memsz
        0x1000,  # p_align
    )
    return header + load + body


@dataclass(frozen=True)
class Run:
    """What a program does on one path, in this order: create ``marker``, append a line to
    ``counter``, exit 1 at once unless ``requires`` exists, wait until ``wait_for`` exists,
    sleep ``sleep`` seconds, write ``stdout`` then ``stderr``, then exit with
    ``exit_status`` (or exec ``/bin/sh -c sh`` instead)."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_status: int = 0
    marker: Path | None = None
    counter: Path | None = None
    wait_for: Path | None = None
    sleep: float = 0.0
    sh: str | None = None
    requires: Path | None = None

    def assemble(self, image: Image) -> bytes:
        steps: list[Callable[[], bytes]] = []
        if self.marker is not None:
            steps.append(lambda: create_marker(image, self.marker))  # type: ignore[arg-type]
        if self.counter is not None:
            steps.append(lambda: append_counter_line(image, self.counter))  # type: ignore[arg-type]
        if self.requires is not None:
            steps.append(lambda: exit_unless_exists(image, self.requires, 1))  # type: ignore[arg-type]
        if self.wait_for is not None:
            steps.append(lambda: wait_until_exists(image, self.wait_for))  # type: ignore[arg-type]
        if self.sleep:
            steps.append(lambda: sleep_for(image, self.sleep))
        steps.append(lambda: write_fd(image, 1, self.stdout))
        steps.append(lambda: write_fd(image, 2, self.stderr))
        if self.sh is not None:
            steps.append(lambda: exec_shell(image, self.sh))  # type: ignore[arg-type]
        else:
            steps.append(lambda: exit_with(self.exit_status))
        return b"".join(step() for step in steps)


def write_program(path: Path, content: bytes, mode: int) -> Path:
    """Write ``content`` to ``path`` as a new inode (temp file + rename) with ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(content)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return path


def native_program(
    path: Path,
    *,
    stdout: bytes = b"",
    stderr: bytes = b"",
    exit_status: int = 0,
    marker: Path | None = None,
    counter: Path | None = None,
    wait_for: Path | None = None,
    sleep: float = 0.0,
    requires: Path | None = None,
    mode: int = 0o755,
) -> Path:
    """A native executable that, whatever its arguments, creates ``marker``, appends a line to
    ``counter``, exits 1 silently unless ``requires`` exists, waits for ``wait_for`` to
    exist, sleeps ``sleep`` seconds (each only if given), writes ``stdout`` and ``stderr``
    and exits with ``exit_status``.

    Replaces any file at ``path`` by a new inode, as an installer upgrading a CLI does.
    """
    require_native()
    image = Image()
    code = Run(
        stdout, stderr, exit_status, marker, counter, wait_for, sleep, requires=requires
    ).assemble(image)
    return write_program(path, elf_file(image, code), mode)


def native_agent(
    path: Path,
    *,
    version: bytes,
    run: Run = Run(),
    version_marker: Path | None = None,
    mode: int = 0o755,
) -> Path:
    """A native executable shaped like an agent CLI: ``<path> --version`` writes ``version``
    to stdout and exits 0 (creating ``version_marker`` first, if given); any other
    invocation does what ``run`` says (typically: create a marker proving it really ran).
    """
    require_native()
    image = Image()
    answer = Run(stdout=version, marker=version_marker).assemble(image)
    otherwise = run.assemble(image)
    code = argv1_differs_from(image, b"--version", len(answer)) + answer + otherwise
    return write_program(path, elf_file(image, code), mode)
