"""A long-lived host process that appends, decides spawns and makes inclusion proofs and
checkpoints from one chain object kept between commands, as an orchestrator embedding
floorguard would: for tampering with the chain's tables between two of its steps.

Anything other than floorguard's own errors escaping a step is answered as ``crash``: a host
catches ``SpawnRefused`` and ``FloorguardError``, and a crash is what it would not catch."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

from helpers.long_lived import LongLived

DRIVER = textwrap.dedent(
    """
    import json, sys
    import floorguard
    from floorguard._base._time import now_ts
    from floorguard._chain.chain import AuditChain
    from floorguard._proofs import checkpoint, tlog
    from floorguard.errors import FloorguardError
    chain = AuditChain.from_env()
    for line in sys.stdin:
        command = line.split()
        try:
            if command[0] == "append":
                record = chain.append("adapter.canary_receipt", {
                    "kind": "adapter.canary_receipt", "schema_version": 1, "ts": now_ts()})
                out = {"seq": record.seq}
            elif command[0] == "prove":
                proof = tlog.prove_inclusion(chain, seq=int(command[1]))
                out = {"proof": json.loads(tlog.proof_text(proof))}
            elif command[0] == "checkpoint":
                out = {"size": checkpoint.of_chain(chain).size}
            else:
                decision = floorguard.preflight("aider", binary=command[1])
                out = {"verdict": decision.verdict, "receipt_id": decision.receipt_id}
        except floorguard.SpawnRefused as exc:
            out = {"refused": str(exc), "spawn": True}
        except FloorguardError as exc:
            out = {"refused": str(exc)}
        except Exception as exc:
            out = {"crash": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)
    """
)


class LongLivedHost(LongLived):
    """One process that keeps its chain object and answers one command a line: appends,
    preflights, proofs and checkpoints; an answer saying it crashed fails the test."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env, driver=DRIVER)

    def ask(self, command: str) -> dict[str, Any]:
        answer = super().ask(command)
        assert "crash" not in answer, answer
        return answer

    def preflight(self, binary: Path) -> dict[str, Any]:
        return self.ask(f"preflight {binary}")

    def prove(self, seq: int) -> dict[str, Any]:
        return self.ask(f"prove {seq}")


def tamper(home: Path, *statements: str) -> None:
    """Statements run on the chain's file by someone with access to it, from a connection of
    their own, each committed at once."""
    conn = sqlite3.connect(home / "chain.sqlite3", isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def count_rows(home: Path, table: str) -> int:
    conn = sqlite3.connect(home / "chain.sqlite3")
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608
    finally:
        conn.close()


def refusals(home: Path) -> list[dict[str, Any]]:
    path = home / "chain-refusals.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
