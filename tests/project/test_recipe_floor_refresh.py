"""examples/github-actions/floor-refresh.yml, run here: each step's ``run:`` block executed
with bash as GitHub runs it (``shell: bash``: ``bash --noprofile --norc -eo pipefail``), in a
temporary git repository, against a real HTTP server serving a signed feed. The steps only
GitHub can run are named below and skipped; every other step runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from feedserver import FeedServer, envelope, new_key, v2_feed
from helpers.cli import isolated_env

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "github-actions" / "floor-refresh.yml"

# Steps that need GitHub (or the network) and why; the test checks each is in the recipe.
SKIPPED = {
    "Check out": "actions/checkout: the test builds the repository itself",
    "Set up Python": "actions/setup-python: the test's own interpreter runs floorctl",
    "Install floorctl": "pip from the floorguard repository on GitHub: installed here from "
    "this checkout (its refusals of a branch or a non-https URL are tested below)",
    "Open a pull request": "peter-evans/create-pull-request: needs GitHub",
}
CONFIG = """\
[project]
name = "host"

[tool.floorctl]
feeds = ["feeds/upstream.json"]
module = "src/host/floor_map.py"
trusted-keys = "keys/feed-publishers.pem"
"""


def recipe() -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(RECIPE.read_text())
    return loaded


def steps() -> list[dict[str, Any]]:
    (job,) = recipe()["jobs"].values()
    return list(job["steps"])


@pytest.fixture
def server() -> Iterator[FeedServer]:
    running = FeedServer()
    yield running
    running.close()


class Runner:
    """A host repository and what GitHub would give each step: the expressions the recipe
    uses, GITHUB_OUTPUT, GITHUB_RUN_ID and RUNNER_TEMP."""

    def __init__(self, root: Path, server: FeedServer) -> None:
        self.root, self.server = root, server
        self.repo, self.state, self.temp = root / "repo", root / "state", root / "runner-temp"
        self.temp.mkdir(parents=True)
        self.feed_key, _, feed_public = new_key(root / "feed-publisher")
        _, receipt_private, receipt_public = new_key(root / "receipt-signer")
        (self.repo / "keys").mkdir(parents=True)
        (self.repo / "feeds").mkdir()
        (self.repo / "src" / "host").mkdir(parents=True)
        (self.repo / "pyproject.toml").write_text(CONFIG)
        (self.repo / "keys" / "feed-publishers.pem").write_bytes(feed_public.read_bytes())
        (self.repo / "keys" / "floor-receipts.pub").write_bytes(receipt_public.read_bytes())
        (self.repo / "src" / "host" / "floor_map.py").write_text(
            "# floor-map:begin\n# floor-map:end\n"
        )
        self.expressions = {
            "vars.FLOOR_FEED_URL": server.url("/floors/feed.json"),
            "secrets.FLOOR_SIGNING_KEY": receipt_private.read_text(),
        }
        self.git("init", "-q")
        self.commit("host")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
            cwd=self.repo,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def commit(self, message: str) -> None:
        """What merging the pull request does: the proposed changes become the checkout."""
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)

    def publish(self, data: bytes, *, signed: bool = True) -> None:
        self.server.serve("/floors/feed.json", data)
        if signed:
            self.server.serve("/floors/feed.json.dsse", envelope(data, self.feed_key))
        else:
            self.server.routes.pop("/floors/feed.json.dsse", None)

    def env(self, *tables: dict[str, str] | None) -> dict[str, str]:
        env: dict[str, str] = {}
        for table in tables:
            for name, value in (table or {}).items():
                env[name] = re.sub(
                    r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: self.expressions[m[1]], str(value)
                )
        return env

    def run(self, run_id: int) -> tuple[int, dict[str, str], str]:
        """Every step in order until one fails: its status, the outputs, the stderr."""
        (job,) = recipe()["jobs"].values()
        scripts = Path(sys.executable).parent
        outputs: dict[str, str] = {}
        stderr = ""
        for step in job["steps"]:
            if step["name"] in SKIPPED:
                continue
            output = self.temp / f"output-{run_id}-{step.get('id', 'step')}"
            output.write_text("")
            env = isolated_env(
                self.state,
                PATH=f"{scripts}{os.pathsep}{os.environ['PATH']}",
                GITHUB_OUTPUT=str(output),
                GITHUB_RUN_ID=str(run_id),
                RUNNER_TEMP=str(self.temp),
                **self.env(job.get("env"), step.get("env")),
            )
            script = self.temp / "step.sh"
            script.write_text(step["run"])
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self.repo,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            stderr += done.stderr
            assert "Traceback" not in done.stderr
            if "id" in step:
                for line in output.read_text().splitlines():
                    name, _, value = line.partition("=")
                    outputs[name] = value
            if done.returncode != 0:
                return done.returncode, outputs, stderr
        return 0, outputs, stderr


@pytest.fixture
def runner(tmp_path: Path, server: FeedServer) -> Runner:
    return Runner(tmp_path, server)


def test_the_recipe_is_a_scheduled_workflow_whose_skipped_steps_are_only_githubs() -> None:
    workflow = recipe()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["schedule"][0]["cron"]
    assert workflow["defaults"]["run"]["shell"] == "bash"
    names = [step["name"] for step in steps()]
    assert set(SKIPPED) <= set(names)
    for step in steps():
        if step["name"] in SKIPPED:
            continue
        # Everything else is a shell step the test runs, unconditionally, as GitHub would.
        assert "run" in step and "uses" not in step and "if" not in step, step["name"]
        # GitHub values reach the shell through env only (no script injection).
        assert "${{" not in step["run"], step["name"]
    pull_request = next(s for s in steps() if s["name"] == "Open a pull request")
    assert pull_request["if"] == "steps.refresh.outputs.changed == 'true'"
    assert pull_request["with"]["body-path"] == "${{ steps.refresh.outputs.body }}"
    assert pull_request["with"]["add-paths"] == "${{ steps.refresh.outputs.paths }}"


def test_a_new_signed_feed_version_is_proposed_with_the_diff_and_the_receipt(
    runner: Runner,
) -> None:
    runner.publish(v2_feed(1, floor="0.60.0"))
    status, outputs, stderr = runner.run(101)
    assert status == 0, stderr
    assert outputs["changed"] == "true"
    module = runner.repo / "src" / "host" / "floor_map.py"
    assert "0.60.0" in module.read_text()
    receipt = runner.repo / outputs["receipt"]
    assert outputs["receipt"] == "receipts/floor-update-101.json"
    body = Path(outputs["body"]).read_text()
    receipt_id = json.loads(
        subprocess.run(
            [Path(sys.executable).parent / "floorctl", "verify", "receipt", receipt,
             "--pubkey", runner.repo / "keys" / "floor-receipts.pub",
             "--floor-map", module, "--json"],
            capture_output=True, text=True, check=True, env=isolated_env(runner.state),
        ).stdout
    )["receipt_id"]  # fmt: skip
    assert f"receipt_id `{receipt_id}`" in body
    assert "```diff\ndiff --git a/src/host/floor_map.py b/src/host/floor_map.py" in body
    assert re.search(r"^\+.*0\.60\.0", body, re.MULTILINE)
    # What the pull request commits (add-paths): the fetched feed and its signature, the
    # feed state, the module, its archived maps and the receipt; every change but the lock
    # files, and never the signing key.
    proposed = outputs["paths"].split(",")
    assert proposed == [
        "feeds/upstream.json",
        "feeds/upstream.json.dsse",
        "feeds/feeds-state.json",
        "src/host/floor_map.py",
        "src/host/maps",
        "receipts/floor-update-101.json",
    ]
    changed = [
        line[3:]
        for line in runner.git("status", "--porcelain", "--untracked-files=all").splitlines()
    ]
    left_out = [p for p in changed if not any(p == q or p.startswith(f"{q}/") for q in proposed)]
    assert sorted(left_out) == ["feeds/.feeds-state.json.lock", "src/host/.floor_map.py.lock"]
    assert all((runner.repo / path).exists() for path in proposed)
    assert "BEGIN PRIVATE KEY" not in "".join(
        p.read_text(errors="replace")
        for p in runner.repo.rglob("*")
        if p.is_file() and ".git" not in p.parts
    )
    assert not (runner.temp / "floor-signing.key").exists()


def test_an_unchanged_feed_opens_no_pull_request(runner: Runner) -> None:
    runner.publish(v2_feed(1))
    assert runner.run(101)[0] == 0
    runner.commit("merged floor refresh")
    status, outputs, stderr = runner.run(102)
    assert status == 0, stderr
    assert outputs == {"changed": "false"}
    assert not (runner.repo / "receipts" / "floor-update-102.json").exists()
    # Only the feed state's time of acceptance moved; it is not proposed on its own.
    assert runner.git("status", "--porcelain", "--untracked-files=all") == (
        " M feeds/feeds-state.json\n"
    )
    # A newer version with a higher floor is proposed again.
    runner.publish(v2_feed(2, floor="0.61.0"))
    status, outputs, stderr = runner.run(103)
    assert status == 0, stderr
    assert outputs["changed"] == "true"
    assert "-" in Path(outputs["body"]).read_text()


def test_a_rolled_back_feed_fails_the_run_and_changes_nothing(runner: Runner) -> None:
    runner.publish(v2_feed(2, floor="0.61.0"))
    assert runner.run(101)[0] == 0
    runner.commit("merged floor refresh")
    runner.publish(v2_feed(1, floor="0.50.0"))
    status, outputs, stderr = runner.run(102)
    assert status == 1
    assert "floorctl: error: " in stderr
    assert outputs == {}
    assert runner.git("status", "--porcelain") == ""


def test_an_unsigned_feed_fails_the_run_and_changes_nothing(runner: Runner) -> None:
    runner.publish(v2_feed(1), signed=False)
    status, outputs, stderr = runner.run(101)
    assert status == 1
    assert "floorctl: error: " in stderr
    assert outputs == {}
    assert runner.git("status", "--porcelain") == ""


def _install_step(
    tmp_path: Path, python_body: str, repo: str, commit: str
) -> subprocess.CompletedProcess[str]:
    """The recipe's install step run by bash with these variables, and a ``python`` first
    on PATH whose script is ``python_body`` (standing in for pip)."""
    step = next(s for s in steps() if s["name"] == "Install floorctl")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text(f"#!/bin/sh\n{python_body}\n")
    (shim / "python").chmod(0o755)
    env = {"PATH": f"{shim}:/usr/bin:/bin", "FLOORGUARD_REPO": repo, "FLOORGUARD_COMMIT": commit}
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("repo", "commit", "message"),
    [
        ("https://github.com/example/floorguard", "main", "full commit SHA"),
        ("https://github.com/example/floorguard", "v0.2.0", "full commit SHA"),
        ("https://github.com/example/floorguard", "a" * 39, "full commit SHA"),
        ("http://github.com/example/floorguard", "a" * 40, "https URL"),
        ("https://user:token@github.com/example/floorguard", "a" * 40, "https URL"),
        ("", "a" * 40, "https URL"),
        # a fragment or a query would carry the pin out of the URL (pip then installs the
        # default branch, or a subdirectory the variable names)
        ("https://github.com/example/floorguard#", "a" * 40, "https URL"),
        ("https://evil.example/r.git#subdirectory=evil&x=", "a" * 40, "https URL"),
        ("https://github.com/example/floorguard?x=", "a" * 40, "https URL"),
        ("https://github.com/example/floorguard\u00a0--index-url", "a" * 40, "https URL"),
        ("https:///etc/x", "a" * 40, "https URL"),
        ("https://github.com/example/floorguard/../../evil/r", "a" * 40, "https URL"),
        ("https://github.com/example/floorguard\uff20main", "a" * 40, "https URL"),
    ],
)
def test_the_install_step_refuses_a_moving_or_unprotected_source_before_pip_runs(
    tmp_path: Path, repo: str, commit: str, message: str
) -> None:
    # A python on PATH that records being run: the step must stop before it.
    done = _install_step(tmp_path, f"touch {tmp_path / 'ran'}", repo, commit)
    assert done.returncode == 1 and message in done.stderr
    assert not (tmp_path / "ran").exists()


def test_the_install_step_installs_both_distributions_from_the_one_pinned_commit(
    tmp_path: Path,
) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    record = f'printf "%s\\n" "$@" > {tmp_path / "argv"}'
    done = _install_step(tmp_path, record, "https://github.com/example/floorguard", commit)
    assert done.returncode == 0, done.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    source = f"git+https://github.com/example/floorguard@{commit}"
    assert argv == [
        "-m", "pip", "install",
        f"floorguard[verify] @ {source}#subdirectory=generated",
        f"floorguard-floorctl @ {source}",
    ]  # fmt: skip
