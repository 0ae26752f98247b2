"""The runtime and a published floor map: used only when signed by a trusted publisher,
unexpired, self-consistent and not older than the built-in map; otherwise the built-in map
stays in force and stderr says why (never a silent downgrade)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from feedserver import envelope, new_key
from helpers.published_site import BUILTIN, NEWER, Site, document
from hosts import floor, map_module, receipt_in_chain
from probes import aider_at

from floorguard._base._time import utc_now
from floorguard._maps import published_map
from floorguard._maps.map_model import entries_hash
from floorguard.errors import FloorMapError


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def kept_builtin(result: tuple[str, str], reason: str) -> None:
    out, err = result
    assert out == entries_hash(BUILTIN)
    assert "is not used" in err and reason in err
    assert "the built-in floor map (version 3" in err


def test_a_valid_published_map_replaces_the_builtin_one(site: Site) -> None:
    site.write(document(NEWER, 4), site.key)
    assert site.run() == (entries_hash(NEWER), "")


def test_floor_map_version_names_the_map_in_force_as_floor_map_hash_does(site: Site) -> None:
    code = "import floorguard; print(floorguard.FLOOR_MAP_VERSION, floorguard.FLOOR_MAP_HASH)"
    builtin = site.host.python("-c", code)
    assert (builtin.stdout.strip(), builtin.stderr) == (f"3 {entries_hash(BUILTIN)}", "")
    site.write(document(NEWER, 4), site.key)
    assert site.run(code) == (f"4 {entries_hash(NEWER)}", "")


def test_floor_map_version_is_read_at_each_access_not_at_import(site: Site) -> None:
    code = (
        "import pathlib, sys, floorguard\n"
        "from floorguard import FLOOR_MAP_VERSION as first\n"
        "pathlib.Path(floorguard.__file__).with_name('floor_map.py').write_text(sys.argv[1])\n"
        "print(first, floorguard.FLOOR_MAP_VERSION, 'FLOOR_MAP_VERSION' in floorguard.__all__)"
    )
    done = site.host.python("-c", code, map_module(NEWER, version=5))
    assert (done.returncode, done.stdout.strip()) == (0, "3 5 True"), done.stderr


def test_doctor_sarif_locates_findings_in_the_published_map_in_force(
    site: Site, tmp_path: Path
) -> None:
    """Canonical JSON is one line: each result's region is line 1 of the published map."""
    site.write(document(NEWER, 4), site.key)
    bins = tmp_path / "bin"
    bins.mkdir()
    aider_at(bins / "aider", "0.55.0")  # below the published floor 0.60.0
    done = site.host.python(
        "-m", "floorguard", "doctor", "--format", "sarif", PATH=str(bins),
        FLOORGUARD_FLOOR_MAP=str(site.map), FLOORGUARD_TRUSTED_KEYS=str(site.public),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    [result] = json.loads(done.stdout)["runs"][0]["results"]
    physical = result["locations"][0]["physicalLocation"]
    assert physical == {"artifactLocation": {"uri": site.map.as_uri()}, "region": {"startLine": 1}}


def test_the_same_map_at_the_same_version_is_accepted(site: Site) -> None:
    site.write(document(BUILTIN, 3), site.key)
    assert site.run() == (entries_hash(BUILTIN), "")


def test_nothing_is_trusted_by_default(site: Site) -> None:
    site.write(document(NEWER, 4), site.key)
    kept_builtin(site.run(package_keys=True), "trusts no key")


def test_refuses_an_unsigned_published_map(site: Site) -> None:
    site.write(document(NEWER, 4))
    kept_builtin(site.run(), "cannot read the signature: No such file")


def test_refuses_a_wrongly_signed_published_map(site: Site, tmp_path: Path) -> None:
    stranger, _, _ = new_key(tmp_path / "stranger")
    site.write(document(NEWER, 4), stranger)
    kept_builtin(site.run(), "no signature verifies against a trusted key")


def test_refuses_an_expired_published_map(site: Site) -> None:
    site.write(document(NEWER, 4, expires=utc_now() - dt.timedelta(minutes=1)), site.key)
    kept_builtin(site.run(), "expired at")


def test_refuses_a_published_map_older_than_the_builtin_one(site: Site) -> None:
    site.write(document(NEWER, 2), site.key)
    kept_builtin(site.run(), "lower than the built-in map's 3 (a downgrade)")


def test_refuses_a_different_map_at_the_builtin_version(site: Site) -> None:
    site.write(document(NEWER, 3), site.key)
    kept_builtin(site.run(), "equals the built-in map's but the maps differ")


def test_refuses_a_hash_mismatched_published_map(site: Site) -> None:
    site.write(document(NEWER, 4, stated_hash=entries_hash(BUILTIN)), site.key)
    kept_builtin(site.run(), "hash mismatch")


def test_refuses_a_fresh_map_with_a_stale_signature(site: Site) -> None:
    older = document(BUILTIN, 3)
    site.write(document(NEWER, 4), site.key, signed=older)
    kept_builtin(site.run(), "covers different bytes")


def test_the_reason_is_printed_once_per_distinct_reason(site: Site) -> None:
    site.write(document(NEWER, 2), site.key)
    code = "import floorguard\nfor _ in range(3): h = floorguard.FLOOR_MAP_HASH\nprint(h)"
    out, err = site.run(code)
    assert out == entries_hash(BUILTIN)
    assert err.count("is not used") == 1


def test_import_stays_light_with_a_published_map_named(site: Site) -> None:
    site.write(document(NEWER, 4), site.key)
    code = (
        "import sys, floorguard\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('cryptography', 'httpx', 'jsonschema', 'jinja2', 'click', 'floorctl')))"
    )
    assert site.run(code) == ("[]", "")


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.replace(b'{"adapters"', b'{ "adapters"'), "canonical"),
        (lambda d: d[:-1] + b',"extra":1}', "fields must be exactly"),
        (lambda d: d.replace(b'"schema_version":1', b'"schema_version":2'), "schema_version"),
        (lambda d: d.replace(b'"map_version":4', b'"map_version":-4'), "non-negative"),
        (lambda d: d.replace(b'"map_version":4', b'"map_version":true'), "non-negative"),
        (lambda d: b"[" + d + b"]", "fields must be exactly"),
        (lambda d: d[:-1] + b',"map_version":4}', "duplicate"),
    ],
)
def test_parse_refuses_malformed_published_maps(mutate: Any, fragment: str) -> None:
    data = mutate(document(NEWER, 4))
    with pytest.raises(FloorMapError, match=fragment):
        published_map.parse(data, "floor-map.json")


def test_parse_refuses_a_signed_map_whose_entry_only_looks_like_an_adapters_name() -> None:
    entries = {"Claude": {"advisory_id": "A-1", "min_safe_version": "2.0.0", "note": "n"}}
    canonical = json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()
    doc = {
        "adapters": entries, "expires": "2099-01-01T00:00:00.000000Z",
        "floor_map_hash": "sha256:" + hashlib.sha256(canonical).hexdigest(),
        "map_version": 4, "schema_version": 1,
    }  # fmt: skip
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(FloorMapError, match="not a valid adapter name"):
        published_map.parse(data, "floor-map.json")


def test_parse_accepts_what_publish_writes() -> None:
    parsed = published_map.parse(document(NEWER, 4), "floor-map.json")
    assert (parsed.map_version, parsed.floor_map_hash) == (4, entries_hash(NEWER))
    assert json.loads(document(NEWER, 4))["adapters"] == NEWER


# --- rollback of published maps, and no silent fallback once one was accepted ------------------

LOW = {"aider": floor("0.55.0")}
HIGH = {"aider": floor("0.60.0")}


def spawn(site: Site, version: str = "0.57.0", **extra: str) -> dict[str, Any]:
    """A real host process's preflight of aider at ``version`` with the published map named."""
    return site.host.preflight(
        "aider",
        version=version,
        FLOORGUARD_FLOOR_MAP=str(site.map),
        FLOORGUARD_TRUSTED_KEYS=str(site.public),
        **extra,
    )


def accepted_record(site: Site) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((site.host.home / "published-map.json").read_bytes())
    return record


def accept(site: Site, entries: dict[str, Any], version: int) -> None:
    """Publish and have a host use it: the map is then the highest accepted on this host."""
    site.write(document(entries, version), site.key)
    result = spawn(site)
    assert result["floor"] == entries["aider"]["min_safe_version"], result


def refused_untrusted(site: Site, result: dict[str, Any], fragment: str) -> None:
    assert result["raised"] == "SpawnRefused", result
    assert result["verdict"] == "refuse"
    assert result["reason"].startswith("floor map cannot be trusted: "), result["reason"]
    assert fragment in result["reason"], result["reason"]
    receipt = receipt_in_chain(site.host, result["receipt_id"])
    assert receipt["verdict"] == "refuse"


def test_records_the_highest_published_map_accepted(site: Site) -> None:
    accept(site, HIGH, 5)
    assert accepted_record(site) == {
        "schema_version": 1,
        "map_version": 5,
        "floor_map_hash": entries_hash(HIGH),
    }


def test_refuses_a_rolled_back_published_map_even_with_the_warn_policy(site: Site) -> None:
    accept(site, HIGH, 5)
    # The attacker puts back an older map, validly signed by the same publisher.
    site.write(document(LOW, 4), site.key)
    result = spawn(site, FLOORGUARD_ADAPTER_FLOOR_POLICY="warn")
    refused_untrusted(site, result, "map_version 4 is lower than version 5 already accepted")
    assert accepted_record(site)["map_version"] == 5  # never lowered


def test_refuses_another_map_at_an_accepted_version(site: Site) -> None:
    accept(site, HIGH, 5)
    site.write(document(LOW, 5), site.key)
    refused_untrusted(site, spawn(site), "map_version 5 was accepted on this host as another map")


def test_accepts_the_same_map_re_signed_with_a_later_expiry(site: Site) -> None:
    accept(site, HIGH, 5)
    site.write(document(HIGH, 5, expires=utc_now() + dt.timedelta(days=40)), site.key)
    result = spawn(site)
    assert result["reason"] == "aider 0.57.0 is below the floor 0.60.0 (BSA-0001)"


def test_accepts_a_newer_published_map_after_an_older_one(site: Site) -> None:
    accept(site, LOW, 4)
    accept(site, HIGH, 5)


def _delete_signature(site: Site) -> None:
    Path(str(site.map) + ".dsse").unlink()


def _corrupt_signature(site: Site) -> None:
    Path(str(site.map) + ".dsse").write_bytes(b'{"payload": "not base64", "signatures": []}')


def _delete_map(site: Site) -> None:
    site.map.unlink()


def _sign_with_a_stranger(site: Site) -> None:
    stranger, _, _ = new_key(site.map.parent / "stranger")
    site.write(document(HIGH, 6), stranger)


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (_delete_signature, "signature: No such file"),
        (_corrupt_signature, ""),
        (_delete_map, "published floor map: No such file"),
        (_sign_with_a_stranger, "no signature verifies against a trusted key"),
    ],
    ids=["deleted-signature", "corrupt-signature", "deleted-map", "untrusted-signer"],
)
def test_refuses_spawns_when_an_accepted_published_map_cannot_be_used(
    site: Site, damage: Any, fragment: str
) -> None:
    accept(site, HIGH, 5)
    damage(site)
    result = spawn(site, FLOORGUARD_ADAPTER_FLOOR_POLICY="warn")
    refused_untrusted(site, result, fragment)
    assert (
        "the built-in floor map (version 3) is older than published map version 5"
        in (result["reason"])
    )


@pytest.mark.parametrize("damage", ["fields", "a key twice", "a dangling link"])
def test_refuses_spawns_when_the_accepted_map_record_is_damaged(site: Site, damage: str) -> None:
    accept(site, HIGH, 5)
    record = site.host.home / "published-map.json"
    if damage == "fields":
        record.write_text('{"map_version": 1}')
    elif damage == "a key twice":  # (read as version 1, an older map would be taken)
        text = record.read_text()
        assert '"map_version": 5' in text
        record.write_text(text.replace('"map_version": 5', '"map_version": 5, "map_version": 1'))
    else:  # (taken as no record, an older map would be taken)
        record.unlink()
        record.symlink_to(site.host.home / "gone.json")
    result = spawn(site)
    assert result["raised"] == "SpawnRefused"
    assert result["reason"].startswith("floor map cannot be trusted: ")
    assert "published-map.json" in result["reason"], result["reason"]


def test_the_builtin_map_stands_in_when_it_is_at_least_as_new(site: Site) -> None:
    accept(site, LOW, 4)
    site.host.set_map(map_module(HIGH, version=5))  # the package was upgraded since
    _delete_signature(site)
    done = site.host.python(
        "-c",
        "import floorguard; print(floorguard.FLOOR_MAP_HASH)",
        FLOORGUARD_FLOOR_MAP=str(site.map),
        FLOORGUARD_TRUSTED_KEYS=str(site.public),
    )
    assert done.stdout.strip() == entries_hash(HIGH)
    assert "is not used" in done.stderr and "the built-in floor map (version 5" in done.stderr
    result = spawn(site)
    assert result["reason"] == "aider 0.57.0 is below the floor 0.60.0 (BSA-0001)"


def test_the_builtin_map_at_the_accepted_version_stands_in_only_if_it_is_that_map(
    site: Site,
) -> None:
    accept(site, HIGH, 5)
    site.host.set_map(map_module(HIGH, version=5))
    _delete_signature(site)
    assert spawn(site)["reason"] == "aider 0.57.0 is below the floor 0.60.0 (BSA-0001)"
    site.host.set_map(map_module(LOW, version=5))  # same version, lower floors
    refused_untrusted(site, spawn(site), "signature")


def test_concurrent_acceptances_never_lower_the_record(site: Site, tmp_path: Path) -> None:
    import subprocess
    import sys

    paths = []
    for version in range(4, 12):
        folder = tmp_path / f"mirror-{version}"
        folder.mkdir()
        path = folder / "floor-map.json"
        data = document({"aider": floor(f"0.{50 + version}.0")}, version)
        path.write_bytes(data)
        Path(str(path) + ".dsse").write_bytes(
            envelope(data, site.key, payload_type=published_map.PAYLOAD_TYPE)
        )
        paths.append(path)
    code = "import floorguard; print(floorguard.FLOOR_MAP_HASH)"
    running = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env=site.host.env(
                FLOORGUARD_FLOOR_MAP=str(path), FLOORGUARD_TRUSTED_KEYS=str(site.public)
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for path in paths
    ]
    for process in running:
        process.communicate(timeout=60)
    assert accepted_record(site)["map_version"] == 11
    # Every older mirror is a rollback now.
    site.map = paths[0]
    refused_untrusted(site, spawn(site), "map_version 4 is lower than version 11")
