"""The audit chain as a transparency log, driven through the real CLIs: a real log of refreshes
and preflights, its checkpoints, a fork of it and witnesses' cosignatures."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives.serialization import load_pem_private_key

from floorguard._chain.chain import ChainRecord, canonical_json, record_mac
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog
from helpers.cli import floorctl, isolated_env

FLOORGUARD = [sys.executable, "-m", "floorguard"]


FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


def ctl(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=root, state=root / "state")


def guard(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOORGUARD, *args], cwd=root, env=isolated_env(root / "state"),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def preflights(root: Path, *versions: str) -> None:
    code = (
        "import floorguard, sys\n"
        "for version in sys.argv[1:]:\n"
        "    try:\n"
        "        floorguard.preflight('aider', version=version)\n"
        "    except floorguard.SpawnRefused:\n"
        "        pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *versions], cwd=root, env=isolated_env(root / "state"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def refresh(root: Path) -> None:
    ok(ctl(root, "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
           "--signing-key", "keys/signing.key", "--anchor"))  # fmt: skip


def build_log(root: Path) -> Path:
    """A real 11-record log in ``root``: its signing keys, one.cp (size 5) and two.cp (11)."""
    ok(ctl(root, "keygen", "--out", "keys"))
    (root / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (root / "feed.json").write_text(json.dumps(FEED))
    refresh(root)
    preflights(root, "0.61.0", "0.59.0", "0.62.1", "0.60.0")
    ok(ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--out", "one.cp"))
    preflights(root, "0.63.0", "0.50.0")
    refresh(root)
    preflights(root, "0.64.0", "0.61.5", "0.58.0")
    ok(ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--out", "two.cp"))
    return root


def forked(log: Path, folder: Path) -> tuple[Path, Path]:
    """What a log operator holding every key can show for a rewritten record 1: a signed
    checkpoint of the rewritten 11-record log and its best consistency proof from size 5
    (the forked slice itself is written beside them, as fork.jsonl)."""
    key = bytes.fromhex((log / "state" / "floorguard" / "chain.key").read_text().strip())
    records = [
        tlog.record_of_line(line) for line in ok(ctl(log, "chain", "export")).stdout.splitlines()
    ]
    lines, prev = [], None
    for record in records:
        receipt = dict(record.receipt)
        if record.seq == 1:
            receipt["version"] = "0.61.1"
        receipt_id = "sha256:" + hashlib.sha256(canonical_json(receipt).encode()).hexdigest()
        draft = ChainRecord(record.seq, record.ts, record.chain_id, record.event, receipt_id,
                            receipt, prev or record.prev, "")  # fmt: skip
        sealed = ChainRecord(**{**draft.__dict__, "mac": record_mac(key, draft.body_bytes())})
        lines.append(sealed.to_json_line())
        prev = sealed.digest()
    tree = merkle.CompactRange()
    levels: dict[tuple[int, int], bytes] = {}
    for line in lines:
        for level, index, value in tree.append(merkle.leaf_hash(line.encode())):
            levels[level, index] = value
    signer = load_pem_private_key((log / "keys" / "signing.key").read_bytes(), None)
    cp = checkpoint.new_checkpoint(records[0].chain_id, 11, tree.root())
    (folder / "fork.cp").write_text(checkpoint.sign(cp, signer))  # type: ignore[arg-type]
    hashes = merkle.consistency_proof(5, 11, lambda level, index: levels[level, index])
    proof = {"origin": cp.origin, "old_size": 5, "new_size": 11,
             "hashes": [base64.b64encode(h).decode() for h in hashes]}  # fmt: skip
    (folder / "fork-proof.json").write_text(json.dumps(proof))
    (folder / "fork.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder / "fork.cp", folder / "fork-proof.json"


def witnessed(log: Path, state: Path, name: str = "w1") -> tuple[Path, Path]:
    """Witness ``name`` (keys in ``log/<name>``) cosigns one.cp (its first), then two.cp."""
    if not (log / name).exists():
        ok(ctl(log, "keygen", "--out", name))
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "one.cp", "--out", "c11.json"))
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c12.json"))
    first, second = state.parent / f"{name}-one.cp", state.parent / f"{name}-two.cp"
    for old, new, proof, out in (("one.cp", "one.cp", "c11.json", first),
                                 ("one.cp", "two.cp", "c12.json", second)):  # fmt: skip
        ok(ctl(log, "witness", "cosign", "--old", old, "--new", new, "--proof", proof,
               "--key", f"{name}/signing.key", "--pubkey", "keys/signing.pub",
               "--state", str(state), "--out", str(out)))  # fmt: skip
    return first, second


def name_of(log: Path) -> str:
    return (log / "two.cp").read_text().splitlines()[0].removeprefix("floorguard/")


def both(log: Path, *args: str) -> tuple[int, str, str]:
    """Run both CLIs; they must agree on exit code, stdout and the error after its prefix."""
    ours, theirs = ctl(log, *args), guard(log, *args)
    assert ours.returncode == theirs.returncode, (ours.stderr, theirs.stderr)
    assert ours.stdout == theirs.stdout
    assert ours.stderr.removeprefix("floorctl: ") == theirs.stderr.removeprefix("floorguard: ")
    return ours.returncode, ours.stdout, ours.stderr


def _same(log: Path) -> str:
    ok(ctl(log, "chain", "consistency", "--old", "two.cp", "--new", "two.cp", "--out", "c22.json"))
    return "c22.json"


def _inclusion_args(log: Path, cp: Path, *extra: str) -> tuple[str, ...]:
    ok(ctl(log, "chain", "prove", "--seq", "6", "--checkpoint", "two.cp", "--out", "p6.json"))
    return (
        "verify",
        "inclusion",
        "p6.json",
        "--checkpoint",
        str(cp),
        "--pubkey",
        "keys/signing.pub",
        *extra,
    )
