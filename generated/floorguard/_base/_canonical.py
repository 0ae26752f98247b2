"""Canonical bytes (RFC 8785) and digests: what gets hashed, MACed and signed."""

from __future__ import annotations

import hashlib
import json
import json.encoder
import re
from collections.abc import Callable
from typing import Any

ZERO_DIGEST = "sha256:" + "0" * 64
# How deep a record line, or a proof document, may nest arrays and objects (a receipt one
# level less). Deeper JSON is refused before it is parsed: how deep Python's recursion
# reaches depends on the caller's stack, so past that two readers of one line would differ
# (or fail with a traceback).
MAX_NESTING = 200
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


_MAX_EXACT_INT = 2**53 - 1


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _compact_sorted_encoder(*, ensure_ascii: bool = False) -> Callable[[Any], str]:
    """``JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False,
    ensure_ascii=...).encode`` without its per-call set-up: ``JSONEncoder.encode`` builds a
    new C encoder on every call, which costs as much as encoding a small receipt."""
    public = json.JSONEncoder(
        ensure_ascii=ensure_ascii, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the same text, the slow way
        return public.encode
    strings = (
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    )
    try:
        # (markers, default, string encoder, indent, key separator, item separator,
        # sort_keys, skipkeys, allow_nan): what JSONEncoder.iterencode passes, except no
        # cycle check (markers None): a parsed JSON value cannot hold itself.
        encoder = make(None, _no_default, strings, None, ":", ",", True, False, False)
    except TypeError:  # another C signature: use the public method
        return public.encode

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return strings(value)
        return "".join(encoder(value, 0))

    return encode


# ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
# allow_nan=False)`` of a value read from JSON (no cycles), built once.
compact_sorted_text: Callable[[Any], str] = _compact_sorted_encoder()
# The same with ``ensure_ascii=True`` (json.dumps's default): every character beyond ASCII
# escaped, as the files floorguard keeps for itself are written.
compact_sorted_ascii_text: Callable[[Any], str] = _compact_sorted_encoder(ensure_ascii=True)


def is_plain_json(value: Any) -> bool:
    """True when ``json.dumps`` with sorted keys is provably RFC 8785 for ``value``.

    That holds for dicts, lists, strings, booleans, None and integers within IEEE 754
    precision (exact types: a subclass could serialise itself differently), as long as no
    key holds a character beyond the BMP: only there does code-point order (Python's)
    differ from UTF-16 order (RFC 8785's). Floats never pass.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -_MAX_EXACT_INT <= item <= _MAX_EXACT_INT:
                continue
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            return False
    return True


def plain_json_text(value: Any) -> str | None:
    """The RFC 8785 text of ``value`` when the fast path applies (see ``is_plain_json``),
    else None; one walk of the value either way."""
    if not is_plain_json(value):
        return None
    # (the encoder built once: is_plain_json has seen a tree of plain values, no cycle)
    text = compact_sorted_text(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate: not JSON text
    return text


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value.

    The common case (see ``is_plain_json``) is serialised by the standard library, which is
    two orders of magnitude faster than the pure-Python ``rfc8785``; everything else goes
    to ``rfc8785``. A property test holds the two to identical bytes.
    Raises ``floorguard.errors.CanonicalizationError`` for values JSON cannot carry
    (floats that are not finite, integers beyond IEEE 754 precision, non-string keys,
    lone surrogates).
    """
    text = plain_json_text(value)
    if text is not None:
        return text.encode("utf-8")
    # Not plain (or a lone surrogate, which rfc8785 refuses with its own message).
    # Imported here so that `import floorguard` stays cheap.
    import rfc8785

    from floorguard.errors import CanonicalizationError

    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalizationError(f"value cannot be canonicalised: {exc}") from exc


def nests_deeper_than(text: str, limit: int = MAX_NESTING) -> bool:
    """True when the JSON ``text`` has more than ``limit`` arrays and objects open at once
    (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # (so few brackets cannot nest deeper: the common case, one pass)
    depth = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


class RepeatedKey(ValueError):
    """A JSON object holds one key twice: readers differ on which copy counts."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise RepeatedKey(f"repeats the key {key!r} in one object")
        found[key] = value
    return found


def _not_a_number(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def loads_strict(data: bytes | str) -> Any:
    """The JSON value of ``data`` (UTF-8 bytes, or text), read strictly: no byte-order mark
    (``json.loads`` of bytes skips one), no repeated key, no NaN or Infinity. Raises
    ValueError (RepeatedKey for a repeated key) or RecursionError."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return json.loads(text, object_pairs_hook=_unique_members, parse_constant=_not_a_number)


def sha256_digest(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def content_address(value: Any) -> str:
    """The content address of a JSON value: the digest of its canonical bytes."""
    return sha256_digest(canonical_bytes(value))


def is_digest(text: object) -> bool:
    """True for a well-formed ``sha256:<64 lowercase hex>`` string."""
    if not isinstance(text, str) or len(text) != 71 or not text.startswith("sha256:"):
        return False
    return all(c in "0123456789abcdef" for c in text[7:])
