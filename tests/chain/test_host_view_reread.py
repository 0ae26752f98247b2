"""A process keeps the host's view of the chain it last read or wrote, and takes it again
only while the file's slot headers are exactly as it left them: whatever another process
(or anyone) wrote since, in place, at the same size, with the file's times put back, is read
again before an append is judged on it.

Each test keeps one long-lived ChainViews (the process's own, as an append keeps one) and
has a real second process change the file between two of its reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from floorguard._chain.chain_view import ChainViews, TreeView
from floorguard.errors import ChainWriteError

CHAIN = "ab" * 16
OTHER = "cd" * 16

GROW = textwrap.dedent(
    """
    import sys
    from floorguard._chain.chain_view import ChainViews, TreeView
    views = ChainViews(sys.argv[1])
    with views.locked():
        now = dict(views.load())
        now[sys.argv[2]] = TreeView(int(sys.argv[3]), bytes.fromhex(sys.argv[4]), "elsewhere",
                                    "2026-12-03T00:00:00.000000Z")
        views.store(now)
    """
)


def _view(size: int, root: str = "11") -> TreeView:
    return TreeView(size, bytes.fromhex(root * 32), "here", "2026-12-03T00:00:00.000000Z")


def _written(tmp_path: Path, *sizes: int) -> ChainViews:
    """This process's views of CHAIN, after storing each of ``sizes`` in turn (each stored
    view read first, under the lock, as an append does)."""
    views = ChainViews(tmp_path / "chain-view")
    for size in sizes:
        with views.locked():
            views.load()
            views.store({CHAIN: _view(size)})
    return views


def _by_another_process(path: Path, chain_id: str, size: int, root: str = "22") -> None:
    """Another process grows ``chain_id`` in the view; the file's times are then put back,
    so that its size and times are what they were before the write."""
    before = os.stat(path)
    argv = [sys.executable, "-c", GROW, str(path), chain_id, str(size), root * 32]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns,
    )  # fmt: skip


@pytest.mark.parametrize("writes", [1, 2, 3])
def test_a_view_grown_in_place_by_another_process_is_read_again(
    tmp_path: Path, writes: int
) -> None:
    # 1, 2 or 3 writes of this process first: the other process's write lands in the slot
    # this process wrote last, or in the other one.
    views = _written(tmp_path, *range(3, 3 + writes))
    _by_another_process(views.path, CHAIN, 40)
    with views.locked():
        seen = views.load()[CHAIN]
    assert (seen.size, seen.root, seen.location) == (40, b"\x22" * 32, "elsewhere")


def test_another_chain_added_by_another_process_is_kept_by_this_processs_next_write(
    tmp_path: Path,
) -> None:
    # Had the write below started from the view this process remembered, it would have
    # dropped the other process's chain (a witness forgetting what it saw).
    views = _written(tmp_path, 3)
    _by_another_process(views.path, OTHER, 7)
    with views.locked():
        views.store({**views.load(), CHAIN: _view(4)})
    assert sorted(ChainViews(views.path).load()) == [CHAIN, OTHER]


def test_a_view_damaged_in_place_at_its_size_and_time_refuses_appends(tmp_path: Path) -> None:
    views = _written(tmp_path, 3, 4)
    before = os.stat(views.path)
    views.path.write_bytes(b"\0" * before.st_size)
    os.utime(views.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with views.locked(), pytest.raises(ChainWriteError, match="no slot holds a whole view"):
        views.load()


def test_a_view_read_back_after_this_processs_own_write_is_that_write(tmp_path: Path) -> None:
    views = _written(tmp_path, 3, 4, 5)
    with views.locked():
        assert views.load()[CHAIN].size == 5
    assert ChainViews(views.path).load()[CHAIN].size == 5  # (as any other reader finds it)


def test_a_new_process_takes_its_prefetch_hint_from_the_view_file(tmp_path: Path) -> None:
    # A process that has read nothing yet still sends the size the host remembers with the
    # round trip that reads the head: the nodes its check needs come in that round trip,
    # not in one more while it holds the chain's lock.
    _written(tmp_path, 5, 8)
    fresh = ChainViews(tmp_path / "chain-view")
    assert fresh.hint(CHAIN) == 8
    assert ChainViews(tmp_path / "chain-view").hint(None) == 8  # (the one chain it holds)
    assert ChainViews(tmp_path / "chain-view").hint(OTHER) is None
    assert ChainViews(tmp_path / "absent").hint(None) is None
    # Two chains: no chain id, no hint.
    _by_another_process(tmp_path / "chain-view", OTHER, 3)
    assert ChainViews(tmp_path / "chain-view").hint(None) is None
    # A damaged file is no hint (the append's own check refuses it, under the lock).
    (tmp_path / "chain-view").write_bytes(b"x" * 16)
    assert ChainViews(tmp_path / "chain-view").hint(CHAIN) is None
