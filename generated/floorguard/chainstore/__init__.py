"""The audit chain's storage: one interface (``interface``), two stores.

``store_from_env`` is the one place that chooses: ``FLOORGUARD_CHAIN_URL`` set (a libpq
URL) selects the PostgreSQL store, whose driver (psycopg 3, the ``floorguard[postgres]``
extra) is imported only then; unset, the SQLite file in ``FLOORGUARD_HOME``; set but empty,
neither (refused).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from floorguard._base.state import CHAIN_TIMEOUT_ENV, CHAIN_URL_ENV, state_paths
from floorguard.chainstore.interface import ChainStore
from floorguard.errors import ChainError

DEFAULT_TIMEOUT_SECONDS = 5.0


# Seconds as plain ASCII decimals: float() also reads "3_0" as 30, other scripts' digits,
# exponents, signs and surrounding blanks, none of which an operator means by a timeout.
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?\Z", re.ASCII)


def timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``FLOORGUARD_CHAIN_TIMEOUT`` in seconds (default 5, when it is unset). Raises
    ChainError if unusable (set but empty included)."""
    env = os.environ if environ is None else environ
    raw = env.get(CHAIN_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_SECONDS
    value = float(raw) if _SECONDS.match(raw) else -1.0
    if not 0 < value <= 3600:
        raise ChainError(
            f"{CHAIN_TIMEOUT_ENV}={raw!r} is not a number of seconds between 0 and 3600 "
            "(plain decimal digits, such as 5 or 0.5)"
        )
    return value


def store_from_env(
    environ: Mapping[str, str] | None = None, *, url_source: str = CHAIN_URL_ENV
) -> ChainStore:
    """The store the environment selects (``url_source``: where its chain URL came from,
    named when it does not parse). Raises ChainError for an unusable timeout, and for a
    chain URL set but empty (a fleet host's template that left it out would record its
    decisions where no one of the fleet looks)."""
    env = os.environ if environ is None else environ
    url = env.get(CHAIN_URL_ENV)
    if url is not None and not url.strip():
        # (blanks alone: libpq would read an empty conninfo, and connect wherever its own
        # defaults and the PG* variables point)
        raise ChainError(
            f"{CHAIN_URL_ENV} is set but empty: set it to the fleet chain's URL, or unset it "
            "to record in this host's own chain"
        )
    if url:
        from floorguard.chainstore.postgres import PostgresStore

        return PostgresStore(url, timeout=timeout_from_env(env), source=url_source)
    from floorguard.chainstore.sqlite import SqliteStore

    return SqliteStore(state_paths(env).chain_db)
