"""A time that is past year 9999 in UTC (9999-12-31T23:59:59-23:59) is refused in words by the
proofs and the tools, naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.advisory_maps import (
    advisory,
    entry,
    extended_module,
    span,
)
from helpers.cli import floorctl
from hosts import Host

pytestmark = pytest.mark.slow

OUT_OF_RANGE = "9999-12-31T23:59:59-23:59"


def _hostile_slice(tmp_path: Path) -> tuple[Path, Host]:
    host = Host(tmp_path / "host", {})
    entries = {
        "aider": entry("PyPI", advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3")))
    }
    host.set_map(extended_module(entries))
    assert host.preflight("aider", version="2.0.1")["verdict"] == "refuse"
    exported = floorctl("chain", "export", "--out", "slice.jsonl", cwd=tmp_path,
                        state=tmp_path / "state", FLOORGUARD_HOME=str(host.home))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    from floorguard._base._canonical import content_address

    (record,) = [json.loads(line) for line in (tmp_path / "slice.jsonl").read_text().splitlines()]
    record["receipt"]["ts"] = OUT_OF_RANGE
    record["receipt_id"] = content_address(record["receipt"])
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n")
    return hostile, host


def test_verify_chain_reports_an_out_of_range_receipt_time_without_a_traceback(
    tmp_path: Path,
) -> None:
    hostile, host = _hostile_slice(tmp_path)
    for how in (["--unauthenticated"], ["--key-file", str(host.home / "chain.key")]):
        done = floorctl("verify", "chain", str(hostile), *how, cwd=tmp_path,
                        state=tmp_path / "state")  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr[-600:]
        assert done.returncode == 1 and "NOT PROVEN" in done.stdout, (done.stdout, done.stderr)


def test_tools_refuse_an_out_of_range_time_naming_the_file_not_with_a_traceback(
    tmp_path: Path,
) -> None:
    (tmp_path / "waivers.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "waivers": [
                    {
                        "id": "WVR-0001",
                        "adapter": "aider",
                        "version": "2.0.1",
                        "advisories": ["GHSA-wwww-wwww-wwww"],
                        "reason": "reviewed",
                        "approved_by": "security team",
                        "expires": OUT_OF_RANGE,
                    }
                ],
            }
        )
    )
    (tmp_path / "feed.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "feed_id": "acme",
                "version": 1,
                "published": "2026-01-01T00:00:00Z",
                "expires": OUT_OF_RANGE,
                "adapters": {
                    "aider": {
                        "min_safe_version": "0.60.0",
                        "advisory_id": "BSA-0001",
                        "note": "Upgrade.",
                    }
                },
            }
        )
    )
    records = tmp_path / "osv"
    records.mkdir()
    (records / "GHSA-abcd-abcd-abcd.json").write_text(
        json.dumps(
            {
                "schema_version": "1.6.0",
                "id": "GHSA-abcd-abcd-abcd",
                "modified": OUT_OF_RANGE,
                "summary": "s",
                "aliases": [],
                "affected": [
                    {
                        "package": {"ecosystem": "PyPI", "name": "aider-chat"},
                        "ranges": [
                            {
                                "type": "ECOSYSTEM",
                                "events": [{"introduced": "0"}, {"fixed": "2.1.3"}],
                            }
                        ],
                    }
                ],
            }
        )
    )
    commands = {
        "waivers.json": ("validate", "waivers.json"),
        "feed.json": ("validate", "feed.json"),
        "GHSA-abcd-abcd-abcd.json": ("import", "osv", "osv", "--out", "out.json"),
    }
    for named, args in commands.items():
        done = floorctl(*args, cwd=tmp_path, state=tmp_path / "state")
        assert "Traceback" not in done.stderr, (args, done.stderr[-600:])
        assert done.returncode in (1, 2) and named in done.stderr, (args, done.stderr)
