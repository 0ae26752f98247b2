"""The conventions a newcomer expects of floorctl: -V, usage errors for limits it cannot
honour, complete help texts, shell completion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from helpers.cli import floorctl, isolated_env

from floorctl import DISTRIBUTION, fetch
from floorctl.cli import cli
from floorguard._version import __version__ as floorguard_version
from floorguard.errors import InvalidInput

REPO = Path(__file__).resolve().parents[2]
# The console script: click names the completion variable after the program it runs as.
SCRIPT = Path(sys.executable).with_name("floorctl")


# --- -V / --version -----------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_names_floorctl_and_the_floorguard_it_runs_with(flag: str, tmp_path: Path) -> None:
    done = floorctl(flag, cwd=tmp_path, state=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"floorctl {version(DISTRIBUTION)} (floorguard {floorguard_version})\n"
    assert done.stderr == ""


# --- --max-bytes above the cap ------------------------------------------------------------------

CAP = 16 * 1024 * 1024


@pytest.mark.parametrize("command", ["fetch", "refresh"])
def test_max_bytes_above_the_cap_is_a_usage_error_not_silently_capped(
    command: str, tmp_path: Path
) -> None:
    feed = tmp_path / "feed.json"
    feed.write_bytes((REPO / "feeds" / "example.v1.json").read_bytes())
    target = {"fetch": ["http://127.0.0.1:9/feed.json", "--out", "out.json"]}.get(
        command, ["--feed", str(feed), "--module", str(tmp_path / "absent.py")]
    )
    above = floorctl(command, *target, "--max-bytes", str(CAP + 1), cwd=tmp_path, state=tmp_path)
    assert above.returncode == 2, above.stderr
    assert "--max-bytes" in above.stderr and "16777216" in above.stderr
    assert not (tmp_path / "out.json").exists()


def test_max_bytes_at_the_cap_is_accepted(tmp_path: Path) -> None:
    module = tmp_path / "floor_map.py"
    module.write_bytes((REPO / "generated" / "floorguard" / "floor_map.py").read_bytes())
    done = floorctl(
        "refresh", "--feed", REPO / "feeds" / "example.v1.json", "--module", module,
        "--max-bytes", str(CAP), cwd=tmp_path, state=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_fetch_library_refuses_a_cap_above_the_feed_limit() -> None:
    assert fetch.Limits(max_bytes=CAP).max_bytes == CAP
    with pytest.raises(InvalidInput, match="above the 16,777,216-byte feed limit"):
        fetch.Limits(max_bytes=CAP + 1)


# --- --timeout not a finite number of seconds ---------------------------------------------------

MAX_TIMEOUT = 86_400  # a day: more is a typo, and a deadline no clock arithmetic can overflow


def _feed_target(command: str, tmp_path: Path) -> list[str]:
    feed = tmp_path / "feed.json"
    feed.write_bytes((REPO / "feeds" / "example.v1.json").read_bytes())
    return {"fetch": ["http://127.0.0.1:9/feed.json", "--out", "out.json"]}.get(
        command, ["--feed", str(feed), "--module", str(tmp_path / "absent.py")]
    )


@pytest.mark.parametrize("command", ["fetch", "refresh"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", str(MAX_TIMEOUT + 1)])
def test_a_timeout_that_is_no_finite_number_of_seconds_is_a_usage_error(
    command: str, value: str, tmp_path: Path
) -> None:
    # NaN passes a "> 0" check (every comparison with it is false) and reached the socket.
    done = floorctl(
        command, *_feed_target(command, tmp_path), "--timeout", value, "--json",
        cwd=tmp_path, state=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["exit_status"] == 2
    assert "--timeout" in error["message"] and value in error["message"]
    assert not (tmp_path / "out.json").exists()


def test_a_timeout_of_a_day_is_accepted(tmp_path: Path) -> None:
    # Nothing listens on the discard port: the fetch itself fails (exit 1), not the option.
    done = floorctl(
        "fetch", *_feed_target("fetch", tmp_path), "--timeout", str(MAX_TIMEOUT),
        cwd=tmp_path, state=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "fetch failed" in done.stderr


def test_the_fetch_library_refuses_a_timeout_that_is_no_finite_number() -> None:
    for value in (float("nan"), float("inf"), 0.0, MAX_TIMEOUT + 1.0):
        with pytest.raises(InvalidInput, match="timeout"):
            fetch.Limits(timeout=value)


# --- help texts ---------------------------------------------------------------------------------


def _walk(
    command: click.Command, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, name
            yield from _walk(sub, (*path, name))


COMMANDS = dict(_walk(cli, ()))


def _help(path: tuple[str, ...], tmp_path: Path, columns: int) -> str:
    done = floorctl(*path, "--help", cwd=tmp_path, state=tmp_path, COLUMNS=str(columns))
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "floorctl")
def test_every_help_lists_untruncated_summaries_and_helps_every_option(
    path: tuple[str, ...], tmp_path: Path
) -> None:
    command = COMMANDS[path]
    for columns in (60, 100):  # a narrow terminal leaves click the least room for a summary
        text = _help(path, tmp_path, columns)
        if isinstance(command, click.Group):
            listed = text.split("\nCommands:\n", 1)[1]
            assert "..." not in listed, f"floorctl {' '.join(path)} --help:\n{listed}"
            for name in command.list_commands(click.Context(command)):
                assert f"  {name} " in listed
    assert command.help, f"floorctl {' '.join(path)} has no help"
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"floorctl {' '.join(path)} {param.opts[0]} has no help text"


def test_now_is_described_for_what_each_command_does_with_it(tmp_path: Path) -> None:
    fetch_help = " ".join(_help(("fetch",), tmp_path, 200).split())
    refresh_help = " ".join(_help(("refresh",), tmp_path, 200).split())
    assert "--now TS Reference time for the feed's expiry" in fetch_help
    assert "writes no receipt" in fetch_help and "Recorded in the update receipt" not in fetch_help
    assert "Recorded in the update receipt" in refresh_help


def test_canary_record_help_states_its_choices_once(tmp_path: Path) -> None:
    text = _help(("canary", "record"), tmp_path, 200)
    (line,) = [line for line in text.splitlines() if "--result" in line]
    assert line.count("pass") == 1 and "[fail|pass]" in line


# --- shell completion ---------------------------------------------------------------------------


def _completion(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=isolated_env(tmp_path, **env),
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_for_each_shell_the_docs_name(shell: str, tmp_path: Path) -> None:
    page = (REPO / "docs" / "commands.md").read_text()
    assert f"_FLOORCTL_COMPLETE={shell}_source floorctl" in page
    done = _completion(tmp_path, _FLOORCTL_COMPLETE=f"{shell}_source")
    assert done.returncode == 0, done.stderr
    assert "_FLOORCTL_COMPLETE" in done.stdout and "floorctl" in done.stdout


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [
        ("floorctl ver", "1", {"verify"}),
        ("floorctl verify ", "2", {"chain", "consistency", "inclusion", "provenance", "receipt"}),
        ("floorctl c", "1", {"canary", "chain"}),
        ("floorctl refresh --max", "2", {"--max-bytes"}),
    ],
)
def test_bash_completion_completes_subcommands_and_options(
    words: str, cword: str, expected: set[str], tmp_path: Path
) -> None:
    done = _completion(
        tmp_path, _FLOORCTL_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=cword
    )
    assert done.returncode == 0, done.stderr
    offered = {line.split(",", 1)[1] for line in done.stdout.splitlines()}
    assert offered == expected


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_documented_bash_line_makes_bash_complete_floorctl(tmp_path: Path) -> None:
    # Exactly what docs/commands.md tells a bash user to put in ~/.bashrc, then a completion.
    page = (REPO / "docs" / "commands.md").read_text()
    line = 'eval "$(_FLOORCTL_COMPLETE=bash_source floorctl)"'
    assert line in page
    script = f"{line}\nCOMP_WORDS=(floorctl verify re)\nCOMP_CWORD=2\n"
    script += '_floorctl_completion floorctl\necho "${COMPREPLY[*]}"\ncomplete -p floorctl\n'
    env = isolated_env(tmp_path)
    env["PATH"] = f"{SCRIPT.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    replies, registered = done.stdout.splitlines()
    assert replies == "receipt"
    assert registered.endswith("-F _floorctl_completion floorctl")


@pytest.mark.parametrize(
    ("args", "named", "help_of"),
    [
        (["verify", "chain", "x", "--bogus"], "--bogus", "verify chain"),
        (["verify", "chain", "--bogus"], "SLICE", "verify chain"),
        (["doctor", "--bogus"], "--bogus", "doctor"),
        (["chain", "export", "--bogus"], "--bogus", "chain export"),
        (["exec"], "ADAPTER", "exec"),
    ],
)
def test_a_runtime_usage_error_is_one_line_naming_the_help_to_read(
    tmp_path: Path, args: list[str], named: str, help_of: str
) -> None:
    """As floorctl's: one line on stderr, what is wrong, and which --help says what is
    right (argparse's own error prints its usage block first)."""
    done = subprocess.run(
        [sys.executable, "-m", "floorguard", *args],
        capture_output=True, text=True, cwd=tmp_path, env=isolated_env(tmp_path / "s"),
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"python -m floorguard {help_of}: error: ") and named in line, line
    assert line.endswith(f"(see 'python -m floorguard {help_of} --help')"), line
