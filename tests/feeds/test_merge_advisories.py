"""Merging feeds with advisories, and the diff between maps that hold them: union by id and
alias, floors in the ecosystem's order, conflicts, and every downgrade named."""

from __future__ import annotations

from typing import Any

import pytest

from floorctl.errors import MergeConflict
from floorctl.merge import diff, merge
from floorguard._maps.map_model import FloorMap, from_entries, to_entries


def adv(
    ident: str, *spans: dict[str, str], aliases: tuple[str, ...] = (), **more: Any
) -> dict[str, Any]:
    return {
        "id": ident,
        "aliases": list(aliases),
        "summary": more.get("summary", "s"),
        "affected": list(spans),
        "versions": list(more.get("versions", [])),
        "severity": list(more.get("severity", [])),
        "references": list(more.get("references", [])),
    }


def ext(*advisories: dict[str, Any], ecosystem: str = "npm", **floor: str) -> dict[str, Any]:
    return {**floor, "ecosystem": ecosystem, "advisories": list(advisories), "waivers": []}


def floor(version: str, advisory: str = "BSA-1", note: str = "n") -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": advisory, "note": note}


def fm(**entries: Any) -> FloorMap:
    return from_entries(entries)


# --- merge ------------------------------------------------------------------------------------


def test_advisories_are_unioned_by_id_across_feeds() -> None:
    a = fm(claude=ext(adv("GHSA-1", {"introduced": "0", "fixed": "1.4.7"})))
    b = fm(
        claude=ext(
            adv("GHSA-1", {"introduced": "2.0.0", "fixed": "2.1.3"}, references=["https://b/"]),
            adv("GHSA-2", versions=["3.0.0"]),
        )
    )
    merged = merge([("a.json", a), ("b.json", b)])
    claude = to_entries(merged.floor_map)["claude"]
    assert [x["id"] for x in claude["advisories"]] == ["GHSA-1", "GHSA-2"]
    assert claude["advisories"][0]["affected"] == [
        {"introduced": "0", "fixed": "1.4.7"},
        {"introduced": "2.0.0", "fixed": "2.1.3"},
    ]
    assert claude["advisories"][0]["references"] == ["https://b/"]
    assert merged.conflicts == ()


def test_advisories_sharing_an_alias_are_one_whatever_the_feed_order() -> None:
    ghsa = fm(claude=ext(adv("GHSA-1", {"introduced": "0", "fixed": "1.0.0"}, aliases=("CVE-1",))))
    cve = fm(claude=ext(adv("CVE-1", versions=["2.0.0"], aliases=("PYSEC-9",))))
    one = to_entries(merge([("a", ghsa), ("b", cve)]).floor_map)
    two = to_entries(merge([("b", cve), ("a", ghsa)]).floor_map)
    assert one == two
    (merged,) = one["claude"]["advisories"]
    # The GHSA names the CVE as its alias, so the GHSA id is kept.
    assert merged["id"] == "GHSA-1"
    assert merged["aliases"] == ["CVE-1", "PYSEC-9"]
    assert merged["versions"] == ["2.0.0"] and len(merged["affected"]) == 1


def test_aliases_chain_several_advisories_into_one() -> None:
    a = fm(claude=ext(adv("A-1", versions=["1.0.0"], aliases=("X-1",))))
    b = fm(claude=ext(adv("B-1", versions=["2.0.0"], aliases=("X-1", "Y-1"))))
    c = fm(claude=ext(adv("C-1", versions=["3.0.0"], aliases=("Y-1",))))
    (merged,) = to_entries(merge([("a", a), ("b", b), ("c", c)]).floor_map)["claude"]["advisories"]
    assert merged["id"] == "A-1"
    assert merged["versions"] == ["1.0.0", "2.0.0", "3.0.0"]
    assert set(merged["aliases"]) == {"B-1", "C-1", "X-1", "Y-1"}


def test_highest_floor_wins_in_semver_order() -> None:
    # PEP 440 would read 1.0.0-preview.1 as 1.0.0rc1, and 1.0.0-beta.11 would not parse.
    a = fm(claude=ext(ecosystem="npm", **floor("1.0.0-beta.11")))
    b = fm(claude=ext(ecosystem="npm", **floor("1.0.0-beta.2", "BSA-2")))
    merged = merge([("a", a), ("b", b)])
    assert merged.floor_map["claude"].min_safe_version == "1.0.0-beta.11"
    assert [c.chosen for c in merged.conflicts] == ["a"]


def test_two_ecosystems_for_one_adapter_is_a_conflict_error() -> None:
    a = fm(claude=ext(ecosystem="npm"))
    b = fm(claude=ext(ecosystem="PyPI"))
    with pytest.raises(
        MergeConflict,
        match=r"claude: feeds state different ecosystems \(a.json says npm, b.json says PyPI\)",
    ):
        merge([("a.json", a), ("b.json", b)])


def test_a_v1_floor_merged_with_v3_advisories_takes_the_ecosystem() -> None:
    v1 = fm(claude=floor("1.0.20"))
    v3 = fm(claude=ext(adv("GHSA-1", {"introduced": "0", "fixed": "1.4.7"})))
    merged = merge([("v1.json", v1), ("v3.json", v3)])
    claude = merged.floor_map["claude"]
    assert claude.ecosystem == "npm" and claude.min_safe_version == "1.0.20"
    assert [a.id for a in claude.advisories] == ["GHSA-1"]
    assert merged.conflicts == ()


def test_a_v1_floor_that_is_no_version_of_the_v3_ecosystem_is_a_conflict_error() -> None:
    v1 = fm(claude=floor("1.0"))  # PEP 440, not SemVer
    v3 = fm(claude=ext())
    with pytest.raises(MergeConflict) as refused:
        merge([("v1.json", v1), ("v3.json", v3)])
    assert "'1.0' from v1.json is not a valid SemVer version" in str(refused.value)
    assert "v3.json says the adapter is in the npm ecosystem" in str(refused.value)


def test_floor_only_feeds_merge_to_floor_only_entries() -> None:
    merged = merge([("a", fm(aider=floor("1.0"))), ("b", fm(aider=floor("2.0")))])
    assert to_entries(merged.floor_map) == {"aider": floor("2.0")}


# --- diff and downgrades ------------------------------------------------------------------------


BASE = fm(
    claude=ext(
        adv(
            "GHSA-1",
            {"introduced": "0", "fixed": "1.4.7"},
            {"introduced": "2.0.0", "last_affected": "2.1.2"},
        ),
        adv("GHSA-2", versions=["3.0.0", "3.0.1"]),
        **floor("1.0.0"),
    ),
    aider=floor("0.60.0"),
)


def changed_base(*advisories: dict[str, Any], **claude: str) -> FloorMap:
    return fm(claude=ext(*advisories, **claude), aider=floor("0.60.0"))


def test_floor_only_maps_keep_exactly_the_old_diff_form() -> None:
    old, new = fm(aider=floor("1.0")), fm(aider=floor("1.1"), codex=floor("0.1"))
    assert diff(old, new).to_json() == {
        "added": ["codex"],
        "removed": [],
        "changed": [{"adapter": "aider", "field": "min_safe_version", "old": "1.0", "new": "1.1"}],
    }


def test_the_diff_names_advisories_added_removed_and_changed() -> None:
    new = changed_base(
        *[
            adv(
                "GHSA-1",
                {"introduced": "0", "fixed": "1.5.0"},
                {"introduced": "2.0.0", "last_affected": "2.1.2"},
            ),
            adv("GHSA-3", versions=["4.0.0"]),
        ],
        **floor("1.0.0"),
    )
    document = diff(BASE, new).to_json()
    assert document["advisories"] == {
        "added": [{"adapter": "claude", "id": "GHSA-3"}],
        "removed": [{"adapter": "claude", "id": "GHSA-2"}],
        "changed": [{"adapter": "claude", "id": "GHSA-1"}],
    }
    assert document["waivers"] == {"added": [], "removed": [], "changed": []}


def test_the_diff_names_waivers_and_the_ecosystem() -> None:
    waiver = {
        "id": "WVR-1",
        "version": "2.0.0",
        "advisories": ["GHSA-1"],
        "reason": "r",
        "approved_by": "me",
        "expires": "2030-01-01T00:00:00Z",
    }
    old = fm(aider=floor("1.0"))
    new = fm(aider={**floor("1.0"), "ecosystem": "PyPI", "advisories": [], "waivers": [waiver]})
    document = diff(old, new).to_json()
    assert document["waivers"]["added"] == [{"adapter": "aider", "id": "WVR-1"}]
    assert {"adapter": "aider", "field": "ecosystem", "old": None, "new": "PyPI"} in document[
        "changed"
    ]


SAME = [
    adv(
        "GHSA-1",
        {"introduced": "0", "fixed": "1.4.7"},
        {"introduced": "2.0.0", "last_affected": "2.1.2"},
    ),
    adv("GHSA-2", versions=["3.0.0", "3.0.1"]),
]


@pytest.mark.parametrize(
    ("advisories", "reason"),
    [
        ([SAME[0]], "removes advisory GHSA-2 of claude"),
        (
            [
                adv(
                    "GHSA-1",
                    {"introduced": "0", "fixed": "1.4.6"},
                    {"introduced": "2.0.0", "last_affected": "2.1.2"},
                ),
                SAME[1],
            ],
            "narrows advisory GHSA-1 of claude",
        ),
        (
            [
                adv(
                    "GHSA-1",
                    {"introduced": "1.0.0", "fixed": "1.4.7"},
                    {"introduced": "2.0.0", "last_affected": "2.1.2"},
                ),
                SAME[1],
            ],
            "narrows advisory GHSA-1 of claude (from the start, < 1.0.0 no longer affected)",
        ),
        (
            [
                adv(
                    "GHSA-1",
                    {"introduced": "0", "fixed": "1.4.7"},
                    {"introduced": "2.0.0", "fixed": "2.1.2"},
                ),
                SAME[1],
            ],
            "narrows advisory GHSA-1 of claude (2.1.2 no longer affected)",
        ),
        (
            [SAME[0], adv("GHSA-2", versions=["3.0.0"])],
            "narrows advisory GHSA-2 of claude (3.0.1 no",
        ),
    ],
)
def test_removing_or_narrowing_an_advisory_is_a_downgrade(
    advisories: list[Any], reason: str
) -> None:
    changes = diff(BASE, changed_base(*advisories, **floor("1.0.0")))
    assert changes.is_downgrade
    assert any(r.startswith(reason) for r in changes.reasons()), changes.reasons()


@pytest.mark.parametrize(
    "advisories",
    [
        SAME,
        # widened ranges, an extra listed version, a new advisory
        [
            adv("GHSA-1", {"introduced": "0", "fixed": "1.5.0"}, {"introduced": "2.0.0"}),
            adv("GHSA-2", versions=["3.0.0", "3.0.1", "3.0.2"]),
            adv("GHSA-3", versions=["9.0.0"]),
        ],
        # the same versions stated another way: a listed version folded into a range
        [SAME[0], adv("GHSA-2", {"introduced": "3.0.0", "last_affected": "3.0.1"})],
        # renamed: the old id kept as an alias covers it
        [SAME[0], adv("GHSA-9", versions=["3.0.0", "3.0.1"], aliases=("GHSA-2",))],
    ],
)
def test_widening_or_restating_is_not_a_downgrade(advisories: list[Any]) -> None:
    changes = diff(BASE, changed_base(*advisories, **floor("1.0.0")))
    assert not changes.is_downgrade, changes.reasons()


@pytest.mark.parametrize(
    ("claude", "reason"),
    [
        (ext(*SAME), "lowers the floor of claude"),
        (ext(*SAME, **floor("0.9.0")), "lowers the floor of claude"),
        (
            ext(*SAME, ecosystem="PyPI", **floor("1.0.0")),
            "changes the ecosystem of claude from npm to PyPI",
        ),
    ],
)
def test_removing_or_lowering_the_floor_or_changing_the_ecosystem_is_a_downgrade(
    claude: dict[str, Any], reason: str
) -> None:
    changes = diff(BASE, fm(claude=claude, aider=floor("0.60.0")))
    assert reason in changes.reasons()


def test_a_v1_floor_taking_an_ecosystem_is_not_a_downgrade() -> None:
    old = fm(claude=floor("1.0.20"))
    new = fm(claude=ext(**floor("1.0.20")))
    changes = diff(old, new)
    assert not changes.is_downgrade
    assert changes.changed == (
        {"adapter": "claude", "field": "ecosystem", "old": None, "new": "npm"},
    )


def test_a_refusal_names_ten_weakenings_and_counts_the_rest() -> None:
    from helpers.advisory_maps import advisory, entry, span

    from floorguard._maps.map_model import from_entries

    many = [advisory(f"GHSA-aaaa-bbbb-{i:04d}", span("0", fixed="1.0.0")) for i in range(25)]
    before = from_entries({"claude": entry("npm", *many)})
    after = from_entries({"claude": entry("npm")})
    changes = diff(before, after)
    assert len(changes.reasons()) == 25
    assert changes.summary().endswith(", and 15 more")
    assert changes.summary().count("removes advisory") == 10
