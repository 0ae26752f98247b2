"""A refused input is named with what is wrong with it, not with what a neighbouring case
would say: a feed signature's payloadType that is there but no string is not "missing", and
an OSV alias of the wrong form is named as an alias, not by its index in the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.host_project import Project

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("payload_type", "said"),
    [
        (1, "payloadType must be a non-empty string, not 1"),
        (None, "payloadType must be a non-empty string, not null"),
        ("", 'payloadType must be a non-empty string, not ""'),
        ("absent", "payloadType is missing"),
    ],
)
def test_a_feed_signature_whose_payload_type_is_no_string_is_refused_for_that(
    tmp_path: Path, payload_type: object, said: str
) -> None:
    project = Project(tmp_path)
    project.put("feed.json", json.loads((REPO / "feeds" / "example.v1.json").read_text()))
    assert project.run("keygen", "--out", "key").returncode == 0
    signed = project.run("sign", "feed.json", "--signing-key", "key/signing.key")
    assert signed.returncode == 0, signed.stderr
    envelope = json.loads((project.dir / "feed.json.dsse").read_text())
    if payload_type == "absent":
        del envelope["payloadType"]
    else:
        envelope["payloadType"] = payload_type
    (project.dir / "feed.json.dsse").write_text(json.dumps(envelope))
    before = project.module.read_bytes()
    done = project.run("refresh", "--feed", "feed.json", "--write")
    assert done.returncode == 1
    assert "feed.json.dsse" in done.stderr and said in done.stderr, done.stderr
    assert project.module.read_bytes() == before


@pytest.mark.parametrize("alias", ["x y", "\ufb02oor", "a\u00e9"])
def test_an_osv_alias_of_the_wrong_form_is_named_as_an_alias(tmp_path: Path, alias: str) -> None:
    project = Project(tmp_path)
    record = {
        "schema_version": "1.6.0",
        "id": "GHSA-aaaa-bbbb-cccc",
        "modified": "2025-06-01T12:00:00Z",
        "aliases": [alias],
        "affected": [
            {
                "package": {"ecosystem": "PyPI", "name": "aider-chat"},
                "ranges": [
                    {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "0.60.0"}]}
                ],
            }
        ],
    }
    project.put("rec.json", record)
    done = project.run(
        "import", "osv", "rec.json", "--out", "f.json", "--package", "PyPI:aider-chat=aider"
    )
    assert done.returncode == 1
    assert "$.aliases[0]" in done.stderr and "is not a valid aliases entry" in done.stderr
    assert "valid 0" not in done.stderr
    assert not (project.dir / "f.json").exists()
