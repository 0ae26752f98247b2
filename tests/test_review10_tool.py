"""Outside review of issue 10 (build-time side): attacks that succeed on main.

Every test drives the real ``floorctl`` in a subprocess over files laid out here, and judges
with the real runtime (a host copy of floorguard) where a verdict is the point. Each one
fails while the attack works and passes once it is fixed.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from hosts import Host

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'
CLAUDE = "@anthropic-ai/claude-code"


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "project"
        self.state = root / "state"
        (self.dir / MODULE.parent).mkdir(parents=True)
        (self.dir / MODULE).write_text(EMPTY_MODULE)

    def put(self, name: str, document: Any) -> str:
        (self.dir / name).write_text(json.dumps(document))
        return name

    def run(self, *args: str | Path) -> Any:
        return floorctl(*args, cwd=self.dir, state=self.state)

    @property
    def module(self) -> Path:
        return self.dir / MODULE

    def receipt(self) -> dict[str, Any]:
        envelope = json.loads((self.dir / "receipt.json").read_text())
        predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        return predicate


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def osv_record(record_id: str = "GHSA-aaaa-bbbb-cccc", **fields: Any) -> dict[str, Any]:
    made: dict[str, Any] = {
        "schema_version": "1.6.0",
        "id": record_id,
        "modified": "2025-06-01T12:00:00Z",
        "summary": "Command injection in hooks",
        "affected": [
            {
                "package": {"ecosystem": "npm", "name": CLAUDE},
                "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.0.5"}]}],
            }
        ],
    }
    made.update(fields)
    return made


# --- 1. import osv writes a feed that validate and refresh refuse ------------------------------

IMPORT_ACCEPTS_FEED_REFUSES = {
    # OSV allows any score string; the feed allows only a CVSS vector or a word.
    "severity score with a space": {"severity": [{"type": "CVSS_V3", "score": "7.5 HIGH"}]},
    # OSV (and schemas/osv.schema.json) allow types a later 1.x adds; the feed lists four.
    "severity type the feed does not list": {"severity": [{"type": "CVSS_V5", "score": "9.8"}]},
    # The feed caps references and aliases at 64 per advisory; OSV does not.
    "65 references": {
        "references": [{"type": "WEB", "url": f"https://example.com/ref/{i}"} for i in range(65)]
    },
    "65 aliases": {"aliases": [f"CVE-2025-{10000 + i}" for i in range(65)]},
}


@pytest.mark.parametrize("case", sorted(IMPORT_ACCEPTS_FEED_REFUSES))
def test_import_osv_never_writes_a_feed_that_validate_refuses(project: Project, case: str) -> None:
    project.put("record.json", osv_record(**IMPORT_ACCEPTS_FEED_REFUSES[case]))
    imported = project.run("import", "osv", "record.json", "--out", "feed.json")
    if imported.returncode != 0:
        # Refusing the record (naming the file and JSON path) is a fix too.
        assert imported.returncode == 1, imported.stderr
        assert "record.json" in imported.stderr and "$." in imported.stderr, imported.stderr
        assert not (project.dir / "feed.json").exists()
        return
    # Written: then it is a schema-3 feed that validates and refreshes (issue 10, tests).
    checked = project.run("validate", "feed.json")
    assert checked.returncode == 0, checked.stderr
    refreshed = project.run("refresh", "--feed", "feed.json", "--write")
    assert refreshed.returncode == 0, refreshed.stderr


# --- 2. a schema-1 floor re-read in SemVer order lets a refused version through ---------------


def test_a_floor_moved_from_pep440_to_semver_order_is_a_downgrade(
    project: Project, tmp_path: Path
) -> None:
    """goose's schema-1 floor 2.0.0-beta.2 is judged in PEP 440 order (no ecosystem stated,
    none in the catalog): 2.0.0-dev.1 is a dev release below it, refused. Adding a schema-3
    feed for goose gives the same floor the npm ecosystem, where "dev.1" sorts after
    "beta.2": 2.0.0-dev.1 would be permitted. A version once refused let through: a
    downgrade (README: a switch of version order is one), so --allow-downgrade is needed.
    (claude, an npm CLI in the catalog, is judged by SemVer under a schema-1 floor already.)
    """
    project.put(
        "v1.json",
        {
            "schema_version": 1,
            "adapters": {
                "goose": {
                    "min_safe_version": "2.0.0-beta.2",
                    "advisory_id": "BSA-0001",
                    "note": "Upgrade past the beta.",
                }
            },
        },
    )
    project.put(
        "osv.json",
        {
            "schema_version": 3,
            "adapters": {
                "goose": {
                    "ecosystem": "npm",
                    "advisories": [
                        {
                            "id": "GHSA-aaaa-bbbb-cccc",
                            "summary": "Old line.",
                            "affected": [{"introduced": "0", "fixed": "1.0.0"}],
                        }
                    ],
                }
            },
        },
    )
    first = project.run("refresh", "--feed", "v1.json", "--write")
    assert first.returncode == 0, first.stderr
    host = Host(tmp_path / "host", {})
    host.set_map(project.module.read_text())
    before = host.preflight("goose", version="2.0.0-dev.1")
    assert before["verdict"] == "refuse", before

    second = project.run("refresh", "--feed", "v1.json", "--feed", "osv.json", "--write")
    host.set_map(project.module.read_text())
    after = host.preflight("goose", version="2.0.0-dev.1")
    # Either the refresh is refused as a downgrade, or the version stays refused.
    assert second.returncode == 1 or after["verdict"] == "refuse", (second.stderr, after)
    if second.returncode == 1:
        assert "--allow-downgrade" in second.stderr


# --- 3. the reserved pseudo-id "floor" as an advisory alias -----------------------------------


def test_a_waiver_for_the_floor_does_not_waive_an_advisory_aliased_floor(
    project: Project, tmp_path: Path
) -> None:
    """A waiver that names only "floor" is reviewed as covering the below-floor refusal.
    An OSV record may carry the alias "floor" (nothing refuses it), and then that waiver
    also waives the record's advisory, which it never names by id."""
    project.put(
        "record.json",
        osv_record(
            "GHSA-hhhh-jjjj-kkkk",
            aliases=["floor"],
            affected=[
                {
                    "package": {"ecosystem": "npm", "name": CLAUDE},
                    "ranges": [
                        {"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "2.0.0"}]}
                    ],
                }
            ],
        ),
    )
    project.put(
        "floor.json",
        {
            "schema_version": 3,
            "adapters": {
                "claude": {
                    "ecosystem": "npm",
                    "min_safe_version": "1.0.20",
                    "advisory_id": "BSA-0002",
                    "note": "Upgrade.",
                    "advisories": [],
                }
            },
        },
    )
    project.put(
        "waivers.json",
        {
            "schema_version": 1,
            "waivers": [
                {
                    "id": "WVR-0001",
                    "adapter": "claude",
                    "version": "1.0.10",
                    "advisories": ["floor"],
                    "reason": "below the floor only; reviewed",
                    "approved_by": "security team",
                    "expires": "2099-01-01T00:00:00Z",
                }
            ],
        },
    )
    imported = project.run("import", "osv", "record.json", "--out", "osv.json")
    if imported.returncode != 0:
        assert imported.returncode == 1 and "record.json" in imported.stderr, imported.stderr
        return  # the reserved name refused at import: fixed
    refreshed = project.run(
        "refresh",
        "--feed",
        "floor.json",
        "--feed",
        "osv.json",
        "--waivers",
        "waivers.json",
        "--write",
    )
    if refreshed.returncode != 0:
        assert refreshed.returncode == 1, refreshed.stderr
        return  # refused at refresh (the waiver does not cover GHSA-hhhh-...): fixed
    host = Host(tmp_path / "host", {})
    host.set_map(project.module.read_text())
    decision = host.preflight("claude", version="1.0.10")
    assert decision["verdict"] == "refuse", decision


# --- 4. an overlapping-member zip costs unbounded time --------------------------------------


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
    (65,535 entries, a 4 MB file, take about 20 minutes; ZIP64 allows millions). zipfile
    refuses such an archive (the local header names another file); the streaming reader
    inflates the same body for every entry."""
    overlapping_zip(project.dir / "all.zip", 400)
    started = time.monotonic()
    done = project.run("import", "osv", "all.zip", "--out", "feed.json")
    elapsed = time.monotonic() - started
    assert done.returncode == 1, (elapsed, done.stderr)
    assert "all.zip" in done.stderr and "Traceback" not in done.stderr
    assert not (project.dir / "feed.json").exists()


# --- 5. --force diffs against the hand-edited block, not the map in force ---------------------


def test_force_over_a_hand_edit_still_refuses_removing_an_advisory(project: Project) -> None:
    """The block states hash H1 (its map has GHSA-aaaa...). Someone deletes that advisory from
    the block by hand; a refresh --force from a feed without it then sees no removal: no
    downgrade refused, and the signed receipt binds old hash H1 with a diff that names no
    removed advisory. --force is for overwriting a hand edit, not for downgrades."""
    kept = {"id": "GHSA-2222-3333-4444", "summary": "Listed.", "versions": ["4.0.0"]}
    gone = {
        "id": "GHSA-aaaa-bbbb-cccc",
        "summary": "Ranged.",
        "affected": [{"introduced": "0", "fixed": "2.0.0"}],
    }

    def feed(*advisories: dict[str, Any]) -> dict[str, Any]:
        return {
            "schema_version": 3,
            "adapters": {"claude": {"ecosystem": "npm", "advisories": list(advisories)}},
        }

    project.put("a.json", feed(kept, gone))
    project.put("b.json", feed(kept))
    assert project.run("refresh", "--feed", "a.json", "--write").returncode == 0
    plain = project.run("refresh", "--feed", "b.json", "--write")
    assert plain.returncode == 1 and "removes advisory GHSA-aaaa-bbbb-cccc" in plain.stderr

    text = project.module.read_text()
    start = text.index('            {\n                "id": "GHSA-aaaa')
    end = text.index("            },\n", start) + len("            },\n")
    project.module.write_text(text[:start] + text[end:])

    forced = project.run(
        "refresh", "--feed", "b.json", "--write", "--force", "--receipt-out", "receipt.json"
    )
    receipt = project.receipt() if forced.returncode == 0 else None
    assert forced.returncode == 1, receipt and receipt["diff"]
    assert "GHSA-aaaa-bbbb-cccc" in forced.stderr and "--allow-downgrade" in forced.stderr
