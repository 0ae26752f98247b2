"""Two chains in one PostgreSQL cluster: a host of one cannot write into the other."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.pg_chain import Chain, floorctl

pytestmark = pytest.mark.fleet

# --- two chains in one cluster ----------------------------------------------------------------


def test_a_host_of_one_chain_cannot_insert_into_another_chain_in_the_same_cluster(
    pg: Chain, tmp_path: Path
) -> None:
    other_owner, other_db = f"{pg.owner}_b", f"{pg.database}_b"
    pg.server.psql(f"CREATE ROLE {other_owner} LOGIN CREATEROLE")
    pg.server.psql(f"CREATE DATABASE {other_db} OWNER {other_owner}")
    env = isolated_env(tmp_path / "b", FLOORGUARD_CHAIN_KEY_FILE=str(tmp_path / "b.key"))
    done = floorctl("chain", "init", "--url", pg.server.url(other_owner, other_db), env=env)
    assert done.returncode == 0, done.stderr
    with pytest.raises(RuntimeError, match="permission denied"):
        pg.server.psql(
            "INSERT INTO floorguard.tree VALUES (5, 5, '\\x00')",
            user=pg.appender,
            database=other_db,
        )
