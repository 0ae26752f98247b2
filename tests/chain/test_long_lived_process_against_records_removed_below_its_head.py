"""Records deleted from the middle of the chain between two appends of a long-lived host
process, its own head left in place (and the tree's nodes with it).

fleet.md: an append is refused, and the refusal recorded, when the chain's head is older than
the last record this host has seen. Records deleted below the head, the head and the tree
left, are a named gap for appends ("What a host does not see"): the audit names the hole,
and no checkpoint is signed over it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.long_lived_prover import LongLivedHost, count_rows, refusals, tamper

REMOVE_THREE = "DELETE FROM records WHERE seq IN (2, 3, 4)"


@pytest.fixture
def host(env: dict[str, str], home: Path) -> Iterator[LongLivedHost]:
    with LongLivedHost(env) as process:
        process.appended(8)
        tamper(home, REMOVE_THREE)
        assert count_rows(home, "records") == 5  # the host has seen 8
        yield process


def _floorctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorctl", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.xfail(
    strict=True,
    reason="named gap (fleet.md, 'What a host does not see'): the process appends (seq 8) "
    "onto a chain holding 5 of the 8 records it has seen (records 2 to 4 removed, its head "
    "kept), and records no refusal",
)
def test_records_removed_below_the_head_refuse_the_process_s_next_append_as_a_rollback(
    host: LongLivedHost, home: Path
) -> None:
    answer = host.ask("append")
    assert "rollback" in answer.get("refused", ""), answer
    assert [r["event"] for r in refusals(home)] == ["rollback"]


@pytest.mark.xfail(
    strict=True,
    reason="named gap (fleet.md, 'What a host does not see'): a fresh process of the host "
    "appends onto the chain with a hole too",
)
def test_records_removed_below_the_head_refuse_a_fresh_process_of_the_host(
    host: LongLivedHost, home: Path, env: dict[str, str]
) -> None:
    with LongLivedHost(env) as fresh:
        answer = fresh.ask("append")
    assert "rollback" in answer.get("refused", ""), answer


def test_no_checkpoint_is_signed_over_a_chain_with_a_hole_and_the_audit_names_it(
    host: LongLivedHost, home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    host.ask("append")  # appended or refused: the hole is there either way
    signed = _floorctl(env, "chain", "checkpoint")
    assert signed.returncode == 1 and signed.stdout == "", signed
    assert "records missing" in signed.stderr
    slice_file = tmp_path / "slice.jsonl"
    assert _floorctl(env, "chain", "export", "--out", str(slice_file)).returncode == 0
    verified = _floorctl(env, "verify", "chain", str(slice_file), "--key-file",
                         str(home / "chain.key"), "--json")  # fmt: skip
    report = json.loads(verified.stdout)
    assert not report["proven"]
    assert any("expected seq 2" in e["reason"] for e in report["integrity_errors"]), report
