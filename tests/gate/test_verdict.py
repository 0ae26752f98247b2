"""The shared rule, as a pure function: what it says of a waiver near its end, and of
rebuilds of an affected release."""

from __future__ import annotations

import datetime as dt

from helpers.advisory_maps import advisory, entry, span, waiver

from floorguard._maps import verdict, versions
from floorguard._maps.map_model import Advisory, from_entries

AT = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def aider_with_waiver(expires: dt.datetime) -> Advisory:
    stamp = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    ghsa = advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3"))
    cover = waiver("WVR-0001", "2.0.1", "GHSA-wwww-wwww-wwww", expires=stamp)
    return from_entries({"aider": entry("PyPI", ghsa, waivers=(cover,))})["aider"]


def test_a_waiver_in_its_last_two_minutes_is_named_as_such_not_as_expired() -> None:
    near = aider_with_waiver(AT + dt.timedelta(seconds=100))
    causes = verdict.assess(near, "2.0.1", at=None).causes
    assert verdict.assess(near, "2.0.1", at=AT + verdict.WAIVER_MARGIN).waiver is None
    why = verdict.why_not_waived(near, "2.0.1", causes, AT)
    assert why is not None and "within the 2 minutes" in why and "expired" not in why
    gone = aider_with_waiver(AT - dt.timedelta(seconds=1))
    assert "expired at" in (verdict.why_not_waived(gone, "2.0.1", causes, AT) or "")
    held = aider_with_waiver(AT + dt.timedelta(minutes=3))
    assert verdict.why_not_waived(held, "2.0.1", causes, AT) is None
    assert verdict.assess(held, "2.0.1", at=AT + verdict.WAIVER_MARGIN).waiver is not None


def test_a_rebuild_is_its_release_in_either_order() -> None:
    assert versions.compare("0.64.0+ubuntu1", "0.64.0", "PyPI") == 0
    assert versions.compare("1.0.20+build.7", "1.0.20", "npm") == 0
    assert versions.compare("0.64.1+ubuntu1", "0.64.0", "PyPI") == 1
    assert versions.compare("0.63.9+ubuntu1", "0.64.0", "PyPI") == -1
    listed = from_entries(
        {"aider": entry("PyPI", advisory("GHSA-aaaa-bbbb-cccc", versions=("0.64.0",)))}
    )["aider"]
    assert verdict.assess(listed, "0.64.0+local", at=None).unsafe
    assert not verdict.assess(listed, "0.64.1+local", at=None).unsafe
