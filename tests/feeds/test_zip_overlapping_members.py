"""An advisory zip whose members overlap (many names for one compressed body) is refused in
bounded time, not inflated again and again."""

from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path

import pytest
from helpers.host_project import Project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def overlapping_zip(path: Path, members: int) -> None:
    """One deflated ~4 MiB member (a record of another package padded with spaces) and a
    central directory of ``members`` entries that all point at it (a non-recursive zip
    bomb: each entry is under the 4 MiB cap, the archive is ~60 bytes per entry)."""
    record = json.dumps(
        {
            "schema_version": "1.6.0",
            "id": "GHSA-zzzz-zzzz-zzzz",
            "modified": "2025-06-01T12:00:00Z",
            "affected": [
                {"package": {"ecosystem": "npm", "name": "left-pad"}, "versions": ["1.0.0"]}
            ],
        }
    ).encode()
    data = record + b" " * (4 * 1024 * 1024 - 4096 - len(record))
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = packer.compress(data) + packer.flush()
    crc = zlib.crc32(data)
    name = b"r.json"
    local = (
        struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(body), len(data), len(name), 0
        )
        + name
        + body
    )
    central = bytearray()
    for i in range(members):
        entry_name = b"r%06d.json" % i
        central += (
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                8,
                0,
                0,
                crc,
                len(body),
                len(data),
                len(entry_name),
                0,
                0,
                0,
                0,
                0,
                0,
            )
            + entry_name
        )
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, members, members, len(central), len(local), 0)
    path.write_bytes(local + bytes(central) + end)


def test_a_zip_whose_members_share_one_body_is_refused_not_inflated_again_and_again(
    project: Project,
) -> None:
    """400 central entries, one 4 KiB deflated body: 1.6 GB to inflate from a 28 KB file
    (65,535 entries, a 4 MB file, would take about 20 minutes; ZIP64 allows millions).
    zipfile refuses such an archive (the local header names another file); the streaming
    reader must not inflate the same body for every entry."""
    overlapping_zip(project.dir / "all.zip", 400)
    started = time.monotonic()
    done = project.run("import", "osv", "all.zip", "--out", "feed.json")
    elapsed = time.monotonic() - started
    assert done.returncode == 1, (elapsed, done.stderr)
    assert "all.zip" in done.stderr and "Traceback" not in done.stderr
    assert not (project.dir / "feed.json").exists()
