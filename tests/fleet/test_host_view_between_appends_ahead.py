"""A long-lived process of a fleet host writes ahead (one round trip, on the head and right
edge it kept) while, between two of its appends, another process of the same host appends,
and the database's owner then deletes those records: the process's own record is the head
again, byte for byte, with the right edge it kept. Its next append must be judged by the
view the other process grew, and refused as a rollback (docs/fleet.md: "a process of the
same host that saw more of the chain keeps it from writing ahead onto a chain rolled back to
what it alone saw")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.long_lived import LongLived, another_process
from helpers.pg_chain import Chain

pytestmark = pytest.mark.fleet  # (a PostgreSQL suite: run by .ci/run)


def _cut_to(pg: Chain, size: int) -> None:
    """The owner removes every record from ``size`` on, and the tree nodes they made."""
    cut = int(size)
    records = f"DELETE FROM floorguard.records WHERE seq >= {cut}"  # noqa: S608
    nodes = f"DELETE FROM floorguard.tree WHERE (idx + 1) * (1::bigint << level) > {cut}"  # noqa: S608
    pg.sql(f"BEGIN; {records}; {nodes}; COMMIT")


def test_a_process_writing_ahead_refuses_a_chain_cut_back_to_its_own_head(
    pg: Chain, tmp_path: Path
) -> None:
    env = pg.env(tmp_path / "host")
    home = Path(env["FLOORGUARD_HOME"])
    with LongLived(env) as host:
        assert host.appended(4) == [0, 1, 2, 3]  # the later ones written ahead
        assert another_process(env, 2) == [4, 5]
        _cut_to(pg, 4)
        refused = host.append()
        assert "rollback" in refused.get("refused", ""), refused
        again = host.append()
        assert "rollback" in again.get("refused", ""), again
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "4"
    events = [json.loads(line)["event"] for line in (home / "chain-refusals.jsonl").open()]
    assert events[-1] == "rollback"


def test_a_process_writing_ahead_refuses_its_own_records_cut_when_the_view_is_its_own(
    pg: Chain, tmp_path: Path
) -> None:
    # no other process: the process itself saw the records that were cut
    env = pg.env(tmp_path / "host")
    with LongLived(env) as host:
        assert host.appended(6) == [0, 1, 2, 3, 4, 5]
        _cut_to(pg, 4)
        refused = host.append()
        assert "rollback" in refused.get("refused", ""), refused
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "4"
