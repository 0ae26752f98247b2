"""Rollback, mix-and-match and freeze protection for version-2 feeds.

What floorctl has accepted is remembered per ``feed_id`` (version and digest) in a state file
outside the generated module: ``feeds-state.json`` in floorctl's state directory, or a file
a pipeline names with ``--state-file`` and commits. The checks are pure; the file is read
at the edge and written atomically only after the feed was written.

- rollback: a version lower than the last accepted one is refused, even if validly signed;
- mix-and-match: the same version with different bytes is refused (one version, one content);
- freeze: a feed whose own ``expires`` is before the reference time is refused;
- stripping: once a ``feed_id`` was accepted with a verified signature, other bytes for it
  that are not signed by trusted keys (the signature deleted, or left unchecked because no
  key is trusted) are refused; the very bytes accepted then still are.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from floorctl import keys, locking
from floorctl.errors import FreshnessError
from floorctl.feed_rules import FEED_ID, MAX_FEED_VERSION
from floorctl.feeds import Feed
from floorguard._base import atomic
from floorguard._base._canonical import RepeatedKey, is_digest, loads_strict
from floorguard._base._time import format_ts, parse_ts
from floorguard._base.files import read_regular
from floorguard._base.folders import make_private_folder
from floorguard.errors import FloorguardError, UnreadableFileError

STATE_NAME = "feeds-state.json"
STATE_SCHEMA_VERSION = 1
MAX_STATE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Accepted:
    """The last accepted version of one feed_id."""

    version: int
    digest: str
    expires: str
    accepted_at: str
    signed: bool = False  # accepted with a signature that verified against trusted keys


@dataclass(frozen=True)
class FreshnessState:
    feeds: Mapping[str, Accepted] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": STATE_SCHEMA_VERSION,
            "feeds": {
                feed_id: {
                    "version": a.version,
                    "digest": a.digest,
                    "expires": a.expires,
                    "accepted_at": a.accepted_at,
                    # Only when true: a state of unsigned feeds is written as before.
                    **({"signed": True} if a.signed else {}),
                }
                for feed_id, a in sorted(self.feeds.items())
            },
        }


def default_path(environ: Mapping[str, str]) -> Path:
    return keys.state_dir(environ) / STATE_NAME


def load_state(path: Path) -> FreshnessState:
    """The state in ``path``; empty when the file does not exist.

    Raises FreshnessError when it exists but cannot be read or is malformed: forgetting what
    was accepted would reopen the door to rollbacks, so a damaged file is never reset silently.
    """

    def bad(why: str) -> FreshnessError:
        return FreshnessError(
            f"{path}: feed state is damaged ({why}); restore it from version control or a "
            "backup (deleting it forgets which versions were accepted)"
        )

    try:
        data = read_regular(path, max_bytes=MAX_STATE_BYTES, what="feed state")
    except UnreadableFileError as exc:
        if exc.missing:
            return FreshnessState()
        if exc.too_large:
            raise bad("larger than 16 MiB") from exc
        raise FreshnessError(str(exc)) from exc
    try:
        # Strictly: a key held twice is read one way here and another by whoever reviews
        # the file (the last of two versions wins for json.loads).
        document = loads_strict(data)
    except RepeatedKey as exc:
        raise bad(str(exc)) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        # (json.JSONDecodeError, an integer past Python's digit limit, NaN; nesting)
        raise bad("not JSON a feed state can hold") from None
    if (
        not isinstance(document, dict)
        or document.get("schema_version") != STATE_SCHEMA_VERSION
        or not isinstance(document.get("feeds"), dict)
    ):
        raise bad("not a feed state document of schema_version 1")
    accepted: dict[str, Accepted] = {}
    for feed_id, entry in document["feeds"].items():
        if (
            not FEED_ID.match(feed_id)  # (what a feed may name itself and number:
            or not isinstance(entry, dict)
            or type(entry.get("version")) is not int
            or not 1 <= entry["version"] <= MAX_FEED_VERSION  # schemas/feed.v2)
            or not is_digest(entry.get("digest"))
            or type(entry.get("signed", False)) is not bool
        ):
            raise bad(f"entry {feed_id!r} is malformed")
        # Held to the form floorctl writes them in, as every time it reads: a state edited
        # by hand is damaged, not taken for whatever the text happens to say.
        for name in ("expires", "accepted_at"):
            text = entry.get(name)
            try:
                parse_ts(text if isinstance(text, str) else "")
            except FloorguardError:
                raise bad(f"entry {feed_id!r}: {name} is not an RFC 3339 time") from None
        accepted[feed_id] = Accepted(
            entry["version"],
            entry["digest"],
            entry["expires"],
            entry["accepted_at"],
            entry.get("signed", False),
        )
    return FreshnessState(MappingProxyType(accepted))


def check(state: FreshnessState, feed: Feed, now: _dt.datetime) -> None:
    """Refuse an expired, rolled-back or mixed-up feed. Version-1 feeds carry no freshness.

    Raises FreshnessError naming the attack it stops.
    """
    if feed.schema_version < 2 or feed.feed_id is None or feed.version is None:
        return
    try:
        expires = parse_ts(feed.expires or "")
    except FloorguardError as exc:  # parse_feed normalised it; fail closed anyway
        raise FreshnessError(f"{feed.source}: expires is not a timestamp") from exc
    if expires < now:
        raise FreshnessError(
            f"{feed.source}: expired feed refused (freeze attack protection): feed "
            f"{feed.feed_id!r} version {feed.version} expired at {feed.expires}, "
            f"reference time {format_ts(now)}"
        )
    previous = state.feeds.get(feed.feed_id)
    if previous is None:
        return
    # The very bytes accepted signed before were verified then: only other bytes need keys.
    if previous.signed and not feed.signed_by and feed.digest != previous.digest:
        raise FreshnessError(
            f"{feed.source}: unsigned copy of feed {feed.feed_id!r} refused (signature "
            f"stripping protection): version {previous.version} was accepted signed by trusted "
            "keys, and this copy is not (no signature, or no key trusted to check it: pass "
            "--trusted-keys)"
        )
    if feed.version < previous.version:
        raise FreshnessError(
            f"{feed.source}: rolled-back feed version refused (rollback attack protection): "
            f"feed {feed.feed_id!r} version {feed.version} is older than version "
            f"{previous.version}, already accepted"
        )
    if feed.version == previous.version and feed.digest != previous.digest:
        raise FreshnessError(
            f"{feed.source}: feed {feed.feed_id!r} version {feed.version} has different bytes "
            f"({feed.digest}) than the copy of that version already accepted "
            f"({previous.digest}); refused (mix-and-match protection: a publisher bumps the "
            "version for every change)"
        )


def accept(state: FreshnessState, feeds: Sequence[Feed], now: _dt.datetime) -> FreshnessState:
    """``state`` after accepting ``feeds`` (each checked first, in order). Raises FreshnessError."""
    updated = dict(state.feeds)
    for feed in feeds:
        check(FreshnessState(MappingProxyType(updated)), feed, now)
        if feed.feed_id is None or feed.version is None or feed.expires is None:
            continue
        previous = updated.get(feed.feed_id)
        # Accepted unsigned past a signed memory only as the same bytes: still signed.
        signed = bool(feed.signed_by) or (previous is not None and previous.signed)
        updated[feed.feed_id] = Accepted(
            feed.version, feed.digest, feed.expires, format_ts(now), signed
        )
    return FreshnessState(MappingProxyType(updated))


def save_state(path: Path, state: FreshnessState) -> None:
    """Write the state atomically (pretty JSON: pipelines commit and review this file)."""
    make_private_folder(path.parent)
    text = json.dumps(state.to_json(), indent=2, sort_keys=True) + "\n"
    atomic.write_atomic(path, text.encode("utf-8"))


@contextlib.contextmanager
def state_lock(
    state: Path, *, notify: Callable[[str], None] = lambda _message: None
) -> Iterator[None]:
    """Hold the lock of a feed-state file, which every refresh and fetch shares: from
    reading it to saving it, so that no command saves over what another accepted."""
    make_private_folder(state.parent)
    lock = state.parent / f".{state.name}.lock"
    with locking.exclusive_lock(lock, f"another command using {state}", notify=notify):
        yield
