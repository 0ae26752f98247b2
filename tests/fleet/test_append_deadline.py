"""An append to a shared chain ends within twice FLOORGUARD_CHAIN_TIMEOUT of its start,
whatever it waits on: this host's view lock, connecting, the session's setup, the chain's
lock. Each wait on its own is bounded by the timeout; one deadline covers them all, so
waits that each stay under their own limit cannot add up to more."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain, _verified

from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


TIMEOUT = 2.0
BUDGET = 2 * TIMEOUT
MARGIN = 0.5


@pytest.fixture
def owner(pg: Chain) -> Iterator[psycopg.Connection[Any]]:
    """The chain owner's session: never ended by an append, so it can hold the chain."""
    with psycopg.connect(pg.owner_url) as conn:
        yield conn


def _later(seconds: float, action: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


def test_waits_that_each_stay_under_the_timeout_cannot_add_up_past_the_budget(
    pg: Chain, owner: psycopg.Connection[Any]
) -> None:
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT=f"{TIMEOUT:g}")
    chain.append(CANARY, receipt())
    chain.close()  # the next append connects afresh, and reads the chain's format first
    assert chain.views is not None
    # The owner locks the chain's metadata and the chain's lock (an owner is never ended);
    # a second owner session queues for the chain's lock, to hold it once the first lets go.
    owner.execute("LOCK TABLE floorguard.meta IN ACCESS EXCLUSIVE MODE")
    owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
    successor = psycopg.connect(pg.owner_url)
    queued = threading.Thread(
        target=successor.execute,
        args=("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE",),
        daemon=True,
    )
    queued.start()
    time.sleep(0.3)
    # Another process of this host holds the host's view lock.
    view_lock = os.open(chain.views.lock_path, os.O_RDWR)
    fcntl.flock(view_lock, fcntl.LOCK_EX)

    # Each wait stays under the timeout: the view lock 0.75x, the metadata 0.85x more,
    # then the chain's lock (held by the successor) up to its own limit, 0.9x.
    started = time.monotonic()
    timers = [
        _later(0.75 * TIMEOUT, lambda: fcntl.flock(view_lock, fcntl.LOCK_UN)),
        _later(1.6 * TIMEOUT, owner.commit),
    ]
    try:
        with pytest.raises(ChainWriteError) as refused:
            chain.append(CANARY, receipt())
        elapsed = time.monotonic() - started
    finally:
        for timer in timers:
            timer.join(10)
        queued.join(10)
        successor.close()
        os.close(view_lock)
    assert elapsed < BUDGET + MARGIN
    assert f"no answer in time: the append did not end within {BUDGET:g}s of its start" in str(
        refused.value
    )
    assert _verified(pg) == 1
