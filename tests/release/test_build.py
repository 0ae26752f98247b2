"""`floorctl build` and `floorctl verify provenance`, through the real CLI.

The builds run once per module (a build takes about a second) and the tests read what they
wrote: byte-identical rebuilds, the version order of maps, the provenance and each way a
wheel or its provenance can be forged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.release import SHIPPED_FEED, SOURCE, Project, only, payload, raised_feed
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from floorctl.build import distribution_version
from floorguard._version import RELEASE


@dataclass(frozen=True)
class Release:
    project: Project
    receipt_v1: Path
    receipt_v2: Path
    first: Path  # build of map version 1
    second: Path  # the same map, rebuilt elsewhere, later, from a touched source copy
    newer: Path  # map version 2
    newer_stderr: str


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    project = Project(tmp_path_factory.mktemp("release"))
    receipt_v1 = project.refresh(SHIPPED_FEED, "v1")
    done = project.build("dist1", receipt_v1)
    assert done.returncode == 0, done.stderr
    # The same map again: another output folder, another umask, and a copy of the source
    # whose files all have other times, so nothing of the build machine's moment leaks in.
    source = project.root / "source-copy"
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    for path in source.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    done = project.build("dist2", receipt_v1, "--source", source, umask=0o077)
    assert done.returncode == 0, done.stderr
    receipt_v2 = project.refresh(raised_feed(project.root / "v2.json", "aider", "0.70.0"), "v2")
    # Map version 2, signed with the development key (no --signing-key), the module named
    # by its absolute path.
    done = project.floorctl(
        "build", "--source", SOURCE, "--module", project.module, "--receipt", receipt_v2,
        "--receipt-pubkey", project.pub, "--out", "dist3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Release(
        project,
        receipt_v1,
        receipt_v2,
        project.root / "dist1",
        project.root / "dist2",
        project.root / "dist3",
        done.stderr,
    )


def wheel(folder: Path) -> Path:
    return only(folder, "*.whl")


def verify(release: Release, *args: str | Path) -> Any:
    return release.project.floorctl("verify", "provenance", *args)


# --- reproducibility and contents -------------------------------------------------------


def test_two_builds_of_one_map_are_byte_identical(release: Release) -> None:
    for pattern in ("*.whl", "*.tar.gz"):
        first, second = only(release.first, pattern), only(release.second, pattern)
        assert first.name == second.name
        assert first.read_bytes() == second.read_bytes(), pattern


def test_builds_of_different_maps_differ(release: Release) -> None:
    assert wheel(release.first).read_bytes() != wheel(release.newer).read_bytes()


def test_the_wheel_carries_exactly_the_module_and_a_stamped_version(release: Release) -> None:
    with zipfile.ZipFile(wheel(release.newer)) as archive:
        names = archive.namelist()
        carried = archive.read("floorguard/floor_map.py")
        version_file = archive.read("floorguard/_version.py").decode()
        metadata = archive.read("floorguard-0.2.0.2.dist-info/METADATA").decode()
        stamps = {info.date_time for info in archive.infolist()}
    assert carried == release.project.module.read_bytes()
    # The runtime's subpackages too: the chain's stores live in floorguard/chainstore/.
    assert {"floorguard/chainstore/__init__.py", "floorguard/chainstore/sqlite.py",
            "floorguard/chainstore/postgres.py"} <= set(names)  # fmt: skip
    assert f"__version__ = '{RELEASE}.2'" in version_file
    assert "Version: 0.2.0.2" in metadata
    # The map it carries is resolvable from its own archive.
    stated = next(
        line.split('"')[1] for line in carried.decode().splitlines() if "FLOOR_MAP_HASH" in line
    )
    assert f"floorguard/maps/{stated.replace(':', '-')}.json" in names
    # Only the package: no caches, lock or undo files of refresh.
    assert not [n for n in names if "__pycache__" in n or "/." in n or n.endswith(".pyc")]
    assert stamps == {(1980, 1, 1, 0, 0, 0)}


def test_the_sdist_carries_the_same_map(release: Release) -> None:
    with tarfile.open(only(release.newer, "*.tar.gz")) as archive:
        member = archive.extractfile("floorguard-0.2.0.2/floorguard/floor_map.py")
        assert member is not None
        assert member.read() == release.project.module.read_bytes()
        assert {m.mtime for m in archive.getmembers()} == {315532800}


# --- versions ---------------------------------------------------------------------------


def test_a_newer_map_builds_a_higher_version(release: Release) -> None:
    older = wheel(release.first).name.split("-")[1]
    newer = wheel(release.newer).name.split("-")[1]
    assert (older, newer) == (f"{RELEASE}.1", f"{RELEASE}.2")
    assert Version(newer) > Version(older) > Version(RELEASE)


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_distribution_versions_order_as_map_versions(a: int, b: int) -> None:
    left, right = (
        Version(distribution_version(RELEASE, a)),
        Version(distribution_version(RELEASE, b)),
    )
    assert (left < right) == (a < b)
    assert (left == right) == (a == b)


# --- the provenance ---------------------------------------------------------------------


def test_provenance_records_the_map_its_version_and_its_update_receipt(release: Release) -> None:
    built = wheel(release.first)
    statement = payload(built.with_name(built.name + ".provenance.dsse"))
    receipt = json.loads(release.receipt_v1.read_text())
    receipt_statement = json.loads(base64.b64decode(receipt["payload"]))
    predicate = receipt_statement["predicate"]
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [
        {"name": built.name, "digest": {"sha256": hashlib.sha256(built.read_bytes()).hexdigest()}}
    ]
    definition = statement["predicate"]["buildDefinition"]
    assert set(definition) >= {"buildType", "externalParameters", "resolvedDependencies"}
    params = definition["externalParameters"]
    assert params["floor_map_hash"] == predicate["new_floor_map_hash"]
    assert params["map_version"] == 1
    from floorguard._chain.receipts import receipt_id

    assert params["update_receipt_id"] == receipt_id(predicate)
    assert params["module"] == "mod/floor_map.py"
    run = statement["predicate"]["runDetails"]
    assert set(run["builder"]) == {"id"} and set(run["metadata"]) >= {"startedOn", "finishedOn"}


def test_two_builds_write_the_same_predicate_apart_from_the_time(release: Release) -> None:
    first, second = (
        payload(w.with_name(w.name + ".provenance.dsse"))
        for w in (wheel(release.first), wheel(release.second))
    )
    for statement in (first, second):
        del statement["predicate"]["runDetails"]["metadata"]
        # The second build named another source folder: the only input that differs.
        statement["predicate"]["buildDefinition"]["externalParameters"].pop("source")
    assert first == second


def test_provenance_holds_no_path_of_the_build_machine(release: Release) -> None:
    built = wheel(release.newer)
    text = base64.b64decode(
        json.loads(built.with_name(built.name + ".provenance.dsse").read_text())["payload"]
    ).decode()
    assert str(release.project.root) not in text
    assert str(SOURCE) not in text
    params = json.loads(text)["predicate"]["buildDefinition"]["externalParameters"]
    assert params["module"] == "floor_map.py"  # given as an absolute path: its name only


def test_building_with_the_development_key_says_so(release: Release) -> None:
    assert "development signing key" in release.newer_stderr


def test_verify_provenance_accepts_the_built_wheel(release: Release) -> None:
    done = verify(release, wheel(release.first), "--pubkey", release.project.pub, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["verified"] is True
    assert document["wheel"] == wheel(release.first).name
    assert document["map_version"] == 1


def test_verify_provenance_refuses_a_wheel_changed_by_one_byte(
    release: Release, tmp_path: Path
) -> None:
    original = wheel(release.first)
    changed = tmp_path / original.name
    data = bytearray(original.read_bytes())
    data[len(data) // 2] ^= 0x01
    changed.write_bytes(bytes(data))
    done = verify(
        release, changed, "--provenance", f"{original}.provenance.dsse",
        "--pubkey", release.project.pub,
    )  # fmt: skip
    assert done.returncode == 1
    assert "sha256" in done.stderr and "changed after it was built" in done.stderr


def test_verify_provenance_refuses_another_key(release: Release, tmp_path: Path) -> None:
    other = release.project.floorctl("keygen", "--out", tmp_path / "other")
    assert other.returncode == 0
    done = verify(release, wheel(release.first), "--pubkey", tmp_path / "other" / "signing.pub")
    assert done.returncode == 1
    assert "no signature verifies" in done.stderr


def test_verify_provenance_refuses_the_development_keys_provenance_for_the_release_key(
    release: Release,
) -> None:
    done = verify(release, wheel(release.newer), "--pubkey", release.project.pub)
    assert done.returncode == 1


def _tampered(release: Release, tmp_path: Path, change: Any) -> Any:
    original = wheel(release.first)
    copy = tmp_path / original.name
    shutil.copyfile(original, copy)
    envelope = json.loads(Path(f"{original}.provenance.dsse").read_text())
    change(envelope)
    Path(f"{copy}.provenance.dsse").write_text(json.dumps(envelope))
    return verify(release, copy, "--pubkey", release.project.pub)


def _new_payload(envelope: dict[str, Any], edit: Any) -> None:
    statement = json.loads(base64.b64decode(envelope["payload"]))
    edit(statement)
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda e: _new_payload(
                e,
                lambda s: s["predicate"]["buildDefinition"]["externalParameters"].update(
                    map_version=99
                ),
            ),
            id="predicate-edited",
        ),
        pytest.param(lambda e: e.update(payloadType="application/json"), id="payload-type"),
        pytest.param(
            lambda e: e["signatures"][0].update(sig=base64.b64encode(bytes(64)).decode("ascii")),
            id="signature-replaced",
        ),
        pytest.param(lambda e: e.update(signatures=[]), id="signatures-removed"),
    ],
)
def test_verify_provenance_refuses_a_tampered_envelope(
    release: Release, tmp_path: Path, change: Any
) -> None:
    done = _tampered(release, tmp_path, change)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("floorctl: error: ")


def test_verify_provenance_refuses_it_for_a_renamed_wheel(release: Release, tmp_path: Path) -> None:
    original = wheel(release.first)
    renamed = tmp_path / wheel(release.newer).name
    shutil.copyfile(original, renamed)
    done = verify(
        release, renamed, "--provenance", f"{original}.provenance.dsse",
        "--pubkey", release.project.pub,
    )  # fmt: skip
    assert done.returncode == 1
    assert "not this wheel" in done.stderr


def test_verify_provenance_needs_a_pubkey(release: Release) -> None:
    done = verify(release, wheel(release.first))
    assert done.returncode == 2


# --- what build refuses -----------------------------------------------------------------


def test_build_refuses_a_module_whose_data_does_not_match_its_stated_hash(
    release: Release,
) -> None:
    edited = release.project.root / "edited" / "floor_map.py"
    edited.parent.mkdir()
    edited.write_text(
        release.project.module.read_text().replace('"0.70.0"', '"0.10.0"'), encoding="utf-8"
    )
    done = release.project.floorctl(
        "build", "--source", SOURCE, "--module", edited, "--receipt", release.receipt_v2,
        "--signing-key", release.project.key, "--out", "refused-edit",
    )  # fmt: skip
    assert done.returncode == 1
    assert "tampered" in done.stderr and str(edited) in done.stderr
    assert not (release.project.root / "refused-edit").exists()


def test_build_refuses_a_receipt_of_another_map(release: Release) -> None:
    done = release.project.build("refused-receipt", release.receipt_v1)  # the module is v2 now
    assert done.returncode == 1
    assert "new_floor_map_hash" in done.stderr and "not the receipt of this map" in done.stderr
    assert not (release.project.root / "refused-receipt").exists()


def test_build_refuses_a_receipt_signed_by_another_key(release: Release, tmp_path: Path) -> None:
    other = release.project.floorctl("keygen", "--out", tmp_path / "other")
    assert other.returncode == 0
    done = release.project.build(
        "refused-key", release.receipt_v2, "--receipt-pubkey", tmp_path / "other" / "signing.pub"
    )
    assert done.returncode == 1
    assert "not a verified update receipt" in done.stderr


def test_build_refuses_a_receipt_that_is_not_signed(release: Release, tmp_path: Path) -> None:
    unsigned = tmp_path / "receipt.json"
    unsigned.write_text(json.dumps({"receipt": {}}))
    done = release.project.build("refused-unsigned", unsigned)
    assert done.returncode == 1


def test_build_needs_a_receipt(release: Release) -> None:
    done = release.project.floorctl("build", "--out", "refused-usage")
    assert done.returncode == 2
    assert "--receipt" in done.stderr


# --- no read can hang -------------------------------------------------------------------


@pytest.mark.parametrize("what", ["module", "receipt", "source"])
def test_build_refuses_a_fifo_by_name(release: Release, tmp_path: Path, what: str) -> None:
    module, receipt, source = release.project.module, release.receipt_v2, SOURCE
    if what == "source":
        source = tmp_path / "source"
        shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        fifo = source / "floorguard" / "_gate" / "gate.py"
        fifo.unlink()
    else:
        fifo = tmp_path / ("floor_map.py" if what == "module" else "receipt.json")
        module, receipt = (fifo, receipt) if what == "module" else (module, fifo)
    os.mkfifo(fifo)
    done = release.project.floorctl(
        "build", "--source", source, "--module", module, "--receipt", receipt,
        "--signing-key", release.project.key, "--out", tmp_path / "out",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(f"floorctl: error: {fifo}: not a regular file"), done.stderr


@pytest.mark.parametrize("what", ["wheel", "provenance"])
def test_verify_provenance_refuses_a_fifo_by_name(
    release: Release, tmp_path: Path, what: str
) -> None:
    original = wheel(release.first)
    target = tmp_path / original.name
    if what == "wheel":
        shutil.copyfile(f"{original}.provenance.dsse", f"{target}.provenance.dsse")
        fifo = target
    else:
        shutil.copyfile(original, target)
        fifo = Path(f"{target}.provenance.dsse")
    os.mkfifo(fifo)
    done = verify(release, target, "--pubkey", release.project.pub)
    assert done.returncode == 1
    assert done.stderr.startswith(f"floorctl: error: {fifo}: not a regular file"), done.stderr


def test_a_failed_write_leaves_no_wheel_without_its_provenance(release: Release) -> None:
    out = release.project.root / "blocked"
    blocker = out / (wheel(release.newer).name + ".provenance.dsse")
    blocker.mkdir(parents=True)  # a folder where the provenance must go: that write fails
    done = release.project.build("blocked", release.receipt_v2)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("floorctl: error: ")
    assert sorted(p.name for p in out.iterdir()) == [blocker.name]


def test_build_refuses_a_source_that_is_not_the_floorguard_project(
    release: Release, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    done = release.project.build("refused-source", release.receipt_v2, "--source", tmp_path)
    assert done.returncode == 1
    assert "not the floorguard project" in done.stderr
    assert not (release.project.root / "refused-source").exists()
