"""Advisory feeds, schema version 3: an ecosystem, an optional floor and OSV advisories per
adapter. What is accepted, the one canonical form the map takes, and every refusal, each
naming the file and the JSON path.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorctl import feeds
from floorctl.errors import FeedError
from floorctl.feeds import parse_feed
from floorguard._maps.map_model import floor_map_hash

SOURCE = "feeds/v3.json"
REPO = Path(__file__).resolve().parents[2]


def advisory(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "GHSA-aaaa-bbbb-cccc",
        "aliases": ["CVE-2025-1234"],
        "summary": "Prompt injection runs shell commands without asking.",
        "affected": [
            {"introduced": "0", "fixed": "1.4.7"},
            {"introduced": "2.0.0", "fixed": "2.1.3"},
        ],
        "versions": ["3.0.0"],
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
        "references": ["https://github.com/advisories/GHSA-aaaa-bbbb-cccc"],
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


def entry(ecosystem: str = "npm", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"ecosystem": ecosystem, "advisories": [advisory()]}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


def document(adapters: Any = None, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 3,
        "adapters": {"claude": entry()} if adapters is None else adapters,
    }
    doc.update(top)
    return {k: v for k, v in doc.items() if v is not ...}


def feed(adapters: Any = None, **top: Any) -> bytes:
    return json.dumps(document(adapters, **top)).encode()


def with_advisory(**fields: Any) -> bytes:
    return feed({"claude": entry(advisories=[advisory(**fields)])})


def problems(data: bytes) -> list[tuple[str, str, str]]:
    with pytest.raises(FeedError) as refused:
        parse_feed(data, SOURCE)
    assert refused.value.problems
    return refused.value.problems


def refused_at(data: bytes, path: str, fragment: str = "") -> None:
    found = problems(data)
    assert any(
        file == SOURCE and where == path and fragment in message for file, where, message in found
    ), f"expected {path!r} ({fragment!r}) among {found!r}"


ADV = "$.adapters.claude.advisories[0]"

# --- accepted ---------------------------------------------------------------------------------


def test_accepts_a_v3_feed_and_builds_an_extended_entry() -> None:
    result = parse_feed(feed(), SOURCE)
    assert result.schema_version == 3
    assert result.feed_id is None
    claude = result.floor_map["claude"]
    assert claude.extended and claude.ecosystem == "npm" and not claude.has_floor
    (found,) = claude.advisories
    assert found.id == "GHSA-aaaa-bbbb-cccc" and found.aliases == ("CVE-2025-1234",)
    assert [r.describe() for r in found.affected] == [
        "from the start, < 1.4.7",
        ">= 2.0.0, < 2.1.3",
    ]
    assert claude.waivers == ()


def test_accepts_a_floor_beside_the_advisories() -> None:
    data = feed(
        {"claude": entry(min_safe_version="1.0.20", advisory_id="BSA-0002", note="Upgrade.")}
    )
    claude = parse_feed(data, SOURCE).floor_map["claude"]
    assert (claude.min_safe_version, claude.advisory_id, claude.note) == (
        "1.0.20",
        "BSA-0002",
        "Upgrade.",
    )


def test_accepts_an_entry_with_no_advisories() -> None:
    claude = parse_feed(feed({"claude": entry(advisories=[])}), SOURCE).floor_map["claude"]
    assert claude.ecosystem == "npm" and claude.advisories == ()


def test_accepts_pre_release_versions_of_each_ecosystem() -> None:
    npm = advisory(
        affected=[{"introduced": "2.0.0-beta.1", "fixed": "2.1.3"}],
        versions=["0.5.0-nightly.20250911.a1b2c3", "0.6.0-preview.1", "1.0.0+build.7"],
    )
    pypi = advisory(
        affected=[{"introduced": "1.0a1", "last_affected": "1.0"}], versions=["0.9.post1"]
    )
    data = feed({"claude": entry(advisories=[npm]), "aider": entry("PyPI", advisories=[pypi])})
    result = parse_feed(data, SOURCE)
    assert result.floor_map["aider"].ecosystem == "PyPI"


def test_accepts_the_identity_group_of_schema_2() -> None:
    data = feed(
        feed_id="acme/osv",
        version=3,
        published="2026-01-01T00:00:00Z",
        expires="2026-02-01T00:00:00Z",
    )
    result = parse_feed(data, SOURCE)
    assert (result.feed_id, result.version) == ("acme/osv", 3)
    assert result.expires is not None and result.expires.startswith("2026-02-01T00:00:00")


def test_builds_one_canonical_form_whatever_the_feed_order() -> None:
    shuffled = advisory(
        aliases=["CVE-2025-9", "CVE-2025-1", "CVE-2025-9"],
        affected=[
            {"introduced": "2.0.0", "last_affected": "2.1.2"},
            {"introduced": "0", "fixed": "1.4.7"},
            {"introduced": "2.0.0", "fixed": "2.0.5"},
            {"introduced": "0", "fixed": "1.4.7"},
        ],
        versions=["10.0.0", "9.0.0", "1.0.0-rc.1", "9.0.0"],
        severity=[{"type": "CVSS_V3", "score": "B"}, {"type": "CVSS_V2", "score": "A"}],
        references=["https://b.example/", "https://a.example/", "https://b.example/"],
    )
    other = advisory(id="GHSA-0000-0000-0000", aliases=[], versions=["1.0.0"], affected=[])
    one = parse_feed(feed({"claude": entry(advisories=[shuffled, other])}), SOURCE)
    two = parse_feed(feed({"claude": entry(advisories=[other, shuffled])}), SOURCE)
    assert floor_map_hash(one.floor_map) == floor_map_hash(two.floor_map)
    first, second = (a.as_entry() for a in one.floor_map["claude"].advisories)
    assert first["id"] == "GHSA-0000-0000-0000"
    assert second["aliases"] == ["CVE-2025-1", "CVE-2025-9"]
    assert second["affected"] == [
        {"introduced": "0", "fixed": "1.4.7"},
        {"introduced": "2.0.0", "fixed": "2.0.5"},
        {"introduced": "2.0.0", "last_affected": "2.1.2"},
    ]
    # SemVer order, not text order: 9 before 10, a pre-release before its release.
    assert second["versions"] == ["1.0.0-rc.1", "9.0.0", "10.0.0"]
    assert second["severity"] == [
        {"type": "CVSS_V2", "score": "A"},
        {"type": "CVSS_V3", "score": "B"},
    ]
    assert second["references"] == ["https://a.example/", "https://b.example/"]


def test_advisories_sharing_an_alias_in_one_feed_are_one() -> None:
    ghsa = advisory(affected=[{"introduced": "0", "fixed": "1.4.7"}], versions=[])
    cve = advisory(id="CVE-2025-1234", aliases=[], affected=[], versions=["2.0.0"])
    (merged,) = (
        parse_feed(feed({"claude": entry(advisories=[cve, ghsa])}), SOURCE)
        .floor_map["claude"]
        .advisories
    )
    assert merged.id == "GHSA-aaaa-bbbb-cccc" and merged.aliases == ("CVE-2025-1234",)
    assert merged.versions == ("2.0.0",) and len(merged.affected) == 1


# --- refused: structure -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("adapters", "path", "fragment"),
    [
        ({"claude": entry(ecosystem=...)}, "$.adapters.claude.ecosystem", "required"),
        (
            {"claude": entry(ecosystem="pypi")},
            "$.adapters.claude.ecosystem",
            "not one of npm, PyPI",
        ),
        ({"claude": entry(ecosystem="Go")}, "$.adapters.claude.ecosystem", "not one of"),
        ({"claude": entry(advisories=...)}, "$.adapters.claude.advisories", "required"),
        ({"claude": entry(advisories={})}, "$.adapters.claude.advisories", "must be an array"),
        ({"claude": entry(waivers=[])}, "$.adapters.claude.waivers", "unknown field"),
        ({"claude": entry(references=[])}, "$.adapters.claude.references", "unknown field"),
        ({"claude": entry(min_safe_version="1.0.0")}, "$.adapters.claude.note", "give all of"),
        ({"claude": entry(note="Upgrade.")}, "$.adapters.claude.min_safe_version", "give all of"),
    ],
)
def test_refuses_a_malformed_entry(adapters: Any, path: str, fragment: str) -> None:
    refused_at(feed(adapters), path, fragment)


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"id": ...}, f"{ADV}.id", "required"),
        ({"summary": ...}, f"{ADV}.summary", "required"),
        ({"modified": "2025-01-01"}, f"{ADV}.modified", "unknown field"),
        (
            {"affected": [{"introduced": "0", "limit": "2.0.0"}]},
            f"{ADV}.affected[0].limit",
            "unknown",
        ),
        ({"affected": [{"fixed": "2.0.0"}]}, f"{ADV}.affected[0].introduced", "required"),
        (
            {"affected": [{"introduced": "0", "fixed": "2.0.0", "last_affected": "1.0.0"}]},
            f"{ADV}.affected[0]",
            "fixed or last_affected, not both",
        ),
        ({"severity": [{"type": "CVSS_V3"}]}, f"{ADV}.severity[0].score", "required"),
        ({"severity": [{"type": "CVSS_V9", "score": "x"}]}, f"{ADV}.severity[0].type", "not one"),
        (
            {"severity": [{"type": "CVSS_V3", "score": "x", "x": 1}]},
            f"{ADV}.severity[0].x",
            "unknown",
        ),
        ({"aliases": "CVE-1"}, f"{ADV}.aliases", "must be an array"),
        ({"versions": [1]}, f"{ADV}.versions[0]", "must be a string"),
        ({"affected": [], "versions": []}, ADV, "affects no version"),
        ({"affected": ..., "versions": ...}, ADV, "affects no version"),
    ],
)
def test_refuses_a_malformed_advisory(fields: dict[str, Any], path: str, fragment: str) -> None:
    refused_at(with_advisory(**fields), path, fragment)


@pytest.mark.parametrize(("name", "stated"), [("claude", "PyPI"), ("aider", "npm")])
def test_refuses_a_catalogued_cli_stated_in_another_ecosystem(name: str, stated: str) -> None:
    """floorguard compares a catalogued CLI's versions in its own ecosystem's order whatever
    a feed says: validate refuses the contrary claim with its path, as refresh does."""
    entry_ = entry(stated, advisories=[advisory(affected=[{"introduced": "0", "fixed": "1.4.7"}],
                                                versions=[])])  # fmt: skip
    refused_at(feed({name: entry_}), f"$.adapters.{name}.ecosystem", "CLI in floorguard's catalog")


def test_refuses_the_same_advisory_id_twice_in_one_adapter() -> None:
    data = feed({"claude": entry(advisories=[advisory(), advisory()])})
    refused_at(data, "$.adapters.claude.advisories[1].id", "the id of advisories[0] again")


@pytest.mark.parametrize("field", ["feed_id", "version", "published", "expires"])
def test_refuses_part_of_the_identity_group(field: str) -> None:
    group = {
        "feed_id": "acme/osv",
        "version": 3,
        "published": "2026-01-01T00:00:00Z",
        "expires": "2026-02-01T00:00:00Z",
    }
    del group[field]
    refused_at(feed(**group), f"$.{field}", "give all of feed_id, version, published, expires")


def test_the_identity_group_keeps_the_rules_of_schema_2() -> None:
    data = feed(feed_id="-bad", version=0, published="yesterday", expires="2026-02-01T00:00:00Z")
    found = {path for _, path, _ in problems(data)}
    assert {"$.feed_id", "$.version", "$.published"} <= found


@pytest.mark.parametrize(
    ("what", "limit", "make"),
    [
        (
            "advisories",
            feeds.MAX_ADVISORIES,
            lambda n: {"advisories": [advisory(id=f"A-{i}") for i in range(n)]},
        ),
    ],
)
def test_refuses_too_many_advisories(what: str, limit: int, make: Any) -> None:
    refused_at(
        feed({"claude": entry(**make(limit + 1))}), f"$.adapters.claude.{what}", "too many items"
    )
    parse_feed(feed({"claude": entry(**make(limit))}), SOURCE)


@pytest.mark.parametrize(
    ("field", "limit", "item"),
    [
        ("aliases", feeds.MAX_ALIASES, lambda i: f"CVE-2025-{i}"),
        ("affected", feeds.MAX_RANGES, lambda i: {"introduced": f"{i}.0.0", "fixed": f"{i}.1.0"}),
        ("versions", feeds.MAX_LISTED_VERSIONS, lambda i: f"1.0.{i}"),
        ("severity", feeds.MAX_SEVERITY, lambda i: {"type": "Ubuntu", "score": f"s{i}"}),
        ("references", feeds.MAX_REFERENCES, lambda i: f"https://example.com/{i}"),
    ],
)
def test_refuses_too_many_items_in_an_advisory(field: str, limit: int, item: Any) -> None:
    refused_at(
        with_advisory(**{field: [item(i) for i in range(limit + 1)]}),
        f"{ADV}.{field}",
        f"too many items: {limit + 1:,} (at most {limit:,})",
    )
    parse_feed(with_advisory(**{field: [item(i) for i in range(limit)]}), SOURCE)


def test_schema_caps_are_the_documented_limits() -> None:
    schema = json.loads((REPO / "schemas" / "feed.v3.schema.json").read_text())
    defs = schema["$defs"]
    props = defs["advisory"]["properties"]
    assert defs["entry"]["properties"]["advisories"]["maxItems"] == feeds.MAX_ADVISORIES
    assert props["aliases"]["maxItems"] == feeds.MAX_ALIASES
    assert props["affected"]["maxItems"] == feeds.MAX_RANGES
    assert props["versions"]["maxItems"] == feeds.MAX_LISTED_VERSIONS
    assert props["severity"]["maxItems"] == feeds.MAX_SEVERITY
    assert props["references"]["maxItems"] == feeds.MAX_REFERENCES
    assert defs["severity"]["properties"]["type"]["enum"] == list(feeds.SEVERITY_TYPES)
    assert schema["properties"]["adapters"]["maxProperties"] == feeds.MAX_ADAPTERS


def test_refuses_too_many_adapters() -> None:
    adapters = {f"a{i}": {"ecosystem": "npm", "advisories": []} for i in range(100_001)}
    refused_at(feed(adapters), "$.adapters", "too many adapters")


# --- refused: versions in the adapter's ecosystem -----------------------------------------------


NOT_SEMVER = [
    "1.0",
    "v1.0.0",
    "01.0.0",
    "1.0.0-01",
    "1.0.0\n",
    " 1.0.0",
    "1.0.0.post1",
    "1.0.0-a_b",
    "\uff11.0.0",
]
NOT_PEP440 = ["0.5.0-nightly.20250911.a1b2c3", "1.0.0 ", "latest", "1.0\n", "\u0661.0"]


@pytest.mark.parametrize("version", NOT_SEMVER)
@pytest.mark.parametrize(
    ("where", "build"),
    [
        ("min_safe_version", lambda v: entry(min_safe_version=v, advisory_id="BSA-1", note="n")),
        (
            "advisories[0].affected[0].introduced",
            lambda v: entry(advisories=[advisory(affected=[{"introduced": v}])]),
        ),
        (
            "advisories[0].affected[0].fixed",
            lambda v: entry(advisories=[advisory(affected=[{"introduced": "0", "fixed": v}])]),
        ),
        (
            "advisories[0].affected[0].last_affected",
            lambda v: entry(
                advisories=[advisory(affected=[{"introduced": "0", "last_affected": v}])]
            ),
        ),
        ("advisories[0].versions[0]", lambda v: entry(advisories=[advisory(versions=[v])])),
    ],
)
def test_refuses_an_npm_version_that_is_not_strict_semver(
    version: str, where: str, build: Any
) -> None:
    found = problems(feed({"claude": build(version)}))
    assert any(path == f"$.adapters.claude.{where}" for _, path, _ in found), found


@pytest.mark.parametrize("version", NOT_PEP440)
def test_refuses_a_pypi_version_that_is_not_pep440(version: str) -> None:
    data = feed(
        {
            "aider": entry(
                "PyPI",
                advisories=[
                    advisory(versions=[version], affected=[{"introduced": "0", "fixed": "1.0"}])
                ],
            )
        }
    )
    found = problems(data)
    assert any(path == "$.adapters.aider.advisories[0].versions[0]" for _, path, _ in found), found


@pytest.mark.parametrize(
    ("where", "build"),
    [
        ("min_safe_version",
         lambda v: entry("PyPI", min_safe_version=v, advisory_id="BSA-0001", note="Upgrade.")),
        ("advisories[0].affected[0].fixed",
         lambda v: entry("PyPI", advisories=[advisory(affected=[{"introduced": "0",
                                                                 "fixed": v}])])),
        ("advisories[0].affected[0].introduced",
         lambda v: entry("PyPI", advisories=[advisory(affected=[{"introduced": v}])])),
        ("advisories[0].versions[0]", lambda v: entry("PyPI", advisories=[advisory(versions=[v])])),
    ],
)  # fmt: skip
def test_refuses_a_pypi_version_with_a_local_label(where: str, build: Any) -> None:
    """The gate compares releases, a local label aside: ``fixed: 0.63.1+a`` would permit
    0.63.1, which PEP 440 (and so the diff a reviewer reads) puts below that end."""
    found = problems(feed({"aider": build("0.63.1+a")}))
    assert any(
        path == f"$.adapters.aider.{where}" and "local version label" in message
        for _, path, message in found
    ), found


def test_an_npm_version_is_never_read_as_pep440() -> None:
    # Valid PEP 440 (read as 0.6.0rc1), but not SemVer: refused for npm, kept as-is for PyPI.
    refused_at(
        feed({"claude": entry(advisories=[advisory(versions=["0.6.0rc1"])])}),
        f"{ADV}.versions[0]",
        "is not a valid SemVer version (the npm ecosystem)",
    )


def test_refuses_a_version_over_128_characters() -> None:
    long = "1.0.0-" + "a" * 123
    refused_at(with_advisory(versions=[long]), f"{ADV}.versions[0]", "too long")


@pytest.mark.parametrize(
    ("span", "path", "fragment"),
    [
        ({"introduced": "2.0.0", "fixed": "1.0.0"}, "affected[0].fixed", "not above introduced"),
        ({"introduced": "2.0.0", "fixed": "2.0.0"}, "affected[0].fixed", "not above introduced"),
        ({"introduced": "2.0.0", "fixed": "2.0.0+build"}, "affected[0].fixed", "not above"),
        ({"introduced": "2.0.0", "fixed": "2.0.0-rc.1"}, "affected[0].fixed", "not above"),
        ({"introduced": "2.0.0", "last_affected": "1.9.9"}, "affected[0].last_affected", "below"),
    ],
)
def test_refuses_a_range_that_holds_no_version(
    span: dict[str, str], path: str, fragment: str
) -> None:
    refused_at(with_advisory(affected=[span]), f"{ADV}.{path}", fragment)


def test_accepts_a_range_of_one_version_and_an_open_range() -> None:
    parse_feed(
        with_advisory(
            affected=[{"introduced": "2.0.0", "last_affected": "2.0.0"}, {"introduced": "3.0.0"}]
        ),
        SOURCE,
    )


# --- refused: text fields that end up in generated code -----------------------------------------


@pytest.mark.parametrize(
    ("summary", "fragment"),
    [
        ("", "must not be empty"),
        ("a\nb", "non-printable"),
        ("a\u2028b", "non-printable"),
        ("safe\u202egnp.exe", "non-printable"),
        ('"""; import os', "double quote"),
        ("a\\x", "backslash"),
        ("{{ config }}", "template syntax"),
        ("{% raw %}", "template syntax"),
        ("x" * 1001, "too long"),
    ],
)
def test_refuses_an_unsafe_summary(summary: str, fragment: str) -> None:
    refused_at(with_advisory(summary=summary), f"{ADV}.summary", fragment)


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"id": "GHSA_1"}, f"{ADV}.id"),
        ({"id": "A--B"}, f"{ADV}.id"),
        ({"id": "x" * 65}, f"{ADV}.id"),
        ({"id": "A\n"}, f"{ADV}.id"),
        ({"aliases": ["CVE 1"]}, f"{ADV}.aliases[0]"),
        ({"aliases": ["../../etc"]}, f"{ADV}.aliases[0]"),
        ({"aliases": ['"+__import__("os")+"']}, f"{ADV}.aliases[0]"),
    ],
)
def test_refuses_malformed_advisory_ids_and_aliases(fields: dict[str, Any], path: str) -> None:
    refused_at(with_advisory(**fields), path, "")


@pytest.mark.parametrize("name", ["floor", "FLOOR", "Floor"])
@pytest.mark.parametrize("field", ["id", "aliases"])
def test_refuses_the_reserved_name_floor_as_an_advisory_id_or_alias(name: str, field: str) -> None:
    # Waivers name the below-floor refusal "floor"; an advisory called so would be waived by
    # a waiver reviewed for the floor only.
    fields: dict[str, Any] = {"id": name} if field == "id" else {"aliases": ["CVE-1", name]}
    path = f"{ADV}.id" if field == "id" else f"{ADV}.aliases[1]"
    refused_at(with_advisory(**fields), path, f"'{name}' is reserved")
    doc = document({"claude": entry(advisories=[advisory(**fields)])})
    assert sorted(feeds._check(doc, 3)) == sorted(feeds._check(doc, 3, whole=True))


def test_a_floor_may_still_be_named_floor() -> None:
    # Only advisories are barred from the name: a floor's own advisory_id is the floor.
    parse_feed(feed({"claude": entry(min_safe_version="1.0.0", advisory_id="floor", note="Up.")}),
               SOURCE)  # fmt: skip


@pytest.mark.parametrize(
    "score",
    ['9.8"', "9.8 high", "{{x}}", "a\\b", "x" * 257, "", "9.8\n", "CVSS:3.1/AV:N'"],
)
def test_refuses_an_unsafe_severity_score(score: str) -> None:
    refused_at(
        with_advisory(severity=[{"type": "CVSS_V3", "score": score}]), f"{ADV}.severity[0].score"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/a",
        "HTTPS://example.com/a",
        "https://user:pw@example.com/",
        "https:///nohost",
        "javascript:alert(1)",
        "https://example.com/a b",
        "https://example.com/\u202e",
        "https://" + "a" * 2048,
    ],
)
def test_refuses_a_reference_that_is_not_a_plain_https_url(url: str) -> None:
    refused_at(with_advisory(references=[url]), f"{ADV}.references[0]")


def test_reports_every_problem_with_its_path() -> None:
    data = feed(
        {
            "claude": entry(
                advisories=[
                    advisory(summary="a\nb", versions=["1.0"], references=["http://x.example"])
                ]
            ),
            "aider": entry(
                "PyPI", min_safe_version="latest", advisory_id="BSA-1", note="n", advisories=[]
            ),
        }
    )
    paths = {path for _, path, _ in problems(data)}
    assert paths >= {
        f"{ADV}.summary",
        f"{ADV}.versions[0]",
        f"{ADV}.references[0]",
        "$.adapters.aider.min_safe_version",
    }


# --- the fast path that skips jsonschema on provably clean entries --------------------------------


def _mutations() -> list[Any]:
    """Entries each one step from a clean one: at every level, every kind of mistake."""
    base = entry(min_safe_version="1.0.20", advisory_id="BSA-0002", note="Upgrade.")
    out: list[Any] = [base, "x", [], {}, None]

    def at(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
        changed = copy.deepcopy(base)
        target = changed
        for part in path[:-1]:
            target = target[part]
        if value is ...:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return changed

    odd = [..., None, 1, 1.5, True, "", [], {}, "x", "1.0.0", "\n", "a" * 2000, "Floor"]
    leaves = [
        ("ecosystem",),
        ("min_safe_version",),
        ("advisory_id",),
        ("note",),
        ("advisories",),
        ("extra",),
        ("advisories", 0),
        ("advisories", 0, "id"),
        ("advisories", 0, "aliases"),
        ("advisories", 0, "aliases", 0),
        ("advisories", 0, "summary"),
        ("advisories", 0, "affected"),
        ("advisories", 0, "affected", 0),
        ("advisories", 0, "affected", 0, "introduced"),
        ("advisories", 0, "affected", 0, "fixed"),
        ("advisories", 0, "affected", 0, "last_affected"),
        ("advisories", 0, "versions"),
        ("advisories", 0, "versions", 0),
        ("advisories", 0, "severity"),
        ("advisories", 0, "severity", 0),
        ("advisories", 0, "severity", 0, "type"),
        ("advisories", 0, "severity", 0, "score"),
        ("advisories", 0, "references"),
        ("advisories", 0, "references", 0),
        ("advisories", 0, "extra"),
    ]
    for path in leaves:
        for value in odd:
            with contextlib.suppress(KeyError, IndexError, TypeError):
                out.append(at(path, value))
    return out


@pytest.mark.parametrize("candidate", _mutations())
def test_fast_path_agrees_with_the_schema_on_every_mutation(candidate: Any) -> None:
    doc = document({"claude": candidate})
    assert sorted(feeds._check(doc, 3)) == sorted(feeds._check(doc, 3, whole=True))


_edgy = st.one_of(
    st.sampled_from(
        [
            "0",
            "1.0.0",
            "1.0",
            "2.0.0-rc.1",
            "GHSA-a-b",
            "floor",
            "https://x.example/",
            "npm",
            "PyPI",
            "CVSS_V3",
            "",
            "\n",
        ]
    ),
    st.text(max_size=6),
    st.none(),
    st.integers(),
)
_range = st.dictionaries(
    st.sampled_from(["introduced", "fixed", "last_affected", "x"]), _edgy, max_size=3
)
_adv = st.dictionaries(
    st.sampled_from(
        ["id", "aliases", "summary", "affected", "versions", "severity", "references", "x"]
    ),
    st.one_of(_edgy, st.lists(st.one_of(_edgy, _range), max_size=2)),
    max_size=7,
)
_v3_entry = st.dictionaries(
    st.sampled_from(["ecosystem", "min_safe_version", "advisory_id", "note", "advisories", "x"]),
    st.one_of(_edgy, st.lists(_adv, max_size=2)),
    max_size=6,
)


@settings(max_examples=400)
@given(st.dictionaries(st.sampled_from(["claude", "Claude", "a\n"]), _v3_entry, max_size=2))
def test_skipping_the_schema_for_clean_v3_entries_changes_no_verdict(
    adapters: dict[str, Any],
) -> None:
    doc = document(adapters)
    assert sorted(feeds._check(doc, 3)) == sorted(feeds._check(doc, 3, whole=True))
