"""The audit chain's storage: one interface (``interface``), two stores.

``store_from_env`` is the one place that chooses: ``FLOORGUARD_CHAIN_URL`` set (a libpq
URL) selects the PostgreSQL store, whose driver (psycopg 3, the ``floorguard[postgres]``
extra) is imported only then; unset, the SQLite file in ``FLOORGUARD_HOME``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from floorguard._base.state import CHAIN_TIMEOUT_ENV, CHAIN_URL_ENV, state_paths
from floorguard.chainstore.interface import ChainStore
from floorguard.errors import ChainError

DEFAULT_TIMEOUT_SECONDS = 5.0


def timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``FLOORGUARD_CHAIN_TIMEOUT`` in seconds (default 5). Raises ChainError if unusable."""
    env = os.environ if environ is None else environ
    raw = env.get(CHAIN_TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:  # also refuses nan and inf
        raise ChainError(
            f"{CHAIN_TIMEOUT_ENV}={raw!r} is not a number of seconds between 0 and 3600"
        )
    return value


def store_from_env(environ: Mapping[str, str] | None = None) -> ChainStore:
    """The store the environment selects. Raises ChainError for an unusable timeout."""
    env = os.environ if environ is None else environ
    url = env.get(CHAIN_URL_ENV, "")
    if url:
        from floorguard.chainstore.postgres import PostgresStore

        return PostgresStore(url, timeout=timeout_from_env(env))
    from floorguard.chainstore.sqlite import SqliteStore

    return SqliteStore(state_paths(env).chain_db)
