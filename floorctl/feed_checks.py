"""The semantic checks of schema versions 1 and 2 that a JSON Schema pattern cannot make safely."""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from typing import Any, Final

from packaging.version import InvalidVersion, Version

from floorctl.feed_messages import _quote, format_path, show_value
from floorctl.feed_rules import (
    _ADVISORY_ID,
    _CATEGORY_WORDS,
    _NAME,
    _NOTE_FORBIDDEN,
    _NOTE_FORBIDDEN_WHY,
    _VERSION_CHARS,
    FEED_ID,
    MAX_ADVISORY_ID_CHARS,
    MAX_NOTE_CHARS,
    MAX_URL_CHARS,
    MAX_VERSION_CHARS,
)
from floorguard._base._time import parse_ts
from floorguard._maps import map_model, versions
from floorguard._maps.catalog import ecosystem_of
from floorguard.errors import FloorguardError


def _v2_problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Semantic checks of schema version 2 that a JSON Schema pattern cannot make safely."""
    problems: list[tuple[str, str]] = []
    feed_id = document.get("feed_id")
    if isinstance(feed_id, str) and not FEED_ID.match(feed_id):
        problems.append(
            (
                "$.feed_id",
                f"{show_value(feed_id)} is not a feed id (letters, digits and . _ : / -, "
                "starting with a letter or digit, at most 128 characters)",
            )
        )
    version = document.get("version")
    # `type(...) is int`: JSON 1.0 passes the schema's "integer", and true equals 1 in Python.
    if isinstance(version, float):
        problems.append(("$.version", f"must be an integer, not the number {version!r}"))
    times = {}
    for name in ("published", "expires"):
        value = document.get(name)
        if not isinstance(value, str):
            continue  # the schema reports the type
        try:
            times[name] = parse_ts(value)
        except FloorguardError:
            problems.append(
                (f"$.{name}", f"{show_value(value)} is not an RFC 3339 time with Z or an offset")
            )
    if len(times) == 2 and times["expires"] < times["published"]:
        problems.append(("$.expires", "expires before it was published"))
    adapters = document.get("adapters")
    if isinstance(adapters, dict):
        for name, entry in adapters.items():
            references = entry.get("references") if isinstance(entry, dict) else None
            if not isinstance(references, list):
                continue
            for index, url in enumerate(references):
                if isinstance(url, str):
                    reason = _reference_problem(url)
                    if reason is not None:
                        path = format_path(("adapters", name, "references", index))
                        problems.append((path, reason))
    return problems


def _reference_problem(url: str) -> str | None:
    if len(url) > MAX_URL_CHARS:
        return f"too long: {len(url):,} characters (at most {MAX_URL_CHARS:,})"
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        return f"{show_value(url)} is not a plain https URL (printable ASCII, no spaces)"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a malformed port)
    except ValueError:
        return f"{show_value(url)} is not a valid URL"
    if parts.scheme != "https" or not parts.hostname:
        return f"{show_value(url)} is not an https URL with a host"
    if parts.username is not None or parts.password is not None:
        return f"{show_value(url)} carries credentials; references must not"
    return None


def _entry_problems(name: str, entry: Any, found: dict[str, str]) -> bool:
    """Add the semantic problems of one adapter entry to ``found``; True unless it is clean."""
    doubtful = False
    reason = name_problem(name)
    if reason is not None:
        found[format_path(("adapters", name))] = reason
        doubtful = True
    if type(entry) is not dict or entry.keys() != _ENTRY_FIELDS:
        doubtful = True  # the schema says what is wrong with its shape
        if type(entry) is not dict:
            return True
    for field, check in _FIELD_CHECKS:
        value = entry.get(field)
        if type(value) is not str:
            doubtful = True
            continue
        reason = check(value)
        if field == "min_safe_version" and (
            reason is None or (reason.endswith(_NOT_PEP_440) and ecosystem_of(name) == "npm")
        ):
            # In the adapter's own order: an npm CLI's floor named as SemVer, never PEP 440.
            reason = _order_problem(name, value) or reason
        if reason is not None:
            found[format_path(("adapters", name, field))] = reason
            doubtful = True
    return doubtful


def _order_problem(name: str, floor: str) -> str | None:
    """A floor the runtime compares in the adapter's own order must be a version of that
    order: an npm CLI's by SemVer (``1.0`` is PEP 440, not SemVer), as refresh requires."""
    order = ecosystem_of(name)
    if order is None or versions.is_valid(floor, order):
        return None
    return (
        f"{show_value(floor)} is not a valid {versions.order_name(order)} version, and {name} "
        f"is an {order} CLI (its versions compare by {versions.order_name(order)})"
    )


def name_problem(name: str) -> str | None:
    if _NAME.match(name):
        return None
    if not name.isascii():
        return "adapter names are ASCII only (look-alike letters are refused): " + _quote(
            name, ascii_only=True
        )
    return (
        f"{_quote(name, ascii_only=True)} is not a valid adapter name "
        "(lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, "
        "at most 64 characters)"
    )


_NOT_PEP_440: Final = "is not a valid PEP 440 version"


def _version_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if value != value.strip():
        return f"{show_value(value)} has surrounding whitespace"
    if len(value) > MAX_VERSION_CHARS:
        return f"too long: {len(value):,} characters (at most {MAX_VERSION_CHARS})"
    if not _VERSION_CHARS.match(value):
        return f"{show_value(value)} {_NOT_PEP_440}"
    try:
        Version(value)
    except (InvalidVersion, ValueError):  # ValueError: e.g. a number past the digit limit
        return f"{show_value(value)} {_NOT_PEP_440}"
    return local_label_problem(value)


def local_label_problem(value: str) -> str | None:
    """A PEP 440 version (valid) with a local label: the gate compares releases, the label
    aside (a rebuild is its release), so the version a feed states would mean another one
    than PEP 440, and the diff a reviewer reads, say: ``fixed: 0.63.1+a`` would let 0.63.1
    run, which PEP 440 puts below it."""
    public, plus, local = value.partition("+")
    if not plus:
        return None
    return (
        f"{show_value(value)} has a local version label (+{local}), which the gate ignores "
        f"(it compares releases): write the release, {public}"
    )


def _shaped_problem(value: str, limit: int, shape: re.Pattern[str], what: str) -> str | None:
    """A short token of a fixed shape: not empty, at most ``limit`` characters, and
    matching ``shape`` as a whole; ``what`` names the shape in the message."""
    if not value:
        return "must not be empty"
    if len(value) > limit:
        return f"too long: {len(value):,} characters (at most {limit})"
    if not shape.match(value):
        return f"{show_value(value)} is not {what}"
    return None


def advisory_id_problem(value: str) -> str | None:
    return _shaped_problem(
        value,
        MAX_ADVISORY_ID_CHARS,
        _ADVISORY_ID,
        "an advisory id (letters, digits and single hyphens, such as BSA-0001 or CVE-2024-1234)",
    )


def _listed_advisory_id_problem(value: str) -> str | None:
    """An advisory's own id or alias (schema 3): an advisory id, and never the pseudo-id
    "floor" in any case. Waivers name the below-floor refusal "floor"; an advisory called so
    would be waived by a waiver reviewed for the floor only."""
    problem = advisory_id_problem(value)
    if problem is None and value.casefold() == map_model.FLOOR_ID:
        return (
            f'{show_value(value)} is reserved: waivers name the floor "{map_model.FLOOR_ID}", '
            "so no advisory may be called so"
        )
    return problem


def note_problem(value: str) -> str | None:
    if not value:
        return "must not be empty (say why the floor exists)"
    if len(value) > MAX_NOTE_CHARS:
        return f"too long: {len(value):,} characters (at most {MAX_NOTE_CHARS:,})"
    # isprintable() refuses newlines, control and format characters (Cc, Cf: bidi overrides),
    # line and paragraph separators (Zl, Zp), surrogates and unassigned code points.
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        category = unicodedata.category(bad)
        what = unicodedata.name(bad, "") or _CATEGORY_WORDS.get(category, category)
        return (
            f"contains the non-printable character U+{ord(bad):04X} ({what}); "
            "a note is one line of printable text"
        )
    found = _NOTE_FORBIDDEN.search(value)
    if found is not None:
        text = found.group()
        why = _NOTE_FORBIDDEN_WHY.get(text, f"template syntax {text!r} (notes are data, not code)")
        return f"contains {why}"
    return None


_ENTRY_FIELDS = frozenset(map_model.ENTRY_FIELDS)
_FIELD_CHECKS = (
    ("min_safe_version", _version_problem),
    ("advisory_id", advisory_id_problem),
    ("note", note_problem),
)
