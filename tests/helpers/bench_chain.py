"""The chain benchmarks' kit: a spawn receipt of realistic size and a fresh PostgreSQL chain."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pgserver

from floorguard._chain.chain import line_text
from helpers.cli import isolated_env

SPAWN = "adapter.spawn_preflight_receipt"


def _receipt(n: int) -> dict[str, object]:
    return {
        "kind": SPAWN, "schema_version": 1, "ts": "2026-11-30T03:05:18.123456Z",
        "adapter": "aider", "binary": "/usr/local/bin/aider", "version": f"0.59.{n % 100}",
        "detected_by": "--version", "floor": "0.60.0", "advisory_id": "BSA-0001",
        "verdict": "refuse", "reason": "aider is below its floor 0.60.0 (BSA-0001)",
        "policy": "block", "floor_map_hash": "sha256:" + "ab" * 32, "n": n,
    }  # fmt: skip


def _database(server: pgserver.PgServer, tmp_path: Path) -> dict[str, str]:
    """A fresh initialised chain database; the appending host's environment."""
    return database_and_owner(server, tmp_path)[0]


def database_and_owner(server: pgserver.PgServer, tmp_path: Path) -> tuple[dict[str, str], str]:
    """A fresh initialised chain database: the appending host's environment, and the URL of
    the tables' owner (who may fill the chain straight from a file: grown_chain)."""
    tag = secrets.token_hex(4)
    owner, appender, database = f"own_{tag}", f"app_{tag}", f"bench_{tag}"
    server.psql(f"CREATE ROLE {owner} LOGIN CREATEROLE; CREATE ROLE {appender} LOGIN")
    server.psql(f"CREATE DATABASE {database} OWNER {owner}")
    key = tmp_path / "fleet" / "chain.key"
    env = isolated_env(tmp_path / "fleet", FLOORGUARD_CHAIN_KEY_FILE=str(key))
    done = subprocess.run(
        [sys.executable, "-m", "floorctl", "chain", "init", "--grant", appender,
         "--url", server.url(owner, database)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    env["FLOORGUARD_CHAIN_URL"] = server.url(appender, database)
    server.psql(
        "CREATE TABLE bare (seq bigint PRIMARY KEY, ts text, chain_id text, event text,"
        f" receipt_id text, receipt text, prev text, mac text); GRANT ALL ON bare TO {appender}",
        user=owner, database=database,
    )  # fmt: skip
    return env, server.url(owner, database)


def read_and_hash_every_record(db: Path) -> None:
    """A baseline for whole-chain work on a SQLite chain: read every record once and hash
    its line as a leaf, nothing else."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    cursor = conn.execute("SELECT * FROM records ORDER BY seq")
    while batch := cursor.fetchmany(2048):
        for seq, ts, chain_id, event, receipt_id, receipt, prev, mac in batch:
            line = line_text(
                seq=seq, ts=ts, chain_id=chain_id, event=event, receipt_id=receipt_id,
                receipt_json=receipt, prev=prev, mac=mac,
            )  # fmt: skip
            hashlib.sha256(b"\x00" + line.encode()).digest()
    conn.close()
