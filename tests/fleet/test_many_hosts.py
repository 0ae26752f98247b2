"""Many hosts, processes and threads appending at once make one linear chain, and checkpoints
and exports taken meanwhile are each a verifiable, consistent prefix."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _appending,
    _go,
    _start,
    _verified,
    floorctl,
    verify,
)

from floorguard._chain.chain import AuditChain

pytestmark = pytest.mark.fleet


def test_threads_sharing_one_chain_and_a_second_chain_in_one_process_stay_linear(
    pg: Chain,
) -> None:
    chains = [pg.chain(), pg.chain()]
    errors: list[BaseException] = []

    def run(chain: AuditChain, tag: int) -> None:
        try:
            for n in range(40):
                chain.append(CANARY, receipt(n=n, tag=tag))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(chains[t % 2], t)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[:3]
    assert _verified(pg) == 240


# --- fork and concurrency ----------------------------------------------------------------------


def test_four_processes_of_a_hundred_appends_make_one_linear_chain(pg: Chain, tmp_path) -> None:
    stop = tmp_path / "stop"
    env = pg.env(tmp_path)
    procs = _start(env, 4, 100, stop, "w")
    _go(procs)
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert _verified(pg) == 400
    assert verify(pg).returncode == 0


# --- checkpoints and proofs while many hosts append ------------------------------------------


def test_checkpoints_signed_while_two_hosts_append_are_each_consistent_with_the_last(
    pg: Chain, tmp_path: Path
) -> None:
    """A checkpoint is of one snapshot (the records and the stored tree agree for its size),
    so checkpoints taken while appends are in flight each prove consistent with the one
    before, and record 0's inclusion verifies in every one."""
    script = (
        "import sys\nfrom floorguard._chain.chain import AuditChain\n"
        "from helpers.chain_support import receipt\n"
        "c = AuditChain.from_env()\n"
        "for n in range(150):\n    c.append('adapter.canary_receipt', receipt(n=n))\n"
    )
    tests_dir = str(Path(__file__).parents[1])
    appenders = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=tests_dir,
            env={**pg.env(tmp_path / f"h{i}"), "PYTHONPATH": tests_dir},
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    env = pg.env(tmp_path / "auditor")
    assert floorctl("keygen", "--out", str(tmp_path / "keys"), env=env).returncode == 0
    key, pub = str(tmp_path / "keys" / "signing.key"), str(tmp_path / "keys" / "signing.pub")
    previous: Path | None = None
    try:
        for i in range(6):
            if i == 0:
                while pg.sql("SELECT count(*) FROM floorguard.records") == "0":
                    time.sleep(0.05)
            cp = tmp_path / f"cp{i}"
            done = floorctl("chain", "checkpoint", "--signing-key", key, "--out", str(cp), env=env)
            assert done.returncode == 0, done.stderr
            proof = tmp_path / f"incl{i}.json"
            done = floorctl("chain", "prove", "--seq", "0", "--checkpoint", str(cp),
                            "--out", str(proof), env=env)  # fmt: skip
            assert done.returncode == 0, done.stderr
            done = floorctl("verify", "inclusion", str(proof), "--checkpoint", str(cp),
                            "--pubkey", pub, env=env)  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            if previous is not None:
                cons = tmp_path / f"cons{i}.json"
                done = floorctl("chain", "consistency", "--old", str(previous), "--new", str(cp),
                                "--out", str(cons), env=env)  # fmt: skip
                assert done.returncode == 0, done.stderr
                done = floorctl("verify", "consistency", "--old", str(previous),
                                "--new", str(cp), "--proof", str(cons), "--pubkey", pub,
                                env=env)  # fmt: skip
                assert done.returncode == 0, done.stdout + done.stderr
            previous = cp
    finally:
        for proc in appenders:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "300"


def test_export_by_the_appender_while_another_host_appends_is_one_verifiable_prefix(
    pg: Chain, tmp_path: Path
) -> None:
    """`chain export --checkpoint-out` and `chain checkpoint` by a host (the appender role)
    while another host appends: each export verifies, and each is a contiguous prefix."""
    from floorguard._proofs.slice_verify import verify_slice

    stop = threading.Event()
    errors: list[str] = []
    done: list[int] = []
    worker = _appending(pg, stop, errors, done, "w")
    key = bytes.fromhex(pg.key_file.read_text().strip())
    try:
        time.sleep(0.3)
        for i in range(6):
            res = floorctl("chain", "export", env=pg.env(tmp_path / f"r{i}"))
            assert res.returncode == 0, res.stderr
            lines = res.stdout.splitlines()
            seqs = [json.loads(line)["seq"] for line in lines]
            assert seqs == list(range(len(seqs)))
            report: Any = verify_slice(lines, key=key)
            assert report.ok if hasattr(report, "ok") else report, report
    finally:
        stop.set()
        worker.join(30)
    assert not errors, errors[:2]
