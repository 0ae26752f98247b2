"""``refresh --anchor`` for every feed the contract accepts (up to 100,000 adapters).

A receipt that embedded a map of 15,006 adapters would exceed the chain's 1 MiB record
cap. Such a receipt names its map by hash instead (the map is archived in
``maps/`` beside the module) and binds its diff and conflicts by content address; the
chain, the window proof and ``verify receipt`` still check everything a verifier needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from helpers.proof_support import spawn_receipt

from floorguard._chain import receipts
from floorguard._chain.chain import MAX_RECEIPT_BYTES, AuditChain, canonical_json
from floorguard._maps.map_model import map_file_hash
from floorguard.errors import VerificationError

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'
UPDATE = "adapter.floor_update_receipt"


def big_feed(count: int, floor: str = "1.0.0") -> dict[str, Any]:
    entry = {"min_safe_version": floor, "advisory_id": "BSA-0001", "note": "Upgrade."}
    return {"schema_version": 1, "adapters": {f"adapter-{n:06d}": entry for n in range(count)}}


def project_with(root: Path, feed: dict[str, Any]) -> tuple[Path, Path]:
    project, state = root / "project", root / "state"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(feed))
    return project, state


def refresh_anchored(project: Path, state: Path) -> dict[str, Any]:
    done = floorctl(
        "refresh", "--feed", "feed.json", "--write", "--receipt-out", "receipt.dsse",
        "--anchor", "--json", cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def export(project: Path, state: Path) -> list[dict[str, Any]]:
    done = floorctl("chain", "export", "--out", "slice.jsonl", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    lines = (project / "slice.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def archived(project: Path, map_hash: str) -> Path:
    return project / MODULE.parent / "maps" / (map_hash.replace(":", "-") + ".json")


def check_anchored_by_reference(project: Path, state: Path, count: int) -> dict[str, Any]:
    """The refresh's record names its map by hash, and every binding checks out."""
    written = refresh_anchored(project, state)
    records = export(project, state)
    (record,) = [r for r in records if r["event"] == UPDATE]
    receipt = record["receipt"]
    assert len(canonical_json(receipt)) <= MAX_RECEIPT_BYTES
    assert "new_floor_map" not in receipt and "diff" not in receipt
    assert receipts.map_by_reference(receipt)
    receipts.check_update_receipt(receipt)
    assert receipt["new_floor_map_adapters"] == count
    assert receipt["diff_counts"] == {"added": count, "removed": 0, "changed": 0, "lowered": 0}
    assert receipt["downgrade"] is False and receipt["downgrade_allowed"] is False
    assert record["receipt_id"] == written["receipt_id"] == receipts.receipt_id(receipt)
    # The archive holds the map under its hash; verifiers re-hash it.
    path = archived(project, receipt["new_floor_map_hash"])
    assert map_file_hash(path.read_bytes(), str(path)) == receipt["new_floor_map_hash"]
    # The signed envelope carries the same receipt; it verifies against the archived map.
    pubkey = state / "floorctl" / "dev-key" / "signing.pub"
    done = floorctl(
        "verify", "receipt", "receipt.dsse", "--pubkey", pubkey, "--floor-map", path, "--json",
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    verified = json.loads(done.stdout)
    assert verified["receipt_id"] == record["receipt_id"]
    assert verified["floor_map_checked"] is True
    # The runtime's own verifier agrees.
    done = subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "receipt", "receipt.dsse",
         "--pubkey", str(pubkey), "--floor-map", str(path), "--json"],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["receipt_id"] == record["receipt_id"]
    return receipt


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The 15,006-adapter refresh that exceeded the cap, written and anchored."""
    project, state = project_with(tmp_path_factory.mktemp("large"), big_feed(15_006))
    receipt = check_anchored_by_reference(project, state, 15_006)
    return project, state, receipt


def test_anchors_a_refresh_whose_map_exceeds_one_chain_record(
    large: tuple[Path, Path, dict[str, Any]],
) -> None:
    project, state, _ = large
    key = state / "floorguard" / "chain.key"
    done = floorctl("verify", "chain", "slice.jsonl", "--key-file", key, cwd=project, state=state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PROVEN")


def test_refuses_a_map_that_does_not_match_the_hash_the_receipt_pins(
    large: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    project, state, receipt = large
    forged = tmp_path / "forged.json"
    entries = json.loads(archived(project, receipt["new_floor_map_hash"]).read_text())
    entries["adapter-000001"]["min_safe_version"] = "0.0.1"
    forged.write_text(json.dumps(entries))
    pubkey = state / "floorctl" / "dev-key" / "signing.pub"
    done = floorctl(
        "verify", "receipt", "receipt.dsse", "--pubkey", pubkey, "--floor-map", forged,
        cwd=project, state=state,
    )  # fmt: skip
    assert done.returncode == 1
    assert "floor-map hash mismatch" in done.stderr


def _with_spawns(
    project: Path, state: Path, receipt: dict[str, Any], version: str, verdict: str
) -> Path:
    """The chain with one spawn of adapter-000001 under the big map, exported."""
    chain = AuditChain.from_env({"FLOORGUARD_HOME": str(state / "floorguard")})
    spawn = spawn_receipt(
        "adapter-000001", version, verdict, map_hash=receipt["new_floor_map_hash"], floor="1.0.0"
    )
    seq = chain.append("adapter.spawn_preflight_receipt", spawn).seq
    done = floorctl("chain", "export", "--out", f"slice-{seq}.jsonl", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    return project / f"slice-{seq}.jsonl"


def test_window_proof_judges_spawns_against_a_map_named_by_reference(
    large: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    project, state, receipt = large
    key = state / "floorguard" / "chain.key"
    fine = _with_spawns(project, state, receipt, "1.2.0", "permit")
    done = floorctl("verify", "chain", fine, "--key-file", key, cwd=project, state=state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 spawn record(s) re-evaluated" in done.stdout

    below = _with_spawns(project, state, receipt, "0.9.0", "permit")
    done = floorctl("verify", "chain", below, "--key-file", key, cwd=project, state=state)
    assert done.returncode == 1
    assert "NOT PROVEN" in done.stdout and "adapter-000001" in done.stdout

    # Without the archive the map cannot be resolved: never proven by default.
    empty = tmp_path / "no-maps"
    empty.mkdir()
    done = floorctl(
        "verify", "chain", fine, "--key-file", key, "--maps", empty, cwd=tmp_path, state=state
    )
    assert done.returncode == 1
    assert "no map archive holds" in done.stdout


def test_a_small_refresh_still_embeds_its_map(tmp_path: Path) -> None:
    project, state = project_with(tmp_path, big_feed(3))
    refresh_anchored(project, state)
    (record,) = export(project, state)
    assert len(record["receipt"]["new_floor_map"]) == 3
    assert record["receipt"]["diff"]["added"] == [f"adapter-{n:06d}" for n in range(3)]
    assert not receipts.map_by_reference(record["receipt"])


@pytest.mark.slow
def test_anchors_a_refresh_of_100000_adapters(tmp_path: Path) -> None:
    feed = big_feed(100_000)
    project, state = project_with(tmp_path, feed)
    assert (project / "feed.json").stat().st_size <= 16 * 1024 * 1024
    check_anchored_by_reference(project, state, 100_000)
    key = state / "floorguard" / "chain.key"
    done = floorctl("verify", "chain", "slice.jsonl", "--key-file", key, cwd=project, state=state)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the receipt's own checks (tamper one field) ----------------------------------------------


def _by_reference() -> dict[str, Any]:
    digest = "sha256:" + "ab" * 32
    return receipts.new_receipt(
        UPDATE,
        {
            "old_floor_map_hash": digest,
            "new_floor_map_hash": digest,
            "old_map_version": 1,
            "new_map_version": 2,
            "new_floor_map_adapters": 100_000,
            "diff_digest": digest,
            "diff_counts": {"added": 1, "removed": 0, "changed": 0, "lowered": 0},
            "conflicts_digest": digest,
            "conflicts_count": 0,
            "downgrade": False,
            "downgrade_allowed": False,
            "feeds": [],
            "changed": True,
            "template": "floorguard",
            "forced": False,
        },
    )


def test_accepts_a_well_formed_receipt_naming_its_map_by_hash() -> None:
    receipts.check_update_receipt(_by_reference())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"diff": {"added": [], "removed": [], "changed": []}}, "carries diff"),
        ({"diff_digest": "not-a-digest"}, "diff_digest is not a sha256 digest"),
        ({"conflicts_digest": None}, "conflicts_digest is not a sha256 digest"),
        ({"new_floor_map_adapters": -1}, "new_floor_map_adapters is not a count"),
        ({"new_floor_map_adapters": True}, "new_floor_map_adapters is not a count"),
        ({"downgrade_allowed": "no"}, "downgrade_allowed is not a boolean"),
    ],
)
def test_refuses_a_tampered_receipt_naming_its_map_by_hash(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(VerificationError, match=message):
        receipts.check_update_receipt({**_by_reference(), **change})


def test_refuses_a_receipt_with_neither_its_map_nor_the_bindings_of_a_reference() -> None:
    stripped = {k: v for k, v in _by_reference().items() if k != "diff_digest"}
    with pytest.raises(VerificationError, match="lacks diff, new_floor_map"):
        receipts.check_update_receipt(stripped)
