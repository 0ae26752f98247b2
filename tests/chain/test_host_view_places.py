"""Where a host saw a chain: two spellings of one PostgreSQL URL are one place, and a place
it cannot tell from another (a name shown as ``***``) is no place at all.

A URL that leaves its database or host to libpq (PGDATABASE, PGHOST, a service file) names
no place known here either. A chain found where the host saw another one is refused as
replaced (fleet.md): comparing
the locations as spelled let a swap of two databases pass under a URL written otherwise (the
default port spelled out, a socket folder with a trailing slash), and made two databases
whose names are both shown ``***`` one place, refusing an honest host's first append to the
second.
"""

from __future__ import annotations

import pytest

from floorguard._chain.chain_view import same_place

SOCKET = "postgresql://app@%2Frun%2Fpostgresql/audit"


@pytest.mark.parametrize(
    "other",
    [
        SOCKET,
        "postgresql://%2Frun%2Fpostgresql/audit",
        "postgresql://other@%2Frun%2Fpostgresql:5432/audit",
        "postgresql://app@%2Frun%2Fpostgresql%2F/audit",
        "postgresql://app@%2Frun%2F%2Fpostgresql/audit",
        "postgresql://app@%2Frun%2Fpostgresql:05432/audit",
    ],
    ids=["same", "no-user", "default-port", "trailing-slash", "double-slash", "port-zero"],
)
def test_spellings_of_one_database_are_one_place(other: str) -> None:
    assert same_place(SOCKET, other) and same_place(other, SOCKET)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (SOCKET, "postgresql://app@%2Frun%2Fpostgresql/audit2"),
        (SOCKET, "postgresql://app@%2Frun%2Fpostgresql:5433/audit"),
        ("postgresql://db.internal/audit", "postgresql://db.other/audit"),
        ("postgresql://app@h/***", "postgresql://app@h/***"),
        ("postgresql://app@***:5432/audit", "postgresql://app@***:5432/audit"),
        ("/home/a/chain.sqlite3", "/home/b/chain.sqlite3"),
        ("postgresql://app@h", "postgresql://app@h"),
        ("postgresql://app@/audit", "postgresql://app@/audit"),
    ],
    ids=[
        "database",
        "port",
        "host",
        "masked-database",
        "masked-host",
        "files",
        "database-left-to-libpq",
        "host-left-to-libpq",
    ],
)
def test_other_places_and_places_not_known_are_not_the_same(one: str, other: str) -> None:
    assert not same_place(one, other)


def test_host_names_are_compared_without_case_and_files_by_their_text() -> None:
    assert same_place("postgresql://DB.Internal/audit", "postgresql://db.internal:5432/audit")
    assert same_place("postgresql://***@h/audit", "postgresql://app@h/audit")  # (who connects)
    assert same_place("/home/a/chain.sqlite3", "/home/a/chain.sqlite3")
