"""Where a procfs is mounted is read from this process's mount table, which the gate keeps
between judgements: it must stand for the mounts there are at each judgement, never for
those there were when it was first read. A procfs mounted after a first judgement is seen
at the next; the table is read again in a forked child (its descriptor names the parent's
table) and when the host closed the descriptor and another file took its number.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from floorguard._identify import process_paths
from floorguard._identify.process_paths import through_the_process

# Run in a mount namespace of its own: a tmpfs at $0 (its root's inode is 1, like a
# procfs's, so a path through it makes the gate read the mount table), then the driver.
_IN_A_NAMESPACE = 'mount -t tmpfs none "$0" && exec "$@"'
_DRIVER = """
import json, subprocess, sys
from floorguard._identify.process_paths import through_the_process
tmpfs, second = sys.argv[1:]
def judged(value):
    return through_the_process([], {"PYTHONPATH": value}, "/", None)
seen = [judged(tmpfs + "/lib")]  # (reads the mount table: no procfs but /proc)
subprocess.run(["mount", "-t", "proc", "proc", second], check=True)
seen.append(judged(second + "/self/cwd/lib"))
subprocess.run(["umount", second], check=True)
seen.append(judged(second + "/self/cwd/lib"))
print(json.dumps(seen))
"""


def test_a_procfs_mounted_after_a_judgement_is_seen_at_the_next(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting needs root and unshare")
    tmpfs, second = tmp_path / "tmpfs", tmp_path / "second-proc"
    tmpfs.mkdir()
    second.mkdir()
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", _IN_A_NAMESPACE, str(tmpfs),
         sys.executable, "-c", _DRIVER, str(tmpfs), str(second)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    if "mount" in done.stderr and done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    before, mounted, unmounted = json.loads(done.stdout)
    assert before is None, done.stdout
    assert mounted is not None and "PYTHONPATH" in mounted, done.stdout
    assert unmounted is None, done.stdout  # (an empty folder again: nothing there)


_DRIVER_IN_A_NEW_NAMESPACE = """
import ctypes, json, subprocess, sys
from floorguard._identify.process_paths import through_the_process
tmpfs, second = sys.argv[1:]
def judged(value):
    return through_the_process([], {"PYTHONPATH": value}, "/", None)
seen = [judged(tmpfs + "/lib")]  # (reads the mount table of the first namespace)
# This process moves to a namespace of its own, and a procfs is mounted in it alone: the
# first namespace's table is never marked.
if ctypes.CDLL(None, use_errno=True).unshare(0x00020000) != 0:  # CLONE_NEWNS
    sys.exit("unshare: " + str(ctypes.get_errno()))
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
subprocess.run(["mount", "-t", "proc", "proc", second], check=True)
seen.append(judged(second + "/self/cwd/lib"))
print(json.dumps(seen))
"""


def test_a_procfs_mounted_in_a_namespace_the_host_moved_to_is_seen(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting needs root and unshare")
    tmpfs, second = tmp_path / "tmpfs", tmp_path / "second-proc"
    tmpfs.mkdir()
    second.mkdir()
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", _IN_A_NAMESPACE, str(tmpfs),
         sys.executable, "-c", _DRIVER_IN_A_NEW_NAMESPACE, str(tmpfs), str(second)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    if done.returncode != 0 and ("mount" in done.stderr or "unshare" in done.stderr):
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    before, mounted = json.loads(done.stdout)
    assert before is None, done.stdout
    assert mounted is not None and "PYTHONPATH" in mounted, done.stdout


def test_the_mount_table_is_kept_between_judgements_of_one_process() -> None:
    first = process_paths._procfs_mounts()
    kept = process_paths._kept.table
    assert "/proc" in first
    assert process_paths._procfs_mounts() is first
    assert process_paths._kept.table is kept


def test_a_forked_child_reads_its_own_mount_table() -> None:
    process_paths._procfs_mounts()
    parent = process_paths._kept.table
    assert parent is not None
    pid = os.fork()
    if pid == 0:  # (the child: its answer is its exit status)
        process_paths._procfs_mounts()
        child = process_paths._kept.table
        os._exit(0 if child is not None and child is not parent and child.pid == os.getpid()
                 else 1)  # fmt: skip
    assert os.waitpid(pid, 0)[1] == 0
    assert process_paths._kept.table is parent  # (the parent's is still its own)


def test_a_descriptor_the_host_closed_and_reused_is_not_read_as_the_table(
    tmp_path: Path,
) -> None:
    process_paths._procfs_mounts()
    kept = process_paths._kept.table
    assert kept is not None
    other = tmp_path / "other"
    other.write_text("not a mount table\n")
    opened = os.open(other, os.O_RDONLY)
    # The host closes the table's descriptor and another file takes its number.
    reused = os.dup2(opened, kept.fd)
    os.close(opened)
    try:
        assert reused == kept.fd
        assert "/proc" in process_paths._procfs_mounts()
        assert process_paths._kept.table is not kept
        assert os.read(reused, 100) == b"not a mount table\n"  # (the host's file, left open)
    finally:
        os.close(reused)


def test_paths_through_the_process_are_refused_with_the_table_kept() -> None:
    process_paths._procfs_mounts()
    for _ in range(3):
        refused = through_the_process([], {"PYTHONPATH": "/proc/self/cwd/lib"}, "/", None)
        assert refused is not None and "PYTHONPATH" in refused
