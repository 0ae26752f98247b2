"""The verifier's shortcut for canonical export lines cannot be steered.

A line that is exactly the canonical export line is checked from slices of itself (the
``mac`` member found at its place, the body and the receipt cut from the line); any other
line takes the full path (parsed, re-serialised to RFC 8785, authenticated over that). The
attacks below come from a holder of the chain key, who can MAC any bytes: a line whose
body is not RFC 8785 must be refused, as the full path refuses it, and never read two
ways. Every case is checked on both paths, which must agree report for report, record for
record and leaf for leaf.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

import pytest
from helpers import slice_paths
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorguard._base._canonical import ZERO_DIGEST, compact_sorted_text
from floorguard._base._time import is_chain_ts
from floorguard._chain.chain import canonical_json, line_text
from floorguard._proofs import slice_verify
from floorguard._proofs.slice_verify import SliceReport, SliceVerifier

KEY = bytes(range(32))
CHAIN_ID = "0123456789abcdef" * 2
CANARY = "adapter.canary_receipt"
TS = "2026-01-01T00:00:00.000000Z"


def _receipt(**extra: Any) -> dict[str, Any]:
    return {"kind": CANARY, "schema_version": 1, "ts": TS, "adapter": "aider", **extra}


def _mac_member(mac: str) -> str:
    return f',"mac":"{mac}"'


def sealed(
    receipt_text: str,
    *,
    seq: int = 0,
    prev: str = ZERO_DIGEST,
    ts: str = TS,
    event: str = CANARY,
    receipt_id: str | None = None,
) -> tuple[str, str]:
    """A line as a key holder writes it who MACs exactly the bytes written (canonical or
    not), and the digest of those bytes: (line, digest)."""
    if receipt_id is None:
        receipt_id = "sha256:" + hashlib.sha256(receipt_text.encode()).hexdigest()
    body = (
        f'{{"chain_id":"{CHAIN_ID}","event":"{event}","prev":"{prev}",'
        f'"receipt":{receipt_text},"receipt_id":"{receipt_id}","seq":{seq},"ts":"{ts}"}}'
    )
    mac = hmac.digest(KEY, body.encode(), "sha256").hex()
    at = body.index(',"prev":')
    line = body[:at] + _mac_member(mac) + body[at:]
    return line, "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def genuine(receipt: dict[str, Any], **fields: Any) -> tuple[str, str]:
    """A record as the chain writes it: canonical, MACed over its canonical body."""
    return sealed(canonical_json(receipt), **fields)


def both_paths(lines: Sequence[str | bytes], key: bytes | None = KEY) -> SliceReport:
    """Both paths of the verifier, held to one verdict (helpers.slice_paths)."""
    return slice_paths.both_paths(lines, key)


def reasons(report: SliceReport) -> list[str]:
    return [error.reason for error in report.integrity_errors]


CANONICAL = canonical_json(_receipt(verdict="certify"))


def test_a_canonical_line_never_takes_the_full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcut is taken (else it would be dead code that the tests do not reach)."""
    verifier = SliceVerifier(key=KEY)

    def full_path(*_: object) -> None:
        raise AssertionError("a canonical line took the full path")

    monkeypatch.setattr(verifier, "_check", full_path)
    first, digest = genuine(_receipt(note="caf\u00e9 \u2028 \u4e2d", n=-15))
    second, _ = genuine(_receipt(nested={"b": [1, None, True], "a": "\x01"}), seq=1, prev=digest)
    report = verifier.feed_all([first + "\n", second.encode() + b"\n"]).finish()
    assert report.intact and report.mac_records == 2


def test_a_genuine_line_reads_the_same_on_both_paths() -> None:
    line, _ = genuine(_receipt())
    report = both_paths([line, line.encode() + b"\n"])
    # The second is seq 0 again: a gap, but the same gap on both paths.
    assert reasons(report) == [
        "expected seq 1 after seq 0 (records missing, duplicated or out of order)"
    ]


@pytest.mark.parametrize(
    ("attack", "receipt_text"),
    [
        ("a repeated key", CANONICAL[:-1] + ',"verdict":"refuse"}'),
        ("a repeated key, the last one first", '{"adapter":"x",' + CANONICAL[1:]),
        ("whitespace", CANONICAL.replace(',"kind":', ', "kind":')),
        (
            "keys out of order",
            '{"kind":"' + CANARY + '",' + CANONICAL[1:].replace(f'"kind":"{CANARY}",', ""),
        ),
        ("a float for an integer", CANONICAL.replace('"schema_version":1', '"schema_version":1.0')),
        ("an exponent", CANONICAL[:-1] + ',"z":1e2}'),
        ("minus zero", CANONICAL[:-1] + ',"z":-0}'),
        ("an integer beyond 2**53", CANONICAL[:-1] + ',"z":9007199254740993}'),
        ("an escaped letter", CANONICAL.replace('"aider"', '"\\u0061ider"')),
        ("an escaped solidus", CANONICAL[:-1] + ',"z":"a\\/b"}'),
        ("a long escape for a newline", CANONICAL[:-1] + ',"z":"\\u000a"}'),
        ("an upper-case escape", CANONICAL[:-1] + ',"z":"\\u001F"}'),
        ("an escaped astral character", CANONICAL[:-1] + ',"z":"\\ud83d\\ude00"}'),
        ("a key in UTF-16 order only", CANONICAL[:-1] + ',"\ufb01":1,"\U0001f600":2}'),
    ],
)
def test_a_key_holder_cannot_pass_a_receipt_that_is_not_rfc_8785(
    attack: str, receipt_text: str
) -> None:
    json.loads(receipt_text)  # it is JSON, just not canonical
    assert receipt_text != CANONICAL
    line, _ = sealed(receipt_text)
    report = both_paths([line])
    assert not report.intact, attack
    # The MAC covers the bytes written, which are not the canonical body: it cannot verify
    # (or the record cannot be canonicalised at all).
    assert any(
        "MAC does not verify" in why or "cannot be canonicalised" in why for why in reasons(report)
    ), reasons(report)


@pytest.mark.parametrize(
    "respell",
    [
        lambda text: text.replace('"kind":', ' "kind" : '),
        lambda text: json.dumps(json.loads(text)),  # key order kept, spaces added
        lambda text: json.dumps(json.loads(text), ensure_ascii=True, sort_keys=True),
        lambda text: text.replace('"aider"', '"\\u0061ider"'),
        lambda text: text + "\r",
    ],
)
def test_a_respelled_genuine_line_reads_as_the_full_path_reads_it(respell: Any) -> None:
    """Respelling a genuine record does not change what it states: the full path reads it
    from its canonical form (and so does the shortcut, by leaving it to the full path)."""
    line, _ = genuine(_receipt(note="caf\u00e9"))
    report = both_paths([respell(line)])
    assert report.intact, reasons(report)


def test_a_second_mac_member_inside_a_string_is_not_the_mac() -> None:
    decoy = _mac_member("f" * 64)
    line, digest = genuine(_receipt(note=decoy, nested={"mac": "0" * 64}))
    # In a string the quotes are escaped: the decoy is there, but not as JSON members.
    assert '\\"mac\\":\\"' + "f" * 64 in line and line.count('"mac":') == 2
    second, _ = genuine(_receipt(note=decoy + '","prev":"' + ZERO_DIGEST), seq=1, prev=digest)
    report = both_paths([line, second])
    assert report.intact and report.mac_records == 2


def test_a_second_mac_member_at_the_top_level_is_refused() -> None:
    line, _ = genuine(_receipt())
    mac = json.loads(line)["mac"]
    for doubled in (
        line.replace(_mac_member(mac), _mac_member("0" * 64) + _mac_member(mac)),
        line.replace(_mac_member(mac), _mac_member(mac) + _mac_member("0" * 64)),
        line[:-1] + _mac_member(mac) + "}",
    ):
        report = both_paths([doubled])
        assert "the line repeats a key" in reasons(report), doubled


def test_the_mac_in_the_wrong_place_is_found_by_the_full_path() -> None:
    """A genuine record with its members in another order is a respelling: intact on both
    paths, and its Merkle leaf is the canonical line, not the line as written."""
    line, _ = genuine(_receipt())
    record = json.loads(line)
    mac = record.pop("mac")
    moved = json.dumps({**record, "mac": mac}, separators=(",", ":"))
    assert moved != line
    leaves: list[bytes] = []
    report = (
        SliceVerifier(key=KEY, on_leaf=lambda _, leaf: leaves.append(leaf))
        .feed_all([moved])
        .finish()
    )
    assert report.intact and leaves == [line.encode()]
    assert both_paths([moved]).intact


def test_a_top_level_value_that_needs_an_escape_or_has_one_takes_the_full_path() -> None:
    line, _ = genuine(_receipt())
    escaped = line.replace(f'"event":"{CANARY}"', '"event":"adapter.canary\\u005freceipt"')
    assert both_paths([escaped]).intact  # a respelling of the genuine record
    forged, _ = sealed(CANONICAL, event="adapter.canary\\u005freceipt")
    assert "MAC does not verify (wrong key, or the record was altered)" in reasons(
        both_paths([forged])
    )


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-01-01T00:00:00Z",  # no fraction
        "2026-01-01T00:00:00.5Z",  # short fraction
        "2026-01-01T00:00:00.0000000Z",  # seven digits
        "2026-01-01T00:00:00.000000+00:00",  # an offset
        "2026-01-01T01:00:00.000000+01:00",
        "2026-01-01t00:00:00.000000z",  # lower case
        "2026-01-01 00:00:00.000000Z",  # a space
        "2026-02-30T00:00:00.000000Z",  # no such day
        "2025-02-29T00:00:00.000000Z",
        "0000-01-01T00:00:00.000000Z",
        "2026-01-01T24:00:00.000000Z",
        "2026-01-01T23:59:60.000000Z",  # a leap second: no such chain time
        "2026-13-01T00:00:00.000000Z",
        "\uff12026-01-01T00:00:00.000000Z",  # a full-width digit
        " 2026-01-01T00:00:00.000000Z",
    ],
)
def test_a_record_stamped_outside_the_chains_fixed_form_is_refused(stamp: str) -> None:
    """A key holder's record stamped in another width or with an offset would compare
    wrongly as text (and sort outside its window): it is refused, whatever it means."""
    assert not is_chain_ts(stamp)
    line, _ = genuine(_receipt(), ts=stamp)
    report = both_paths([line])
    assert any("is not an RFC 3339 UTC timestamp with Z" in why for why in reasons(report))


def test_stamps_compare_as_text_across_days_and_years() -> None:
    stamps = [
        "2026-12-31T23:59:59.999999Z",
        "2027-01-01T00:00:00.000000Z",
        "2027-01-01T00:00:00.000001Z",
        "2027-01-01T00:00:00.000001Z",  # the same time twice is not going backwards
        "2027-01-01T00:00:00.000000Z",  # backwards by a microsecond
    ]
    lines, prev = [], ZERO_DIGEST
    for seq, stamp in enumerate(stamps):
        line, prev = genuine(_receipt(), seq=seq, prev=prev, ts=stamp)
        lines.append(line)
    assert reasons(both_paths(lines)) == [
        "ts 2027-01-01T00:00:00.000000Z is earlier than the previous record's "
        "2027-01-01T00:00:00.000001Z"
    ]


def test_a_record_after_a_malformed_stamp_is_compared_with_the_last_good_one() -> None:
    stamps = ["2026-01-02T00:00:00.000000Z", "2026-01-03T00:00:00Z", "2026-01-01T00:00:00.000000Z"]
    lines, prev = [], ZERO_DIGEST
    for seq, stamp in enumerate(stamps):
        line, prev = genuine(_receipt(), seq=seq, prev=prev, ts=stamp)
        lines.append(line)
    found = reasons(both_paths(lines))
    assert len(found) == 2 and "fixed form" in found[0]
    assert found[1].endswith("earlier than the previous record's 2026-01-02T00:00:00.000000Z")


def test_an_integer_of_sixteen_digits_within_2_53_is_canonical_on_the_full_path() -> None:
    line, _ = genuine(_receipt(big=9007199254740991, small=-999999999999999))
    assert both_paths([line]).intact


@pytest.mark.parametrize(
    "respell",
    [
        lambda line: line.replace('"seq":0', '"seq":-0'),
        lambda line: line.replace("}", "} ", 1),
        lambda line: line.replace('"chain_id":', '"chain_id" :'),
        lambda line: line + " ",
        lambda line: " " + line,
        lambda line: "\t" + line + "\r",
    ],
)
def test_a_respelled_frame_reads_as_the_full_path_reads_it(respell: Any) -> None:
    line, _ = genuine(_receipt())
    changed = respell(line)
    assert changed != line
    assert both_paths([changed]).intact


@pytest.mark.parametrize(
    "alter",
    [
        lambda line: line.replace(f'"chain_id":"{CHAIN_ID}"', f'"chain_id":"{CHAIN_ID.upper()}"'),
        lambda line: line.replace('"seq":0', '"seq":00'),
        lambda line: line.replace('"seq":0', '"seq":0.0'),
        lambda line: line.replace('"seq":0', '"seq":1e0'),
        lambda line: line.replace('"seq":0', '"seq":false'),
        lambda line: line.replace(CANARY, "adapter.unknown_receipt"),
        lambda line: line.replace('"receipt_id":"sha256:', '"receipt_id":"SHA256:'),
        lambda line: line.replace('"prev":"sha256:', '"prev":"sha256:0'),
        lambda line: line.replace('"mac":"', '"mac":"0'),
        lambda line: line[:-1],
        lambda line: line + "}",
        lambda line: line.replace('"receipt":{', '"receipt":[{', 1).replace(
            ',"receipt_id"', '],"receipt_id"'
        ),
    ],
)
def test_a_frame_out_of_form_is_refused_on_both_paths(alter: Any) -> None:
    line, _ = genuine(_receipt())
    changed = alter(line)
    assert changed != line
    assert not both_paths([changed]).intact


def test_a_key_holder_resealing_a_respelled_frame_is_refused() -> None:
    """The key holder MACs a body whose top-level members carry whitespace."""
    receipt_id = "sha256:" + hashlib.sha256(CANONICAL.encode()).hexdigest()
    body = (
        f'{{"chain_id": "{CHAIN_ID}","event":"{CANARY}","prev":"{ZERO_DIGEST}",'
        f'"receipt":{CANONICAL},"receipt_id":"{receipt_id}","seq":0,"ts":"{TS}"}}'
    )
    mac = hmac.digest(KEY, body.encode(), "sha256").hex()
    line = body.replace(',"prev":', _mac_member(mac) + ',"prev":')
    assert "MAC does not verify (wrong key, or the record was altered)" in reasons(
        both_paths([line])
    )


def test_without_a_key_the_shortcut_checks_the_same() -> None:
    line, digest = genuine(_receipt())
    tampered, _ = sealed(CANONICAL[:-1] + ',"verdict":"x"}', seq=1, prev=digest)
    report = both_paths([line, tampered, "not json"], key=None)
    assert report.records == 2 and not report.macs_checked
    assert "the line repeats a key" in reasons(report)


# --- any receipt, any spelling --------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
SPELLINGS = st.sampled_from(
    [
        {"separators": (",", ":"), "ensure_ascii": False, "sort_keys": True},
        {"separators": (",", ":"), "ensure_ascii": True, "sort_keys": True},
        {"separators": (",", ":"), "ensure_ascii": False, "sort_keys": False},
        {"separators": (", ", ": "), "ensure_ascii": False, "sort_keys": True},
    ]
)


EXTRAS = st.dictionaries(st.text(max_size=5), VALUES, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    extra=EXTRAS, spelling=SPELLINGS, key_holder_seals_it=st.booleans(), continuing=st.booleans()
)
def test_any_receipt_in_any_spelling_reads_the_same_on_both_paths(
    extra: dict[str, Any], spelling: dict[str, Any], key_holder_seals_it: bool, continuing: bool
) -> None:
    """The chain's writer MACs the canonical body; a key holder may MAC the bytes as
    spelled. Either way both paths agree, and a line is intact only if what was MACed is
    the canonical body of what the line states. ``continuing``: the line is the second of
    the slice (the settled path's case), else the first."""
    _spelled_receipt_reads_the_same(extra, spelling, key_holder_seals_it, continuing)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    extra=EXTRAS, spelling=SPELLINGS, key_holder_seals_it=st.booleans(), continuing=st.booleans()
)
def test_many_receipts_in_any_spelling_read_the_same_on_both_paths(
    extra: dict[str, Any], spelling: dict[str, Any], key_holder_seals_it: bool, continuing: bool
) -> None:
    _spelled_receipt_reads_the_same(extra, spelling, key_holder_seals_it, continuing)


def _spelled_receipt_reads_the_same(
    extra: dict[str, Any], spelling: dict[str, Any], key_holder_seals_it: bool, continuing: bool
) -> None:
    receipt = {**extra, **_receipt()}
    try:
        canonical = canonical_json(receipt)
    except Exception:  # e.g. an integer beyond 2**53: no record can hold it
        return
    spelled = json.dumps(json.loads(canonical), allow_nan=False, **spelling)
    first, digest = _genesis()
    place: dict[str, Any] = {"seq": 1, "prev": digest} if continuing else {}
    if key_holder_seals_it:
        line, _ = sealed(spelled, **place)
    else:
        # The genuine record, its receipt respelled in the line afterwards.
        genuine_line, _ = sealed(canonical, **place)
        line = genuine_line.replace(canonical, spelled)
    report = both_paths([first, line] if continuing else [line])
    sealed_canonical = not key_holder_seals_it or spelled == canonical
    assert report.intact == sealed_canonical, (line, reasons(report))


@settings(max_examples=60, deadline=None)
@given(value=VALUES)
def test_the_encoder_built_once_writes_what_json_dumps_writes(value: Any) -> None:
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert compact_sorted_text(value) == expected


def test_the_leaf_of_a_canonical_line_is_the_line_itself() -> None:
    line, _ = genuine(_receipt(note="\u00e9"))
    record = json.loads(line)
    expected = line_text(
        seq=0, ts=TS, chain_id=CHAIN_ID, event=CANARY, receipt_id=record["receipt_id"],
        receipt_json=canonical_json(record["receipt"]), prev=ZERO_DIGEST, mac=record["mac"],
    )  # fmt: skip
    assert expected == line
    leaves: list[bytes] = []
    SliceVerifier(on_leaf=lambda _, leaf: leaves.append(leaf)).feed_all([line.encode() + b"\n"])
    assert leaves == [line.encode()]


# --- a line that continues the slice: settled from its frame's fixed offsets -----------------

# The same day as the next record's: a stamp's form is then not rechecked through its day.
GENESIS_TS = TS


def _genesis() -> tuple[str, str]:
    return genuine(_receipt(), ts=GENESIS_TS)


def test_a_genuine_continuation_is_settled_without_the_frame_pattern(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The settled path is taken for the lines after the first (else it is dead code)."""
    first, digest = _genesis()
    second, digest = genuine(_receipt(note="caf\u00e9"), seq=1, prev=digest)
    third, _ = genuine(_receipt(), seq=2, prev=digest, ts="2026-01-02T00:00:00.000000Z")
    verifier = SliceVerifier(key=KEY)
    verifier.feed(first)

    def pattern_path(*_: object) -> bool:
        raise AssertionError("a continuing canonical line was not settled")

    monkeypatch.setattr(verifier, "_feed_canonical", pattern_path)
    report = verifier.feed_all([second.encode() + b"\n", third]).finish()
    assert report.intact and report.records == 3 and report.mac_records == 3


def _mac_of(line: str) -> str:
    return str(json.loads(line)["mac"])


def _stamped(line: str, stamp: str) -> str:
    """The line with its record's stamp (not its receipt's) replaced by ``stamp``."""
    return line[: line.rindex(',"ts":"')] + f',"ts":"{stamp}"}}'


def _receipt_id(line: str, receipt_id: str) -> str:
    at = line.rindex(',"receipt_id":"')
    return line[:at] + f',"receipt_id":"{receipt_id}"' + line[at + len(',"receipt_id":""') + 71 :]


@pytest.mark.parametrize(
    "alter",
    [
        pytest.param(lambda line: line[:-1] + ',"z":"y"}', id="a member after the stamp"),
        pytest.param(
            lambda line: _stamped(line, "2026-01-01t00:00:00.000000z"), id="a stamp in lower case"
        ),
        pytest.param(
            lambda line: _stamped(line, "2026-01-01T24:00:00.000000Z"),
            id="a stamp with no such hour",
        ),
        pytest.param(
            lambda line: _stamped(line, "2026-02-30T00:00:00.000000Z"), id="a stamp on no such day"
        ),
        pytest.param(
            lambda line: _stamped(line, "2026-01-01T00:00:0a.000000Z"), id="a stamp with a letter"
        ),
        pytest.param(
            lambda line: _stamped(line, "\uff12026-01-01T00:00:00.000000Z"),
            id="a full-width digit in the stamp",
        ),
        pytest.param(
            lambda line: _stamped(line, "2026-01-01T00:00:00.0000000Z"),
            id="a stamp in another width",
        ),
        pytest.param(
            lambda line: _receipt_id(line, "sha256:" + "0" * 64),
            id="a receipt id of another receipt",
        ),
        pytest.param(
            lambda line: line.replace('"receipt_id":"sha256:', '"receipt_id":"SHA256:'),
            id="a receipt id in upper case",
        ),
        pytest.param(
            lambda line: _receipt_id(
                line, json.loads(line)["receipt_id"].upper().replace("SHA", "sha")
            ),
            id="receipt id hex in upper case",
        ),
        pytest.param(lambda line: line.replace('"seq":1,', '"seq":-1,'), id="a seq with a sign"),
        pytest.param(lambda line: line.replace('"seq":1,', '"seq":1.0,'), id="a seq as a float"),
        pytest.param(
            lambda line: line.replace('"event":"adapter.', '"event":"adapter\\u002e'),
            id="an escaped event",
        ),
        pytest.param(
            lambda line: line.replace('"prev":"sha256:', '"prev":"SHA256:'),
            id="a prev in upper case",
        ),
    ],
)
def test_a_continuing_line_out_of_form_reads_as_the_full_path_reads_it(alter: Any) -> None:
    """A key holder MACs the bytes as written: a frame the fixed offsets would misread is
    left to the full path, which reads (and refuses) it the same on both paths."""
    first, digest = _genesis()
    genuine_second, _ = genuine(_receipt(), seq=1, prev=digest)
    changed = alter(genuine_second)
    assert changed != genuine_second
    body = changed.replace(_mac_member(_mac_of(genuine_second)), "")
    resealed = changed.replace(
        _mac_member(_mac_of(genuine_second)),
        _mac_member(hmac.digest(KEY, body.encode(), "sha256").hex()),
    )
    both_paths([first, changed])  # (a respelling of the genuine record, or a broken one)
    assert not both_paths([first, resealed]).intact


def test_without_a_key_a_mac_that_hides_a_member_is_not_settled() -> None:
    """Without a key, 64 characters where the HMAC goes may close the mac early and open
    another member: the line has nine members, and the full path says so."""
    first, digest = _genesis()
    second, _ = genuine(_receipt(), seq=1, prev=digest)
    mac = _mac_of(second)
    hidden = 'abc","zz":"'
    forged = second.replace(mac, hidden + mac[: 64 - len(hidden)])
    assert len(_mac_of(forged)) == 3 and "zz" in json.loads(forged)
    report = both_paths([first, forged], key=None)
    assert any("unexpected field(s) zz" in why for why in reasons(report)), reasons(report)


def test_without_a_key_a_mac_out_of_form_is_not_settled() -> None:
    first, digest = _genesis()
    second, _ = genuine(_receipt(), seq=1, prev=digest)
    upper = second.replace(_mac_of(second), _mac_of(second).upper())
    report = both_paths([first, upper], key=None)
    assert any("mac is neither an HMAC" in why for why in reasons(report)), reasons(report)


def test_a_seq_of_sixteen_digits_reads_the_same_on_both_paths() -> None:
    """Past 15 digits a seq is left to the full path (within 2**53 and beyond it)."""
    for first_seq in (10**15 - 1, 2**53 - 1, 2**53):
        first, digest = genuine(_receipt(), seq=first_seq, prev="sha256:" + "1" * 64)
        second, _ = genuine(_receipt(), seq=first_seq + 1, prev=digest)
        assert both_paths([first, second]).records == 2


@pytest.mark.parametrize(
    "receipt",
    [
        _receipt(certified="yes"),  # a boolean's place
        _receipt(schema_version=True),
        {**_receipt(), "kind": "adapter.version_posture"},
        {**_receipt(), "ts": "yesterday"},
    ],
)
def test_a_continuing_receipt_of_the_wrong_shape_is_reported_on_both_paths(
    receipt: dict[str, Any],
) -> None:
    first, digest = _genesis()
    second, _ = genuine(receipt, seq=1, prev=digest)
    report = both_paths([first, second])
    assert [error.seq for error in report.integrity_errors] == [1], reasons(report)


def test_a_continuing_record_altered_after_it_was_sealed_fails_its_mac() -> None:
    """The receipt changed and its content address recomputed, the MAC left as sealed: a
    canonical line in every other way, so only the MAC tells."""
    first, digest = _genesis()
    second, _ = genuine(_receipt(verdict="refuse"), seq=1, prev=digest)
    altered_receipt = canonical_json(_receipt(verdict="certify"))
    altered, _ = sealed(altered_receipt, seq=1, prev=digest)
    altered = altered.replace(_mac_of(altered), _mac_of(second))
    report = both_paths([first, altered])
    assert reasons(report) == ["MAC does not verify (wrong key, or the record was altered)"]
    assert both_paths([first, altered], key=None).intact  # (nothing to check it with)


# --- a flat receipt: proven canonical from its own text, not written again ------------------


def test_a_flat_receipt_is_proven_canonical_without_writing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A receipt of strings, integers, booleans and nulls, with no backslash, is proven
    canonical from its text (else the flat proof would be dead code the tests never reach);
    one with an object in it is still written again and compared (and one with a "[",
    which may open a list, is sent there at once)."""
    first, digest = genuine(_receipt(note="a b: c, {d} e", n=-15, zero=0, on=True, off=None))
    second, _ = genuine(_receipt(nested={"a": 1}), seq=1, prev=digest)
    written: list[object] = []

    def writing(value: object) -> str:
        written.append(value)
        return compact_sorted_text(value)

    monkeypatch.setattr(slice_verify, "compact_sorted_text", writing)
    report = SliceVerifier(key=KEY).feed_all([first, second]).finish()
    assert report.intact and report.mac_records == 2
    assert written == [json.loads(second)["receipt"]]


@pytest.mark.parametrize(
    ("attack", "receipt_text"),
    [
        # Each member's key ends in '":'; a value that starts with ':' adds one more, so a
        # repeated key can never make the count come out even.
        ("a repeated key and a value starting with a colon", CANONICAL[:-1] + ',"z":":","z":1}'),
        ("a repeated key, both the same", CANONICAL[:-1] + ',"z":1,"z":1}'),
        ("a repeated key, the same value as the first", '{"adapter":"aider",' + CANONICAL[1:]),
        ("a repeated key inside a string and outside", CANONICAL[:-1] + ',"z":"\\"z\\":1","z":2}'),
        ("the mac's key as a member of the receipt", CANONICAL[:-1] + ',"mac":"' + "0" * 64 + '"}'),
        ("a space before a colon", CANONICAL.replace('"kind":', '"kind" :')),
        ("a space after a comma", CANONICAL.replace(',"kind":', ', "kind":')),
        ("a tab before the closing brace", CANONICAL[:-1] + "\t}"),
        ("a newline escape in place of a space", CANONICAL[:-1] + ',"z":"a\\u0020b"}'),
        ("a leading zero", CANONICAL[:-1] + ',"z":007}'),
        ("a plus sign", CANONICAL[:-1] + ',"z":+7}'),
        ("minus zero", CANONICAL[:-1] + ',"z":-0}'),
        ("a fraction of zero", CANONICAL[:-1] + ',"z":7.0}'),
        ("an exponent", CANONICAL[:-1] + ',"z":7E0}'),
        ("an integer beyond 2**53", CANONICAL[:-1] + ',"z":-9007199254740993}'),
        ("a raw control character", CANONICAL[:-1] + ',"z":"a\x01b"}'),
        ("true in capitals", CANONICAL[:-1] + ',"z":True}'),
        ("a trailing comma", CANONICAL[:-1] + ",}"),
        ("a key last that sorts first", CANONICAL[:-1] + ',"a":1}'),
        ("a key in UTF-16 order only", CANONICAL[:-1] + ',"\ufb01":1,"\U0001f600":2}'),
    ],
)
def test_a_key_holder_cannot_pass_a_flat_receipt_that_is_not_rfc_8785(
    attack: str, receipt_text: str
) -> None:
    """The flat proof reads no text twice: each of these is refused, first in the slice
    and continuing it, on both paths (a line JSON does not read is refused as such)."""
    assert receipt_text != CANONICAL
    for place in ({}, {"seq": 1, "prev": _genesis()[1]}):
        line, _ = sealed(receipt_text, **place)
        lines = [line] if not place else [_genesis()[0], line]
        report = both_paths(lines)
        assert not report.intact, attack
        assert any(
            "MAC does not verify" in why
            or "cannot be canonicalised" in why
            or "not valid JSON" in why
            or "not canonical" in why
            for why in reasons(report)
        ), (attack, reasons(report))


@pytest.mark.parametrize(
    "extra",
    [
        {"z": ":"},  # a colon after a quote: one more '":' than members, full path
        {"z": '"'},  # an escaped quote: full path
        {"z": "\x7f \u00e9 \ud7ff"},  # written as they are
        {"z": "{[}]"},  # brackets in a string
        {"z": 999999999999999, "y": -999999999999999},
        {"z": 1000000000000000},  # sixteen digits, within 2**53: full path
        {"": ""},
    ],
)
def test_a_flat_genuine_receipt_at_the_edges_of_the_proof_is_intact(extra: dict[str, Any]) -> None:
    first, digest = genuine({**_receipt(), **extra})
    second, _ = genuine({**_receipt(), **extra}, seq=1, prev=digest)
    report = both_paths([first, second])
    assert report.intact and report.mac_records == 2, reasons(report)


FLAT_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**54), max_value=2**54)
    | st.text(alphabet=st.sampled_from('az :,{}[]"\\\x7f\u00e9'), max_size=4)
)
FLAT_EXTRAS = st.dictionaries(
    st.text(alphabet=st.sampled_from('az :,"'), max_size=3), FLAT_SCALARS, max_size=4
)


def _flat_respellings(canonical: str, receipt: dict[str, Any]) -> list[str]:
    """The canonical text and ways a key holder might write the same receipt otherwise."""
    last_key = max(receipt)
    repeated = json.dumps({last_key: receipt[last_key]}, separators=(",", ":"))[1:-1]
    return [
        canonical,
        json.dumps(receipt, separators=(",", ":"), ensure_ascii=False),  # insertion order
        json.dumps(receipt, separators=(", ", ":"), sort_keys=True, ensure_ascii=False),
        canonical[:-1] + "," + repeated + "}",
        "{" + repeated + "," + canonical[1:],
        canonical.replace(":0,", ":-0,").replace(":0}", ":-0}"),
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=FLAT_EXTRAS, continuing=st.booleans())
def test_a_flat_receipt_in_any_spelling_is_intact_only_when_canonical(
    extra: dict[str, Any], continuing: bool
) -> None:
    """A key holder MACs the flat receipt as spelled: intact exactly when the spelling is
    RFC 8785, on both paths."""
    receipt = {**extra, **_receipt()}
    try:
        canonical = canonical_json(receipt)
    except Exception:  # an integer beyond 2**53: no record can hold it
        return
    for spelled in _flat_respellings(canonical, receipt):
        first, digest = _genesis()
        place: dict[str, Any] = {"seq": 1, "prev": digest} if continuing else {}
        line, _ = sealed(spelled, **place)
        report = both_paths([first, line] if continuing else [line])
        assert report.intact == (spelled == canonical), (spelled, reasons(report))


def test_a_flat_receipts_key_list_is_proven_once_per_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first receipt of a shape has its keys counted and sorted; the later ones of that
    shape are matched against the pattern of its key list (else the patterns are dead
    code)."""
    proven: list[str] = []

    def counting(text: str, receipt: dict[str, Any]) -> bool:
        proven.append(text)
        return is_flat_canonical(text, receipt)

    is_flat_canonical = slice_verify._is_flat_canonical
    monkeypatch.setattr(slice_verify, "_is_flat_canonical", counting)
    lines, digest = [], ZERO_DIGEST
    for seq, receipt in enumerate(
        [_receipt(n=1), _receipt(n=2), _receipt(z="x"), _receipt(n=3), _receipt(z="y")]
    ):
        line, digest = genuine(receipt, seq=seq, prev=digest)
        lines.append(line)
    report = SliceVerifier(key=KEY).feed_all(lines).finish()
    assert report.intact and report.mac_records == 5
    assert len(proven) == 2


# Keys that mean something in a pattern: a learned key list must match only itself.
PATTERN_KEYS = {"a": 1, "a*": 2}


@pytest.mark.parametrize(
    ("attack", "receipt_text"),
    [
        ("a repeated key matching a starred key", '{"a":1,"a":2,' + canonical_json(_receipt())[1:]),
        ("the same keys with a space", canonical_json({**_receipt(), **PATTERN_KEYS})[:-1] + " }"),
        (
            "the same keys, one repeated at the end",
            canonical_json({**_receipt(), **PATTERN_KEYS})[:-1] + ',"ts":"' + TS + '"}',
        ),
    ],
)
def test_a_learned_key_list_passes_no_other_receipt(attack: str, receipt_text: str) -> None:
    """After a genuine receipt whose keys are pattern syntax, a key holder's receipt made to
    fit that key list read as a pattern is refused (and one not JSON at all stays so)."""
    first, digest = genuine({**_receipt(), **PATTERN_KEYS})
    second, digest = genuine({**_receipt(), **PATTERN_KEYS}, seq=1, prev=digest)
    forged, _ = sealed(receipt_text, seq=2, prev=digest)
    report = both_paths([first, second, forged])
    assert report.records >= 2 and not report.intact, attack
    assert {error.seq for error in report.integrity_errors} <= {2, None}, reasons(report)


def test_a_slice_of_more_flat_shapes_than_are_learned_reads_the_same() -> None:
    lines, digest = [], ZERO_DIGEST
    for seq in range(12):
        line, digest = genuine(_receipt(**{f"k{seq}": seq}), seq=seq, prev=digest)
        lines.append(line)
    repeated, _ = sealed(
        canonical_json(_receipt(k11=11))[:-1] + ',"ts":"' + TS + '"}', seq=12, prev=digest
    )
    report = both_paths([*lines, repeated])
    assert report.records == 13 and {error.seq for error in report.integrity_errors} == {12}
    assert "the line repeats a key" in reasons(report)


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({f"k{n:03d}": n for n in range(40)}, id="40 keys"),
        pytest.param({"k" * 2000: 1}, id="a key of 2,000 characters"),
    ],
)
def test_a_key_list_too_large_to_compile_cheaply_is_proven_each_time(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any]
) -> None:
    """A hostile slice needs no key to offer flat receipts of thousands of keys, and a
    pattern of them takes seconds to compile: such a list is never learned, its receipts
    are proven one by one (and still refused when a key repeats)."""
    learned: list[list[str]] = []
    make = slice_verify._flat_template

    def learning(keys: list[str]) -> object:
        learned.append(keys)
        return make(keys)

    monkeypatch.setattr(slice_verify, "_flat_template", learning)
    first, digest = genuine({**_receipt(), **extra})
    second, digest = genuine({**_receipt(), **extra}, seq=1, prev=digest)
    repeated, _ = sealed(
        canonical_json({**_receipt(), **extra})[:-1] + ',"ts":"' + TS + '"}', seq=2, prev=digest
    )
    report = SliceVerifier(key=KEY).feed_all([first, second, repeated]).finish()
    assert report.records == 3 and report.mac_records == 2 and learned == []
    assert {error.seq for error in report.integrity_errors} == {2}
