"""Attacks on identification: ways to run a below-floor agent, to have a legitimate at-floor
one refused, or to crash the gate with no recorded decision. Every test asserts the
promised behaviour.

All agents are real files on disk (real venvs, real node scripts) that leave a marker file
when they run; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hosts import Host, floor, path_with, receipt_in_chain
from probes import (
    PIP_WRAPPER,
    npm_install,
    pip_install,
    real_venv,
    site_packages,
    write_executable,
)

node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


# A long attack suite: run by .ci/run after the README's command.
pytestmark = pytest.mark.attack


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path, {"aider": floor("0.60.0"), "claude": floor("1.0.100")})


def exec_cli(host: Host, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return host.python("-m", "floorguard", "exec", *args, **env)


def assert_not_run_and_refused(result: dict[str, object], host: Host, marker: Path) -> None:
    assert not marker.exists(), f"the below-floor agent ran: {result}"
    assert not result["started"], result
    receipt = receipt_in_chain(host, str(result["receipt_id"]))
    assert receipt["verdict"] == "refuse", receipt


# ------------------------------------------------------------------ identification evasions


def test_python_running_the_package_directory_of_a_below_floor_aider_is_refused(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # `python DIR` runs DIR/__main__.py (CPython's documented directory/zip execution). The
    # gate tries to open DIR as a script file, fails, concludes "the interpreter cannot run
    # it either", and judges the bare interpreter: untracked, and the old aider runs.
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    package_dir = site_packages(tmp_path / "venv") / "aider"
    [result] = host.spawn(adapter="python", binary=str(python), argv=[str(package_dir), "task"])
    assert_not_run_and_refused(result, host, marker)


@pytest.mark.parametrize(
    "code",
    [
        "if True: from aider.main import main; main()",
        "try:\n    from aider.main import main\nexcept ImportError:\n    raise\nmain()",
        "def run():\n    from aider.main import main\n    return main()\nrun()",
    ],
    ids=["if", "try", "def"],
)
def test_python_dash_c_with_a_nested_import_statement_is_refused(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path], code: str
) -> None:
    # A plain `from aider.main import main` statement, only not at the top level of the
    # module. The README names importlib/__import__/runpy as gaps, not import statements.
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    [result] = host.spawn(adapter="python", binary=str(python), argv=["-c", code])
    assert_not_run_and_refused(result, host, marker)


def test_python_script_importing_aider_under_a_main_guard_is_refused(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # The most common shape of a hand-written launcher script.
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir()
    script.write_text(
        "import sys\n"
        "if __name__ == '__main__':\n"
        "    from aider.main import main\n"
        "    sys.exit(main())\n"
    )
    [result] = host.spawn(adapter="python", binary=str(python), argv=[str(script), "task"])
    assert_not_run_and_refused(result, host, marker)


def test_python_dash_m_of_a_copy_of_the_console_script_wrapper_is_refused(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # The README: a copy of a pip console-script wrapper "under any name" is identified by
    # its top-level imports. Run as a script it is; run as a module (`python -m codey`) the
    # module's own imports are never read, only its name.
    script, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    shutil.copy(script, shelf / "codey.py")
    [result] = host.spawn(
        adapter="python",
        binary=str(python),
        argv=["-m", "codey", "task"],
        child_env={"PYTHONPATH": str(shelf)},
    )
    assert_not_run_and_refused(result, host, marker)


def test_wrapper_with_an_env_dash_s_shebang_is_identified_by_its_imports(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # `#!/usr/bin/env -S python3 -u` is an ordinary shebang (coreutils env -S). The shebang
    # parser takes "-S" for the interpreter, so the script is not looked at as Python; the
    # --version probe (scrubbed env: no PYTHONPATH) cannot import aider and fails, which for
    # an untracked name is no refusal; the child, with its PYTHONPATH, runs aider 0.50.0.
    _, marker = old_aider
    plain = tmp_path / "plainbin"
    plain.mkdir()
    (plain / "python3").symlink_to(os.path.realpath(sys.executable))
    wrapper = write_executable(
        tmp_path / "bin" / "codey",
        PIP_WRAPPER.format(python="/usr/bin/env -S python3 -u", module="aider.main",
                           function="main"),
    )  # fmt: skip
    [result] = host.spawn(
        adapter="codey",
        argv=["task"],
        binary=str(wrapper),
        child_env={
            "PATH": path_with(plain),
            "PYTHONPATH": str(site_packages(tmp_path / "venv")),
        },
    )
    assert_not_run_and_refused(result, host, marker)


@node
@pytest.mark.parametrize(
    "options",
    [
        ["--dns-result-order", "ipv4first"],
        ["--icu-data-dir", "/nonexistent"],
        ["--diagnostic-dir", "/tmp"],
        ["--openssl-config", "/dev/null"],
    ],
    ids=lambda o: o[0],
)
def test_node_option_with_a_separate_value_does_not_hide_the_script(
    host: Host, tmp_path: Path, options: list[str]
) -> None:
    # node takes `--opt value` as well as `--opt=value` for every option with a value; the
    # gate's list of such options is partial, so the value is taken for the script and the
    # real script (a below-floor claude) is never looked at.
    marker = tmp_path / "claude-ran"
    npm_bin = npm_install(
        tmp_path / "usr",
        package="@anthropic-ai/claude-code",
        bin_name="claude",
        version="1.0.51",
        marker=marker,
        banner="1.0.51 (Claude Code)",
    )
    script = os.path.realpath(npm_bin / "claude")
    [result] = host.spawn(adapter="node", argv=[*options, script, "task"])
    assert_not_run_and_refused(result, host, marker)


# ------------------------------------------------- version from metadata that does not run


def _old_aider_tree(where: Path, marker: Path) -> None:
    """A plain copy of aider 0.50.0's code (no dist-info) in ``where/aider``."""
    package = where / "aider"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text(
        "import pathlib, sys\n"
        "def main():\n"
        f"    pathlib.Path({str(marker)!r}).touch()\n"
        "    print('old aider 0.50.0 ran')\n"
        "    return 0\n"
    )
    (package / "__main__.py").write_text(
        "import sys\nfrom aider.main import main\nsys.exit(main())\n"
    )


@pytest.mark.parametrize("via", ["PYTHONPATH", "cwd"])
def test_python_dash_m_is_not_judged_by_the_metadata_of_a_shadowed_install(
    host: Host, tmp_path: Path, via: str
) -> None:
    # The venv holds aider-chat 0.70.0 (at floor); aider 0.50.0's code sits first on the
    # child's sys.path (PYTHONPATH, or the cwd, which `-m` puts first). The gate finds
    # aider's owner in the venv and permits 0.70.0; the interpreter imports 0.50.0.
    new_marker, old_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.70.0", marker=new_marker
    )
    python = tmp_path / "venv" / "bin" / "python"
    shelf = tmp_path / "shelf"
    _old_aider_tree(shelf, old_marker)
    request: dict[str, object] = {
        "adapter": "python",
        "binary": str(python),
        "argv": ["-m", "aider", "task"],
    }
    if via == "PYTHONPATH":
        request["child_env"] = {"PYTHONPATH": str(shelf)}
    else:
        request["cwd"] = str(shelf)
    host.spawn(**request)
    assert not old_marker.exists(), f"aider 0.50.0 ran under: {host.chain_records()[-1]}"


def test_console_script_is_not_judged_by_the_metadata_of_a_shadowed_install(
    host: Host, tmp_path: Path
) -> None:
    # Same shadowing through the child's PYTHONPATH, for the genuine `aider` console script:
    # the decision says pip-metadata 0.70.0, the code imported is 0.50.0. This is not the
    # README's "writer to the install tree" window: nothing in the install is touched.
    new_marker, old_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.70.0", marker=new_marker
    )
    shelf = tmp_path / "shelf"
    _old_aider_tree(shelf, old_marker)
    host.spawn(
        adapter="aider", argv=["task"], binary=str(script), child_env={"PYTHONPATH": str(shelf)}
    )
    assert not old_marker.exists(), f"aider 0.50.0 ran under: {host.chain_records()[-1]}"


def _newer_python() -> str | None:
    """An interpreter that accepts syntax the host's parser rejects (`type X = int`)."""
    import ast
    import glob

    try:
        ast.parse("type X = int")
        return None  # the host itself is 3.12+: this attack needs an even newer grammar
    except SyntaxError:
        pass
    names = ["python3.12", "python3.13", "python3.14"]
    candidates = [shutil.which(n) for n in names]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "-c", "type X = int"], capture_output=True, check=False)
        if done.returncode == 0:
            return os.path.realpath(candidate)
    return None


def test_python_source_in_a_newer_grammar_than_the_hosts_is_not_waved_through(
    host: Host, tmp_path: Path
) -> None:
    # The host parses -c code (and scripts) with its own `ast`; code the target interpreter
    # accepts but the host's parser does not (3.12's `type` statement under a 3.11 host) is
    # silently "no imports", so `from aider.main import main` next to it goes unseen.
    newer = _newer_python()
    if newer is None:
        pytest.skip("no interpreter with a newer grammar than the host's")
    venv = tmp_path / "venv"
    subprocess.run([newer, "-m", "venv", "--without-pip", str(venv)], check=True)
    marker = tmp_path / "aider-ran"
    pip_install(venv, dist="aider-chat", module="aider", version="0.50.0", marker=marker)
    code = "type Args = list[str]\nfrom aider.main import main\nmain()"
    [result] = host.spawn(adapter="python", binary=str(venv / "bin" / "python"), argv=["-c", code])
    assert_not_run_and_refused(result, host, marker)


def test_python_running_an_unlisted_bytecode_file_of_a_below_floor_aider_is_refused(
    host: Host, tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # Installers that do not precompile (uv's default) leave __pycache__ out of RECORD; the
    # interpreter writes it on first import, inside the package. `python main.cpython-3X.pyc`
    # runs aider's main module; the gate finds it in no RECORD and cannot parse it as source.
    _, marker = old_aider
    python = tmp_path / "venv" / "bin" / "python"
    main_py = site_packages(tmp_path / "venv") / "aider" / "main.py"
    subprocess.run([str(python), "-m", "py_compile", str(main_py)], check=True)
    [pyc] = (main_py.parent / "__pycache__").glob("main.*.pyc")
    [result] = host.spawn(adapter="python", binary=str(python), argv=[str(pyc), "task"])
    assert_not_run_and_refused(result, host, marker)


# ------------------------------------------------------ crashes: no decision, no record


CRASH_HOST = r"""
import json, sys
import floorguard
request = json.loads(sys.argv[1])
try:
    child = floorguard.spawn(request["adapter"], request["argv"], binary=request.get("binary"),
                             stdout=-3, stderr=-3)
    child.wait()
    print(json.dumps({"outcome": "started"}))
except floorguard.SpawnRefused as exc:
    receipt_id = exc.decision and exc.decision.receipt_id
    print(json.dumps({"outcome": "refused", "receipt_id": receipt_id}))
except BaseException as exc:  # what the host sees instead of a decision
    print(json.dumps({"outcome": "crashed", "error": f"{type(exc).__name__}: {exc}"[:300]}))
"""


def spawn_outcome(host: Host, **request: object) -> dict[str, object]:
    done = host.python("-c", CRASH_HOST, json.dumps(request))
    assert done.returncode == 0, done.stderr
    outcome: dict[str, object] = json.loads(done.stdout)
    return outcome


def assert_decided_and_recorded(outcome: dict[str, object], host: Host) -> None:
    assert outcome["outcome"] in ("started", "refused"), outcome
    assert host.chain_records(), "no decision was recorded"


def test_python_dash_c_code_too_deep_for_the_hosts_parser_is_a_recorded_decision(
    host: Host, tmp_path: Path
) -> None:
    # ast.parse raises RecursionError/MemoryError (not SyntaxError) on deeply chained code;
    # identification lets it escape: spawn() raises it, nothing is recorded.
    venv_python = real_venv(tmp_path / "venv")
    code = "x = 1\n" + "y = x" + ".real" * 6000
    outcome = spawn_outcome(host, adapter="python", binary=str(venv_python), argv=["-c", code])
    assert_decided_and_recorded(outcome, host)


def test_exec_cli_answers_deep_code_with_a_decision_not_a_traceback(
    host: Host, tmp_path: Path
) -> None:
    venv_python = real_venv(tmp_path / "venv")
    code = "x = 1\n" + "y = x" + ".real" * 6000
    done = exec_cli(host, "python3", "--", "-c", code, PATH=path_with(venv_python.parent))
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert host.chain_records(), "no decision was recorded"


def test_a_nul_in_an_npm_manifest_bin_entry_is_a_recorded_decision(
    host: Host, tmp_path: Path
) -> None:
    # json allows "\u0000"; os.path.realpath of it raises ValueError inside the npm metadata
    # reader, which nothing catches.
    from probes import npm_layout

    marker = tmp_path / "ran"
    manifest = {
        "name": "@anthropic-ai/claude-code",
        "version": "1.0.105",
        "bin": {"claude": "cli.js", "claude-nul": "cli\u0000.js"},
    }
    bin_dir = npm_layout(
        tmp_path / "usr",
        package="@anthropic-ai/claude-code",
        bin_name="claude",
        version="1.0.105",
        marker=marker,
        script_output="1.0.105 (Claude Code)",
        manifest=manifest,
    )
    outcome = spawn_outcome(host, adapter="claude", argv=[], binary=str(bin_dir / "claude"))
    assert_decided_and_recorded(outcome, host)


def test_a_nul_in_a_record_path_is_a_recorded_decision(host: Host, tmp_path: Path) -> None:
    # RECORD is read with errors="replace" but its paths go to os.path.realpath unchecked.
    marker = tmp_path / "ran"
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.70.0", marker=marker
    )
    [record] = site_packages(tmp_path / "venv").glob("aider_chat-*.dist-info/RECORD")
    record.write_text("aider/\x00odd.py,,\n" + record.read_text())
    outcome = spawn_outcome(host, adapter="aider", argv=[], binary=str(script))
    assert_decided_and_recorded(outcome, host)


# ----------------------------------------------- false refusals of legitimate installs


def test_venv_python_dash_m_aider_at_floor_is_not_refused_for_a_user_site_it_cannot_see(
    host: Host, tmp_path: Path
) -> None:
    # A venv (no system site packages) never imports from ~/.local; the gate still counts a
    # stale `pip install --user aider-chat` there as a second owner, and with two owners it
    # has "no package metadata" and refuses a legitimate aider 0.70.0.
    marker = tmp_path / "ran"
    pip_install(tmp_path / "venv", dist="aider-chat", module="aider", version="0.70.0",
                marker=marker)  # fmt: skip
    python = tmp_path / "venv" / "bin" / "python"
    home = tmp_path / "userhome"
    user_site = home / ".local" / "lib" / f"python3.{sys.version_info[1]}" / "site-packages"
    info = user_site / "aider_chat-0.40.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aider-chat\nVersion: 0.40.0\n")
    (info / "top_level.txt").write_text("aider\n")
    (info / "RECORD").write_text("aider/__init__.py,,\n")
    check = subprocess.run(
        [str(python), "-c", "import aider, sys; print(aider.__file__)"],
        env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(tmp_path / "venv") in check.stdout  # the venv's aider is what imports
    [result] = host.spawn(
        adapter="python",
        binary=str(python),
        argv=["-P", "-m", "aider", "task"],
        child_env={"HOME": str(home)},
    )
    assert result["started"], result
    assert marker.exists()


def test_an_at_floor_npm_cli_whose_entry_sits_under_a_type_only_package_json_is_not_refused(
    host: Host, tmp_path: Path
) -> None:
    # Dual-build packages ship `dist/package.json` = {"type": "module"} (no name: it only sets
    # the module system for that folder). The gate takes the nearest package.json as the
    # package's and refuses: "cannot tell which adapter claude is: ... names no package".
    from probes import marker_script

    marker = tmp_path / "ran"
    package = tmp_path / "usr" / "lib" / "node_modules" / "@anthropic-ai" / "claude-code"
    marker_script(package / "dist" / "cli.js", marker, "1.0.105 (Claude Code)")
    (package / "dist" / "package.json").write_text('{"type": "module"}')
    manifest = {"name": "@anthropic-ai/claude-code", "version": "1.0.105"}
    manifest["bin"] = {"claude": "dist/cli.js"}
    (package / "package.json").write_text(json.dumps(manifest))
    bin_dir = tmp_path / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "claude").symlink_to(package / "dist" / "cli.js")
    [result] = host.spawn(adapter="claude", argv=[], child_env={"PATH": path_with(bin_dir)})
    assert result["started"], result


# ------------------------------------------------------------ stale verdicts in a long host


STALE_HOST = r"""
import json, os, sys, pathlib, subprocess
import floorguard

request = json.loads(sys.argv[1])
env = dict(os.environ, PATH=request["path"])
env.pop("PYTHONPATH")  # (the host's own, for its copy of floorguard)
outcomes = []
for step in ("before", "after"):
    if step == "after":
        for rel, text in request["downgrade"].items():
            pathlib.Path(rel).write_text(text)
    try:
        child = floorguard.spawn("aider", ["task"], binary=request["binary"], env=env,
                                 stdout=subprocess.DEVNULL)
        child.wait()
        outcomes.append("started")
    except floorguard.SpawnRefused as exc:
        outcomes.append("refused")
print(json.dumps(outcomes))
"""


def test_a_downgrade_under_a_long_lived_host_is_not_judged_by_a_cached_probe(
    host: Host, tmp_path: Path
) -> None:
    # A hand-written `aider` launcher (`#!/usr/bin/env python3`, importing aider.main: the
    # README's pip-script rule) has its version probed, and the probe is cached per the
    # launcher's own identity. `pip install aider-chat==0.50.0` rewrites aider's modules and
    # METADATA, not the launcher: the next spawn in the same host reuses "0.70.0" and runs
    # 0.50.0.
    new_marker, old_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    pip_install(tmp_path / "venv", dist="aider-chat", module="aider", version="0.70.0",
                marker=new_marker)  # fmt: skip
    site = site_packages(tmp_path / "venv")
    launcher = write_executable(
        tmp_path / "tools" / "aider",
        "#!/usr/bin/env python3\nimport sys\nfrom aider.main import main\nsys.exit(main())\n",
    )
    main_050 = (site / "aider" / "main.py").read_text().replace("0.70.0", "0.50.0")
    main_050 = main_050.replace(str(new_marker), str(old_marker))
    main_050 += "# 0.50.0\n"  # another size: the interpreter must not reuse 0.70.0's bytecode
    [info] = site.glob("aider_chat-*.dist-info")
    metadata_050 = (info / "METADATA").read_text().replace("0.70.0", "0.50.0")
    request = {
        "binary": str(launcher),
        "path": path_with(tmp_path / "venv" / "bin"),
        "downgrade": {
            str(site / "aider" / "main.py"): main_050,
            str(info / "METADATA"): metadata_050,
        },
    }
    done = host.python("-c", STALE_HOST, json.dumps(request))
    assert done.returncode == 0, done.stderr
    before, after = json.loads(done.stdout)
    print(before, after)
    assert before == "started" and new_marker.exists()  # 0.70.0 at floor: fine
    assert not old_marker.exists(), f"aider 0.50.0 ran after the downgrade ({after})"


# ------------------------------------------------------------ verdict / record mismatches


def test_exec_of_a_missing_untracked_binary_records_no_allowance_and_prints_one_line(
    host: Host, tmp_path: Path
) -> None:
    # spawn() cannot open the binary, asks decide() anyway, which seals an `untracked`
    # (allowed) decision and logs it, then overrules it with a recorded refusal. The chain
    # says a spawn was allowed that never ran, and exec prints two lines for one refusal.
    done = exec_cli(host, "newagent-missing", "--", "x", PATH=str(tmp_path / "empty"))
    assert done.returncode == 127  # not found: the shell's status
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    verdicts = [r["receipt"]["verdict"] for r in host.chain_records()]
    assert verdicts == ["refuse"], verdicts


# ------------------------------------------------ trusting a name to mean "interpreter"


def test_a_below_floor_agent_named_python_is_not_judged_as_the_module_its_argv_names(
    tmp_path: Path, old_aider: tuple[Path, Path]
) -> None:
    # Any file requested or located as `python` is taken for an interpreter without checking
    # that it is one. Here `python` is a symlink to aider 0.50.0's console script; its argv
    # `-m gptme` and a gptme-0.30.0 dist-info on PYTHONPATH make the gate apply gptme's floor
    # and permit. The file that runs is aider's (the floor applied must be "that of the
    # adapter the binary *is*").
    host = Host(tmp_path / "h", {"aider": floor("0.60.0"), "gptme": floor("0.27.0")})
    script, marker = old_aider
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(script)
    shelf = tmp_path / "shelf"
    info = shelf / "gptme-0.30.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gptme\nVersion: 0.30.0\n")
    (info / "top_level.txt").write_text("gptme\n")
    (info / "RECORD").write_text("gptme/__init__.py,,\n")
    [result] = host.spawn(
        adapter="python",
        argv=["-m", "gptme", "task"],
        child_env={"PATH": path_with(bin_dir), "PYTHONPATH": str(shelf)},
    )
    assert_not_run_and_refused(result, host, marker)
