"""The window proof over real chains: every attack on a slice, named, and what stays PROVEN."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.proof_support import (
    CANARY,
    HASH_V1,
    HASH_V2,
    MAP_V1,
    MAP_V2,
    SPAWN,
    UPDATE,
    Built,
    at,
    build,
    canary_receipt,
    parsed,
    relink,
    spawn_receipt,
    tree_root,
    update_receipt,
)
from helpers.slice_writer import write_slice

from floorguard._base._canonical import canonical_bytes
from floorguard._base._time import parse_ts
from floorguard._maps.map_model import entries_hash
from floorguard._proofs import checkpoint, tlog
from floorguard._proofs.window_proof import UNAUTHENTICATED, ProofReport
from floorguard._proofs.window_report import load_checkpoint, prove

SIGNER = Ed25519PrivateKey.generate()
GAP = "(records missing, duplicated or out of order)"


def ordinary(extra: list[tuple[str, dict[str, Any]]] | None = None) -> list[tuple[str, Any]]:
    """seq 0 map update, then 8 spawn decisions; ``extra`` appended."""
    return [
        (UPDATE, update_receipt(MAP_V1)),
        (SPAWN, spawn_receipt("aider", "0.60.0", "permit")),
        (SPAWN, spawn_receipt("aider", "0.59.9", "refuse")),
        (SPAWN, spawn_receipt("claude", "1.0.20", "permit", floor="1.0.20")),
        (SPAWN, spawn_receipt("goose", "1.0.0", "untracked", floor=None)),
        (SPAWN, spawn_receipt("aider", "0.61.2", "permit")),
        (SPAWN, spawn_receipt("aider", None, "refuse")),
        (SPAWN, spawn_receipt("aider", "0.62.0", "permit")),
        (SPAWN, spawn_receipt("aider", "0.63.0", "permit")),
        *(extra or []),
    ]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A map archive as refresh keeps one: canonical JSON named by its hash."""
    folder = tmp_path_factory.mktemp("maps")
    for entries, digest in ((MAP_V1, HASH_V1), (MAP_V2, HASH_V2)):
        (folder / f"{digest.replace(':', '-')}.json").write_bytes(canonical_bytes(entries))
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("chain"), ordinary())


def findings(report: ProofReport) -> tuple[list[tuple[Any, str]], list[tuple[Any, str]]]:
    return (
        [(v.seq, v.reason) for v in report.violations],
        [(e.seq, e.reason) for e in report.integrity_errors],
    )


def window(
    lines: list[str], since: int | None, until: int | None, maps: Path | None = None, **options: Any
) -> ProofReport:
    return prove(
        lines,
        map_dirs=[maps] if maps is not None else [],
        since=parse_ts(at(since)) if since is not None else None,
        until=parse_ts(at(until)) if until is not None else None,
        **options,
    )


def signed(cp: checkpoint.Checkpoint, key: Ed25519PrivateKey = SIGNER) -> bytes:
    return checkpoint.sign(cp, key).encode()


def checkpoint_of(built: Built, upto: int, time: str) -> checkpoint.Checkpoint:
    record = built.records()[upto]
    return checkpoint.new_checkpoint(record.chain_id, upto + 1, tree_root(built, upto + 1), time)


def with_checkpoint(
    note: bytes, key: Ed25519PrivateKey = SIGNER, *, proven_in: Built | None = None
) -> dict[str, Any]:
    """The checkpoint options of ``prove``; with ``proven_in``, also the inclusion proof of
    the checkpoint's last record in that chain (what a slice not from genesis needs)."""
    found, error = load_checkpoint(note, key.public_key())
    options: dict[str, Any] = {"checkpoint": found, "checkpoint_error": error}
    if proven_in is not None and found is not None:
        options["inclusion"] = tlog.prove_inclusion(
            proven_in.chain, seq=found.size - 1, checkpoint=found
        )
    return options


# --- what is proven -----------------------------------------------------------------------------


def test_an_honest_slice_is_proven(built: Built) -> None:
    report = prove(built.lines(), key=built.key)
    assert report.proven, findings(report)
    assert report.evaluated == 8 and report.slice.records == 9


def test_an_honest_window_is_proven_with_one_record_either_side(
    built: Built, archive: Path
) -> None:
    lines = built.lines()[2:8]  # seq 2..7: seq 2 is before T1, seq 7 after T2
    report = window(lines, 3, 6, archive, key=built.key)
    assert report.proven, findings(report)
    assert report.evaluated == 4
    assert (report.since, report.until) == (at(3), at(6))


def test_a_window_from_genesis_needs_no_record_before_it(built: Built) -> None:
    report = window(built.lines()[:5], 0, 3, key=built.key)
    assert report.proven, findings(report)


def test_export_of_a_window_covers_it(built: Built, archive: Path) -> None:
    lines = [line + "\n" for line in built.chain.export_lines(parse_ts(at(3)), parse_ts(at(6)))]
    assert [json.loads(line)["seq"] for line in lines] == [2, 3, 4, 5, 6, 7]
    assert window(lines, 3, 6, archive, key=built.key).proven


def test_a_refusal_is_never_a_violation(tmp_path: Path) -> None:
    chain = build(
        tmp_path,
        [
            (SPAWN, spawn_receipt("aider", "0.1.0", "refuse")),
            (SPAWN, spawn_receipt("aider", None, "refuse", map_hash=None)),
            (SPAWN, spawn_receipt("aider", "0.1.0", "refuse", map_hash="sha256:" + "9" * 64)),
        ],
    )
    assert prove(chain.lines(), key=chain.key).proven


# --- integrity and continuity -------------------------------------------------------------------


def test_detects_a_changed_field_with_the_key(built: Built) -> None:
    lines = built.lines()
    records = parsed(lines)
    records[3]["receipt"]["version"] = "9.9.9"
    lines[3] = relink([records[3]])[0]
    violations, errors = findings(prove(lines, key=built.key))
    assert (3, "MAC does not verify (wrong key, or the record was altered)") in errors
    assert any(seq == 3 and "integrity" in reason for seq, reason in violations)


def test_detects_a_changed_field_without_the_key_by_the_checkpoint(built: Built) -> None:
    records = parsed(built.lines())
    records[5]["receipt"]["version"] = "0.70.0"
    forged = relink(records)  # every id, digest and link recomputed: only the root moves
    note = signed(checkpoint_of(built, 8, at(20)))
    _, errors = findings(prove(forged, **with_checkpoint(note)))
    assert errors == [
        (8, "the Merkle tree hash of records 0..8 is not the checkpoint's root (records up "
            "to it were changed, removed or reordered)"),
    ]  # fmt: skip
    # From seq 2 on, with the inclusion proof of record 8 from the honest log: refused too.
    _, errors = findings(prove(forged[2:], **with_checkpoint(note, proven_in=built)))
    assert (8, "record 8 with its inclusion proof does not lead to the checkpoint's root "
               "(records up to it were changed, removed or reordered)") in errors  # fmt: skip


def test_a_slice_not_from_genesis_needs_the_inclusion_proof_of_the_checkpoints_last_record(
    built: Built, archive: Path
) -> None:
    note = signed(checkpoint_of(built, 8, at(30)))
    _, errors = findings(window(built.lines()[2:], 3, 20, archive, **with_checkpoint(note)))
    assert (8, "the slice starts at seq 2, not at genesis: the checkpoint's root covers "
               "records 0..8; give --inclusion, an inclusion proof of record 8 (floorctl "
               "chain prove --seq 8 --checkpoint FILE)") in errors  # fmt: skip
    options = with_checkpoint(note, proven_in=built)
    assert window(built.lines()[2:], 3, 20, archive, **options).proven


def test_an_inclusion_proof_of_another_record_is_refused(built: Built, archive: Path) -> None:
    note = signed(checkpoint_of(built, 8, at(30)))
    found, _ = load_checkpoint(note, SIGNER.public_key())
    assert found is not None
    other = tlog.prove_inclusion(built.chain, seq=7, checkpoint=found)
    report = window(built.lines()[2:], 3, 20, archive, checkpoint=found, inclusion=other)
    _, errors = findings(report)
    assert (8, f"the inclusion proof is for leaf 7 of 9 in {found.origin}, not record 8 of "
               "the checkpoint's log") in errors  # fmt: skip


def test_an_old_format_checkpoint_is_reported_as_such(built: Built) -> None:
    # Before the tree, the root line was the digest of the last record (the chain's head).
    head = built.records()[8]
    old = checkpoint.Checkpoint(head.chain_id, 9, bytes.fromhex(head.digest()[7:]), at(30))
    note = signed(old)
    for lines in (built.lines(), built.lines()[2:]):
        report = prove(lines, key=built.key, **with_checkpoint(note))
        assert not report.proven
        _, errors = findings(report)
        assert (8, "the checkpoint is in the old format: its root is the hash-chain head (the "
                   "digest of record 8), not a Merkle tree hash; sign a new checkpoint with "
                   "`floorctl chain checkpoint`") in errors  # fmt: skip


def test_detects_a_deleted_record_in_the_middle(built: Built) -> None:
    lines = built.lines()
    del lines[4]
    _, errors = findings(prove(lines, key=built.key))
    assert errors == [
        (5, "expected seq 4 after seq 3 (records missing, duplicated or out of order)")
    ]


def test_detects_deleted_tail_records_with_a_checkpoint(built: Built) -> None:
    note = signed(checkpoint_of(built, 8, at(20)))
    truncated = built.lines()[:6]  # seq 0..5: three decisions gone from the end
    report = prove(truncated, **with_checkpoint(note))  # no key: the auditor has none
    _, errors = findings(report)
    assert not report.proven
    assert errors == [
        (5, "the checkpoint covers 9 records but the slice ends at seq 5: records 6..8 are "
            "missing (truncated), and without them the records present cannot be checked "
            "against its root (any of them may differ from those it signed)"),
    ]  # fmt: skip


def test_deleted_tail_records_inside_the_window_leave_it_uncovered(built: Built) -> None:
    _, errors = findings(window(built.lines()[:6], 2, 7, key=built.key))
    assert errors[0][0] == 5 and "does not cover the end of the window" in errors[0][1]


def test_detects_reordered_records(built: Built) -> None:
    lines = built.lines()
    lines[3], lines[4] = lines[4], lines[3]
    _, errors = findings(prove(lines, key=built.key))
    assert {seq for seq, _ in errors} == {3, 4, 5}
    assert (4, "expected seq 3 after seq 2 (records missing, duplicated or out of order)") in errors


def test_detects_a_duplicated_replayed_record(built: Built) -> None:
    lines = built.lines()
    lines.insert(4, lines[3])
    report = prove(lines, key=built.key)
    _, errors = findings(report)
    assert errors == [
        (3, "expected seq 4 after seq 3 (records missing, duplicated or out of order)")
    ]
    assert not report.proven


def test_detects_a_record_spliced_from_another_chain(built: Built, tmp_path: Path) -> None:
    other = build(tmp_path / "other", ordinary())
    lines = built.lines()
    lines[4] = other.lines()[4]
    _, errors = findings(prove(lines, key=built.key))
    reasons = {reason for seq, reason in errors if seq == 4}
    assert any(reason.startswith("chain_id ") for reason in reasons)
    assert "MAC does not verify (wrong key, or the record was altered)" in reasons


def test_a_slice_that_starts_after_t1_is_not_proven(built: Built) -> None:
    _, errors = findings(window(built.lines()[3:], 3, 7, key=built.key))
    assert errors == [
        (3, f"the slice does not cover the start of the window: it starts at seq 3, not "
            f"stamped before {at(3)}, and records 0..2 are missing from the slice"),
    ]  # fmt: skip


def test_refuses_a_since_before_the_first_record_of_a_slice_that_skips_genesis(
    built: Built,
) -> None:
    _, errors = findings(window(built.lines()[3:], 1, None, key=built.key))
    assert [seq for seq, _ in errors] == [3]
    assert "records 0..2 are missing from the slice" in errors[0][1]


def test_refuses_a_slice_missing_its_first_records_when_the_window_starts_at_genesis(
    tmp_path: Path,
) -> None:
    # A warn_override at seq 1, then the slice is cut to start at seq 3: a checkpoint over
    # the whole chain still binds the rest, and with no --since the window is from genesis.
    receipts = ordinary()
    receipts.insert(1, (SPAWN, spawn_receipt("aider", "0.50.0", "warn_override")))
    chain = build(tmp_path, receipts)
    note = signed(checkpoint_of(chain, len(receipts) - 1, at(30)))
    for options in ({}, {"key": chain.key}):
        report = prove(chain.lines()[3:], **options, **with_checkpoint(note, proven_in=chain))
        assert not report.proven
        _, errors = findings(report)
        assert errors == [
            (3, "records 0..2 are missing from the slice: the window starts at genesis (no "
                "--since), so the slice must start at seq 0"),
        ]  # fmt: skip
    assert not prove(chain.lines(), key=chain.key).proven  # the override, seen whole


def test_refuses_a_window_that_starts_after_the_end_of_the_slice(built: Built) -> None:
    _, errors = findings(window(built.lines(), 20, None, key=built.key))
    assert errors == [
        (8, f"the window starts at {at(20)}, after the slice's last record (stamped {at(8)}): "
            "the slice shows nothing of it"),
    ]  # fmt: skip


def test_a_window_after_the_last_record_is_proven_only_through_a_later_checkpoint(
    built: Built,
) -> None:
    # The checkpoint, issued after T2 at the slice's size, shows no record came after seq 8.
    note = signed(checkpoint_of(built, 8, at(30)))
    assert window(built.lines(), 20, 25, **with_checkpoint(note)).proven
    assert not window(built.lines(), 20, 25, key=built.key).proven


def test_a_slice_that_ends_before_t2_is_not_proven(built: Built) -> None:
    _, errors = findings(window(built.lines()[:7], 2, 6, key=built.key))
    assert errors == [
        (6, f"the slice does not cover the end of the window: its last record is not stamped "
            f"after {at(6)}, and no checkpoint issued after it ends the slice"),
    ]  # fmt: skip


def test_a_checkpoint_issued_after_t2_closes_the_window(built: Built, archive: Path) -> None:
    note = signed(checkpoint_of(built, 8, at(30)))
    report = window(built.lines()[2:], 3, 20, archive, **with_checkpoint(note, proven_in=built))
    assert report.proven, findings(report)


def test_a_checkpoint_without_a_time_line_binds_the_records_but_closes_no_window(
    built: Built, archive: Path
) -> None:
    head = built.records()[8]
    bare = checkpoint.new_checkpoint(head.chain_id, 9, tree_root(built, 9), stamped=False)
    note = signed(bare)
    assert prove(built.lines(), **with_checkpoint(note)).proven
    _, errors = findings(window(built.lines(), 20, 25, **with_checkpoint(note)))
    assert [seq for seq, _ in errors] == [8]
    assert "no checkpoint issued after it ends the slice" in errors[0][1]


def test_a_checkpoint_issued_before_t2_does_not_close_the_window(
    built: Built, archive: Path
) -> None:
    note = signed(checkpoint_of(built, 8, at(15)))
    report = window(built.lines()[2:], 3, 20, archive, **with_checkpoint(note, proven_in=built))
    _, errors = findings(report)
    assert [seq for seq, _ in errors] == [8]
    assert "does not cover the end of the window" in errors[0][1]


def test_refuses_a_checkpoint_signed_by_an_unknown_key(built: Built) -> None:
    note = signed(checkpoint_of(built, 8, at(30)), Ed25519PrivateKey.generate())
    _, errors = findings(prove(built.lines(), **with_checkpoint(note)))
    assert len(errors) == 1 and errors[0][0] is None
    assert errors[0][1].startswith("checkpoint: checkpoint is signed by an unknown key")


def test_refuses_a_checkpoint_for_a_different_chain_id(built: Built, tmp_path: Path) -> None:
    other = build(tmp_path / "other", ordinary())
    note = signed(checkpoint_of(other, 8, at(30)))
    _, errors = findings(prove(built.lines(), **with_checkpoint(note)))
    chain_id = built.records()[0].chain_id
    assert len(errors) == 1 and errors[0][1].startswith("checkpoint is for chain ")
    assert f"the slice is chain {chain_id}" in errors[0][1]


def test_an_earlier_checkpoint_binds_a_prefix_of_the_slice(built: Built) -> None:
    note = signed(checkpoint_of(built, 4, at(30)))
    assert prove(built.lines(), key=built.key, **with_checkpoint(note)).proven
    # Without the key, what follows the checkpoint is authenticated by nothing.
    _, errors = findings(prove(built.lines(), **with_checkpoint(note)))
    assert errors == [
        (5, "records 5..8 come after the checkpoint and no --key-file or --host-keys was "
            "given: nothing "
            "authenticates them"),
    ]  # fmt: skip


# --- re-evaluating the decisions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "overridden"),
    [(None, "with an unknown version"), ("0.70.0", "over a refusal")],
)
def test_a_warn_override_names_only_what_the_pinned_map_tells_of_it(
    tmp_path: Path, archive: Path, version: str | None, overridden: str
) -> None:
    # Never "below its floor" for a version the map lets run: the override was of some
    # other refusal (an advisory of a map not held, a doubt), a violation all the same.
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", version, "warn_override"))]))
    violations, _ = findings(window(chain.lines()[7:], 8, None, archive, key=chain.key))
    stated = "" if version is None else f" {version!r}"
    assert violations == [
        (9, f"warn_override: 'aider'{stated} was allowed by the warn policy, {overridden}")
    ]


def test_a_decision_its_receipt_dates_inside_the_window_is_judged_whatever_its_record_says(
    tmp_path: Path, archive: Path
) -> None:
    # A clock stepped back: the record (seq 9) takes the head's later time, the receipt the
    # decision's own, inside the window of seq 3 to 5.
    late = spawn_receipt("aider", "0.50.0", "warn_override")
    late["ts"] = at(4)
    chain = build(tmp_path, ordinary([(SPAWN, late)]))
    violations, errors = findings(window(chain.lines(), 3, 5, archive, key=chain.key))
    assert not errors
    assert [seq for seq, _ in violations] == [9], violations


def test_a_warn_override_inside_the_window_is_a_violation(tmp_path: Path, archive: Path) -> None:
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", "0.50.0", "warn_override"))]))
    violations, errors = findings(window(chain.lines()[7:], 8, None, archive, key=chain.key))
    assert not errors
    reason = "warn_override: 'aider' '0.50.0' was allowed by the warn policy, below the floor"
    assert violations == [(9, reason + " 0.60.0 (BSA-0001) of the pinned map")]


def test_a_warn_override_outside_the_window_is_not_judged(tmp_path: Path, archive: Path) -> None:
    receipts = ordinary()
    receipts.insert(2, (SPAWN, spawn_receipt("aider", "0.50.0", "warn_override")))
    chain = build(tmp_path, [*receipts, (SPAWN, spawn_receipt("aider", "0.64.0", "permit"))])
    report = window(chain.lines()[3:], 4, 8, archive, key=chain.key)
    assert report.proven, findings(report)
    assert not window(chain.lines(), 0, 8, key=chain.key).proven


def test_detects_a_permit_forged_by_editing_the_verdict(built: Built) -> None:
    records = parsed(built.lines())
    assert records[2]["receipt"]["verdict"] == "refuse"
    records[2]["receipt"]["verdict"] = "permit"
    forged = relink(records)  # receipt id, digests and links recomputed, as without the key
    # With the key: the MAC gives it away.
    _, errors = findings(prove(forged, key=built.key))
    assert (2, "MAC does not verify (wrong key, or the record was altered)") in errors
    # Without the key, the slice itself is consistent: accepted as unauthenticated, only
    # re-evaluation can tell; not accepted so, it is not proven in the first place.
    violations, errors = findings(prove(forged, unauthenticated_ok=True))
    assert errors == []
    assert violations == [
        (2, "permit of aider 0.59.9, below the floor 0.60.0 (BSA-0001) of the pinned map")
    ]


def test_a_permit_below_the_floor_as_recorded_is_a_violation(tmp_path: Path) -> None:
    # Written with the key (a buggy or subverted gate): only re-evaluation catches it.
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", "0.59.0", "permit"))]))
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [
        (9, "permit of aider 0.59.0, below the floor 0.60.0 (BSA-0001) of the pinned map")
    ]


@pytest.mark.parametrize("version", [None, "", "not-a-version", "1.0 "])
def test_a_permit_of_an_unknown_version_is_a_violation(tmp_path: Path, version: Any) -> None:
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", version, "permit"))]))
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [
        (9, f"permit of 'aider' with no valid version ({version!r}); floor 0.60.0")
    ]


def test_an_untracked_record_of_an_adapter_with_a_floor_is_a_violation(tmp_path: Path) -> None:
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", "0.1.0", "untracked"))]))
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [(9, "untracked 'aider', but the pinned map has the floor 0.60.0 for it")]


def test_a_permit_of_an_adapter_without_a_floor_is_a_violation(tmp_path: Path) -> None:
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("goose", "1.0.0", "permit"))]))
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [(9, "permit of 'goose', which the pinned map has no floor for")]


def test_an_unknown_verdict_is_a_violation(tmp_path: Path) -> None:
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", "0.70.0", "allow"))]))
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [(9, "unknown verdict 'allow' for 'aider'")]


def test_a_spawn_receipt_pinning_a_map_that_never_existed(tmp_path: Path) -> None:
    never = "sha256:" + "7" * 64
    chain = build(tmp_path, ordinary([(SPAWN, spawn_receipt("aider", "0.70.0", "permit", never))]))
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [
        (9, f"permit of 'aider' pins floor map {never}, which no update receipt in the slice "
            "and no map archive holds"),
    ]  # fmt: skip


def test_a_map_first_carried_later_in_the_slice_judges_the_decisions_after_it(
    tmp_path: Path,
) -> None:
    # The slice starts while map v1 is in force (its update receipt is older than the
    # slice); v2 then v1 again are put in force. The permit before v1 comes back cannot be
    # judged (no archive); the same decision after it can, and meets v1's floor.
    chain = build(
        tmp_path,
        [
            (SPAWN, spawn_receipt("aider", "0.60.5", "permit", HASH_V1)),
            (UPDATE, update_receipt(MAP_V2, HASH_V1)),
            (UPDATE, update_receipt(MAP_V1, HASH_V2)),
            (SPAWN, spawn_receipt("aider", "0.60.5", "permit", HASH_V1)),
        ],
    )
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [
        (0, f"permit of 'aider' pins floor map {HASH_V1}, which no update receipt in the "
            "slice and no map archive holds"),
    ]  # fmt: skip


def test_the_floor_is_the_pinned_maps_not_the_newest(tmp_path: Path) -> None:
    # 0.60.5 met the floor of map v1, which its receipt pins; map v2 raised the floor later.
    chain = build(
        tmp_path,
        [
            (UPDATE, update_receipt(MAP_V1)),
            (SPAWN, spawn_receipt("aider", "0.60.5", "permit", HASH_V1)),
            (UPDATE, update_receipt(MAP_V2, HASH_V1)),
            (SPAWN, spawn_receipt("aider", "0.60.5", "permit", HASH_V2, floor="0.61.0")),
        ],
    )
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [
        (3, "permit of aider 0.60.5, below the floor 0.61.0 (BSA-0001) of the pinned map")
    ]


def test_a_map_outside_the_slice_resolves_from_an_archive(tmp_path: Path) -> None:
    chain = build(tmp_path / "chain", [(SPAWN, spawn_receipt("aider", "0.60.0", "permit"))])
    archive = tmp_path / "maps"
    archive.mkdir()
    assert not prove(chain.lines(), key=chain.key, map_dirs=[archive]).proven
    (archive / f"{HASH_V1.replace(':', '-')}.json").write_bytes(canonical_bytes(MAP_V1))
    report = prove(chain.lines(), key=chain.key, map_dirs=[archive])
    assert report.proven, findings(report)


def test_refuses_an_archived_map_that_does_not_hash_to_its_name(tmp_path: Path) -> None:
    chain = build(tmp_path / "chain", [(SPAWN, spawn_receipt("aider", "0.50.0", "permit"))])
    archive = tmp_path / "maps"
    archive.mkdir()
    lax = {"aider": {**MAP_V1["aider"], "min_safe_version": "0.1.0"}}
    target = archive / f"{HASH_V1.replace(':', '-')}.json"
    target.write_bytes(canonical_bytes(lax))  # a laxer map under the real map's name
    violations, _ = findings(prove(chain.lines(), key=chain.key, map_dirs=[archive]))
    assert len(violations) == 1
    assert f"({target} does not hash to its name)" in violations[0][1]


def test_an_update_receipt_whose_map_does_not_match_its_hash_teaches_nothing(
    tmp_path: Path,
) -> None:
    lying = update_receipt(MAP_V1)
    lying["new_floor_map"] = {"aider": {**MAP_V1["aider"], "min_safe_version": "0.1.0"}}
    # Sealed with the key as a key holder could (the chain itself refuses to append it).
    key = b"k" * 32
    receipts = [lying, spawn_receipt("aider", "0.50.0", "permit")]
    write_slice(tmp_path / "slice.jsonl", 2, key, receipts.__getitem__)
    report = prove((tmp_path / "slice.jsonl").read_text().splitlines(), key=key)
    violations, errors = findings(report)
    assert [seq for seq, _ in violations] == [1]
    assert "which no update receipt in the slice" in violations[0][1]
    carried = entries_hash(lying["new_floor_map"])
    assert errors == [
        (0, f"line 1: update receipt carries a map hashing to {carried}, "
            f"not its new_floor_map_hash {HASH_V1}")
    ]  # fmt: skip


# --- the canary ---------------------------------------------------------------------------------


def test_detects_a_canary_certification_below_the_floor(tmp_path: Path) -> None:
    chain = build(
        tmp_path,
        [
            (UPDATE, update_receipt(MAP_V1)),
            (CANARY, canary_receipt("aider", "0.61.0", "certify")),
            (CANARY, canary_receipt("aider", "0.59.0", "refuse")),
            (CANARY, canary_receipt("aider", "0.62.0", "certify")),
            (CANARY, canary_receipt("aider", "0.58.0", "certify")),  # last-green onto 0.58.0
        ],
    )
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [
        (4, "canary certified aider 0.58.0, below the floor 0.60.0 of the pinned map "
            "(last-green must not advance onto it)"),
    ]  # fmt: skip


def test_detects_a_canary_certification_without_a_pass(tmp_path: Path) -> None:
    chain = build(
        tmp_path,
        [
            (UPDATE, update_receipt(MAP_V1)),
            (CANARY, canary_receipt("aider", "0.61.0", "certify", result="fail")),
        ],
    )
    violations, _ = findings(prove(chain.lines(), key=chain.key))
    assert violations == [(1, "canary certified 'aider' '0.61.0' without a pass")]


@pytest.mark.parametrize("adapter", [["aider"], "AIDER", "aider ", "nonexistent"])
def test_detects_a_canary_certification_of_a_name_canary_record_refuses(
    tmp_path: Path, adapter: object
) -> None:
    # canary record refuses a name that is not a map name, or not in the map in force: a
    # certification naming one (sealed with the key, as any key holder could) is no
    # honest record, whatever its version.
    certify = canary_receipt("aider", "0.10.0", "certify")
    certify["adapter"] = adapter
    key = b"k" * 32
    receipts = [update_receipt(MAP_V1), certify]
    write_slice(tmp_path / "slice.jsonl", 2, key, receipts.__getitem__)
    violations, _ = findings(prove((tmp_path / "slice.jsonl").read_text().splitlines(), key=key))
    assert [seq for seq, _ in violations] == [1], violations
    assert "canary certified" in violations[0][1]


def test_since_after_until_is_refused(built: Built) -> None:
    from floorguard.errors import VerificationError

    with pytest.raises(VerificationError, match="later than"):
        window(built.lines(), 5, 4)


# --- what the proof says ------------------------------------------------------------------------


def test_the_proven_text_names_the_window_end_and_what_authenticates_the_records(
    built: Built,
) -> None:
    from floorguard._proofs.window_report import authenticated_by, render_text

    text = render_text(prove(built.lines(), key=built.key))
    assert f"window genesis (seq 0) .. end of slice (seq 8, {at(8)}):" in text
    assert "authenticated: every record's MAC verified with the chain key" in text
    loose = render_text(prove(built.lines(), unauthenticated_ok=True))
    assert "NOT authenticated: no --key-file, --host-keys or checkpoint" in loose
    note = signed(checkpoint_of(built, 8, at(30)))
    text = render_text(prove(built.lines(), **with_checkpoint(note)))
    assert "authenticated: records up to seq 8 by the signed checkpoint" in text
    assert [authenticated_by(prove(built.lines(), **options)) for options in (
        {"key": built.key}, with_checkpoint(note), {"unauthenticated_ok": True})
    ] == ["mac", "checkpoint", None]  # fmt: skip


def test_refuses_a_slice_that_nothing_authenticates(built: Built) -> None:
    # Digests and links are public arithmetic: anyone can write a whole consistent slice.
    report = prove(built.lines())
    assert not report.proven
    assert [(e.seq, e.reason) for e in report.integrity_errors] == [(None, UNAUTHENTICATED)]
    assert report.violations == ()
    assert prove(built.lines(), unauthenticated_ok=True).proven


# --- spawn receipts that name what the host asked for -------------------------------------------


def requested(receipt: dict[str, Any], name: str) -> dict[str, Any]:
    """The receipt as the runtime writes it once it records the name asked for."""
    return {**receipt, "requested": name}


def test_a_violation_names_the_adapter_and_the_name_it_was_requested_as(tmp_path: Path) -> None:
    chain = build(
        tmp_path,
        ordinary(
            [
                (SPAWN, requested(spawn_receipt("aider", "0.50.0", "permit"), "codey")),
                (SPAWN, requested(spawn_receipt("aider", "0.51.0", "warn_override"), "codey")),
                (SPAWN, requested(spawn_receipt("aider", "0.1.0", "untracked"), "/opt/x/codey")),
                (SPAWN, requested(spawn_receipt("aider", "0.52.0", "permit"), "aider")),
            ]
        ),
    )
    violations, errors = findings(prove(chain.lines(), key=chain.key))
    assert errors == []
    assert violations == [
        (9, "permit of aider (requested as 'codey') 0.50.0, below the floor 0.60.0 (BSA-0001) "
            "of the pinned map"),
        (10, "warn_override: 'aider' (requested as 'codey') '0.51.0' was allowed by the warn "
             "policy, below the floor 0.60.0 (BSA-0001) of the pinned map"),
        # The gate refuses a name outside the pattern (a path) before judging anything.
        (11, "the spawn record says it was requested as '/opt/x/codey', not a valid adapter "
             "name ([a-z0-9][a-z0-9._-]{0,63}): the gate refuses such a name, yet the record "
             "says 'untracked'"),
        (12, "permit of aider 0.52.0, below the floor 0.60.0 (BSA-0001) of the pinned map"),
    ]  # fmt: skip


@pytest.mark.parametrize("value", ["codey", "aider"])
def test_extra_receipt_fields_do_not_change_the_verdict(tmp_path: Path, value: Any) -> None:
    # Records carrying fields this verifier does not know re-evaluate as before: ids and
    # digests are recomputed over the whole receipt, and the floor is the adapter's. (A
    # requested name the gate would refuse fails the record: test_window_proof_adapter_names.)
    extra = {"requested": value, "identified_by": {"kind": "npm", "package": "x"}}
    chain = build(
        tmp_path,
        ordinary([(SPAWN, {**spawn_receipt("aider", "0.64.0", "permit"), **extra})]),
    )
    report = prove(chain.lines(), key=chain.key)
    assert report.proven, findings(report)
    assert report.evaluated == 9


# --- a window that starts where the last audit ended (--previous-checkpoint) ------------------


def _previous_and_link(built: Built) -> dict[str, Any]:
    previous = checkpoint_of(built, 4, at(5))
    current = checkpoint_of(built, 8, at(30))
    link = tlog.prove_consistency(built.chain, previous, current)
    return {"checkpoint": current, "previous": previous, "consistency": link}


def test_a_window_from_the_previous_checkpoint_is_proven_with_the_consistency_proof(
    built: Built, archive: Path
) -> None:
    # The last audit ended at the size-5 checkpoint; this one holds records 4..8 only.
    options = _previous_and_link(built)
    report = window(built.lines()[4:], 5, 25, archive, **options)
    assert report.proven, findings(report)


def test_records_rewritten_after_the_previous_checkpoint_are_caught_by_the_consistency_proof(
    built: Built, archive: Path
) -> None:
    records = parsed(built.lines())
    records[6]["receipt"]["version"] = "0.70.0"
    forged = relink(records)
    _, errors = findings(window(forged[4:], 5, 25, archive, **_previous_and_link(built)))
    assert any(
        seq == 8 and "are not the records the consistency proof says were appended" in reason
        for seq, reason in errors
    ), errors


def test_a_slice_that_skips_records_after_the_previous_checkpoint_is_refused(
    built: Built, archive: Path
) -> None:
    _, errors = findings(window(built.lines()[6:], 7, 25, archive, **_previous_and_link(built)))
    assert (8, "the slice starts at seq 6, after the previous checkpoint's last record 4: "
               "records from 5 on must be in it") in errors  # fmt: skip


def test_a_consistency_proof_between_other_checkpoints_is_refused(
    built: Built, archive: Path
) -> None:
    options = _previous_and_link(built)
    other = tlog.prove_consistency(
        built.chain, checkpoint_of(built, 3, at(4)), options["checkpoint"]
    )
    _, errors = findings(
        window(built.lines()[4:], 5, 25, archive, **{**options, "consistency": other})
    )
    assert any("previous checkpoint: the proof is from size 4 to 9" in r for _, r in errors), errors
