"""The streaming zip reader reads what the standard library writes, and refuses what it should.

``zipfile`` is the reference: every archive here is written by it (stored and deflated
members, ZIP64 records, comments, UTF-8 and cp437 names) and must read back member for
member, byte for byte, through floorctl.zipstream.
"""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorctl import zipstream

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
    min_size=1,
    max_size=30,
)
members = st.lists(
    st.tuples(
        names, st.binary(max_size=3000), st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
    ),
    max_size=12,
    unique_by=lambda member: member[0],
)


def read_all(path: Path, max_bytes: int = 1 << 20) -> list[tuple[str, bytes]]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return [
            (m.name, zipstream.read_member(fd, size, m, max_bytes=max_bytes))
            for m in zipstream.iter_members(fd, size)
            if not m.is_dir
        ]
    finally:
        os.close(fd)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(members=members, force_zip64=st.booleans(), comment=st.binary(max_size=200))
def test_reads_every_member_the_standard_library_writes(
    tmp_path: Path, members: list[tuple[str, bytes, int]], force_zip64: bool, comment: bytes
) -> None:
    path = tmp_path / "archive.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.comment = comment
        for name, data, method in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            with archive.open(info, "w", force_zip64=force_zip64) as out:
                out.write(data)
    assert read_all(path) == [(name, data) for name, data, _ in members]


def test_reads_an_archive_with_more_members_than_a_classic_directory_can_count(
    tmp_path: Path,
) -> None:
    # 65,536 members need the ZIP64 end records: the classic count field holds 65,535.
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for index in range(65_536):
            archive.writestr(f"r{index}.json", b"{}")
    fd = os.open(path, os.O_RDONLY)
    try:
        listed = list(zipstream.iter_members(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)
    assert len(listed) == 65_536
    assert listed[-1].name == "r65535.json"


def test_refuses_a_member_larger_than_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.json", b" " * 100_000)
    with pytest.raises(zipstream.MemberError):
        read_all(path, max_bytes=10_000)


def test_refuses_a_member_whose_bytes_do_not_match_its_checksum(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("r.json", b'{"id": "GHSA-aaaa-bbbb-cccc"}')
    data = bytearray(path.read_bytes())
    at = data.index(b"GHSA")
    data[at] = ord("X")
    path.write_bytes(bytes(data))
    with pytest.raises(zipstream.MemberError):
        read_all(path)


@pytest.mark.parametrize("cut", [1, 22, 200])
def test_refuses_a_truncated_archive(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "cut.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for index in range(5):
            archive.writestr(f"r{index}.json", b"{}" * 50)
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises((zipstream.ZipFormatError, zipstream.MemberError)):
        read_all(path)


# --- overlapping members: one body shared by many entries is a zip bomb ---------------------


def _central_entries(data: bytes) -> list[int]:
    """File offsets of each central directory entry of ``data`` (an archive zipfile wrote)."""
    found, at = [], data.index(b"PK\x01\x02")
    while data[at : at + 4] == b"PK\x01\x02":
        found.append(at)
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, at + 28)
        at += 46 + name_len + extra_len + comment_len
    return found


def _two_member_zip(path: Path, second: bytes = b'{"b": 1}') -> bytes:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("a.json", b'{"a": 1}')
        archive.writestr("b.json", second)
    return path.read_bytes()


def test_refuses_two_entries_that_share_one_local_header(tmp_path: Path) -> None:
    path = tmp_path / "shared.zip"
    data = bytearray(_two_member_zip(path))
    struct.pack_into("<L", data, _central_entries(bytes(data))[1] + 42, 0)  # b -> a's header
    path.write_bytes(bytes(data))
    with pytest.raises(zipstream.ZipFormatError, match="share the local header"):
        read_all(path)


def test_refuses_a_member_whose_data_runs_into_the_next_local_header(tmp_path: Path) -> None:
    # a.json's stored data holds a whole local header and body of b.json, and the central
    # entry of b.json points there: distinct offsets, but the two members overlap.
    inner_path = tmp_path / "inner.zip"
    with zipfile.ZipFile(inner_path, "w", zipfile.ZIP_STORED) as inner:
        inner.writestr("b.json", b'{"b": 1}')
    inner_data = inner_path.read_bytes()
    local_b = inner_data[: _central_entries(inner_data)[0]]
    path = tmp_path / "overlap.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("a.json", local_b)
        archive.writestr("b.json", b'{"b": 1}')
    data = bytearray(path.read_bytes())
    struct.pack_into("<L", data, _central_entries(bytes(data))[1] + 42, 30 + len("a.json"))
    path.write_bytes(bytes(data))
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        first, second = zipstream.iter_members(fd, size)
        with pytest.raises(zipstream.MemberError, match="overlaps the next member"):
            zipstream.read_member(fd, size, first, max_bytes=1 << 20)
        assert zipstream.read_member(fd, size, second, max_bytes=1 << 20) == b'{"b": 1}'
    finally:
        os.close(fd)


def test_refuses_a_local_header_that_names_another_file(tmp_path: Path) -> None:
    path = tmp_path / "renamed.zip"
    data = bytearray(_two_member_zip(path))
    at = _central_entries(bytes(data))[1] + 46
    data[at : at + 6] = b"c.json"
    path.write_bytes(bytes(data))
    with pytest.raises(zipfile.BadZipFile), zipfile.ZipFile(path) as archive:
        archive.read("c.json")  # the reference refuses it too
    with pytest.raises(zipstream.MemberError, match="names another file"):
        read_all(path)


def test_reads_a_central_directory_not_in_offset_order(tmp_path: Path) -> None:
    # Overlap is judged in offset order, so a directory listed in another order still reads.
    path = tmp_path / "reordered.zip"
    data = _two_member_zip(path)
    first, second = _central_entries(data)
    end = data.index(b"PK\x05\x06")
    path.write_bytes(data[:first] + data[second:end] + data[first:second] + data[end:])
    with zipfile.ZipFile(path) as archive:
        expected = [(name, archive.read(name)) for name in archive.namelist()]
    assert read_all(path) == expected == [("b.json", b'{"b": 1}'), ("a.json", b'{"a": 1}')]
