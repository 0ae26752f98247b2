"""Every test here runs against a real PostgreSQL server (a database each, made by
``chain init``): all of them carry the ``fleet`` marker, so the README's quick test command
stays within its time and ``.ci/run`` runs them with the other long suites."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from helpers.pg_chain import Chain


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "fleet" and item.get_closest_marker("fleet") is None:
            item.add_marker(pytest.mark.fleet)


@pytest.fixture
def hostile(pg: Chain) -> Iterator[psycopg.Connection[Any]]:
    """An appender's session with every timeout of its own off."""
    conn = psycopg.connect(pg.url, autocommit=True)
    conn.execute("SET idle_in_transaction_session_timeout = 0")
    conn.execute("SET statement_timeout = 0")
    conn.execute("SET lock_timeout = 0")
    try:
        yield conn
    finally:
        conn.close()
