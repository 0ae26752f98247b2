"""A PostgreSQL chain's configuration: an unusable timeout, psycopg missing, the PG* environment
variables completing the URL, and psycopg loaded only when a chain URL asks for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.pg_chain import (
    APPEND_SCRIPT,
    Chain,
    append,
    floorctl,
)

pytestmark = pytest.mark.fleet

# --- configuration that cannot be used -------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9", "five", " "])
def test_an_unusable_chain_timeout_is_refused_before_connecting(pg: Chain, value: str) -> None:
    env = pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT=value)
    done = append(env)
    assert done.returncode == 1
    assert "FLOORGUARD_CHAIN_TIMEOUT" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "0"


def test_psycopg_missing_with_a_chain_url_is_refused_naming_the_extra(
    pg: Chain, tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow" / "psycopg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no psycopg here')\n")
    env = pg.env(pg.key_file.parent, PYTHONPATH=str(shadow.parent))
    done = append(env)
    assert done.returncode == 1
    assert "floorguard[postgres]" in done.stderr
    done = floorctl("chain", "export", env=env)
    assert done.returncode == 1
    assert "floorguard[postgres]" in done.stderr


def test_import_floorguard_and_a_sqlite_append_never_load_psycopg(tmp_path: Path) -> None:
    probe = APPEND_SCRIPT.replace("print(record.seq)", "print('psycopg' in sys.modules)")
    env = isolated_env(tmp_path)
    env.pop("FLOORGUARD_CHAIN_URL", None)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert os.path.exists(tmp_path / "chain.sqlite3") or any(tmp_path.rglob("chain.sqlite3"))


def test_pg_environment_variables_complete_a_url_that_names_only_the_scheme(
    pg: Chain, tmp_path: Path
) -> None:
    """libpq fills in host, user and database from PGHOST, PGUSER and PGDATABASE, as the
    README says; the append lands in the chain."""
    env = pg.env(tmp_path / "h")
    env.update(FLOORGUARD_CHAIN_URL="postgresql://", PGHOST=str(pg.server.socket_dir),
               PGUSER=pg.appender, PGDATABASE=pg.database)  # fmt: skip
    if pg.server.port is not None:
        env["PGPORT"] = str(pg.server.port)
    done = append(env)
    assert done.returncode == 0, done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
