"""The slice verifier on exported lines: every tampering is reported, at its seq."""

from __future__ import annotations

import io
import json
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.chain_support import export_lines, filled_chain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorguard._base._canonical import ZERO_DIGEST
from floorguard._chain.chain import ChainRecord, canonical_json
from floorguard._proofs.slice_verify import (
    MAX_LINE_BYTES,
    SliceVerifier,
    iter_slice_lines,
    render_text,
    report_document,
    verify_slice,
)


@pytest.fixture(scope="module")
def chain_lines(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], bytes]:
    folder = tmp_path_factory.mktemp("chain")
    chain = filled_chain(folder, 8)
    key = bytes.fromhex((folder / "chain.key").read_text().strip())
    return export_lines(chain), key


@pytest.fixture(scope="module")
def other_chain_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return export_lines(filled_chain(tmp_path_factory.mktemp("other"), 8))


GAP = "(records missing, duplicated or out of order)"


def _edit(line: str, **changes: Any) -> str:
    record = json.loads(line)
    record.update(changes)
    return canonical_json(record) + "\n"


def _errors(lines: list[str], key: bytes | None = None) -> list[tuple[int | None, str]]:
    return [(e.seq, e.reason) for e in verify_slice(lines, key=key).integrity_errors]


def test_an_untouched_slice_is_intact(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    report = verify_slice(lines, key=key)
    assert report.intact and report.macs_checked
    assert (report.records, report.first_seq, report.last_seq) == (8, 0, 7)
    assert report.first_ts == json.loads(lines[0])["ts"]
    assert report.chain_id == json.loads(lines[0])["chain_id"]


def test_a_slice_from_the_middle_is_intact(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    assert verify_slice(lines[3:6], key=key).intact


def test_accepts_lines_as_bytes_and_any_json_spelling(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    spelled = [json.dumps(json.loads(line), indent=None).encode() + b"\r\n" for line in lines]
    assert verify_slice(spelled, key=key).intact


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("receipt", "content", "receipt_id is not the content address"),
        ("event", "adapter.version_posture", "does not match event"),
        ("event", "adapter.shell_command", "unknown event"),
        ("ts", "2026-01-01T00:00:03.500000Z", "MAC does not verify"),
        ("ts", "2026-01-01T00:00:03.500000+00:00", "UTC timestamp with Z"),
        ("ts", "2025-01-01T00:00:00.000000Z", "earlier than the previous record"),
        ("chain_id", "f" * 32, "differs from the slice's chain"),
        ("chain_id", "short", "32 lowercase hex"),
        ("mac", "0" * 64, "MAC does not verify"),
        ("mac", "XYZ", "64 lowercase hex"),
        ("receipt_id", "sha256:" + "1" * 64, "receipt_id is not the content address"),
    ],
)
def test_detects_a_changed_field_at_its_seq(
    chain_lines: tuple[list[str], bytes], field: str, value: Any, reason: str
) -> None:
    lines, key = chain_lines
    if field == "receipt":
        value = {**json.loads(lines[4])["receipt"], "adapter": "aider-fork"}
    tampered = [*lines[:4], _edit(lines[4], **{field: value}), *lines[5:]]
    errors = _errors(tampered, key)
    assert any(seq == 4 and reason in why for seq, why in errors), errors
    # Nothing is reported before the tampered line.
    assert all(seq is not None and seq >= 4 for seq, _ in errors)


def test_without_a_key_a_changed_field_shows_at_the_next_link(
    chain_lines: tuple[list[str], bytes],
) -> None:
    lines, _ = chain_lines
    tampered = [*lines[:4], _edit(lines[4], ts="2026-01-01T00:00:04.500000Z"), *lines[5:]]
    assert _errors(tampered) == [
        (5, "prev does not match the digest of record 4 (that record or this one was altered)")
    ]


def test_detects_a_deleted_line(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    errors = _errors([*lines[:3], *lines[4:]], key)
    assert errors == [
        (4, "expected seq 3 after seq 2 (records missing, duplicated or out of order)")
    ]


def test_detects_swapped_lines(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    swapped = [*lines[:3], lines[4], lines[3], *lines[5:]]
    errors = _errors(swapped, key)
    assert errors[0] == (
        4,
        "expected seq 3 after seq 2 (records missing, duplicated or out of order)",
    )
    assert any(seq == 3 and "expected seq 5" in why for seq, why in errors)
    # Moving seq 3 after seq 4 also moves time backwards.
    assert any(seq == 3 and "earlier than the previous record" in why for seq, why in errors)


def test_detects_a_replayed_line_and_resyncs_after_it(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    errors = _errors([*lines[:5], lines[4], *lines[5:]], key)
    assert errors == [
        (4, "expected seq 5 after seq 4 (records missing, duplicated or out of order)")
    ]


def test_detects_a_line_from_another_chain(
    chain_lines: tuple[list[str], bytes], other_chain_lines: list[str]
) -> None:
    lines, key = chain_lines
    errors = _errors([*lines[:2], other_chain_lines[2], *lines[3:]], key)
    at_2 = [why for seq, why in errors if seq == 2]
    assert any("differs from the slice's chain" in why for why in at_2)
    assert any("MAC does not verify" in why for why in at_2)
    assert any("prev does not match" in why for why in at_2)
    assert (
        3,
        "prev does not match the digest of record 2 (that record or this one was altered)",
    ) in errors


def test_a_wrong_key_is_reported_on_every_record(chain_lines: tuple[list[str], bytes]) -> None:
    lines, _ = chain_lines
    errors = _errors(lines, b"\x02" * 32)
    assert [seq for seq, _ in errors] == list(range(8))


def test_genesis_prev_must_be_the_zero_digest(chain_lines: tuple[list[str], bytes]) -> None:
    lines, _ = chain_lines
    forged = _edit(lines[0], prev="sha256:" + "1" * 64)
    assert (0, "genesis record's prev is not the zero digest") in _errors([forged, *lines[1:]])


def test_a_record_that_claims_to_start_a_chain_mid_slice_is_caught(
    chain_lines: tuple[list[str], bytes],
) -> None:
    lines, _ = chain_lines
    forged = _edit(lines[3], prev=ZERO_DIGEST)
    errors = _errors([forged, *lines[4:]])
    assert (3, "prev is the zero digest but this is not the genesis record") in errors


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("not json\n", "not valid JSON"),
        ("[1, 2]\n", "not a JSON object"),
        ("\n", "blank line"),
        ('{"seq": NaN}\n', "NaN is not JSON"),
    ],
)
def test_reports_lines_that_are_not_records_and_resyncs(
    chain_lines: tuple[list[str], bytes], line: str, reason: str
) -> None:
    lines, key = chain_lines
    errors = _errors([*lines[:3], line, *lines[3:]], key)
    assert len(errors) == 1
    assert errors[0][0] is None and errors[0][1].startswith("line 4: ") and reason in errors[0][1]


def test_reports_missing_and_unexpected_fields(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    record = json.loads(lines[2])
    del record["mac"]
    record["note"] = "hi"
    errors = _errors([*lines[:2], json.dumps(record), *lines[3:]], key)
    assert errors[0] == (2, "line 3: missing field(s) mac; unexpected field(s) note")


@pytest.mark.parametrize(
    ("field", "value"),
    [("seq", "3"), ("seq", True), ("seq", -1), ("receipt", "{}"), ("prev", None), ("ts", 5)],
)
def test_reports_fields_of_the_wrong_type(
    chain_lines: tuple[list[str], bytes], field: str, value: Any
) -> None:
    lines, key = chain_lines
    record = json.loads(lines[3])
    record[field] = value
    errors = _errors([*lines[:3], json.dumps(record), *lines[4:]], key)
    assert len(errors) == 1, errors


@pytest.mark.parametrize("with_key", [True, False])
def test_refuses_a_line_with_a_duplicate_key(
    chain_lines: tuple[list[str], bytes], with_key: bool
) -> None:
    lines, the_key = chain_lines
    key = the_key if with_key else None
    # A second "event" key: parsers that keep the first would see another record.
    forged = lines[3].rstrip("\n")[:-1] + ',"event":"adapter.canary_receipt"}\n'
    forged = forged.replace(
        '"event":"adapter.canary_receipt"', '"event":"adapter.version_posture"', 1
    )
    errors = _errors([*lines[:3], forged, *lines[4:]], key)
    assert (3, "the line repeats a key") in errors


def test_refuses_a_line_that_is_not_utf8(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    errors = _errors([*lines[:3], b"\xff\xfe{}\n", *lines[3:]], key)  # type: ignore[list-item]
    assert errors == [(None, "line 4: not UTF-8")]


def test_refuses_an_oversized_line() -> None:
    report = verify_slice([b"x" * (MAX_LINE_BYTES + 2)])
    assert report.integrity_errors[0].reason.startswith("line 1: longer than")


def test_an_oversized_line_in_a_file_is_skipped_and_reported(
    chain_lines: tuple[list[str], bytes],
) -> None:
    lines, key = chain_lines
    stream = io.BytesIO(b"{" + b" " * (MAX_LINE_BYTES + 10) + b"}\n" + lines[0].encode())
    report = verify_slice(iter_slice_lines(stream), key=key)
    assert [e.reason for e in report.integrity_errors] == [
        f"line 1: longer than {MAX_LINE_BYTES} bytes"
    ]
    assert report.records == 1


def test_an_empty_slice_proves_nothing() -> None:
    report = verify_slice([])
    assert not report.intact
    assert report.integrity_errors[0].reason == "the slice holds no records"


def test_floats_and_unicode_keys_take_the_reference_path(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 0)
    chain.append(
        "adapter.canary_receipt",
        {
            "kind": "adapter.canary_receipt",
            "schema_version": 1,
            "ts": "2026-01-01T00:00:00Z",
            "score": 0.1,
            "\U0001f600": 1,
            "\ufb01": "\u2028",
            "big": 9007199254740991,
        },
    )
    key = bytes.fromhex((tmp_path / "chain.key").read_text().strip())
    lines = export_lines(chain)
    assert verify_slice(lines, key=key).intact
    escaped = [json.dumps(json.loads(line)) for line in lines]  # ASCII with \\u escapes
    assert verify_slice(escaped, key=key).intact


def test_reports_every_error_but_lists_at_most_the_cap() -> None:
    verifier = SliceVerifier(max_errors=3)
    verifier.feed_all(["junk\n"] * 10)
    report = verifier.finish()
    assert len(report.integrity_errors) == 3 and report.errors_not_listed == 7
    assert "and 7 more" in render_text(report)


def test_on_record_sees_every_record_with_its_own_verdict(
    chain_lines: tuple[list[str], bytes],
) -> None:
    lines, key = chain_lines
    seen: list[tuple[int, bool]] = []

    def observe(record: ChainRecord, intact: bool) -> None:
        seen.append((record.seq, intact))

    tampered = [*lines[:2], _edit(lines[2], mac="0" * 64), *lines[3:5]]
    verify_slice(tampered, key=key, on_record=observe)
    assert seen == [(0, True), (1, True), (2, False), (3, True), (4, True)]


def test_memory_stays_flat_as_the_slice_grows(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines

    def replayed(count: int) -> Iterator[str]:
        # The same valid records over and over: each is checked, nothing is kept.
        for index in range(count):
            yield lines[index % len(lines)]

    def peak(count: int) -> int:
        tracemalloc.start()
        verify_slice(replayed(count), key=key)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(200), peak(4000)
    # 20x the lines, the errors capped: the peak must not grow with the slice.
    assert large < small * 3 + 200_000


def test_text_and_json_renderings(chain_lines: tuple[list[str], bytes]) -> None:
    lines, key = chain_lines
    good = verify_slice(lines, key=key)
    assert render_text(good).splitlines()[0] == "PROVEN"
    bad = verify_slice([*lines[:3], *lines[4:]], key=key)
    text = render_text(bad).splitlines()
    assert text[0] == "NOT PROVEN"
    assert (
        text[1] == "seq 4: expected seq 3 after seq 2 (records missing, duplicated or out of order)"
    )
    assert report_document(bad) == {
        "proven": False,
        "since": None,
        "until": None,
        "records": 7,
        "violations": [],
        "integrity_errors": [
            {
                "seq": 4,
                "reason": "expected seq 3 after seq 2 " + GAP,
            }
        ],
    }


NO_SURROGATES = st.characters(codec="utf-8")  # every code point but lone surrogates
extra_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    # Integral floats of 2**53 and more are refused by append (see chain/test_store.py).
    | st.floats(min_value=-1e15, max_value=1e15)
    | st.text(alphabet=NO_SURROGATES),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.text(alphabet=NO_SURROGATES, max_size=5),
            children,
            max_size=3,
        )
    ),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["a", "é", "\U0001f600", "\ufb01", "z"]), extra_values, max_size=4
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_appended_receipts_export_and_verify(extras: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        chain = filled_chain(Path(folder), 0)
        for extra in extras:
            chain.append(
                "adapter.canary_receipt",
                {
                    **extra,
                    "kind": "adapter.canary_receipt",
                    "schema_version": 1,
                    "ts": "2026-01-01T00:00:00Z",
                },
            )
        key = bytes.fromhex((Path(folder) / "chain.key").read_text().strip())
        lines = export_lines(chain)
        chain.close()
    assert verify_slice(lines, key=key).intact
    assert verify_slice(lines).intact
    respelled = [json.dumps(json.loads(line), indent=1).replace("\n", " ") for line in lines]
    assert verify_slice(respelled, key=key).intact
