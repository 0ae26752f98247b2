"""RFC 3339 timestamps in UTC with a ``Z``: the only form this project writes."""

from __future__ import annotations

import datetime as _dt
import re
from functools import lru_cache

from floorguard.errors import FloorguardError


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def format_ts(moment: _dt.datetime) -> str:
    """``2026-11-30T03:05:18.123456Z``; naive datetimes are refused, not guessed."""
    if moment.tzinfo is None:
        raise FloorguardError("refusing to format a timestamp without a timezone")
    utc = moment.astimezone(_dt.UTC)
    # Formatted by hand: strftime was a measurable part of every preflight (three stamps a
    # decision); one %-format costs 0.9 us, an f-string of seven format specs 1.5.
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031 (the faster form)
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond,
    )  # fmt: skip


def now_ts() -> str:
    return format_ts(utc_now())


# What ``format_ts`` writes, field by field in range (a regular expression, no groups);
# the day of the month is checked against its month (and year 0 refused) by ``_real_day``.
CHAIN_TS_PATTERN = (
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
)
_CHAIN_TS = re.compile(CHAIN_TS_PATTERN)
CHAIN_TS_FORM = "YYYY-MM-DDTHH:MM:SS.ffffffZ"


def is_chain_ts(text: str) -> bool:
    """Whether ``text`` is exactly what ``format_ts`` writes for some moment: RFC 3339 in
    UTC with ``Z``, every field zero-padded, six fractional digits (27 characters).

    Every chain record is stamped so (``format_ts``, or the PostgreSQL server's
    ``to_char`` in the same form), and such stamps sort as text in time order: two of
    them compare as their moments do, with no datetime made.
    """
    return _CHAIN_TS.fullmatch(text) is not None and _real_day(text[:10])


@lru_cache(maxsize=1024)
def _real_day(day: str) -> bool:
    """``YYYY-MM-DD`` names a day of the proleptic Gregorian calendar (no 30 February, no
    year 0). Cached: the records of a chain share few days."""
    try:
        _dt.date.fromisoformat(day)
    except ValueError:
        return False
    return True


def _is_rfc3339_form(text: str) -> bool:
    """Whether ``text`` has RFC 3339's date-time form (section 5.6): YYYY-MM-DDTHH:MM:SS,
    an optional fraction of at least one digit, then Z or +HH:MM with HH 00-23 and MM 00-59.
    (datetime.fromisoformat, which checks the values, also takes ISO 8601 forms that are
    not: no seconds, a comma, the basic format, week dates, an offset without its colon.)"""
    if len(text) < 20 or not text.isascii():
        return False
    date, t, clock = text[:10], text[10], text[11:19]
    if t not in "Tt" or date[4] + date[7] != "--" or clock[2] + clock[5] != "::":
        return False
    digits = date[:4] + date[5:7] + date[8:] + clock[:2] + clock[3:5] + clock[6:]
    if not digits.isdigit():
        return False
    rest = text[19:]
    if rest[:1] == ".":
        fraction = len(rest) - len(rest[1:].lstrip("0123456789")) - 1
        if fraction < 1:
            return False
        rest = rest[1 + fraction :]
    if rest in ("Z", "z"):
        return True
    return (
        len(rest) == 6
        and rest[0] in "+-"
        and rest[3] == ":"
        and (rest[1:3] + rest[4:]).isdigit()
        and int(rest[1:3]) <= 23
        and int(rest[4:]) <= 59
    )


def parse_ts(text: str) -> _dt.datetime:
    """Parse RFC 3339 with ``Z`` or an explicit offset; anything else raises FloorguardError."""
    if not isinstance(text, str) or not _is_rfc3339_form(text):
        raise FloorguardError(f"not an RFC 3339 timestamp: {text!r}")
    candidate = text.strip()
    if candidate != text:
        raise FloorguardError(f"not an RFC 3339 timestamp: {text!r}")
    if candidate[-1:] in ("Z", "z"):
        candidate = candidate[:-1] + "+00:00"
    try:
        moment = _dt.datetime.fromisoformat(candidate)
    except ValueError as exc:
        raise FloorguardError(f"not an RFC 3339 timestamp: {text!r}") from exc
    if moment.tzinfo is None:
        raise FloorguardError(f"timestamp has no timezone (use Z or an offset): {text!r}")
    try:
        return moment.astimezone(_dt.UTC)
    except OverflowError as exc:  # 9999-12-31T23:59:59-23:59 is year 10000 in UTC
        raise FloorguardError(f"timestamp is out of range in UTC: {text!r}") from exc


def parse_ts_ceiling(text: str) -> _dt.datetime:
    """parse_ts, rounded up to the next microsecond when a digit past the sixth is not zero
    (a datetime holds microseconds: cut there, a later instant reads as an earlier one): a
    window's start, or a time that must not be after another. Raises FloorguardError, also
    when rounding up leaves the range of times held."""
    moment = parse_ts(text)
    fraction = text[20:] if text[19:20] == "." else ""
    digits = fraction[: len(fraction) - len(fraction.lstrip("0123456789"))]
    if digits[6:].strip("0"):
        try:
            moment += _dt.timedelta(microseconds=1)
        except OverflowError as exc:
            raise FloorguardError(f"timestamp is out of range once rounded up: {text!r}") from exc
    return moment


def window_order_error(since: _dt.datetime | None, until: _dt.datetime | None) -> str | None:
    """Why a window from ``since`` (parse_ts_ceiling) to ``until`` (parse_ts) is refused, or
    None. One microsecond apart the wrong way, the ends as typed may both lie inside one
    microsecond in either order (``.0000051`` to ``.0000059``): that is said, rather than
    that the start typed first is later."""
    if since is None or until is None or since <= until:
        return None
    if since - until == _dt.timedelta(microseconds=1):
        return (
            "--since is not before --until once both are taken to the microsecond records "
            "are stamped with (--since rounded up, --until down): no record's time lies "
            "between them"
        )
    return "--since is later than --until"


UTC_Z_FORM = "an RFC 3339 UTC time with Z and at most six fractional digits"


def is_utc_z(text: object) -> bool:
    """Whether ``text`` is a time as this project writes one for a reviewer to read: RFC
    3339, UTC with ``Z``, at most six fractional digits (more would be cut to microseconds).
    A waiver's ``expires`` must be one: an offset is refused rather than normalised, so what
    was approved reads the same in the waivers document, the diff and the map."""
    if not isinstance(text, str) or not text.endswith("Z"):
        return False
    try:
        parse_ts(text)
    except FloorguardError:
        return False
    return len(text[:-1].partition(".")[2]) <= 6
