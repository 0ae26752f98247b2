"""Hostile lines after the first: a slice verifies only as an honest chain exports it.

The verifier settles a line that continues an intact record by comparing it at fixed
offsets with what it already knows; any other line is read by patterns or re-serialised in
full. Each case here is a slice whose second (or later) line is not what an honest chain
writes: altered with or without the chain key, spelled out of RFC 8785, out of sequence,
stamped out of form, or not even UTF-8. Each must read the same with and without the
shortcut, and never verify as intact.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import slice_paths
from helpers.cli import isolated_env

from floorguard._base._canonical import ZERO_DIGEST
from floorguard._chain.chain import canonical_json
from floorguard._proofs.slice_verify import SliceReport, SliceVerifier

KEY = bytes(range(32))
CHAIN_ID = "0123456789abcdef" * 2
CANARY = "adapter.canary_receipt"
TS0 = "2026-01-01T00:00:00.000000Z"
TS1 = "2026-01-01T00:00:01.000000Z"


def receipt(**extra: Any) -> dict[str, Any]:
    return {"kind": CANARY, "schema_version": 1, "ts": TS0, "adapter": "aider", **extra}


RECEIPT = canonical_json(receipt(verdict="certify"))
REFUSED = canonical_json(receipt(verdict="refuse"))


def jstr(text: str) -> bytes:
    return json.dumps(text, ensure_ascii=False).encode()


def seal(
    receipt_text: bytes | str,
    *,
    seq: bytes | int = 0,
    prev: str = ZERO_DIGEST,
    ts: bytes | str = TS0,
    event: bytes | str = CANARY,
    chain_id: bytes | str = CHAIN_ID,
    receipt_id: bytes | str | None = None,
    key: bytes = KEY,
    mac: bytes | str | None = None,
) -> tuple[bytes, str]:
    """A line whose body is exactly the bytes given (canonical or not), MACed over those
    bytes as a key holder can; and the digest of that body: (line, digest). Text values are
    written as JSON strings; bytes values are written raw."""

    def raw(value: bytes | str | int) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, int):
            return str(value).encode()
        return jstr(value)

    receipt_bytes = receipt_text.encode() if isinstance(receipt_text, str) else receipt_text
    if receipt_id is None:
        receipt_id = "sha256:" + hashlib.sha256(receipt_bytes).hexdigest()
    head = b'{"chain_id":' + raw(chain_id) + b',"event":' + raw(event)
    tail = (
        b',"prev":' + raw(prev) + b',"receipt":' + receipt_bytes
        + b',"receipt_id":' + raw(receipt_id) + b',"seq":' + raw(seq)
        + b',"ts":' + raw(ts) + b"}"
    )  # fmt: skip
    body = head + tail
    if mac is None:
        mac = hmac.digest(key, body, "sha256").hex()
    line = head + b',"mac":' + raw(mac) + tail
    return line, "sha256:" + hashlib.sha256(body).hexdigest()


def genesis(ts: str = TS0, key: bytes = KEY) -> tuple[bytes, str]:
    return seal(RECEIPT, ts=ts, key=key)


def both_paths(lines: Sequence[str | bytes], key: bytes | None = KEY) -> SliceReport:
    """Both paths of the verifier, held to one verdict (helpers.slice_paths)."""
    return slice_paths.both_paths(lines, key)


def refused(lines: Sequence[bytes | str], key: bytes | None = KEY) -> list[str]:
    report = both_paths(lines, key)
    assert not report.intact, lines
    return [error.reason for error in report.integrity_errors]


def second(receipt_text: bytes | str = RECEIPT, **fields: Any) -> list[bytes]:
    """A genuine genesis, then a second line sealed by a key holder from ``fields``."""
    first, digest = genesis()
    fields.setdefault("ts", TS1)
    line, _ = seal(
        receipt_text, seq=fields.pop("seq", 1), prev=fields.pop("prev", digest), **fields
    )
    return [first + b"\n", line + b"\n"]


def test_an_honest_two_line_slice_is_intact_on_both_paths() -> None:
    report = both_paths(second())
    assert report.intact and report.mac_records == 2


# --- altered without the key --------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'"verdict":"certify"', b'"verdict":"certifY"'),
        (b'"adapter":"aider"', b'"adapter":"aidex"'),
        (b'"seq":1', b'"seq":2'),
        (b'"ts":"2026-01-01T00:00:01.000000Z"', b'"ts":"2026-01-01T00:00:02.000000Z"'),
        (b'"event":"adapter.canary_receipt"', b'"event":"adapter.version_posture"'),
        (b'"chain_id":"0123', b'"chain_id":"1123'),
    ],
)
def test_a_second_line_altered_without_the_key_is_refused(old: bytes, new: bytes) -> None:
    lines = second()
    assert old in lines[1]
    lines[1] = lines[1].replace(old, new, 1)
    refused(lines)


def test_a_second_line_whose_receipt_and_id_are_both_rewritten_without_the_key_is_refused() -> None:
    forged = canonical_json(receipt(verdict="refuse"))
    first, digest = genesis()
    line, _ = seal(forged, seq=1, prev=digest, ts=TS1, mac="0" * 64)
    assert "MAC does not verify (wrong key, or the record was altered)" in refused([first, line])


# --- receipts out of RFC 8785, sealed by a key holder ---------------------------------------

NOT_CANONICAL = {
    "a repeated key": RECEIPT[:-1] + ',"verdict":"refuse"}',
    "keys out of order": '{"verdict":"certify",' + RECEIPT[1:].replace(',"verdict":"certify"', ""),
    "an escaped letter": RECEIPT.replace('"aider"', '"\\u0041ider"'),
    "an escaped solidus": RECEIPT[:-1] + ',"z":"a\\/b"}',
    "whitespace after a colon": RECEIPT.replace('"kind":', '"kind": '),
    "a newline after the brace": RECEIPT[:-1] + "\n}",
    "a float one": RECEIPT.replace('"schema_version":1', '"schema_version":1.0'),
    "an exponent": RECEIPT[:-1] + ',"z":1e2}',
    "minus zero": RECEIPT[:-1] + ',"z":-0}',
    "seventeen digits beyond 2**53": RECEIPT[:-1] + ',"z":10000000000000000}',
    "an integer past 2**53 that a double rounds": RECEIPT[:-1] + ',"z":9007199254740993}',
    "an astral key after a private-use key (code-point order)": (
        RECEIPT[:-1] + ',"\ue000":1,"\U00010000":2}'
    ),
    "keys beyond U+E000 in code-point order": RECEIPT[:-1] + ',"\uffff":1,"\U0001f600":2}',
    "an escaped astral character": RECEIPT[:-1] + ',"z":"\\ud83d\\ude00"}',
    "a lone surrogate escape": RECEIPT[:-1] + ',"z":"\\ud800"}',
    "an upper-case escape": RECEIPT[:-1] + ',"z":"\\u001F"}',
    "a long escape for a tab": RECEIPT[:-1] + ',"z":"\\u0009"}',
}


@pytest.mark.parametrize("receipt_text", NOT_CANONICAL.values(), ids=NOT_CANONICAL.keys())
def test_a_second_line_whose_receipt_is_not_rfc_8785_is_refused(receipt_text: str) -> None:
    refused(second(receipt_text))


def test_sixteen_digits_within_2_53_are_canonical_on_a_second_line() -> None:
    assert both_paths(second(RECEIPT[:-1] + ',"z":1000000000000000}')).intact


def test_an_astral_key_before_a_private_use_key_is_the_utf_16_order_the_chain_writes() -> None:
    """The honest order (UTF-16 code units) verifies; the code-point order does not."""
    honest = canonical_json(receipt(**{"\ue000": 1, "\U00010000": 2}))
    assert honest.index("\U00010000") < honest.index("\ue000")
    assert both_paths(second(honest)).intact


# --- raw bytes: NUL, invalid UTF-8, BOM, CR, trailing bytes --------------------------------

RAW_RECEIPTS = {
    "a raw NUL in a string": RECEIPT.encode()[:-1] + b',"z":"a\x00b"}',
    "a raw tab in a string": RECEIPT.encode()[:-1] + b',"z":"a\tb"}',
    "a raw DEL-free invalid byte": RECEIPT.encode()[:-1] + b',"z":"a\xffb"}',
    "an overlong solidus": RECEIPT.encode()[:-1] + b',"z":"a\xc0\xafb"}',
    "an encoded surrogate (CESU-8)": RECEIPT.encode()[:-1] + b',"z":"\xed\xa0\x80"}',
    "a truncated sequence": RECEIPT.encode()[:-1] + b',"z":"\xe2\x82"}',
    "a Latin-1 e acute": RECEIPT.encode()[:-1] + b',"z":"caf\xe9"}',
}


@pytest.mark.parametrize("receipt_bytes", RAW_RECEIPTS.values(), ids=RAW_RECEIPTS.keys())
def test_a_second_line_with_bytes_no_honest_chain_writes_is_refused(receipt_bytes: bytes) -> None:
    refused(second(receipt_bytes))


@pytest.mark.parametrize(
    "suffix",
    [b"x", b"}", b"\x00", b",", b"\xff", b"//", b'"'],
    ids=["a letter", "a brace", "a NUL", "a comma", "an invalid byte", "a comment", "a quote"],
)
def test_a_second_line_with_bytes_after_its_closing_brace_is_refused(suffix: bytes) -> None:
    lines = second()
    lines[1] = lines[1][:-1] + suffix + b"\n"
    refused(lines)


@pytest.mark.parametrize(
    "respell",
    [
        lambda line: line[:-1] + b"\r\n",
        lambda line: b"\xef\xbb\xbf" + line,
        lambda line: line[:-1] + b" \n",
        lambda line: b" " + line,
    ],
    ids=["CRLF", "a BOM", "a trailing space", "a leading space"],
)
def test_a_respelled_honest_second_line_reads_the_same_on_both_paths(respell: Any) -> None:
    """Whitespace around a genuine record, or a BOM, changes nothing it states: both paths
    read it alike (the docs let a respelled genuine record verify by its canonical form),
    and its Merkle leaf is the canonical line, never the bytes as written."""
    lines = second()
    honest_leaf = lines[1][:-1]
    lines[1] = respell(lines[1])
    leaves: list[bytes] = []
    report = SliceVerifier(key=KEY, on_leaf=lambda _, leaf: leaves.append(leaf)).feed_all(lines)
    both_paths(lines)
    if report.finish().intact:
        assert leaves[1] == honest_leaf


def test_a_nul_inside_the_frame_of_a_second_line_is_refused() -> None:
    lines = second()
    lines[1] = lines[1].replace(b'"seq":1', b'"seq":\x001', 1)
    refused(lines)


# --- sequence -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seq", "why"),
    [
        (2, "expected seq 1 after seq 0"),
        (0, "expected seq 1 after seq 0"),
        (b"01", ""),
        (b"+1", ""),
        (b"-1", ""),
        (b"1.0", ""),
        (b"1e0", ""),
        (b"10e-1", ""),
        (b'"1"', ""),
        (b"true", ""),
        (b" 1", ""),
        (b"\xd9\xa1", ""),  # ARABIC-INDIC DIGIT ONE
        (b"\xef\xbc\x91", ""),  # FULLWIDTH DIGIT ONE
    ],
)
def test_a_second_line_whose_seq_does_not_follow_in_canonical_form_is_refused(
    seq: bytes | int, why: str
) -> None:
    found = refused(second(seq=seq))
    assert any(why in reason for reason in found), found


def test_a_third_line_repeating_the_second_is_refused() -> None:
    first, digest = genesis()
    line, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1)
    refused([first, line, line])


def test_a_third_line_linking_past_a_dropped_second_is_refused() -> None:
    first, digest = genesis()
    _, digest1 = seal(RECEIPT, seq=1, prev=digest, ts=TS1)
    third, _ = seal(RECEIPT, seq=2, prev=digest1, ts=TS1)
    refused([first, third])


# --- stamps ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-01-01T00:00:60.000000Z",
        "2026-01-01T00:60:00.000000Z",
        "2026-01-01T25:00:00.000000Z",
        "2026-01-01T99:99:99.000000Z",
        "2026-01-01T00:00:0\uff11.000000Z",  # a full-width digit, same day as genesis
        "2026-01-01T00:00:0\u0661.000000Z",  # an Arabic-Indic digit
        "2026-01-01T00:00:01.00000\u0661Z",
        "2026-01-01T00:00:01.000000Z\n",  # a pattern's $ matches before a final newline
        "2026-01-01T00:00:01.000000\u017f",
        "2026-01-01T00:00:01,000000Z",
        "2026-01-01T00:00:01.000000z",
        "2026-01-01T00:00:01.000000",
        "2026-01-01T00:00:01.000000Z ",
        "2026-01-01T00:00:01.000000+00:00",
        "2026-01-01T00:00:01.0000000Z",
        "2025-12-31T23:59:59.999999Z",  # backwards
        "2026-01-00T00:00:01.000000Z",
        "2026-00-01T00:00:01.000000Z",
    ],
)
def test_a_second_line_stamped_out_of_form_or_backwards_is_refused(stamp: str) -> None:
    refused(second(ts=stamp))


@pytest.mark.parametrize(
    ("first_day", "second_day"),
    [
        ("2026-02-28", "2026-02-29"),
        ("2026-02-28", "2026-02-30"),
        ("2026-04-30", "2026-04-31"),
        ("2100-02-28", "2100-02-29"),
        ("2026-12-31", "2026-12-32"),
    ],
)
def test_a_second_line_on_a_day_that_does_not_exist_is_refused(
    first_day: str, second_day: str
) -> None:
    first, digest = genesis(ts=f"{first_day}T00:00:00.000000Z")
    line, _ = seal(RECEIPT, seq=1, prev=digest, ts=f"{second_day}T00:00:00.000000Z")
    refused([first, line])


def test_a_leap_day_that_exists_is_intact() -> None:
    first, digest = genesis(ts="2028-02-28T00:00:00.000000Z")
    line, _ = seal(RECEIPT, seq=1, prev=digest, ts="2028-02-29T00:00:00.000000Z")
    assert both_paths([first, line]).intact


# --- event, chain id, receipt id, prev, mac -------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        "adapter.unknown_receipt",
        "adapter.canary_receipt ",
        "adapter.canary_receiptt",
        "Adapter.canary_receipt",
        "adapter.version_posture",  # a known event that is not this receipt's kind
        b'"adapter.canary\\u005freceipt"',
    ],
)
def test_a_second_line_whose_event_is_not_its_receipts_known_kind_is_refused(
    event: str | bytes,
) -> None:
    refused(second(event=event))


@pytest.mark.parametrize(
    "chain_id",
    [
        CHAIN_ID.upper(),
        "f" * 32,
        CHAIN_ID + "0",
        CHAIN_ID[:-1],
        b'"' + CHAIN_ID.encode()[:-1] + b'\\u0066"',
    ],
)
def test_a_second_line_of_another_chain_id_is_refused(chain_id: str | bytes) -> None:
    refused(second(chain_id=chain_id))


@pytest.mark.parametrize(
    "receipt_id",
    [
        "sha256:" + "0" * 64,
        "sha256:" + hashlib.sha256(RECEIPT.encode()).hexdigest().upper(),
        "SHA256:" + hashlib.sha256(RECEIPT.encode()).hexdigest(),
        "sha256:" + hashlib.sha256(RECEIPT.encode()).hexdigest() + "0",
        hashlib.sha256(RECEIPT.encode()).hexdigest(),
    ],
)
def test_a_second_line_whose_receipt_id_is_not_its_content_address_is_refused(
    receipt_id: str,
) -> None:
    refused(second(receipt_id=receipt_id))


def test_a_second_line_whose_prev_does_not_link_is_refused() -> None:
    first, digest = genesis()
    for prev in (
        ZERO_DIGEST,
        digest[:-1] + ("0" if digest[-1] != "0" else "1"),
        digest.upper().replace("SHA", "sha"),
        "sha256:" + hashlib.sha256(first).hexdigest(),  # the digest of the line, mac and all
    ):
        line, _ = seal(RECEIPT, seq=1, prev=prev, ts=TS1)
        refused([first, line])


def test_a_second_line_whose_mac_is_another_form_is_refused_with_the_key() -> None:
    first, digest = genesis()
    honest, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1)
    mac = json.loads(honest)["mac"]
    for other in (
        mac.upper(),
        mac + "0",
        mac[:-1],
        "ed25519:" + "0" * 16 + ":" + "0" * 128,
        " " + mac[1:],
    ):
        line, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1, mac=other)
        refused([first, line])


def test_a_second_line_whose_mac_is_escaped_is_the_same_record_on_both_paths() -> None:
    first, digest = genesis()
    honest, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1)
    mac = json.loads(honest)["mac"]
    escaped = honest.replace(
        mac.encode(), b"\\u00" + f"{ord(mac[0]):02x}".encode() + mac[1:].encode()
    )
    both_paths([first, escaped])


def test_a_second_line_with_a_member_repeated_or_added_is_refused() -> None:
    lines = second()
    line = lines[1].rstrip(b"\n")
    for forged in (
        line[:-1] + b',"seq":1}',
        line[:-1] + b',"ts":"' + TS1.encode() + b'"}',
        line[:-1] + b',"extra":null}',
        line.replace(b'{"chain_id":', b'{"chain_id":"' + CHAIN_ID.encode() + b'","chain_id":', 1),
    ):
        refused([lines[0], forged])


# --- size and depth ------------------------------------------------------------------------


def test_a_second_line_past_the_chains_record_cap_is_refused() -> None:
    big = canonical_json(receipt(note="x" * ((1 << 20) + 10)))
    assert not both_paths(second(big)).intact


def test_a_second_line_nested_deeper_than_200_levels_is_refused_on_both_paths() -> None:
    # The line's own object is one level; the receipt a second; "z" opens 199 more.
    deep = RECEIPT[:-1] + ',"z":' + "[" * 199 + "]" * 199 + "}"
    found = refused(second(deep))
    assert any("nests deeper than 200 levels" in why for why in found), found


def test_a_second_line_nested_exactly_200_levels_is_proven_on_both_paths() -> None:
    deep = RECEIPT[:-1] + ',"z":' + "[" * 198 + "]" * 198 + "}"
    assert both_paths(second(deep)).intact


def outcome(lines: Sequence[bytes | str], shortcut: bool) -> object:
    """The report of one path, or the exception it raised instead of reporting."""
    try:
        return SliceVerifier(key=KEY, canonical_shortcut=shortcut).feed_all(lines).finish()
    except RecursionError as exc:
        return f"crashed: {exc}"


def nested(depth: int, inner: str) -> str:
    return RECEIPT[:-1] + ',"z":' + "[" * depth + inner + "]" * depth + "}"


# Python's recursion limit (1000) falls in this range wherever the verifier is called from.
DEPTHS = range(850, 1000)


@pytest.mark.parametrize("inner", ["", '{"a":1}'], ids=["lists", "an object inside"])
def test_a_canonical_line_nested_near_the_recursion_limit_reads_the_same_on_both_paths(
    inner: str,
) -> None:
    differing = []
    for depth in DEPTHS:
        lines = second(nested(depth, inner))
        fast, full = outcome(lines, True), outcome(lines, False)
        if fast != full or isinstance(fast, str):
            differing.append((depth, fast, full))
    assert not differing, differing[:3]


def test_a_respelled_line_nested_near_the_recursion_limit_is_reported_not_raised() -> None:
    crashed = []
    for depth in DEPTHS:
        lines = second(nested(depth, " "))
        for shortcut in (True, False):
            found = outcome(lines, shortcut)
            if isinstance(found, str):
                crashed.append((depth, shortcut, found))
    assert not crashed, crashed[:3]


# The chain's own append, run as a host runs it (a fresh process): the deepest receipt it
# takes, then the slice it exports.
APPEND_DEEPEST = """
import json, sys
from pathlib import Path
from floorguard._chain.chain import AuditChain
home = Path(sys.argv[1])
chain = AuditChain(home / "chain.sqlite3", home / "chain.key")
receipt = {"kind": "adapter.canary_receipt", "schema_version": 1,
           "ts": "2026-01-01T00:00:00.000000Z", "adapter": "aider", "verdict": "refuse"}
chain.append("adapter.canary_receipt", receipt)
for depth in range(300, 150, -1):
    try:
        deep = json.loads("[" * depth + "]" * depth)
        chain.append("adapter.canary_receipt", {**receipt, "z": deep})
        break
    except Exception:
        continue
Path(sys.argv[2]).write_text("".join(line + "\\n" for line in chain.export_lines()))
print(depth)
"""


def verify_chain(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "chain", *map(str, args)],
        cwd=cwd,
        env=isolated_env(cwd / "state"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_verify_chain_proves_the_deepest_record_the_chain_appends(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-c", APPEND_DEEPEST, str(home), str(tmp_path / "slice.jsonl")],
        cwd=tmp_path, env=isolated_env(tmp_path / "state"), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    # The receipt nests one level more than "z", its record line two: 200 at most.
    assert int(done.stdout) == 198
    proof = verify_chain(tmp_path, "slice.jsonl", "--key-file", home / "chain.key")
    assert proof.returncode == 0 and proof.stdout.startswith("PROVEN"), proof.stdout


def test_verify_chain_reports_a_deeply_nested_respelled_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    crashed = []
    for depth in range(965, 995):
        slice_file = tmp_path / f"deep{depth}.jsonl"
        slice_file.write_bytes(b"".join(second(nested(depth, " "))))
        done = verify_chain(tmp_path, slice_file, "--unauthenticated")
        if "Traceback" in done.stderr or not done.stdout.startswith("NOT PROVEN"):
            crashed.append((depth, done.stderr.strip().splitlines()[-1:]))
    assert not crashed, crashed


# --- the HMAC under keys of any length -----------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 31, 32, 33, 63, 64, 65, 128, 200])
def test_the_verifiers_hmac_is_hmac_digest_for_a_key_of_any_length(length: int) -> None:
    key = bytes((7 * i + 3) % 256 for i in range(length))
    first, digest = genesis(key=key)
    line, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1, key=key)
    report = both_paths([first, line], key=key)
    assert report.intact and report.mac_records == 2
    # The same slice under a key one byte longer or shorter does not verify.
    for other in (key + b"\x01", key[:-1], hashlib.sha256(key).digest()):
        if other == key or (len(key) > 64 and other == hashlib.sha256(key).digest()):
            continue  # RFC 2104: a key past the block is its hash
        assert not both_paths([first, line], key=other).intact


# --- the window proof, end to end -----------------------------------------------------------


def three_lines(alter_second: Any = None) -> bytes:
    # A canary that refused: no violation of its own, so only integrity decides.
    first, digest = seal(REFUSED)
    middle, digest = seal(REFUSED, seq=1, prev=digest, ts=TS1)
    if alter_second is not None:
        middle = alter_second(middle)
    last, _ = seal(REFUSED, seq=2, prev=digest, ts="2026-01-01T00:00:09.000000Z")
    return first + b"\n" + middle + b"\n" + last + b"\n"


@pytest.mark.parametrize(
    "alter",
    [
        None,
        lambda line: line.replace(b'"adapter":"aider"', b'"adapter":"aidex"'),
        lambda line: line.replace(b'"verdict":"refuse"', b'"verdict":"refuse","verdict":"refuse"'),
        lambda line: line.replace(b'"seq":1', b'"seq":01'),
        lambda line: line.replace(b"00:00:01.000000Z", b"00:00:01.000000z"),
        lambda line: line[:-1] + b"}x",
        lambda line: line.replace(b'"ts":"2026-01-01T00:00:01', b'"ts":"2025-01-01T00:00:01'),
    ],
    ids=[
        "honest",
        "altered",
        "repeated key",
        "leading zero",
        "lower-case z",
        "trailing",
        "backwards",
    ],
)
def test_the_window_proof_of_a_slice_with_a_hostile_second_line_is_not_proven(
    tmp_path: Path, alter: Any
) -> None:
    key_file = tmp_path / "chain.key"
    key_file.write_text(KEY.hex())
    key_file.chmod(0o600)
    (tmp_path / "slice.jsonl").write_bytes(three_lines(alter))
    done = verify_chain(
        tmp_path, "slice.jsonl", "--key-file", key_file,
        "--since", "2026-01-01T00:00:00.500000Z", "--until", "2026-01-01T00:00:05Z",
    )  # fmt: skip
    if alter is None:
        assert done.returncode == 0 and done.stdout.startswith("PROVEN"), done.stdout + done.stderr
    else:
        assert done.returncode == 1 and done.stdout.startswith("NOT PROVEN"), done.stdout


# --- every byte of a second line ------------------------------------------------------------


def leaves_of(lines: Sequence[bytes | str]) -> list[bytes]:
    leaves: list[bytes] = []
    SliceVerifier(key=KEY, on_leaf=lambda _, leaf: leaves.append(leaf)).feed_all(lines)
    return leaves


def test_any_one_byte_changed_dropped_or_added_in_a_second_line_reads_the_same_on_both_paths() -> (
    None
):
    """Each byte of a genuine second line replaced, removed, or preceded by another: both
    paths agree, and a slice still intact is the same two records (a respelling: its
    Merkle leaves are the honest lines)."""
    first, digest = genesis()
    honest, _ = seal(
        canonical_json(receipt(note="caf\u00e9", n=[1, -2, None])), seq=1, prev=digest, ts=TS1
    )
    honest_leaves = leaves_of([first, honest])
    respelled = 0
    for at in range(len(honest)):
        variants = [honest[:at] + honest[at + 1 :]]
        for byte in (b"0", b"a", b'"', b"\\", b" ", b"\xff", b"}", b"\x00"):
            variants.append(honest[:at] + byte + honest[at + 1 :])
            variants.append(honest[:at] + byte + honest[at:])
        for variant in variants:
            if variant == honest:
                continue
            report = both_paths([first, variant])
            if report.intact:
                assert leaves_of([first, variant]) == honest_leaves, variant
                respelled += 1
    assert respelled  # (a space between tokens is a respelling; the sweep reached one)


# --- a mac of 64 characters that are not ASCII ----------------------------------------------

NON_ASCII_MACS = ["\u00e9" + "0" * 63, "0" * 63 + "\u4e2d", "\U0001f600" * 64]


@pytest.mark.parametrize("mac", NON_ASCII_MACS, ids=["e acute first", "han last", "astral"])
def test_a_second_line_whose_mac_is_64_non_ascii_characters_is_reported_malformed(
    mac: str,
) -> None:
    first, digest = genesis()
    line, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1, mac=mac)
    found = refused([first, line])
    assert any("mac is neither an HMAC" in why for why in found), found


def test_verify_chain_reports_a_non_ascii_mac_on_a_second_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "chain.key"
    key_file.write_text(KEY.hex())
    key_file.chmod(0o600)
    first, digest = genesis()
    line, _ = seal(RECEIPT, seq=1, prev=digest, ts=TS1, mac=NON_ASCII_MACS[0])
    (tmp_path / "slice.jsonl").write_bytes(first + b"\n" + line + b"\n")
    done = verify_chain(tmp_path, "slice.jsonl", "--key-file", key_file)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and done.stdout.startswith("NOT PROVEN"), done.stdout


# --- lines past the verifier's line cap, and a third line after a respelled second ----------


def test_a_second_line_past_the_line_cap_is_refused_unread() -> None:
    huge = canonical_json(receipt(note="x" * (16 << 20)))
    found = refused(second(huge))
    assert any("longer than" in why for why in found), found


@pytest.mark.parametrize(
    "alter",
    [
        lambda line: line.replace(b'"adapter":"aider"', b'"adapter":"aidex"'),
        lambda line: line.replace(b'"seq":2', b'"seq":3'),
        lambda line: line.replace(b"00:00:02.000000Z", b"00:00:00.900000Z"),
        lambda line: line.replace(b'"mac":"', b'"mac":"0', 1).replace(b'","prev"', b'"0,"prev"'),
    ],
    ids=["altered receipt", "skipped seq", "backwards behind line 2", "mac shifted"],
)
def test_a_hostile_third_line_after_a_respelled_second_is_refused(alter: Any) -> None:
    """Line 2 takes the full path (CRLF); line 3 continues it and may be settled: the
    record it links to is the canonical one, and a tampered line 3 is still refused."""
    first, digest = genesis()
    middle, digest = seal(RECEIPT, seq=1, prev=digest, ts=TS1)
    last, _ = seal(RECEIPT, seq=2, prev=digest, ts="2026-01-01T00:00:02.000000Z")
    honest = [first + b"\n", middle + b"\r\n", last + b"\n"]
    assert both_paths(honest).intact
    tampered = alter(last)
    assert tampered != last
    refused([*honest[:2], tampered + b"\n"])


# Strings whose quotes, backslashes and brackets could mislead a count of open brackets.
TRICKY_STRINGS = ["\\", '"', '\\"', "]]]]", "[[[[", "}{", '\\"]', 'a\\\\"b']


def _z_nested(depth: int, text: str) -> str:
    """The receipt with "z": a list holding ``text`` and lists nested ``depth - 1`` deep."""
    inner: list[object] = []
    for _ in range(depth - 2):
        inner = [inner]
    z = json.dumps([text, inner], ensure_ascii=False, separators=(",", ":"))
    return RECEIPT[:-1] + ',"z":' + z + "}"


@pytest.mark.parametrize("text", TRICKY_STRINGS)
def test_the_depth_limit_is_the_same_whatever_string_comes_before_the_nesting(text: str) -> None:
    # The line, the receipt and "z" are three levels: "z" 198 deep makes a line of 200.
    assert both_paths(second(_z_nested(198, text))).intact
    found = refused(second(_z_nested(199, text)))
    assert any("nests deeper than 200 levels" in why for why in found), found
