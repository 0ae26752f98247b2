"""The chain's records are append-only whoever tries: the appender cannot switch the rules
off, no superuser outside the owner's role can delete, and what the owner alters (the last
records, meta's chain_id, rows inserted by hand) is refused or caught by the verifier."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _count,
    append,
    floorctl,
    signed_checkpoint,
    verify,
)

from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet

# --- the appender role working around the triggers --------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE floorguard.records DISABLE TRIGGER records_append_only",
        "DROP TRIGGER records_append_only ON floorguard.records",
        "TRUNCATE floorguard.records",
        "INSERT INTO floorguard.meta VALUES ('key_check', 'x')",
        "CREATE TABLE floorguard.records2 (seq bigint)",
        "CREATE OR REPLACE FUNCTION floorguard.refuse_change() RETURNS trigger"
        " LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
    ],
)
def test_the_appender_cannot_switch_off_or_sidestep_the_append_only_rules(
    pg: Chain, statement: str, tmp_path: Path
) -> None:
    assert append(pg.env(tmp_path)).returncode == 0
    with pytest.raises(RuntimeError, match=r"must be owner|permission denied"):
        pg.sql(statement, as_owner=False)
    assert verify(pg).returncode == 0


# --- the append-only rules and the roles ---------------------------------------------------


def test_a_superuser_outside_the_owner_role_cannot_delete_records(pg: Chain) -> None:
    """The triggers refuse DELETE to every role but the owner, a superuser included: they are
    ENABLE ALWAYS, so a superuser that sets session_replication_role = replica (no ALTER
    TABLE, no SET ROLE) still cannot delete a record."""
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    try:
        pg.server.psql(
            "SET session_replication_role = replica; DELETE FROM floorguard.records WHERE seq = 1",
            database=pg.database,
        )
    except RuntimeError as exc:
        assert "append-only" in str(exc)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "3"


# --- tampering and the offline verifier --------------------------------------------------


def test_the_owner_dropping_the_last_records_is_caught_by_an_earlier_checkpoint(
    pg: Chain, tmp_path: Path
) -> None:
    """The owner deletes the last acknowledged record and its tree rows; the export verifies
    alone, but `verify chain` against the checkpoint signed before refuses it."""
    chain = pg.chain()
    for n in range(5):
        chain.append(CANARY, receipt(n=n))
    cp, _ = signed_checkpoint(pg, tmp_path)
    env = pg.env(tmp_path / "auditor")
    pg.sql("DELETE FROM floorguard.records WHERE seq = 4;"
           " DELETE FROM floorguard.tree WHERE (level = 0 AND idx = 4)")  # fmt: skip
    export = tmp_path / "slice.jsonl"
    done = floorctl("chain", "export", "--out", str(export), env=env)
    assert done.returncode == 0, done.stderr
    alone = floorctl("verify", "chain", str(export), "--key-file", str(pg.key_file), env=env)
    assert alone.returncode == 0, alone.stdout  # a hash chain alone cannot see a lost tail
    against = floorctl("verify", "chain", str(export), "--checkpoint", str(cp), "--pubkey",
                       str(tmp_path / "keys" / "signing.pub"), env=env)  # fmt: skip
    assert against.returncode != 0, against.stdout


# --- the owner altered meta ---------------------------------------------------------------------


def test_the_owner_changing_meta_chain_id_stops_appends_naming_the_alteration(
    pg: Chain, tmp_path: Path
) -> None:
    """Records name their chain; a chain_id in meta the owner changed afterwards refuses the
    next append in one line, instead of appending under a second identity."""
    assert append(pg.env(tmp_path / "h")).returncode == 0
    pg.sql("UPDATE floorguard.meta SET value = repeat('a', 32) WHERE key = 'chain_id'")
    done = append(pg.env(tmp_path / "h2"))
    assert done.returncode == 1
    assert "the database was altered" in done.stderr, done.stderr
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"


def test_a_row_inserted_by_hand_with_a_seq_gap_or_an_earlier_ts_is_refused(pg: Chain) -> None:
    """The appender's role may not insert by SQL at all, and even the owner's row cannot skip
    a seq or stamp before the head."""
    chain = pg.chain()
    head = chain.append(CANARY, receipt(n=0))
    chain.close()
    for seq, ts in ((2, head.ts), (1, "2000-01-01T00:00:00.000000Z"), (1, head.ts + " ")):
        forged = f"({seq}, '{ts}', 'c', 'e', 'r', '{{}}', 'p', 'm')"
        with pytest.raises(RuntimeError, match="permission denied"):
            pg.sql(f"INSERT INTO floorguard.records VALUES {forged}", as_owner=False)  # noqa: S608
        with pytest.raises(RuntimeError, match="floorguard: record"):
            pg.sql(f"INSERT INTO floorguard.records VALUES {forged}")  # noqa: S608
    assert _count(pg) == 1


# --- the database dropping what an append writes ------------------------------------------------

# Each silently drops the rows of one table (the owner's own mistake, or a tool of the
# database's): an append acknowledged then would be a permit with no record.
DROPPERS = {
    "trigger-on-records": (
        "CREATE FUNCTION public.drop_row() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RETURN NULL; END $$;"
        " CREATE TRIGGER a_drop BEFORE INSERT ON floorguard.records"
        " FOR EACH ROW EXECUTE FUNCTION public.drop_row()"
    ),
    "trigger-on-tree": (
        "CREATE FUNCTION public.drop_row() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RETURN NULL; END $$;"
        " CREATE TRIGGER a_drop BEFORE INSERT ON floorguard.tree"
        " FOR EACH ROW EXECUTE FUNCTION public.drop_row()"
    ),
    "rule-on-records": "CREATE RULE r AS ON INSERT TO floorguard.records DO INSTEAD NOTHING",
    "rule-on-tree": "CREATE RULE r AS ON INSERT TO floorguard.tree DO INSTEAD NOTHING",
}


@pytest.mark.parametrize("ahead", [False, True], ids=["first-append", "append-ahead"])
@pytest.mark.parametrize("dropper", list(DROPPERS.values()), ids=list(DROPPERS))
def test_an_append_whose_rows_the_database_drops_is_refused(
    pg: Chain, dropper: str, ahead: bool
) -> None:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    if not ahead:  # a new process: its first append reads the head under the lock
        chain.close()
        chain = pg.chain()
    pg.sql(dropper)
    with pytest.raises(ChainWriteError, match="cannot append"):
        chain.append(CANARY, receipt(n=1))
    chain.close()
    assert _count(pg) == 1
    assert pg.sql("SELECT count(*) FROM floorguard.tree") == "1"
