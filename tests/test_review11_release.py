"""Review of issue 11's release path: attacks on `floorctl build`, `verify provenance`, the
`[tool.floorctl]` configuration and the release recipe, each through the real CLI (or the
recipe's real shell step). Each test is named after the attack it stops."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.cli import floorctl
from helpers.release import (
    SHIPPED_FEED,
    SOURCE,
    Project,
    only,
    payload,
    raised_feed,
    run_floorctl,
)
from test_release_workflow import Checkout, load, steps

from floorguard import dsse
from floorguard._canonical import canonical_bytes

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

SECRET = "PRIVATE KEY MATERIAL of the release runner"
PASSWORD = "s3cret-feed-password"


@dataclass(frozen=True)
class Built:
    project: Project
    receipt: Path
    dist: Path  # built from the project root with relative paths, umask 022


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    project = Project(tmp_path_factory.mktemp("review11"))
    receipt = project.refresh(SHIPPED_FEED, "v1")
    done = project.build("dist", receipt)
    assert done.returncode == 0, done.stderr
    return Built(project, receipt, project.root / "dist")


def source_copy(root: Path) -> Path:
    source = root / "source"
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return source


# --- build: what gets into the package -------------------------------------------------


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


# --- verify provenance: statements the key signed but floorctl never writes -----------


def _key(project: Project) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(project.key.read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    return key


def _append(raw: bytes, member: bytes) -> bytes:
    return raw[:-1] + b"," + member + b"}"


def _two_subjects(statement: dict[str, Any]) -> bytes:
    statement["subject"].append({"name": "other.whl", "digest": {"sha256": "0" * 64}})
    return canonical_bytes(statement)


def _sha512_only(statement: dict[str, Any]) -> bytes:
    statement["subject"][0]["digest"] = {"sha512": "ab" * 64}
    return canonical_bytes(statement)


def _builder_object(statement: dict[str, Any]) -> bytes:
    statement["predicate"]["runDetails"]["builder"]["id"] = {"id": "urn:x"}
    return canonical_bytes(statement)


FORGERIES: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "two-subjects": _two_subjects,
    "sha512-only": _sha512_only,
    "duplicate-key": lambda s: _append(canonical_bytes(s), b'"_type":"x"'),
    "not-canonical": lambda s: json.dumps(s, indent=1).encode(),
    "nan": lambda s: _append(canonical_bytes(s), b'"zz":NaN'),
    "huge-integer": lambda s: _append(canonical_bytes(s), b'"zz":' + b"9" * 30),
    "builder-id-object": _builder_object,
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_statement_the_key_signed_but_floorctl_never_writes_is_refused_naming_it(
    built: Built, tmp_path: Path, forgery: str
) -> None:
    wheel = only(built.dist, "*.whl")
    statement = payload(Path(f"{wheel}.provenance.dsse"))
    raw = FORGERIES[forgery](copy.deepcopy(statement))
    envelope = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, raw, _key(built.project))
    forged = tmp_path / "forged.dsse"
    forged.write_bytes(envelope.to_bytes())
    done = built.project.floorctl(
        "verify", "provenance", wheel, "--provenance", forged, "--pubkey", built.project.pub
    )
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"floorctl: error: {forged}: "), done.stderr
    assert len(done.stderr.splitlines()) == 1


# --- the release recipe ------------------------------------------------------------------


def test_the_release_recipe_refuses_a_receipt_name_that_would_set_variables_for_later_steps(
    tmp_path: Path,
) -> None:
    # A copy of the valid receipt whose name carries newlines: written to $GITHUB_ENV as it
    # was, it set BASH_ENV (a committed script sourced by every later step, which holds the
    # release key and the upload token).
    checkout = Checkout(tmp_path)
    (checkout.root / "evil.sh").write_text("echo owned > owned.txt\n")
    hostile = checkout.root / "receipts" / "z\nBASH_ENV=evil.sh\nX=y.json"
    shutil.copyfile(checkout.receipt, hostile)
    step = {step.get("name"): step for step in steps()}[
        "Find the receipt that pins the map in force"
    ]
    done = checkout.run(step, load()["jobs"]["build"]["env"])
    assert done.returncode == 1
    assert "holds characters other than" in done.stderr
    assert not (checkout.runner_temp / "github-env").exists()


def test_the_release_recipe_with_no_receipt_at_all_says_so(tmp_path: Path) -> None:
    # The unmatched glob is the literal "receipts/*.json": not a hostile name.
    checkout = Checkout(tmp_path)
    for receipt in (checkout.root / "receipts").iterdir():
        receipt.unlink()
    step = {step.get("name"): step for step in steps()}[
        "Find the receipt that pins the map in force"
    ]
    done = checkout.run(step, load()["jobs"]["build"]["env"])
    assert done.returncode == 1
    assert "no signed update receipt in receipts pins the map in force" in done.stderr


@pytest.mark.parametrize(
    ("ref_type", "ref_name"),
    [("tag", "floorguard-v0.2.0.1"), ("branch", "main"), ("tag", "floorguard-v0.2.0.2x")],
)
def test_the_release_recipe_stops_when_the_tag_names_another_version_than_it_built(
    tmp_path: Path, ref_type: str, ref_name: str
) -> None:
    # The wheel is uploaded to PyPI, then the GitHub release is made for the tag: a tag for
    # another version named the release wrongly, a branch run failed only after the upload.
    checkout = Checkout(tmp_path)
    job_env = {**load()["jobs"]["build"]["env"], "GITHUB_REF_TYPE": ref_type}
    job_env["GITHUB_REF_NAME"] = ref_name
    by_name = {step.get("name"): step for step in steps()}
    assert (
        checkout.run(by_name["Find the receipt that pins the map in force"], job_env).returncode
        == 0
    )
    done = checkout.run(by_name["Build the wheel and sdist"], job_env)
    assert done.returncode == 1
    assert "run this workflow for the tag floorguard-v0.2.0.2" in done.stderr
    assert not (checkout.root / "attestations").exists()


def test_no_github_expression_is_spliced_into_the_release_recipes_shell() -> None:
    # ${{ ... }} in run: is pasted into the script before bash sees it (a tag or ref name
    # could run commands); values reach the shell through env only. (floor-refresh.yml's
    # own test checks the same.)
    document = load()
    scripts = [
        step["run"] for job in document["jobs"].values() for step in job["steps"] if "run" in step
    ]
    assert scripts
    assert not [script for script in scripts if "${{" in script]


# --- configuration -----------------------------------------------------------------------


def _project_with_url_feed(root: Path) -> Path:
    (root / "mod").mkdir(parents=True)
    shutil.copyfile(SOURCE / "floorguard" / "floor_map.py", root / "mod" / "floor_map.py")
    (root / "pyproject.toml").write_text(
        "[tool.floorctl]\n"
        f'feeds = ["https://reader:{PASSWORD}@feeds.example.org/floors.json"]\n'
        'module = "mod/floor_map.py"\n'
    )
    return root


def test_a_configured_feed_url_with_credentials_is_refused_without_repeating_them(
    tmp_path: Path,
) -> None:
    root = _project_with_url_feed(tmp_path / "project")
    done = floorctl("refresh", "--check", cwd=root, state=tmp_path / "state")
    assert done.returncode == 2
    assert "feeds[0] is a URL with credentials" in done.stderr
    assert PASSWORD not in done.stderr + done.stdout


def test_a_feed_flag_with_credentials_is_refused_without_repeating_them(tmp_path: Path) -> None:
    done = floorctl(
        "refresh", "--feed", "https://reader:hunter2@feeds.example.org/f.json",
        "--module", SOURCE / "floorguard" / "floor_map.py",
        cwd=tmp_path, state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 1
    assert "credentials in URLs are not supported" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert "https://feeds.example.org/f.json" in done.stderr


def test_a_fifo_as_the_nearest_pyproject_is_a_usage_error_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pyproject.toml")
    done = floorctl("refresh", "--check", cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2
    assert "pyproject.toml: not a regular file" in done.stderr


@pytest.mark.parametrize("args", [("refresh", "--help"), ("chain", "checkpoint", "-h")])
def test_a_broken_configuration_never_hides_the_help_that_explains_it(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.floorctl]\nbogus = 1\n")
    done = floorctl(*args, cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: floorctl {' '.join(args[:-1])} [OPTIONS]")
    # Without help the same configuration is still refused.
    done = floorctl(*args[:-1], cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2
    assert "unknown key 'bogus'" in done.stderr


def test_the_pre_commit_hook_leaves_no_file_in_the_repository(
    tmp_path: Path,
) -> None:
    # The hook's documentation: it reads, never writes (a host repository ignores nothing).
    from test_pre_commit_hook import git, run_hook

    repo = tmp_path / "repo"
    (repo / "mod").mkdir(parents=True)
    shutil.copyfile(SOURCE / "floorguard" / "floor_map.py", repo / "mod" / "floor_map.py")
    shutil.copyfile(SHIPPED_FEED, repo / "feed.json")
    (repo / "pyproject.toml").write_text(
        '[tool.floorctl]\nfeeds = ["feed.json"]\nmodule = "mod/floor_map.py"\n'
    )
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "host")
    done = run_hook(repo, tmp_path / "state")
    assert done.returncode == 0, done.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert status.stdout == ""
