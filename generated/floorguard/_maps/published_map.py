"""A signed, published floor map that a host may use instead of the built-in one.

``FLOORGUARD_FLOOR_MAP`` names a ``floor-map.json`` written by ``floorctl publish``. It is
used only when every check holds:

1. ``floor-map.json.dsse`` beside it signs its exact bytes with a threshold of the trusted
   publisher keys (``FLOORGUARD_TRUSTED_KEYS``, else the package's ``trusted_keys.json``,
   which trusts nobody by default);
2. it is exactly the canonical JSON ``{"schema_version": 1, "floor_map_hash", "map_version",
   "expires", "adapters"}`` and its adapters hash to its ``floor_map_hash``;
3. it is not expired (a frozen mirror cannot pin hosts to an old map forever);
4. its ``map_version`` is not lower than the built-in map's (no rollback below what the
   package ships), and at an equal version it is the same map;
5. its ``map_version`` is not lower than the highest published map accepted on this host
   (``FLOORGUARD_HOME/published-map.json``, see ``accepted_map``), and at an equal version
   it is the same map (same adapters; a re-signed copy with another expiry is the same map).

Otherwise the built-in map stays in force and the reason is printed on stderr, once per
distinct reason, but only if the built-in map is itself at least as new as the highest
accepted here; if not, the map in force cannot be established and every spawn is refused
(``FloorMapError``). Never a silent downgrade, never a silent fallback.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floorguard._base import _time
from floorguard._base._canonical import canonical_bytes
from floorguard._base.files import MAX_ENVELOPE_BYTES, MAX_TRUSTED_KEYS_BYTES, read_regular
from floorguard._crypto import dsse
from floorguard._maps.active_map import ActiveMap
from floorguard._maps.map_model import (
    MAP_VERSION_FORM,
    PUBLISHED_FIELDS,
    FloorMap,
    floor_map_hash,
    from_entries,
    is_map_version,
    to_entries,
)
from floorguard.errors import (
    FloorguardError,
    FloorMapError,
    UnreadableFileError,
    VerificationError,
)

ENV_MAP = "FLOORGUARD_FLOOR_MAP"
ENV_KEYS = "FLOORGUARD_TRUSTED_KEYS"
PAYLOAD_TYPE = "application/vnd.floorguard.floor-map+json"
SCHEMA_VERSION = 1
FIELDS = PUBLISHED_FIELDS
SIGNATURE_SUFFIX = ".dsse"
PACKAGE_KEYS = Path(__file__).parent.parent / "trusted_keys.json"
MAX_MAP_BYTES = 64 * 1024 * 1024  # files.MAX_MAP_BYTES


@dataclass(frozen=True)
class PublishedMap:
    floor_map: FloorMap
    floor_map_hash: str
    map_version: int
    expires: _dt.datetime
    source: str


def document(floor_map: FloorMap, map_version: int, expires: str) -> dict[str, Any]:
    """The published document of a map (``floorctl publish`` writes its canonical bytes)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "floor_map_hash": floor_map_hash(floor_map),
        "map_version": map_version,
        "expires": expires,
        "adapters": to_entries(floor_map),
    }


def parse(data: bytes, source: str) -> PublishedMap:
    """Check a published map's bytes (shape, canonical form, hash). Raises FloorMapError."""

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise FloorMapError(f"{source}: duplicate JSON key")
        return dict(pairs)

    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=refuse_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FloorMapError(f"{source}: not a JSON document") from exc
    if not isinstance(doc, dict) or set(doc) != FIELDS:
        raise FloorMapError(f"{source}: fields must be exactly {', '.join(sorted(FIELDS))}")
    if type(doc["schema_version"]) is not int or doc["schema_version"] != SCHEMA_VERSION:
        raise FloorMapError(f"{source}: unsupported schema_version {doc['schema_version']!r}")
    version = doc["map_version"]
    if not is_map_version(version):
        raise FloorMapError(f"{source}: map_version is not {MAP_VERSION_FORM}")
    try:
        expires = _time.parse_ts(doc["expires"])
    except FloorguardError as exc:
        raise FloorMapError(f"{source}: expires is not an RFC 3339 time") from exc
    floor_map = from_entries(doc["adapters"])
    actual = floor_map_hash(floor_map)
    if actual != doc["floor_map_hash"]:
        raise FloorMapError(
            f"{source}: hash mismatch: it states {doc['floor_map_hash']} but its adapters "
            f"hash to {actual}"
        )
    if canonical_bytes(doc) != data:
        raise FloorMapError(f"{source}: not in canonical form (floorctl publish writes RFC 8785)")
    return PublishedMap(floor_map, actual, version, expires, source)


def _read(path: Path, limit: int, what: str) -> bytes:
    # Never blocks: a FIFO or device named here is refused at once, by name.
    try:
        return read_regular(path, max_bytes=limit, what=what)
    except UnreadableFileError as exc:
        raise FloorMapError(str(exc)) from exc


def trusted_keys_path(environ: Mapping[str, str]) -> Path:
    given = environ.get(ENV_KEYS)
    return Path(given) if given else PACKAGE_KEYS


def load(path: Path, keys_path: Path, builtin: ActiveMap, now: _dt.datetime) -> PublishedMap:
    """The published map at ``path`` if it may replace ``builtin``. Raises FloorguardError."""
    from floorguard._crypto import trust

    data = _read(path, MAX_MAP_BYTES, "published floor map")
    envelope = _read(Path(str(path) + SIGNATURE_SUFFIX), MAX_ENVELOPE_BYTES, "signature")
    try:
        trusted = trust.parse_trusted_keys(
            _read(keys_path, MAX_TRUSTED_KEYS_BYTES, "trusted keys"), str(keys_path)
        )
    except VerificationError as exc:
        if keys_path != PACKAGE_KEYS:
            raise
        # The package's own file trusts nobody by design: name the setting that fixes it.
        raise VerificationError(f"{exc} (set {ENV_KEYS} to the publisher's public key)") from exc
    trust.verify_detached(data, envelope, trusted, payload_type=PAYLOAD_TYPE)
    published = parse(data, str(path))
    check_current(published, builtin, now)
    return published


def check_current(published: PublishedMap, builtin: ActiveMap, now: _dt.datetime) -> None:
    """Expiry and version against the built-in map. Raises FloorMapError."""
    if published.expires < now:
        raise FloorMapError(
            f"expired at {_time.format_ts(published.expires)} (now {_time.format_ts(now)})"
        )
    if published.map_version < builtin.map_version:
        raise FloorMapError(
            f"map_version {published.map_version} is lower than the built-in map's "
            f"{builtin.map_version} (a downgrade)"
        )
    if (
        published.map_version == builtin.map_version
        and published.floor_map_hash != builtin.floor_map_hash
    ):
        raise FloorMapError(
            f"map_version {published.map_version} equals the built-in map's but the maps "
            "differ; a publisher raises the version for every change"
        )


_lock = threading.Lock()
_warned: set[str] = set()
_verified: dict[tuple[Any, ...], PublishedMap] = {}


def _identity(*paths: Path) -> tuple[Any, ...]:
    found: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return ()  # unreadable: never cached
        found.append((str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(found)


def _verified_published(
    name: str, keys_path: Path, builtin: ActiveMap, now: _dt.datetime
) -> PublishedMap:
    """The signature-checked published map, re-verified only when a file's identity changes."""
    path = Path(name)
    key = _identity(path, Path(name + SIGNATURE_SUFFIX), keys_path)
    with _lock:
        cached = _verified.get(key) if key else None
    if cached is not None and cached.source == name:
        # The signature was checked for these exact files; freshness is judged every call.
        check_current(cached, builtin, now)
        return cached
    published = load(path, keys_path, builtin, now)
    if key:
        with _lock:
            _verified.clear()  # only the newest files are worth keeping
            _verified[key] = published
    return published


def select(
    builtin: ActiveMap, environ: Mapping[str, str], now: _dt.datetime | None = None
) -> ActiveMap:
    """The map in force: the published one if it passes every check, else ``builtin``.

    The published map must also be at least as new as the highest published map accepted
    on this host (``accepted_map``): an older one is a rollback, another map at the same
    version a conflict. When it cannot be used, ``builtin`` stays in force (the reason goes
    to stderr, once per reason) only if it is itself at least as new as that highest
    accepted map; otherwise FloorMapError is raised, so every spawn is refused.
    Raises FloorMapError also when the record of accepted maps is unreadable or damaged.
    """
    from floorguard._maps import accepted_map

    name = environ.get(ENV_MAP)
    if not name:
        return builtin
    try:
        dsse.require_cryptography(f"{ENV_MAP}={name}")
    except VerificationError as exc:
        # Fail closed: the host asked for a signed map, so the built-in one must not stand
        # in just because this environment cannot check signatures.
        raise FloorMapError(f"{exc}; every spawn is refused until it is") from exc
    keys_path = trusted_keys_path(environ)
    moment = now or _time.utc_now()
    record = accepted_map.state_path(environ)
    highest = accepted_map.read(record)
    try:
        published = _verified_published(name, keys_path, builtin, moment)
        accepted_map.check(published.map_version, published.floor_map_hash, highest, record)
        if highest is None or published.map_version > highest.map_version:
            # Remember it before using it: a map that cannot be remembered is not used.
            accepted_map.accept(record, published.map_version, published.floor_map_hash)
    except FloorguardError as exc:
        # Judged against the record as it is now, not as first read: another host may have
        # accepted a newer map meanwhile (that is often why this one was refused).
        highest = accepted_map.read(record)
        if highest is not None and not accepted_map.covers(
            builtin.map_version, builtin.floor_map_hash, highest
        ):
            raise FloorMapError(
                f"{ENV_MAP}={name} cannot be used: {exc}; the built-in floor map (version "
                f"{builtin.map_version}) is older than published map version "
                f"{highest.map_version} already accepted on this host ({record}), so it "
                "cannot stand in"
            ) from exc
        _warn(
            f"floorguard: {ENV_MAP}={name} is not used: {exc}; the built-in floor map "
            f"(version {builtin.map_version}, {builtin.floor_map_hash}) stays in force"
        )
        return builtin
    return ActiveMap(published.floor_map, published.floor_map_hash, published.map_version, name)


def _warn(message: str) -> None:
    with _lock:
        if message in _warned:
            return
        _warned.add(message)
    from floorguard._base._text import one_line

    print(one_line(message), file=sys.stderr, flush=True)
