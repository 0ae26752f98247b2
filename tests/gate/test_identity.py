"""A tracked CLI is judged by what the file is, never by the name it was asked for.

Each attack starts a below-floor agent under another name: a symlink, a copy of its pip
console script, an interpreter invocation. Every agent here is a real install on disk (a
real virtual environment with a real package, a real npm tree run by the real node) that
creates a marker file if it ever runs; the tests assert that it never does.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from hosts import Host, floor, path_with, receipt_in_chain
from probes import marker_script, npm_install, pip_install, printer, real_venv, site_packages
from probes.native import Run, native_agent


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path, {"aider": floor("0.60.0"), "claude": floor("1.0.100")})


def assert_refused_as(result: dict[str, object], host: Host, adapter: str, requested: str) -> None:
    assert not result["started"], result
    assert result["verdict"] == "refuse"
    receipt = receipt_in_chain(host, str(result["receipt_id"]))
    assert (receipt["adapter"], receipt["requested"]) == (adapter, requested)
    assert receipt["verdict"] == "refuse"


def test_refuses_below_floor_aider_behind_a_symlink_named_otherwise(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    script, marker = old_aider
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codey").symlink_to(script)
    [result] = host.spawn(adapter="codey", argv=["task"], child_env={"PATH": path_with(bin_dir)})
    assert_refused_as(result, host, "aider", "codey")
    assert "below the floor 0.60.0" in str(result["message"])
    assert not marker.exists()


def test_refuses_a_copy_of_the_pip_console_script_under_another_name(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    script, marker = old_aider
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(script, bin_dir / "aider-chat")
    [result] = host.spawn(
        adapter="aider-chat", argv=["task"], child_env={"PATH": path_with(bin_dir)}
    )
    assert_refused_as(result, host, "aider", "aider-chat")
    assert not marker.exists()


def test_refuses_python_dash_m_of_a_below_floor_module(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    _, marker = old_aider
    venv_bin = tmp_path / "venv" / "bin"
    [result] = host.spawn(
        adapter="python3", argv=["-m", "aider", "task"], child_env={"PATH": path_with(venv_bin)}
    )
    assert_refused_as(result, host, "aider", "python3")
    assert not marker.exists()


@pytest.mark.parametrize("argv", [["-I", "-m", "aider"], ["-Bm", "aider"], ["-maider.main"]])
def test_refuses_python_dash_m_hidden_among_interpreter_options(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path], argv: list[str]
) -> None:
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    [result] = host.spawn(adapter="python", binary=str(python), argv=argv)
    assert_refused_as(result, host, "aider", "python")
    assert not marker.exists()


def test_refuses_python_running_a_file_of_a_below_floor_distribution(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    main_py = site_packages(tmp_path / "venv") / "aider" / "main.py"
    [result] = host.spawn(adapter="python", binary=str(python), argv=[str(main_py), "task"])
    assert_refused_as(result, host, "aider", "python")
    assert not marker.exists()


def test_refuses_python_dash_m_of_a_catalogued_module_found_through_pythonpath(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # The module lives outside any site-packages the interpreter owns: known by its name.
    _, marker = old_aider
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(site_packages(tmp_path / "venv") / "aider", elsewhere / "aider")
    plain = real_venv(tmp_path / "plain")
    [result] = host.spawn(
        adapter="python",
        binary=str(plain),
        argv=["-m", "aider", "task"],
        child_env={"PYTHONPATH": str(elsewhere)},
    )
    assert not result["started"]
    receipt = receipt_in_chain(host, str(result["receipt_id"]))
    assert receipt["adapter"] == "aider"
    assert not marker.exists()


def test_permits_an_at_floor_aider_asked_for_by_another_name_and_records_both(
    host: Host, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.61.0", marker=marker
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codey").symlink_to(script)
    [result] = host.spawn(adapter="codey", argv=["task"], child_env={"PATH": path_with(bin_dir)})
    assert result["started"], result
    assert marker.exists()
    [record] = host.chain_records()
    receipt = record["receipt"]
    assert (receipt["adapter"], receipt["requested"], receipt["verdict"]) == (
        "aider",
        "codey",
        "permit",
    )
    assert receipt["version"] == "0.61.0"


node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def install_claude(tmp_path: Path, version: str) -> tuple[Path, Path]:
    """A real global npm install of a node CLI packaged as claude; its bin dir and marker."""
    marker = tmp_path / "claude-ran"
    npm_bin = npm_install(
        tmp_path / "usr",
        package="@anthropic-ai/claude-code",
        bin_name="claude",
        version=version,
        marker=marker,
        banner=f"{version} (Claude Code)",
    )
    return npm_bin, marker


@node
def test_refuses_below_floor_npm_cli_behind_a_symlink_named_otherwise(
    host: Host, tmp_path: Path
) -> None:
    npm_bin, marker = install_claude(tmp_path, "1.0.51")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "helper").symlink_to(os.path.realpath(npm_bin / "claude"))
    [result] = host.spawn(adapter="helper", argv=["task"], child_env={"PATH": path_with(bin_dir)})
    assert_refused_as(result, host, "claude", "helper")
    assert not marker.exists()


@node
def test_refuses_node_running_a_below_floor_package_script(host: Host, tmp_path: Path) -> None:
    npm_bin, marker = install_claude(tmp_path, "1.0.51")
    script = os.path.realpath(npm_bin / "claude")
    [result] = host.spawn(adapter="node", argv=["--no-warnings", script, "task"])
    assert_refused_as(result, host, "claude", "node")
    assert not marker.exists()


@node
def test_at_floor_npm_cli_still_runs_and_finds_its_modules_through_the_descriptor(
    host: Host, tmp_path: Path
) -> None:
    npm_bin, marker = install_claude(tmp_path, "1.0.105")
    [result] = host.spawn(adapter="claude", argv=["task"], child_env={"PATH": path_with(npm_bin)})
    assert result["started"], result
    assert result["returncode"] == 0
    assert result["stdout"].strip() == "ran task"
    assert marker.exists()


def test_an_unknown_program_stays_untracked_and_runs(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = marker_script(tmp_path / "bin" / "newagent", marker, "1.2.3")
    [result] = host.spawn(adapter="newagent", argv=[], binary=str(tool))
    assert result["started"]
    [record] = host.chain_records()
    assert record["receipt"]["verdict"] == "untracked"
    assert record["receipt"]["adapter"] == "newagent"


def test_untracked_refuse_policy_refuses_and_records_an_unknown_program(
    host: Host, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    tool = marker_script(tmp_path / "bin" / "newagent", marker, "1.2.3")
    [result] = host.spawn(
        adapter="newagent",
        argv=[],
        binary=str(tool),
        host_env={"FLOORGUARD_UNTRACKED_POLICY": "refuse"},
    )
    assert not result["started"]
    receipt = receipt_in_chain(host, str(result["receipt_id"]))
    assert receipt["verdict"] == "refuse"
    assert "FLOORGUARD_UNTRACKED_POLICY=refuse" in receipt["reason"]
    assert not marker.exists()


@pytest.mark.parametrize("value", ["REFUSE", " refuse", "refuse ", "deny", ""])
def test_untracked_policy_other_than_exactly_refuse_keeps_the_recorded_permit(
    host: Host, tmp_path: Path, value: str
) -> None:
    tool = printer(tmp_path / "bin" / "newagent", "1.2.3\n")
    [result] = host.spawn(
        adapter="newagent",
        argv=[],
        binary=str(tool),
        host_env={"FLOORGUARD_UNTRACKED_POLICY": value},
    )
    assert result["started"]
    receipt = host.chain_records()[0]["receipt"]
    assert receipt["verdict"] == "untracked"
    # (a setting meant to refuse is not ignored in silence: the record and the warning say so)
    said = f"FLOORGUARD_UNTRACKED_POLICY={value!r} is not exactly 'refuse'"
    assert said in receipt["reason"], receipt["reason"]


def test_untracked_refuse_policy_does_not_touch_tracked_adapters(
    host: Host, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.61.0", marker=marker
    )
    [result] = host.spawn(
        adapter="aider",
        argv=[],
        binary=str(script),
        host_env={"FLOORGUARD_UNTRACKED_POLICY": "refuse"},
    )
    assert result["started"], result
    assert host.chain_records()[0]["receipt"]["verdict"] == "permit"


def test_warn_override_and_untracked_are_logged_on_stderr(host: Host, tmp_path: Path) -> None:
    old = printer(tmp_path / "bin" / "claude", "1.0.10 (Claude Code)\n")
    other = printer(tmp_path / "bin" / "newagent", "1.0.0\n")
    code = (
        "import floorguard\n"
        f"floorguard.preflight('claude', binary={str(old)!r})\n"
        f"floorguard.preflight('newagent', binary={str(other)!r})\n"
    )
    done = host.python("-c", code, FLOORGUARD_ADAPTER_FLOOR_POLICY="warn")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert "warn_override" in lines[0] and "claude 1.0.10" in lines[0]
    assert "untracked" in lines[1] and "newagent" in lines[1]


def test_exec_prints_one_line_for_a_warn_override(host: Host, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    native_agent(bin_dir / "claude", version=b"1.0.10 (Claude Code)\n")
    done = host.python(
        "-m",
        "floorguard",
        "exec",
        "claude",
        "--",
        "task",
        PATH=path_with(bin_dir),
        FLOORGUARD_ADAPTER_FLOOR_POLICY="warn",
    )
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "warn_override" in line and "below the floor" in line


def test_exec_message_names_the_identified_and_the_requested_adapter(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    script, marker = old_aider
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codey").symlink_to(script)
    done = host.python("-m", "floorguard", "exec", "codey", "--", "task", PATH=path_with(bin_dir))
    assert done.returncode == 126
    [line] = done.stderr.strip().splitlines()
    assert "aider" in line and "codey" in line
    assert not marker.exists()


def test_python_of_the_test_run_is_not_mistaken_for_an_adapter(host: Host) -> None:
    [result] = host.spawn(adapter="python", binary=sys.executable, argv=["-c", "print('hi')"])
    assert result["started"], result
    assert result["stdout"].strip() == "hi"


def test_refuses_python_dash_c_importing_a_below_floor_module(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    code = "from aider.main import main; main()"
    [result] = host.spawn(adapter="python", binary=str(python), argv=["-c", code])
    assert_refused_as(result, host, "aider", "python")
    assert not marker.exists()


def test_refuses_a_renamed_copy_of_a_binary_that_still_answers_as_a_tracked_adapter(
    host: Host, tmp_path: Path
) -> None:
    # A bundled CLI copied out of its package, or a native binary renamed: no metadata says
    # what it is, but its own --version line does.
    marker = tmp_path / "ran"
    copy = native_agent(
        tmp_path / "bin" / "helper", version=b"1.0.51 (Claude Code)\n", run=Run(marker=marker)
    )
    [result] = host.spawn(adapter="helper", argv=[], binary=str(copy))
    assert_refused_as(result, host, "claude", "helper")
    assert not marker.exists()


def test_an_untracked_binary_printing_a_bare_version_stays_untracked(
    host: Host, tmp_path: Path
) -> None:
    # Bare versions are every tool's answer: only a line that names the tool identifies it.
    tool = printer(tmp_path / "bin" / "newagent", "1.0.51\n")
    [result] = host.spawn(adapter="newagent", argv=[], binary=str(tool))
    assert result["started"]
    assert host.chain_records()[0]["receipt"]["verdict"] == "untracked"


def test_preflight_alone_judges_the_binary_the_name_leads_to(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    script, _ = old_aider
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codey").symlink_to(script)
    for version in (None, "9.9.9"):
        result = host.preflight("codey", version=version, PATH=path_with(bin_dir))
        receipt = receipt_in_chain(host, result["receipt_id"])
        assert (receipt["adapter"], receipt["requested"]) == ("aider", "codey")
    [first, second] = host.chain_records()
    assert first["receipt"]["verdict"] == "refuse"
    # A version the caller states is a claim about that file, which it does not bear out.
    assert second["receipt"]["verdict"] == "refuse"
    assert "the caller states aider (requested as 'codey') 9.9.9" in second["receipt"]["reason"]


def test_a_host_that_configures_logging_receives_overrides_as_warning_records(
    host: Host, tmp_path: Path
) -> None:
    old = printer(tmp_path / "bin" / "claude", "1.0.10 (Claude Code)\n")
    code = (
        "import logging, floorguard\n"
        "seen = []\n"
        "class Keep(logging.Handler):\n"
        "    def emit(self, record): seen.append((record.name, record.levelname))\n"
        "logging.getLogger('floorguard').addHandler(Keep())\n"
        f"d = floorguard.preflight('claude', binary={str(old)!r})\n"
        "print(d.verdict, seen)\n"
    )
    done = host.python("-c", code, FLOORGUARD_ADAPTER_FLOOR_POLICY="warn")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "warn_override [('floorguard', 'WARNING')]"
    assert done.stderr == ""  # the host's handler took it: no second copy on stderr


def test_a_permit_is_not_logged(host: Host, tmp_path: Path) -> None:
    good = printer(tmp_path / "bin" / "claude", "1.0.200 (Claude Code)\n")
    done = host.python(
        "-c", f"import floorguard; floorguard.preflight('claude', binary={str(good)!r})"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize("policy", [None, "warn"])
def test_refuses_a_binary_beside_a_package_manifest_it_cannot_read(
    host: Host, tmp_path: Path, policy: str | None
) -> None:
    # Which package is this? A manifest that is there but not JSON leaves it in doubt: no
    # floor can be chosen, so not even the warn policy lets it run.
    marker = tmp_path / "ran"
    tool = marker_script(tmp_path / "pkg" / "cli.js", marker, "1.0.0")
    (tmp_path / "pkg" / "package.json").write_text("{not json")
    extra = {"FLOORGUARD_ADAPTER_FLOOR_POLICY": policy} if policy else {}
    [result] = host.spawn(adapter="helper", argv=[], binary=str(tool), host_env=extra)
    assert not result["started"]
    receipt = receipt_in_chain(host, str(result["receipt_id"]))
    assert receipt["verdict"] == "refuse"
    assert "cannot tell which adapter" in receipt["reason"]
    assert not marker.exists()


def test_refuses_code_that_imports_two_adapters_at_once(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    venv = tmp_path / "venv"
    pip_install(venv, dist="aider-chat", module="aider", version="0.70.0", marker=marker)
    pip_install(venv, dist="gptme", module="gptme", version="0.30.0", marker=marker)
    code = "import aider.main, gptme.main"
    [result] = host.spawn(adapter="python", binary=str(venv / "bin" / "python"), argv=["-c", code])
    assert not result["started"]
    reason = receipt_in_chain(host, str(result["receipt_id"]))["reason"]
    assert "imports several adapters" in reason
