"""``floorctl import osv`` applies the schema-3 feed's own rules: what is only decorative
(a severity the feed cannot carry, references past the cap) is dropped and counted, what
decides verdicts (aliases, ranges, listed versions past a cap; the reserved id "floor") is
an invalid record, and the written feed always passes ``floorctl validate``. The real CLI
in subprocesses over real files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from helpers.host_project import Project

from floorctl import feeds, osv
from floorctl.errors import FeedError

CLAUDE = "@anthropic-ai/claude-code"


def record(record_id: str = "GHSA-aaaa-bbbb-cccc", **fields: Any) -> dict[str, Any]:
    made: dict[str, Any] = {
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


def run_import(tmp_path: Path, document: Any, *extra: str) -> Any:
    (tmp_path / "record.json").write_text(json.dumps(document))
    return floorctl(
        "import",
        "osv",
        "record.json",
        "--out",
        "feed.json",
        "--json",
        *extra,
        cwd=tmp_path,
        state=tmp_path / "state",
    )


def written(tmp_path: Path) -> dict[str, Any]:
    checked = floorctl("validate", "feed.json", cwd=tmp_path, state=tmp_path / "state")
    assert checked.returncode == 0, checked.stderr
    advisory: dict[str, Any] = json.loads((tmp_path / "feed.json").read_text())["adapters"][
        "claude"
    ]["advisories"][0]
    return advisory


def test_severity_the_feed_cannot_carry_is_dropped_and_counted(tmp_path: Path) -> None:
    severity = [
        {"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"},
        {"type": "CVSS_V5", "score": "9.8"},  # a type the feed does not list
        {"type": "Ubuntu", "score": "7.5 HIGH"},  # not a feed score (a space)
    ]
    affected = record()["affected"]
    affected[0]["severity"] = [{"type": "CVSS_V4", "score": "has space"}]
    done = run_import(tmp_path, record(severity=severity, affected=affected))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skipped"]["dropped_severity"] == 3
    assert written(tmp_path)["severity"] == [severity[0]]


def test_more_severity_and_references_than_the_feed_holds_keep_the_first(tmp_path: Path) -> None:
    severity = [{"type": "CVSS_V3", "score": f"S{i:02d}"} for i in range(10)]
    references = [{"type": "WEB", "url": f"https://example.com/ref/{i:03d}"} for i in range(70)]
    references.append({"type": "WEB", "url": "HTTPS://example.com/upper-case-scheme"})
    done = run_import(tmp_path, record(severity=severity, references=references))
    assert done.returncode == 0, done.stderr
    skipped = json.loads(done.stdout)["skipped"]
    assert (skipped["dropped_severity"], skipped["dropped_references"]) == (2, 7)
    advisory = written(tmp_path)
    assert advisory["severity"] == severity[: feeds.MAX_SEVERITY]
    assert advisory["references"] == [r["url"] for r in references[: feeds.MAX_REFERENCES]]


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"aliases": ["floor"]}, "$.aliases[0]"),
        ({"aliases": ["CVE-2025-1", "Floor"]}, "$.aliases[1]"),
        ({"id": "FLOOR"}, "$.id"),
        ({"aliases": [f"CVE-2025-{10000 + i}" for i in range(65)]}, "$.aliases"),
        (
            {
                "affected": [
                    {
                        "package": {"ecosystem": "npm", "name": CLAUDE},
                        "ranges": [
                            {
                                "type": "SEMVER",
                                "events": [
                                    e
                                    for i in range(129)
                                    for e in ({"introduced": f"{i}.0.0"}, {"fixed": f"{i}.0.1"})
                                ],
                            }
                        ],
                    }
                ]
            },
            "$.affected[0].ranges",
        ),
        (
            {
                "affected": [
                    {
                        "package": {"ecosystem": "npm", "name": CLAUDE},
                        "versions": [f"1.0.{i}" for i in range(4097)],
                    }
                ]
            },
            "$.affected[0].versions",
        ),
        (
            {
                "affected": [
                    {
                        "package": {"ecosystem": "npm", "name": CLAUDE},
                        "versions": ["1.0.0-" + "a" * 130],
                    }
                ]
            },
            "$.affected[0].versions[0]",
        ),
    ],
)
def test_what_decides_verdicts_past_the_feeds_rules_is_an_invalid_record(
    tmp_path: Path, fields: dict[str, Any], path: str
) -> None:
    done = run_import(tmp_path, record(**fields))
    assert done.returncode == 1, done.stderr
    assert f"record.json: {path}: " in done.stderr, done.stderr
    assert not (tmp_path / "feed.json").exists()


def test_aliases_merged_past_the_cap_refuse_the_import_even_with_skip_invalid(
    tmp_path: Path,
) -> None:
    # Each record is within the cap; named together they would carry 80 aliases. Neither is
    # invalid alone, and leaving out the group would drop a real advisory because another
    # record names it: the import is refused, --skip-invalid or not.
    first = record("GHSA-aaaa-bbbb-cccc", aliases=[f"CVE-2025-{10000 + i}" for i in range(40)])
    second = record("GHSA-dddd-eeee-ffff", aliases=[f"CVE-2025-{10039 + i}" for i in range(40)])
    other = record("GHSA-2222-3333-4444")
    for extra in ((), ("--skip-invalid",)):
        done = run_import(tmp_path, [first, second, other], *extra)
        assert done.returncode == 1, done.stderr
        assert "record.json: $[0].aliases: too many aliases (merged)" in done.stderr, done.stderr
        assert not (tmp_path / "feed.json").exists()


def test_more_advisories_for_an_adapter_than_a_feed_holds_is_refused(tmp_path: Path) -> None:
    records = [record(f"GHSA-aaaa-bbbb-{i:04d}") for i in range(feeds.MAX_ADVISORIES + 1)]
    done = run_import(tmp_path, records, "--skip-invalid")
    assert done.returncode == 1, done.stderr
    assert "$.adapters.claude.advisories: claude would get 2,049 advisories" in done.stderr
    assert not (tmp_path / "feed.json").exists()


def test_the_last_guard_refuses_bytes_the_feed_parser_refuses() -> None:
    feed = {
        "schema_version": 3,
        "adapters": {
            "claude": {
                "ecosystem": "npm",
                "advisories": [
                    {
                        "id": "GHSA-aaaa-bbbb-cccc",
                        "summary": "s",
                        "versions": ["1.0.0"],
                        "severity": [{"type": "CVSS_V3", "score": "7.5 HIGH"}],
                    }
                ],
            }
        },
    }
    with pytest.raises(FeedError) as caught:
        osv.feed_bytes(feed, "out.json")
    assert str(caught.value).startswith("out.json: $.adapters.claude.advisories[0].severity[0]")
    assert "nothing written" in str(caught.value)
    feed["adapters"]["claude"]["advisories"][0]["severity"] = []
    assert feeds.parse_feed(osv.feed_bytes(feed, "out.json"), "out.json").floor_map


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
    # Written: then it is a schema-3 feed that validates and refreshes.
    checked = project.run("validate", "feed.json")
    assert checked.returncode == 0, checked.stderr
    refreshed = project.run("refresh", "--feed", "feed.json", "--write")
    assert refreshed.returncode == 0, refreshed.stderr
