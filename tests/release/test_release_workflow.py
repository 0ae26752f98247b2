"""The release recipe (examples/github-actions/floor-release.yml), run locally.

Its `run:` steps are taken from the YAML and executed with bash as GitHub runs them
(``bash --noprofile --norc -eo pipefail``), in a temporary copy of the repository's release
inputs, with a generated release key standing in for the secret. The steps that need
GitHub or PyPI are named here and skipped; a step this test does not know fails it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.cli import isolated_env
from helpers.release import REPO, SHIPPED_FEED, SOURCE, payload, raised_feed, run_floorctl

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

WORKFLOW = REPO / "examples" / "github-actions" / "floor-release.yml"
# Steps this machine cannot run: actions from the marketplace, the install (floorctl is
# installed in the test's environment already, and the index is not reachable), the secret,
# and the hand-over to the upload jobs (which need GitHub or PyPI, and never see the key).
NOT_HERE = {
    "Check out": "a marketplace action (the test builds the checkout itself)",
    "Set up Python": "a marketplace action (the test's Python stands in)",
    "Install floorctl": "needs the package index (floorctl is installed here already)",
    "Release key from the secret": "needs GitHub secrets (a generated key stands in)",
    "Hand the distributions on": "actions/upload-artifact: needs GitHub",
    "Hand the release files on": "actions/upload-artifact: needs GitHub",
}
# The jobs after the build: every step needs GitHub or PyPI.
UPLOAD_JOBS = {
    "pypi": ["Take the distributions", "Upload to PyPI"],
    "github-release": [
        "Take the distributions",
        "Take the release files",
        "Attach to the GitHub release",
    ],
}
RUN_HERE = [
    "Find the receipt that pins the map in force",
    "Build the wheel and sdist",
    "Verify the provenance",
    "Publish the signed map",
    "Check the published map as a host would",
]


def load() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return document


def steps() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = load()["jobs"]["build"]["steps"]
    return found


class Checkout:
    """What the workflow's job sees after checkout: generated/, the committed receipts (one
    for the shipped map, one for the newer map in force, as floor-refresh.yml writes them),
    keys/release.pub and keys/floor-receipts.pub."""

    def __init__(self, root: Path) -> None:
        self.root = root / "repo"
        self.state = root / "state"
        self.runner_temp = root / "runner-temp"
        self.runner_temp.mkdir()
        shutil.copytree(SOURCE, self.root / "generated", ignore=shutil.ignore_patterns(
            "__pycache__", ".*"
        ))  # fmt: skip
        done = run_floorctl("keygen", "--out", root / "key", cwd=root, state=self.state)
        assert done.returncode == 0, done.stderr
        self.key = root / "key" / "signing.key"
        done = run_floorctl("keygen", "--out", root / "receipt-key", cwd=root, state=self.state)
        assert done.returncode == 0, done.stderr
        (self.root / "keys").mkdir()
        shutil.copyfile(root / "key" / "signing.pub", self.root / "keys" / "release.pub")
        shutil.copyfile(
            root / "receipt-key" / "signing.pub", self.root / "keys" / "floor-receipts.pub"
        )
        (self.root / "receipts").mkdir()
        # An older receipt (the shipped map) and the one of the map in force: the release
        # must pick the latter.
        for run_id, feed in enumerate(
            (SHIPPED_FEED, raised_feed(root / "feed.json", "aider", "0.70.0")), start=1
        ):
            done = run_floorctl(
                "refresh", "--feed", feed, "--write",
                "--receipt-out", f"receipts/floor-update-{run_id}.json",
                "--signing-key", root / "receipt-key" / "signing.key",
                cwd=self.root, state=self.state,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        self.receipt = self.root / "receipts" / "floor-update-2.json"

    def env(self, job_env: dict[str, str], step_env: dict[str, str]) -> dict[str, str]:
        env = isolated_env(self.state)
        env.update({k: str(v) for k, v in job_env.items()})
        env.update({k: str(v) for k, v in step_env.items()})
        # What GitHub provides, or the secret step would have set.
        env["RUNNER_TEMP"] = str(self.runner_temp)
        env["GITHUB_ENV"] = str(self.runner_temp / "github-env")
        env["GITHUB_OUTPUT"] = str(self.runner_temp / "github-output")
        # What earlier steps appended to $GITHUB_ENV, as GitHub passes it on.
        if (self.runner_temp / "github-env").exists():
            for line in (self.runner_temp / "github-env").read_text().splitlines():
                name, _, value = line.partition("=")
                env[name] = value
        env["FLOORCTL_SIGNING_KEY"] = str(self.key)
        # `floorctl` and `python` are this environment's, as after the install step.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        # A run for the tag of the version the map in force builds (unless a test says).
        env.setdefault("GITHUB_REF_TYPE", "tag")
        env.setdefault("GITHUB_REF_NAME", "floorguard-v0.2.0.2")
        env["BUILDER_ID"] = (
            "https://github.com/example/floorctl/.github/workflows/floor-release.yml@refs/tags/floorguard-v0.2.0.2"
        )
        return env

    def run(
        self, step: dict[str, Any], job_env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            capture_output=True,
            text=True,
            cwd=self.root,
            env=self.env(job_env, step.get("env", {})),
            timeout=300,
            check=False,
        )


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    return Checkout(tmp_path)


def test_every_step_is_run_here_or_named_as_not_runnable() -> None:
    names = [step.get("name") or step["uses"] for step in steps()]
    assert sorted(names) == sorted([*NOT_HERE, *RUN_HERE])
    assert all("run" in step for step in steps() if step.get("name") in RUN_HERE)
    # The expressions only GitHub evaluates are the ones the test stands in for.
    job_env = load()["jobs"]["build"]["env"]
    assert [k for k, v in job_env.items() if "${{" in str(v)] == ["BUILDER_ID"]
    jobs = load()["jobs"]
    assert sorted(jobs) == sorted(["build", *UPLOAD_JOBS])
    for name, expected in UPLOAD_JOBS.items():
        assert [step["name"] for step in jobs[name]["steps"]] == expected


def test_the_release_steps_build_verify_and_publish(checkout: Checkout) -> None:
    job_env = load()["jobs"]["build"]["env"]
    by_name = {step.get("name"): step for step in steps()}
    for name in RUN_HERE:
        done = checkout.run(by_name[name], job_env)
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"
    dist = checkout.root / "dist"
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name for w in wheels] == ["floorguard-0.2.0.2-py3-none-any.whl"]
    assert sorted(p.name for p in dist.iterdir()) == [
        "floorguard-0.2.0.2-py3-none-any.whl",
        "floorguard-0.2.0.2.tar.gz",
    ]
    statement = payload(
        checkout.root / "attestations" / "floorguard-0.2.0.2-py3-none-any.whl.provenance.dsse"
    )
    builder = statement["predicate"]["runDetails"]["builder"]["id"]
    assert builder.startswith("https://github.com/example/floorctl/")
    assert (checkout.root / "published" / "floor-map.json.dsse").is_file()


def test_the_release_builds_with_the_receipt_of_the_map_in_force(checkout: Checkout) -> None:
    job_env = load()["jobs"]["build"]["env"]
    step = {step.get("name"): step for step in steps()}[
        "Find the receipt that pins the map in force"
    ]
    assert checkout.run(step, job_env).returncode == 0
    chosen = (checkout.runner_temp / "github-env").read_text()
    assert chosen == "RECEIPT=receipts/floor-update-2.json\n"
    # ...and the job's output, which names it to the job that attaches it to the release.
    handed = (checkout.runner_temp / "github-output").read_text()
    assert handed == "receipt=receipts/floor-update-2.json\n"


@pytest.mark.parametrize("committed", ["only_an_older_map", "signed_by_another_key"])
def test_the_release_stops_without_a_signed_receipt_for_the_map_in_force(
    checkout: Checkout, committed: str
) -> None:
    job_env = load()["jobs"]["build"]["env"]
    step = {step.get("name"): step for step in steps()}[
        "Find the receipt that pins the map in force"
    ]
    if committed == "only_an_older_map":
        checkout.receipt.unlink()
    else:
        shutil.copyfile(
            checkout.root / "keys" / "release.pub", checkout.root / "keys" / "floor-receipts.pub"
        )
    done = checkout.run(step, job_env)
    assert done.returncode == 1
    assert "no signed update receipt in receipts pins the map in force" in done.stderr
    assert not (checkout.runner_temp / "github-env").exists()


def test_the_verify_step_fails_for_a_changed_wheel(checkout: Checkout) -> None:
    job_env = load()["jobs"]["build"]["env"]
    by_name = {step.get("name"): step for step in steps()}
    assert (
        checkout.run(by_name["Find the receipt that pins the map in force"], job_env).returncode
        == 0
    )
    assert checkout.run(by_name["Build the wheel and sdist"], job_env).returncode == 0
    (wheel,) = (checkout.root / "dist").glob("*.whl")
    data = bytearray(wheel.read_bytes())
    data[-1] ^= 0x01
    wheel.write_bytes(bytes(data))
    done = checkout.run(by_name["Verify the provenance"], job_env)
    assert done.returncode == 1
    assert "changed after it was built" in done.stderr


def test_the_host_check_step_fails_for_a_map_signed_by_another_key(checkout: Checkout) -> None:
    job_env = load()["jobs"]["build"]["env"]
    by_name = {step.get("name"): step for step in steps()}
    other = checkout.root.parent / "other"
    done = run_floorctl("keygen", "--out", other, cwd=checkout.root, state=checkout.state)
    assert done.returncode == 0
    env = dict(job_env)
    step = dict(by_name["Publish the signed map"])
    step["run"] = step["run"] + f" --signing-key {other / 'signing.key'}"
    assert checkout.run(step, env).returncode == 0
    done = checkout.run(by_name["Check the published map as a host would"], env)
    assert done.returncode == 1
    assert "not what a host would use" in done.stderr


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
