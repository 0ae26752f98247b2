"""A spawn through ``env`` is judged as the command env runs, in the environment env gives
it: ``env FOO=1 claude`` as ``claude``, ``env npx -y mcp-remote@0.1.15`` as that npx
launch, with env's assignments, ``-i`` and ``-u`` applied first (a PATH it sets decides which
file is found). Whatever env would do that is not modelled (``-S``, ``--chdir``, signal
options, an unknown option, env running env) is a refusal naming it, whatever the policy.
The same holds for an MCP server an agent declares with ``env`` as its command.

Real spawns of the real ``/usr/bin/env`` (GNU coreutils), in process, with native stand-ins
for claude (each leaves a marker when it really runs), a map holding claude's floor and the
GHSA-6xpm-ggf7-wc3p shape for mcp-remote, and a chain of the test's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.advisory_maps import advisory, entry, extended_module, span
from helpers.cli import isolated_env
from probes import node_with_npm
from probes.native import Run, native_agent

import floorguard
from floorguard._chain.chain import AuditChain
from floorguard._identify import identify

ENV = "/usr/bin/env"
MCP_REMOTE = {
    **entry("npm", advisory("GHSA-6xpm-ggf7-wc3p", span("0.0.5", fixed="0.1.16"))),
    "package": "mcp-remote",
    "kind": "mcp-server",
}
MAP = {"claude": entry("npm", floor="1.0.20", floor_id="BSA-0002"), "mcp-remote": MCP_REMOTE}

pytestmark = pytest.mark.skipif(
    not os.path.isfile(ENV) or b"GNU coreutils" not in Path(ENV).read_bytes(),
    reason="GNU coreutils' env is not installed",
)


@dataclass
class Setup:
    root: Path
    old: Path  # a folder whose claude is below the floor
    fixed: Path  # a folder whose claude meets it
    project: Path
    home: Path

    def marker(self, folder: Path) -> Path:
        return self.root / f"{folder.name}-ran"

    def run_env(self, *first: Path, **extra: str) -> dict[str, str]:
        path = ":".join(str(folder) for folder in first or (self.old,))
        return {"PATH": f"{path}:/usr/bin:/bin", "HOME": str(self.home), **extra}

    def spawn(self, *argv: str, env: dict[str, str] | None = None) -> Judged:
        """Spawn ``env ARGV`` (waiting for it when started): its receipt, read back."""
        try:
            child = floorguard.spawn(
                "env", list(argv), env=env or self.run_env(), cwd=str(self.project),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except floorguard.SpawnRefused as refused:
            assert refused.decision is not None, refused
            return self.receipt(refused.decision.receipt_id)
        child.wait(timeout=30)
        return self.receipt()

    def receipt(self, receipt_id: str | None = None) -> Judged:
        """The receipt ``receipt_id`` (None: the last one) of the test's chain."""
        chain = AuditChain.shared({"FLOORGUARD_HOME": str(self.root / "fg")})
        records = [r for r in chain.records() if receipt_id in (None, r.receipt_id)]
        return Judged(dict(records[-1].receipt))


@dataclass(frozen=True)
class Judged:
    """A spawn's receipt, its main fields as attributes."""

    receipt: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.receipt[name]
        except KeyError:
            raise AttributeError(name) from None


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    for variable in ("FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_UNTRACKED_POLICY"):
        monkeypatch.delenv(variable, raising=False)
    module = tmp_path / "host_map.py"
    module.write_text(extended_module(MAP), encoding="utf-8")
    monkeypatch.setenv("FLOORGUARD_FLOOR_MAP", str(module))
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "fg"))
    old, fixed = tmp_path / "old", tmp_path / "fixed"
    project, home = tmp_path / "project", tmp_path / "home"
    for folder in (old, fixed, project, home):
        folder.mkdir()
    made = Setup(tmp_path, old, fixed, project, home)
    npm = node_with_npm(tmp_path / "nodejs")
    for folder, version in ((old, "1.0.10"), (fixed, "1.0.30")):
        native_agent(
            folder / "claude",
            version=f"{version} (Claude Code)\n".encode(),
            run=Run(marker=made.marker(folder)),
        )
        # npx is never run here: its name decides how its command line is read, but it is
        # a program the kernel would start (env's execvp would not pass it over), npm's
        # own script run by a native node, as npm installs it.
        (folder / "npx").symlink_to(npm / "npx")
    identify.clear_cache()
    yield made
    AuditChain.shared({"FLOORGUARD_HOME": str(tmp_path / "fg")}).close()


# ---------------------------------------------------------------------------- what runs


def test_env_with_assignments_running_a_below_floor_claude_is_refused_and_nothing_runs(
    setup: Setup,
) -> None:
    decision = setup.spawn("FOO=1", "claude", "-p", "task")
    assert decision.verdict == "refuse", decision.reason
    assert (decision.adapter, decision.requested, decision.version) == ("claude", "env", "1.0.10")
    assert "below the floor 1.0.20" in decision.reason
    assert decision.binary == str(setup.old / "claude")
    assert not setup.marker(setup.old).exists()


def test_env_running_claude_at_its_floor_is_permitted_and_claude_really_runs(
    setup: Setup,
) -> None:
    decision = setup.spawn("FOO=1", "claude", "-p", "task", env=setup.run_env(setup.fixed))
    assert decision.verdict == "permit", decision.reason
    assert (decision.adapter, decision.version) == ("claude", "1.0.30")
    assert setup.marker(setup.fixed).exists()
    receipt = decision.receipt
    assert receipt["requested"] == "env" and receipt["binary"] == str(setup.fixed / "claude")
    assert receipt["run_through"] == {
        "program": "env",
        "binary": os.path.realpath(ENV),
        "command": "claude",
        "ignores_environment": False,
        "sets": ["FOO"],
        "unsets": [],
    }


def test_a_path_set_by_env_decides_which_claude_is_judged(setup: Setup) -> None:
    """The host's PATH finds the fixed claude, env's assignment the old one: the old one is
    what env runs, and what is refused; and the other way round."""
    to_old = setup.spawn(f"PATH={setup.old}:/usr/bin", "claude", env=setup.run_env(setup.fixed))
    assert to_old.verdict == "refuse" and to_old.version == "1.0.10", to_old.reason
    assert not setup.marker(setup.old).exists()
    to_fixed = setup.spawn(f"PATH={setup.fixed}:/usr/bin", "claude", env=setup.run_env(setup.old))
    assert to_fixed.verdict == "permit" and to_fixed.version == "1.0.30", to_fixed.reason
    assert setup.marker(setup.fixed).exists()


def test_env_i_judges_the_command_in_the_environment_env_builds(setup: Setup) -> None:
    outside = setup.run_env(setup.fixed, npm_config_registry="https://registry.invalid")
    # npx would read the registry variable: refused; -i drops it, and PATH comes from env.
    assert setup.spawn("npx", "-y", "mcp-remote@0.1.16", env=outside).verdict == "refuse"
    for ignore in ("-i", "--ignore-environment", "--ignore-env", "-"):
        cleared = setup.spawn(
            ignore, f"PATH={setup.fixed}:/usr/bin", f"HOME={setup.home}",
            "npx", "-y", "mcp-remote@0.1.16", env=outside,
        )  # fmt: skip
        assert cleared.verdict == "permit", (ignore, cleared.reason)
        assert (cleared.adapter, cleared.version) == ("mcp-remote", "0.1.16")


def test_env_i_without_a_path_is_refused_naming_it(setup: Setup) -> None:
    decision = setup.spawn("-i", "claude", env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse"
    assert "PATH" in decision.reason and "env" in decision.reason, decision.reason
    assert not setup.marker(setup.fixed).exists()


@pytest.mark.parametrize(
    "unset",
    [
        ["-u", "npm_config_registry"],
        ["-unpm_config_registry"],
        ["--unset=npm_config_registry"],
        ["--unset", "npm_config_registry"],
    ],
)
def test_env_u_removes_a_variable_before_the_command_is_judged(
    setup: Setup, unset: list[str]
) -> None:
    outside = setup.run_env(setup.fixed, npm_config_registry="https://registry.invalid")
    decision = setup.spawn(*unset, "npx", "-y", "mcp-remote@0.1.16", env=outside)
    assert decision.verdict == "permit", decision.reason


def test_a_variable_env_sets_is_judged_as_the_commands_own(setup: Setup) -> None:
    decision = setup.spawn(
        "npm_config_registry=https://registry.invalid", "npx", "-y", "mcp-remote@0.1.16",
        env=setup.run_env(setup.fixed),
    )  # fmt: skip
    assert decision.verdict == "refuse"
    assert "npm_config_registry" in decision.reason, decision.reason


def test_env_npx_below_the_fix_is_refused_as_npx_is(setup: Setup) -> None:
    decision = setup.spawn("npx", "-y", "mcp-remote@0.1.15", env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse"
    assert (decision.adapter, decision.version) == ("mcp-remote", "0.1.15")
    assert "GHSA-6xpm-ggf7-wc3p" in decision.reason
    assert decision.identified_by == "npx" and decision.binary == os.path.realpath(
        setup.fixed / "npx"
    )


def test_a_command_path_is_found_from_the_childs_working_directory(setup: Setup) -> None:
    (setup.project / "tools").mkdir()
    os.link(setup.old / "claude", setup.project / "tools" / "claude")
    decision = setup.spawn("./tools/claude", env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse" and decision.version == "1.0.10", decision.reason
    assert decision.binary == str(setup.project / "tools" / "claude")


def test_a_relative_path_entry_env_would_search_is_refused(setup: Setup) -> None:
    decision = setup.spawn(f"PATH=tools:{setup.fixed}", "claude", env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse"
    assert "relative" in decision.reason, decision.reason
    assert not setup.marker(setup.fixed).exists()


def test_a_command_replaced_between_check_and_exec_is_refused_and_nothing_runs(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """env finds its command by name when it runs: the file the check judged must still be
    the one that name leads to right before env is started."""
    from floorguard._gate import launcher

    staged = setup.root / "staged"
    staged.mkdir()
    native_agent(
        staged / "claude", version=b"1.0.10 (Claude Code)\n", run=Run(marker=setup.root / "x")
    )
    monkeypatch.setattr(
        launcher, "_race_window_hook", lambda: os.replace(staged / "claude", setup.fixed / "claude")
    )
    decision = setup.spawn("claude", env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse"
    assert "changed between check and exec" in decision.reason, decision.reason
    assert not (setup.root / "x").exists() and not setup.marker(setup.fixed).exists()


def test_a_command_put_earlier_on_path_after_the_check_is_refused(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    from floorguard._gate import launcher

    first = setup.root / "first"
    first.mkdir()
    monkeypatch.setattr(
        launcher, "_race_window_hook", lambda: os.link(setup.old / "claude", first / "claude")
    )
    decision = setup.spawn("claude", env=setup.run_env(first, setup.fixed))
    assert decision.verdict == "refuse"
    assert f"now resolves to {first / 'claude'}" in decision.reason, decision.reason
    assert not setup.marker(setup.old).exists() and not setup.marker(setup.fixed).exists()


# ---------------------------------------------------------------------------- not modelled


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["-S", "claude -p task"], "-S"),
        (["-Sclaude"], "-S"),
        (["--split-string=claude -p"], "--split-string"),
        (["-vS", "claude"], "-v"),
        (["-C", "/tmp", "claude"], "-C"),
        (["--chdir=/tmp", "claude"], "--chdir"),
        (["--ch", "/tmp", "claude"], "--chdir"),
        (["-P", "/usr/bin", "claude"], "-P"),
        (["--default-signal", "claude"], "--default-signal"),
        (["--ignore-signal=INT", "claude"], "--ignore-signal"),
        (["--block-signal", "claude"], "--block-signal"),
        (["--list-signal-handling", "claude"], "--list-signal-handling"),
        (["-0", "claude"], "-0"),
        (["-v", "claude"], "-v"),
        (["--debug", "claude"], "--debug"),
        (["--frobnicate", "claude"], "--frobnicate"),
        (["--i", "claude"], "--i"),
        (["--ignore-environment=1", "claude"], "--ignore-environment"),
        (["-x", "claude"], "-x"),
        (["-i -u X", "claude"], "-i -u X"),
        (["--version", "claude"], "--version"),
        (["-u", "A=B", "claude"], "A=<hidden>"),  # (a value may be a secret: hidden)
        (["-u"], "-u"),
        (["=x", "claude"], "=<hidden>"),
        (["env", "claude"], "env runs env"),
        (["/usr/bin/env", "-i", "claude"], "env runs env"),
    ],
)
def test_what_env_is_asked_to_do_and_is_not_modelled_is_refused_naming_it(
    setup: Setup, argv: list[str], named: str
) -> None:
    """Under the default policy, where an untracked program is allowed: the command here
    would be a claude meeting its floor, and still nothing runs."""
    decision = setup.spawn(*argv, env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse", (argv, decision.reason)
    assert named in decision.reason and "env" in decision.reason, decision.reason
    assert not setup.marker(setup.fixed).exists()


def test_what_env_does_not_model_is_refused_under_the_warn_policy_too(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOORGUARD_ADAPTER_FLOOR_POLICY", "warn")
    decision = setup.spawn("-S", "claude -p task", env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse", decision.reason


def test_a_loader_variable_env_unsets_still_loads_code_into_env_itself(setup: Setup) -> None:
    """env is a dynamically linked program: LD_PRELOAD loads code into env before it unsets
    anything for its command, and that code may run something else."""
    outside = setup.run_env(setup.fixed, LD_PRELOAD="/tmp/x.so")
    decision = setup.spawn("-u", "LD_PRELOAD", "claude", env=outside)
    assert decision.verdict == "refuse"
    assert "LD_PRELOAD" in decision.reason, decision.reason
    assert not setup.marker(setup.fixed).exists()


@pytest.mark.parametrize(
    ("variable", "value"),
    [("BASH_ENV", "/tmp/x.sh"), ("PERL5OPT", "-Mx"), ("BASH_FUNC_ls%%", "() { id; }")],
)
def test_a_shell_or_runtime_variable_env_removes_does_not_reach_the_command(
    setup: Setup, variable: str, value: str
) -> None:
    """env starts no shell and no runtime: what only a shell or perl the command starts
    would read is judged in the environment env gives the command, not env's own."""
    outside = setup.run_env(setup.fixed, **{variable: value})
    decision = setup.spawn("-u", variable, "claude", env=outside)
    assert decision.verdict == "permit", decision.reason
    assert setup.marker(setup.fixed).exists()
    cleared = setup.spawn("-i", f"PATH={setup.fixed}:/usr/bin:/bin", "claude", env=outside)
    assert cleared.verdict == "permit", cleared.reason


def test_a_shell_variable_env_passes_on_refuses_the_command(setup: Setup) -> None:
    outside = setup.run_env(setup.fixed, BASH_ENV="/tmp/x.sh")
    decision = setup.spawn("-u", "OTHER", "claude", env=outside)
    assert decision.verdict == "refuse" and "BASH_ENV" in decision.reason, decision.reason
    assert not setup.marker(setup.fixed).exists()


def test_env_without_a_command_runs_only_itself_and_is_untracked(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``env FOO=1`` prints an environment and starts nothing: judged as env itself,
    allowed as untracked, refused under deny-by-default."""
    assert setup.spawn("FOO=1").verdict == "untracked"
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    assert setup.spawn("FOO=1").verdict == "refuse"


def test_another_program_named_env_is_refused_not_read_as_env(setup: Setup) -> None:
    """Only env's own code is read as env: a below-floor claude copied under the name env
    is not, and what it would run with these arguments is not understood."""
    fake, marker = setup.root / "fake", setup.root / "fake-ran"
    fake.mkdir()
    native_agent(fake / "env", version=b"1.0.10 (Claude Code)\n", run=Run(marker=marker))
    with pytest.raises(floorguard.SpawnRefused) as refused:
        floorguard.spawn("env", ["true"], binary=str(fake / "env"), env=setup.run_env())
    assert "not recognised as GNU coreutils' or BusyBox's env" in str(refused.value)
    assert not marker.exists()


def test_a_copy_of_env_under_another_name_is_untracked_and_refused_under_deny_by_default(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named gap: the copy is judged as the program it is, like any launcher whose name
    says nothing; deny-by-default refuses it."""
    copy = setup.root / "tools" / "run"
    copy.parent.mkdir()
    shutil.copy2(ENV, copy)
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    with pytest.raises(floorguard.SpawnRefused) as refused:
        floorguard.spawn("run", ["claude"], binary=str(copy), env=setup.run_env(setup.old))
    assert "not a tracked adapter" in str(refused.value)
    assert not setup.marker(setup.old).exists()


# ---------------------------------------------------------------------------- MCP servers


def test_an_mcp_server_run_through_env_npx_refuses_claude_naming_the_server(
    setup: Setup,
) -> None:
    declared = setup.project / ".mcp.json"
    server = {"command": "env", "args": ["npx", "-y", "mcp-remote@0.1.15", "https://x.invalid"]}
    declared.write_text(json.dumps({"mcpServers": {"remote": server}}), encoding="utf-8")
    try:
        floorguard.spawn(
            "claude", ["-p", "task"], env=setup.run_env(setup.fixed), cwd=str(setup.project)
        )
    except floorguard.SpawnRefused as refused:
        reason = str(refused)
    else:
        raise AssertionError("claude was started with a below-fix mcp-remote server")
    for named in ("MCP server 'remote' (mcp-remote 0.1.15, run by env npx", "mcp-remote",
                  "GHSA-6xpm-ggf7-wc3p", str(declared)):  # fmt: skip
        assert named in reason, reason
    assert not setup.marker(setup.fixed).exists()


def test_an_mcp_server_run_through_env_at_the_fix_is_recorded_as_env_ran_it(
    setup: Setup,
) -> None:
    server = {"command": "env", "args": ["FOO=1", "npx", "-y", "mcp-remote@0.1.16"]}
    (setup.project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"remote": server}}), encoding="utf-8"
    )
    child = floorguard.spawn(
        "claude", ["-p", "task"], env=setup.run_env(setup.fixed), cwd=str(setup.project)
    )
    child.wait(timeout=30)
    [entry_] = setup.receipt().mcp_servers
    assert (entry_["verdict"], entry_["adapter"], entry_["version"]) == (
        "permit", "mcp-remote", "0.1.16"
    )  # fmt: skip
    assert entry_["command"] == "env" and entry_["binary"] == os.path.realpath(setup.fixed / "npx")
    assert entry_["run_through"]["command"] == "npx"
    assert entry_["run_through"]["sets"] == ["FOO"]


# ---------------------------------------------------------------------------- command line


def test_floorguard_exec_refuses_env_npx_below_the_fix(setup: Setup) -> None:
    env = isolated_env(
        setup.root / "state",
        FLOORGUARD_FLOOR_MAP=str(setup.root / "host_map.py"),
        PATH=f"{setup.fixed}:/usr/bin:/bin",
        HOME=str(setup.home),
    )
    done = subprocess.run(
        [sys.executable, "-I", "-m", "floorguard", "exec", "env", "--", "npx", "-y",
         "mcp-remote@0.1.15"],
        capture_output=True, text=True, cwd=setup.project, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 126, done
    for named in ("refusing to spawn mcp-remote (requested as 'env')",
                  "mcp-remote (requested as 'npx') 0.1.15 is affected by GHSA-6xpm-ggf7-wc3p",
                  f"(run through {os.path.realpath(ENV)})"):  # fmt: skip
        assert named in done.stderr, done.stderr
