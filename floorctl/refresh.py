"""The main job: feeds in, a regenerated floor-map block, a signed update receipt out.

``plan`` is pure: it reads nothing and writes nothing, so every refusal (invalid feed,
hand-edited block, downgrade, a render that is not data only) happens before any file is
touched. ``apply`` then writes in an order that can be undone if anchoring fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorctl import locking, merge, render, splice, waivers
from floorctl.bulk import without_cyclic_gc
from floorctl.errors import (
    ConcurrentUpdate,
    DowngradeRefused,
    DriftError,
    FloorctlError,
    ModuleError,
)
from floorctl.feeds import Feed
from floorctl.waivers import WaiversDocument
from floorguard._base import atomic
from floorguard._base._canonical import canonical_bytes, content_address, sha256_digest
from floorguard._base._time import parse_ts
from floorguard._base.files import MAX_MAP_BYTES, open_regular, read_regular
from floorguard._maps.map_model import (
    MAX_MAP_VERSION,
    FloorMap,
    floor_map_hash,
    from_entries,
    to_entries,
)
from floorguard.errors import FloorMapError, UnreadableFileError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from floorguard._chain.chain import AuditChain

ARCHIVE_DIR = "maps"
# How long a refresh waits for another refresh of the same module before giving up.


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
    # The waivers document attached to the map (None: the map holds no waivers).
    waivers: WaiversDocument | None = None
    # What the diff and the downgrade check compared the new map with: BASELINE_BLOCK (the
    # block, which matches its stated hash), BASELINE_ARCHIVE (a hand-edited block: the
    # archived map its stated hash vouches for) or BASELINE_EDITED (a hand-edited block
    # whose vouched map is not archived; only with --allow-downgrade).
    baseline: str = "block"
    # The new map's canonical JSON (what its hash is of), made once for the hash, the
    # archive and the receipt's size.
    new_map_canonical: bytes | None = field(default=None, repr=False, compare=False)
    # The map version of a killed refresh's map that was in force and was undone: the new
    # map is numbered above it (None: nothing undone since the last write).
    undone_version: int | None = None

    @property
    def stale(self) -> bool:
        """The module on disk differs from what the feeds say it should be."""
        return self.new_text != self.old_text


BASELINE_BLOCK = "block"
BASELINE_ARCHIVE = "archived_map"
BASELINE_EDITED = "hand_edited_block"


@without_cyclic_gc
def refused_downgrade(module: Path, changes: merge.MapDiff, baseline: str) -> DowngradeRefused:
    """The refusal of a map that lowers a floor, drops an adapter or narrows an advisory."""
    against = " (against the map the hand-edited block should hold)"
    return DowngradeRefused(
        f"{module}: refusing a downgrade: the new map {changes.summary()}"
        f"{against if baseline == BASELINE_ARCHIVE else ''}; "
        "pass --allow-downgrade to accept it (the receipt records that)"
    )


def plan(
    feeds: Sequence[Feed],
    module: Path,
    module_text: str,
    template_name: str | None,
    *,
    force: bool = False,
    allow_downgrade: bool = False,
    check: bool = False,
    reference_time: str | None = None,
    reference_time_source: str | None = None,
    waiver_document: WaiversDocument | None = None,
    archived: Callable[[str], FloorMap | None] = lambda _hash: None,
    holds_archive: Callable[[str], bool] = lambda _hash: True,
    written: Mapping[int, str] | None = None,
    progress: Callable[[str], None] | None = None,
    undone_version: int | None = None,
    map_version: int | None = None,
) -> RefreshPlan:
    """Decide the new module text. Raises DriftError, DowngradeRefused, ModuleError,
    RenderError, WaiversError (a waiver that does not fit the map, or is expired at
    ``reference_time``, which waivers need).

    ``archived`` gives the map archived under a hash, or None (``load_archived_map``);
    ``holds_archive`` whether a map that hashes to a hash is archived (``holds_archived_map``).
    A block stating a hash and a map version of 1 or more claims a refresh wrote it, and a
    refresh archives every map it writes: without that map archived, the block is taken
    for a hand edit that restated its hash (or a block whose archive was removed), as if
    its data did not match it. ``written`` (``read_written``): the maps refresh wrote into
    this module, by version; when there is such a record, a block that is not the last of
    them (another version, another hash, no hash) is a hand edit, judged against that last
    map, and the new map is numbered above every version in it.
    Over a hand edit (with ``force``) the diff and the downgrade check are against the map
    the block's stated hash vouches for, never the edited data: an edit must not hide a
    removal from them. If that map is not archived, only ``allow_downgrade`` lets the
    refresh go on, and the diff is then against the edited block (``baseline`` says so).
    With ``check`` (nothing will be written) a downgrade is planned rather than refused:
    the caller reports the module stale and the plan's diff says it is a downgrade.
    ``progress`` (if any) hears the name of each stage as it starts. ``template_name``
    None: the layout the block is in (floorguard for an empty module). ``undone_version``
    (from ``recover_interrupted``): the new map is numbered above it, and written even if
    it is the map the module holds. ``map_version``: the new map's number, chosen by the
    publisher (above every version the module held, else ModuleError); the map is written
    with it even if its data is unchanged.
    """
    if progress is not None:
        progress(f"reading the floor-map block of {module}")
    split, current = render.read_module(module_text, str(module))
    problem = render.outside_problem(split, str(module))
    if problem is not None:
        # (a module every host refuses is no module to refresh, nor one --check may pass)
        raise ModuleError(f"{problem}: floorguard refuses this module as a floor map")
    # Without a template named, the block keeps the layout it is in (what its host imports).
    template = render.load_template(template_name or current.layout or render.FLOORGUARD)
    old_map = from_entries(current.entries)
    data_hash = floor_map_hash(old_map)
    drift = current.stated_hash is not None and current.stated_hash != data_hash
    if drift and not force:
        raise DriftError(
            f"{module}: the floor-map block was edited by hand (it states "
            f"{current.stated_hash} but its data hashes to {data_hash}); "
            "re-run with --force to overwrite it"
        )
    if (
        not drift
        and current.stated_hash is not None
        and current.map_version >= 1
        and not holds_archive(current.stated_hash)
    ):
        drift = True
        if not force:
            raise DriftError(
                f"{module}: the floor-map block states map version {current.map_version} "
                f"({current.stated_hash}), which {archive_path(module, current.stated_hash)} "
                "does not hold: refresh archives every map it writes, so the block was "
                "edited by hand with its hash restated (or its archive was removed), and "
                "what it dropped cannot be checked as a downgrade; re-run with --force "
                "--allow-downgrade to overwrite it unchecked (the receipt records that)"
            )
    # The map this block should hold: the last one refresh wrote here, where that is
    # recorded; else the one its stated hash names.
    vouched_hash, vouched_version = current.stated_hash, current.map_version
    last = _last_written(written, undone_version)
    if last is not None:
        holds = (current.map_version, current.stated_hash, data_hash)
        if holds != (last[0], last[1], last[1]) and not drift:
            drift = True
            if not force:
                raise DriftError(
                    f"{module}: the floor-map block states map version {current.map_version} "
                    f"({current.stated_hash or 'no hash'}), but the last map refresh wrote "
                    f"here is version {last[0]} ({last[1]}), as {written_path(module)} "
                    "records: the block was edited by hand; re-run with --force to overwrite "
                    "it (what it dropped is then checked against that last map)"
                )
        vouched_hash, vouched_version = last[1], last[0]
    baseline, compared = BASELINE_BLOCK, old_map
    if drift and vouched_hash is not None:
        vouched = archived(vouched_hash)
        if vouched is not None:
            baseline, compared = BASELINE_ARCHIVE, vouched
        elif not allow_downgrade:
            raise DowngradeRefused(
                f"{module}: the block was edited by hand and the map {vouched_hash} it should "
                f"hold is not in {archive_path(module, vouched_hash)}, so --force cannot "
                "check the new map for downgrades against it; pass --allow-downgrade as well "
                "to overwrite the hand edit unchecked (the receipt records that)"
            )
        else:
            baseline = BASELINE_EDITED
    if progress is not None:
        progress(f"merging {len(feeds)} feed(s) and comparing with the map in force")
    merged = merge.merge([(feed.source, feed.floor_map) for feed in feeds])
    new_map = _with_waivers(merged.floor_map, waiver_document, reference_time)
    changes = merge.diff(compared, new_map)
    if changes.is_downgrade and not allow_downgrade and not check:
        raise refused_downgrade(module, changes, baseline)
    new_canonical = canonical_bytes(to_entries(new_map))
    new_hash = sha256_digest(new_canonical)  # floor_map_hash(new_map), from these bytes
    # A killed refresh's map was in force at undone_version: a host may have enforced it,
    # and would refuse another map at that version (or the older one put back) for ever.
    pending = undone_version is not None and undone_version > current.map_version
    unchanged = changes.empty and not drift and current.stated_hash == new_hash and not pending
    above = max(current.map_version, undone_version or 0, *(written or {}).keys())
    new_version = current.map_version if unchanged else above + 1
    if map_version is not None:
        # (a map renumbered with its data unchanged is a change too: the block states it)
        new_version, unchanged = _chosen_version(module, map_version, above), False
    new_text = module_text
    if not unchanged:
        if progress is not None:
            progress(f"rendering {len(new_map):,} adapters")
        # Rendered straight into the module's text, and checked there.
        new_text = render.render_module(
            template, new_map, split, map_hash=new_hash, map_version=new_version
        )
    return RefreshPlan(
        module=module,
        template=template.name,
        old_text=module_text,
        new_text=new_text,
        old_map=old_map,
        new_map=new_map,
        # The map legitimately in force: the one the block should hold.
        old_hash=vouched_hash if vouched_hash is not None else data_hash,
        new_hash=new_hash,
        old_version=vouched_version,
        new_version=new_version,
        diff=changes,
        conflicts=merged.conflicts,
        feeds=tuple(feeds),
        drift=drift,
        forced=drift and force,
        downgrade_allowed=allow_downgrade,
        reference_time=reference_time,
        reference_time_source=reference_time_source,
        waivers=waiver_document,
        baseline=baseline,
        new_map_canonical=new_canonical,
        undone_version=undone_version if pending else None,
    )


def _chosen_version(module: Path, chosen: int, above: int) -> int:
    """``chosen`` as the new map's version, if it can be. Raises ModuleError."""
    if chosen <= above:
        raise ModuleError(
            f"{module}: --map-version {chosen} is not above {above}, the highest map version "
            "this module has held: map versions only rise (a host that enforced a version "
            "refuses another map at it, and every lower one)"
        )
    return chosen


def written_path(module: Path) -> Path:
    """Where refresh records the maps it wrote into ``module``, by version: beside their
    archives, a hidden file of this module's own (``maps/`` may serve several modules)."""
    return module.parent / ARCHIVE_DIR / f".{module.name}.written.json"


def read_written(module: Path) -> dict[int, str] | None:
    """The maps refresh wrote into ``module``, by version (None: no record). Raises
    ModuleError for a record that cannot be read exactly."""
    path = written_path(module)
    if not os.path.lexists(path):
        return None
    try:
        document = json.loads(read_regular(path, max_bytes=MAX_MAP_BYTES, what="map record"))
    except (UnreadableFileError, ValueError, RecursionError) as exc:
        raise ModuleError(f"{path}: cannot read the record of the maps written here") from exc
    if not isinstance(document, dict) or not all(
        isinstance(key, str) and key.isascii() and key.isdecimal()
        and 0 < int(key) < MAX_MAP_VERSION and isinstance(value, str)
        and _MAP_HASH.fullmatch(value)
        for key, value in document.items()
    ):  # fmt: skip
        raise ModuleError(f"{path}: not a record of the maps written here ({{version: map hash}})")
    return {int(key): value for key, value in document.items()}


_MAP_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")


def _record_written(module: Path, version: int, map_hash: str) -> None:
    """Note that refresh puts the map ``map_hash`` into ``module`` as ``version``: before
    the module is replaced, so a map in force is always recorded (a version written and
    then undone stays recorded: it is never used again)."""
    written = read_written(module) or {}
    written[version] = map_hash
    data = json.dumps({str(v): h for v, h in sorted(written.items())}, indent=0)
    atomic.write_atomic(written_path(module), data.encode("ascii") + b"\n")


def _last_written(
    written: Mapping[int, str] | None, undone_version: int | None
) -> tuple[int, str] | None:
    """The last map refresh wrote and left in force (a version undone, and recorded above
    the module's, is not in force): (version, hash), or None without a record."""
    kept = {
        v: h for v, h in (written or {}).items() if undone_version is None or v < undone_version
    }
    if not kept:
        return None
    top = max(kept)
    return top, kept[top]


def load_archived_map(module: Path, map_hash: str) -> FloorMap | None:
    """The map archived beside ``module`` under ``map_hash`` (``maps/``, the canonical maps
    refresh keeps), or None when there is none there or it does not hash to ``map_hash``
    (the archive is content-addressed: another map under that name vouches for nothing),
    or its bytes are not the map's canonical JSON (which refresh writes, and
    ``holds_archived_map`` checks)."""
    path = archive_path(module, map_hash)
    try:
        data = read_regular(path, max_bytes=MAX_MAP_BYTES, what="archived floor map")
        if sha256_digest(data) != map_hash:
            return None
        archived = from_entries(json.loads(data))
    except (UnreadableFileError, FloorMapError, ValueError, RecursionError, TypeError):
        return None
    return archived if floor_map_hash(archived) == map_hash else None


def holds_archived_map(module: Path, map_hash: str) -> bool:
    """Whether ``maps/`` beside ``module`` holds, under ``map_hash``, a file whose bytes hash
    to it (the archive is the map's canonical JSON, which its hash is of): read as a stream,
    never parsed. True where there is no ``maps/`` at all (a module copied without it, as
    tests and hosts do): the archive is then not kept, and says nothing."""
    import hashlib  # noqa: PLC0415

    if not os.path.lexists(module.parent / ARCHIVE_DIR):
        return True
    digest = hashlib.sha256()
    try:
        with open_regular(archive_path(module, map_hash), what="archived floor map") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
    except UnreadableFileError:
        return False
    return f"sha256:{digest.hexdigest()}" == map_hash


def _with_waivers(
    merged: FloorMap, document: WaiversDocument | None, reference_time: str | None
) -> FloorMap:
    """The merged map with exactly the document's waivers, judged at the reference time.

    Feeds never carry waivers, so without a document the map holds none: a refresh without
    --waivers drops the ones the module held (which only tightens). Raises WaiversError.
    """
    if document is None:
        return merged
    if reference_time is None:
        raise ValueError("attaching waivers needs the reference time")
    return waivers.attach(merged, document, at=parse_ts(reference_time))


@without_cyclic_gc
def update_receipt(refresh: RefreshPlan, *, ts: str | None = None) -> dict[str, Any]:
    """The floor-update receipt binding the old and new floor-map hashes.

    Feeds are described with their identity, version and expiry (schema 2) and signers;
    ``reference_time`` records the time their expiry was judged against.

    A receipt that would not fit an audit-chain record (``MAX_RECEIPT_BYTES``) names the
    new map by its hash only (the map itself is archived in ``maps/`` beside the module)
    and carries the content addresses of its diff and conflicts instead of the lists;
    see ``receipts.map_by_reference``.
    """
    # Imported here, as in ``apply``: a dry run or --check signs and anchors nothing.
    from floorguard._chain import receipts  # noqa: PLC0415
    from floorguard._chain.chain import MAX_RECEIPT_BYTES, canonical_json  # noqa: PLC0415

    # The receipt's canonical JSON holds the map's: a map larger than a record is named by
    # reference without writing the whole receipt out (or the map into it) first.
    too_large = (
        refresh.new_map_canonical is not None and len(refresh.new_map_canonical) > MAX_RECEIPT_BYTES
    )
    freshness: dict[str, Any] = {}
    if refresh.reference_time is not None:
        freshness = {
            "reference_time": refresh.reference_time,
            "reference_time_source": refresh.reference_time_source,
        }
    receipt = receipts.new_receipt(
        receipts.FLOOR_UPDATE,
        {
            **freshness,
            "old_floor_map_hash": refresh.old_hash,
            "new_floor_map_hash": refresh.new_hash,
            "old_map_version": refresh.old_version,
            "new_map_version": refresh.new_version,
            # (_by_reference drops it; a map too large is not even built into it.)
            **({} if too_large else {"new_floor_map": to_entries(refresh.new_map)}),
            "diff": refresh.diff.to_json(),
            "downgrade": refresh.diff.is_downgrade,
            "downgrade_allowed": refresh.downgrade_allowed,
            "conflicts": [conflict.describe() for conflict in refresh.conflicts],
            "feeds": [f.identity() for f in refresh.feeds],
            # Only with --waivers: a receipt of feeds alone keeps today's exact fields.
            **({"waivers": refresh.waivers.identity()} if refresh.waivers else {}),
            "changed": refresh.stale,
            "forced": refresh.forced,
            # Only over a hand edit: what the diff and the downgrade check were against.
            **({"diff_baseline": refresh.baseline} if refresh.drift else {}),
            "template": refresh.template,
        },
        ts=ts,
    )
    if not too_large and len(canonical_json(receipt).encode("utf-8")) <= MAX_RECEIPT_BYTES:
        return receipt
    return _by_reference(receipt, refresh)


def _by_reference(receipt: dict[str, Any], refresh: RefreshPlan) -> dict[str, Any]:
    """The receipt with the map, diff and conflicts replaced by what binds them."""
    compact = {
        key: value
        for key, value in receipt.items()
        if key not in ("new_floor_map", "diff", "conflicts")
    }
    changes = refresh.diff
    counts = {
        "added": len(changes.added),
        "removed": len(changes.removed),
        "changed": len(changes.changed),
        "lowered": len(changes.lowered),
    }
    if changes.extended:  # floor-only maps keep exactly the counts they always had
        counts.update(
            advisories_added=len(changes.advisories_added),
            advisories_removed=len(changes.advisories_removed),
            advisories_changed=len(changes.advisories_changed),
            waivers_added=len(changes.waivers_added),
            waivers_removed=len(changes.waivers_removed),
            waivers_changed=len(changes.waivers_changed),
        )
    compact.update(
        {
            "new_floor_map_adapters": len(refresh.new_map),
            "diff_digest": content_address(receipt["diff"]),
            "diff_counts": counts,
            "conflicts_digest": content_address(receipt["conflicts"]),
            "conflicts_count": len(refresh.conflicts),
        }
    )
    return compact


def archive_path(module: Path, map_hash: str) -> Path:
    return module.parent / ARCHIVE_DIR / (map_hash.replace(":", "-") + ".json")


@without_cyclic_gc
def archive_map(
    module: Path, floor_map: FloorMap, *, canonical: bytes | None = None
) -> Path | None:
    """Keep a map as canonical JSON under its own hash, so old receipts stay resolvable.

    ``canonical``: the map's canonical bytes, when the caller made them already. Returns the
    archive written, or None when it was there already.
    """
    # The bytes and their digest (the map's hash) in one canonicalisation.
    data = canonical if canonical is not None else canonical_bytes(to_entries(floor_map))
    path = archive_path(module, sha256_digest(data))
    # A regular file is content-addressed: if it is there, it holds these bytes (verifiers
    # re-hash it anyway). Anything else at that name (a link) is replaced, never followed.
    if not path.is_symlink() and path.is_file():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_atomic(path, data, mode=atomic.DEFAULT_MODE)
    return path


def lock_path(module: Path) -> Path:
    return module.parent / f".{module.name}.lock"


@contextlib.contextmanager
def module_lock(
    module: Path, *, notify: Callable[[str], None] = lambda _message: None
) -> Iterator[None]:
    """Hold the lock of ``module``'s writers: one refresh --write at a time per module.

    Waits up to ``locking.LOCK_WAIT_SECONDS``. Raises ModuleError (the lock cannot be taken) or
    ConcurrentUpdate.
    """
    with locking.exclusive_lock(lock_path(module), f"another refresh of {module}", notify=notify):
        yield


def undo_path(module: Path) -> Path:
    """Where a refresh keeps the module it replaces until its chain append is done."""
    return module.parent / f".{module.name}.refresh.undo"


def journal_path(module: Path) -> Path:
    """Where a refresh notes which update receipt will commit it."""
    return module.parent / f".{module.name}.refresh.json"


def interrupted(module: Path) -> bool:
    """Whether a refresh of ``module`` was killed and not yet recovered (or an undone map's
    version is still pending): the next ``--write`` recovers it."""
    # (Also beside the file a link names: --check and publish take a linked module.)
    places = {module, Path(os.path.realpath(module))}
    return any(
        os.path.lexists(journal_path(place)) or os.path.lexists(undo_path(place))
        for place in places
    )


def recover_interrupted(
    module: Path,
    chain: Callable[[], AuditChain] | None,
    *,
    notify: Callable[[str], None] = lambda _message: None,
) -> int | None:
    """Finish or undo a refresh of ``module`` that was killed mid-way. Call under
    ``module_lock``, before planning.

    A refresh keeps the module it replaces as ``.<module>.refresh.undo`` and notes in
    ``.<module>.refresh.json`` the id of the update receipt it will anchor. The chain is the
    commit log: if that receipt is in it, the refresh committed and the copy is dropped;
    otherwise the copy is put back, so no map stays in force that the chain never recorded.
    The version of the map undone (it was in force) stays noted in the journal until a
    refresh writes a map above it, and is returned for ``plan``: None when nothing undone
    is pending. Raises ModuleError when the leftovers cannot be read or the copy is not a
    module.
    """
    journal, copy = journal_path(module), undo_path(module)
    if not os.path.lexists(journal) and not os.path.lexists(copy):
        return None
    receipt_id, undone = _read_journal(journal)
    committed = receipt_id is not None and chain is not None and _anchored(chain(), receipt_id)
    if committed:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(copy)
        notify(f"{module}: an interrupted refresh had committed; dropped its undo copy")
        undone = None  # the module holds that refresh's map, numbered above any undone one
    elif os.path.lexists(copy):
        kept = _block_version(copy)
        if kept is None:
            raise ModuleError(
                f"{copy}: left by an interrupted refresh of {module}, but not a floor-map "
                "module; put the module right by hand and remove it"
            )
        in_force = _block_version(module)
        if in_force is not None and in_force > kept:
            undone = max(in_force, undone or 0)
        if undone is not None:
            # Noted before the put-back, so a kill in between still finds it.
            _write_journal(journal, None, undone)
        atomic.put_back(copy, module)
        notify(
            f"{module}: put back the map from before an interrupted refresh: the chain never "
            "recorded its update"
            + (f" (the next map is numbered above its version {undone})" if undone else "")
        )
    if undone is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(journal)
    return undone


def refuse_unsettled(module: Path, doing: str) -> None:
    """Refuse to ``doing`` (publish, build) a module whose map may be one the chain never
    recorded: a killed refresh left it (its journal is there), it has another hard link
    (a name that no refresh state stands beside), or its block is not the map refresh last
    wrote there (a hand edit). Raises ModuleError. A copy of the module elsewhere carries no
    state and is taken as it is."""
    if interrupted(module):
        raise ModuleError(
            f"{module}: a refresh of it was interrupted ({journal_path(module)} left): run "
            f"floorctl refresh --write to recover it before {doing}"
        )
    try:
        links = os.stat(module).st_nlink
    except OSError:
        return  # (reading it says why)
    if links > 1:
        raise ModuleError(
            f"{module} has {links} names (hard links): refresh keeps its state beside one, "
            f"so another may hold a map no refresh settled; {doing} the name refresh writes"
        )
    written = read_written(module)
    if not written:
        return
    last = max(written)
    stated = _block_stated(module)
    if stated != (last, written[last]):
        raise ModuleError(
            f"{module}: its block (map version {stated[0]}, {stated[1]}) is not the map "
            f"refresh last wrote there (version {last}, {written[last]}): a hand edit, which "
            f"no update receipt names; refresh --write --force (or undo the edit) before {doing}"
        )


def _write_journal(journal: Path, receipt_id: str | None, undone_version: int | None) -> None:
    note: dict[str, Any] = {"receipt_id": receipt_id}
    if undone_version is not None:
        note["undone_map_version"] = undone_version
    atomic.write_atomic(journal, json.dumps(note).encode())


def _read_journal(journal: Path) -> tuple[str | None, int | None]:
    """The receipt id a refresh would commit with, and the map version of an undone map."""
    if not os.path.lexists(journal):
        return None, None
    try:
        data = read_regular(journal, max_bytes=4096, what="refresh journal")
        note = json.loads(data)
        receipt_id, undone = note.get("receipt_id"), note.get("undone_map_version")
    except (UnreadableFileError, ValueError, AttributeError) as exc:
        raise ModuleError(f"{journal}: cannot read an interrupted refresh's journal") from exc
    # (Below the largest map version: the next map is numbered above it.)
    if undone is not None and (type(undone) is not int or not 0 <= undone < MAX_MAP_VERSION):
        raise ModuleError(f"{journal}: undone_map_version is not a map version")
    return (receipt_id if isinstance(receipt_id, str) else None), undone


def _anchored(audit: AuditChain, receipt_id: str) -> bool:
    needle = json.dumps(receipt_id)
    return any(
        needle in line and json.loads(line).get("receipt_id") == receipt_id
        for line in audit.export_lines()
    )


def _block_version(path: Path) -> int | None:
    """The map version the block in ``path`` states; None if it is not a floor-map module."""
    return _block_stated(path)[0]


def _block_hash(path: Path) -> str | None:
    """The hash a receipt names for the map in ``path`` (as ``plan`` computes it)."""
    return _block_stated(path)[1]


def _block_stated(path: Path) -> tuple[int | None, str | None]:
    """The block's map version and the hash a receipt names for its map, from one read;
    (None, None) if ``path`` is not a floor-map module."""
    try:
        _, block = render.read_module(splice.read_module_text(path), str(path))
    except FloorctlError:
        return None, None
    return block.map_version, block.stated_hash or floor_map_hash(from_entries(block.entries))


def require_module(module: Path) -> None:
    """Refuse a module that does not exist before its lock file is made beside it (in a
    folder that may not exist either): ``floorctl init`` starts a module."""
    if not os.path.lexists(module):
        raise splice.missing_module(module)


def refuse_symlinked_module(module: Path) -> None:
    """A module written through a link would change a file the command line never named."""
    if module.is_symlink():
        raise ModuleError(
            f"{module}: is a symbolic link; refusing to write through it "
            f"(pass the real path: {os.path.realpath(module)})"
        )


def refuse_hard_linked_module(module: Path) -> None:
    """The module is replaced by a rename: another hard link to it would keep the old map.

    Checked after ``recover_interrupted`` (a killed refresh's undo copy is a hard link)."""
    links = os.lstat(module).st_nlink
    if links > 1:
        raise ModuleError(
            f"{module}: has {links} hard links; refusing to replace it (the other names "
            "would keep the old map): refresh one name and copy it, or remove the others"
        )


# A module is written encoded this many characters at a time: a large one's text is never
# held twice (as text and as its bytes).
_WRITE_CHARS = 1024 * 1024


def _utf8_pieces(text: str) -> Iterator[bytes]:
    for start in range(0, len(text), _WRITE_CHARS):
        yield text[start : start + _WRITE_CHARS].encode("utf-8")


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
    progress: Callable[[str], None] | None = None,
) -> Outcome:
    """Write the module, the receipt and the chain record; all of them or none.

    Call under ``module_lock``, with a plan made from the module read under that lock.
    The chain append comes last: if it fails, the module and receipt file are put back as
    they were (a link stays a link), so no map is in force without its anchored receipt.
    Raises ConcurrentUpdate if the module no longer holds the text the plan was made from.
    ``progress`` (if any) hears the name of each stage as it starts.
    """
    from floorguard._chain import receipts  # noqa: PLC0415

    if progress is not None and (receipt_out or chain):
        progress("sealing the update receipt")
    receipt = update_receipt(refresh) if (receipt_out or chain) else None
    envelope = None
    if receipt is not None and receipt_out is not None:
        if signing_key is None:
            raise ValueError("a receipt file needs a signing key")
        envelope = receipts.sign_update_receipt(receipt, signing_key()).to_bytes()
    audit = chain() if chain is not None else None

    if progress is not None and refresh.stale:
        progress(f"writing {refresh.module} and its map archive")
    targets = [receipt_out] if envelope is not None and receipt_out is not None else []
    targets += [refresh.module] if refresh.stale else []
    backups = {refresh.module: undo_path(refresh.module)}
    journal = journal_path(refresh.module)
    committing = receipts.receipt_id(receipt) if audit is not None and receipt else None
    seq = None
    new_archive = None
    succeeded = False
    replaced = False  # the module may have held the new map, if only for a moment
    try:
        if refresh.stale:
            refuse_symlinked_module(refresh.module)
            refuse_hard_linked_module(refresh.module)
            if not refresh.drift:
                archive_map(refresh.module, refresh.old_map)  # the map in force: kept
            # Before the module, so that a module in place always has its archive (even
            # after a kill); removed below if the module never comes to hold its map.
            new_archive = archive_map(
                refresh.module, refresh.new_map, canonical=refresh.new_map_canonical
            )
        with atomic.undoable(targets, backups):
            if envelope is not None and receipt_out is not None:
                atomic.write_atomic(receipt_out, envelope)
            if refresh.stale:
                # The lock keeps other floorctl refreshes out; this catches any other writer
                # (an editor, an older floorctl) that replaced the module since it was read.
                if splice.read_module_text(refresh.module) != refresh.old_text:
                    raise ConcurrentUpdate(
                        f"{refresh.module}: changed while this refresh was running; "
                        "nothing was written (run it again)"
                    )
                # Before the module is replaced: which chain record will commit this refresh,
                # and the version it puts in force, which counts as undone should the chain
                # append then fail (or this run be killed): a host may have enforced it.
                pending = max(refresh.new_version, refresh.undone_version or 0)
                _write_journal(journal, committing, pending)
                _record_written(refresh.module, refresh.new_version, refresh.new_hash)
                replaced = True
                atomic.write_chunks_atomic(refresh.module, _utf8_pieces(refresh.new_text))
            if audit is not None and receipt is not None:
                seq = audit.append(receipts.FLOOR_UPDATE, receipt).seq
        succeeded = True
    except BaseException:
        # maps/ keeps the maps written; a map the module does not hold (the undo put the old
        # one back) was never written. Kept if the module holds it all the same.
        if new_archive is not None and _block_hash(refresh.module) != refresh.new_hash:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(new_archive)
        raise
    finally:
        # Kept while an undone version is pending: this refresh's own map put back after a
        # failed append, or an earlier one it did not write above (the journal, whichever
        # note it holds now, names that version).
        if succeeded or (refresh.undone_version is None and not replaced):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal)
    return Outcome(
        written=refresh.stale,
        receipt_id=receipts.receipt_id(receipt) if receipt is not None else None,
        anchored_seq=seq,
    )
