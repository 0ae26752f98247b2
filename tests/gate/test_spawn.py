"""floorguard.spawn: the check and the exec are one step, bound to the file that was checked.

A below-floor or swapped binary must never start: each test binary would leave a marker
file if it ran, and the tests assert the marker is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hosts import Host, calls_while_os_environ_changes, floor, receipt_in_chain
from probes.native import Run, native_agent


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path, {"aider": floor("0.60.0"), "codex": floor("0.60.0")})


def agent(path: Path, version: str, marker: Path, code: int = 0) -> Path:
    """A native codex: answers ``--version``; otherwise records that it ran and hands over to a
    shell that prints its receipt id and arguments and exits with ``code``."""
    shell = f'echo "receipt=$FLOORGUARD_RECEIPT_ID args=$*"; exit {code}'
    return native_agent(
        path, version=f"codex-cli {version}\n".encode(), run=Run(marker=marker, sh=shell)
    )


def run(host: Host, **request: Any) -> list[dict[str, Any]]:
    return host.spawn(**request)


def test_permitted_child_sees_its_receipt_id_and_the_id_is_in_the_chain(
    host: Host, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    binary = agent(tmp_path / "codex", "0.60.0", marker)
    [result] = run(host, adapter="codex", argv=["--yes", "task"], binary=str(binary))
    assert result["started"] and result["returncode"] == 0
    line = result["stdout"].strip()
    assert line.endswith("args=--yes task")
    receipt_id = line.split()[0].removeprefix("receipt=")
    assert receipt_in_chain(host, receipt_id)["verdict"] == "permit"
    assert marker.exists()


def test_below_floor_binary_never_starts(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    binary = agent(tmp_path / "codex", "0.59.0", marker)
    [result] = run(host, adapter="codex", argv=["task"], binary=str(binary))
    assert not result["started"]
    assert result["verdict"] == "refuse"
    assert not marker.exists()


def test_binary_swapped_between_check_and_exec_is_refused_and_nothing_runs(
    host: Host, tmp_path: Path
) -> None:
    marker, evil_marker = tmp_path / "ran", tmp_path / "evil-ran"
    binary = agent(tmp_path / "codex", "0.70.0", marker)
    evil = agent(tmp_path / "evil", "0.70.0", evil_marker)
    swap = {"kind": "replace", "path": str(binary), "with": str(evil)}
    [result] = run(host, adapter="codex", argv=[], binary=str(binary), swap=swap)
    assert not result["started"]
    assert "changed between check and exec" in result["message"]
    assert result["verdict"] == "refuse"
    assert receipt_in_chain(host, result["receipt_id"])["verdict"] == "refuse"
    assert not marker.exists() and not evil_marker.exists()


def test_the_refusal_that_overrules_a_recorded_permit_names_it(host: Host, tmp_path: Path) -> None:
    # The permit is sealed before the last check (a permit never stands without a durable
    # receipt); when that check fails, the refusal says which permit started nothing.
    binary = agent(tmp_path / "codex", "0.70.0", tmp_path / "ran")
    evil = agent(tmp_path / "evil", "0.70.0", tmp_path / "evil-ran")
    swap = {"kind": "replace", "path": str(binary), "with": str(evil)}
    [result] = run(host, adapter="codex", argv=[], binary=str(binary), swap=swap)
    permit, refusal = [r["receipt"] for r in host.chain_records()][-2:]
    assert permit["verdict"] == "permit" and refusal["verdict"] == "refuse"
    [permit_id] = [
        r["receipt_id"] for r in host.chain_records() if r["receipt"]["verdict"] == "permit"
    ]
    assert f"the permit {permit_id} started nothing" in str(refusal["reason"])
    assert result["receipt_id"] != permit_id


def test_symlink_retargeted_after_resolution_is_refused(host: Host, tmp_path: Path) -> None:
    good_marker, evil_marker = tmp_path / "good-ran", tmp_path / "evil-ran"
    good = agent(tmp_path / "codex-good", "0.70.0", good_marker)
    evil = agent(tmp_path / "codex-old", "0.10.0", evil_marker)
    link = tmp_path / "codex"
    link.symlink_to(good)
    swap = {"kind": "retarget", "path": str(link), "with": str(evil)}
    [result] = run(host, adapter="codex", argv=[], binary=str(link), swap=swap)
    assert not result["started"]
    assert "now resolves to" in result["message"]
    assert not good_marker.exists() and not evil_marker.exists()


def test_policy_changed_between_two_calls_takes_effect_on_the_second(
    host: Host, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    binary = agent(tmp_path / "codex", "0.10.0", marker)
    first, second = run(host, adapter="codex", argv=[], binary=str(binary), policies=[None, "warn"])
    assert not first["started"] and first["verdict"] == "refuse"
    assert second["started"]
    assert marker.exists()


def test_spawn_refuses_a_shell_string(host: Host) -> None:
    code = (
        "import floorguard\n"
        "try:\n    floorguard.spawn('aider', 'rm -rf /')\n"
        "except TypeError as e:\n    print('TypeError', e)\n"
    )
    done = host.python("-c", code)
    assert done.stdout.startswith("TypeError")
    assert host.chain_records() == []


@pytest.mark.parametrize(
    "argument",
    # user, group and extra_groups: the child would read its files with other rights than
    # the gate judged them with (a home it cannot enter, a user site it cannot see).
    ["shell=True", "executable='/bin/sh'", "user=65534", "group=65534", "extra_groups=[65534]"],
)
def test_spawn_refuses_popen_arguments_that_bypass_the_check(host: Host, argument: str) -> None:
    code = (
        "import floorguard\n"
        f"try:\n    floorguard.spawn('aider', [], {argument})\n"
        "except TypeError as e:\n    print('TypeError', e)\n"
    )
    done = host.python("-c", code)
    assert done.stdout.startswith("TypeError"), (done.stdout, done.stderr)
    assert argument.split("=", maxsplit=1)[0] in done.stdout
    assert host.chain_records() == []


def _spawned_by_the_host(
    host: Host, tmp_path: Path, body: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``body`` run by the host's Python (``ENV`` a plain PATH), a codex 0.60.0 that leaves
    the marker returned if it runs at ``sys.argv[1]``."""
    marker = tmp_path / "ran"
    binary = agent(tmp_path / "codex", "0.60.0", marker)
    code = "import os, subprocess, sys, floorguard\nENV = {'PATH': os.environ['PATH']}\n" + body
    return host.python("-c", code, str(binary)), marker


@pytest.mark.parametrize(
    ("options", "raised"),
    [
        ("stdin=999", "OSError"),  # no such descriptor
        ("stdout='out.txt'", "TypeError"),  # a name, not a file
        ("stderr=-7", "ValueError"),
        # (an object that says its __class__ is int, which isinstance believes)
        ("stdout=type('I', (), {'__class__': property(lambda s: int)})()", "ValueError"),
        ("stdout=2**40", "ValueError"),  # past any descriptor
        # (an int whose == says yes to anything: the group it names is not this one)
        (
            "process_group=type('G', (int,), {'__eq__': lambda s, o: True,"
            " '__hash__': int.__hash__})(999999)",
            "ValueError",
        ),
        ("creationflags=1", "ValueError"),  # Windows only
        ("startupinfo=object()", "ValueError"),
        ("bufsize='x'", "TypeError"),
        ("umask='x'", "TypeError"),
        ("umask=2**40", "ValueError"),
        ("stdout=subprocess.PIPE, encoding='no-such-codec'", "LookupError"),
        ("stdout=subprocess.PIPE, pipesize=2**30", "ValueError"),
        ("process_group=2**22 + 17", "ValueError"),  # no such group in this session
        ("process_group=2**40", "ValueError"),  # past any process id
        ("stdot=subprocess.PIPE", "TypeError"),  # no such option
        ("start_new_session=True, process_group=0", "ValueError"),  # a leader stays put
        ("start_new_session='x'", "TypeError"),
        ("restore_signals=None", "TypeError"),
        ("close_fds=2**70", "TypeError"),
        ("close_fds=False", "ValueError"),  # the host's descriptors would be dropped silently
    ],
)
def test_popen_options_the_child_cannot_be_started_with_raise_before_anything_is_recorded(
    host: Host, tmp_path: Path, options: str, raised: str
) -> None:
    done, marker = _spawned_by_the_host(
        host, tmp_path,
        "try:\n"
        f"    floorguard.spawn('codex', [], binary=sys.argv[1], env=ENV, {options}).wait()\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n",
    )  # fmt: skip
    assert done.stdout.split()[0] == raised, (done.stdout, done.stderr)
    assert host.chain_records() == []
    assert not marker.exists()


PASSED_ON = {
    "every option": (
        "child = floorguard.spawn('codex', ['task'], binary=sys.argv[1], stdin=0, env=ENV,\n"
        "    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, encoding='utf-8', errors='strict',\n"
        "    bufsize=1, umask=0o077, pipesize=4096, process_group=os.getpgid(0),\n"
        "    close_fds=True, restore_signals=True, creationflags=0, startupinfo=None)\n"
    ),
    # (an IntEnum's members, passed on as their values)
    "streams as IntEnum members": (
        "import enum\n"
        "class Stream(enum.IntEnum):\n"
        "    PIPE = subprocess.PIPE\n    DEVNULL = subprocess.DEVNULL\n"
        "    STDOUT = subprocess.STDOUT\n"
        "child = floorguard.spawn('codex', ['task'], binary=sys.argv[1], env=ENV,\n"
        "    stdin=Stream.DEVNULL, stdout=Stream.PIPE, stderr=Stream.STDOUT, text=True)\n"
    ),
}


@pytest.mark.parametrize("given", sorted(PASSED_ON))
def test_popen_options_a_child_can_be_started_with_are_passed_on(
    host: Host, tmp_path: Path, given: str
) -> None:
    done, marker = _spawned_by_the_host(
        host, tmp_path, PASSED_ON[given] + "print(child.communicate()[0].strip())\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("args=task")
    assert [record["receipt"]["verdict"] for record in host.chain_records()] == ["permit"]
    assert marker.exists()


def test_a_stream_s_descriptor_is_asked_once_and_the_child_gets_that_one(
    host: Host, tmp_path: Path
) -> None:
    # A stdout object that names a file once and a closed descriptor after: the descriptor
    # checked is the one the child writes to, and no permit is sealed for a child that
    # could not start.
    out = tmp_path / "child-out"
    done, marker = _spawned_by_the_host(
        host, tmp_path,
        "class Shifty:\n"
        "    calls = 0\n"
        f"    opened = os.open({str(out)!r}, os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "    def fileno(self):\n"
        "        Shifty.calls += 1\n"
        "        return Shifty.opened if Shifty.calls == 1 else 999\n"
        "child = floorguard.spawn('codex', ['task'], binary=sys.argv[1], env=ENV,\n"
        "                         stdout=Shifty())\n"
        "print(child.wait(), Shifty.calls)\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"], done.stdout
    assert out.read_text().strip().endswith("args=task")
    assert [record["receipt"]["verdict"] for record in host.chain_records()] == ["permit"]
    assert marker.exists()


@pytest.mark.parametrize(
    ("call", "named"),
    [
        ("spawn(b'aider', [])", "adapter"),
        ("spawn('aider', [], binary=b'/usr/bin/aider')", "binary"),
        ("spawn('aider', [], env={b'PYTHONINSPECT': b'1', 'PATH': '/usr/bin'})", "env"),
        ("spawn('aider', [], env={'PATH': '/usr/bin', 'X': pathlib.Path('/x')})", "env"),
        ("spawn('aider', [], env=[('PATH', '/usr/bin')])", "env"),
        ("spawn('aider', [], cwd=b'/tmp')", "cwd"),
        # (an object that says its __class__ is str, which isinstance believes)
        ("spawn(NotText(), [])", "adapter"),
        ("spawn('aider', [NotText()])", "argv"),
        ("spawn('aider', [], env={'PATH': NotText()})", "env"),
        ("spawn('aider', [], env=NotMapping())", "env"),
        ("spawn('aider', NotList())", "argv"),
    ],
)
def test_spawn_refuses_arguments_of_a_type_it_does_not_read(
    host: Host, call: str, named: str
) -> None:
    """Popen takes bytes and path objects where floorguard reads text: a clear TypeError
    naming the argument, nothing started and nothing recorded (never a traceback from
    inside the judgement)."""
    code = (
        "import pathlib, floorguard\n"
        "class NotText:\n    __class__ = property(lambda self: str)\n"
        "class NotMapping:\n    __class__ = property(lambda self: dict)\n"
        "class NotList:\n    __class__ = property(lambda self: list)\n"
        f"try:\n    floorguard.{call}\n"
        "except TypeError as e:\n    print('TypeError', e)\n"
    )
    done = host.python("-c", code)
    assert done.stdout.startswith(f"TypeError {named}"), (done.stdout, done.stderr)
    assert host.chain_records() == []


def test_exec_from_the_shell_returns_the_childs_exit_code(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent(bin_dir / "codex", "0.61.0", marker, code=7)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    done = host.python("-m", "floorguard", "exec", "codex", "--", "task", PATH=path)
    assert done.returncode == 7, done.stderr
    assert marker.exists()


@pytest.mark.parametrize(
    ("given", "received"),
    [
        (["--", "task"], "task"),
        (["task"], "task"),
        # exec's own -- ends its options; a second is the child's (a prompt starting "-").
        (["--", "--", "-x"], "-- -x"),
        (["--", "--"], "--"),
    ],
)
def test_exec_hands_the_child_every_argument_after_its_own_double_dash(
    host: Host, tmp_path: Path, given: list[str], received: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent(bin_dir / "codex", "0.61.0", tmp_path / "ran")
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    done = host.python("-m", "floorguard", "exec", "codex", *given, PATH=path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"args={received}"), done.stdout


def test_exec_from_the_shell_returns_126_when_refused(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent(bin_dir / "codex", "0.1.0", marker)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    done = host.python("-m", "floorguard", "exec", "codex", "--", "task", PATH=path)
    assert done.returncode == 126
    assert len(done.stderr.strip().splitlines()) == 1
    assert "below the floor" in done.stderr
    assert not marker.exists()


def test_untracked_adapter_whose_binary_is_missing_is_refused_and_recorded(
    host: Host, tmp_path: Path
) -> None:
    [result] = run(host, adapter="newagent", argv=[], binary=str(tmp_path / "missing"))
    assert not result["started"]
    assert result["verdict"] == "refuse"
    assert "cannot be resolved or opened" in result["message"]
    assert receipt_in_chain(host, result["receipt_id"])["verdict"] == "refuse"


# A host's arguments as objects that answer differently when asked again, or that say
# they are another name: what runs is what was judged, read once, by its characters.
CHANGING_ARGUMENTS_HOST = """
import collections.abc, json, sys
import floorguard

class Lying(str):
    def __eq__(self, other): return str.__eq__("goose", other)
    def __ne__(self, other): return not self == other
    def __hash__(self): return hash("goose")

class Changing(collections.abc.Sequence):
    reads = 0
    def __init__(self, first, later): self.first, self.later = first, later
    def _now(self): return self.first if Changing.reads < 3 else self.later
    def __iter__(self):
        Changing.reads += 1
        return iter(self._now())
    def __len__(self): return len(self._now())
    def __getitem__(self, i): return self._now()[i]

binary, what = sys.argv[1], sys.argv[2]
adapter = Lying("codex") if what == "adapter" else "codex"
argv = Changing(["task"], ["other"]) if what == "argv" else ["task"]
try:
    child = floorguard.spawn(
        adapter, argv, binary=binary, env={"PATH": "/usr/bin:/bin"}, stdout=-1, text=True
    )
except floorguard.SpawnRefused as exc:
    print(json.dumps({"verdict": exc.decision.verdict, "reason": exc.decision.reason}))
else:
    out, _ = child.communicate()
    print(json.dumps({"verdict": "started", "stdout": out}))
"""


def test_spawn_reads_its_arguments_once_and_judges_their_characters(
    host: Host, tmp_path: Path
) -> None:
    below = agent(tmp_path / "old" / "codex", "0.10.0", tmp_path / "old-ran")
    done = host.python("-c", CHANGING_ARGUMENTS_HOST, str(below), "adapter")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "refuse" and "below the floor" in result["reason"], result
    assert not (tmp_path / "old-ran").exists()

    current = agent(tmp_path / "new" / "codex", "0.70.0", tmp_path / "new-ran")
    done = host.python("-c", CHANGING_ARGUMENTS_HOST, str(current), "argv")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "started", result
    assert result["stdout"].strip().endswith("args=task"), result


def test_os_environ_given_as_the_child_s_and_changed_meanwhile_is_read_whole(
    host: Host, tmp_path: Path
) -> None:
    binary = agent(tmp_path / "codex", "0.70.0", tmp_path / "ran")
    # (another thread of the host sets and removes a variable meanwhile)
    code = calls_while_os_environ_changes(
        "'exit %d' % floorguard.spawn('codex', [], binary=sys.argv[1], env=os.environ,"
        " stdout=-3).wait()",
        200,
    )
    done = host.python("-c", code, str(binary))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"exit 0": 200}, done.stdout
