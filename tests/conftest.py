"""Settings for the whole suite; fixtures shared by the PostgreSQL chain's tests and by the
runtime's identification tests."""

from __future__ import annotations

import compileall
import contextlib
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest
from helpers.closed_world import DENY_BY_DEFAULT, POLICIES, World
from helpers.pg_chain import Chain
from helpers.tlog_support import build_log
from hypothesis import settings
from probes import pip_install

from floorguard._chain.chain_key import key_check, load_or_create_key
from floorguard.chainstore.postgres_init import init_schema

# No time limit per example: these machines are shared and noisy, and a property test must
# fail on a counterexample, never on a slow moment (timing belongs in tests/perf).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

_ROOT = Path(__file__).resolve().parent.parent

# pytest keeps each test module's assertion-rewritten bytecode only where bytecode may be
# written; without it every worker rewrote all 200 test modules again at each run (10.5 s
# of collection a process, 2.3 s once kept). The suite's own processes may write it; the
# environment its subprocesses inherit, which the gate judges, is left as it is.
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    # The suite starts floorctl and floorguard in thousands of subprocesses. Where the
    # environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set on some CI
    # machines), each one compiled both packages from source again: 40% of the suite's time.
    # Python still reads bytecode that exists, so it is written once here (pip already did
    # it for installed packages). Only the controller does it, before any worker starts.
    if not hasattr(config, "workerinput"):
        for package in (_ROOT / "floorctl", _ROOT / "generated" / "floorguard"):
            compileall.compile_dir(package, quiet=1)


# A real PostgreSQL for the PostgreSQL chain's tests: one per test process for the session
# (under pytest-xdist each worker has its own, as some tests stop and restart theirs).
server = pytest.fixture(scope="session")(pgserver.provide)


@pytest.fixture
def pg(server: pgserver.PgServer, tmp_path: Path) -> Iterator[Chain]:
    """A fresh database owned by a fresh role, initialised by `floorctl chain init`; dropped
    afterwards (a cluster of hundreds of databases makes a restart after a crash slow)."""
    tag = secrets.token_hex(4)
    owner, appender, database = f"own_{tag}", f"app_{tag}", f"chain_{tag}"
    # What the operator grants the owner: its functions end a session holding the chain's
    # lock too long (tests/fleet/test_lock_holders.py).
    server.psql(
        f"CREATE ROLE {owner} LOGIN CREATEROLE; CREATE ROLE {appender} LOGIN; "
        f"GRANT pg_signal_backend TO {owner}"
    )
    server.psql(f"CREATE DATABASE {database} OWNER {owner}")
    fleet = tmp_path / "fleet"
    chain = Chain(server, database, owner, appender, fleet / "chain.key")
    # What `floorctl chain init --url OWNER_URL --grant APPENDER` runs, in this process: the
    # command itself is tested in tests/fleet/test_chain_init.py and wherever a test runs it,
    # and a process a test (0.6 s on a loaded 2-core machine) was a sixth of the fleet suite.
    fleet.mkdir(mode=0o700)
    key = load_or_create_key(chain.key_file)
    init_schema(chain.owner_url, timeout=60, grant_to=[appender], key_check=key_check(key))
    yield chain
    with contextlib.suppress(Exception):  # a server a test left stopped has nothing to drop
        server.psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


@pytest.fixture
def old_aider(tmp_path: Path) -> tuple[Path, Path]:
    """aider-chat 0.50.0 (below its 0.60.0 floor) in a real venv; its console script, marker."""
    marker = tmp_path / "aider-ran"
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.50.0", marker=marker
    )
    return script, marker


@pytest.fixture
def doctor_path(tmp_path: Path) -> Path:
    """A PATH folder for the doctor: aider at its floor (as pip installs it), claude below
    it and codex unreadable (native builds, probed)."""
    from hosts import write_script
    from probes import aider_at

    path = tmp_path / "bin"
    path.mkdir()
    aider_at(path / "aider", "0.60.0")
    write_script(path / "claude", "echo '1.0.3 (Claude Code)'")
    write_script(path / "codex", "echo 'something went wrong' >&2; exit 1")
    return path


@pytest.fixture
def world(tmp_path: Path) -> World:
    """A closed-world test's installs and host (tests/helpers/closed_world.py)."""
    return World(tmp_path)


@pytest.fixture(params=POLICIES)
def untracked_policy(request: pytest.FixtureRequest) -> str:
    """Each closed-world test runs under the default policy (which permits what is not
    identified: the gate's checks alone refuse) and under deny-by-default (see
    pytest_collection_modifyitems for where the second runs)."""
    return str(request.param)


# The closed-world files whose deny-by-default runs CI keeps: what deny-by-default must still
# permit, and the policy's own refusals. Elsewhere a refusal under the default policy, which
# permits what is not identified, is the stronger test (the check itself must refuse);
# deny-by-default repeats it, and runs before a release only.
_DENY_BY_DEFAULT_IN_CI = frozenset({"test_legitimate.py", "test_deny_by_default.py"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A closed-world test under deny-by-default runs with the long attack suites (marker
    # attack) if its file is one of those above, else before a release only (slow).
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("untracked_policy") != DENY_BY_DEFAULT:
            continue
        item.add_marker(pytest.mark.attack)
        if item.path.name not in _DENY_BY_DEFAULT_IN_CI:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real transparency log built through the CLIs: 11 records, one.cp (5) and two.cp (11)."""
    return build_log(tmp_path_factory.mktemp("tlog"))
