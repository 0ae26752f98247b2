"""The GitHub Actions recipes (examples/github-actions/) against the supply chain: every
action pinned to a commit, the release key never in a job that uploads, and OIDC tokens
only where trusted publishing needs them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "github-actions"
RELEASE = RECIPES / "floor-release.yml"
NAMES = ["floor-release.yml", "floor-refresh.yml"]
# `uses: owner/repo[/path]@<40 hex>  # vX.Y.Z`: a tag can be moved to other code, a commit
# cannot; the comment says which release the commit is.
PINNED = re.compile(r"[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}\s+#\s*v\d+\.\d+\.\d+")
# What puts files where others install them from.
UPLOADERS = ("pypa/gh-action-pypi-publish@",)
UPLOAD_COMMANDS = ("gh release", "twine upload", "gh api")
WRITE_SCOPES = ("write",)


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return document


def uploads(job: dict[str, Any]) -> list[str]:
    found = []
    for step in job["steps"]:
        if str(step.get("uses", "")).startswith(UPLOADERS):
            found.append(step["uses"])
        if any(command in step.get("run", "") for command in UPLOAD_COMMANDS):
            found.append(step.get("name", step["run"]))
    return found


def holds_a_secret(job: dict[str, Any]) -> bool:
    return "secrets." in json.dumps(job)


@pytest.mark.parametrize("name", NAMES)
def test_every_action_is_pinned_to_a_full_commit_sha_with_its_version_beside_it(
    name: str,
) -> None:
    lines = [
        line.split("uses:", 1)[1].strip()
        for line in (RECIPES / name).read_text(encoding="utf-8").splitlines()
        if line.strip().removeprefix("- ").startswith("uses:")
    ]
    assert lines
    assert [line for line in lines if not PINNED.fullmatch(line)] == []


def test_the_job_that_holds_the_release_key_uploads_nothing_and_may_write_nothing() -> None:
    jobs = load(RELEASE)["jobs"]
    holders = [name for name, job in jobs.items() if holds_a_secret(job)]
    assert holders, "the recipe reads its release key from a secret"
    for name in holders:
        assert uploads(jobs[name]) == [], name
        permissions = jobs[name].get("permissions")
        assert isinstance(permissions, dict), f"{name} must state its permissions"
        assert [scope for scope, level in permissions.items() if level != "read"] == [], name
    # The uploads happen, elsewhere, from what the build job handed on.
    uploaders = [name for name, job in jobs.items() if uploads(job)]
    assert uploaders
    for name in uploaders:
        assert "build" in jobs[name]["needs"], name
        steps = [str(step.get("uses", "")) for step in jobs[name]["steps"]]
        assert any(uses.startswith("actions/download-artifact@") for uses in steps), name


def test_what_the_release_key_job_hands_on_is_never_the_runner_temp_where_the_key_is() -> None:
    jobs = load(RELEASE)["jobs"]
    handed = [
        str(step["with"]["path"])
        for job in jobs.values()
        if holds_a_secret(job)
        for step in job["steps"]
        if str(step.get("uses", "")).startswith("actions/upload-artifact@")
    ]
    assert handed
    assert [path for path in handed if "RUNNER_TEMP" in path or "runner.temp" in path] == []


@pytest.mark.parametrize("name", NAMES)
def test_no_recipe_grants_id_tokens_or_writes_to_the_whole_workflow(name: str) -> None:
    document = load(RECIPES / name)
    if name == "floor-refresh.yml":
        # One job, which opens the pull request: its writes are its whole purpose.
        assert "id-token" not in document.get("permissions", {})
        return
    assert document["permissions"] in ({}, {"contents": "read"})


def test_only_the_pypi_job_may_ask_for_an_id_token() -> None:
    jobs = load(RELEASE)["jobs"]
    asking = [n for n, job in jobs.items() if "id-token" in job.get("permissions", {})]
    publishing = [
        n
        for n, job in jobs.items()
        if any(str(s.get("uses", "")).startswith(UPLOADERS) for s in job["steps"])
    ]
    assert asking == publishing == ["pypi"]
    assert jobs["pypi"]["permissions"] == {"id-token": "write"}
    for name, job in jobs.items():
        assert "permissions" in job, f"{name} must state its permissions"
