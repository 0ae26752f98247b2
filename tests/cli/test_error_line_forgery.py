"""An error or warning is one line: text from a file name, a map or an argument cannot forge
a second ``floorguard: error:`` line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.cli import floorctl, isolated_env

EMPTY_MODULE = '"""host module"""\n\n# floor-map:begin\n# floor-map:end\n'


def feed_v1(**floors: str) -> str:
    adapters = {
        name: {"min_safe_version": value, "advisory_id": "BSA-0001", "note": "n"}
        for name, value in floors.items()
    }
    return json.dumps({"schema_version": 1, "adapters": adapters})


def ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr


FORGED = "floorguard: error: FORGED"


def _forged(stderr: str, prefix: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(prefix + ": error: FORGED")]


def floorguard_cli(
    *args: str | Path, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    # (-I first when given: python's own option, as the docs run exec)
    options = ["-I"] if args[:1] == ("-I",) else []
    return subprocess.run(
        [sys.executable, *options, "-m", "floorguard", *map(str, args[len(options) :])],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_floorguard_verify_receipt_map_mismatch_cannot_forge_a_line(tmp_path: Path) -> None:
    """README: "Error lines escape control characters, so a file name cannot add a line of
    its own." `python -m floorguard verify receipt R --floor-map M` prints its hash
    mismatch with the receipt's name escaped."""
    state = tmp_path / "s"
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    (tmp_path / "other.py").write_text(EMPTY_MODULE)
    (tmp_path / "a.json").write_text(feed_v1(aider="0.60.0"))
    (tmp_path / "b.json").write_text(feed_v1(aider="0.70.0"))
    ok(floorctl("keygen", "--out", "k", cwd=tmp_path, state=state))
    receipt = "r\n" + FORGED + ".json"
    ok(floorctl("refresh", "--feed", "a.json", "--module", "m.py", "--write", "--receipt-out",
                receipt, "--signing-key", "k/signing.key", cwd=tmp_path, state=state))  # fmt: skip
    ok(floorctl("refresh", "--feed", "b.json", "--module", "other.py", "--write", cwd=tmp_path,
                state=state))  # fmt: skip
    done = floorguard_cli(
        "verify", "receipt", receipt, "--pubkey", "k/signing.pub", "--floor-map", "other.py",
        cwd=tmp_path, env=isolated_env(state),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert _forged(done.stderr, "floorguard") == [], done.stderr


def test_floorguard_usage_errors_cannot_forge_a_line(tmp_path: Path) -> None:
    """`python -m floorguard verify chain SLICE EXTRA`: argparse's "unrecognized arguments:
    ..." names the argument (a file name) escaped."""
    done = floorguard_cli(
        "verify", "chain", "slice.jsonl", "x\n" + FORGED, cwd=tmp_path,
        env=isolated_env(tmp_path / "s"),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert _forged(done.stderr, "floorguard") == [], done.stderr


def test_floorctl_warnings_cannot_forge_a_line_from_a_feed_file_name(tmp_path: Path) -> None:
    """README: "a file name cannot add a line of its own". Two feeds that disagree make
    refresh warn, naming each feed file: a feed named "a\nfloorctl: error: ..." must add no
    error line of its own."""
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    (tmp_path / "a.json").write_text(feed_v1(aider="0.60.0"))
    name = "b\nfloorctl: error: FORGED.json"
    (tmp_path / name).write_text(feed_v1(aider="0.70.0"))
    done = floorctl(
        "refresh", "--feed", "a.json", "--feed", name, "--module", "m.py",
        cwd=tmp_path, state=tmp_path / "s",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _forged(done.stderr, "floorctl") == [], done.stderr


def test_the_published_map_fallback_warning_cannot_forge_a_line(tmp_path: Path) -> None:
    """`python -m floorguard exec` (and every host) prints why FLOORGUARD_FLOOR_MAP is not
    used, naming the file: a folder named "x\nfloorguard: error: ..." must forge no line on
    the host's stderr beside exec's "one line"."""
    folder = tmp_path / ("x\n" + FORGED)
    folder.mkdir()
    env = isolated_env(tmp_path / "s", FLOORGUARD_FLOOR_MAP=str(folder / "floor-map.json"))
    done = floorguard_cli("-I", "exec", "true", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert _forged(done.stderr, "floorguard") == [], done.stderr


def test_a_slice_name_cannot_add_a_line_to_the_verdict_report(tmp_path: Path) -> None:
    """The text report of verify chain (both command lines) names the slice in a finding:
    a name holding a newline and ``PROVEN`` stays inside that one line."""
    name = "audit\nPROVEN\nslice.jsonl"
    (tmp_path / name).write_text('{"not": "a record"}\n')
    env = isolated_env(tmp_path / "s")
    for command in (
        [sys.executable, "-m", "floorguard"],
        [sys.executable, "-m", "floorctl"],
    ):
        done = subprocess.run(
            [*command, "verify", "chain", name, "--unauthenticated"],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "NOT PROVEN" and "PROVEN" not in lines[1:], lines
        assert len(lines) == 2 and "audit\\nPROVEN\\nslice.jsonl" in lines[1], lines


def test_report_lines_on_stdout_cannot_forge_a_line_nor_send_escapes(tmp_path: Path) -> None:
    """What a command reports on stdout names files too: a receipt named with a newline
    must not add a line, nor an escape sequence reach the terminal that shows it."""
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    (tmp_path / "a.json").write_text(feed_v1(aider="0.60.0"))
    receipt = "r\nfloorctl: error: FORGED\x1b]0;PWNED\x07.json"
    done = floorctl(
        "refresh", "--feed", "a.json", "--module", "m.py", "--write", "--receipt-out", receipt,
        cwd=tmp_path, state=tmp_path / "s",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / receipt).is_file()
    assert _forged(done.stdout, "floorctl") == [], done.stdout
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout, done.stdout
    [line] = [line for line in done.stdout.splitlines() if line.startswith("receipt ")]
    assert "\\nfloorctl: error: FORGED\\x1b]0;PWNED\\x07.json" in line
    keys = "k\n\x1b[2J"
    done = floorctl("keygen", "--out", keys, cwd=tmp_path, state=tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and len(done.stdout.splitlines()) == 2, done.stdout


def test_a_module_name_cannot_add_a_line_to_the_unified_diff(tmp_path: Path) -> None:
    """``refresh --diff`` heads its diff with the module's name: a name holding a newline (or
    a CI runner's workflow command, or a terminal's control bytes) stays on its header line."""
    name = "m\n::error ::FORGED\r\x07\x9b.py"
    (tmp_path / name).write_text(EMPTY_MODULE)
    (tmp_path / "a.json").write_text(feed_v1(aider="0.60.0"))
    done = floorctl(
        "refresh", "--feed", "a.json", "--module", name, "--diff",
        cwd=tmp_path, state=tmp_path / "s",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith("::error")], done.stdout
    assert not any(c in done.stdout for c in "\r\x07\x9b"), done.stdout
    headers = [line for line in lines if line.startswith(("--- a/", "+++ b/"))]
    assert len(headers) == 2 and all("\\n::error ::FORGED\\r\\x07\\x9b.py" in h for h in headers)


def test_json_documents_escape_what_a_terminal_would_act_on(tmp_path: Path) -> None:
    """A JSON document names files too: DEL, the C1 controls (U+009B starts a terminal's
    control sequence), U+2028 and a bidirectional override are written as ``\\u`` escapes,
    and the document still reads back the name as it is."""
    name = "s\u009b2J\u2028\u202e\x7f.jsonl"
    (tmp_path / name).write_text('{"not": "a record"}\n')
    env = isolated_env(tmp_path / "s")
    for command in ([sys.executable, "-m", "floorguard"], [sys.executable, "-m", "floorctl"]):
        done = subprocess.run(
            [*command, "verify", "chain", name, "--unauthenticated", "--format", "json"],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert not any(c in done.stdout for c in "\u009b\u2028\u202e\x7f"), done.stdout
        assert name in json.dumps(json.loads(done.stdout), ensure_ascii=False)


def test_both_command_lines_print_the_same_json_error_document(tmp_path: Path) -> None:
    """With --json an error is one document whose message is the stderr line (as escaped
    there), from floorctl and python -m floorguard alike, byte for byte."""
    name = "A\x1b[31mB.json"
    (tmp_path / name).write_text("{x")
    env = isolated_env(tmp_path / "s")
    printed = []
    for command in ([sys.executable, "-m", "floorguard"], [sys.executable, "-m", "floorctl"]):
        done = subprocess.run(
            [*command, "verify", "receipt", name, "--json"],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        [line] = done.stderr.splitlines()
        message = json.loads(done.stdout)["error"]["message"]
        assert line.endswith(": error: " + message), (line, message)
        printed.append(done.stdout)
    assert printed[0] == printed[1]


def test_a_slice_named_in_bytes_that_are_not_utf8_is_reported_in_json_by_both(
    tmp_path: Path,
) -> None:
    name = b"s\xff.jsonl"
    (tmp_path / os.fsdecode(name)).write_bytes(b'{"not": "a record"}\n')
    env = isolated_env(tmp_path / "s")
    for command in ([sys.executable, "-m", "floorguard"], [sys.executable, "-m", "floorctl"]):
        done = subprocess.run(
            [*command, "verify", "chain", name, "--unauthenticated", "--json"],
            capture_output=True, cwd=tmp_path, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 1 and b"Traceback" not in done.stderr, done.stderr
        assert json.loads(done.stdout)["proven"] is False
