"""A long-lived process that keeps its audit chain (and the host's view of it) between
appends, told what to do on its standard input: for attacks made between two appends."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Self

DRIVER = textwrap.dedent(
    """
    import json, sys
    import floorguard
    from floorguard._base._time import now_ts
    from floorguard._chain.chain import AuditChain
    from floorguard.errors import FloorguardError
    chain = AuditChain.from_env()
    for line in sys.stdin:
        command = line.split()
        try:
            if command[0] == "append":
                record = chain.append("adapter.canary_receipt", {
                    "kind": "adapter.canary_receipt", "schema_version": 1, "ts": now_ts()})
                out = {"seq": record.seq}
            else:
                decision = floorguard.preflight("aider", binary=command[1])
                out = {"verdict": decision.verdict}
        except floorguard.SpawnRefused as exc:
            out = {"refused": str(exc), "spawn": True}
        except FloorguardError as exc:
            out = {"refused": str(exc)}
        print(json.dumps(out), flush=True)
    """
)


class LongLived:
    """One process that keeps its chain open and appends when told to (``driver``: the
    program it runs, one command a line on its standard input, one JSON answer a line)."""

    def __init__(self, env: dict[str, str], driver: str = DRIVER) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", driver], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, self.process.stderr.read() if self.process.stderr else ""
        answer: dict[str, Any] = json.loads(line)
        return answer

    def append(self) -> dict[str, Any]:
        return self.ask("append")

    def appended(self, count: int) -> list[int]:
        seqs = []
        for _ in range(count):
            answer = self.append()
            assert "seq" in answer, answer
            seqs.append(answer["seq"])
        return seqs

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def another_process(env: dict[str, str], count: int) -> list[int]:
    """``count`` appends by a fresh process of the same host."""
    process = LongLived(env)
    try:
        return process.appended(count)
    finally:
        process.close()


def backup_chain(home: Path, to: Path) -> Path:
    """A consistent copy of the chain (its log folded in) and of its key."""
    to.mkdir()
    source = sqlite3.connect(home / "chain.sqlite3")
    target = sqlite3.connect(to / "chain.sqlite3")
    with target:
        source.backup(target)
    source.close()
    target.close()
    shutil.copy2(home / "chain.key", to / "chain.key")
    return to


def restore_chain(backup: Path, home: Path) -> None:
    """An older copy of the chain and its key put back by rename, its log and index gone."""
    for name in ("chain.sqlite3-wal", "chain.sqlite3-shm"):
        (home / name).unlink(missing_ok=True)
    for name in ("chain.sqlite3", "chain.key"):
        shutil.copy2(backup / name, home / f"{name}.restoring")
        os.replace(home / f"{name}.restoring", home / name)
