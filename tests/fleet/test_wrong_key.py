"""A host with another key than the fleet's cannot start, extend or re-initialise the chain
unnoticed: the genesis record, chain init and a record appended without the key."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest
from helpers.cli import isolated_env
from helpers.pg_chain import (
    Chain,
    _call,
    _next,
    append,
    floorctl,
    verify,
)

pytestmark = pytest.mark.fleet


def _other_key(tmp_path: Path) -> Path:
    other = tmp_path / "other" / "chain.key"
    other.parent.mkdir(mode=0o700)
    other.write_text(os.urandom(32).hex() + "\n")
    other.chmod(0o600)
    return other


def test_a_host_with_another_key_cannot_write_the_genesis_record(pg: Chain, tmp_path: Path) -> None:
    # The first append of a fresh shared chain: a host given the wrong key would otherwise
    # write a genesis that only its key verifies, locking every other host out.
    stray = {**pg.env(tmp_path / "stray"), "FLOORGUARD_CHAIN_KEY_FILE": str(_other_key(tmp_path))}
    done = append(stray)
    assert done.returncode == 1
    assert "key" in done.stderr and "chain init" in done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "0"
    assert append(pg.env(tmp_path / "good")).returncode == 0
    # After genesis the head's MAC already tells: refused before anything is written.
    assert append(stray).returncode == 1
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    assert verify(pg).returncode == 0


def test_chain_init_with_another_key_than_the_fleets_is_refused(pg: Chain, tmp_path: Path) -> None:
    env = isolated_env(tmp_path / "admin2", FLOORGUARD_CHAIN_KEY_FILE=str(_other_key(tmp_path)))
    done = floorctl("chain", "init", "--url", pg.owner_url, env=env)
    assert done.returncode == 1
    assert "key" in done.stderr


# --- tampering and the offline verifier --------------------------------------------------


def test_a_record_a_host_appends_without_the_key_fails_the_verifier(
    pg: Chain, tmp_path: Path
) -> None:
    """A host role appends record 2, well formed but with a forged MAC, through the chain's
    functions (the server checks a MAC's form, not the key); the export's verification names
    seq 2, and no checkpoint is signed over it."""

    env = pg.env(tmp_path)
    assert append(env).returncode == 0 and append(env).returncode == 0
    with psycopg.connect(pg.url) as conn:
        _call(conn, *_next(conn, b"not the fleet's key", mac="0" * 64))
        conn.commit()
    export = tmp_path / "slice.jsonl"
    assert floorctl("chain", "export", "--out", str(export), env=env).returncode == 0
    done = floorctl("verify", "chain", str(export), "--key-file", str(pg.key_file), env=env)
    assert done.returncode != 0 and "seq 2" in done.stdout, done.stdout
    assert verify(pg).returncode != 0
