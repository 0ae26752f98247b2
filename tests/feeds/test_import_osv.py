"""``floorctl import osv``: OSV records from a GHSA tree, an OSV export zip and record files
to a schema-3 feed. The real CLI in subprocesses over real files the tests lay out.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from helpers.osv_sources import (
    AIDER,
    BACKPORT,
    BACKPORT_CVE,
    CLAUDE,
    GEMINI_PRE,
    MODIFIED,
    OTHER,
    OTHER_PYPI,
    UNFIXED,
    WITHDRAWN,
    ghsa_tree,
    npm,
    osv_zip,
    pypi,
    record,
    rng,
    sources,
)

from floorctl import osv
from floorguard._maps import map_model, verdict


def run_import(tmp_path: Path, *args: str | Path) -> Any:
    return floorctl("import", "osv", *args, cwd=tmp_path, state=tmp_path)


EXPECTED_ADAPTERS = {
    "aider": {
        "ecosystem": "PyPI",
        "advisories": [
            {
                "id": "GHSA-aaaa-5555-6666",
                "aliases": [],
                "summary": "Path traversal in the /add command",
                "affected": [{"introduced": "0.40.0", "last_affected": "0.50.1"}],
                "versions": [],
                "severity": [],
                "references": [],
            }
        ],
    },
    "claude": {
        "ecosystem": "npm",
        "advisories": [
            {
                "id": "GHSA-2222-3333-4444",
                "aliases": ["CVE-2025-1111"],
                "summary": "Command injection in hooks",
                "affected": [
                    {"introduced": "0", "fixed": "1.4.7"},
                    {"introduced": "2.0.0", "fixed": "2.1.3"},
                ],
                "versions": ["2.4.0", "2.5.0"],
                "severity": [
                    {"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}
                ],
                "references": [
                    "https://github.com/advisories/GHSA-2222-3333-4444",
                    "https://nvd.nist.gov/vuln/detail/CVE-2025-1111",
                ],
            }
        ],
    },
    "gemini": {
        "ecosystem": "npm",
        "advisories": [
            {
                "id": "GHSA-gggg-7777-8888",
                "aliases": [],
                "summary": "Sandbox escape",
                "affected": [{"introduced": "2.0.0-beta.1", "fixed": "2.1.3"}],
                "versions": [],
                "severity": [],
                "references": [],
            }
        ],
    },
    "gptme": {
        "ecosystem": "PyPI",
        "advisories": [
            {
                "id": "PYSEC-2025-77",
                "aliases": [],
                "summary": "No fix yet.",
                "affected": [{"introduced": "0.20.0"}],
                "versions": [],
                "severity": [],
                "references": [],
            }
        ],
    },
}

EXPECTED_COUNTS = {
    "records_read": 8,
    "imported_advisories": 4,
    "adapters": 4,
    "merged_aliases": 1,
    "invalid_records": 0,
    "skipped": {
        "withdrawn_records": 1,
        "other_package_records": 2,
        "superseded_records": 0,
        "unsupported_ranges": 2,
        "empty_affected_entries": 1,
        "dropped_severity": 0,
        "dropped_references": 2,  # the http and the credentials URL
    },
}


def test_imports_a_ghsa_tree_and_an_osv_zip_into_the_exact_feed(tmp_path: Path) -> None:
    tree, archive = sources(tmp_path)
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, tree, archive, "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == {"schema_version": 3, "adapters": EXPECTED_ADAPTERS}
    report = json.loads(done.stdout)
    assert report == {"out": str(out), **EXPECTED_COUNTS}
    assert done.stderr.startswith(f"floorctl: wrote {out}: 8 records read, 4 advisories")


def test_the_feed_is_the_same_whatever_the_order_of_the_sources(tmp_path: Path) -> None:
    tree, archive = sources(tmp_path)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert run_import(tmp_path, tree, archive, "--out", first).returncode == 0
    assert run_import(tmp_path, archive, tree, "--out", second).returncode == 0
    assert first.read_bytes() == second.read_bytes()


def test_imported_entries_load_into_the_floor_map_and_decide_the_backport_table(
    tmp_path: Path,
) -> None:
    tree, archive = sources(tmp_path)
    out = tmp_path / "feed.json"
    assert run_import(tmp_path, tree, archive, "--out", out).returncode == 0
    adapters = json.loads(out.read_text())["adapters"]
    entries = {name: {**entry, "waivers": []} for name, entry in adapters.items()}
    built = map_model.from_entries(entries)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def refused(adapter: str, version: str) -> bool:
        return verdict.assess(built[adapter], version, at=now).unsafe

    table = {"1.4.6": True, "1.4.7": False, "1.9.0": False, "2.0.0": True, "2.1.3": False}
    assert {v: refused("claude", v) for v in table} == table
    assert refused("claude", "2.4.0") and not refused("claude", "2.4.1")
    assert refused("gemini", "2.0.0-beta.3") and not refused("gemini", "2.0.0-alpha.9")
    assert refused("gemini", "2.1.3-rc.1") and not refused("gemini", "2.1.3")
    assert not refused("gemini", "3.1.0")  # the range with a limit event was skipped
    assert refused("aider", "0.50.1") and not refused("aider", "0.50.2")
    assert not refused("aider", "0.39.9")
    assert refused("gptme", "9.0.0") and not refused("gptme", "0.19.0")
    cause = verdict.assess(built["claude"], "1.0.0", at=now).causes[0]
    assert (cause.advisory_id, cause.aliases) == ("GHSA-2222-3333-4444", ("CVE-2025-1111",))


def test_a_single_record_file_and_an_array_file(tmp_path: Path) -> None:
    single = tmp_path / "one.json"
    single.write_text(json.dumps(BACKPORT))
    array = tmp_path / "many.json"
    array.write_text(json.dumps([BACKPORT_CVE, OTHER]))
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, single, array, "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    claude = json.loads(out.read_text())["adapters"]["claude"]["advisories"]
    assert claude == EXPECTED_ADAPTERS["claude"]["advisories"]
    assert json.loads(done.stdout)["records_read"] == 3


def test_refuses_an_out_that_is_one_of_the_sources_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    single = tmp_path / "one.json"
    single.write_text(json.dumps(BACKPORT))
    link = tmp_path / "link.json"
    link.symlink_to(single)
    for out in (single, link):
        done = run_import(tmp_path, single, "--out", out)
        assert done.returncode == 2, done.stderr
        assert "is the same file as SOURCE" in done.stderr
        assert json.loads(single.read_text()) == BACKPORT


@pytest.mark.parametrize(
    "where", ["a-record-in-it", "a-new-file-in-it", "through-a-linked-folder",
              "the-source-a-link-to-it", "a-hard-link-of-a-record"],
)  # fmt: skip
def test_refuses_an_out_in_a_folder_source_and_leaves_the_tree_as_it_was(
    tmp_path: Path, where: str
) -> None:
    tree, _ = sources(tmp_path)
    source = tree
    a_record = sorted(tree.rglob("*.json"))[0]
    if where == "a-record-in-it":
        out = a_record
    elif where == "a-new-file-in-it":
        out = a_record.parent / "feed.json"
    elif where == "through-a-linked-folder":
        (tmp_path / "linked").symlink_to(a_record.parent)
        out = tmp_path / "linked" / a_record.name
    elif where == "the-source-a-link-to-it":
        source = tmp_path / "link-to-tree"
        source.symlink_to(tree)
        out = a_record
    else:
        out = tmp_path / "feed.json"
        os.link(a_record, out)
    before = {path: path.read_bytes() for path in tree.rglob("*") if path.is_file()}
    done = run_import(tmp_path, source, "--out", out)
    assert done.returncode == 2, done.stderr
    assert "--out" in done.stderr and "Traceback" not in done.stderr
    assert {path: path.read_bytes() for path in tree.rglob("*") if path.is_file()} == before


def test_aliases_merge_transitively_and_a_ghsa_id_names_the_advisory(tmp_path: Path) -> None:
    # PYSEC -> CVE <- GHSA: one advisory, named by the GHSA id, though the GHSA record
    # itself is in neither source.
    pysec = record(
        "PYSEC-2025-1",
        pypi("aider-chat", rng(("introduced", "0"), ("fixed", "1.0"), kind="ECOSYSTEM")),
        aliases=["CVE-2025-5"],
        summary="from PYSEC",
    )
    cve = record(
        "CVE-2025-5",
        pypi("aider-chat", rng(("introduced", "2.0"), ("fixed", "2.1"), kind="ECOSYSTEM")),
        aliases=["GHSA-zzzz-zzzz-zzzz"],
    )
    src = tmp_path / "r.json"
    src.write_text(json.dumps([pysec, cve]))
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, src, "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    (advisory,) = json.loads(out.read_text())["adapters"]["aider"]["advisories"]
    assert advisory["id"] == "GHSA-zzzz-zzzz-zzzz"
    assert advisory["aliases"] == ["CVE-2025-5", "PYSEC-2025-1"]
    assert advisory["affected"] == [
        {"introduced": "0", "fixed": "1.0"},
        {"introduced": "2.0", "fixed": "2.1"},
    ]
    assert advisory["summary"] == "CVE-2025-5"  # the first record by id: no summary, no details
    assert json.loads(done.stdout)["merged_aliases"] == 1


def test_the_later_modification_of_a_record_wins_and_withdrawal_supersedes(
    tmp_path: Path,
) -> None:
    old = record("GHSA-mmmm-mmmm-mmmm", npm(CLAUDE, rng(("introduced", "0"))), summary="old")
    new = {
        **old,
        "modified": "2025-07-01T00:00:00Z",
        "summary": "new",
        "affected": [npm(CLAUDE, rng(("introduced", "0"), ("fixed", "1.0.0")))],
    }
    gone = record("GHSA-dddd-dddd-dddd", npm(CLAUDE, rng(("introduced", "0"))), summary="kept?")
    gone_later = {**gone, "modified": "2025-08-01T00:00:00Z", "withdrawn": "2025-08-01T00:00:00Z"}
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    first.write_text(json.dumps([new, gone]))
    second.write_text(json.dumps([old, gone_later]))
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, first, second, "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    (advisory,) = json.loads(out.read_text())["adapters"]["claude"]["advisories"]
    assert (advisory["summary"], advisory["affected"]) == (
        "new",
        [{"introduced": "0", "fixed": "1.0.0"}],
    )
    counts = json.loads(done.stdout)
    assert counts["skipped"]["superseded_records"] == 2
    assert counts["skipped"]["withdrawn_records"] == 1


# --- invalid records ----------------------------------------------------------------------------

INVALID = {
    "missing-id": (
        {k: v for k, v in OTHER.items() if k != "id"},
        "$.id: required field missing",
    ),
    "bad-range-type": (
        record("GHSA-bbbb-1111-2222", npm("x", rng(("introduced", "0"), kind="RANGE"))),
        '$.affected[0].ranges[0].type: "RANGE" is not one of GIT, SEMVER, ECOSYSTEM',
    ),
    "bad-npm-version": (
        record("GHSA-bbbb-1111-3333", npm(CLAUDE, rng(("introduced", "0"), ("fixed", "v1.2")))),
        '$.affected[0].ranges[0].events[1].fixed: "v1.2" is not a valid SemVer version',
    ),
    "bad-listed-version": (
        record("GHSA-bbbb-1111-4444", npm(CLAUDE, versions=["1.0.0", "1.0"])),
        '$.affected[0].versions[1]: "1.0" is not a valid SemVer version',
    ),
    "aliases-not-a-list": (
        {**OTHER, "aliases": "CVE-2025-1"},
        "$.aliases: must be of type array or null, not string",
    ),
    "event-with-two-kinds": (
        {
            **OTHER,
            "affected": [
                npm("x", {"type": "SEMVER", "events": [{"introduced": "0", "fixed": "1.0.0"}]})
            ],
        },
        "$.affected[0].ranges[0].events[0]: an event holds exactly one of",
    ),
    "fixed-and-last-affected": (
        {
            **OTHER,
            "affected": [
                npm("x", rng(("introduced", "0"), ("fixed", "1.0.0"), ("last_affected", "1.0.0")))
            ],
        },
        "$.affected[0].ranges[0].events: the events may end ranges with fixed or last_affected",
    ),
    "not-a-time": (
        {**OTHER, "modified": "2025-02-30T00:00:00Z"},
        '$.modified: "2025-02-30T00:00:00Z" is not an RFC 3339 time',
    ),
    "duplicate-key": (
        None,  # written raw below
        '$: duplicate key "summary"',
    ),
}
NOT_UTF8 = b'{"id": "GHSA-x", "modified": "' + MODIFIED.encode() + b'", "summary": "\xff"}'
DUPLICATE_KEY = json.dumps(BACKPORT)[:-1].encode() + b', "summary": "second"}'


def invalid_bytes(kind: str) -> bytes:
    if kind == "duplicate-key":
        return DUPLICATE_KEY
    return json.dumps(INVALID[kind][0]).encode()


@pytest.mark.parametrize("kind", sorted(INVALID))
def test_refuses_an_invalid_record_naming_file_and_json_path_and_writes_nothing(
    tmp_path: Path, kind: str
) -> None:
    tree = ghsa_tree(tmp_path / "db", [BACKPORT])
    bad = tree / "advisories" / "github-reviewed" / "2025" / "12" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(invalid_bytes(kind))
    out = tmp_path / "feed.json"
    out.write_text("previous feed")
    done = run_import(tmp_path, tree, "--out", out)
    assert done.returncode == 1
    assert f"floorctl: error: {bad}: {INVALID[kind][1]}" in done.stderr, done.stderr
    assert out.read_text() == "previous feed"
    assert "Traceback" not in done.stderr


def test_refuses_a_record_that_is_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(NOT_UTF8)
    done = run_import(tmp_path, bad, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    assert done.stderr == f"floorctl: error: {bad}: $: not valid UTF-8 (byte offset 65)\n"
    assert not (tmp_path / "feed.json").exists()


def test_skip_invalid_reports_each_counts_it_and_imports_the_rest(tmp_path: Path) -> None:
    tree = ghsa_tree(tmp_path / "db", [BACKPORT])
    folder = tree / "advisories" / "unreviewed"
    folder.mkdir(parents=True)
    for kind in INVALID:
        (folder / f"{kind}.json").write_bytes(invalid_bytes(kind))
    (folder / "not-utf8.json").write_bytes(NOT_UTF8)
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, tree, "--out", out, "--skip-invalid", "--json")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["invalid_records"] == len(INVALID) + 1
    assert counts["records_read"] == len(INVALID) + 2
    skipped = [line for line in done.stderr.splitlines() if line.startswith("floorctl: warning:")]
    assert all(line.endswith("; invalid record skipped") for line in skipped)
    assert {line.split(": ")[2] for line in skipped} == {
        str(folder / f"{kind}.json") for kind in [*INVALID, "not-utf8"]
    }
    feed = json.loads(out.read_text())
    assert list(feed["adapters"]) == ["claude"]


def test_refuses_a_fifo_in_the_tree_without_blocking(tmp_path: Path) -> None:
    tree = ghsa_tree(tmp_path / "db", [BACKPORT])
    fifo = tree / "advisories" / "GHSA-ffff-ffff-ffff.json"
    os.mkfifo(fifo)
    done = run_import(tmp_path, tree, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    refused = "not a regular file (the OSV record is a FIFO)"
    assert done.stderr == f"floorctl: error: {fifo}: $: {refused}\n"
    skipped = run_import(tmp_path, tree, "--out", tmp_path / "feed.json", "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr


def test_refuses_a_fifo_named_as_the_source(tmp_path: Path) -> None:
    fifo = tmp_path / "records.json"
    os.mkfifo(fifo)
    done = run_import(tmp_path, fifo, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    refused = "not a regular file (the OSV source is a FIFO)"
    assert done.stderr == f"floorctl: error: {fifo}: {refused}\n"


def test_never_follows_a_symbolic_link_out_of_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "GHSA-oooo-1111-2222.json").write_text(
        json.dumps(record("GHSA-oooo-1111-2222", npm(CLAUDE, rng(("introduced", "0")))))
    )
    tree = ghsa_tree(tmp_path / "db", [BACKPORT])
    link = tree / "advisories" / "GHSA-oooo-1111-2222.json"
    link.symlink_to(outside / "GHSA-oooo-1111-2222.json")
    (tree / "advisories" / "more").symlink_to(outside, target_is_directory=True)
    # A link that stays inside is passed over: its target is read where it lies.
    inside = tree / "advisories" / "again.json"
    inside.symlink_to(next(tree.rglob("GHSA-2222-3333-4444.json")))
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, tree, "--out", out)
    assert done.returncode == 1
    assert f"{link}: $: a symbolic link that leads out of the tree; not followed" in done.stderr
    skipped = run_import(tmp_path, tree, "--out", out, "--skip-invalid", "--json")
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads(skipped.stdout)["invalid_records"] == 2  # the file link and the folder
    assert json.loads(skipped.stdout)["records_read"] == 3
    ids = [a["id"] for a in json.loads(out.read_text())["adapters"]["claude"]["advisories"]]
    assert ids == ["GHSA-2222-3333-4444"]


def _member_header_offset(archive: bytes, name: str) -> int:
    """Offset of the central directory entry of ``name``."""
    at = archive.index(b"PK\x01\x02")
    while True:
        length = struct.unpack_from("<H", archive, at + 28)[0]
        if archive[at + 46 : at + 46 + length] == name.encode():
            return at
        at = archive.index(b"PK\x01\x02", at + 4)


def test_refuses_a_zip_member_that_states_more_than_the_cap(tmp_path: Path) -> None:
    big = json.dumps({**OTHER, "details": "x" * (5 * 1024 * 1024)}).encode()
    archive = osv_zip(tmp_path / "all.zip", [BACKPORT], **{"GHSA-big.json": big})
    done = run_import(tmp_path, archive, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"floorctl: error: {archive}!GHSA-big.json: $: zip member refused: states 5,"
    )
    assert "more than the cap of 4,194,304" in done.stderr
    skipped = run_import(tmp_path, archive, "--out", tmp_path / "feed.json", "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr


def test_refuses_a_zip_bomb_that_understates_its_size(tmp_path: Path) -> None:
    bomb = b'{"id": "GHSA-bomb", "details": "' + b"0" * (64 * 1024 * 1024) + b'"}'
    archive = osv_zip(tmp_path / "all.zip", [BACKPORT], **{"GHSA-bomb.json": bomb})
    data = bytearray(archive.read_bytes())
    entry = _member_header_offset(bytes(data), "GHSA-bomb.json")
    struct.pack_into("<L", data, entry + 24, 100)  # the central directory now claims 100 bytes
    archive.write_bytes(bytes(data))
    done = run_import(tmp_path, archive, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    assert done.stderr == (
        f"floorctl: error: {archive}!GHSA-bomb.json: $: zip member refused: "
        "inflates to more than the cap of 4,194,304 bytes\n"
    )


def test_refuses_a_corrupt_zip_member_and_a_file_that_is_no_zip(tmp_path: Path) -> None:
    archive = osv_zip(tmp_path / "all.zip", [BACKPORT])
    data = bytearray(archive.read_bytes())
    data[60] ^= 0xFF  # inside the member's deflate data
    archive.write_bytes(bytes(data))
    done = run_import(tmp_path, archive, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    assert f"{archive}!GHSA-2222-3333-4444.json: $: zip member refused:" in done.stderr
    truncated = tmp_path / "cut.zip"
    truncated.write_bytes(osv_zip(tmp_path / "x.zip", [BACKPORT]).read_bytes()[:80])
    done = run_import(tmp_path, truncated, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    assert "not a readable zip" in done.stderr


# --- injection ----------------------------------------------------------------------------------

HOSTILE = (
    '"""; import os; os.system("id") #{{ config }}{% raw %}{# c #}\\\n'
    "\u202etxt.exe\x1b[31m" + "z" * 1200
)


def test_summary_cannot_carry_code_or_template_syntax_into_the_feed(tmp_path: Path) -> None:
    hostile = record("GHSA-hhhh-hhhh-hhhh", npm(CLAUDE, rng(("introduced", "0"))), summary=HOSTILE)
    src = tmp_path / "r.json"
    src.write_text(json.dumps(hostile))
    out = tmp_path / "feed.json"
    done = run_import(tmp_path, src, "--out", out)
    assert done.returncode == 0, done.stderr
    (advisory,) = json.loads(out.read_text())["adapters"]["claude"]["advisories"]
    summary = advisory["summary"]
    assert summary.startswith(
        "'''; import os; os.system('id') #{ { config } }{ % raw % }{ # c # }/"
    )
    assert summary.isprintable() and len(summary) == 1000 and summary.endswith("z...")
    for forbidden in ('"', "\\", "{{", "}}", "{%", "%}", "{#", "#}", "\u202e", "\x1b"):
        assert forbidden not in summary


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("id", 'GHSA-x"+__import__("os")+"', "$.id"),
        ("id", "GHSA-{{7*7}}", "$.id"),
        ("aliases", ["CVE-2025-1", "{%-raw-%}"], "$.aliases[1]"),
        ("aliases", ["CVE-2025-1\n"], "$.aliases[0]"),
        ("severity", [{"type": "CVSS_V3", "score": 'x"}} {{x'}], "$.severity[0].score"),
    ],
)
def test_ids_and_scores_that_could_inject_are_refused(
    tmp_path: Path, field: str, value: Any, path: str
) -> None:
    hostile = record("GHSA-hhhh-hhhh-hhhh", npm(CLAUDE, rng(("introduced", "0"))))
    hostile[field] = value
    src = tmp_path / "r.json"
    src.write_text(json.dumps(hostile))
    done = run_import(tmp_path, src, "--out", tmp_path / "feed.json")
    assert done.returncode == 1
    assert f"floorctl: error: {src}: {path}: " in done.stderr, done.stderr
    assert not (tmp_path / "feed.json").exists()


# --- --package ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        "claude",
        "npm:left-pad",
        "cargo:left-pad=claude",
        "npm:Left Pad=claude",
        "npm:left-pad=Claude",
        "npm:left-pad=",
        "PyPI:aider-chat2=claude",  # claude is an npm adapter
    ],
)
def test_a_malformed_package_option_is_a_usage_error(tmp_path: Path, option: str) -> None:
    src = tmp_path / "r.json"
    src.write_text(json.dumps(BACKPORT))
    done = run_import(tmp_path, src, "--out", tmp_path / "feed.json", "--package", option)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("floorctl: error: --package"), done.stderr
    assert not (tmp_path / "feed.json").exists()


def test_a_package_option_maps_another_package(tmp_path: Path) -> None:
    src = tmp_path / "r.json"
    src.write_text(json.dumps([OTHER, OTHER_PYPI]))
    out = tmp_path / "feed.json"
    done = run_import(
        tmp_path,
        src,
        "--out",
        out,
        "--package",
        "npm:left-pad=padder",
        "--package",
        "PyPI:Requests=req",
    )
    assert done.returncode == 0, done.stderr
    adapters = json.loads(out.read_text())["adapters"]
    assert {name: entry["ecosystem"] for name, entry in adapters.items()} == {
        "padder": "npm",
        "req": "PyPI",
    }


# --- the pure core ------------------------------------------------------------------------------


def _intervals(events: list[tuple[str, str]], ecosystem: str) -> list[dict[str, str]]:
    return [i.as_json() for i in osv.intervals([{k: v} for k, v in events], ecosystem)]


def test_intervals_follow_osv_semantics_in_each_ecosystem_order() -> None:
    assert _intervals(
        [("fixed", "2.1.3"), ("introduced", "2.0.0"), ("fixed", "1.4.7"), ("introduced", "0")],
        "npm",
    ) == [
        {"introduced": "0", "fixed": "1.4.7"},
        {"introduced": "2.0.0", "fixed": "2.1.3"},
    ]
    # SemVer: 2.0.0-beta.1 < 2.0.0-rc.1 < 2.0.0; PEP 440 would read these differently.
    assert _intervals(
        [
            ("introduced", "2.0.0"),
            ("fixed", "2.0.1"),
            ("introduced", "2.0.0-beta.1"),
            ("fixed", "2.0.0-rc.1"),
        ],
        "npm",
    ) == [
        {"introduced": "2.0.0-beta.1", "fixed": "2.0.0-rc.1"},
        {"introduced": "2.0.0", "fixed": "2.0.1"},
    ]
    assert _intervals(
        [("introduced", "1.0"), ("introduced", "1.5"), ("last_affected", "2.0")], "PyPI"
    ) == [{"introduced": "1.0", "last_affected": "2.0"}]
    assert _intervals([("introduced", "1.0.0"), ("fixed", "1.0.0")], "npm") == []
    assert _intervals([("introduced", "1.10")], "PyPI") == [{"introduced": "1.10"}]
    assert _intervals([("fixed", "1.0")], "PyPI") == []


def test_the_fast_check_never_accepts_what_the_schema_refuses() -> None:
    """Every field the fast check reads, mutated to each wrong shape: whenever the fast check
    passes a mutant, the schema must too; and the valid records take the fast path."""
    wrong_values: list[Any] = [
        None,
        0,
        1.5,
        True,
        "",
        "x",
        "1.0.0\n",
        " x",
        [],
        [1],
        ["x"],
        {},
        {"x": 1},
        [{}],
        [{"introduced": "0"}],
        [{"type": "GIT"}],
        [{"type": "X", "score": "s"}],
        "2025-01-01T00:00:00",
        "2025-01-01T00:00:00Z\n",
        "é",
        "2.0",
        "1.2.3",
    ]
    bases = [BACKPORT, BACKPORT_CVE, WITHDRAWN, AIDER, GEMINI_PRE, UNFIXED, OTHER_PYPI]
    checked = 0
    for base in bases:
        assert osv._fast_clean(base), base["id"]
        assert not list(osv.validator().iter_errors(base))
        for path in _paths(base):
            for value in [*wrong_values, _DELETE]:
                mutant = _mutate(base, path, value)
                if osv._fast_clean(mutant):
                    errors = list(osv.validator().iter_errors(mutant))
                    assert not errors, (path, value, errors[0].message)
                checked += 1
    assert checked > 3000


_DELETE = object()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _mutate(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    copy = json.loads(json.dumps(value))
    target = copy
    for part in path[:-1]:
        target = target[part]
    if new is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return copy


def test_progress_is_reported_every_n_records() -> None:
    items = [(f"r{i}.json", json.dumps(OTHER).encode()) for i in range(25)]
    seen: list[int] = []
    osv.import_records(
        items, osv.package_map(), skip_invalid=False, progress=seen.append, progress_every=10
    )
    assert seen == [10, 20]
