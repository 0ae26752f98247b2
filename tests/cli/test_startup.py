"""What ``floorctl --help`` and ``floorctl -V`` load: the command table's one-line helps are
copied into floorctl.cli so that the top-level help click lays out imports no command, and
the version is a constant so that -V reads no installed metadata. These tests keep the
copies honest."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from helpers.cli import floorctl, isolated_env

import floorctl as floorctl_package
from floorctl import DISTRIBUTION, cli, launch

HEAVY = {"jsonschema", "jinja2", "cryptography", "httpx"}


# sys.modules as the process exits: -X importtime would miss the modules importlib loads.
REPORT_MODULES = (
    "import atexit, sys\n"
    "atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr))\n"
    "from floorctl.launch import main\n"
    "main()\n"
)


def imported(args: list[str], tmp_path: Path, **extra: str) -> set[str]:
    """The modules ``floorctl ARGS`` has imported when it exits."""
    done = subprocess.run(
        [sys.executable, "-c", REPORT_MODULES, *args],
        cwd=tmp_path,
        env=isolated_env(tmp_path / "state", **extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(done.stderr.split())


@pytest.mark.parametrize("name", sorted(cli._COMMANDS))
def test_the_tables_short_help_is_the_commands_own(name: str) -> None:
    command = cli.cli.get_command(click.Context(cli.cli), name)
    assert command is not None and command.name == name
    own = command.get_short_help_str(limit=1000)
    assert own == cli._COMMANDS[name][2]
    # At any width the help can be laid out in, the stand-in shortens it as click would.
    stand_in = click.Command(name, short_help=cli._COMMANDS[name][2])
    for limit in range(10, 90):
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit)


def test_every_registered_command_is_in_the_table() -> None:
    modules = sorted(
        path.stem
        for path in Path(cli.__file__).with_name("commands").glob("*.py")
        if not path.stem.startswith("_")
    )
    registered = {module.rsplit(".", 1)[1] for module, _, _ in cli._COMMANDS.values()}
    # verify's subcommands live in their own modules, registered by verify itself.
    assert set(modules) - registered == {"verify_log", "verify_provenance", "verify_receipt"}


def test_top_level_help_lists_every_command_with_its_own_short_help(tmp_path: Path) -> None:
    done = floorctl("--help", cwd=tmp_path, state=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("Commands:\n", 1)[1].splitlines()
    for line, name in zip(listed, sorted(cli._COMMANDS), strict=True):
        assert line.split(None, 1) == [name, cli._COMMANDS[name][2]]


def test_top_level_help_imports_no_command(tmp_path: Path) -> None:
    # (on a terminal narrow enough for click to lay it out: at 80 columns and up, and off a
    # terminal, the kept text is printed without click at all: test_top_help.py)
    modules = imported(["--help"], tmp_path, COLUMNS="60")
    assert "floorctl.cli" in modules
    commands = {m for m in modules if m.startswith("floorctl.commands.")}
    # (the shared output and option-type helpers, not commands)
    assert commands == {"floorctl.commands._output", "floorctl.commands._values"}, commands
    assert not {m.split(".")[0] for m in modules} & HEAVY


def test_a_commands_own_help_still_imports_it(tmp_path: Path) -> None:
    assert "floorctl.commands.refresh" in imported(["refresh", "--help"], tmp_path)


def test_version_constant_is_the_installed_distributions(tmp_path: Path) -> None:
    assert floorctl_package.__version__ == version(DISTRIBUTION)


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_a_lone_version_flag_loads_neither_click_nor_metadata(flag: str, tmp_path: Path) -> None:
    modules = imported([flag], tmp_path)
    assert "floorctl.launch" in modules and "floorguard._version" in modules
    assert not {"click", "floorctl.cli", "importlib.metadata"} & modules


@pytest.mark.parametrize("args", [["-V"], ["--version"], ["--config", "absent.toml", "-V"]])
def test_launch_and_the_click_option_print_the_same_line(
    args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as fast:
        launch.main(args)
    via_launch = capsys.readouterr()
    with pytest.raises(SystemExit) as full:
        cli.main(args)
    via_click = capsys.readouterr()
    assert fast.value.code == full.value.code == 0
    assert via_launch == via_click
    assert via_launch.out == f"{floorctl_package.version_line()}\n"
