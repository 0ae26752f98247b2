"""With --json (or --format json) every failure of either CLI is one JSON error document on
stdout with its exit status, and no traceback: usage errors, unreadable configurations,
stdouts that cannot be written, interrupts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY as mock_any

import pytest
from helpers.cli import floorctl, isolated_env
from helpers.map_site import make_site, no_traceback

pytestmark = pytest.mark.slow


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path)


# --- floorctl publish, refresh and --config -------------------------------------------------------


def test_json_failure_documents(site: Path, tmp_path: Path) -> None:
    state = tmp_path / "s"

    def one_error(done: subprocess.CompletedProcess[str], status: int) -> None:
        no_traceback(done)
        assert done.returncode == status, done.stderr
        assert json.loads(done.stdout) == {"error": {"message": mock_any, "exit_status": status}}

    one_error(
        floorctl(
            "publish", "--out", "o", "--module", "nowhere.py", "--json", cwd=site, state=state
        ),
        1,
    )
    one_error(
        floorctl(
            "refresh", "--feed", "x.json", "--format", "yaml", "--json", cwd=site, state=state
        ),
        2,
    )
    one_error(
        floorctl("publish", "--out", "o", "--format", "sarif", "--json", cwd=site, state=state), 2
    )
    # An unreadable configuration (as root, permissions do not stop a read: a folder, a FIFO).
    (site / "pyproject.toml").mkdir()
    one_error(floorctl("refresh", "--check", "--json", cwd=site, state=state, timeout=30), 2)
    (site / "pyproject.toml").rmdir()
    os.mkfifo(site / "pyproject.toml")
    one_error(floorctl("refresh", "--check", "--json", cwd=site, state=state, timeout=30), 2)
    (site / "broken.toml").write_text("[tool.floorctl\n")
    one_error(
        floorctl("--config", "broken.toml", "refresh", "--check", "--json", cwd=site, state=state),
        2,
    )


REPO = Path(__file__).resolve().parents[2]


def guard(cwd: Path, state: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        cwd=cwd,
        env=isolated_env(state),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ctl(cwd: Path, state: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=cwd, state=state)


TOOLS = {"floorctl": ctl, "floorguard": guard}


# --- JSON error documents -----------------------------------------------------------------------


@pytest.mark.parametrize("json_flag", [["--json"], ["--format", "json"], ["--format=json"]])
@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "--bogus"],
        ["verify", "chain", "slice.jsonl", "--checkpoint", "slice.jsonl"],  # no --pubkey
        ["verify", "chain", "slice.jsonl", "--since", "not-a-time"],
    ],
    ids=["unknown-option", "checkpoint-without-pubkey", "bad-time"],
)
def test_floorguard_usage_error_with_json_still_prints_one_error_document(
    argv: list[str], json_flag: list[str], tmp_path: Path
) -> None:
    # Exit 2 with the document on stdout, as floorctl does (argparse alone prints nothing).
    (tmp_path / "slice.jsonl").write_text("")
    done = guard(tmp_path, tmp_path / "state", *argv, *json_flag)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["exit_status"] == 2
    message = json.loads(done.stdout)["error"]["message"]
    assert f": error: {message}" in done.stderr  # the stderr line, as floorctl's


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("stdout", ["closed-pipe", "full-disk"])
@pytest.mark.parametrize("output", [["--json"], []], ids=["json", "text"])
@pytest.mark.parametrize("tool", TOOLS)
def test_a_stdout_that_cannot_be_written_ends_with_one_error_line_and_no_traceback(
    tool: str, output: list[str], stdout: str, tmp_path: Path
) -> None:
    # A BrokenPipeError (python -m floorguard) or ENOSPC (both CLIs, where the JSON error
    # document fails as well) must not end in a traceback.
    command = [sys.executable, "-m", tool, "doctor", *output]
    env = isolated_env(tmp_path / "state", PATH=str(tmp_path))
    if stdout == "closed-pipe":
        read_end, target = os.pipe()
        os.close(read_end)
    else:
        target = os.open("/dev/full", os.O_WRONLY)
    try:
        done = subprocess.run(command, stdout=target, stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path, env=env, timeout=120, check=False)  # fmt: skip
    finally:
        os.close(target)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "Exception ignored" not in done.stderr
    # At most one line (click ends a closed pipe silently, as `head` readers expect).
    lines = done.stderr.splitlines()
    assert len(lines) <= 1 and all(line.startswith(f"{tool}: error: ") for line in lines)
    if stdout == "full-disk":
        assert lines


# --- one JSON document on stdout ----------------------------------------------------------------


def test_refresh_diff_with_json_keeps_stdout_one_json_document(tmp_path: Path) -> None:
    # The unified diff goes inside the JSON document, never after it on stdout.
    module = tmp_path / "floor_map.py"
    module.write_bytes((REPO / "generated" / "floorguard" / "floor_map.py").read_bytes())
    feed = tmp_path / "feed.json"
    text = (REPO / "feeds" / "example.v1.json").read_text()
    feed.write_text(text.replace('"min_safe_version": "0.60.0"', '"min_safe_version": "0.65.0"'))
    done = ctl(tmp_path, tmp_path / "state", "refresh", "--feed", feed, "--module", module,
               "--diff", "--check", "--json")  # fmt: skip
    assert done.returncode == 1, done.stderr  # stale
    document = json.loads(done.stdout)
    assert document["stale"] is True
    assert '+        "min_safe_version": "0.65.0",' in document["module_diff"].splitlines()


# A job a non-interactive shell starts in the background (`cmd &`, as CI runners and
# nohup-style launchers do) inherits SIGINT ignored, and Python then installs no
# KeyboardInterrupt handler: the command would rightly go on. The interrupt this test sends
# is a terminal's, to a command started with SIGINT at its default (kept across exec).
_SIGINT_BY_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


@pytest.mark.parametrize("program", ["floorctl", "floorguard"])
def test_an_interrupt_with_json_prints_one_error_document_and_no_traceback(
    program: str, tmp_path: Path
) -> None:
    # A KeyboardInterrupt ends in one error document, not a traceback and no document.
    command = [sys.executable, "-c", _SIGINT_BY_DEFAULT, "-m", program, "verify", "chain", "-",
               "--unauthenticated", "--json"]  # fmt: skip
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                          env=isolated_env(tmp_path / "state")) as child:  # fmt: skip
        assert child.stderr is not None and child.stdout is not None
        # The notice is printed once the command runs: it is then waiting on stdin.
        assert "MACs not checked" in child.stderr.readline()
        # Ended by the signal alone, stdin still open (communicate() would close it, and an
        # end of input would end the command another way).
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert "Traceback" not in err
    assert f"{program}: aborted" in err
    assert json.loads(out) == {"error": {"message": "aborted", "exit_status": 1}}
