"""``floorctl --help`` is answered without click where click would write the kept text
(floorctl._top_help), and that text is exactly what click writes; narrower terminals get
click's own layout. If the CLI's options or commands change, renew the text with
``COLUMNS=200 python -c "from floorctl.cli import main; main(['--help'])"`` into
``TOP_HELP``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import isolated_env

from floorctl._top_help import TOP_HELP

BY_CLICK = "from floorctl.cli import main; main(['--help'])"


def _run(argv: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = isolated_env(tmp_path / "state", **extra)
    env.pop("COLUMNS", None)
    env.update(extra)
    return subprocess.run(
        [sys.executable, *argv], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("columns", [None, "80", "200"], ids=["not-a-terminal", "80", "200"])
def test_the_kept_help_is_what_click_writes_at_its_widest(
    tmp_path: Path, columns: str | None
) -> None:
    extra = {} if columns is None else {"COLUMNS": columns}
    by_click = _run(["-c", BY_CLICK], tmp_path, **extra)
    assert by_click.returncode == 0, by_click.stderr
    assert by_click.stdout == TOP_HELP


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_a_lone_help_flag_prints_it_without_loading_click(tmp_path: Path, flag: str) -> None:
    code = (
        "import sys; sys.argv = ['floorctl', sys.argv[1]]\n"
        "from floorctl.launch import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print('click' in sys.modules, file=sys.stderr)\n"
    )
    done = _run(["-c", code, flag], tmp_path)
    assert done.returncode == 0 and done.stdout == TOP_HELP
    assert done.stderr.strip() == "False"


def test_a_narrow_terminal_gets_clicks_own_layout(tmp_path: Path) -> None:
    ours = _run(["-m", "floorctl", "--help"], tmp_path, COLUMNS="60")
    by_click = _run(["-c", BY_CLICK], tmp_path, COLUMNS="60")
    assert ours.returncode == by_click.returncode == 0
    assert ours.stdout == by_click.stdout != TOP_HELP
