"""Attacks on issue 11's daily-use conventions (review 2): the signature ignored when no key
is trusted, JSON error documents of both CLIs, SARIF and Markdown of a NOT PROVEN chain.
Each test is named after the attack it stops."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from feedserver import v2_feed
from helpers.cli import floorctl, isolated_env
from helpers.proof_support import MAP_V1, SPAWN, UPDATE, build, spawn_receipt, update_receipt
from helpers.sarif import assert_valid_sarif
from hosts import write_script

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)

REPO = Path(__file__).resolve().parents[1]


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


# --- a present signature, no trusted key ------------------------------------------------------


@pytest.fixture
def signed_feed(tmp_path: Path) -> Path:
    """The shipped feed signed by a key that nothing trusts yet (keys in tmp_path/a)."""
    state = tmp_path / "state"
    assert ctl(tmp_path, state, "keygen", "--out", "a").returncode == 0
    feed = tmp_path / "feed.json"
    feed.write_bytes((REPO / "feeds" / "example.v1.json").read_bytes())
    done = ctl(tmp_path, state, "sign", feed, "--signing-key", "a/signing.key")
    assert done.returncode == 0, done.stderr
    return feed


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_installed_trusted_keys_left_as_a_broken_link_are_an_error_not_no_trust(
    link: str, tmp_path: Path, signed_feed: Path
) -> None:
    # Before: Path.exists() said False for a broken link where `trust rotate` keeps the
    # keys, so nothing was trusted and the signed feed was used unchecked (exit 0).
    state = tmp_path / "state"
    installed = state / "floorctl" / "trusted-keys.json"
    installed.parent.mkdir(parents=True, exist_ok=True)
    installed.symlink_to(tmp_path / "gone.json" if link == "dangling" else installed.name)
    done = ctl(tmp_path, state, "refresh", "--feed", signed_feed, "--json")
    assert done.returncode == 1, done.stdout
    assert "trusted-keys.json" in done.stderr
    assert "signature not checked" not in done.stderr
    assert json.loads(done.stdout)["error"]["exit_status"] == 1


def test_keys_installed_by_trust_rotate_still_judge_a_present_signature(
    tmp_path: Path, signed_feed: Path
) -> None:
    state = tmp_path / "state"
    assert ctl(tmp_path, state, "keygen", "--out", "b").returncode == 0
    # Rotate from a to b: b's key is installed, a's no longer trusted.
    done = ctl(tmp_path, state, "sign", "b/signing.pub", "--kind", "trusted-keys",
               "--signing-key", "a/signing.key")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = ctl(tmp_path, state, "trust", "rotate", "--current", "a/signing.pub",
               "--new", "b/signing.pub")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = ctl(tmp_path, state, "refresh", "--feed", signed_feed)
    assert done.returncode == 1
    assert "bad signature" in done.stderr
    assert "signature not checked" not in done.stderr


@pytest.mark.parametrize("content", ["", '{"threshold": 1, "keys": []}'], ids=["empty", "no-keys"])
def test_a_configured_but_empty_trusted_keys_file_is_an_error_not_no_trust(
    content: str, tmp_path: Path, signed_feed: Path
) -> None:
    (tmp_path / "trusted.json").write_text(content)
    (tmp_path / "pyproject.toml").write_text('[tool.floorctl]\ntrusted-keys = "trusted.json"\n')
    done = ctl(tmp_path, tmp_path / "state", "refresh", "--feed", signed_feed)
    assert done.returncode == 1
    assert "trusted.json" in done.stderr
    assert "signature not checked" not in done.stderr


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
    # Before: argparse exited 2 with nothing on stdout, unlike floorctl.
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
    # Before: a BrokenPipeError (python -m floorguard) or ENOSPC (both CLIs, where the JSON
    # error document then failed as well) ended in a traceback.
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


# --- NOT PROVEN in SARIF and Markdown ---------------------------------------------------------


@pytest.fixture
def permitted_slice(tmp_path: Path) -> Path:
    built = build(
        tmp_path / "chain",
        [
            (UPDATE, update_receipt(MAP_V1)),
            (SPAWN, spawn_receipt("aider", "0.61.0", "permit")),
            (SPAWN, spawn_receipt("aider", "0.62.0", "permit")),
        ],
    )
    (tmp_path / "slice.jsonl").write_text("".join(built.lines()))
    (tmp_path / "tail.jsonl").write_text("".join(built.lines()[1:]))
    return tmp_path


@pytest.mark.parametrize(
    ("slice_name", "extra", "said"),
    [
        ("slice.jsonl", [], "unauthenticated"),
        ("tail.jsonl", ["--key-file", "chain/chain.key"], "missing"),
    ],
    ids=["no-key", "missing-genesis"],
)
def test_a_not_proven_chain_never_yields_a_sarif_log_without_results(
    slice_name: str, extra: list[str], said: str, permitted_slice: Path
) -> None:
    # Code scanning reads a log with no results as "all clear": NOT PROVEN must carry one.
    outputs = []
    for run in TOOLS.values():
        done = run(permitted_slice, permitted_slice / "state", "verify", "chain", slice_name,
                   *extra, "--format", "sarif")  # fmt: skip
        assert done.returncode == 1, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    log = json.loads(outputs[0])
    assert_valid_sarif(log)
    run_ = log["runs"][0]
    assert run_["properties"]["verdict"] == "NOT PROVEN"
    assert run_["invocations"][0]["exitCode"] == 1
    assert run_["results"]
    assert all(r["level"] == "error" for r in run_["results"])
    assert said in json.dumps(run_["results"])


def test_a_hostile_requested_name_adds_no_row_link_or_html_to_the_markdown(
    tmp_path: Path,
) -> None:
    hostile = "x | 0 | ok |\n| [pwn](javascript:alert(1)) <img src=x> `code`"
    receipt = spawn_receipt("aider", "0.50.0", "permit")  # below the floor: a violation
    receipt["requested"] = hostile
    built = build(tmp_path / "chain", [(UPDATE, update_receipt(MAP_V1)), (SPAWN, receipt)])
    (tmp_path / "slice.jsonl").write_text("".join(built.lines()))
    for run in TOOLS.values():
        done = run(tmp_path, tmp_path / "state", "verify", "chain", "slice.jsonl",
                   "--key-file", "chain/chain.key", "--format", "markdown")  # fmt: skip
        assert done.returncode == 1, done.stderr
        rows = [line for line in done.stdout.splitlines() if line.startswith("|")]
        assert len(rows) == 3, done.stdout  # header, rule, the one finding
        finding = rows[2]
        # Every | inside the cell is escaped: the row keeps exactly its 4 cell borders.
        assert finding.replace("\\|", "").count("|") == 4, finding
        # No link, tag or code span survives unescaped.
        assert re.search(r"(?<!\\)[\[\]<>`]", finding) is None, finding


# --- doctor: ahead_of_last_green in SARIF -------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["warning", "strict"])
def test_doctor_sarif_exit_code_is_the_doctors_own_for_a_warning(
    strict: bool, tmp_path: Path
) -> None:
    # Before: invocations[0].exitCode was 1 for any result, so a log whose doctor exited 0
    # (ahead_of_last_green is a warning) claimed a failed run.
    state = tmp_path / "state"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir / "aider", "echo 'aider 0.90.0'")
    done = ctl(tmp_path, state, "canary", "record", "--adapter", "aider", "--version", "0.86.0",
               "--result", "pass")  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    outputs = []
    for program in ("floorctl", "floorguard"):
        command = [sys.executable, "-m", program, "doctor", "--format", "sarif"]
        done = subprocess.run([*command, *(["--strict"] if strict else [])],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env=isolated_env(state, PATH=path), check=False)  # fmt: skip
        assert done.returncode == (1 if strict else 0), done.stderr
        log = json.loads(done.stdout)
        assert_valid_sarif(log)
        run_ = log["runs"][0]
        assert [r["ruleId"] for r in run_["results"]] == ["FG004"]
        assert run_["invocations"][0]["exitCode"] == done.returncode
        outputs.append(run_["invocations"])
    assert outputs[0] == outputs[1]


# --- one JSON document on stdout ----------------------------------------------------------------


def test_refresh_diff_with_json_keeps_stdout_one_json_document(tmp_path: Path) -> None:
    # Before: the unified diff was printed after the JSON document, so stdout was no JSON.
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


@pytest.mark.parametrize("program", ["floorctl", "floorguard"])
def test_an_interrupt_with_json_prints_one_error_document_and_no_traceback(
    program: str, tmp_path: Path
) -> None:
    # Before: python -m floorguard died of KeyboardInterrupt with a traceback, no document.
    command = [sys.executable, "-m", program, "verify", "chain", "-", "--unauthenticated",
               "--json"]  # fmt: skip
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                          env=isolated_env(tmp_path / "state")) as child:  # fmt: skip
        assert child.stderr is not None and child.stdout is not None
        # The notice is printed once the command runs: it is then waiting on stdin.
        assert "MACs not checked" in child.stderr.readline()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert "Traceback" not in err
    assert f"{program}: aborted" in err
    assert json.loads(out) == {"error": {"message": "aborted", "exit_status": 1}}


def test_a_slice_name_with_uri_delimiters_is_percent_encoded_in_the_sarif_location(
    permitted_slice: Path,
) -> None:
    # Before: "slice #1?.jsonl" went in as is: a code-scanning service reads "slice " and
    # a fragment, so the alert pointed at another (or no) file.
    name = "slice #1?%.jsonl"
    (permitted_slice / name).write_bytes((permitted_slice / "slice.jsonl").read_bytes())
    outputs = []
    for run in TOOLS.values():
        done = run(permitted_slice, permitted_slice / "state", "verify", "chain", name,
                   "--format", "sarif")  # fmt: skip
        assert done.returncode == 1, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    result = json.loads(outputs[0])["runs"][0]["results"][0]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "slice%20%231%3F%25.jsonl"
    assert urllib.parse.unquote(uri) == name


# --- a state file that remembers a signed feed ------------------------------------------------


@pytest.mark.parametrize("stripped", ["no-trusted-keys", "signature-deleted"])
def test_a_feed_accepted_signed_cannot_come_back_unsigned_through_the_state_file(
    stripped: str, tmp_path: Path
) -> None:
    # Before: with no key trusted a present signature is ignored, so a run without
    # --trusted-keys (or a copy whose .dsse was deleted) took the next version unchecked
    # and advanced the committed state, though that feed_id had only ever been signed.
    state, feed, module = tmp_path / "state", tmp_path / "feed.json", tmp_path / "floor_map.py"
    module.write_bytes((REPO / "generated" / "floorguard" / "floor_map.py").read_bytes())
    assert ctl(tmp_path, state, "keygen", "--out", "a").returncode == 0

    def refresh(version: int, *trust: str) -> subprocess.CompletedProcess[str]:
        feed.write_bytes(v2_feed(version))
        done = ctl(tmp_path, state, "sign", feed, "--signing-key", "a/signing.key")
        assert done.returncode == 0, done.stderr
        if stripped == "signature-deleted" and not trust:
            Path(f"{feed}.dsse").unlink()
            trust = ("--trusted-keys", "a/signing.pub")
        return ctl(tmp_path, state, "refresh", "--feed", feed, "--module", module, "--write",
                   "--allow-downgrade", "--state-file", "feeds-state.json", *trust)  # fmt: skip

    done = refresh(1, "--trusted-keys", "a/signing.pub")
    assert done.returncode == 0, done.stderr
    remembered = json.loads((tmp_path / "feeds-state.json").read_text())["feeds"]
    assert remembered["example-feed"]["signed"] is True
    # The very bytes verified before need no key again (nothing was stripped from them).
    if stripped == "no-trusted-keys":
        assert refresh(1).returncode == 0
    before = (tmp_path / "feeds-state.json").read_bytes()
    assert json.loads(before)["feeds"]["example-feed"]["signed"] is True
    done = refresh(2)
    assert done.returncode == 1, done.stdout
    assert "signature stripping" in done.stderr
    assert (tmp_path / "feeds-state.json").read_bytes() == before
    # Signed again and checked, the next version is taken.
    assert refresh(3, "--trusted-keys", "a/signing.pub").returncode == 0
