"""The floor-map hash is the definition in docs/floor-map.md, pinned by a hand-computed vector."""

from __future__ import annotations

import hashlib

import pytest

from floorguard._maps.map_model import entries_hash, from_entries
from floorguard.errors import FloorMapError

REFERENCE = {
    "aider": {
        "min_safe_version": "0.60.0",
        "advisory_id": "BSA-0001",
        "note": "aider below 0.60.0 is known-unsafe for spawned use; upgrade recommended.",
    }
}
# Written out by hand from the definition: keys sorted, no whitespace, UTF-8.
REFERENCE_CANONICAL = (
    b'{"aider":{"advisory_id":"BSA-0001","min_safe_version":"0.60.0",'
    b'"note":"aider below 0.60.0 is known-unsafe for spawned use; upgrade recommended."}}'
)
REFERENCE_HASH = "sha256:2723fb87aee517081a26e6e677f1e2103fae82d44d51e510d2806dc2a1c3326f"


def test_reference_map_hash_is_the_fixed_vector() -> None:
    assert "sha256:" + hashlib.sha256(REFERENCE_CANONICAL).hexdigest() == REFERENCE_HASH
    assert entries_hash(REFERENCE) == REFERENCE_HASH


def test_non_ascii_is_hashed_as_utf8_not_escaped() -> None:
    entries = {"x": {"min_safe_version": "1", "advisory_id": "A-1", "note": "café"}}
    canonical = '{"x":{"advisory_id":"A-1","min_safe_version":"1","note":"café"}}'.encode()
    assert entries_hash(entries) == "sha256:" + hashlib.sha256(canonical).hexdigest()


def test_empty_map_hashes_the_empty_object() -> None:
    assert entries_hash({}) == "sha256:" + hashlib.sha256(b"{}").hexdigest()


def test_adapter_order_does_not_change_the_hash() -> None:
    a = {"min_safe_version": "1", "advisory_id": "A-1", "note": "n"}
    assert entries_hash({"b": a, "a": a}) == entries_hash({"a": a, "b": a})


@pytest.mark.parametrize(
    "entries",
    [
        {"aider": {"min_safe_version": "1", "advisory_id": "A-1"}},
        {"aider": {"min_safe_version": "1", "advisory_id": "A-1", "note": "n", "extra": "x"}},
        {"aider": {"min_safe_version": 1, "advisory_id": "A-1", "note": "n"}},
        {"aider": "1.0"},
    ],
    ids=["missing-field", "extra-field", "non-string", "not-an-entry"],
)
def test_malformed_map_data_is_refused(entries: dict[str, object]) -> None:
    with pytest.raises(FloorMapError):
        from_entries(entries)


LOOK_ALIKES = ["Claude", "clau\u200bde", "\uff43laude", "claude ", "cl\u0430ude", "claude\x00",
               "claude\n", "", "-claude", "c" * 65]  # fmt: skip


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_an_entry_under_a_name_no_adapter_has_is_refused(name: str) -> None:
    # A key that reads as claude and is not would leave claude itself with no entry: the
    # map must not be taken at all (a feed with that name is refused too).
    entry = {"min_safe_version": "2.0.0", "advisory_id": "A-1", "note": "n"}
    with pytest.raises(FloorMapError, match="not a valid adapter name"):
        from_entries({name: entry})


def _extended(advisories: list[dict[str, object]], waivers: list[dict[str, object]]) -> dict:
    return {"claude": {"ecosystem": "npm", "advisories": advisories, "waivers": waivers}}


def _advisory(*affected: dict[str, str]) -> dict[str, object]:
    return {"id": "GHSA-aaaa-bbbb-cccc", "aliases": [], "summary": "s", "affected": list(affected),
            "versions": [], "severity": [], "references": []}  # fmt: skip


def _waiver(version: str) -> dict[str, object]:
    expires = "2030-01-01T00:00:00.000000Z"
    return {"id": "WVR-0001", "version": version, "advisories": ["GHSA-aaaa-bbbb-cccc"],
            "reason": "r", "approved_by": "a", "expires": expires}  # fmt: skip


def test_a_map_stating_one_waiver_id_twice_is_refused() -> None:
    # (the gate would take one, an auditor's proof the other: no feed writes such a map)
    advisory = _advisory({"introduced": "0", "fixed": "3.0.0"})
    with pytest.raises(FloorMapError, match="WVR-0001"):
        from_entries(_extended([advisory], [_waiver("2.0.10"), _waiver("2.0.11")]))


@pytest.mark.parametrize(
    "span",
    [{"introduced": "2.1.3", "fixed": "2.0.0"}, {"introduced": "2.1.3", "fixed": "2.1.3"},
     {"introduced": "2.1.3", "last_affected": "2.0.0"}],
)  # fmt: skip
def test_a_map_with_a_range_that_holds_no_version_is_refused(span: dict[str, str]) -> None:
    # (read as a feed is, it is refused; read as OSV events in order, >= 2.1.3 stays open:
    # taken as empty, it would let 3.0.0 run)
    with pytest.raises(FloorMapError, match="holds no version"):
        from_entries(_extended([_advisory(span)], []))


def test_a_range_of_one_version_and_one_of_versions_not_valid_here_are_taken() -> None:
    # (a version not valid in the ecosystem is an unknown version when judged: refused then)
    spans = ({"introduced": "2.1.3", "last_affected": "2.1.3"}, {"introduced": "x", "fixed": "y"})
    assert from_entries(_extended([_advisory(*spans)], []))["claude"].advisories


@pytest.mark.parametrize("where", ["floor", "fixed", "listed"])
def test_a_map_with_a_local_label_on_a_pep440_version_is_refused(where: str) -> None:
    # The gate compares releases, a label aside: a floor of 0.50.0+a would let 0.50.0 run,
    # which PEP 440 (and so the file) puts below it. No feed states one (feeds.md).
    if where == "floor":
        entries = {"aider": {"min_safe_version": "0.50.0+a", "advisory_id": "A-1", "note": "n"}}
    else:
        span = {"introduced": "0", "fixed": "0.50.0+a"}
        advisory = {**_advisory(span), "versions": ["0.40.0+a"] if where == "listed" else []}
        if where == "listed":
            advisory["affected"] = []
        entries = {"aider": {"ecosystem": "PyPI", "advisories": [advisory], "waivers": []}}
    with pytest.raises(FloorMapError, match="local version label"):
        from_entries(entries)


def _aider_waived(*waivers: dict[str, object]) -> dict[str, object]:
    advisory = _advisory({"introduced": "0", "fixed": "1.0.0"})
    return {"aider": {"ecosystem": "PyPI", "advisories": [advisory], "waivers": list(waivers)}}


def _with(waiver: dict[str, object], **changed: str) -> dict[str, object]:
    return {**waiver, **changed}


@pytest.mark.parametrize("second", ["0.64", "v0.64.0", "0.064.0", "0.64.0.0"])
def test_a_map_waiving_one_pep440_version_twice_however_spelt_is_refused(second: str) -> None:
    # One waiver per adapter and version (feeds.md): two spellings of 0.64.0 are one version.
    waivers = (_waiver("0.64.0"), _with(_waiver(second), id="WVR-0002"))
    with pytest.raises(FloorMapError, match="waived twice"):
        from_entries(_aider_waived(*waivers))


def test_a_map_waiving_one_version_by_two_spellings_of_one_id_is_refused() -> None:
    waivers = (_waiver("0.64.0"), _with(_waiver("0.65.0"), id="wvr-0001"))
    with pytest.raises(FloorMapError, match="stated twice"):
        from_entries(_aider_waived(*waivers))


def test_a_map_stating_one_waiver_id_under_two_adapters_is_refused() -> None:
    # (ids name waivers across the document a map's waivers come from, not per adapter)
    claude = _extended([_advisory({"introduced": "0", "fixed": "3.0.0"})], [_waiver("2.0.10")])
    entries = {**_aider_waived(_waiver("0.64.0")), **claude}
    with pytest.raises(FloorMapError, match="WVR-0001"):
        from_entries(entries)


def test_a_map_waiving_a_pep440_version_with_a_local_label_is_refused() -> None:
    with pytest.raises(FloorMapError, match="local version label"):
        from_entries(_aider_waived(_waiver("0.64.0+a")))


def test_waivers_of_distinct_versions_and_ids_are_taken() -> None:
    waivers = (_waiver("0.64.0"), _with(_waiver("0.64.1"), id="WVR-0002"))
    assert len(from_entries(_aider_waived(*waivers))["aider"].waivers) == 2
    # SemVer order: the spelling is the version (as the feeds' check says)
    npm = _extended([_advisory({"introduced": "0", "fixed": "3.0.0"})],
                    [_waiver("2.0.10"), _with(_waiver("2.0.11"), id="WVR-0002")])  # fmt: skip
    assert len(from_entries(npm)["claude"].waivers) == 2


@pytest.mark.parametrize("waiver_id", ["WVR-\u212a", "WVR-0001 ", "WVR--1", "", "-WVR",
                                       "W" * 65, "WVR_1"])  # fmt: skip
def test_a_map_with_a_waiver_id_no_document_can_state_is_refused(waiver_id: str) -> None:
    # (the Kelvin sign prints as K: WVR-\u212a reads as WVR-K, a waiver no document has)
    with pytest.raises(FloorMapError, match="is not a waiver id"):
        from_entries(_aider_waived(_with(_waiver("0.64.0"), id=waiver_id)))
