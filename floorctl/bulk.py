"""Bulk work without the cyclic garbage collector.

Reading a feed, planning a refresh and rendering the block allocate millions of small
objects (dicts, strings, syntax trees) that form no reference cycles. The cyclic collector
would walk the ones that survive over and over, more often the larger the map (a sixth of
the CPU time of a 100,000-adapter refresh, and a part that grows faster than the map).
Reference counting still frees everything at once; only cycles wait for the collector.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (and left as it was after it, nested too)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def without_cyclic_gc(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run under ``cyclic_gc_paused``."""

    @functools.wraps(function)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with cyclic_gc_paused():
            return function(*args, **kwargs)

    return paused
