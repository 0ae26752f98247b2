"""Real agent CLIs from the registries, installed as hosts install them, spawned through
floorguard: a floor the installed version meets permits it and the child starts; a floor
above it refuses it as below floor, and nothing starts.

These download from npm and PyPI (network), so they carry the ``real_packages`` marker and
are not part of the default run:
``pytest -m real_packages tests/closed_world/test_real_packages.py``.
Installs are made once per session under a temporary folder (or under
``FLOORGUARD_REAL_PACKAGES_CACHE`` when set, reused across runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.closed_world import DENY_BY_DEFAULT, NODE, Outcome, World
from hosts import Host, floor

pytestmark = pytest.mark.real_packages

NPM = shutil.which("npm") or "/usr/bin/npm"

CLAUDE_PKG, CLAUDE_VERSION = "@anthropic-ai/claude-code", "2.1.332"
CLAUDE_JS_VERSION = "1.0.100"  # the last line of releases shipped as a node cli.js
CODEX_PKG, CODEX_VERSION = "@openai/codex", "0.171.0"
GEMINI_PKG, GEMINI_VERSION = "@google/gemini-cli", "0.61.0"
AIDER_DIST, AIDER_VERSION = "aider-chat", "0.86.1"

INSTALL_TIMES: dict[str, float] = {}


@dataclass(frozen=True)
class Installs:
    root: Path

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)


def _run(cmd: list[str], name: str) -> None:
    """Run an installer; a failure (or a hang past 5 minutes: npm has been seen stalling
    while extracting from its cache) skips the tests that need it."""
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"installing {name} took over 5 minutes")
    INSTALL_TIMES[name] = time.monotonic() - start
    if done.returncode != 0:
        pytest.skip(f"cannot install {name} (network?): {done.stderr[-2000:]}")


@contextlib.contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """One installer per folder, across pytest-xdist workers sharing a cache."""
    with open(root / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _npm(root: Path, name: str, spec: str, *, global_: bool = False) -> Path:
    prefix = root / name
    with _locked(root, name):
        _npm_unlocked(prefix, name, spec, global_=global_)
    return prefix


def _npm_unlocked(prefix: Path, name: str, spec: str, *, global_: bool) -> None:
    if not (prefix / ".done").exists():
        shutil.rmtree(prefix, ignore_errors=True)
        cmd = [NPM, "install", "--no-audit", "--no-fund", "--loglevel=error"]
        cmd += ["-g"] if global_ else []
        _run([*cmd, "--prefix", str(prefix), spec], name)
        (prefix / ".done").touch()


@pytest.fixture(scope="session")
def installs(tmp_path_factory: pytest.TempPathFactory) -> Installs:
    cache = os.environ.get("FLOORGUARD_REAL_PACKAGES_CACHE")
    root = Path(cache) if cache else tmp_path_factory.mktemp("real-packages")
    root.mkdir(parents=True, exist_ok=True)
    return Installs(root)


@pytest.fixture(scope="session")
def claude_project(installs: Installs) -> Path:
    """``npm install --prefix DIR @anthropic-ai/claude-code`` (a native binary as the bin)."""
    return _npm(installs.root, "claude-project", f"{CLAUDE_PKG}@{CLAUDE_VERSION}")


@pytest.fixture(scope="session")
def claude_global(installs: Installs) -> Path:
    """``npm install -g --prefix DIR @anthropic-ai/claude-code``: DIR/bin/claude."""
    return _npm(installs.root, "claude-global", f"{CLAUDE_PKG}@{CLAUDE_VERSION}", global_=True)


@pytest.fixture(scope="session")
def claude_js_global(installs: Installs) -> Path:
    """An older claude, still a node ``cli.js`` (``type: module``), installed globally."""
    return _npm(
        installs.root, "claude-js-global", f"{CLAUDE_PKG}@{CLAUDE_JS_VERSION}", global_=True
    )


@pytest.fixture(scope="session")
def codex_project(installs: Installs) -> Path:
    """``npm install --prefix DIR @openai/codex``: an ESM ``codex.js`` and a native binary."""
    return _npm(installs.root, "codex-project", f"{CODEX_PKG}@{CODEX_VERSION}")


@pytest.fixture(scope="session")
def codex_global(installs: Installs) -> Path:
    return _npm(installs.root, "codex-global", f"{CODEX_PKG}@{CODEX_VERSION}", global_=True)


@pytest.fixture(scope="session")
def gemini_project(installs: Installs) -> Path:
    """``npm install --prefix DIR @google/gemini-cli``: an ESM bundle."""
    return _npm(installs.root, "gemini-project", f"{GEMINI_PKG}@{GEMINI_VERSION}")


@pytest.fixture(scope="session")
def aider_venv(installs: Installs) -> Path:
    """``pip install --no-deps aider-chat`` into a real venv (console script ``bin/aider``)."""
    prefix = installs.root / "aider-venv"
    with _locked(installs.root, "aider-venv"):
        _aider_unlocked(prefix)
    return prefix


def _aider_unlocked(prefix: Path) -> None:
    if not (prefix / ".done").exists():
        shutil.rmtree(prefix, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(prefix)], "aider-venv")
        _run(
            [
                str(prefix / "bin" / "pip"),
                "install",
                "-q",
                "--no-deps",
                f"{AIDER_DIST}=={AIDER_VERSION}",
            ],
            "aider-chat",
        )
        (prefix / ".done").touch()


def _world(tmp_path: Path, **floors: str) -> World:
    world = World(tmp_path)
    world.host = Host(tmp_path / "real-host", {name: floor(v) for name, v in floors.items()})
    return world


def _permitted(world: World, outcome: Outcome, says: str | None = None) -> None:
    assert outcome["outcome"] == "started", f"not started: {outcome!r}; {world.recorded()}"
    verdicts = [
        r["receipt"].get("verdict")
        for r in world.host.chain_records()
        if isinstance(r.get("receipt"), dict)
    ]
    assert verdicts and verdicts[-1] == "permit", verdicts
    if says is not None:
        assert says in (outcome["stdout"] or "") + (outcome["stderr"] or ""), outcome


def _refused_below_floor(world: World, outcome: Outcome, adapter: str) -> None:
    assert outcome["outcome"] == "refused", f"not refused: {outcome!r}"
    assert outcome["verdict"] == "refuse", outcome
    assert outcome["adapter"] == adapter, outcome
    assert "floor" in outcome.reason.lower(), outcome
    world.assert_no_permit_recorded()


def _env(world: World, *path: Path) -> dict[str, str]:
    return world.env(*path)


# ------------------------------------------------------------------------------- claude


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_claude_project_install_native_bin_link_is_permitted(
    claude_project: Path, tmp_path: Path, policy: str
) -> None:
    """``node_modules/.bin/claude`` (a link to the package's native ``bin/claude.exe``)."""
    world = _world(tmp_path, claude="2.1.0")
    outcome = world.spawn(
        "claude",
        ["--version"],
        policy=policy,
        binary=claude_project / "node_modules" / ".bin" / "claude",
        env=_env(world),
        cwd=claude_project,
    )
    _permitted(world, outcome, CLAUDE_VERSION)


def test_real_claude_project_install_below_floor_is_refused(
    claude_project: Path, tmp_path: Path
) -> None:
    """The same install under a floor above it: refused as below floor."""
    world = _world(tmp_path, claude="9.0.0")
    outcome = world.spawn(
        "claude",
        ["--version"],
        policy="default",
        binary=claude_project / "node_modules" / ".bin" / "claude",
        env=_env(world),
        cwd=claude_project,
    )
    _refused_below_floor(world, outcome, "claude")


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_claude_global_install_found_on_path_is_permitted(
    claude_global: Path, tmp_path: Path, policy: str
) -> None:
    """``npm install -g --prefix DIR``; ``claude`` found on PATH as ``DIR/bin/claude``."""
    world = _world(tmp_path, claude="2.1.0")
    outcome = world.spawn(
        "claude", ["--version"], policy=policy, env=_env(world, claude_global / "bin")
    )
    _permitted(world, outcome, CLAUDE_VERSION)


def test_real_claude_global_install_below_floor_is_refused(
    claude_global: Path, tmp_path: Path
) -> None:
    """The global install under a floor above it."""
    world = _world(tmp_path, claude="9.0.0")
    outcome = world.spawn(
        "claude", ["--version"], policy="default", env=_env(world, claude_global / "bin")
    )
    _refused_below_floor(world, outcome, "claude")


def test_real_claude_native_binary_of_the_platform_package_is_permitted(
    claude_project: Path, tmp_path: Path
) -> None:
    """The platform package's own ``claude`` binary (``@anthropic-ai/claude-code-linux-x64``)."""
    binary = claude_project / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    if not binary.exists():
        pytest.skip("no linux-x64 platform package here")
    world = _world(tmp_path, claude="2.1.0")
    outcome = world.spawn(
        "claude", ["--version"], policy=DENY_BY_DEFAULT, binary=binary, env=_env(world)
    )
    _permitted(world, outcome, CLAUDE_VERSION)


def test_real_claude_native_binary_of_the_platform_package_below_floor_is_refused(
    claude_project: Path, tmp_path: Path
) -> None:
    """The platform package's ``claude`` binary under a floor above it."""
    binary = claude_project / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    if not binary.exists():
        pytest.skip("no linux-x64 platform package here")
    world = _world(tmp_path, claude="9.0.0")
    outcome = world.spawn("claude", ["--version"], policy="default", binary=binary, env=_env(world))
    assert outcome["outcome"] == "refused", outcome
    world.assert_no_permit_recorded()


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_claude_js_cli_of_a_type_module_package_is_permitted(
    claude_js_global: Path, tmp_path: Path, policy: str
) -> None:
    """An older claude whose bin is ``cli.js`` (``#!/usr/bin/env node``, ``type: module``)."""
    world = _world(tmp_path, claude="1.0.0")
    outcome = world.spawn(
        "claude", ["--version"], policy=policy, env=_env(world, claude_js_global / "bin")
    )
    _permitted(world, outcome, CLAUDE_JS_VERSION)


def test_real_claude_js_cli_below_floor_is_refused(claude_js_global: Path, tmp_path: Path) -> None:
    """The node ``cli.js`` claude under a floor above it."""
    world = _world(tmp_path, claude="1.0.101")
    outcome = world.spawn(
        "claude", ["--version"], policy="default", env=_env(world, claude_js_global / "bin")
    )
    _refused_below_floor(world, outcome, "claude")


def test_real_node_running_claude_js_cli_is_permitted(
    claude_js_global: Path, tmp_path: Path
) -> None:
    """``node .../@anthropic-ai/claude-code/cli.js --version``."""
    cli = claude_js_global / "lib" / "node_modules" / CLAUDE_PKG / "cli.js"
    world = _world(tmp_path, claude="1.0.0")
    outcome = world.spawn(
        "node", [str(cli), "--version"], binary=NODE, policy=DENY_BY_DEFAULT, env=_env(world)
    )
    _permitted(world, outcome, CLAUDE_JS_VERSION)


# -------------------------------------------------------------------------------- codex


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_codex_project_install_esm_bin_link_is_permitted(
    codex_project: Path, tmp_path: Path, policy: str
) -> None:
    """``node_modules/.bin/codex`` -> ``codex.js`` (ESM), which execs the native binary."""
    world = _world(tmp_path, codex="0.100.0")
    outcome = world.spawn(
        "codex",
        ["--version"],
        policy=policy,
        binary=codex_project / "node_modules" / ".bin" / "codex",
        env=_env(world),
        cwd=codex_project,
    )
    _permitted(world, outcome, CODEX_VERSION)


def test_real_codex_project_install_below_floor_is_refused(
    codex_project: Path, tmp_path: Path
) -> None:
    """The same codex under a floor above it."""
    world = _world(tmp_path, codex="1.0.0")
    outcome = world.spawn(
        "codex",
        ["--version"],
        policy="default",
        binary=codex_project / "node_modules" / ".bin" / "codex",
        env=_env(world),
        cwd=codex_project,
    )
    _refused_below_floor(world, outcome, "codex")


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_codex_global_install_on_path_is_permitted(
    codex_global: Path, tmp_path: Path, policy: str
) -> None:
    """``npm install -g --prefix DIR @openai/codex``; ``codex`` found on PATH."""
    world = _world(tmp_path, codex="0.100.0")
    outcome = world.spawn(
        "codex", ["--version"], policy=policy, env=_env(world, codex_global / "bin")
    )
    _permitted(world, outcome, CODEX_VERSION)


def test_real_codex_global_install_below_floor_is_refused(
    codex_global: Path, tmp_path: Path
) -> None:
    """The global codex under a floor above it."""
    world = _world(tmp_path, codex="1.0.0")
    outcome = world.spawn(
        "codex", ["--version"], policy="default", env=_env(world, codex_global / "bin")
    )
    _refused_below_floor(world, outcome, "codex")


def _codex_native(prefix: Path) -> Path:
    found = sorted(prefix.glob("**/@openai/codex-linux-x64/vendor/*/bin/codex"))
    if not found:
        pytest.skip("no linux-x64 codex platform package here")
    return found[0]


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_codex_native_binary_at_exactly_its_floor_is_permitted(
    codex_project: Path, tmp_path: Path, policy: str
) -> None:
    """The native ``codex`` inside ``@openai/codex-linux-x64`` (whose package.json says
    ``"name": "@openai/codex", "version": "0.171.0-linux-x64"``), floor 0.171.0: it is codex
    0.171.0, as its ``--version`` says."""
    world = _world(tmp_path, codex=CODEX_VERSION)
    outcome = world.spawn(
        "codex", ["--version"], policy=policy, binary=_codex_native(codex_project), env=_env(world)
    )
    _permitted(world, outcome, CODEX_VERSION)


def test_real_codex_native_binary_below_floor_is_refused(
    codex_project: Path, tmp_path: Path
) -> None:
    """The native codex binary under a floor above it."""
    world = _world(tmp_path, codex="1.0.0")
    outcome = world.spawn(
        "codex",
        ["--version"],
        policy="default",
        binary=_codex_native(codex_project),
        env=_env(world),
    )
    _refused_below_floor(world, outcome, "codex")


def test_real_codex_native_binary_copied_out_of_its_package_is_judged_by_its_answer(
    codex_project: Path, tmp_path: Path
) -> None:
    """A copy of the native codex in a plain folder: its ``--version`` answer (0.171.0) is
    below a 1.0.0 floor, so the copy is refused as codex."""
    copy = tmp_path / "bin" / "codex"
    copy.parent.mkdir()
    shutil.copy2(_codex_native(codex_project), copy)
    world = _world(tmp_path, codex="1.0.0")
    outcome = world.spawn("codex", ["--version"], policy="default", env=_env(world, copy.parent))
    _refused_below_floor(world, outcome, "codex")


def test_real_codex_native_binary_copied_under_another_name_is_still_codex(
    codex_project: Path, tmp_path: Path
) -> None:
    """A copy named ``helper`` requested as ``helper``: judged as codex, refused below floor."""
    copy = tmp_path / "bin" / "helper"
    copy.parent.mkdir()
    shutil.copy2(_codex_native(codex_project), copy)
    world = _world(tmp_path, codex="1.0.0")
    outcome = world.spawn("helper", ["--version"], policy="default", env=_env(world, copy.parent))
    assert outcome["outcome"] == "refused", outcome
    world.assert_no_permit_recorded()


# ------------------------------------------------------------------------------- gemini


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_gemini_project_install_esm_bundle_is_permitted(
    gemini_project: Path, tmp_path: Path, policy: str
) -> None:
    """The real gemini 0.61.0 (``node_modules/.bin/gemini`` -> ``bundle/gemini.js``), told not
    to start itself again (``GEMINI_CLI_NO_RELAUNCH=true``): permitted, and it runs."""
    world = _world(tmp_path, gemini="0.50.0")
    outcome = world.spawn(
        "gemini",
        ["--version"],
        policy=policy,
        binary=gemini_project / "node_modules" / ".bin" / "gemini",
        env={**_env(world), "GEMINI_CLI_NO_RELAUNCH": "true"},
        cwd=gemini_project,
    )
    _permitted(world, outcome, GEMINI_VERSION)


def test_real_gemini_relaunching_itself_runs(gemini_project: Path, tmp_path: Path) -> None:
    """gemini relaunches itself (``process.argv[1]``, its ``/proc/self/fd/N`` name) with more
    memory: the descriptor is still open in the relaunched node, which runs the same file."""
    world = _world(tmp_path, gemini="0.50.0")
    outcome = world.spawn(
        "gemini",
        ["--version"],
        policy="default",
        binary=gemini_project / "node_modules" / ".bin" / "gemini",
        env=_env(world),
        cwd=gemini_project,
    )
    _permitted(world, outcome, GEMINI_VERSION)


def test_real_gemini_project_install_below_floor_is_refused(
    gemini_project: Path, tmp_path: Path
) -> None:
    """The same gemini under a floor above it."""
    world = _world(tmp_path, gemini="1.0.0")
    outcome = world.spawn(
        "gemini",
        ["--version"],
        policy="default",
        binary=gemini_project / "node_modules" / ".bin" / "gemini",
        env=_env(world),
        cwd=gemini_project,
    )
    _refused_below_floor(world, outcome, "gemini")


# -------------------------------------------------------------------------------- aider


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_aider_console_script_in_a_venv_is_permitted(
    aider_venv: Path, tmp_path: Path, policy: str
) -> None:
    """``pip install --no-deps aider-chat`` in a venv; ``aider`` on PATH is pip's console
    script (it starts, then fails on the missing dependencies: the child did start)."""
    world = _world(tmp_path, aider="0.60.0")
    outcome = world.spawn(
        "aider", ["--version"], policy=policy, env=_env(world, aider_venv / "bin")
    )
    _permitted(world, outcome)


def test_real_aider_console_script_below_floor_is_refused(aider_venv: Path, tmp_path: Path) -> None:
    """The same aider under a floor above it."""
    world = _world(tmp_path, aider="1.0.0")
    outcome = world.spawn(
        "aider", ["--version"], policy="default", env=_env(world, aider_venv / "bin")
    )
    _refused_below_floor(world, outcome, "aider")


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_aider_pipx_style_symlink_is_permitted(
    aider_venv: Path, tmp_path: Path, policy: str
) -> None:
    """pipx's layout: ``~/.local/bin/aider`` a symlink to the venv's console script."""
    bin_dir = tmp_path / "local-bin"
    bin_dir.mkdir()
    os.symlink(aider_venv / "bin" / "aider", bin_dir / "aider")
    world = _world(tmp_path, aider="0.60.0")
    outcome = world.spawn("aider", ["--version"], policy=policy, env=_env(world, bin_dir))
    _permitted(world, outcome)


def test_real_aider_pipx_style_symlink_below_floor_is_refused(
    aider_venv: Path, tmp_path: Path
) -> None:
    """The pipx-style link under a floor above it."""
    bin_dir = tmp_path / "local-bin"
    bin_dir.mkdir()
    os.symlink(aider_venv / "bin" / "aider", bin_dir / "aider")
    world = _world(tmp_path, aider="1.0.0")
    outcome = world.spawn("aider", ["--version"], policy="default", env=_env(world, bin_dir))
    _refused_below_floor(world, outcome, "aider")


@pytest.mark.parametrize("policy", ["default", DENY_BY_DEFAULT])
def test_real_aider_python_dash_m_with_the_venv_python_is_permitted(
    aider_venv: Path, tmp_path: Path, policy: str
) -> None:
    """``VENV/bin/python -P -m aider --version`` (-P: the working directory off the path)."""
    world = _world(tmp_path, aider="0.60.0")
    outcome = world.spawn(
        "python",
        ["-P", "-m", "aider", "--version"],
        policy=policy,
        binary=aider_venv / "bin" / "python",
        env=_env(world),
    )
    _permitted(world, outcome)


def test_real_aider_python_dash_m_below_floor_is_refused(aider_venv: Path, tmp_path: Path) -> None:
    """``VENV/bin/python -P -m aider`` under a floor above it."""
    world = _world(tmp_path, aider="1.0.0")
    outcome = world.spawn(
        "python",
        ["-P", "-m", "aider", "--version"],
        policy="default",
        binary=aider_venv / "bin" / "python",
        env=_env(world),
    )
    _refused_below_floor(world, outcome, "aider")


def test_zz_report_install_times(installs: Installs) -> None:
    """Not a check: prints how long this session's installs took (``-s`` to see it)."""
    print("install times:", json.dumps({k: round(v, 1) for k, v in INSTALL_TIMES.items()}))
