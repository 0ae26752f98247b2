"""The hand check of a feed's top level: jsonschema runs only where it could find something.

``feeds.top_level_clean`` lets a feed whose every entry is provably clean skip jsonschema
(and its import) altogether. It must never pass a top level the schema refuses: every
mutant of a valid feed's top level that it passes is checked against the schema here, and
the problems reported with and without it are the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from floorctl import feeds

REPO = Path(__file__).resolve().parents[2]
ENTRY = {"min_safe_version": "1.2.3", "advisory_id": "BSA-0001", "note": "Upgrade."}
V3_ENTRY = {
    "ecosystem": "npm",
    "advisories": [
        {
            "id": "GHSA-aaaa-bbbb-cccc",
            "summary": "Bad.",
            "affected": [{"fixed": "1.2.3", "introduced": "0"}],
        }
    ],
}
IDENTITY = {
    "feed_id": "example.org/floors",
    "version": 7,
    "published": "2026-01-01T00:00:00Z",
    "expires": "2026-12-31T00:00:00Z",
}
BASES = {
    "v1": (1, {"schema_version": 1, "adapters": {"aider": ENTRY, "codex": ENTRY}}),
    "v2": (2, {"schema_version": 2, **IDENTITY, "adapters": {"aider": ENTRY}}),
    "v3": (3, {"schema_version": 3, "adapters": {"claude": V3_ENTRY}}),
    "v3 with identity": (3, {"schema_version": 3, **IDENTITY, "adapters": {"claude": V3_ENTRY}}),
    "v1 without adapters": (1, {"schema_version": 1, "adapters": {}}),
}
WRONG = [
    None, True, False, 0, 1, 2, 3, -1, 1.0, 2**53, 2**53 - 1, "", " ", "x", "1",
    "a" * 64, "a" * 65, "a" * 128, "a" * 129, "bad id!", "-leading", "2026-01-01T00:00:00Z",
    [], [1], {}, {"aider": ENTRY}, {"Aider": ENTRY}, {"aider\n": ENTRY},
]  # fmt: skip
DELETE = object()


def mutants(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for key in [*document, *feeds.IDENTITY_FIELDS, "schema_version", "adapters", "extra"]:
        for value in [*WRONG, DELETE]:
            mutant = dict(document)
            if value is DELETE:
                mutant.pop(key, None)
            else:
                mutant[key] = value
            found.append(mutant)
    return found


@pytest.mark.parametrize("name", list(BASES))
def test_the_hand_check_passes_no_top_level_the_schema_refuses(name: str) -> None:
    version, base = BASES[name]
    assert feeds.top_level_clean(base, version)
    schema = feeds._validator(version)
    passed = 0
    for mutant in mutants(base):
        if not isinstance(mutant.get("adapters"), dict):
            continue  # the entries' own checks see no adapters: the schema always runs
        if feeds.top_level_clean(mutant, version):
            # As _check runs the schema: on the top level, the clean entries left out.
            errors = list(schema.iter_errors({**mutant, "adapters": {}}))
            assert not errors, (mutant, errors[0].message)
            passed += 1
        # Whatever the hand check says, the problems reported are the schema's and ours.
        assert sorted(feeds._check(mutant, version)) == sorted(
            feeds._check(mutant, version, whole=True)
        )
    assert passed > 0  # some mutants are valid (another feed id, version, time text)


def test_refuses_more_adapters_than_the_schema_allows() -> None:
    many = {f"a{n}": ENTRY for n in range(feeds.MAX_ADAPTERS + 1)}
    assert not feeds.top_level_clean({"schema_version": 1, "adapters": many}, 1)


def test_a_clean_feed_is_checked_without_loading_jsonschema(tmp_path: Path) -> None:
    feed = tmp_path / "feed.json"
    feed.write_text(json.dumps(BASES["v2"][1]))
    code = (
        "import sys; from pathlib import Path; from floorctl import feeds; "
        f"feeds.load_feed(Path({str(feed)!r})); print('jsonschema' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "False"
    # A feed the hand checks doubt is still judged by the schema, with its own message.
    feed.write_text(json.dumps({**BASES["v2"][1], "version": 1.5}))
    with pytest.raises(feeds.FeedError, match=r"\$\.version"):
        feeds.load_feed(feed)
