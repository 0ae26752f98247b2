"""Merging feeds: the highest floor wins, disagreements are reported, downgrades are named."""

from __future__ import annotations

from floorctl.merge import diff, merge
from floorguard._maps.map_model import from_entries


def entry(version: str, advisory: str = "BSA-1", note: str = "n") -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": advisory, "note": note}


def test_highest_floor_wins_by_pep440_order_not_text_order() -> None:
    a = from_entries({"aider": entry("0.9.0")})
    b = from_entries({"aider": entry("0.10.0")})
    merged = merge([("a.json", a), ("b.json", b)])
    assert merged.floor_map["aider"].min_safe_version == "0.10.0"
    assert [c.chosen for c in merged.conflicts] == ["b.json"]
    assert "a.json says 0.9.0" in merged.conflicts[0].describe()


def test_pre_release_is_below_the_release() -> None:
    merged = merge(
        [("a", from_entries({"x": entry("1.0.0rc1")})), ("b", from_entries({"x": entry("1.0.0")}))]
    )
    assert merged.floor_map["x"].min_safe_version == "1.0.0"


def test_agreeing_feeds_report_no_conflict() -> None:
    same = from_entries({"aider": entry("1.0")})
    assert merge([("a", same), ("b", same)]).conflicts == ()


def test_equal_floor_with_different_advisory_is_a_reported_conflict() -> None:
    merged = merge(
        [
            ("a", from_entries({"x": entry("1.0", "BSA-1")})),
            ("b", from_entries({"x": entry("1.0", "BSA-2")})),
        ]
    )
    assert merged.floor_map["x"].advisory_id == "BSA-1"
    assert len(merged.conflicts) == 1
    # (the warning says the order of the feeds decided, not that a higher floor won)
    assert "the first of them, a, wins (the order of the feeds decides)" in (
        merged.conflicts[0].describe()
    )


def test_a_higher_floor_is_not_called_a_tie() -> None:
    merged = merge(
        [("a", from_entries({"x": entry("1.0")})), ("b", from_entries({"x": entry("1.1")}))]
    )
    assert "the highest floor, from b, wins" in merged.conflicts[0].describe()


def test_union_of_adapters() -> None:
    merged = merge([("a", from_entries({"x": entry("1")})), ("b", from_entries({"y": entry("2")}))])
    assert sorted(merged.floor_map) == ["x", "y"]


def test_diff_names_added_removed_changed_and_lowered() -> None:
    old = from_entries({"keep": entry("1.0"), "gone": entry("1.0"), "down": entry("2.0")})
    new = from_entries(
        {"keep": entry("1.0", note="new note"), "down": entry("1.5"), "fresh": entry("1")}
    )
    changes = diff(old, new)
    assert changes.added == ("fresh",)
    assert changes.removed == ("gone",)
    assert changes.lowered == ("down",)
    assert {"adapter": "keep", "field": "note", "old": "n", "new": "new note"} in changes.changed
    assert changes.is_downgrade


def test_raising_a_floor_is_not_a_downgrade() -> None:
    changes = diff(from_entries({"x": entry("1.0")}), from_entries({"x": entry("1.0.1")}))
    assert not changes.is_downgrade and not changes.empty


def test_equal_versions_spelled_differently_are_not_lowered() -> None:
    changes = diff(from_entries({"x": entry("1.0")}), from_entries({"x": entry("1.0.0")}))
    assert changes.lowered == ()
