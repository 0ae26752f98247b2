"""What `floorctl build` puts into the package, whatever the source holds: no outside file
through a symlink, no editor's lock link, no release the map version cannot follow, the
same bytes whatever the environment. Each through the real CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.release import (
    SHIPPED_FEED,
    SOURCE,
    Built,
    Project,
    build_shipped,
    only,
    raised_feed,
    run_floorctl,
)

pytestmark = pytest.mark.slow

SECRET = "PRIVATE KEY MATERIAL of the release runner"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_shipped(tmp_path_factory.mktemp("build"))


def source_copy(root: Path) -> Path:
    source = root / "source"
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return source


@pytest.mark.parametrize("link", ["floorguard/leak.py", "README.md", "floorguard"])
def test_a_symlink_in_the_source_never_carries_an_outside_file_into_the_package(
    built: Built, tmp_path: Path, link: str
) -> None:
    # The release recipe writes its key to $RUNNER_TEMP; a committed link to it would
    # otherwise be packaged and published.
    secret = tmp_path / "signing.key"
    secret.write_text(SECRET)
    source = source_copy(tmp_path)
    target: Path = secret
    if link == "floorguard":
        target = tmp_path / "elsewhere"
        shutil.move(source / "floorguard", target)
        (target / "leak.py").write_text(SECRET)
    elif link == "README.md":
        (source / link).unlink()
    (source / link).symlink_to(target)
    out = tmp_path / "out"
    done = built.project.build(str(out), built.receipt, "--source", source)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("floorctl: error: ")
    assert "symbolic link" in done.stderr and link in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("link", ["archive", "folder"])
def test_a_symlink_in_the_sources_map_archive_never_carries_an_outside_file_into_the_package(
    built: Built, tmp_path: Path, link: str
) -> None:
    # An archive named for its hash is checked against it, but the rule is the source's:
    # only regular files are packaged, whatever a link leads to.
    source = source_copy(tmp_path)
    maps = source / "floorguard" / "maps"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    archive = sorted(maps.iterdir())[0]
    if link == "archive":
        shutil.move(archive, elsewhere / archive.name)
        archive.symlink_to(elsewhere / archive.name)
        linked = archive
    else:
        shutil.move(maps, elsewhere / "maps")
        maps.symlink_to(elsewhere / "maps")
        linked = maps
    out = tmp_path / "out"
    done = built.project.build(str(out), built.receipt, "--source", source)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("floorctl: error: ")
    assert "symbolic link" in done.stderr and str(linked) in done.stderr
    assert not out.exists()


def test_a_symlink_in_the_modules_map_archive_is_refused(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    receipt = project.refresh(SHIPPED_FEED, "v1")
    shipped = sorted((SOURCE / "floorguard" / "maps").iterdir())[0]
    outside = tmp_path / shipped.name
    shutil.copyfile(shipped, outside)
    archive = project.module.parent / "maps" / shipped.name
    archive.parent.mkdir(exist_ok=True)
    archive.symlink_to(outside)
    done = project.build("dist", receipt)
    assert done.returncode == 1, done.stdout
    assert "symbolic link" in done.stderr and archive.name in done.stderr
    assert not (project.root / "dist").exists()


def test_an_archive_that_is_not_its_maps_canonical_json_is_refused(tmp_path: Path) -> None:
    """An archive holds the map's canonical JSON, which its name is the hash of: the same
    map in other bytes (pretty-printed, here) is someone else's file under that name."""
    import json

    project = Project(tmp_path / "project")
    receipt = project.refresh(SHIPPED_FEED, "v1")
    # (the largest: the empty map's JSON is "{}" however it is printed)
    shipped = max(
        (SOURCE / "floorguard" / "maps").glob("sha256-*.json"), key=lambda p: p.stat().st_size
    )
    archive = project.module.parent / "maps" / shipped.name
    archive.parent.mkdir(exist_ok=True)
    archive.write_text(json.dumps(json.loads(shipped.read_bytes()), indent=2))
    done = project.build("dist", receipt)
    assert done.returncode == 1, done.stdout
    assert "canonical JSON" in done.stderr and archive.name in done.stderr
    assert not (project.root / "dist").exists()


@pytest.mark.parametrize(
    "value", ["[" * 5000 + "]" * 5000, "9" * 5000], ids=["deeply-nested", "5000-digits"]
)
def test_a_source_pyproject_python_cannot_read_is_refused_without_a_traceback(
    built: Built, tmp_path: Path, value: str
) -> None:
    source = source_copy(tmp_path)
    with (source / "pyproject.toml").open("a") as pyproject:
        pyproject.write(f"\n[tool.other]\nx = {value}\n")
    out = tmp_path / "out"
    done = built.project.build(str(out), built.receipt, "--source", source)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("floorctl: error: ") and "Traceback" not in done.stderr
    assert "pyproject.toml: not TOML" in done.stderr
    assert not out.exists()


def test_an_editors_lock_link_in_the_source_neither_breaks_nor_enters_the_build(
    built: Built, tmp_path: Path
) -> None:
    # Emacs keeps .#NAME as a dangling link while a file is edited.
    source = source_copy(tmp_path)
    (source / "floorguard" / ".#floor_map.py").symlink_to("user@host.1234:1700000000")
    out = tmp_path / "out"
    done = built.project.build(str(out), built.receipt, "--source", source)
    assert done.returncode == 0, done.stderr
    assert only(out, "*.whl").read_bytes() == only(built.dist, "*.whl").read_bytes()


@pytest.mark.parametrize("release", ["0.3.0rc1", "0.2.0+local", "0.2.0.post1"])
def test_a_release_the_map_version_cannot_follow_is_refused_before_building(
    built: Built, tmp_path: Path, release: str
) -> None:
    # "0.2.0+local" + ".1" puts the map's version in a local label that indexes refuse;
    # "0.3.0rc1.1" is no PEP 440 version at all (hatchling failed with a traceback tail).
    source = source_copy(tmp_path)
    version_file = source / "floorguard" / "_version.py"
    text = version_file.read_text().replace('RELEASE = "0.2.0"', f'RELEASE = "{release}"')
    version_file.write_text(text)
    out = tmp_path / "out"
    done = built.project.build(str(out), built.receipt, "--source", source)
    assert done.returncode == 1
    assert "not a final release" in done.stderr and release in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_a_source_whose_project_is_not_a_table_is_refused_not_a_traceback(
    built: Built, tmp_path: Path
) -> None:
    source = source_copy(tmp_path)
    (source / "pyproject.toml").write_text('project = "floorguard"\n')
    done = built.project.build(str(tmp_path / "out"), built.receipt, "--source", source)
    assert done.returncode == 1
    assert done.stderr.startswith(f"floorctl: error: {source}: not the floorguard project")
    assert len(done.stderr.splitlines()) == 1


def test_a_receipt_of_the_same_map_at_an_older_version_is_refused(tmp_path: Path) -> None:
    # The map goes A -> B -> A: the first receipt pins A's hash too, but at version 1; the
    # package (version 0.2.0.3) must never claim it.
    project = Project(tmp_path)
    first = project.refresh(SHIPPED_FEED, "a1")
    project.refresh(raised_feed(tmp_path / "b.json", "aider", "0.70.0"), "b2")
    back = project.floorctl(
        "refresh", "--module", "mod/floor_map.py", "--feed", SHIPPED_FEED, "--write",
        "--allow-downgrade", "--receipt-out", "a3.receipt.json", "--signing-key", project.key,
    )  # fmt: skip
    assert back.returncode == 0, back.stderr
    done = project.build("out", first)
    assert done.returncode == 1
    assert "new_map_version is 1, but the module's map is version 3" in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_build_environment_changes_no_byte(built: Built, tmp_path: Path) -> None:
    # Another working folder and absolute paths, another time zone, locale, hash seed,
    # umask, a SOURCE_DATE_EPOCH of its own and hatch's build variables.
    project = built.project
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_floorctl(
        "build", "--source", SOURCE, "--module", project.module, "--receipt", built.receipt,
        "--signing-key", project.key, "--out", out, cwd=elsewhere, state=project.state,
        umask=0o002, TZ="Pacific/Kiritimati", LC_ALL="C.UTF-8", PYTHONHASHSEED="4242",
        SOURCE_DATE_EPOCH="1700000000", HATCH_BUILD_CLEAN="true", HATCH_BUILD_NO_HOOKS="true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for pattern in ("*.whl", "*.tar.gz"):
        assert only(out, pattern).read_bytes() == only(built.dist, pattern).read_bytes(), pattern
