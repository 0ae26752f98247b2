"""The one writer of output files: atomic, never through a link, undoable."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.chain_support import filled_chain

from floorguard._base.atomic import (
    Preserved,
    create_new,
    undoable,
    write_atomic,
    write_chunks_atomic,
)
from floorguard.errors import OutputError


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".tmp", ".undo")))


def test_write_atomic_replaces_content_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "floor_map.py"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    write_atomic(path, b"new\r\n")
    assert path.read_bytes() == b"new\r\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_write_atomic_creates_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "fresh.py"
    write_atomic(path, b"data")
    assert path.read_bytes() == b"data"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_write_atomic_replaces_a_link_and_never_touches_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_bytes(b"old")
    real.chmod(0o600)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    write_atomic(link, b"new")
    assert not link.is_symlink()
    assert link.read_bytes() == b"new"
    assert real.read_bytes() == b"old"
    # The link's target lends it nothing, not even its mode.
    assert stat.S_IMODE(link.stat().st_mode) == 0o644


def test_write_atomic_replaces_a_dangling_link_without_creating_its_target(
    tmp_path: Path,
) -> None:
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    write_atomic(link, b"data")
    assert not link.is_symlink() and link.read_bytes() == b"data"
    assert not (tmp_path / "elsewhere.json").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_write_into_read_only_directory_fails_with_original_intact(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    path = directory / "floor_map.py"
    path.write_bytes(b"original")
    directory.chmod(0o555)
    try:
        with pytest.raises(OutputError, match=r"floor_map\.py: cannot write"):
            write_atomic(path, b"replacement")
        assert path.read_bytes() == b"original"
        assert leftovers(directory) == []
    finally:
        directory.chmod(0o755)


def test_failed_write_leaves_original_intact_and_no_temp_file(tmp_path: Path) -> None:
    # A real process whose file-size limit makes the write itself fail (works even as root).
    path = tmp_path / "floor_map.py"
    path.write_bytes(b"original")
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        from pathlib import Path
        from floorguard.errors import OutputError
        from floorguard._base.atomic import write_atomic
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            write_atomic(Path({str(path)!r}), b"x" * 100_000)
        except OutputError as exc:
            print(exc)
            sys.exit(3)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 3, result.stderr
    assert "floor_map.py: cannot write" in result.stdout
    assert path.read_bytes() == b"original"
    assert leftovers(tmp_path) == []


def test_write_onto_a_directory_fails_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "floor_map.py"
    target.mkdir()
    (target / "keep").write_bytes(b"k")
    with pytest.raises(OutputError, match="cannot write"):
        write_atomic(target, b"data")
    assert (target / "keep").read_bytes() == b"k"
    assert leftovers(tmp_path) == []


def test_write_chunks_atomic_writes_every_chunk(tmp_path: Path) -> None:
    path = tmp_path / "slice.jsonl"
    write_chunks_atomic(path, (f"{n}\n".encode() for n in range(3)))
    assert path.read_bytes() == b"0\n1\n2\n"


def test_a_failing_producer_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "slice.jsonl"
    path.write_bytes(b"old")

    def chunks() -> object:
        yield b"partial"
        raise RuntimeError("the chain broke mid-export")

    with pytest.raises(RuntimeError):
        write_chunks_atomic(path, chunks())  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert leftovers(tmp_path) == []


def test_create_new_refuses_any_existing_name_a_dangling_link_included(tmp_path: Path) -> None:
    link = tmp_path / "signing.key"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(OutputError, match="already exists"):
        create_new(link, b"secret", mode=0o600)
    assert link.is_symlink() and not (tmp_path / "gone").exists()
    assert leftovers(tmp_path) == []


def test_create_new_sets_the_mode_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        create_new(tmp_path / "signing.pub", b"pub", mode=0o644)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "signing.pub").stat().st_mode) == 0o644


@pytest.mark.parametrize("kind", ["file", "link", "dangling link", "nothing"])
def test_undo_puts_back_exactly_what_was_there(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "receipt.json"
    victim = tmp_path / "victim"
    victim.write_bytes(b"victim")
    if kind == "file":
        path.write_bytes(b"before")
        path.chmod(0o640)
    elif kind == "link":
        path.symlink_to(victim)
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "gone")
    with pytest.raises(RuntimeError), undoable([path]):
        write_atomic(path, b"after")
        raise RuntimeError("the chain append failed")
    if kind == "file":
        assert path.read_bytes() == b"before"
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    elif kind == "link":
        assert os.readlink(path) == str(victim)
    elif kind == "dangling link":
        assert os.readlink(path) == str(tmp_path / "gone")
    else:
        assert not os.path.lexists(path)
    assert victim.read_bytes() == b"victim"
    assert leftovers(tmp_path) == []


def test_undo_of_a_write_that_never_happened_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    path.write_bytes(b"before")
    kept = Preserved(path)
    kept.restore()
    assert path.read_bytes() == b"before"
    assert leftovers(tmp_path) == []


def test_success_leaves_no_undo_file(tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    path.write_bytes(b"before")
    with undoable([path]):
        write_atomic(path, b"after")
    assert path.read_bytes() == b"after"
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_output_to_a_character_device_is_written_to_it_never_replaced(tmp_path: Path) -> None:
    # `--out /dev/null` as root must not put a regular file where the device was.
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    write_atomic(null, b"discarded\n")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert not [p for p in tmp_path.iterdir() if p != null]  # no temporary file left


def test_output_to_a_fifo_is_written_into_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomic(fifo, b"streamed\n")
        assert os.read(reader, 100) == b"streamed\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_to_a_socket_is_refused_and_left_in_place(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(OutputError, match="not a regular file"):
            write_atomic(path, b"x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_output_to_a_fifo_no_process_reads_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="no process is reading it"):
        write_atomic(fifo, b"x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_pipe_is_written_through_and_left_a_link(tmp_path: Path) -> None:
    # `--out /dev/stdout`: a link to the process's own output (here a pipe it holds).
    reader, writer = os.pipe()
    try:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{writer}")
        write_atomic(link, b"through the link\n")
        assert link.is_symlink()
        assert os.read(reader, 100) == b"through the link\n"
    finally:
        os.close(reader)
        os.close(writer)


def test_a_link_to_a_device_is_written_through_never_replaced(tmp_path: Path) -> None:
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    write_atomic(link, b"discarded")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"


@pytest.mark.parametrize("tool", ["floorctl", "floorguard"])
def test_export_to_a_link_to_its_own_stdout_reaches_standard_output(
    tmp_path: Path, tool: str
) -> None:
    # As `--out /dev/stdout` (a link to /proc/self/fd/1), without touching the real one.
    filled = tmp_path / "state"
    filled.mkdir()
    filled_chain(filled, 3)
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    argv = [sys.executable, "-m", tool, "chain", "export", "--out", str(stdout)]
    env = {**os.environ, "FLOORGUARD_HOME": str(filled)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    assert stdout.is_symlink()
