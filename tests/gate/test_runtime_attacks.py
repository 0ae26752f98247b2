"""Attacks on the runtime, each on a promise of the README or the contract. Every test
asserts the promised behaviour, with real processes and real files; nothing is mocked.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from feedserver import envelope, new_key
from hosts import HOST, Host, floor, map_module, receipt_in_chain

from floorguard._base._canonical import canonical_bytes
from floorguard._base._time import format_ts, utc_now
from floorguard._maps import published_map
from floorguard._maps.map_model import entries_hash, from_entries

# A long attack suite: run by .ci/run after the README's command.
pytestmark = pytest.mark.attack

BUILTIN = {"aider": floor("0.50.0")}
HIGH = {"aider": floor("0.60.0")}


def document(entries: dict[str, Any], version: int, *, days: float = 5) -> bytes:
    expires = format_ts(utc_now() + dt.timedelta(days=days))
    return canonical_bytes(published_map.document(from_entries(entries), version, expires))


class Site:
    """A host (built-in map: aider floor 0.50.0, version 3) and a publisher's mirror."""

    def __init__(self, root: Path) -> None:
        self.key, _, self.public = new_key(root / "publisher")
        self.map = root / "site" / "floor-map.json"
        self.map.parent.mkdir()
        self.host = Host(root / "host", {})
        self.host.set_map(map_module(BUILTIN, version=3))

    @property
    def signature(self) -> Path:
        return Path(str(self.map) + ".dsse")

    def publish(self, entries: dict[str, Any], version: int, **kw: Any) -> None:
        data = document(entries, version, **kw)
        self.map.write_bytes(data)
        self.signature.write_bytes(
            envelope(data, self.key, payload_type=published_map.PAYLOAD_TYPE)
        )

    def published_env(self, **extra: str) -> dict[str, str]:
        return {
            "FLOORGUARD_FLOOR_MAP": str(self.map),
            "FLOORGUARD_TRUSTED_KEYS": str(self.public),
            **extra,
        }

    def preflight_process(self, version: str = "0.55.0", **extra: str) -> Any:
        request = json.dumps({"adapter": "aider", "version": version})
        return subprocess.run(
            [sys.executable, "-c", HOST, request],
            capture_output=True,
            text=True,
            env=self.host.env(**self.published_env(**extra)),
            timeout=120,
            check=False,
        )

    def preflight(self, version: str = "0.55.0", **extra: str) -> dict[str, Any]:
        done = self.preflight_process(version, **extra)
        assert done.returncode == 0, f"the host crashed instead of deciding:\n{done.stderr}"
        result: dict[str, Any] = json.loads(done.stdout)
        return result


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def accepted_record(site: Site) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((site.host.home / "published-map.json").read_bytes())
    return record


# ------------------------------------------------------------ published maps: no traceback


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param(b"[" * 200_000, id="deeply-nested"),
        pytest.param(b'{"payload": ' + b"1" * 5000 + b"}", id="huge-integer"),
    ],
)
def test_a_malformed_published_signature_is_a_recorded_decision_not_a_traceback(
    site: Site, signature: bytes
) -> None:
    # README: "when the named map cannot be used (... bad or missing signature ...), the
    # built-in map stays in force with the reason on stderr"; "any error while judging is a
    # recorded refusal, never a guess or a traceback". Whoever serves the mirror controls
    # floor-map.json.dsse: json.loads raises RecursionError / ValueError (not
    # JSONDecodeError), which dsse.parse_envelope lets through, and every spawn crashes.
    site.publish(HIGH, 4)
    site.signature.write_bytes(signature)
    result = site.preflight()
    assert result["verdict"] in ("permit", "refuse"), result
    assert result["receipt_id"] is not None
    receipt_in_chain(site.host, result["receipt_id"])


def test_a_huge_integer_in_the_trusted_keys_file_is_a_decision_not_a_traceback(
    site: Site,
) -> None:
    # The same through FLOORGUARD_TRUSTED_KEYS: trust.parse_trusted_keys catches only
    # JSONDecodeError, and int() past 4300 digits raises a plain ValueError.
    site.publish(HIGH, 4)
    bad_keys = site.map.parent / "keys.json"
    bad_keys.write_bytes(b'{"threshold": ' + b"1" * 5000 + b', "keys": []}')
    result = site.preflight(FLOORGUARD_TRUSTED_KEYS=str(bad_keys))
    assert result["verdict"] in ("permit", "refuse"), result
    assert result["receipt_id"] is not None


def test_exec_answers_a_malformed_published_signature_with_one_line(
    site: Site, tmp_path: Path
) -> None:
    # `python -m floorguard exec`: "126 with one line on stderr when refused" / the child's
    # status; never a Python traceback.
    site.publish(HIGH, 4)
    site.signature.write_bytes(b"[" * 200_000)
    done = site.host.python("-m", "floorguard", "exec", "true", "--", **site.published_env())
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 126), done.stderr


# ------------------------------------------------------------ published maps: fallback


def _holds_open(pid: int, path: Path) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def test_the_builtin_map_never_stands_in_for_a_version_accepted_concurrently(
    site: Site,
) -> None:
    # README: the built-in map stands in "only if it is at least as new as the highest
    # accepted"; the record is "re-read and compared under that lock, so concurrent hosts
    # never lower it". select() reads the record once, before taking the lock; when
    # accept() then finds (under the lock) that another host has meanwhile accepted a newer
    # version, the resulting rollback error is judged against the stale read ("nothing
    # accepted yet"), so the older built-in map (version 3) silently stands in for version 6.
    import fcntl

    site.publish(HIGH, 5)
    home = site.host.home
    home.mkdir(mode=0o700)
    lock_path = home / "published-map.json.lock"
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)  # another host, busy accepting its map
    request = json.dumps({"adapter": "aider", "version": "0.55.0"})
    victim = subprocess.Popen(
        [sys.executable, "-c", HOST, request],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=site.host.env(**site.published_env()),
    )
    try:
        deadline = time.monotonic() + 60
        while not _holds_open(victim.pid, lock_path):
            assert victim.poll() is None, victim.communicate()
            assert time.monotonic() < deadline, "the host never reached the lock"
            time.sleep(0.01)
        # The other host records version 6 (with floors above 0.55.0) and lets go.
        newer = {"aider": floor("0.70.0")}
        (home / "published-map.json").write_text(
            json.dumps(
                {"schema_version": 1, "map_version": 6, "floor_map_hash": entries_hash(newer)}
            )
        )
    finally:
        os.close(lock_fd)
    out, err = victim.communicate(timeout=120)
    assert victim.returncode == 0, err
    result = json.loads(out)
    assert accepted_record(site)["map_version"] == 6
    # Version 6 is accepted on this host; neither the published v5 nor the built-in v3 may
    # stand in: the spawn must be refused as "floor map cannot be trusted".
    assert result["verdict"] == "refuse", (result, err)
    assert result["reason"].startswith("floor map cannot be trusted"), (result, err)


# ------------------------------------------------------------ what runs is what is judged


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "h", {"aider": floor("0.60.0"), "claude": floor("1.0.100")})


def two_aiders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """aider-chat 0.50.0 in a venv (its python, and the marker its code leaves), and an
    at-floor 0.70.0 installed elsewhere (its site-packages), to be put in the child's way."""
    from probes import pip_install, site_packages

    bad_marker = tmp_path / "old-ran"
    pip_install(tmp_path / "good", dist="aider-chat", module="aider", version="0.70.0",
                marker=tmp_path / "new-ran")  # fmt: skip
    pip_install(tmp_path / "bad", dist="aider-chat", module="aider", version="0.50.0",
                marker=bad_marker)  # fmt: skip
    return tmp_path / "bad" / "bin" / "python", site_packages(tmp_path / "good"), bad_marker


@pytest.mark.parametrize("flags", [["-I"], ["-E"], ["-I", "-s"]], ids=["-I", "-E", "-Is"])
def test_interpreter_flags_that_drop_pythonpath_are_honoured_when_resolving_the_import(
    host: Host, tmp_path: Path, flags: list[str]
) -> None:
    # README: for `python [options] -m MODULE` "the import is resolved in the child's
    # sys.path order (...; PYTHONPATH; the environment's site-packages; ...)". With -I or -E
    # the child's sys.path has no PYTHONPATH, but the gate resolved `aider` there anyway:
    # it judged an at-floor aider-chat 0.70.0 on PYTHONPATH, permitted, and the interpreter
    # imported the venv's own aider 0.50.0 (below the 0.60.0 floor).
    python, good_site, bad_marker = two_aiders(tmp_path)
    host.spawn(
        adapter="codey",
        binary=str(python),
        argv=[*flags, "-m", "aider", "task"],
        child_env={"PYTHONPATH": str(good_site)},
    )
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


@pytest.mark.parametrize(
    ("flags", "child_env"),
    [(["-P"], {}), ([], {"PYTHONSAFEPATH": "1"})],
    ids=["-P", "PYTHONSAFEPATH"],
)
def test_safe_path_is_honoured_when_resolving_the_import(
    host: Host, tmp_path: Path, flags: list[str], child_env: dict[str, str]
) -> None:
    # Same with the working directory, which `-m` puts first on sys.path unless -P or
    # PYTHONSAFEPATH (3.11+) is given. The gate passed PYTHONSAFEPATH to its probe, yet
    # resolved the import in the cwd.
    python, good_site, bad_marker = two_aiders(tmp_path)
    host.spawn(
        adapter="codey",
        binary=str(python),
        argv=[*flags, "-m", "aider", "task"],
        cwd=str(good_site),
        child_env=child_env,
    )
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


@pytest.mark.parametrize("user_base_from", ["HOME", "PYTHONUSERBASE"])
def test_a_system_interpreters_user_site_shadows_its_site_packages_as_it_does_at_run_time(
    host: Host, tmp_path: Path, user_base_from: str
) -> None:
    # A system (non-venv) Python puts the user site BEFORE its own site-packages on sys.path
    # (site.main: addusersitepackages, then addsitepackages). The README's order ("the
    # environment's site-packages; the user site; ...") is only a venv's. Real layout:
    # aider-chat 0.70.0 installed system-wide (sudo pip / distro package) with its console
    # script, and an old `pip install --user aider-chat==0.50.0` in ~/.local. The gate reads
    # 0.70.0 from the system site-packages and permits; the console script imports 0.50.0.
    # PYTHONUSERBASE (which the gate hands its probe) moves the user site; the gate's import
    # resolution never looks at it.
    from probes import pip_install, plain_interpreter

    prefix = tmp_path / "usr"
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    good_marker, bad_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(
        prefix, dist="aider-chat", module="aider", version="0.70.0", marker=good_marker
    )
    home = tmp_path / "userhome"
    user_base = home / ".local" if user_base_from == "HOME" else tmp_path / "userbase"
    child_env = {"HOME": str(home)}
    if user_base_from == "PYTHONUSERBASE":
        child_env["PYTHONUSERBASE"] = str(user_base)
    (user_base / "bin").mkdir(parents=True)
    os.symlink(prefix / "bin" / "python", user_base / "bin" / "python")
    user_site = user_base / "lib" / f"python3.{sys.version_info[1]}" / "site-packages"
    user_site.mkdir(parents=True)
    pip_install(user_base, dist="aider-chat", module="aider", version="0.50.0", marker=bad_marker)
    which = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import aider; print(aider.__file__)"],
        env={**os.environ, **child_env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(user_site) in which.stdout  # what the interpreter really imports
    host.spawn(adapter="aider", binary=str(script), argv=["task"], child_env=child_env)
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


# ------------------------------------------------------------ no read can hang


def test_a_fifo_as_the_chains_rollback_journal_refuses_instead_of_hanging(
    host: Host, tmp_path: Path
) -> None:
    # README "No read can hang": chain.sqlite3 "is checked the same way before SQLite opens
    # it"; a FIFO as a side file must fail, not block. With a chain that holds records,
    # `chain.sqlite3-journal` as a FIFO makes SQLite's hot-journal check (on the first
    # statement, PRAGMA journal_mode) read the FIFO and block for ever: every spawn hangs.
    first = host.preflight("aider", version="0.70.0")
    assert first["verdict"] == "permit"
    os.mkfifo(host.home / "chain.sqlite3-journal")
    request = json.dumps({"adapter": "aider", "version": "0.70.0"})
    try:
        done = subprocess.run(
            [sys.executable, "-c", HOST, request],
            capture_output=True, text=True, env=host.env(), timeout=90, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the preflight blocked on the FIFO chain.sqlite3-journal")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["raised"] == "SpawnRefused", result


# ------------------------------------------------------------ one line, not silent


def test_exec_refusal_is_one_line_whatever_the_binary_path_holds(
    host: Host, tmp_path: Path
) -> None:
    # README: `python -m floorguard exec` exits "126 with one line on stderr when refused".
    # Paths go into the reason unescaped: a folder on PATH whose name holds a newline splits
    # the message, and lets whoever names that folder forge a line of their choosing in the
    # host's log (here a fake permit).
    from probes.native import native_program

    folder = tmp_path / "tools\nfloorguard - permit - claude 1.0.200 meets the floor 1.0.100"
    native_program(folder / "claude")  # prints no version: refused as unknown
    path = os.pathsep.join([str(folder), os.environ.get("PATH", "")])
    done = host.python("-m", "floorguard", "exec", "claude", "--", "task", PATH=path)
    assert done.returncode == 126, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
