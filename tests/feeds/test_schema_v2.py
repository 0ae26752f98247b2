"""Advisory feeds, schema version 2: identity and freshness fields, references, and refusals.

Version 1 stays valid; references never enter the floor map or its hash.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from floorctl.errors import FeedError
from floorctl.feeds import parse_feed
from floorguard._maps.map_model import floor_map_hash

SOURCE = "feeds/v2.json"


def entry(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "min_safe_version": "0.60.0",
        "advisory_id": "BSA-0001",
        "note": "aider below 0.60.0 is known-unsafe.",
    }
    base.update(fields)
    return base


def feed(adapters: Any = None, **top: Any) -> bytes:
    document: dict[str, Any] = {
        "schema_version": 2,
        "feed_id": "acme/advisories",
        "version": 4,
        "published": "2026-01-01T00:00:00Z",
        "expires": "2026-02-01T00:00:00+01:00",
        "adapters": {"aider": entry()} if adapters is None else adapters,
    }
    document.update(top)
    return json.dumps({k: v for k, v in document.items() if v is not ...}).encode()


def problems(data: bytes) -> list[tuple[str, str, str]]:
    with pytest.raises(FeedError) as refused:
        parse_feed(data, SOURCE)
    return refused.value.problems


def refused_at(data: bytes, path: str, fragment: str = "") -> None:
    found = problems(data)
    assert any(where == path and fragment in message for _, where, message in found), found


def test_accepts_a_v2_feed_with_identity_and_freshness() -> None:
    parsed = parse_feed(feed(), SOURCE)
    assert (parsed.schema_version, parsed.feed_id, parsed.version) == (2, "acme/advisories", 4)
    assert parsed.published == "2026-01-01T00:00:00.000000Z"
    assert parsed.expires == "2026-01-31T23:00:00.000000Z"  # normalised to UTC


def test_references_do_not_enter_the_floor_map_or_its_hash() -> None:
    plain = parse_feed(feed(), SOURCE)
    referenced = parse_feed(
        feed({"aider": entry(references=["https://example.org/advisories/BSA-0001"])}), SOURCE
    )
    assert floor_map_hash(referenced.floor_map) == floor_map_hash(plain.floor_map)
    assert referenced.floor_map["aider"].as_entry() == entry()


def test_version_1_feeds_stay_valid_without_freshness() -> None:
    data = json.dumps({"schema_version": 1, "adapters": {"aider": entry()}}).encode()
    parsed = parse_feed(data, SOURCE)
    assert (parsed.feed_id, parsed.version, parsed.expires) == (None, None, None)


@pytest.mark.parametrize("field", ["feed_id", "version", "published", "expires"])
def test_refuses_a_v2_feed_without_a_required_field(field: str) -> None:
    refused_at(feed(**{field: ...}), f"$.{field}", "required field missing")


@pytest.mark.parametrize("version", [0, -1, True, 1.0, "3", 2**53])
def test_refuses_a_version_that_is_not_a_positive_integer(version: Any) -> None:
    assert problems(feed(version=version))


@pytest.mark.parametrize(
    "when",
    [
        "2026-01-01",
        "yesterday",
        "2026-01-01T00:00:00",
        "2026-13-01T00:00:00Z",
        " 2026-01-01T00:00:00Z",
        # ISO 8601 forms that datetime.fromisoformat reads and RFC 3339 does not have
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00+01:60",
        "2026-01-01T00:00:00,5Z",
    ],
)
def test_refuses_timestamps_that_are_not_rfc3339_with_a_zone(when: str) -> None:
    refused_at(feed(published=when), "$.published", "RFC 3339")


def test_refuses_a_feed_that_expires_before_it_was_published() -> None:
    refused_at(feed(published="2026-03-01T00:00:00Z"), "$.expires", "expires before")


@pytest.mark.parametrize("feed_id", ["", "-leading", "has space", "x" * 129, "tab\there", "acme\n"])
def test_refuses_malformed_feed_ids(feed_id: str) -> None:
    assert any(where == "$.feed_id" for _, where, _ in problems(feed(feed_id=feed_id)))


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://example.org/a", ""),
        ("https://user:pw@example.org/a", "credentials"),
        ("https:///nohost", "with a host"),
        ("https://example.org/a b", "plain https URL"),
        ("https://exämple.org/", "plain https URL"),
        ("https://example.org:99999/", "not a valid URL"),
        ("javascript:alert(1)", ""),
    ],
)
def test_refuses_references_that_are_not_plain_https_urls(url: str, fragment: str) -> None:
    data = feed({"aider": entry(references=[url])})
    found = problems(data)
    assert any(
        where.startswith("$.adapters.aider.references") and fragment in message
        for _, where, message in found
    ), found


def test_refuses_too_many_references() -> None:
    urls = [f"https://example.org/{i}" for i in range(33)]
    refused_at(feed({"aider": entry(references=urls)}), "$.adapters.aider.references")


def test_refuses_unknown_top_level_fields_in_v2() -> None:
    refused_at(feed(signature="x"), "$.signature", "unknown field")


def test_refuses_references_in_a_v1_feed() -> None:
    data = json.dumps({"schema_version": 1, "adapters": {"aider": entry(references=[])}}).encode()
    refused_at(data, "$.adapters.aider.references", "unknown field")
