"""The slice verifier's two paths held to one verdict: the canonical-line shortcut and the
full path (parse, re-serialise to RFC 8785, authenticate that)."""

from __future__ import annotations

from collections.abc import Sequence

from floorguard._chain.chain import ChainRecord
from floorguard._proofs.slice_verify import RecordValues, SliceReport, SliceVerifier


def both_paths(lines: Sequence[str | bytes], key: bytes | None) -> SliceReport:
    """Verify ``lines`` with the shortcut and without it; the two must agree on the report,
    on every record handed on (as a ChainRecord and as values) and on every Merkle leaf
    input."""
    seen: dict[bool, tuple[list[tuple[ChainRecord, bool]], list[tuple[int, bytes]]]] = {}
    reports = {}
    for shortcut in (True, False):
        records: list[tuple[ChainRecord, bool]] = []
        values: list[tuple[RecordValues, bool]] = []
        leaves: list[tuple[int, bytes]] = []
        verifier = SliceVerifier(
            key=key,
            on_record=lambda record, intact, out=records: out.append((record, intact)),
            on_values=lambda fields, intact, out=values: out.append((fields, intact)),
            on_leaf=lambda seq, leaf, out=leaves: out.append((seq, leaf)),
            canonical_shortcut=shortcut,
        )
        reports[shortcut] = verifier.feed_all(lines).finish()
        assert [(ChainRecord(*fields), intact) for fields, intact in values] == records
        seen[shortcut] = (records, leaves)
    assert reports[True] == reports[False]
    assert seen[True] == seen[False]
    return reports[True]
