"""What this host has seen of each audit chain: the largest tree, kept in FLOORGUARD_HOME.

A host is a witness of every chain it appends to. It remembers, per chain (by ``chain_id``),
the largest Merkle tree it appended to or read, as its size and root. Before each append it
checks that the store's tree extends that one: the store must hold at least as many records
(else a rollback: an older backup restored, records removed, or another chain put in its
place) and the tree of its first ``size`` records, computed from the stored nodes, must
have the remembered root (else a fork: the chain was rewritten). Either refuses the append
with ChainRollbackError, and the refusal is recorded here, on the host: the shared chain
cannot be trusted with it. A host only witnesses what it has seen: records appended and
then lost while it was not looking are caught by the hosts that saw them, or by an
auditor's checkpoint.

Files, in FLOORGUARD_HOME (``state_paths().chain_view`` and beside it):

``chain-view``
    Two slots of equal size (the file is twice a power of two, 8 KiB at least); each holds
    a header line ``floorguard-chain-view/1 COUNTER LENGTH SHA256\n`` and a body of LENGTH
    bytes whose SHA-256 is SHA256 (lowercase hex): ``{"chains": {CHAIN_ID: {"size": N,
    "root": HEX, "location": TEXT, "seen": TS}}}``, per chain the size and root (64
    lowercase hex) of the largest tree seen, where the chain was (its store's location, a
    path or a URL without its password) and when (RFC 3339 UTC). The slot with the highest
    COUNTER whose body matches its digest is the view. A change is one write over the other
    slot with the next COUNTER, only ever of a tree that extends the one it holds (except
    ``floorctl chain view --accept-current``); a file that outgrows its slots is replaced
    by a larger one (written, fsync'd, renamed). A missing file is a host that has seen
    nothing; an unreadable one, or one with no whole slot, refuses every append (fail
    closed) until it is repaired or re-anchored.
``chain-view.lock``
    Empty. Whoever changes the view holds an exclusive ``flock`` on it; an append holds it
    from before its transaction to its growth, so concurrent appends of one host never
    lose growth (they take turns on the chain's own lock anyway).
``chain-refusals.jsonl``
    What this host refused, and every re-anchoring: one JSON object a line, appended with
    ``O_APPEND`` and fsync'd. Fields: ``ts``, ``event`` (``"rollback"``, ``"fork"``,
    ``"replaced"``, ``"unreadable-view"`` or ``"accept-current"``), ``chain_id``,
    ``location``, ``remembered`` (``{"size", "root", "seen"}`` or null), ``found``
    (``{"size", "root"}``, the store's; root null when not computed), ``pid``,
    ``message``; for a refused append also ``refused`` (``{"event", "receipt_id",
    "receipt"}``: the record that was not written);
    for ``accept-current`` also ``replaced_chains`` (the views of other chains remembered
    at the same location, now dropped: ``{CHAIN_ID: {"size", "root", "seen"}}``).

Cost: a process keeps the view it last read or wrote, with the file's identity and size and
the first bytes of both slots (their headers) as it left them: an append reads the view's
slot up to its body's end and the other slot's header (two short reads) and takes the kept
view while both headers are unchanged byte for byte and the body still hashes to its digest
(a view damaged past its header is no view), the whole file only after anything else wrote
a header (a writer's counter and digest are in it; the file's times are not trusted for
this), then writes one slot in place (a temporary file renamed over the view cost about
0.9 ms a time on ext4, which flushes a file renamed over another). There is no fsync of the
view: it is a lower bound, so losing its last growths in a crash is harmless (the host then
remembers an older, still true tree), and a write torn by a crash leaves the other slot
whole. The refusals record is fsync'd: it is evidence, and written rarely.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _ascii
from pathlib import Path
from typing import Any, NamedTuple

from floorguard._base._time import now_ts
from floorguard._base.files import flock_within
from floorguard._base.folders import make_private_folder
from floorguard._base.state import REFUSALS_NAME, VIEW_LOCK_NAME
from floorguard._crypto import merkle
from floorguard.errors import ChainRollbackError, ChainWriteError, HostViewError

MAX_VIEW_BYTES = 1 << 20
# How long an append waits for the view's lock by default: as long as a SQLite chain waits
# for its own (a shared chain's host waits its FLOORGUARD_CHAIN_TIMEOUT: see from_env).
LOCK_WAIT_SECONDS = 30.0
ACCEPT_HINT = "`floorctl chain view --accept-current`"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHAIN_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class TreeView:
    """The largest tree of one chain a host has seen."""

    size: int
    root: bytes
    location: str
    seen: str

    def document(self) -> dict[str, Any]:
        return {"size": self.size, "root": self.root.hex(), "location": self.location,
                "seen": self.seen}  # fmt: skip


def _malformed(path: Path, why: str) -> HostViewError:
    return HostViewError(
        f"this host's view of the audit chain, {path}, is malformed ({why}): appends are "
        "refused until it is repaired; if it was damaged (not tampered with), move it aside "
        f"and re-anchor the host on the chain as it is now with {ACCEPT_HINT}"
    )


def _parse(data: bytes, path: Path) -> dict[str, TreeView]:
    """The views in a slot's body. Raises ChainWriteError for anything malformed."""

    def bad(why: str) -> HostViewError:
        return _malformed(path, why)

    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad("not JSON") from exc
    if not isinstance(document, dict) or set(document) != {"chains"}:
        raise bad('not an object of "chains"')
    chains = document["chains"]
    if not isinstance(chains, dict):
        raise bad('"chains" is not an object')
    views: dict[str, TreeView] = {}
    for chain_id, entry in chains.items():
        if not _CHAIN_ID.fullmatch(chain_id):
            raise bad(f"{chain_id!r} is not a chain id")
        if not isinstance(entry, dict) or set(entry) != {"size", "root", "location", "seen"}:
            raise bad(f"chain {chain_id}: not an object of size, root, location and seen")
        size, root = entry["size"], entry["root"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise bad(f"chain {chain_id}: size {size!r} is not a positive integer")
        if not isinstance(root, str) or not _HEX64.fullmatch(root):
            raise bad(f"chain {chain_id}: root is not 64 lowercase hex")
        if not isinstance(entry["location"], str) or not isinstance(entry["seen"], str):
            raise bad(f"chain {chain_id}: location or seen is not text")
        views[chain_id] = TreeView(size, bytes.fromhex(root), entry["location"], entry["seen"])
    return views


_MAGIC = b"floorguard-chain-view/1 "
_HEADER = re.compile(rb"floorguard-chain-view/1 ([0-9]{1,19}) ([0-9]{1,9}) ([0-9a-f]{64})\n")
_HEADER_MAX = 128
INITIAL_SLOT = 8192


def _body(views: Mapping[str, TreeView]) -> bytes:
    """``{"chains": {CHAIN_ID: view.document()}}`` as ``json.dumps(sort_keys=True,
    separators=(",", ":"))`` writes it (ASCII, every other character escaped), the four
    fields of a view written in their sorted order by hand: the view is written at every
    append, and the general encoder took twice as long."""
    chains = ",".join(
        f'{_ascii(cid)}:{{"location":{_ascii(view.location)},"root":"{view.root.hex()}",'
        f'"seen":{_ascii(view.seen)},"size":{view.size}}}'
        for cid, view in sorted(views.items())
    )
    return f'{{"chains":{{{chains}}}}}'.encode()


def _header(counter: int, body: bytes, digest: str) -> bytes:
    return _MAGIC + f"{counter} {len(body)} {digest}\n".encode()


class _Slot(NamedTuple):
    """Where the current view was read from: the file (device, inode), the slot's size and
    which slot it is, and its counter and body digest."""

    file: tuple[int, int]
    size: int
    which: int  # 0 or 1, the first or second half of the file
    counter: int
    digest: str


class _Kept(NamedTuple):
    """The view file as the cached view was read from or written as: its (device, inode,
    size), the first _HEADER_MAX bytes of each slot, and where the view's body starts and
    ends within its slot."""

    file: tuple[int, int, int]
    heads: tuple[bytes, bytes]
    body_start: int
    body_end: int


class _Encoded(NamedTuple):
    """Views as ChainViews.store writes them: the views, the slot loaded when they were
    encoded (the next counter is its), and the slot's data, body size and digest."""

    views: Mapping[str, TreeView]
    over: _Slot | None
    data: bytes
    body_size: int
    digest: str


class ChainViews:
    """The views kept in ``path`` (``state_paths().chain_view``), with their lock and the
    refusals record beside it. Constructing one touches nothing on disk."""

    def __init__(self, path: Path, *, lock_wait: float = LOCK_WAIT_SECONDS) -> None:
        self.path = Path(path)
        self.lock_path = self.path.parent / VIEW_LOCK_NAME
        self.refusals_path = self.path.parent / REFUSALS_NAME
        self.lock_wait = lock_wait
        self._cache: tuple[_Slot, dict[str, TreeView]] | None = None
        # What the cached view was read from or written as (None: not known; the slots
        # are parsed): the file, the first bytes of both slots, and where the view's body
        # lies. Equal bytes under both headers are equal headers, and the headers decide
        # which slot is the view (see load); its body is still hashed at every load.
        self._kept: _Kept | None = None
        # The damaged copies this process has said it fell back from (see _fell_back).
        self._told: set[tuple[int, ...]] = set()
        # Descriptors kept open (an append costs a few system calls, not a dozen), each
        # with the process that opened it: after a fork the child opens its own (a flock
        # on the parent's open file would be shared with the parent, excluding nothing).
        self._fd: tuple[int, int, tuple[int, int]] | None = None
        self._lock_fd: tuple[int, int] | None = None

    def close(self) -> None:
        """Close the descriptors kept open (a later use opens them again). Its lock, if
        held through them, is released with them."""
        kept, self._fd = self._fd, None
        lock, self._lock_fd = self._lock_fd, None
        for opened in (kept, lock):
            if opened is not None and opened[1] == os.getpid():
                with contextlib.suppress(OSError):
                    os.close(opened[0])

    def __del__(self) -> None:
        # An object let go must not keep its files open: a process that makes a chain
        # object per request would run out of descriptors.
        with contextlib.suppress(Exception):
            self.close()

    def _view_fd(self) -> tuple[int, os.stat_result] | None:
        """The open view file (read-write where permitted) and its status, or None when
        there is none. A file replaced or moved since it was opened is opened anew."""
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if self._fd is not None:
            fd, pid, identity = self._fd
            if pid == os.getpid() and identity == (info.st_dev, info.st_ino):
                return fd, info
            self._fd = None
            if pid == os.getpid():
                os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise HostViewError(
                f"this host's view of the audit chain, {self.path}, is not a regular file: "
                "appends are refused until it is one"
            )
        flags = os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
        try:
            fd = os.open(self.path, os.O_RDWR | flags)
        except PermissionError:
            fd = os.open(self.path, os.O_RDONLY | flags)  # store() then says it cannot
        except FileNotFoundError:
            return None
        info = os.fstat(fd)
        self._fd = (fd, os.getpid(), (info.st_dev, info.st_ino))
        return fd, info

    def load(self) -> dict[str, TreeView]:
        """Every remembered view (empty when the file is absent). Raises ChainWriteError
        when the file is unreadable or no slot of it holds a whole, well-formed view."""
        try:
            opened = self._view_fd()
            if opened is None:
                self._cache, self._kept = None, None
                return {}
            fd, info = opened
            if not stat.S_ISREG(info.st_mode):
                raise HostViewError(
                    f"this host's view of the audit chain, {self.path}, is not a regular "
                    "file: appends are refused until it is one"
                )
            size = info.st_size // 2
            if info.st_size % 2 or not INITIAL_SLOT <= size <= MAX_VIEW_BYTES:
                raise _malformed(self.path, f"{info.st_size} bytes, not two view slots")
            file = (info.st_dev, info.st_ino, info.st_size)
            kept = self._kept
            if self._cache is not None and kept is not None and kept.file == file:
                # The common case, this process's own last write still the view: the view's
                # slot up to its body's end and the other slot's header, not the whole file.
                # Any other writer (of this host, under the lock, or not) changes a header:
                # its counter or digest. The body is hashed as a full read would: a view
                # damaged past its header is no view.
                slot = self._cache[0]
                ours = os.pread(fd, max(kept.body_end, _HEADER_MAX), slot.which * size)
                other = os.pread(fd, _HEADER_MAX, (1 - slot.which) * size)
                if (
                    ours[:_HEADER_MAX] == kept.heads[slot.which]
                    and other == kept.heads[1 - slot.which]
                    and hashlib.sha256(ours[kept.body_start : kept.body_end]).hexdigest()
                    == slot.digest
                ):
                    return self._cache[1]
            data = os.pread(fd, info.st_size, 0)
        except OSError as exc:
            raise self._unreadable(exc) from exc
        found: list[tuple[int, int, int, str, int]] = []
        for index in (0, 1):
            head = _HEADER.match(data, index * size, index * size + _HEADER_MAX)
            if head is not None and head.end() + int(head[2]) <= (index + 1) * size:
                counter, length, digest = int(head[1]), int(head[2]), head[3].decode()
                found.append((counter, index, length, digest, head.end()))
        # The newest whole slot: a write torn by a crash leaves the one before it.
        self._kept = None
        damaged: int | None = None
        for rank, (counter, index, length, digest, start) in enumerate(sorted(found, reverse=True)):
            if hashlib.sha256(data[start : start + length]).hexdigest() != digest:
                damaged = counter if damaged is None else damaged
                continue
            slot = _Slot((info.st_dev, info.st_ino), size, index, counter, digest)
            if self._cache is not None and self._cache[0] == slot:
                views = self._cache[1]  # (the same body: parsed already)
            else:
                views = _parse(data[start : start + length], self.path)
                self._cache = (slot, views)
            if rank == 0:  # (not a slot behind a torn one: its headers alone chose it)
                heads = (data[:_HEADER_MAX], data[size : size + _HEADER_MAX])
                self._kept = _Kept(file, heads, start - index * size, start - index * size + length)
            elif damaged is not None:
                self._fell_back(file, damaged, counter, views)
            return views
        raise _malformed(self.path, "no slot holds a whole view")

    def _fell_back(
        self, file: tuple[int, int, int], damaged: int, used: int, views: Mapping[str, TreeView]
    ) -> None:
        """Say, once for each damaged copy of each file, that the older copy was used: the
        host's memory went back (a write torn by a crash, or the file altered). Best effort:
        the older copy is a whole view, and appends go on from it."""
        key = (*file, damaged)
        if key in self._told:
            return
        self._told.add(key)
        message = (
            f"the newest copy (generation {damaged}) of this host's view of the audit chain, "
            f"{self.path}, is damaged: the older copy (generation {used}) is used, and what "
            "the host saw after it is forgotten (a write torn by a crash, or the file altered)"
        )
        import logging

        logging.getLogger("floorguard").warning(message)
        with contextlib.suppress(ChainWriteError):
            for chain_id, view in views.items():
                self.record({
                    "ts": now_ts(), "event": "damaged-view-copy", "chain_id": chain_id,
                    "location": view.location, "remembered": _brief(view), "found": None,
                    "pid": os.getpid(), "message": message,
                })  # fmt: skip

    def _unreadable(self, exc: OSError) -> HostViewError:
        return HostViewError(
            f"this host's view of the audit chain, {self.path}, is unreadable "
            f"({exc.strerror or exc}): appends are refused until the process can read and "
            "write it (FLOORGUARD_HOME must be this host's own, writable folder)"
        )

    def hint(self, chain_id: str | None) -> int | None:
        """The size of ``chain_id`` this process last read or wrote (with no chain id yet,
        of the one chain the view holds), or None: a prefetch hint only (the check reads
        the view under the lock). A process that has read none reads the file once,
        without the lock: so its first append too fetches what the check needs in the
        round trip that reads the head, not one more while it holds the chain's lock."""
        if self._cache is None:
            with contextlib.suppress(ChainWriteError):  # (a hint only: none is no harm)
                self.load()
        if self._cache is None:
            return None
        views = self._cache[1]
        if chain_id is None:
            return next(iter(views.values())).size if len(views) == 1 else None
        view = views.get(chain_id)
        return None if view is None else view.size

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the view's lock (bounded wait). Creates FLOORGUARD_HOME (0700) and the lock
        file (0600) when missing. Raises ChainWriteError."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self, *, by: float | None = None) -> None:
        """Take the view's lock (see ``locked``), waiting no longer than ``lock_wait``, nor
        past ``by`` (a ``time.monotonic()``)."""
        if self._lock_fd is None or self._lock_fd[1] != os.getpid():
            self._lock_fd = (self._open_lock(), os.getpid())
        self._flock(self._lock_fd[0], by)

    def release(self) -> None:
        if self._lock_fd is not None and self._lock_fd[1] == os.getpid():
            fcntl.flock(self._lock_fd[0], fcntl.LOCK_UN)

    def _open_lock(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
        try:
            try:
                return os.open(self.lock_path, flags, 0o600)
            except FileNotFoundError:
                make_private_folder(self.path.parent)
                return os.open(self.lock_path, flags, 0o600)
        except NotADirectoryError as exc:
            raise HostViewError(
                f"cannot open the audit chain: {self.path.parent} is not a folder (set "
                "FLOORGUARD_HOME to a folder, or remove the file)"
            ) from exc
        except OSError as exc:
            raise HostViewError(
                f"cannot lock this host's view of the audit chain ({self.lock_path}: "
                f"{exc.strerror or exc}); FLOORGUARD_HOME must be this host's own, writable "
                "folder"
            ) from exc

    def _flock(self, fd: int, by: float | None) -> None:
        wait = self.lock_wait if by is None else min(self.lock_wait, by - time.monotonic())
        try:
            locked = flock_within(fd, max(wait, 0.0))
        except OSError as exc:
            raise HostViewError(
                f"cannot lock this host's view of the audit chain ({self.lock_path}: "
                f"{exc.strerror or exc})"
            ) from exc
        if not locked:
            raise HostViewError(
                f"another process of this host held {self.lock_path} for more than "
                f"{max(wait, 0.0):.3g}s (a process stopped while appending?)"
            )

    def encoded(self, views: Mapping[str, TreeView]) -> _Encoded:
        """``views`` as ``store`` writes them over the view as loaded now (no I/O)."""
        body = _body(views)
        digest = hashlib.sha256(body).hexdigest()
        current = None if self._cache is None else self._cache[0]
        data = _header(1 if current is None else current.counter + 1, body, digest) + body
        return _Encoded(views, current, data, len(body), digest)

    def store(self, views: Mapping[str, TreeView], encoded: _Encoded | None = None) -> None:
        """Write ``views`` over the older slot of the view file (the caller holds the lock
        and has loaded it since taking it); ``encoded``, when given, is what ``encoded``
        made of them, taken only if the view loaded is still the one it was made over.
        Raises ChainWriteError."""
        current = None if self._cache is None else self._cache[0]
        if encoded is None or encoded.views is not views or encoded.over is not current:
            encoded = self.encoded(views)
        data, digest, body_size = encoded.data, encoded.digest, encoded.body_size
        try:
            if current is None or len(data) > current.size or self._fd is None:
                self._create(data)
                self.load()
                return
            # One write into the older slot; no fsync (see the module's docstring).
            if os.pwrite(self._fd[0], data, (1 - current.which) * current.size) != len(data):
                raise OSError(errno.EIO, "short write")
        except OSError as exc:
            raise HostViewError(
                f"cannot save this host's view of the audit chain to {self.path}: "
                f"{exc.strerror or exc}"
            ) from exc
        written = _Slot(current.file, current.size, 1 - current.which, current.counter + 1, digest)
        self._cache = (written, dict(views))
        kept = self._kept
        if kept is not None and kept.file == (*current.file, 2 * current.size):
            # What the slot's first bytes are now: the data written over what was there.
            heads = list(kept.heads)
            heads[written.which] = (data + heads[written.which][len(data) :])[:_HEADER_MAX]
            self._kept = _Kept(kept.file, (heads[0], heads[1]), len(data) - body_size, len(data))

    def _create(self, data: bytes) -> None:
        """A new view file (the first, or one with larger slots), renamed into place once
        it is durable: rare, so it may cost an fsync."""
        size = INITIAL_SLOT
        while size < len(data):
            size *= 2
        if size > MAX_VIEW_BYTES:
            raise HostViewError(
                f"this host's view of the audit chain, {self.path}, would exceed "
                f"{MAX_VIEW_BYTES} bytes (it remembers too many chains)"
            )
        make_private_folder(self.path.parent)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                0o600,
            )
            try:
                os.ftruncate(fd, 2 * size)
                if os.pwrite(fd, data, 0) != len(data):
                    raise OSError(errno.EIO, "short write")
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def record(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` to the refusals record, durably. Raises ChainWriteError."""
        line = (json.dumps(dict(entry), sort_keys=True, separators=(",", ":")) + "\n").encode()
        try:
            make_private_folder(self.path.parent)
            # Non-blocking: a FIFO with no reader in its place fails at once (ENXIO) rather
            # than leave the refused append waiting for one; anything but a regular file
            # is refused before a byte is written.
            fd = os.open(
                self.refusals_path,
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                | os.O_NONBLOCK,
                0o600,
            )  # fmt: skip
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file")
                os.write(fd, line)  # one write: O_APPEND keeps concurrent lines whole
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise HostViewError(
                f"cannot record the refusal in {self.refusals_path}: {exc.strerror or exc}"
            ) from exc

    def recorded(self, entry: Mapping[str, Any]) -> str:
        """``entry``'s message once ``entry`` is recorded; when it cannot be, the message
        with why, so that the refusal still says what was found (sizes, roots)."""
        try:
            self.record(entry)
        except ChainWriteError as exc:
            said = str(entry["message"]).replace(
                _RECORDED.format(self.refusals_path),
                f"The refusal could not be recorded on this host: {exc}.",
            )
            return said if said != entry["message"] else f"{said} ({exc})"
        return str(entry["message"])

    def observe(
        self,
        before: Mapping[str, TreeView],
        chain_id: str,
        size: int,
        root: bytes,
        *,
        location: str,
        root_of: Callable[[int], bytes],
        doing: str,
    ) -> None:
        """A read saw the tree (``size``, ``root``) of ``chain_id``: refuse it (recorded;
        ChainRollbackError) when it does not extend ``before``, the views loaded before the
        read began, else remember it if it is larger than what is remembered now. (A view
        grown since the read began may be larger than the tree read: another process of
        this host appended meanwhile, which is no rollback; the read is then not needed.)

        ``root_of`` (the read tree's root of its first m records) runs without the lock:
        it reads the chain, which may take a while, and this host's appends wait for the
        lock."""
        judged = before
        for _ in range(3):
            now = judged.get(chain_id)
            if judged is not before and now is not None and now.size > size:
                return
            found = judge(judged, chain_id, size, location, root_of)
            if found is not None:
                event, why, seen, other = found
                message = _message(f"refusing to {doing} the audit chain {location}", why,
                                   self.refusals_path)  # fmt: skip
                raise ChainRollbackError(self.recorded({
                    "ts": now_ts(), "event": event, "chain_id": chain_id,
                    "location": location, "remembered": _brief(seen),
                    "found": {"size": size, "root": other and other.hex()},
                    "pid": os.getpid(), "message": message,
                }))  # fmt: skip
            with self.locked():
                current = self.load()
                if current == judged:
                    if size > (0 if now is None else now.size):
                        self.store({**current, chain_id: TreeView(size, root, location, now_ts())})
                    return
            judged = current  # changed meanwhile: judge the read against that too
        # Still changing (this host is appending): the read is not remembered, harmlessly.

    def accept(
        self, chain_id: str | None, size: int, root: bytes, location: str
    ) -> TreeView | None:
        """Re-anchor on the tree (``size``, ``root``) of ``chain_id`` as it is now, whatever
        was remembered: the old view (and any other chain remembered at ``location``, kept
        by its id at no place) is recorded in the refusals record first. An empty chain
        (``chain_id`` None, size 0) leaves nothing remembered at ``location``. Returns the
        view replaced."""
        new = TreeView(size, root, location, now_ts())
        with self.locked():
            views = dict(self.load())
            old = None if chain_id is None else views.get(chain_id)
            others = {
                cid: v
                for cid, v in views.items()
                if cid != chain_id and same_place(v.location, location)
            }
            self.record({
                "ts": new.seen, "event": "accept-current", "chain_id": chain_id,
                "location": location, "pid": os.getpid(),
                "remembered": None if old is None else _brief(old),
                "replaced_chains": {cid: _brief(v) for cid, v in others.items()},
                "found": {"size": size, "root": root.hex()},
                "message": "the operator accepted the chain as it is now",
            })  # fmt: skip
            for cid, view in others.items():
                # Still known by its id, at no place: found anywhere again, it must extend
                # what this host saw of it (a swap accepted here is no licence to roll the
                # other chain back there).
                views[cid] = TreeView(view.size, view.root, "", view.seen)
            if chain_id is not None and size > 0:
                views[chain_id] = new
            elif chain_id is not None:
                views.pop(chain_id, None)
            self.store(views)
        return old


def _brief(view: TreeView) -> dict[str, Any]:
    return {"size": view.size, "root": view.root.hex(), "seen": view.seen}


_POSTGRES = "postgresql://"
_DEFAULT_PORT = "5432"


def same_place(one: str, other: str) -> bool:
    """Whether two locations (as messages show them) name one place: a PostgreSQL URL by
    its hosts (a socket folder's text normalised: a trailing ``/`` or ``//`` is the same
    folder), ports (5432 when none is given) and database, whoever connects; a file by its
    path. A place showing ``***`` (a host, port or database not in a safe shape), or leaving
    its host or database to libpq's defaults (PGHOST, PGDATABASE, a service file), is no
    place known here: another one shown alike may be another database, so it is the same
    place as none."""
    if not one.startswith(_POSTGRES):
        return one == other
    place = _place(one)
    return place is not None and "***" not in place and place == _place(other)


def _place(location: str) -> str | None:
    from urllib.parse import unquote

    if not location.startswith(_POSTGRES):
        return None
    rest = location[len(_POSTGRES) :]
    hosts, _, database = rest.partition("/")
    hosts = hosts.rpartition("@")[2]  # (the user: not part of the place)
    places = []
    for part in hosts.split(","):
        if part.startswith("["):
            host, _, port = part[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, colon, port = part.rpartition(":")
            if not colon:
                host, port = part, ""
        host = unquote(host)
        if not host:
            return None  # (left to libpq's defaults: PGHOST, a service file, its socket)
        host = os.path.normpath(host) if host.startswith("/") else host.lower()
        port = str(int(port)) if port.isdigit() else port  # (05432 is 5432)
        places.append(f"{host}:{port or _DEFAULT_PORT}")
    # (no database: libpq's default, PGDATABASE or the user's name, names no place here)
    return ",".join(places) + "/" + database if database else None


def judge(
    views: Mapping[str, TreeView],
    chain_id: str,
    size: int,
    location: str,
    root_of: Callable[[int], bytes],
) -> tuple[str, str, TreeView, bytes | None] | None:
    """Why the tree of ``size`` records of ``chain_id`` at ``location`` does not extend what
    ``views`` remember (``root_of(m)``: that tree's root of its first m records), as
    (event, reason, the view it contradicts, the root found or None); None when it does."""
    seen = views.get(chain_id)
    # Another chain this host saw here: this one replaced it, whether the host has seen this
    # one elsewhere too (two databases swapped) or never.
    replaced = [
        (cid, v) for cid, v in views.items() if cid != chain_id and same_place(v.location, location)
    ]
    if replaced:
        cid, old = max(replaced, key=lambda item: item[1].size)
        where = "" if seen is None else seen.location or "another place"
        elsewhere = f" (this host has seen it at {where})" if where else ""
        return ("replaced",
                f"it is chain {chain_id}, holding {size} records{elsewhere}, but this host has "
                f"seen chain {cid} there, holding {old.size} records (root {old.root.hex()}, "
                f"seen {old.seen}): a rollback (the database was replaced by another chain)",
                old, None)  # fmt: skip
    if seen is None:
        return None
    if size < seen.size:
        return ("rollback",
                f"it holds {size} records, but this host has seen it hold {seen.size} (root "
                f"{seen.root.hex()}, seen {seen.seen}): a rollback (an older backup restored, "
                f"or records removed; records {size} to {seen.size - 1} are gone)",
                seen, None)  # fmt: skip
    found = root_of(seen.size)
    if found != seen.root:
        return ("fork",
                f"the tree of its first {seen.size} records has root {found.hex()}, but this "
                f"host has seen root {seen.root.hex()} for them (seen {seen.seen}): a fork "
                "(records were rewritten, or an older backup was restored and appended to)",
                seen, found)  # fmt: skip
    return None


_RECORDED = "The refusal is recorded in {}."  # (recorded() replaces it when it was not)


def _message(refusing: str, why: str, record: Path) -> str:
    return (
        f"{refusing}: {why}. {_RECORDED.format(record)} Find out what happened to the chain; "
        f"to accept it as it is now, run {ACCEPT_HINT} on this host"
    )


class AppendWitness:
    """One append's witness: checks the store's tree against the view under the lock, and
    grows the view once the record is durable. A context manager: the lock is taken on
    entry, before the store's transaction (so an append never waits for it while holding
    the chain's lock: a process of this host stopped while holding it stalls this host's
    appends only, not the fleet's), and released on exit. ``check`` may run more than
    once (a store that retries its transaction)."""

    def __init__(self, views: ChainViews, location: str, *, deadline: float | None = None) -> None:
        self.views = views
        self.location = location
        self.deadline = deadline  # (time.monotonic()) the append's, which the lock wait keeps
        self._held = False
        self._seen: dict[str, TreeView] | None = None  # as read by check, under the lock
        # What prepare encoded for grow: (chain id, size, root) and the encoded views.
        self._prepared: tuple[tuple[str, int, bytes], _Encoded] | None = None

    def __enter__(self) -> AppendWitness:
        self._hold()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._held:
            self._held, self._seen, self._prepared = False, None, None
            self.views.release()

    def _hold(self) -> None:
        if not self._held:
            self.views.acquire(by=self.deadline)
            self._held = True

    def check(
        self,
        chain_id: str,
        size: int,
        subtree: merkle.Subtree,
        refused: Callable[[], Mapping[str, Any]],
    ) -> None:
        """Refuse (ChainRollbackError, recorded) unless the store's tree of ``size`` leaves,
        read through ``subtree``, extends what this host remembers of ``chain_id``.
        ``refused`` describes the record that would not be written (called on refusal)."""
        self._hold()
        try:
            views = self._seen = self.views.load()
        except ChainWriteError as exc:
            # (a view that cannot be read witnesses nothing: refused, and recorded as any)
            raise HostViewError(self.views.recorded({
                "ts": now_ts(), "event": "unreadable-view", "chain_id": chain_id,
                "location": self.location, "remembered": None,
                "found": {"size": size, "root": None}, "pid": os.getpid(),
                "message": str(exc), "refused": dict(refused()),
            })) from exc  # fmt: skip
        found = judge(views, chain_id, size, self.location, lambda m: merkle.root(m, subtree))
        if found is not None:
            event, why, seen, root = found
            message = _message(f"refusing to append to the audit chain {self.location}",
                               why, self.views.refusals_path)  # fmt: skip
            raise ChainRollbackError(self.views.recorded({
                "ts": now_ts(), "event": event, "chain_id": chain_id,
                "location": self.location, "remembered": _brief(seen),
                "found": {"size": size, "root": root and root.hex()},
                "pid": os.getpid(), "message": message, "refused": dict(refused()),
            }))  # fmt: skip

    def agrees(self, chain_id: str, size: int, root: bytes) -> bool:
        """Whether the tree of ``size`` leaves with root ``root`` is exactly the one this
        host remembers of ``chain_id`` (no refusal is recorded either way)."""
        self._hold()
        if self._seen is None:
            self._seen = self.views.load()
        seen = self._seen.get(chain_id)
        return (
            seen is not None
            and seen.size == size
            and seen.location == self.location
            and seen.root == root
        )

    def prepare(self, chain_id: str, size: int, root: bytes) -> None:
        """Encode ahead what ``grow`` with the same arguments will write, while the record
        is not durable yet (nothing is written here). Never fails: ``grow`` does all of it
        again when nothing was prepared."""
        self._prepared = None
        if not self._held or self._seen is None:
            return
        try:
            views = self._grown(self._seen, chain_id, size, root)
            if views is not None:
                self._prepared = ((chain_id, size, root), self.views.encoded(views))
        except Exception:  # (grow meets it again, and says what it is)
            self._prepared = None

    def grow(self, chain_id: str, size: int, root: bytes) -> None:
        """Remember the tree (``size``, ``root``) the durable append made; it extends the
        one ``check`` found (the lock has been held since). Raises ChainWriteError."""
        self._hold()
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] == (chain_id, size, root):
            self.views.store(prepared[1].views, prepared[1])
            return
        # Every writer of the view holds the lock, held here since check: what check read
        # is still the view.
        views = self._grown(
            self.views.load() if self._seen is None else self._seen, chain_id, size, root
        )
        if views is not None:
            self.views.store(views)

    def _grown(
        self, seen: Mapping[str, TreeView], chain_id: str, size: int, root: bytes
    ) -> dict[str, TreeView] | None:
        """``seen`` with the tree (``size``, ``root``) of ``chain_id``; None when it holds
        that tree or a larger one already (a view only ever grows)."""
        now = seen.get(chain_id)
        if now is not None and now.size >= size:
            return None
        views = dict(seen)
        views[chain_id] = TreeView(size, root, self.location, now_ts())
        return views
