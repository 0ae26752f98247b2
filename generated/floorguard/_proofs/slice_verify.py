"""Verifying an exported slice of the audit chain, offline and streaming.

``SliceVerifier`` takes the slice one line at a time and keeps only the previous record's
digest, seq and timestamp, so memory stays flat however long the slice is. For every line it
checks: a JSON object with exactly the eight record fields and their types; ``receipt_id``
is the receipt's content address; ``prev`` is the digest of the previous line's record (for
seq 0, the zero digest); ``seq`` goes up by one; one ``chain_id``; a known ``event`` whose
receipt is well formed; a ``ts`` in the chain's fixed form (``_time.is_chain_ts``) that does
not go backwards; no duplicate keys;
and the record's authenticator (``mac``): an HMAC with the chain key, a host signature with
the hosts' public keys (``floorguard._chain.record_signature``). Given either, every record must
verify with what was given: a record of the other kind is reported as unverified (no key for
it), never passed. Given neither, only the authenticator's form is checked. It reports every
problem rather than the first, but a break in the linkage is reported once: the next line is
checked against the line before it, whatever that line's own state.

With the hosts' keys it also tells who wrote the records: a count per host, and the runs of
consecutive records by one writer (``Writer``; ``host`` None for an HMAC record, which any
holder of the chain key may have written).

Later checks (window proofs over spawn records, signed checkpoints) plug in through
``on_record``, which sees each record as it goes by, with whether it verified (or
``on_values``, which sees its values without a ChainRecord being made).

Two paths, one verdict. A line that is exactly a canonical export line (what ``chain
export`` writes) is recognised without re-serialising its frame (``_feed_canonical``): its
eight members in their fixed order, each top-level value in a spelling that needs no
escape, and a receipt whose text is what the C encoder writes for the parsed receipt in a
case where that is RFC 8785 (no float, no integer beyond 15 digits, no character whose
UTF-16 order differs); a flat receipt is proven so from its text, without writing it.
Then the line *is* ``line_text`` of the values parsed from it, the record body is the line
without its ``mac`` member, and the MAC, the digest and the content address are computed
over slices of the line. The common such line, one that continues the slice and passes
every check, is settled with its frame compared at fixed offsets with what is already known
(``_settle_canonical``); the others have their frame read by patterns. Any other line
(respelled, escaped, repeated keys, an odd stamp, a float) takes the full path: parsed,
re-serialised to RFC 8785, and authenticated over that. Both paths make the same
checks; the tests hold them to the same report line for line (``canonical_shortcut=False``
turns the first off).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from floorguard._base._canonical import (
    MAX_NESTING,
    ZERO_DIGEST,
    canonical_bytes,
    compact_sorted_text,
    is_digest,
    nests_deeper_than,
)
from floorguard._base._text import one_line
from floorguard._base._time import CHAIN_TS_FORM, CHAIN_TS_PATTERN, is_chain_ts
from floorguard._chain.chain import (
    COMPACT_SORTED,
    EVENTS,
    JSON_STRING,
    MAX_RECEIPT_BYTES,
    RECORD_FIELDS,
    ChainRecord,
    body_text,
    is_chain_id,
    line_text,
)
from floorguard._chain.receipts import shape_problem
from floorguard._chain.record_signature import HostKeys, is_hmac, signature_key_id
from floorguard._crypto.hmac_sha256 import HmacSha256
from floorguard.errors import FloorguardError

MAX_LINE_BYTES = 16 << 20
MAX_REPORTED_ERRORS = 1000
MACS_NOT_CHECKED = "MACs not checked: no --key-file or --host-keys"
MAX_WRITER_RUNS = 1 << 20
# How a slice read from standard input (``-``) is named in its messages.
STDIN = "<stdin>"
UNVERIFIED_HMAC = (
    "unverified: an HMAC record, and no chain key to check it with "
    "(--key-file, FLOORGUARD_CHAIN_KEY_FILE): no key for it"
)
UNVERIFIED_SIGNED = (
    "unverified: signed by host key id {kid}, and no host keys to check it with "
    "(--host-keys, FLOORGUARD_HOST_KEYS): no key for it"
)
BAD_MAC = "MAC does not verify (wrong key, or the record was altered)"
MALFORMED_MAC = (
    "mac is neither an HMAC (64 lowercase hex characters) nor a host signature "
    "(ed25519:<16 hex>:<128 hex>)"
)

_FIELD_SET = frozenset(RECORD_FIELDS)
# Integers of 15 digits or fewer are within 2**53, where json and RFC 8785 agree.
_SAFE_INT_DIGITS = 15
_jstr = JSON_STRING
_STR_FIELDS = ("ts", "chain_id", "event", "receipt_id", "prev", "mac")

# The frame of a canonical export line (RFC 8785 sorts the eight members: chain_id, event,
# mac, prev, receipt, receipt_id, seq, ts), each top-level value in a form whose JSON
# spelling is itself between quotes: nothing in it needs an escape. The receipt is between
# the two parts.
_FRAME_HEAD = re.compile(
    r'\{"chain_id":"([0-9a-f]{32})","event":"([a-z_.]{1,64})"'
    r'(,"mac":"(?:[0-9a-f]{64}|ed25519:[0-9a-f]{16}:[0-9a-f]{128})")'
    r',"prev":"(sha256:[0-9a-f]{64})","receipt":(?=\{)'
)
_MAC_MEMBER = ',"mac":"'
_MAC_MEMBER_START = len(_MAC_MEMBER)
_TAIL_START = ',"receipt_id":"sha256:'
# The settled path (``_settle_canonical``) finds the frame's members at fixed offsets: the
# chain id and prev have fixed widths, the mac 64 characters (an HMAC) or 153 (a host
# signature), the receipt id 71, the stamp 27.
_FRAME_OPEN = '{"chain_id":"'
_EVENT_AT = len(_FRAME_OPEN) + 32 + len('","event":"')
_HMAC_LEN, _SIGNATURE_LEN = 64, len("ed25519:") + 16 + 1 + 128
_RECEIPT_ID_AT = len(',"receipt_id":"')
_DIGEST_LEN = len(ZERO_DIGEST)
_STAMP_LEN = len(CHAIN_TS_FORM)
_STAMP = re.compile(CHAIN_TS_PATTERN)
_MAC_FORM = re.compile(r"[0-9a-f]{64}|ed25519:[0-9a-f]{16}:[0-9a-f]{128}")
# Seqs the settled path writes with ``str``: 15 digits or fewer (within 2**53).
_SETTLED_SEQ_LIMIT = 10**_SAFE_INT_DIGITS
# seq: an integer as RFC 8785 writes it (no sign, no leading zero, within 2**53); ts: the
# chain's fixed form, its fields in range (``is_chain_ts`` also checks the day exists).
_FRAME_TAIL = re.compile(
    r',"receipt_id":"(sha256:[0-9a-f]{64})","seq":(0|[1-9][0-9]{0,14}),'
    rf'"ts":"({CHAIN_TS_PATTERN})"\}}'
)
# Integers beyond 15 digits (where json and RFC 8785 part ways) in a receipt's text: with
# digits made 0 and what may precede a number in compact JSON (":", ",", "[", "-") made
# ":", such a number reads as ":" and sixteen 0s. A string holding such a run only sends
# its line down the full path.
_NUMBER_MARKS = bytes.maketrans(b"0123456789,[-", b"0000000000:::")
_LONG_INTEGER = b":" + b"0" * (_SAFE_INT_DIGITS + 1)
# A flat receipt written as RFC 8785 writes it when its text holds no backslash: members
# with no whitespace around them, each value a string with no quote in it, an integer as
# RFC 8785 writes it (no sign on 0, no leading zero, 15 digits or fewer), true, false or
# null; no object or array in it. (``_is_flat_canonical`` adds the key order.)
_FLAT_VALUE = r'(?:"[^"]*+"|-?[1-9][0-9]{0,14}+|0|true|false|null)'
_FLAT_RECEIPT = re.compile(rf'\{{(?:"[^"]*+":{_FLAT_VALUE},)*+"[^"]*+":{_FLAT_VALUE}\}}')
# Key lists learned per verifier: a chain's flat receipts come in a few shapes, and a
# slice of many shapes falls back on _FLAT_RECEIPT (a pattern is compiled once each).
_MAX_FLAT_TEMPLATES = 8
# Only key lists of a receipt's size are learned (a spawn record has about 15 keys): the
# time to compile a pattern grows faster than its keys (1.2 ms for 16, 77 ms for 1,000,
# 2 s for 10,000), and a hostile slice needs no key to offer such lists.
_MAX_TEMPLATE_KEYS = 32
_MAX_TEMPLATE_KEY_CHARS = 1024


class IntegrityError(NamedTuple):
    """One integrity problem: the record's seq (None when unknown) and the reason."""

    seq: int | None
    reason: str


class Writer(NamedTuple):
    """Consecutive records ``first_seq..last_seq`` authenticated by one writer: a host's
    signature (``host``, its name in the host keys) or the chain key (``host`` None)."""

    first_seq: int
    last_seq: int
    host: str | None


@dataclass(frozen=True)
class SliceReport:
    """What a slice proves about itself: its extent, and every integrity problem found."""

    records: int
    first_seq: int | None
    last_seq: int | None
    first_ts: str | None
    last_ts: str | None
    chain_id: str | None
    head: str | None
    macs_checked: bool
    integrity_errors: tuple[IntegrityError, ...]
    errors_not_listed: int = 0
    signatures_checked: bool = False
    # Records whose HMAC, and whose host signature, verified.
    mac_records: int = 0
    signed_records: int = 0
    hosts: tuple[tuple[str, int], ...] = ()
    writers: tuple[Writer, ...] = ()
    writers_not_listed: int = 0

    @property
    def intact(self) -> bool:
        """True when the slice holds records and every check passed."""
        return not self.integrity_errors and self.errors_not_listed == 0


RecordCallback = Callable[[ChainRecord, bool], object]
# A record's eight values in RECORD_FIELDS order (seq, ts, chain_id, event, receipt_id,
# receipt, prev, mac).
RecordValues = tuple[int, str, str, str, str, dict[str, Any], str, str]
_Fields = RecordValues
# ``on_record`` without the ChainRecord: the record's values as they were read.
ValuesCallback = Callable[[RecordValues, bool], object]
# (seq, the record's canonical export line as bytes): the Merkle leaf input.
LeafCallback = Callable[[int, bytes], object]


@dataclass
class _Parse:
    """Per-line findings of the JSON decoders' hooks (reset before each line)."""

    fast: bool = True
    duplicate: bool = False


@dataclass
class SliceVerifier:
    """Feed it lines with ``feed``; ``finish`` returns the SliceReport.

    ``key`` enables the MAC check, ``host_keys`` the host-signature check; ``source`` names
    the slice's file in a refusal of what no JSON holds (NaN, Infinity). ``on_record(record,
    intact)`` is called for every line that is a well-formed record, in order; ``intact`` is
    False when that record has an integrity problem of its own or does not link to the line
    before it. ``on_values(values, intact)`` hears the same, the record's values as a
    tuple in ``RECORD_FIELDS`` order (no ChainRecord made: for a callback that reads a few).
    """

    key: bytes | None = None
    on_record: RecordCallback | None = None
    max_errors: int = MAX_REPORTED_ERRORS
    on_leaf: LeafCallback | None = None
    host_keys: HostKeys | None = None
    source: str | None = None
    # False: every line takes the full path (the tests compare the two paths' reports).
    canonical_shortcut: bool = True
    on_values: ValuesCallback | None = None

    _errors: list[IntegrityError] = field(default_factory=list, init=False)
    _not_listed: int = field(default=0, init=False)
    _line_no: int = field(default=0, init=False)
    _records: int = field(default=0, init=False)
    _first_seq: int | None = field(default=None, init=False)
    _first_ts: str | None = field(default=None, init=False)
    _last_seq: int | None = field(default=None, init=False)
    _last_ts: str | None = field(default=None, init=False)
    # The last well-formed stamp: stamps in the chain's form compare as text.
    _last_good_ts: str | None = field(default=None, init=False)
    _chain_id: str | None = field(default=None, init=False)
    # The settled path's start of a line: set once the slice's chain id is known and well
    # formed (32 lowercase hex characters).
    _frame_start: str | None = field(default=None, init=False)
    _expected_seq: int | None = field(default=None, init=False)
    _expected_prev: str | None = field(default=None, init=False)
    _head: str | None = field(default=None, init=False)
    _mac_records: int = field(default=0, init=False)
    _signed_records: int = field(default=0, init=False)
    _hosts: dict[str, int] = field(default_factory=dict, init=False)
    _writers: list[Writer] = field(default_factory=list, init=False)
    _writers_not_listed: int = field(default=0, init=False)
    _parse: _Parse = field(default_factory=_Parse, init=False)
    _decoder: json.JSONDecoder = field(init=False)
    _scan_receipt: Callable[[str, int], tuple[Any, int]] = field(init=False)
    # The chain key's HMAC, its pads hashed once (``key`` is read when the verifier is made).
    _keyed: HmacSha256 | None = field(default=None, init=False)
    # Patterns of the flat receipts' key lists already proven sorted and unique
    # (``_flat_template``): a receipt one of them matches is canonical as it stands.
    _flat_templates: list[re.Pattern[str]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.key is not None:
            self._keyed = HmacSha256(self.key)
        parse = self._parse

        def on_float(text: str) -> float:
            parse.fast = False  # json and RFC 8785 write floats differently
            return float(text)

        def on_int(text: str) -> int:
            if len(text) > _SAFE_INT_DIGITS:
                parse.fast = False
            return int(text)

        def on_constant(text: str) -> Any:
            raise _NotJson(text)

        self._decoder = json.JSONDecoder(
            parse_float=on_float, parse_int=on_int, parse_constant=on_constant
        )
        # No integer hook: the C scanner reads integers itself (a hook would cost a Python
        # call per integer); long ones are found in the text. The float hook only runs for
        # floats.
        # The decoder's C scanner itself (``scan_once``, which ``JSONDecoder.__init__``
        # makes), without ``decode``'s Python wrapper: it raises StopIteration where no JSON
        # value starts.
        scanner = json.JSONDecoder(parse_float=on_float, parse_constant=on_constant)
        self._scan_receipt = vars(scanner)["scan_once"]

    # -- feeding --

    def feed(self, line: str | bytes) -> None:
        """Check one line of the slice (a trailing newline is allowed)."""
        self._line_no += 1
        raw: bytes | None = None
        if isinstance(line, bytes):
            if len(line) > MAX_LINE_BYTES + 1:
                self._break(None, self._at(f"longer than {MAX_LINE_BYTES} bytes"))
                return
            raw = line[:-1] if line.endswith(b"\n") else line
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._break(None, self._at("not UTF-8"))
                return
        elif line.endswith("\n"):
            line = line[:-1]
        if len(line) > MAX_LINE_BYTES:
            self._break(None, self._at(f"longer than {MAX_LINE_BYTES} bytes"))
            return
        if self.canonical_shortcut and (
            self._settle_canonical(line, raw) or self._feed_canonical(line, raw)
        ):
            return
        if not line or line.isspace():
            self._break(None, self._at("blank line"))
            return
        if nests_deeper_than(line):
            self._break(None, self._at(f"nests deeper than {MAX_NESTING} levels"))
            return
        parse = self._parse
        parse.fast = line.isascii() or _keys_sort_alike(line)
        if parse.fast and "\\u" in line:
            # An escape may spell a character that sorts differently in UTF-16.
            parse.fast = False
        try:
            obj = self._decoder.decode(line)
        except _NotJson as exc:
            # Python's json reads it; no JSON tool does: say what and where, file and line.
            self._break(None, self._at(f"{exc} is not JSON (it has no NaN or Infinity)"))
            return
        except (ValueError, RecursionError) as exc:
            self._break(None, self._at(f"not valid JSON ({exc})"))
            return
        record = self._shape(obj)
        if record is None:
            return
        self._check(record, line, parse.fast)

    def feed_all(self, lines: Iterable[str | bytes]) -> SliceVerifier:
        """Feed every line of ``lines``; returns self for chaining."""
        for line in lines:
            self.feed(line)
        return self

    def finish(self) -> SliceReport:
        """The report of everything fed so far."""
        errors = list(self._errors)
        if self._records == 0 and not errors and not self._not_listed:
            errors.append(IntegrityError(None, "the slice holds no records"))
        return SliceReport(
            records=self._records,
            first_seq=self._first_seq,
            last_seq=self._last_seq,
            first_ts=self._first_ts,
            last_ts=self._last_ts,
            chain_id=self._chain_id,
            head=self._head,
            macs_checked=self.key is not None,
            integrity_errors=tuple(errors),
            errors_not_listed=self._not_listed,
            signatures_checked=self.host_keys is not None,
            mac_records=self._mac_records,
            signed_records=self._signed_records,
            hosts=tuple(sorted(self._hosts.items())),
            writers=tuple(self._writers),
            writers_not_listed=self._writers_not_listed,
        )

    # -- checks --

    def _settle_canonical(self, line: str, raw: bytes | None) -> bool:
        """Settle the common case: ``line`` is a canonical export line that continues the
        slice (the expected seq, linked to the record before it, of the slice's chain) and
        passes every check. Then it is counted and True returned; else nothing is changed
        and False returned (``_feed_canonical``, or the full path, then takes it and words
        every finding). What this settles is what ``_check_record`` would conclude.

        Why a line accepted here is canonical, though no pattern reads its frame: the frame
        is compared piece by piece, at fixed offsets, with text made of known values: the
        slice's chain id (32 lowercase hex characters, checked when first seen), the
        previous record's digest (computed here), the expected seq as ``str`` writes it (15
        digits or fewer); the event is one of EVENTS; the mac equals the HMAC's lowercase
        hex (without a key: has an authenticator's form), the receipt id the receipt's
        content address, the stamp the chain's fixed form. None of these holds a quote, a
        backslash or a control character, so each is its own JSON spelling; the receipt's
        text is proven canonical as ``_canonical_parts`` says. So the line is
        ``line_text`` of what it parses to, and no other parse of it exists.
        """
        seq = self._expected_seq
        prev = self._expected_prev
        frame_start = self._frame_start
        last_ts = self._last_good_ts
        if (
            seq is None
            or prev is None
            or frame_start is None
            or last_ts is None
            or seq >= _SETTLED_SEQ_LIMIT
            or self.host_keys is not None
            or not line.startswith(frame_start)
        ):
            return False
        event_end = line.find('"', _EVENT_AT)
        event = line[_EVENT_AT:event_end]
        if event_end < 0 or event not in EVENTS:
            return False
        mac_start = event_end + 1
        mac_at = mac_start + _MAC_MEMBER_START
        if line[mac_start:mac_at] != _MAC_MEMBER:
            return False
        if line[mac_at + _HMAC_LEN : mac_at + _HMAC_LEN + 1] == '"':
            mac_end = mac_at + _HMAC_LEN + 1
        elif line[mac_at + _SIGNATURE_LEN : mac_at + _SIGNATURE_LEN + 1] == '"':
            mac_end = mac_at + _SIGNATURE_LEN + 1
        else:
            return False
        prev_member = ',"prev":"' + prev + '","receipt":{'
        receipt_start = mac_end + len(prev_member) - 1
        if line[mac_end : receipt_start + 1] != prev_member:
            return False
        tail_start = line.rfind(_TAIL_START, receipt_start)
        if tail_start < 0:
            return False
        id_at = tail_start + _RECEIPT_ID_AT
        id_end = id_at + _DIGEST_LEN
        seq_member = f'","seq":{seq},"ts":"'
        ts_at = id_end + len(seq_member)
        if line[id_end:ts_at] != seq_member or line[ts_at + _STAMP_LEN :] != '"}':
            return False
        ts = line[ts_at : ts_at + _STAMP_LEN]
        if (
            ts < last_ts
            or _STAMP.fullmatch(ts) is None
            or (ts[:10] != last_ts[:10] and not is_chain_ts(ts))  # (is the day real)
        ):
            return False
        found = self._canonical_parts(line, raw, (receipt_start, tail_start), (mac_start, mac_end))
        if found is None:
            return False
        receipt, receipt_json, body = found
        receipt_id = line[id_at:id_end]
        if (
            receipt_id != "sha256:" + hashlib.sha256(receipt_json).hexdigest()
            or shape_problem(event, receipt) is not None
        ):
            return False
        mac = line[mac_at : mac_end - 1]
        keyed = self._keyed
        if keyed is None:
            if _MAC_FORM.fullmatch(mac) is None:
                return False
        elif (
            len(mac) != _HMAC_LEN
            or not mac.isascii()  # (compare_digest refuses other text: the full path words it)
            or not hmac.compare_digest(mac, keyed.hexdigest(body))
        ):
            return False

        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        self._records += 1
        if keyed is not None:
            self._mac_records += 1
        self._last_seq = seq
        self._last_ts = self._last_good_ts = ts
        self._expected_seq, self._expected_prev, self._head = seq + 1, digest, digest
        if self.on_leaf is not None:
            self.on_leaf(seq, raw if raw is not None else line.encode("utf-8"))
        if self.on_record is not None or self.on_values is not None:
            chain_id = frame_start[len(_FRAME_OPEN) : len(_FRAME_OPEN) + 32]
            fields: _Fields = (seq, ts, chain_id, event, receipt_id, receipt, prev, mac)
            if self.on_values is not None:
                self.on_values(fields, True)
            if self.on_record is not None:
                self.on_record(ChainRecord.from_values(fields), True)
        return True

    def _canonical_parts(
        self,
        line: str,
        raw: bytes | None,
        receipt_span: tuple[int, int],
        mac_span: tuple[int, int],
    ) -> tuple[dict[str, Any], bytes, bytes] | None:
        """(receipt, its canonical bytes, the record body's canonical bytes) of a line whose
        frame is canonical, cut from the line (the receipt's text at ``receipt_span``, the
        ``mac`` member at ``mac_span``); None when the receipt's text is not the canonical
        text of what it parses to.

        Why the text is canonical when this returns: it parses as one object and is
        character for character the C encoder's output for it, which is RFC 8785 when no
        float was read (the hook), no integer has over 15 digits and no character reaches
        U+E000 (so code-point and UTF-16 key orders agree): no repeated key, no whitespace,
        no optional escape. A flat receipt with no backslash is proven to be that output
        from its text (``_is_flat_canonical``, 1.4 us against 3.6 for writing it again and
        the scans for long integers and nesting); any other is written again and compared.
        """
        receipt_start, tail_start = receipt_span
        mac_start, mac_end = mac_span
        receipt_text = line[receipt_start:tail_start]
        if raw is not None and len(raw) == len(line):
            # ASCII: byte offsets are character offsets.
            receipt_json = raw[receipt_start:tail_start]
            body = raw[:mac_start] + raw[mac_end:]
        else:
            if not receipt_text.isascii() and max(receipt_text) >= "\ue000":
                return None
            try:
                receipt_json = receipt_text.encode("utf-8")
                body = (line[:mac_start] + line[mac_end:]).encode("utf-8")
            except UnicodeEncodeError:
                return None
        if len(receipt_json) > MAX_RECEIPT_BYTES:
            return None  # (the full path reports it)
        parse = self._parse
        parse.fast = True
        if "\\" not in receipt_text and "[" not in receipt_text:
            # Most receipts: proven canonical from their text (no re-encoding, no scan for
            # long integers or deep nesting: the patterns allow neither). A receipt with a
            # list (servers, feeds) cannot match them: it goes to the encoder at once.
            known = False
            for template in self._flat_templates:
                if template.fullmatch(line, receipt_start, tail_start):
                    known = True
                    break
            if known or _FLAT_RECEIPT.fullmatch(line, receipt_start, tail_start):
                try:
                    receipt, stop = self._scan_receipt(receipt_text, 0)
                except (StopIteration, ValueError):
                    return None
                if stop != len(receipt_text) or not parse.fast or type(receipt) is not dict:
                    return None
                if not known:
                    if not _is_flat_canonical(receipt_text, receipt):
                        return None
                    if _is_worth_a_template(receipt, len(self._flat_templates)):
                        self._flat_templates.append(_flat_template(list(receipt)))
                return receipt, receipt_json, body
        if _LONG_INTEGER in receipt_json.translate(_NUMBER_MARKS):
            return None
        # So few brackets cannot nest the line deeper than MAX_NESTING; any other line takes
        # the full path, which measures its depth before it parses it.
        if receipt_json.count(b"[") + receipt_json.count(b"{") >= MAX_NESTING:
            return None
        try:
            receipt, stop = self._scan_receipt(receipt_text, 0)
            if stop != len(receipt_text) or not parse.fast or type(receipt) is not dict:
                return None
            if compact_sorted_text(receipt) != receipt_text:
                return None
        except (StopIteration, ValueError, RecursionError):
            return None
        return receipt, receipt_json, body

    def _feed_canonical(self, line: str, raw: bytes | None) -> bool:
        """Check ``line`` if it is exactly a canonical export line, and return True; else
        report nothing and return False (the full path then takes it). ``raw`` is the
        line's UTF-8 bytes when it was read as bytes.

        It takes what ``_settle_canonical`` leaves (a first record, a break, any finding,
        host keys), so every finding is worded by ``_check_record``.

        Why a line accepted here is canonical: the frame is matched member by member with
        values that JSON writes as they are; the receipt's text is canonical
        (``_canonical_parts``). So the line equals ``line_text`` of what it parses to, and
        no other parse of it exists: no repeated key, no whitespace, no optional escape,
        one ``mac`` member, at its place.
        """
        head = _FRAME_HEAD.match(line)
        if head is None:
            return False
        chain_id, event, mac_member, prev = head.groups()
        if event not in EVENTS:
            return False
        receipt_start = head.end()
        tail_start = line.rfind(_TAIL_START, receipt_start)
        if tail_start < 0:
            return False
        tail = _FRAME_TAIL.fullmatch(line, tail_start)
        if tail is None:
            return False
        found = self._canonical_parts(line, raw, (receipt_start, tail_start), head.span(3))
        if found is None:
            return False
        receipt, receipt_json, body = found
        receipt_id, seq_text, ts = tail.groups()
        mac = mac_member[_MAC_MEMBER_START:-1]
        fields: _Fields = (int(seq_text), ts, chain_id, event, receipt_id, receipt, prev, mac)
        self._check_record(
            fields,
            receipt_json,
            body,
            line,
            raw,
            canonical=True,
            repeats_no_key=True,
        )
        return True

    def _shape(self, obj: object) -> dict[str, Any] | None:
        """The record a parsed line holds, or None after reporting why it is not one."""
        if type(obj) is not dict:
            self._break(None, self._at("not a JSON object"))
            return None
        seq = obj.get("seq")
        known_seq = seq if type(seq) is int else None
        if obj.keys() != _FIELD_SET:
            missing = sorted(_FIELD_SET - obj.keys())
            extra = sorted(obj.keys() - _FIELD_SET)
            parts = []
            if missing:
                parts.append(f"missing field(s) {', '.join(missing)}")
            if extra:
                parts.append(f"unexpected field(s) {', '.join(extra)}")
            self._break(known_seq, self._at("; ".join(parts)))
            return None
        if known_seq is None or known_seq < 0:
            self._break(None, self._at("seq is not a non-negative integer"))
            return None
        for name in _STR_FIELDS:
            if type(obj[name]) is not str:
                self._break(known_seq, self._at(f"{name} is not a string"))
                return None
        if type(obj["receipt"]) is not dict:
            self._break(known_seq, self._at("receipt is not a JSON object"))
            return None
        return obj

    def _check(self, fields: dict[str, Any], line: str, fast: bool) -> None:
        """The full path: the record re-serialised to RFC 8785 from its parsed fields."""
        seq: int = fields["seq"]
        try:
            receipt_json, body_str, body = _canonical_body(fields, fast)
        except (FloorguardError, UnicodeEncodeError) as exc:
            self._break(seq, f"record cannot be canonicalised: {exc}")
            return
        self._check_record(
            tuple(fields[name] for name in RECORD_FIELDS),
            receipt_json,
            body,
            line,
            None,
            canonical=False,
            repeats_no_key=not _may_repeat_keys(line, body_str, fields["mac"], fast),
        )

    def _check_record(
        self,
        fields: _Fields,
        receipt_json: bytes,
        body: bytes,
        line: str,
        raw: bytes | None,
        *,
        canonical: bool,
        repeats_no_key: bool,
    ) -> None:
        """Every check of one record (``fields`` in ``RECORD_FIELDS`` order), given its
        canonical receipt and body bytes.
        ``canonical``: ``line`` is the canonical export line itself (``raw`` its bytes, when
        it was read as bytes), so it is its own Merkle leaf input; ``repeats_no_key``: it is
        known to hold no key twice (else it is parsed again to find out)."""
        seq, ts, chain_id, event, receipt_id, receipt, prev, mac = fields
        problems: list[str] = []
        keyed = self._keyed
        writer: str | None = None
        if canonical and keyed is not None and len(mac) == 64:
            # An HMAC (the frame holds 64 hex characters or a signature): checked here.
            mac_verified = hmac.compare_digest(mac, keyed.hexdigest(body))
            unverified = None if mac_verified else BAD_MAC
        elif keyed is not None or self.host_keys is not None:
            mac_verified, writer, unverified = self._authenticate(mac, body)
        else:
            mac_verified, unverified = False, None
        digest = "sha256:" + hashlib.sha256(body).hexdigest()

        # Linkage: one report per break, then re-sync on this line.
        if self._expected_seq is not None and seq != self._expected_seq:
            problems.append(
                f"expected seq {self._expected_seq} after seq {self._expected_seq - 1} "
                "(records missing, duplicated or out of order)"
            )
        elif seq == 0:
            if prev != ZERO_DIGEST:
                problems.append("genesis record's prev is not the zero digest")
        elif self._expected_prev is not None:
            if prev != self._expected_prev:
                problems.append(
                    f"prev does not match the digest of record {seq - 1} "
                    "(that record or this one was altered)"
                )
        # Nothing before it in the slice: at least the form of prev can be checked.
        elif prev == ZERO_DIGEST:
            problems.append("prev is the zero digest but this is not the genesis record")
        elif not is_digest(prev):
            problems.append("prev is not a sha256 digest")

        if chain_id != self._chain_id:
            if self._chain_id is None:
                self._chain_id = chain_id
                if is_chain_id(chain_id):
                    self._frame_start = f'{_FRAME_OPEN}{chain_id}","event":"'
                else:
                    problems.append("chain_id is not 32 lowercase hex characters")
            else:
                problems.append(
                    f"chain_id {chain_id} differs from the slice's chain {self._chain_id}"
                    if is_chain_id(chain_id)
                    else "chain_id is not 32 lowercase hex characters"
                )
        if event in EVENTS:
            # The check verify receipt makes, named by where it is in the slice.
            problem = shape_problem(event, receipt)
            if problem is not None:
                problems.append(self._at(problem))
        else:
            problems.append(f"unknown event {event!r}")
        if len(receipt_json) > MAX_RECEIPT_BYTES:
            problems.append(f"the receipt exceeds {MAX_RECEIPT_BYTES} bytes (no chain appends one)")
        if receipt_id != "sha256:" + hashlib.sha256(receipt_json).hexdigest():
            problems.append("receipt_id is not the content address of the receipt")
        # Stamps in the chain's one form compare as text, in time order.
        good_ts = is_chain_ts(ts)
        if not good_ts:
            problems.append(
                f"ts {ts!r} is not an RFC 3339 UTC timestamp with Z in the chain's fixed form "
                f"({CHAIN_TS_FORM})"
            )
        elif self._last_good_ts is not None and ts < self._last_good_ts:
            problems.append(f"ts {ts} is earlier than the previous record's {self._last_good_ts}")
        if mac_verified:
            if writer is None and self.host_keys is None:
                self._mac_records += 1  # (what _attribute does for it)
            else:
                self._attribute(seq, writer)
        elif unverified is not None:
            problems.append(unverified)
        elif not is_hmac(mac) and signature_key_id(mac) is None:
            problems.append(MALFORMED_MAC)
        if not repeats_no_key and _has_duplicate_keys(line):
            problems.append("the line repeats a key")

        for problem in problems:
            self._report(seq, problem)
        self._records += 1
        if self._first_seq is None:
            self._first_seq, self._first_ts = seq, ts
        self._last_seq, self._last_ts = seq, ts
        if good_ts:
            self._last_good_ts = ts
        self._expected_seq, self._expected_prev, self._head = seq + 1, digest, digest
        if self.on_leaf is not None:
            if canonical:
                leaf = raw if raw is not None else line.encode("utf-8")
            else:
                leaf = line_text(
                    seq=seq,
                    ts=ts,
                    chain_id=chain_id,
                    event=event,
                    receipt_id=receipt_id,
                    receipt_json=receipt_json.decode("utf-8"),
                    prev=prev,
                    mac=mac,
                ).encode("utf-8")
            self.on_leaf(seq, leaf)
        if self.on_values is not None:
            self.on_values(fields, not problems)
        if self.on_record is not None:
            self.on_record(ChainRecord.from_values(fields), not problems)

    def _authenticate(self, mac: str, body: bytes) -> tuple[bool, str | None, str | None]:
        """(verified, the writing host's name or None for an HMAC, why it did not verify)
        of a record's ``mac`` over its canonical ``body``, with the keys given."""
        if is_hmac(mac):
            keyed = self._keyed
            if keyed is None:
                return False, None, UNVERIFIED_HMAC
            if hmac.compare_digest(mac, keyed.hexdigest(body)):
                return True, None, None
            return False, None, BAD_MAC
        kid = signature_key_id(mac)
        if kid is None:
            return False, None, MALFORMED_MAC
        host_keys = self.host_keys
        if host_keys is None:
            return False, None, UNVERIFIED_SIGNED.format(kid=kid)
        name, problem = host_keys.check(mac, body)
        return name is not None, name, problem

    def _attribute(self, seq: int, host: str | None) -> None:
        """Count a verified record for its writer; with host keys, extend the writers' runs."""
        if host is None:
            self._mac_records += 1
        else:
            self._signed_records += 1
            self._hosts[host] = self._hosts.get(host, 0) + 1
        if self.host_keys is None:
            return
        writers = self._writers
        if writers and writers[-1].host == host and writers[-1].last_seq == seq - 1:
            writers[-1] = writers[-1]._replace(last_seq=seq)
        elif len(writers) < MAX_WRITER_RUNS:
            writers.append(Writer(seq, seq, host))
        else:
            self._writers_not_listed += 1

    def _at(self, problem: str) -> str:
        """``problem`` located in the slice: ``FILE line N: problem`` (``line N`` alone when
        the lines came from no named file)."""
        where = f"{self.source} line" if self.source else "line"
        return f"{where} {self._line_no}: {problem}"

    def _break(self, seq: int | None, reason: str) -> None:
        """A line that is not a record: report it and forget the linkage until the next one."""
        self._report(seq, reason)
        self._expected_seq = None
        self._expected_prev = None

    def _report(self, seq: int | None, reason: str) -> None:
        if len(self._errors) < self.max_errors:
            self._errors.append(IntegrityError(seq, reason))
        else:
            self._not_listed += 1


class _NotJson(ValueError):
    """NaN, Infinity or -Infinity in a line."""


def _keys_sort_alike(text: str) -> bool:
    return max(text) < "\ue000"


def _is_flat_canonical(text: str, receipt: dict[str, Any]) -> bool:
    """Whether ``text``, which ``_FLAT_RECEIPT`` matches, holds no backslash and parses as
    ``receipt``, is the RFC 8785 text of ``receipt``: what ``compact_sorted_text`` writes
    for it, without writing it.

    The pattern leaves two ways to differ, both found here. A key written twice: each key
    ends in ``":`` (no string holds a quote), so the text has at least as many ``":`` as
    members, and more members than ``receipt`` has keys when one repeats. Keys out of
    order: with none repeated, ``receipt`` holds them in the text's order. Every other
    spelling is the encoder's: a string with no backslash and no control character (the
    scanner refuses those raw) is written as it is, an integer in the pattern's form as
    ``str`` writes it. (Code-point order is RFC 8785's UTF-16 order for the characters
    the caller lets through, all below U+E000.)
    """
    if text.count('":') != len(receipt):
        return False
    keys = list(receipt)
    return keys == sorted(keys)


def _is_worth_a_template(receipt: dict[str, Any], learned: int) -> bool:
    """Whether a flat receipt's key list is learned, ``learned`` lists being known: a few,
    each of a receipt's size (compiling a pattern of thousands of keys takes seconds)."""
    return (
        learned < _MAX_FLAT_TEMPLATES
        and len(receipt) <= _MAX_TEMPLATE_KEYS
        and sum(map(len, receipt)) <= _MAX_TEMPLATE_KEY_CHARS
    )


def _flat_template(keys: list[str]) -> re.Pattern[str]:
    """The pattern of a flat receipt with exactly ``keys`` (unique, sorted, from a receipt
    ``_is_flat_canonical`` passed), each value as ``_FLAT_RECEIPT`` allows it. A text with
    no backslash that it matches has those members in that order and nothing else: it is
    canonical without counting or sorting its keys (no string in it holds a quote, so
    none can pass for a member)."""
    members = ",".join(f'"{re.escape(key)}":{_FLAT_VALUE}' for key in keys)
    return re.compile(rf"\{{{members}\}}")


def _canonical_body(fields: dict[str, Any], fast: bool) -> tuple[bytes, str, bytes]:
    """Canonical bytes of the receipt and of the record body, the receipt serialised once.

    ``fast`` means the line had no float, no long integer and no character (raw or escaped)
    that orders differently in UTF-16, so the C encoder's compact sorted output is RFC 8785.
    """
    if fast:
        receipt_json = COMPACT_SORTED.encode(fields["receipt"])
    else:
        receipt_json = canonical_bytes(fields["receipt"]).decode("utf-8")
        for name in _STR_FIELDS:
            # The top-level strings are spliced in by the C encoder: prove that is canonical.
            if canonical_bytes(fields[name]) != COMPACT_SORTED.encode(fields[name]).encode():
                raise FloorguardError(f"{name} is not canonical JSON text")
    body = body_text(
        seq=fields["seq"],
        ts=fields["ts"],
        chain_id=fields["chain_id"],
        event=fields["event"],
        receipt_id=fields["receipt_id"],
        receipt_json=receipt_json,
        prev=fields["prev"],
    )
    return receipt_json.encode("utf-8"), body, body.encode("utf-8")


def _may_repeat_keys(line: str, body: str, mac: str, fast: bool) -> bool:
    """False only when the line provably repeats no key (then the slow check is skipped).

    On the fast path (no float, no ``\\u`` escape) the canonical spelling of a value is its
    shortest: any other spelling adds whitespace, an optional escape or a repeated member.
    So a line exactly as long as the canonical record, the body with ``,"mac":...`` added,
    holds no member beyond those parsed, and no key twice.
    """
    if not fast:
        return True
    text = line[:-1] if line.endswith("\r") else line
    return len(text) != len(body) + len(',"mac":') + len(COMPACT_SORTED.encode(mac))


def _has_duplicate_keys(line: str) -> bool:
    """Slow path, for lines not in canonical form: does any object repeat a key?"""
    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            found = True
        return dict(items)

    json.loads(line, object_pairs_hook=pairs)
    return found


# --- reading slices and reporting ---------------------------------------------------------------


def iter_slice_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of a binary stream, each read with a size cap (an oversized line is cut
    short and yielded longer than MAX_LINE_BYTES, so the verifier reports it)."""
    while True:
        line = stream.readline(MAX_LINE_BYTES + 2)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES + 1 and not line.endswith(b"\n"):
            # Skip the rest of the oversized line without holding it.
            while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
        yield line


def verify_slice(
    lines: Iterable[str | bytes],
    *,
    key: bytes | None = None,
    on_record: RecordCallback | None = None,
    host_keys: HostKeys | None = None,
    source: str | None = None,
) -> SliceReport:
    """Verify a slice given as lines (``source`` names where they came from). Pure: reads
    nothing but ``lines``."""
    verifier = SliceVerifier(key=key, on_record=on_record, host_keys=host_keys, source=source)
    return verifier.feed_all(lines).finish()


def verify_path(
    path: str | Path,
    *,
    key: bytes | None = None,
    on_record: RecordCallback | None = None,
    host_keys: HostKeys | None = None,
) -> SliceReport:
    """Verify the slice in a file (``-`` reads standard input).

    Raises UnreadableFileError (not a regular file, unreadable) or OSError while reading.
    """
    options: dict[str, Any] = {"key": key, "on_record": on_record, "host_keys": host_keys}
    if str(path) == "-":
        return verify_slice(iter_slice_lines(sys.stdin.buffer), source=STDIN, **options)
    from floorguard._base.files import open_regular

    # Streamed with a cap on each line; a FIFO or device is refused, never waited on.
    with open_regular(path, what="chain slice") as stream:
        return verify_slice(iter_slice_lines(stream), source=str(path), **options)


def render_text(report: SliceReport) -> str:
    """``PROVEN`` or ``NOT PROVEN``, then one ``seq N: reason`` line per error."""
    if report.intact:
        return (
            f"PROVEN\n{report.records} record(s), seq {report.first_seq}..{report.last_seq}, "
            f"{report.first_ts} to {report.last_ts}, chain {report.chain_id}, "
            f"head {report.head}\n"
        )
    lines = ["NOT PROVEN"]
    for error in report.integrity_errors:
        # (a reason quotes file names: escaped, so that none adds a line of its own)
        lines.append(
            one_line(f"seq {error.seq}: {error.reason}" if error.seq is not None else error.reason)
        )
    if report.errors_not_listed:
        lines.append(f"... and {report.errors_not_listed} more integrity error(s)")
    return "\n".join(lines) + "\n"


def report_document(
    report: SliceReport, *, since: str | None = None, until: str | None = None
) -> dict[str, Any]:
    """The ``verify chain --json`` document (docs/receipts-and-chain.md, "Offline proofs")."""
    return {
        "proven": report.intact,
        "since": since,
        "until": until,
        "records": report.records,
        "violations": [],
        "integrity_errors": [
            {"seq": error.seq, "reason": error.reason} for error in report.integrity_errors
        ],
    }
