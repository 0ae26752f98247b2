"""The waivers document and attaching waivers to a floor map (floorctl.waivers), pure.

Every refusal names the file and the JSON path; attaching refuses a waiver that would waive
nothing (stale or mistyped) and one already expired at the refresh time.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

import pytest

from floorctl import waivers
from floorctl.errors import WaiversError
from floorguard._maps import verdict
from floorguard._maps.map_model import floor_map_hash, from_entries, to_entries

SOURCE = "waivers.json"
AT = _dt.datetime(2026, 12, 1, tzinfo=_dt.UTC)


def waiver(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "WVR-0001",
        "adapter": "claude",
        "version": "1.0.10",
        "advisories": ["floor"],
        "reason": "pinned by the release team until the 1.0.20 rollout is done",
        "approved_by": "security team",
        "expires": "2027-01-01T00:00:00Z",
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


def document(*items: dict[str, Any], **top: Any) -> bytes:
    doc: dict[str, Any] = {"schema_version": 1, "waivers": list(items) or [waiver()]}
    doc.update(top)
    return json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()


def problems(data: bytes) -> list[tuple[str, str, str]]:
    with pytest.raises(WaiversError) as refused:
        waivers.parse_waivers(data, SOURCE)
    return refused.value.problems


def refused_at(data: bytes, path: str, fragment: str = "") -> None:
    found = problems(data)
    assert all(file == SOURCE for file, _, _ in found), found
    assert any(where == path and fragment in message for _, where, message in found), found


FLOOR_ONLY = {
    "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."},
    "claude": {"min_safe_version": "1.0.20", "advisory_id": "BSA-0002", "note": "Upgrade."},
}


def advisory(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "GHSA-aaaa-bbbb-cccc",
        "aliases": ["CVE-2026-1234"],
        "summary": "Prompt injection runs shell commands",
        "affected": [
            {"introduced": "0", "fixed": "1.4.7"},
            {"introduced": "2.0.0-beta.1", "fixed": "2.1.3"},
        ],
        "versions": [],
        "severity": [],
        "references": [],
    }
    base.update(fields)
    return base


# An npm entry with advisories only (no floor), and a PyPI one with a floor and advisories.
EXTENDED = {
    "gemini": {
        "ecosystem": "npm",
        "advisories": [
            advisory(),
            advisory(
                id="GHSA-dddd-eeee-ffff",
                aliases=[],
                affected=[{"introduced": "2.0.0", "last_affected": "2.0.5"}],
            ),
        ],
        "waivers": [],
    },
    "aider": {
        "min_safe_version": "0.60.0",
        "advisory_id": "BSA-0001",
        "note": "Upgrade.",
        "ecosystem": "PyPI",
        "advisories": [advisory(id="PYSEC-2026-1", aliases=[], affected=[], versions=["0.70.1"])],
        "waivers": [],
    },
}


def attach(entries: dict[str, Any], *items: dict[str, Any], at: _dt.datetime = AT) -> Any:
    parsed = waivers.parse_waivers(document(*items), SOURCE)
    return waivers.attach(from_entries(entries), parsed, at=at)


def attach_refused(
    entries: dict[str, Any], *items: dict[str, Any], path: str, fragment: str
) -> None:
    with pytest.raises(WaiversError) as refused:
        attach(entries, *items)
    found = refused.value.problems
    assert any(
        (file, where) == (SOURCE, path) and fragment in message for file, where, message in found
    ), found


def test_refuses_a_second_waiver_of_the_same_version_spelt_otherwise() -> None:
    # 0.50 and 0.50.0 are one PEP 440 version (aider's order): one waiver per adapter and
    # version.
    attach_refused(
        FLOOR_ONLY,
        waiver(adapter="aider", version="0.50.0"),
        waiver(id="WVR-0002", adapter="aider", version="0.50"),
        path="$.waivers[1].version",
        fragment="aider '0.50' is already waived by WVR-0001 (as '0.50.0'",
    )


def test_refuses_a_pep440_version_with_a_local_label() -> None:
    # The gate compares releases, the label aside: as in a feed, the release is written.
    attach_refused(
        FLOOR_ONLY,
        waiver(adapter="aider", version="0.50.0+a"),
        path="$.waivers[0].version",
        fragment="local version label",
    )


# --- the document -------------------------------------------------------------------------


def test_accepts_the_contract_layout_with_expiry_in_utc() -> None:
    parsed = waivers.parse_waivers(document(waiver(expires="2027-01-01T00:00:00Z")), SOURCE)
    (only,) = parsed.waivers
    assert only.adapter == "claude"
    assert only.waiver.expires == "2027-01-01T00:00:00.000000Z"
    assert only.waiver.advisories == ("floor",)
    assert parsed.identity()["digest"].startswith("sha256:")


def test_accepts_an_empty_list() -> None:
    assert waivers.parse_waivers(document(waivers=[]), SOURCE).waivers == ()


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (b"{", "$", "malformed JSON"),
        (b"[]", "$", "must be a JSON object"),
        (
            b'{"schema_version": 1, "schema_version": 1, "waivers": []}',
            "$.schema_version",
            "duplicate",
        ),
        (document(schema_version=2), "$.schema_version", "unsupported"),
        (document(schema_version=True), "$.schema_version", "integer"),
        (document(schema_version=...), "$.schema_version", "required"),
        (document(waivers=...), "$.waivers", "required"),
        (document(waivers={}), "$.waivers", "must be an array"),
        (document(extra=1), "$.extra", "unknown field"),
        (document(waiver(adapter_name="x")), "$.waivers[0].adapter_name", "unknown field"),
        (document(waiver(reason=...)), "$.waivers[0].reason", "required"),
        (document(waiver(id="WVR 1")), "$.waivers[0].id", "not an advisory id"),
        (document(waiver(id="W" * 65)), "$.waivers[0].id", "too long"),
        (document(waiver(), waiver(version="1.0.11")), "$.waivers[1].id", "'WVR-0001' twice"),
        (
            document(waiver(), waiver(id="wvr-0001", version="1.0.11")),
            "$.waivers[1].id",
            "'wvr-0001' twice",
        ),
        (document(waiver(adapter="Claude")), "$.waivers[0].adapter", "not a valid adapter name"),
        (document(waiver(adapter="cl\u0430ude")), "$.waivers[0].adapter", "ASCII only"),
        (document(waiver(version="1.0.10 ")), "$.waivers[0].version", "whitespace"),
        (document(waiver(version="1.0\n")), "$.waivers[0].version", "whitespace"),
        (document(waiver(version="1" * 129)), "$.waivers[0].version", "too long"),
        (document(waiver(version="")), "$.waivers[0].version", "empty"),
        (document(waiver(version=1.0)), "$.waivers[0].version", "must be a string"),
        (document(waiver(advisories=[])), "$.waivers[0].advisories", "at least one"),
        (document(waiver(advisories="floor")), "$.waivers[0].advisories", "must be an array"),
        (document(waiver(advisories=["floor", "floor"])), "$.waivers[0].advisories[1]", "twice"),
        (
            document(waiver(advisories=["GHSA x"])),
            "$.waivers[0].advisories[0]",
            "not an advisory id",
        ),
        (document(waiver(reason="")), "$.waivers[0].reason", "empty"),
        (document(waiver(reason="two\nlines")), "$.waivers[0].reason", "U+000A"),
        (document(waiver(reason='say "hi"')), "$.waivers[0].reason", "double quote"),
        (document(waiver(reason="back\\slash")), "$.waivers[0].reason", "backslash"),
        (document(waiver(reason="{{ 7*7 }}")), "$.waivers[0].reason", "template syntax"),
        (document(waiver(reason="x" * 1001)), "$.waivers[0].reason", "too long"),
        (document(waiver(approved_by="eve\u202eevil")), "$.waivers[0].approved_by", "U+202E"),
        (document(waiver(approved_by="line\u2028two")), "$.waivers[0].approved_by", "U+2028"),
        (document(waiver(expires="2027-01-01")), "$.waivers[0].expires", "RFC 3339"),
        (document(waiver(expires="2027-01-01T00:00:00")), "$.waivers[0].expires", "RFC 3339"),
        (document(waiver(expires="2027-01-01T02:00:00+02:00")), "$.waivers[0].expires", "UTC"),
        (document(waiver(expires="2027-01-01T00:00:00-00:00")), "$.waivers[0].expires", "UTC"),
        (document(waiver(expires="2027-01-01T00:00:00z")), "$.waivers[0].expires", "with Z"),
        # (floorctl writes six fractional digits: more would be cut, unlike what was approved)
        (
            document(waiver(expires="2027-01-01T00:00:00.1234567Z")),
            "$.waivers[0].expires",
            "at most six fractional digits",
        ),
        (document(waivers=[waiver(id=f"WVR-{i}") for i in range(1001)]), "$.waivers", "too many"),
    ],
)
def test_refuses_an_invalid_document_naming_file_and_path(
    data: bytes, path: str, fragment: str
) -> None:
    refused_at(data, path, fragment)


def test_reports_every_problem_not_only_the_first() -> None:
    found = problems(document(waiver(id="bad id", reason="a\nb"), waiver(adapter="X")))
    paths = [where for _, where, _ in found]
    assert paths == ["$.waivers[0].id", "$.waivers[0].reason", "$.waivers[1].adapter"]


def test_refuses_a_file_over_the_size_cap_unread(tmp_path: Any) -> None:
    big = tmp_path / "waivers.json"
    big.write_bytes(b" " * (waivers.MAX_WAIVERS_BYTES + 1))
    with pytest.raises(WaiversError) as refused:
        waivers.load_waivers(big)
    assert refused.value.problems[0][1:] == (
        "$",
        f"waivers document is larger than {waivers.MAX_WAIVERS_BYTES:,} bytes; refused unread",
    )


def test_schema_and_semantic_checks_stay_in_step() -> None:
    # Every document the semantic checks accept, the JSON Schema accepts too, and the other
    # way round for these edge values (the fast path must not be weaker than the schema).
    for value in ("W" * 64, "A-1", "a"):
        assert waivers.schema_problems(json.loads(document(waiver(id=value)))) == []
    for value in ("W" * 65, "-A", "A--1"):
        assert waivers.schema_problems(json.loads(document(waiver(id=value)))) != []


# --- attaching ----------------------------------------------------------------------------


def test_a_floor_only_entry_with_a_waiver_becomes_extended_without_ecosystem() -> None:
    attached = attach(FLOOR_ONLY, waiver())
    claude = attached["claude"]
    assert claude.extended and claude.ecosystem is None
    assert [w.id for w in claude.waivers] == ["WVR-0001"]
    assert to_entries(attached)["claude"]["waivers"][0] == {
        "id": "WVR-0001",
        "version": "1.0.10",
        "advisories": ["floor"],
        "reason": "pinned by the release team until the 1.0.20 rollout is done",
        "approved_by": "security team",
        "expires": "2027-01-01T00:00:00.000000Z",
    }
    # aider had no waiver: it keeps the floor-only form and its hash contribution.
    assert to_entries(attached)["aider"] == FLOOR_ONLY["aider"]
    assessment = verdict.assess(claude, "1.0.10", at=AT)
    assert assessment.waiver is not None and assessment.waiver.id == "WVR-0001"


def test_waivers_are_sorted_by_id_whatever_the_document_order() -> None:
    one = attach(FLOOR_ONLY, waiver(id="WVR-0002", version="1.0.11"), waiver())
    two = attach(FLOOR_ONLY, waiver(), waiver(id="WVR-0002", version="1.0.11"))
    assert [w.id for w in one["claude"].waivers] == ["WVR-0001", "WVR-0002"]
    assert floor_map_hash(one) == floor_map_hash(two)


def test_no_waivers_strips_the_ones_the_map_held() -> None:
    held = attach(FLOOR_ONLY, waiver())
    stripped = waivers.attach(held, None, at=AT)
    assert floor_map_hash(stripped) == floor_map_hash(from_entries(FLOOR_ONLY))


@pytest.mark.parametrize(
    ("item", "path", "fragment"),
    [
        (waiver(adapter="codex"), "$.waivers[0].adapter", "not in the floor map"),
        (waiver(version="1.0.20"), "$.waivers[0].version", "not refused"),
        (waiver(version="1.0.x"), "$.waivers[0].version", "not a valid SemVer version"),
        (waiver(advisories=["BSA-0002"]), "$.waivers[0].advisories[0]", 'name the floor "floor"'),
        (waiver(advisories=["floor", "GHSA-aaaa-bbbb-cccc"]), "$.waivers[0].advisories[1]", "not"),
        (waiver(expires="2026-12-01T00:00:00Z"), "$.waivers[0].expires", "expired"),
        (waiver(expires="2026-11-30T23:59:59Z"), "$.waivers[0].expires", "expired"),
    ],
)
def test_refuses_a_waiver_that_does_not_fit_a_floor_only_map(
    item: dict[str, Any], path: str, fragment: str
) -> None:
    attach_refused(FLOOR_ONLY, item, path=path, fragment=fragment)


def test_refuses_two_waivers_of_one_adapter_version() -> None:
    attach_refused(
        FLOOR_ONLY,
        waiver(),
        waiver(id="WVR-0002"),
        path="$.waivers[1].version",
        fragment="WVR-0001",
    )


def test_a_waiver_by_alias_covers_an_npm_advisory() -> None:
    attached = attach(
        EXTENDED, waiver(adapter="gemini", version="2.0.0-beta.3", advisories=["CVE-2026-1234"])
    )
    gemini = attached["gemini"]
    assert gemini.ecosystem == "npm"
    judged = verdict.assess(gemini, "2.0.0-beta.3", at=AT)
    assert judged.waiver is not None and judged.waiver.advisories == ("CVE-2026-1234",)


@pytest.mark.parametrize(
    ("item", "path", "fragment"),
    [
        # An entry without a floor: "floor" names nothing.
        (waiver(adapter="gemini", version="1.0.0"), "$.waivers[0].advisories[0]", "no floor"),
        # npm order: 2.1.3-rc.1 is inside (below the fix), 2.1.3 is not.
        (
            waiver(adapter="gemini", version="2.1.3", advisories=["GHSA-aaaa-bbbb-cccc"]),
            "$.waivers[0].version",
            "not refused",
        ),
        # An advisory that does not affect this version (stale, or mistyped).
        (
            waiver(adapter="gemini", version="1.0.0", advisories=["GHSA-dddd-eeee-ffff"]),
            "$.waivers[0].advisories[0]",
            "does not affect 1.0.0",
        ),
        # Two causes, only one named: the waiver would waive nothing.
        (
            waiver(adapter="gemini", version="2.0.5", advisories=["GHSA-aaaa-bbbb-cccc"]),
            "$.waivers[0].advisories",
            "GHSA-dddd-eeee-ffff",
        ),
        # Not a SemVer version: never read as PEP 440 (0.6.0rc1).
        (
            waiver(adapter="gemini", version="0.6.0rc1", advisories=["GHSA-aaaa-bbbb-cccc"]),
            "$.waivers[0].version",
            "SemVer",
        ),
        (
            waiver(adapter="gemini", version="1.0.0", advisories=["GHSA-zzzz-zzzz-zzzz"]),
            "$.waivers[0].advisories[0]",
            "not an id or alias",
        ),
        (
            waiver(adapter="aider", version="0.70.1", advisories=["PYSEC-2026-1", "floor"]),
            "$.waivers[0].advisories[1]",
            "not below the floor",
        ),
    ],
)
def test_refuses_a_waiver_that_does_not_fit_an_extended_entry(
    item: dict[str, Any], path: str, fragment: str
) -> None:
    attach_refused(EXTENDED, item, path=path, fragment=fragment)


def test_the_listed_version_and_the_floor_together() -> None:
    attached = attach(
        EXTENDED,
        waiver(adapter="aider", version="0.70.1", advisories=["PYSEC-2026-1"]),
        waiver(id="WVR-0002", adapter="aider", version="0.50.0", advisories=["floor"]),
    )
    aider = attached["aider"]
    assert [w.id for w in aider.waivers] == ["WVR-0001", "WVR-0002"]
    assert verdict.assess(aider, "0.50.0", at=AT).waiver is not None
    assert verdict.assess(aider, "0.70.1", at=AT).waiver is not None


def test_reports_every_attach_problem() -> None:
    with pytest.raises(WaiversError) as refused:
        attach(FLOOR_ONLY, waiver(adapter="codex"), waiver(id="WVR-0002", version="1.0.20"))
    assert [p[1] for p in refused.value.problems] == [
        "$.waivers[0].adapter",
        "$.waivers[1].version",
    ]
