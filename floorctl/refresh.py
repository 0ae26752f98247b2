"""The main job: feeds in, a regenerated floor-map block, a signed update receipt out.

``plan`` is pure: it reads nothing and writes nothing, so every refusal (invalid feed,
hand-edited block, downgrade, a render that is not data only) happens before any file is
touched. ``apply`` then writes in an order that can be undone if anchoring fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorctl import merge, render, splice
from floorctl.errors import DowngradeRefused, DriftError, ModuleError
from floorctl.feeds import Feed
from floorguard import receipts
from floorguard._canonical import canonical_bytes
from floorguard.errors import UnreadableFileError
from floorguard.files import MAX_MAP_BYTES, read_regular_if_exists
from floorguard.floormap import FloorMap, floor_map_hash, from_entries, to_entries

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from floorguard.chain import AuditChain

ARCHIVE_DIR = "maps"


@dataclass(frozen=True)
class RefreshPlan:
    module: Path
    template: str
    old_text: str
    new_text: str
    old_map: FloorMap
    new_map: FloorMap
    old_hash: str
    new_hash: str
    old_version: int
    new_version: int
    diff: merge.MapDiff
    conflicts: tuple[merge.Conflict, ...]
    feeds: tuple[Feed, ...]
    drift: bool
    forced: bool
    downgrade_allowed: bool
    # The time expiry was judged against, and whether it came from the clock or --now.
    reference_time: str | None = None
    reference_time_source: str | None = None

    @property
    def stale(self) -> bool:
        """The module on disk differs from what the feeds say it should be."""
        return self.new_text != self.old_text


def plan(
    feeds: Sequence[Feed],
    module: Path,
    module_text: str,
    template_name: str,
    *,
    force: bool = False,
    allow_downgrade: bool = False,
    reference_time: str | None = None,
    reference_time_source: str | None = None,
) -> RefreshPlan:
    """Decide the new module text. Raises DriftError, DowngradeRefused, ModuleError, RenderError."""
    template = render.load_template(template_name)
    split, current = render.read_module(module_text, str(module))
    old_map = from_entries(current.entries)
    data_hash = floor_map_hash(old_map)
    drift = current.stated_hash is not None and current.stated_hash != data_hash
    if drift and not force:
        raise DriftError(
            f"{module}: the floor-map block was edited by hand (it states "
            f"{current.stated_hash} but its data hashes to {data_hash}); "
            "re-run with --force to overwrite it"
        )
    merged = merge.merge([(feed.source, feed.floor_map) for feed in feeds])
    changes = merge.diff(old_map, merged.floor_map)
    if changes.is_downgrade and not allow_downgrade:
        what = [f"removes {name}" for name in changes.removed]
        what += [f"lowers the floor of {name}" for name in changes.lowered]
        raise DowngradeRefused(
            f"{module}: refusing a downgrade: the new map {', '.join(what)}; "
            "pass --allow-downgrade to accept it (the receipt records that)"
        )
    new_hash = floor_map_hash(merged.floor_map)
    unchanged = changes.empty and not drift and current.stated_hash == new_hash
    new_version = current.map_version if unchanged else current.map_version + 1
    new_text = module_text
    if not unchanged:
        block = render.render_block(
            template, to_entries(merged.floor_map), map_hash=new_hash, map_version=new_version
        )
        new_text = splice.splice(split, block)
    return RefreshPlan(
        module=module,
        template=template.name,
        old_text=module_text,
        new_text=new_text,
        old_map=old_map,
        new_map=merged.floor_map,
        # The map legitimately in force is the one the block vouches for.
        old_hash=current.stated_hash if current.stated_hash is not None else data_hash,
        new_hash=new_hash,
        old_version=current.map_version,
        new_version=new_version,
        diff=changes,
        conflicts=merged.conflicts,
        feeds=tuple(feeds),
        drift=drift,
        forced=drift and force,
        downgrade_allowed=allow_downgrade,
        reference_time=reference_time,
        reference_time_source=reference_time_source,
    )


def update_receipt(refresh: RefreshPlan, *, ts: str | None = None) -> dict[str, Any]:
    """The floor-update receipt binding the old and new floor-map hashes.

    Feeds are described with their identity, version and expiry (schema 2) and signers;
    ``reference_time`` records the time their expiry was judged against.
    """
    freshness: dict[str, Any] = {}
    if refresh.reference_time is not None:
        freshness = {
            "reference_time": refresh.reference_time,
            "reference_time_source": refresh.reference_time_source,
        }
    return receipts.new_receipt(
        receipts.FLOOR_UPDATE,
        {
            **freshness,
            "old_floor_map_hash": refresh.old_hash,
            "new_floor_map_hash": refresh.new_hash,
            "old_map_version": refresh.old_version,
            "new_map_version": refresh.new_version,
            "new_floor_map": to_entries(refresh.new_map),
            "diff": refresh.diff.to_json(),
            "downgrade": refresh.diff.is_downgrade,
            "downgrade_allowed": refresh.downgrade_allowed,
            "conflicts": [conflict.describe() for conflict in refresh.conflicts],
            "feeds": [f.identity() for f in refresh.feeds],
            "changed": refresh.stale,
            "forced": refresh.forced,
            "template": refresh.template,
        },
        ts=ts,
    )


def archive_path(module: Path, map_hash: str) -> Path:
    return module.parent / ARCHIVE_DIR / (map_hash.replace(":", "-") + ".json")


def archive_map(module: Path, floor_map: FloorMap) -> Path:
    """Keep a map as canonical JSON under its own hash, so old receipts stay resolvable."""
    path = archive_path(module, floor_map_hash(floor_map))
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        splice.write_atomic(path, canonical_bytes(to_entries(floor_map)))
    return path


@dataclass(frozen=True)
class Outcome:
    written: bool
    receipt_id: str | None
    anchored_seq: int | None


def apply(
    refresh: RefreshPlan,
    *,
    receipt_out: Path | None,
    signing_key: Callable[[], Ed25519PrivateKey] | None,
    chain: Callable[[], AuditChain] | None,
) -> Outcome:
    """Write the module, the receipt and the chain record; all of them or none.

    The chain append comes last: if it fails, the module and receipt file are put back as
    they were, so no map is in force without its anchored receipt.
    """
    receipt = update_receipt(refresh) if (receipt_out or chain) else None
    envelope = None
    if receipt is not None and receipt_out is not None:
        if signing_key is None:
            raise ValueError("a receipt file needs a signing key")
        envelope = receipts.sign_update_receipt(receipt, signing_key()).to_bytes()
    audit = chain() if chain is not None else None

    if refresh.stale:
        if not refresh.drift:
            archive_map(refresh.module, refresh.old_map)
        archive_map(refresh.module, refresh.new_map)
    undo: list[Callable[[], None]] = []
    try:
        if envelope is not None and receipt_out is not None:
            undo.append(_restorer(receipt_out))
            splice.write_atomic(receipt_out, envelope)
        if refresh.stale:
            undo.append(_restorer(refresh.module))
            splice.write_atomic(refresh.module, refresh.new_text.encode("utf-8"))
        seq = None
        if audit is not None and receipt is not None:
            seq = audit.append(receipts.FLOOR_UPDATE, receipt).seq
    except BaseException:
        for step in reversed(undo):
            step()
        raise
    return Outcome(
        written=refresh.stale,
        receipt_id=receipts.receipt_id(receipt) if receipt is not None else None,
        anchored_seq=seq,
    )


def _restorer(path: Path) -> Callable[[], None]:
    """A closure that puts ``path`` back as it is now (or removes it if it does not exist)."""
    try:
        previous = read_regular_if_exists(path, max_bytes=MAX_MAP_BYTES, what="floor-map module")
    except UnreadableFileError as exc:
        raise ModuleError(str(exc)) from exc

    def restore() -> None:
        if previous is None:
            path.unlink(missing_ok=True)
        else:
            splice.write_atomic(path, previous)

    return restore
