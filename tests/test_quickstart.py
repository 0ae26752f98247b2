"""The README's quick start works on a clean copy of the repository, and CI runs its tests."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from helpers.cli import floorctl

REPO = Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def clean_copy(destination: Path) -> Path:
    """The files git tracks, as a fresh clone would have them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source, target = REPO / name.decode(), destination / name.decode()
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)
    return destination


def test_readme_has_exactly_two_quick_start_commands() -> None:
    install_and_run, install_and_test = quick_start_commands()
    assert install_and_run.startswith("python -m pip install")
    assert "floorctl refresh --feed feeds/example.v1.json --write --receipt-out" in install_and_run
    assert install_and_test.endswith("python -m pytest -n auto")


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, install_and_test = quick_start_commands()
    assert install_and_test in (REPO / ".ci" / "run").read_text().splitlines()


def test_quick_start_main_job_on_a_clean_copy(tmp_path: Path) -> None:
    project = clean_copy(tmp_path / "clone")
    state = tmp_path / "state"
    install_and_run, _ = quick_start_commands()
    main_job = shlex.split(install_and_run.split(" && ", 1)[1])
    assert main_job[0] == "floorctl"
    module = project / "generated" / "floorguard" / "floor_map.py"
    shipped = module.read_bytes()

    done = floorctl(*main_job[1:], cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    assert "6 adapters" in done.stdout
    assert "receipt floor_update_receipt.json" in done.stdout
    # The shipped module is what the tool generates from the shipped feed: nothing to change.
    assert module.read_bytes() == shipped
    verified = floorctl(
        "verify", "receipt", "floor_update_receipt.json", "--floor-map", module,
        "--json", cwd=project, state=state,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["floor_map_checked"] is True


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
