"""``floorctl publish``: the floor map as signed canonical JSON, for hosts to pick up.

The document is ``{"schema_version": 1, "floor_map_hash", "map_version", "expires",
"adapters"}`` in RFC 8785 bytes; ``floor-map.json.dsse`` signs exactly those bytes. The
runtime (``floorguard._maps.published_map``) accepts it only if signed by a trusted publisher
key, unexpired, self-consistent and not older than the map the host already has.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from floorctl import locking
from floorctl.errors import DowngradeRefused, ModuleError
from floorguard._base import atomic
from floorguard._base._canonical import canonical_bytes
from floorguard._base._time import format_ts
from floorguard._base.files import MAX_MAP_BYTES, read_regular
from floorguard._crypto import dsse
from floorguard._maps import host_map, published_map, versions
from floorguard._maps.active_map import BUILTIN_MAP_FILE, load_map_file
from floorguard._maps.map_model import unjudged_version
from floorguard._version import __version__
from floorguard.errors import FloorMapError, UnreadableFileError

if TYPE_CHECKING:
    from collections.abc import Callable

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

MAP_NAME = "floor-map.json"
LOCK_NAME = ".floor-map.json.publish.lock"
DEFAULT_EXPIRES_DAYS = 30


@dataclass(frozen=True)
class Published:
    map_path: Path
    signature_path: Path
    floor_map_hash: str
    map_version: int
    expires: str
    adapters: int


def build(module_text: str, source: str, expires: _dt.datetime) -> bytes:
    """Canonical bytes of the published map of a module, read as the gate reads a host's
    module (either layout; nothing it would refuse is signed). Raises ModuleError."""
    try:
        active = host_map.parse(module_text, source)
    except FloorMapError as exc:
        raise ModuleError(f"cannot publish: {exc}") from exc
    for adapter, entry in active.floor_map.items():
        unjudged = unjudged_version(entry)
        if unjudged is not None:
            order = versions.order_name(entry.order)
            raise ModuleError(
                f"cannot publish: {source}: floor map entry {adapter!r}: {unjudged!a} is not a "
                f"valid {order} version, so the gate could judge no {adapter} against it (it "
                f"refuses every {adapter} spawn)"
            )
    return canonical_bytes(
        published_map.document(active.floor_map, active.map_version, format_ts(expires))
    )


def refuse_rollback(map_path: Path, new: published_map.PublishedMap) -> None:
    """Refuse to replace a published map with an older one, or with another map of the same
    version: hosts that took the one there keep it (they never go back), so they would refuse
    the replacement and fall back to their built-in map. Raises DowngradeRefused.

    Whatever is at ``map_path`` that is not a readable published map (nothing, a damaged
    file) is simply replaced."""
    try:
        old = published_map.parse(
            read_regular(map_path, max_bytes=MAX_MAP_BYTES, what="published map"), str(map_path)
        )
    except (UnreadableFileError, FloorMapError, OSError):
        return
    if old.map_version > new.map_version:
        raise DowngradeRefused(
            f"{map_path} is map version {old.map_version}; publishing version "
            f"{new.map_version} over it would roll hosts back (they keep the newer one and "
            "refuse this); --allow-downgrade to publish it anyway"
        )
    if old.map_version == new.map_version and old.floor_map_hash != new.floor_map_hash:
        raise DowngradeRefused(
            f"{map_path} is another map of the same version {new.map_version} "
            f"({old.floor_map_hash}); hosts that took it refuse this one "
            f"({new.floor_map_hash}): refresh the module to a new map version first, or "
            "--allow-downgrade"
        )


def kept_by_hosts(done: Published) -> str | None:
    """Why hosts running the floorguard beside floorctl would keep their built-in map over
    the map just published (its version lower than the built-in map's, or equal with other
    adapters), or None: a host falls back to its built-in map then, saying so only on
    stderr, so whoever publishes hears it first."""
    builtin = load_map_file(BUILTIN_MAP_FILE)
    if done.map_version > builtin.map_version or (
        done.map_version == builtin.map_version and done.floor_map_hash == builtin.floor_map_hash
    ):
        return None
    which = "lower than" if done.map_version < builtin.map_version else "the same as"
    return (
        f"hosts running floorguard {__version__} will not use this map: its map version "
        f"{done.map_version} is {which} their built-in map's ({builtin.map_version}, "
        f"{builtin.floor_map_hash}), and they keep the built-in map (docs/floor-map.md, "
        "Published maps); number the module's next map above it with `floorctl refresh "
        f"--write --map-version {builtin.map_version + 1}` (or higher), then publish again"
    )


def publish(
    module: Path,
    out_dir: Path,
    signer: Callable[[], Ed25519PrivateKey],
    *,
    now: _dt.datetime,
    expires_in: _dt.timedelta,
    allow_downgrade: bool = False,
) -> Published:
    """Write ``out_dir/floor-map.json`` and its ``.dsse``, signed with the key ``signer``
    gives, asked for only once the map is fit to publish (it may make and announce the
    development key). Raises ModuleError, OSError, and DowngradeRefused (without
    ``allow_downgrade``) when the map already published there is newer, or another map of
    the same version."""
    try:
        data = read_regular(module, max_bytes=MAX_MAP_BYTES, what="floor-map module")
        text = data.decode("utf-8")
    except UnreadableFileError as exc:
        raise ModuleError(str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise ModuleError(f"{module}: cannot read the floor-map module: {exc}") from exc
    data = build(text, str(module), now + expires_in)
    parsed = published_map.parse(data, str(module))  # what the runtime will check, checked now
    map_path = out_dir / MAP_NAME
    if not allow_downgrade:
        refuse_rollback(map_path, parsed)  # before anything is made: a refusal changes nothing
    envelope = dsse.sign(published_map.PAYLOAD_TYPE, data, signer()).to_bytes()
    out_dir.mkdir(parents=True, exist_ok=True)
    # One publisher of a directory at a time, from the rollback check to the last rename: two
    # publishes of different maps of one version would both pass the check, the last winning.
    with locking.exclusive_lock(out_dir / LOCK_NAME, f"another publish to {out_dir}"):
        if not allow_downgrade:
            refuse_rollback(map_path, parsed)
        _write_pair(out_dir, map_path, data, envelope)
    return Published(
        map_path,
        out_dir / (MAP_NAME + published_map.SIGNATURE_SUFFIX),
        parsed.floor_map_hash,
        parsed.map_version,
        format_ts(parsed.expires),
        len(parsed.floor_map),
    )


def _write_pair(out_dir: Path, map_path: Path, data: bytes, envelope: bytes) -> None:
    signature_path = out_dir / (MAP_NAME + published_map.SIGNATURE_SUFFIX)
    # A map beside a signature of other bytes is refused by every host: a failed write puts
    # both back. A publish killed between the two renames leaves such a pair (refused, never
    # used) and its copies under fixed names, which the next publish clears as it rewrites both.
    backups = {
        path: path.with_name(f".{path.name}.publish.undo") for path in (map_path, signature_path)
    }
    for leftover in backups.values():
        leftover.unlink(missing_ok=True)
    with atomic.undoable([map_path, signature_path], backups):
        atomic.write_atomic(map_path, data)
        atomic.write_atomic(signature_path, envelope)
