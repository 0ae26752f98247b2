"""The README's quick start works on a clean copy of the repository, shows what the tool does,
runs again, and CI runs its test command."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env
from helpers.quickstart import REPO, clean_copy, quick_start_commands

INSTALL = "python -m pip install -e ./generated -e ."
# What .ci/run runs verbatim; the README must show exactly this.
TEST_COMMAND = "python -m pip install -e ./generated -e '.[test]' && python -m pytest -n auto"
BIN = Path(sys.executable).parent


def readme_sample_output() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (sample,) = re.findall(r"```text\n(.+?)\n```", section, flags=re.DOTALL)
    return sample.splitlines()


def run_main_job(project: Path, state: Path) -> subprocess.CompletedProcess[str]:
    """The first quick-start command as written, through a shell, after its install step
    (this test's environment already has the checkout installed; installing the copy would
    re-point it)."""
    install_and_run, _ = quick_start_commands()
    install, main_job = install_and_run.split(" && ", 1)
    assert install == INSTALL
    env = isolated_env(state)
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run(
        ["bash", "-c", main_job],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_readme_has_exactly_two_quick_start_commands_each_one_line() -> None:
    install_and_run, install_and_test = quick_start_commands()
    assert "\n" not in install_and_run and "\n" not in install_and_test
    assert install_and_run.startswith(INSTALL + " && ")
    assert install_and_test == TEST_COMMAND


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, install_and_test = quick_start_commands()
    assert install_and_test in (REPO / ".ci" / "run").read_text().splitlines()


def test_the_quick_start_scratch_folder_is_ignored_by_git() -> None:
    install_and_run, _ = quick_start_commands()
    scratch = re.search(r"--module (\S+)/floor_map\.py", install_and_run)
    assert scratch is not None
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", f"{scratch[1]}/floor_map.py"], cwd=REPO, check=False
    )
    assert ignored.returncode == 0, f"{scratch[1]} is not in .gitignore"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_main_job_shows_the_diff_the_verdicts_and_a_signed_receipt_and_runs_again(
    tmp_path: Path,
) -> None:
    project = clean_copy(tmp_path / "clone")
    state = tmp_path / "state"
    shipped = (project / "generated" / "floorguard" / "floor_map.py").read_bytes()

    for run in (1, 2):  # a second run must not fail, and shows the same
        done = run_main_job(project, state)
        assert done.returncode == 0, f"run {run}: {done.stdout}{done.stderr}"
        out = done.stdout
        # The diff: a new map from the shipped feeds, the advisory example and the waiver.
        assert "6 adapters, map version 0 -> 1" in out
        assert "+ aider >= 0.60.0 (BSA-0001) [PyPI] 1 advisory" in out
        # The verdicts it implies: what each advisory refuses, what the waiver lets run.
        assert (
            "+ claude advisory GHSA-exam-ple0-0001: refuses from the start, < 1.4.7; "
            ">= 2.0.0-beta.1, < 2.1.3" in out
        )
        assert "+ aider advisory GHSA-exam-ple0-0002: refuses >= 0.62.0, <= 0.63.1; 0.64.0" in out
        assert (
            "+ claude waiver WVR-0001: lets 2.0.10 run despite GHSA-exam-ple0-0001 "
            "until 2030-06-30T00:00:00.000000Z" in out
        )
        # The signed receipt, written and verified by the chained command.
        assert re.search(r"^receipt \S+/floor_update_receipt\.json \(receipt_id sha256:", out, re.M)
        assert "OK adapter.floor_update_receipt" in out
        assert "development signing key" in done.stderr

    # What the README says it prints is what it prints (``...`` stands for a hash's rest).
    shown = readme_sample_output()
    printed = iter(done.stdout.splitlines())
    for line in shown:
        pattern = re.compile(".*?".join(map(re.escape, line.split("..."))))
        assert any(pattern.fullmatch(p) for p in printed), f"not printed in order: {line}"

    receipt = next(project.glob("*/floor_update_receipt.json"))
    module = receipt.parent / "floor_map.py"
    for cli in ([sys.executable, "-m", "floorguard"], [sys.executable, "-m", "floorctl"]):
        checked = subprocess.run(
            [*cli, "verify", "receipt", str(receipt), "--floor-map", str(module), "--json"],
            cwd=project, env=isolated_env(state), capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr
        assert json.loads(checked.stdout)["floor_map_checked"] is True
    # The shipped module and everything git tracks are left alone.
    assert (project / "generated" / "floorguard" / "floor_map.py").read_bytes() == shipped
    assert not (project / "floor_update_receipt.json").exists()


def test_the_shipped_module_is_what_the_shipped_feed_generates(tmp_path: Path) -> None:
    project = clean_copy(tmp_path / "clone")
    module = project / "generated" / "floorguard" / "floor_map.py"
    shipped = module.read_bytes()
    done = floorctl("refresh", "--check", cwd=project, state=tmp_path)
    assert done.returncode == 0, done.stderr
    assert module.read_bytes() == shipped


def test_quick_start_regenerates_an_emptied_block_identically(tmp_path: Path) -> None:
    project = clean_copy(tmp_path / "clone")
    module = project / "generated" / "floorguard" / "floor_map.py"
    shipped = module.read_text()
    head, rest = shipped.split("# floor-map:begin\n")
    _, tail = rest.split("# floor-map:end\n")
    module.write_text(head + "# floor-map:begin\n# floor-map:end\n" + tail)
    done = floorctl(
        "refresh", "--feed", "feeds/example.v1.json", "--write", cwd=project, state=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "wrote generated/floorguard/floor_map.py" in done.stdout
    assert module.read_text() == shipped
