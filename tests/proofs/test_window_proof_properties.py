"""Properties of the window proof on random valid chains: they verify, and any single-byte
mutation of a record line (with the key) or of a checkpoint (with its public key) is caught."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.proof_support import (
    CANARY,
    MAP_V1,
    SPAWN,
    UPDATE,
    Built,
    build,
    canary_receipt,
    spawn_receipt,
    tree_root,
    update_receipt,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorguard._proofs import checkpoint
from floorguard._proofs.window_report import load_checkpoint, prove

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

SIGNER = Ed25519PrivateKey.generate()
PATCH = st.integers(min_value=0, max_value=99)


@st.composite
def decisions(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """One honest record: what the gate or the canary would have written."""
    patch = draw(PATCH)
    kind = draw(st.sampled_from(["permit", "refuse", "untracked", "canary"]))
    if kind == "permit":
        return SPAWN, spawn_receipt("aider", f"0.{60 + patch % 5}.{patch}", "permit")
    if kind == "refuse":
        version = draw(st.sampled_from([f"0.{patch % 60}.0", None, "garbage"]))
        return SPAWN, spawn_receipt("aider", version, "refuse")
    if kind == "untracked":
        return SPAWN, spawn_receipt("goose", f"1.{patch}", "untracked", floor=None)
    verdict = draw(st.sampled_from(["certify", "record", "refuse"]))
    version = f"0.{60 + patch}.0" if verdict == "certify" else f"0.{patch}.0"
    return CANARY, canary_receipt("aider", version, verdict)


CHAINS = st.lists(decisions(), min_size=1, max_size=8)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make(receipts: list[tuple[str, dict[str, Any]]], folder: str) -> Built:
    return build(Path(folder) / "chain", [(UPDATE, update_receipt(MAP_V1)), *receipts])


def head_checkpoint(built: Built) -> bytes:
    head = list(built.chain.records())[-1]
    cp = checkpoint.new_checkpoint(head.chain_id, head.seq + 1, tree_root(built, head.seq + 1))
    return checkpoint.sign(cp, SIGNER).encode()


@SETTINGS
@given(receipts=CHAINS)
def test_random_valid_chains_are_proven(receipts: list[tuple[str, dict[str, Any]]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        built = make(receipts, folder)
        lines = built.lines()
        report = prove(lines, key=built.key)
        assert report.proven, (report.violations, report.integrity_errors)
        assert report.evaluated == sum(event == SPAWN for event, _ in receipts)
        found, error = load_checkpoint(head_checkpoint(built), SIGNER.public_key())
        assert prove(lines, checkpoint=found, checkpoint_error=error).proven


@SETTINGS
@given(
    receipts=CHAINS,
    which=st.integers(min_value=0),
    position=st.integers(min_value=0),
    value=st.integers(min_value=0, max_value=255),
)
def test_any_single_byte_mutation_of_a_record_is_detected_with_the_key(
    receipts: list[tuple[str, dict[str, Any]]], which: int, position: int, value: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        built = make(receipts, folder)
        lines = [line.encode() for line in built.lines()]
        index = which % len(lines)
        data = bytearray(lines[index][:-1])  # the record, not its newline
        spot = position % len(data)
        if data[spot] == value:
            return
        data[spot] = value
        lines[index] = bytes(data) + b"\n"
        assert not prove(lines, key=built.key).proven


@SETTINGS
@given(
    receipts=CHAINS,
    which=st.integers(min_value=0),
    position=st.integers(min_value=0),
    value=st.integers(min_value=0, max_value=255),
)
def test_any_single_byte_mutation_of_a_record_body_is_detected_by_a_checkpoint(
    receipts: list[tuple[str, dict[str, Any]]], which: int, position: int, value: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        built = make(receipts, folder)
        note = head_checkpoint(built)
        lines = [line.encode() for line in built.lines()]
        index = which % len(lines)
        record = lines[index][:-1]
        # Without the key the mac field means nothing: mutate anything but its value.
        mac = json.loads(record)["mac"].encode()
        start = record.index(b'"mac":"' + mac) + len(b'"mac":"')
        spots = [i for i in range(len(record)) if not start <= i < start + len(mac)]
        spot = spots[position % len(spots)]
        if record[spot] == value:
            return
        data = bytearray(record)
        data[spot] = value
        lines[index] = bytes(data) + b"\n"
        found, error = load_checkpoint(note, SIGNER.public_key())
        assert not prove(lines, checkpoint=found, checkpoint_error=error).proven


@SETTINGS
@given(
    receipts=CHAINS,
    position=st.integers(min_value=0),
    value=st.integers(min_value=0, max_value=255),
)
def test_any_single_byte_mutation_of_a_checkpoint_is_detected(
    receipts: list[tuple[str, dict[str, Any]]], position: int, value: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        built = make(receipts, folder)
        note = bytearray(head_checkpoint(built))
        spot = position % len(note)
        if note[spot] == value:
            return
        note[spot] = value
        found, error = load_checkpoint(bytes(note), SIGNER.public_key())
        assert found is None and error is not None
        assert not prove(built.lines(), checkpoint=found, checkpoint_error=error).proven
