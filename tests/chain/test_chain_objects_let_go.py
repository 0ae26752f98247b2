"""A chain object that is let go (or closed) leaves no file or connection open behind it: a
host that makes one per request, rather than keeping ``AuditChain.shared``, must not run
out of descriptors."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from helpers.chain_support import receipt

from floorguard._chain.chain import AuditChain

CANARY = "adapter.canary_receipt"


def _open_descriptors() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def _use(environ: dict[str, str], n: int) -> AuditChain:
    chain = AuditChain.from_env(environ)
    chain.append(CANARY, receipt(n=n))
    assert chain.head() is not None
    with chain.tree_snapshot() as snapshot:
        assert snapshot.size == n + 1
    return chain


def test_chain_objects_let_go_close_their_files(tmp_path: Path) -> None:
    environ = {"FLOORGUARD_HOME": str(tmp_path / "home")}
    _use(environ, 0)  # (the first one creates the files)
    before = _open_descriptors()
    for n in range(1, 21):
        _use(environ, n)
    assert _open_descriptors() == before


def test_closed_chain_objects_close_their_files_and_append_again_when_used(
    tmp_path: Path,
) -> None:
    environ = {"FLOORGUARD_HOME": str(tmp_path / "home")}
    kept = [_use(environ, 0)]
    kept[0].close()
    before = _open_descriptors()
    for n in range(1, 11):
        chain = _use(environ, n)
        chain.close()
        kept.append(chain)  # still referenced: close() alone let the files go
    assert _open_descriptors() == before
    kept[3].append(CANARY, receipt(n=11))  # a closed object opens what it needs again
    assert kept[0].head().seq == 11  # type: ignore[union-attr]
