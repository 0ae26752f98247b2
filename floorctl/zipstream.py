"""Reading the members of a zip archive one at a time, in memory that does not grow with it.

``zipfile`` loads the whole central directory as objects before the first member can be
read: about 400 bytes per member, so 80 MB for the 200,000 records of an OSV export. Here
the central directory is walked entry by entry with ``pread`` (ZIP64 included), and each
member is inflated under a cap, so a member whose stated or actual size exceeds the cap
(a zip bomb) is refused without being held in memory. The central directory is the
archive's truth: members are found through it, never by scanning for local headers.

Members may not overlap: many central entries pointing at one deflated body would have it
inflated again for each (a zip bomb of ~60 bytes an entry, under every per-member cap).
So the directory is walked twice: first for the local header offsets alone (8 bytes a
member, sorted; two entries at one offset refuse the archive), then for the members, each
bounded by the next local header in offset order (or the central directory). A member
whose data runs past that bound, or whose local header names another file, is refused
before anything is inflated, so the work is bounded by the archive's own size.

Only what OSV exports use is read: stored and deflated members, no encryption, one disk.
"""

from __future__ import annotations

import array
import bisect
import dataclasses
import itertools
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_EOCD_SIG = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_LOCATOR_SIG = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_ZIP64_EOCD_SIG = b"PK\x06\x06"
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_CENTRAL_SIG = b"PK\x01\x02"
_LOCAL = struct.Struct("<4s5H3L2H")
_LOCAL_SIG = b"PK\x03\x04"
_ZIP64_EXTRA = 0x0001
_MAX_COMMENT = 0xFFFF
_STORED, _DEFLATED = 0, 8
_ENCRYPTED = 0x1
_UTF8_NAME = 0x800
_CHUNK = 64 * 1024


class ZipFormatError(Exception):
    """The archive as a whole cannot be read (no central directory, truncated, multi-disk).
    Nothing more can be read from it."""


class MemberError(Exception):
    """One member cannot be read (too large, unsupported, corrupt); the others still can."""


@dataclass(frozen=True)
class Member:
    """One central directory entry: where the member is and what it claims to be."""

    name: str
    flags: int
    method: int
    crc: int
    compressed_size: int
    size: int
    header_offset: int
    raw_name: bytes = b""  # as the central directory spells it; the local header must match
    # Where the next member's local header (or the central directory) begins: this
    # member's header and data must end there or before.
    limit: int = -1

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise ZipFormatError("the archive is truncated")
    return data


def _central_directory(fd: int, file_size: int) -> tuple[int, int, int]:
    """(offset, size, entry count) of the central directory, from the end records."""
    tail_size = min(file_size, _EOCD.size + _MAX_COMMENT)
    tail = _pread_exact(fd, tail_size, file_size - tail_size)
    at = tail.rfind(_EOCD_SIG)
    while at >= 0 and at + _EOCD.size > len(tail):
        at = tail.rfind(_EOCD_SIG, 0, at)
    if at < 0:
        raise ZipFormatError("not a zip archive (no end of central directory record)")
    _, disk, cd_disk, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    eocd_offset = file_size - tail_size + at
    if 0xFFFF in (count, disk, cd_disk) or 0xFFFFFFFF in (cd_size, cd_offset):
        locator_at = eocd_offset - _ZIP64_LOCATOR.size
        if locator_at < 0:
            raise ZipFormatError("ZIP64 archive without its locator")
        sig, _, z64_offset, _ = _ZIP64_LOCATOR.unpack(
            _pread_exact(fd, _ZIP64_LOCATOR.size, locator_at)
        )
        if sig != _ZIP64_LOCATOR_SIG:
            raise ZipFormatError("ZIP64 archive without its locator")
        record = _ZIP64_EOCD.unpack(_pread_exact(fd, _ZIP64_EOCD.size, z64_offset))
        if record[0] != _ZIP64_EOCD_SIG:
            raise ZipFormatError("ZIP64 end of central directory record not found")
        disk, cd_disk, _, count, cd_size, cd_offset = record[4:10]
    if disk != 0 or cd_disk != 0:
        raise ZipFormatError("multi-disk archives are not supported")
    if cd_offset + cd_size > file_size:
        raise ZipFormatError("the central directory lies beyond the end of the archive")
    return cd_offset, cd_size, count


def _zip64_sizes(extra: bytes, size: int, compressed: int, offset: int) -> tuple[int, int, int]:
    """Sizes and offset with the ZIP64 extra field's values for those stated as 0xFFFFFFFF."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<2H", extra, at)
        body = extra[at + 4 : at + 4 + length]
        if kind == _ZIP64_EXTRA:
            values = [v[0] for v in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            fields = [size, compressed, offset]
            for index, value in enumerate(fields):
                if value == 0xFFFFFFFF:
                    if not values:
                        raise ZipFormatError("ZIP64 extra field too short")
                    fields[index] = values.pop(0)
            return fields[0], fields[1], fields[2]
        at += 4 + length
    if 0xFFFFFFFF in (size, compressed, offset):
        raise ZipFormatError("ZIP64 sizes without a ZIP64 extra field")
    return size, compressed, offset


def iter_members(fd: int, file_size: int) -> Iterator[Member]:
    """Every central directory entry of the archive open at ``fd``, in archive order,
    each with the ``limit`` its local header and data must end by.

    Raises ZipFormatError when the directory cannot be read, or two entries share one
    local header, or one lies inside the central directory.
    """
    cd_offset, cd_size, count = _central_directory(fd, file_size)
    offsets = array.array("Q", (m.header_offset for m in _walk(fd, cd_offset, cd_size, count)))
    if any(a > b for a, b in itertools.pairwise(offsets)):
        offsets = array.array("Q", sorted(offsets))  # a list only for a directory out of order
    for previous, current in itertools.pairwise(offsets):
        if previous == current:
            raise ZipFormatError(
                f"two central directory entries share the local header at offset {current:,} "
                "(overlapping members)"
            )
    if offsets and offsets[-1] >= cd_offset:
        raise ZipFormatError("a local header lies inside or after the central directory")
    for member in _walk(fd, cd_offset, cd_size, count):
        following = bisect.bisect_right(offsets, member.header_offset)
        limit = offsets[following] if following < len(offsets) else cd_offset
        yield dataclasses.replace(member, limit=limit)


def _walk(fd: int, offset: int, size: int, count: int) -> Iterator[Member]:
    """The central directory's ``count`` entries from ``offset``, read in chunks."""
    end = offset + size
    buffer = b""
    at = 0  # read position in buffer; the buffer ends at file offset ``offset``

    def available(needed: int) -> bool:
        nonlocal buffer, at, offset
        while len(buffer) - at < needed and offset < end:
            chunk = os.pread(fd, min(max(_CHUNK, needed), end - offset), offset)
            if not chunk:
                break
            buffer = buffer[at:] + chunk
            at = 0
            offset += len(chunk)
        return len(buffer) - at >= needed

    for _ in range(count):
        if not available(_CENTRAL.size):
            raise ZipFormatError("the central directory is truncated")
        fields = _CENTRAL.unpack_from(buffer, at)
        if fields[0] != _CENTRAL_SIG:
            raise ZipFormatError("bad central directory entry")
        flags, method = fields[3], fields[4]
        crc, compressed, stated = fields[7], fields[8], fields[9]
        name_len, extra_len, comment_len = fields[10], fields[11], fields[12]
        disk, header_offset = fields[13], fields[16]
        whole = _CENTRAL.size + name_len + extra_len + comment_len
        if not available(whole):
            raise ZipFormatError("the central directory is truncated")
        name_at = at + _CENTRAL.size
        raw_name = buffer[name_at : name_at + name_len]
        extra = buffer[name_at + name_len : name_at + name_len + extra_len]
        at += whole
        stated, compressed, header_offset = _zip64_sizes(extra, stated, compressed, header_offset)
        if disk not in (0, 0xFFFF):
            raise ZipFormatError("multi-disk archives are not supported")
        name = raw_name.decode("utf-8" if flags & _UTF8_NAME else "cp437", errors="replace")
        yield Member(name, flags, method, crc, compressed, stated, header_offset, raw_name)


def read_member(fd: int, file_size: int, member: Member, *, max_bytes: int) -> bytes:
    """The uncompressed bytes of ``member``, checked against its CRC-32 and stated size.

    Raises MemberError when the member is encrypted, uses another method than stored or
    deflate, or states or inflates to more than ``max_bytes`` (checked before reading and
    again while inflating, so a zip bomb costs at most ``max_bytes`` of memory).
    """
    if member.flags & _ENCRYPTED:
        raise MemberError("encrypted members are not supported")
    if member.method not in (_STORED, _DEFLATED):
        raise MemberError(f"compression method {member.method} is not supported")
    if member.size > max_bytes:
        raise MemberError(f"states {member.size:,} bytes, more than the cap of {max_bytes:,}")
    if member.method == _STORED and member.compressed_size != member.size:
        raise MemberError("a stored member whose sizes differ")
    header = os.pread(fd, _LOCAL.size, member.header_offset)
    if len(header) != _LOCAL.size or header[:4] != _LOCAL_SIG:
        raise MemberError("bad local header")
    name_len, extra_len = _LOCAL.unpack(header)[9:11]
    start = member.header_offset + _LOCAL.size + name_len + extra_len
    if start + member.compressed_size > file_size:
        raise MemberError("the member's data lies beyond the end of the archive")
    limit = file_size if member.limit < 0 else member.limit
    if start + member.compressed_size > limit:
        raise MemberError("the member's data overlaps the next member (or the central directory)")
    if os.pread(fd, name_len, member.header_offset + _LOCAL.size) != member.raw_name:
        raise MemberError("the local header names another file than the central directory")
    inflate = zlib.decompressobj(-zlib.MAX_WBITS) if member.method == _DEFLATED else None
    out: list[bytes] = []
    total = 0
    position, left = start, member.compressed_size
    while left:
        chunk = os.pread(fd, min(_CHUNK, left), position)
        if not chunk:
            raise MemberError("the member's data is truncated")
        position += len(chunk)
        left -= len(chunk)
        if inflate is not None:
            try:
                # max_length bounds what one call may produce: no bomb expands unchecked.
                piece = inflate.decompress(chunk, max_bytes + 1 - total)
            except zlib.error as exc:
                raise MemberError(f"corrupt deflate data ({exc})") from None
            if inflate.unconsumed_tail:
                raise MemberError(f"inflates to more than the cap of {max_bytes:,} bytes")
        else:
            piece = chunk
        total += len(piece)
        if total > max_bytes:
            raise MemberError(f"inflates to more than the cap of {max_bytes:,} bytes")
        out.append(piece)
    if inflate is not None and not inflate.eof:
        raise MemberError("the deflate stream is truncated")
    data = b"".join(out)
    if len(data) != member.size:
        raise MemberError(f"inflates to {len(data):,} bytes, not the {member.size:,} it states")
    if zlib.crc32(data) != member.crc:
        raise MemberError("CRC-32 mismatch (the member is corrupt)")
    return data
