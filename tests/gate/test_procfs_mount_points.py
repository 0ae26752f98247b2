"""A procfs mounted anywhere (a chroot's or a container's ``.../proc``) names the reading
process through its ``self`` as ``/proc`` does: a path through it is refused. Which folder
is a procfs's root is looked at live, at each judgement, by the thread judging: as mounted
then, wherever a folder above it has been renamed to, in that thread's own namespace. A
folder of another file system with a link named ``self`` at its root is taken for one too
(refused: only someone who made that link to look like a procfs puts it there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from floorguard._identify.process_paths import through_the_process

pytestmark = pytest.mark.attack

# Run in a mount namespace of its own (root and unshare): a tmpfs at $0 (its root's inode
# is 1, like a procfs's), then the driver.
_IN_A_NAMESPACE = 'mount -t tmpfs none "$0" && exec "$@"'
_JUDGED = """
import ctypes, json, os, subprocess, sys, threading
from floorguard._identify.process_paths import through_the_process
def judged(value):
    return through_the_process([], {"PYTHONPATH": value}, "/", None)
def mount_proc(at):
    subprocess.run(["mount", "-t", "proc", "proc", at], check=True)
"""


def _in_a_namespace(tmp_path: Path, driver: str, *args: str) -> list[str | None]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting needs root and unshare")
    tmpfs = tmp_path / "tmpfs"
    tmpfs.mkdir()
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", _IN_A_NAMESPACE, str(tmpfs),
         sys.executable, "-c", _JUDGED + driver, str(tmpfs), *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    if done.returncode != 0 and ("mount" in done.stderr or "unshare" in done.stderr):
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    seen: list[str | None] = json.loads(done.stdout)
    return seen


def test_a_procfs_mounted_after_a_judgement_is_seen_at_the_next(tmp_path: Path) -> None:
    second = tmp_path / "second-proc"
    second.mkdir()
    before, mounted, unmounted = _in_a_namespace(tmp_path, """
tmpfs, second = sys.argv[1:]
seen = [judged(tmpfs + "/lib")]
mount_proc(second)
seen.append(judged(second + "/self/cwd/lib"))
subprocess.run(["umount", second], check=True)
seen.append(judged(second + "/self/cwd/lib"))
print(json.dumps(seen))
""", str(second))  # fmt: skip
    assert before is None
    assert mounted is not None and "PYTHONPATH" in mounted
    assert unmounted is None  # (an empty folder again: nothing there)


def test_a_procfs_under_a_folder_renamed_since_the_last_judgement_is_seen(
    tmp_path: Path,
) -> None:
    # A rename above a mount point is no mount: nothing marks the mount table, whose lines
    # spell the new path from then on.
    build = tmp_path / "build"
    (build / "proc").mkdir(parents=True)
    first, renamed = _in_a_namespace(tmp_path, """
build, = sys.argv[2:]
mount_proc(build + "/proc")
seen = [judged(build + "/proc/self/cwd/lib")]
os.rename(build, build + "-2")
seen.append(judged(build + "-2/proc/self/cwd/lib"))
print(json.dumps(seen))
""", str(build))  # fmt: skip
    assert first is not None and "PYTHONPATH" in first
    assert renamed is not None and "PYTHONPATH" in renamed


def test_a_procfs_a_thread_mounted_in_its_own_namespace_is_seen_by_that_thread(
    tmp_path: Path,
) -> None:
    # /proc/self is the thread group's leader: its mount table is not the judging thread's.
    second = tmp_path / "second-proc"
    second.mkdir()
    main, in_the_thread = _in_a_namespace(tmp_path, """
second, = sys.argv[2:]
seen = [judged(second + "/self/cwd/lib")]
def worker():
    if ctypes.CDLL(None, use_errno=True).unshare(0x00020000) != 0:  # CLONE_NEWNS
        sys.exit("unshare: " + str(ctypes.get_errno()))
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    mount_proc(second)
    seen.append(judged(second + "/self/cwd/lib"))
thread = threading.Thread(target=worker)
thread.start()
thread.join()
print(json.dumps(seen))
""", str(second))  # fmt: skip
    assert main is None  # (nothing there in the leader's namespace)
    assert in_the_thread is not None and "PYTHONPATH" in in_the_thread


def test_a_procfs_mounted_in_a_namespace_the_host_moved_to_is_seen(tmp_path: Path) -> None:
    second = tmp_path / "second-proc"
    second.mkdir()
    before, mounted = _in_a_namespace(tmp_path, """
tmpfs, second = sys.argv[1:]
seen = [judged(tmpfs + "/lib")]
if ctypes.CDLL(None, use_errno=True).unshare(0x00020000) != 0:  # CLONE_NEWNS
    sys.exit("unshare: " + str(ctypes.get_errno()))
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
mount_proc(second)
seen.append(judged(second + "/self/cwd/lib"))
print(json.dumps(seen))
""", str(second))  # fmt: skip
    assert before is None
    assert mounted is not None and "PYTHONPATH" in mounted


def test_a_root_with_a_link_named_self_is_taken_for_a_procfs(tmp_path: Path) -> None:
    tmpfs_self, tmpfs_plain = _in_a_namespace(tmp_path, """
tmpfs, = sys.argv[1:2]
os.makedirs(tmpfs + "/12/lib")
plain = judged(tmpfs + "/12/lib")
os.symlink("12", tmpfs + "/self")
print(json.dumps([judged(tmpfs + "/12/lib"), plain]))
""")  # fmt: skip
    assert tmpfs_self is not None and "PYTHONPATH" in tmpfs_self
    assert tmpfs_plain is None


def test_paths_through_proc_are_refused_judgement_after_judgement() -> None:
    for _ in range(3):
        refused = through_the_process([], {"PYTHONPATH": "/proc/self/cwd/lib"}, "/", None)
        assert refused is not None and "PYTHONPATH" in refused
