"""The streaming zip reader reads what the standard library writes, and refuses what it should.

``zipfile`` is the reference: every archive here is written by it (stored and deflated
members, ZIP64 records, comments, UTF-8 and cp437 names) and must read back member for
member, byte for byte, through floorctl.zipstream.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorctl import zipstream

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
