"""A closed world at the spawn, other spellings: Python programs that use only
what the README calls understood (``sys``, ``os``, ``os.path``, ``re`` and catalogued
imports) yet reach the import system through other spellings, interpreter options that
change which bytecode is loaded, ``#!`` lines as the kernel really reads them, a host whose
own environment reaches the child, and answers reused across spawns of one host process.

Each attack asserts the safe outcome: refused and recorded, the old marker absent. Every
test runs under the default policy and under deny-by-default.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.closed_world import NODE, RUN_AIDER, Outcome, Venv, World, needs_node
from probes import write_executable

pytestmark = pytest.mark.attack


def script_spawn(world: World, policy: str, tmp_path: Path, new: Venv, body: str, **env: str):  # type: ignore[no-untyped-def]
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(body, encoding="utf-8")
    return world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=policy, env=world.env(**env)
    )


def insert_old(old: Venv) -> str:
    return repr(str(old.site))


# ============================================== sys reached through other spellings


def test_sys_reached_through_a_builtin_functions_self(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``sys.exit.__self__`` is the sys module: ``sys.exit.__self__.path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\nsys.exit.__self__.path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "__self__", "sys")


def test_sys_reached_through_os_path_function_globals(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``os.path.join.__globals__['sys']`` is posixpath's sys."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        f"import os.path\nos.path.join.__globals__['sys'].path.insert(0, {insert_old(old)})\n"
        + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "__globals__", "os.path")


def test_sys_bound_by_a_match_class_pattern(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``match sys: case object(path=p): p.insert(0, OLD)``: a class pattern reads an attribute."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import sys\nmatch sys:\n    case object(path=p):\n"
        f"        p.insert(0, {insert_old(old)})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "match", "path", "sys")


def test_os_execv_bound_by_a_match_class_pattern(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``match os: case object(execv=x)``: the old venv's python replaces the process."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import os\nimport aider.main\nmatch os:\n    case object(execv=x):\n"
        f"        x({str(old.python)!r}, [{str(old.python)!r}, '-m', 'aider', 'task'])\n"
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "match", "execv", "os")


def test_sys_bound_as_a_default_argument(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``def f(m=sys): m.path.insert(0, OLD)``: the module reaches a parameter."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\ndef f(m=sys):\n    m.path.insert(0, {insert_old(old)})\nf()\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_passed_to_a_lambda(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``(lambda m: m.path.insert(0, OLD))(sys)``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\n(lambda m: m.path.insert(0, {insert_old(old)}))(sys)\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_through_a_list_subscript(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``[sys][0].path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\n[sys][0].path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_through_a_walrus_alias(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``(m := sys)`` then ``m.path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\n(m := sys)\nm.path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys", "m.path", ":=")


def test_sys_through_an_exception_argument(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``raise ValueError(sys)`` caught, then ``e.args[0].path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import sys\ntry:\n    raise ValueError(sys)\nexcept ValueError as e:\n"
        f"    e.args[0].path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_through_a_comprehension_variable(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``[m.path.insert(0, OLD) for m in (sys,)]``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\n[m.path.insert(0, {insert_old(old)}) for m in (sys,)]\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_through_a_class_attribute(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``class C: m = sys`` then ``C.m.path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\nclass C:\n    m = sys\nC.m.path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_through_a_decorator(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``@(lambda f: f(sys))`` applied to a function editing its argument's path."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import sys\n@(lambda f: f(sys))\n"
        f"def g(m):\n    m.path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_through_a_re_callback(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``re.sub('x', lambda _, s=sys: ..., 'x')``: a callback with the module as default."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import re, sys\n"
        f"re.sub('x', lambda _, s=sys: s.path.insert(0, {insert_old(old)}) or '', 'x')\n"
        + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys")


def test_sys_path_inside_an_f_string(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``f"{sys.path.insert(0, OLD)}"``: the edit inside a formatted value."""
    new, old = world.new_aider(), world.old_aider()
    body = f'import sys\nf"{{sys.path.insert(0, {insert_old(old)})}}"\n' + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys.path", "path")


def test_sys_through_type_getattribute(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``type(sys).__getattribute__(sys, 'path')``: getattr without the name ``getattr``."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import sys\n"
        f"type(sys).__getattribute__(sys, 'path').insert(0, {insert_old(old)})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "sys", "__getattribute__", "type")


def test_sys_through_object_subclasses_wrap_close_globals(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``object.__subclasses__()`` to ``os._wrap_close.__init__.__globals__['sys']``."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import sys\n"
        "k = [c for c in ().__class__.__base__.__subclasses__()\n"
        "     if c.__name__ == '_wrap_close'][0]\n"
        f"k.__init__.__globals__['sys'].path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "__subclasses__", "__globals__", "__class__")


def test_sys_modules_through_a_catalogued_functions_globals(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``main.__globals__['sys']`` of the new aider: drop it from sys.modules, put the old
    site first and import aider again."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "from aider.main import main\n"
        "s = main.__globals__['sys']\n"
        "[s.modules.pop(k) for k in list(s.modules) if k.startswith('aider')]\n"
        f"s.path.insert(0, {insert_old(old)})\n"
        "from aider.main import main as again\nagain()\n"
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "__globals__", "sys")


def test_exec_through_the_globals_builtins(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``globals()['__builtins__'].exec(CODE)``: exec without its name as a call."""
    new, old = world.new_aider(), world.old_aider()
    code = f"import sys; sys.path.insert(0, {insert_old(old)})"
    body = f"import sys\nglobals()['__builtins__'].exec({code!r})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "globals", "__builtins__", "exec")


def test_dash_c_with_sys_reached_through_a_builtin_functions_self(
    world: World, untracked_policy: str
) -> None:
    """``python -c`` with ``sys.exit.__self__.path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    code = f"import sys; sys.exit.__self__.path.insert(0, {insert_old(old)}); " + (
        "from aider.main import main; main()"
    )
    outcome = world.spawn(
        "python", ["-c", code, "task"], binary=new.python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "__self__", "sys")


# ======================================================== variables and options


def test_pythonbreakpoint_importing_a_workspace_module(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """PYTHONBREAKPOINT names a module in the cwd that ``breakpoint()`` imports; it runs the
    old aider's main file."""
    new, old = world.new_aider(), world.old_aider()
    work = tmp_path / "bp"
    work.mkdir()
    (work / "oldrun.py").write_text(
        f"import sys\nsys.path.insert(0, {insert_old(old)})\n"
        "for k in [k for k in sys.modules if k.startswith('aider')]:\n    del sys.modules[k]\n"
        "def hook(*a, **k):\n    from aider.main import main\n    main()\n",
        encoding="utf-8",
    )
    outcome = world.spawn(
        "python", ["-c", "import aider.main\nbreakpoint()", "task"], binary=new.python,
        policy=untracked_policy, env=world.env(PYTHONBREAKPOINT="oldrun.hook"), cwd=work,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONBREAKPOINT", "breakpoint")


def test_pythonplatlibdir_is_not_loaded_silently(world: World, untracked_policy: str) -> None:
    """PYTHONPLATLIBDIR moves where site looks for site-packages: refused, named."""
    old = world.old_aider()
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy,
        env=world.env(old.prefix / "bin", PYTHONPLATLIBDIR="lib64"),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPLATLIBDIR", "below")


# ================================================================== #! lines


def test_shebang_with_a_carriage_return_runs_another_interpreter(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!NEW/python\\r``: the kernel keeps the CR and runs the file named ``python\\r``
    (here a script exec'ing the old venv's python), not NEW/python."""
    new, old = world.new_aider(), world.old_aider()
    write_executable(new.prefix / "bin" / "python\r", f'#!/bin/sh\nexec {old.python} "$@"\n')
    script = write_executable(tmp_path / "bin" / "aider", f"#!{new.python}\r\n" + RUN_AIDER)
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "python", "\\r", "interpreter")


def test_shebang_with_spaces_and_a_tab_before_the_old_interpreter(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#! \\t OLD/python``: the kernel skips the blanks."""
    old = world.old_aider()
    script = write_executable(tmp_path / "bin" / "aider", f"#! \t {old.python}\n" + RUN_AIDER)
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0", "below")


def test_legit_shebang_with_spaces_and_a_tab_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#! \\t NEW/python`` running the new aider."""
    new = world.new_aider()
    script = write_executable(tmp_path / "bin" / "aider", f"#! \t {new.python}\n" + RUN_AIDER)
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_shebang_over_the_kernels_limit_drops_a_trailing_dash_e(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!NEW/python -sss...sE`` past 256 bytes: the kernel cuts the option string before
    ``E``, so PYTHONPATH (the old site) is followed after all."""
    new, old = world.new_aider(), world.old_aider()
    head = f"#!{new.python} -"
    opts = "s" * (300 - len(head)) + "E"
    script = write_executable(tmp_path / "bin" / "aider", head + opts + "\n" + RUN_AIDER)
    outcome = world.spawn(
        "aider", ["task"], binary=script, policy=untracked_policy,
        env=world.env(PYTHONPATH=str(old.site)),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "#!", "256", "long")


def test_env_dash_s_shebang_over_the_kernels_limit_drops_a_trailing_dash_i(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env -S NEW/python <blanks> -I`` past 256 bytes: ``-I`` never reaches
    env, and PYTHONPATH (the old site) is followed."""
    new, old = world.new_aider(), world.old_aider()
    head = f"#!/usr/bin/env -S {new.python}"
    line = head + " " * (300 - len(head)) + "-I"
    script = write_executable(tmp_path / "bin" / "aider", line + "\n" + RUN_AIDER)
    outcome = world.spawn(
        "aider", ["task"], binary=script, policy=untracked_policy,
        env=world.env(PYTHONPATH=str(old.site)),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "#!", "256", "long")


def test_env_dash_s_long_chdir_option_then_dash_m(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``env -S --chdir=OLD_SITE NEW/python -m aider``: the long spelling of ``-C``."""
    new, old = world.new_aider(), world.old_aider()
    script = write_executable(
        tmp_path / "bin" / "aider",
        f"#!/usr/bin/env -S --chdir={old.site} {new.python} -m aider\n",
    )
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "chdir", "env")


def test_env_dash_s_backslash_c_drops_a_trailing_dash_e(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``env -S 'NEW/python \\c -E'``: env ignores everything after ``\\c``."""
    new, old = world.new_aider(), world.old_aider()
    script = write_executable(
        tmp_path / "bin" / "aider", f"#!/usr/bin/env -S {new.python} \\c -E\n" + RUN_AIDER
    )
    outcome = world.spawn(
        "aider", ["task"], binary=script, policy=untracked_policy,
        env=world.env(PYTHONPATH=str(old.site)),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "\\c", "env")


def test_env_dash_s_comment_drops_a_trailing_dash_e(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``env -S 'NEW/python #-E'``: a word starting with ``#`` begins a comment for env."""
    new, old = world.new_aider(), world.old_aider()
    script = write_executable(
        tmp_path / "bin" / "aider", f"#!/usr/bin/env -S {new.python} #-E\n" + RUN_AIDER
    )
    outcome = world.spawn(
        "aider", ["task"], binary=script, policy=untracked_policy,
        env=world.env(PYTHONPATH=str(old.site)),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "#", "env")


def test_env_dash_s_double_dash_then_an_assignment(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``env -S '-- PYTHONPATH=OLD NEW/python'``: after ``--`` env still takes assignments."""
    new, old = world.new_aider(), world.old_aider()
    script = write_executable(
        tmp_path / "bin" / "aider",
        f"#!/usr/bin/env -S -- PYTHONPATH={old.site} {new.python}\n" + RUN_AIDER,
    )
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "env", "--")


# ====================================================== names and interpreters


@needs_node
def test_copy_of_node_named_claude_running_the_old_cli(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A copy of node named ``claude`` answers ``v20.x`` to ``--version``; it runs the old cli."""
    old = world.old_claude()
    fake = tmp_path / "fake" / "claude"
    fake.parent.mkdir()
    shutil.copy2(os.path.realpath(NODE), fake)
    outcome = world.spawn("claude", [str(old.cli), "task"], binary=fake, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "claude", "version")


@needs_node
def test_copy_of_node_named_node_dev_under_claudes_name(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node-dev`` (a copy of node) requested as claude, running the old cli."""
    old = world.old_claude()
    fake = tmp_path / "fake" / "node-dev"
    fake.parent.mkdir()
    shutil.copy2(os.path.realpath(NODE), fake)
    outcome = world.spawn("claude", [str(old.cli), "task"], binary=fake, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "claude", "version", "node")


def test_legit_dash_m_of_the_main_submodule_runs(world: World, untracked_policy: str) -> None:
    """``python -P -m aider.main`` with the new venv's python."""
    new = world.new_aider()
    outcome = world.spawn(
        "python", ["-P", "-m", "aider.main", "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_dash_m_of_a_submodule_shadowed_by_a_pth_path_ahead(
    world: World, untracked_policy: str
) -> None:
    """A ``.pth`` path line in the new venv puts a folder with a whole old ``aider`` ... after
    site-packages; ``-m aider.main`` must still be the new one, or refused."""
    new, old = world.new_aider(), world.old_aider()
    (new.site / "00-extra.pth").write_text(str(old.site) + "\n", encoding="utf-8")
    outcome = world.spawn(
        "python", ["-P", "-m", "aider.main", "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    assert not old.marker.exists(), outcome
    if outcome["outcome"] == "started":
        world.assert_permitted_and_ran(outcome, new.marker)


# ============================================== the host's own environment (env=None)

MULTI_HOST = r"""
import json, os, sys, shutil
import floorguard
request = json.loads(sys.argv[1])
results = []
for step in request["steps"]:
    act = step.get("act")
    if act == "write":
        st = os.stat(step["path"])
        with open(step["path"], "wb") as f:
            f.write(step["data"].encode())
        os.utime(step["path"], ns=(st.st_atime_ns, st.st_mtime_ns))
        continue
    if act == "copytree":
        parent = os.path.dirname(step["dst"].rstrip("/"))
        st = os.stat(parent)
        shutil.copytree(step["src"], step["dst"])
        os.utime(parent, ns=(st.st_atime_ns, st.st_mtime_ns))
        continue
    if act == "swap":
        st = os.stat(step["a"])
        os.rename(step["a"], step["a"] + ".away")
        os.rename(step["b"], step["a"])
        os.utime(step["a"], ns=(st.st_atime_ns, st.st_mtime_ns))
        continue
    out = {"outcome": None}
    try:
        child = floorguard.spawn(step["adapter"], step["argv"], binary=step.get("binary"),
                                 env=step.get("env"), cwd=step.get("cwd"),
                                 stdout=-1, stderr=-1, text=True)
        stdout, stderr = child.communicate(timeout=60)
        out.update(outcome="started", returncode=child.returncode, stdout=stdout, stderr=stderr)
    except floorguard.SpawnRefused as exc:
        d = exc.decision
        out.update(outcome="refused", message=str(exc))
        if d is not None:
            out.update(verdict=d.verdict, reason=d.reason, adapter=d.adapter,
                       requested=d.requested, version=d.version, floor=d.floor,
                       receipt_id=d.receipt_id, identified_by=d.identified_by)
    except Exception as exc:
        out.update(outcome="error", error=f"{type(exc).__name__}: {exc}")
    results.append(out)
print(json.dumps(results))
"""


def multi(world: World, policy: str, steps: list[dict[str, Any]], **host_env: str) -> list[Outcome]:
    """Several spawns (and file actions between them) in one host process."""
    if policy == "deny-by-default":
        host_env["FLOORGUARD_UNTRACKED_POLICY"] = "refuse"
    for step in steps:
        for key in ("binary", "cwd"):
            if step.get(key) is not None:
                step[key] = str(step[key])
    done = world.host.python("-c", MULTI_HOST, json.dumps({"steps": steps}), **host_env)
    assert done.returncode == 0, done.stderr
    return [Outcome(o, policy) for o in json.loads(done.stdout)]


def test_env_none_passes_the_hosts_pythonpath_holding_old_aider(
    world: World, untracked_policy: str
) -> None:
    """``env=None``: the host's own PYTHONPATH (here its site folder, where an old aider was
    also installed) reaches the child and must be judged."""
    new, old = world.new_aider(), world.old_aider()
    for entry in old.site.iterdir():
        if entry.name.startswith("aider"):
            shutil.copytree(entry, world.host.site / entry.name)
    [outcome] = multi(
        world, untracked_policy,
        [{"adapter": "aider", "argv": ["task"], "binary": new.script, "env": None}],
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "outside every site folder")


@needs_node
def test_env_none_passes_the_hosts_node_options(world: World, untracked_policy: str) -> None:
    """``env=None`` with ``NODE_OPTIONS=--require OLD`` in the host's environment."""
    new, old = world.new_claude(), world.old_claude()
    [outcome] = multi(
        world, untracked_policy,
        [{"adapter": "claude", "argv": ["task"], "binary": new.bin_dir / "claude", "env": None}],
        NODE_OPTIONS=f"--require={old.cli}",
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "NODE_OPTIONS", "require")


# ============================================================ answers reused


def test_cache_script_rewritten_with_the_same_size_and_mtime(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """Two spawns of one script in one host; between them the script is rewritten to insert
    the old site (same length, mtime restored)."""
    new, old = world.new_aider(), world.old_aider()
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir()
    bad = f"import sys\nsys.path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    good = f"import sys\n#{'x' * (len(bad) - len(RUN_AIDER) - len('import sys') - 3)}\n" + RUN_AIDER
    assert len(good) == len(bad), (len(good), len(bad))
    script.write_text(good, encoding="utf-8")
    spawn = {"adapter": "python", "argv": [str(script), "task"], "binary": new.python,
             "env": world.env()}  # fmt: skip
    first, second = multi(
        world, untracked_policy,
        [dict(spawn), {"act": "write", "path": str(script), "data": bad}, dict(spawn)],
    )  # fmt: skip
    assert first["outcome"] == "started", first
    new.marker.unlink()
    world.assert_refused(second, old.marker, "sys.path", "path", "sys")


def test_cache_cwd_differs_between_two_dash_m_spawns(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``-P -m aider`` with ``PYTHONPATH=.`` twice, the second in a working directory
    holding the old aider (the relative entry is that directory)."""
    new, old = world.new_aider(), world.old_aider()
    clean, dirty = tmp_path / "clean", tmp_path / "dirty"
    clean.mkdir()
    dirty.mkdir()
    for entry in old.site.iterdir():
        if entry.name.startswith("aider"):
            shutil.copytree(entry, dirty / entry.name)
    spawn = {"adapter": "python", "argv": ["-P", "-m", "aider", "task"], "binary": new.python,
             "env": world.env(PYTHONPATH=".")}  # fmt: skip
    first, second = multi(world, untracked_policy, [dict(spawn, cwd=clean), dict(spawn, cwd=dirty)])
    assert first["outcome"] == "started", first
    world.assert_refused(second, old.marker, "0.50.0", "below", "shadows")


def test_cache_script_folder_swapped_by_rename(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """The script's folder is replaced by rename between two spawns of one host with a folder
    whose same-sized, same-mtime script inserts the old site."""
    new, old = world.new_aider(), world.old_aider()
    bad = f"import sys\nsys.path.insert(0, {insert_old(old)})\n" + RUN_AIDER
    good = f"import sys\n#{'x' * (len(bad) - len(RUN_AIDER) - 13)}\n" + RUN_AIDER
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (work / "run_agent.py").write_text(good, encoding="utf-8")
    (other / "run_agent.py").write_text(bad, encoding="utf-8")
    st = os.stat(work / "run_agent.py")
    os.utime(other / "run_agent.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    spawn = {"adapter": "python", "argv": [str(work / "run_agent.py"), "task"],
             "binary": new.python, "env": world.env()}  # fmt: skip
    first, second = multi(
        world, untracked_policy,
        [dict(spawn), {"act": "swap", "a": str(work), "b": str(other)}, dict(spawn)],
    )  # fmt: skip
    assert first["outcome"] == "started", first
    world.assert_refused(second, old.marker, "sys.path", "path", "sys")


def test_shebang_over_the_kernels_limit_drops_a_trailing_dash_p(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!NEW/python -sss...sP`` past 256 bytes, with an old aider copied beside the
    script: the kernel drops ``P``, so the script's folder comes first (workspace files
    only)."""
    new, old = world.new_aider(), world.old_aider()
    work = tmp_path / "ws"
    for entry in old.site.iterdir():
        if entry.name.startswith("aider"):
            shutil.copytree(entry, work / entry.name)
    head = f"#!{new.python} -"
    opts = "s" * (300 - len(head)) + "P"
    script = write_executable(work / "agent", head + opts + "\n" + RUN_AIDER)
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "#!", "256", "long", "outside every site")


# ================================================================ more #! lines


def old_exec_script(path: Path, old: Venv) -> Path:
    """A shell script at ``path`` that execs the old venv's python with its arguments."""
    return write_executable(path, f'#!/bin/sh\nexec {old.python} "$@"\n')


def test_env_shebang_with_a_carriage_return_finds_another_program_on_path(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env python3\\r``: env looks up ``python3\\r``, which a workspace folder
    first on PATH provides (it execs the old venv's python); the new venv's python3 is what
    ``python3`` would find."""
    new, old = world.new_aider(), world.old_aider()
    ws_bin = tmp_path / "wsbin"
    old_exec_script(ws_bin / "python3\r", old)
    script = write_executable(tmp_path / "bin" / "aider", "#!/usr/bin/env python3\r\n" + RUN_AIDER)
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env(ws_bin, new.prefix / "bin"))  # fmt: skip
    world.assert_refused(outcome, old.marker, "python3", "\\r", "env", "launcher", "script")


def test_env_shebang_without_dash_s_looks_up_the_whole_rest_as_one_name(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env python3 -E``: without ``-S`` env looks up a program named
    ``python3 -E`` (a workspace shell script exec'ing the old python), not python3."""
    new, old = world.new_aider(), world.old_aider()
    ws_bin = tmp_path / "wsbin"
    old_exec_script(ws_bin / "python3 -E", old)
    script = write_executable(tmp_path / "bin" / "aider", "#!/usr/bin/env python3 -E\n" + RUN_AIDER)
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env(ws_bin, new.prefix / "bin"))  # fmt: skip
    world.assert_refused(outcome, old.marker, "python3 -E", "env", "launcher", "script")


def test_shebang_with_a_tab_between_interpreter_and_option(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!NEW/python\\t-E`` hides nothing: a tab separates like a space; PYTHONPATH ignored."""
    new, old = world.new_aider(), world.old_aider()
    script = write_executable(tmp_path / "bin" / "aider", f"#!{new.python}\t-E\n" + RUN_AIDER)
    outcome = world.spawn(
        "aider", ["task"], binary=script, policy=untracked_policy,
        env=world.env(PYTHONPATH=str(old.site)),
    )  # fmt: skip
    assert not old.marker.exists(), outcome
    if outcome["outcome"] == "started":
        world.assert_permitted_and_ran(outcome, new.marker)


# ===================================================== more program spellings


def test_star_import_from_sys_then_a_bare_path_insert(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``from sys import *`` binds ``path``; ``path.insert(0, OLD)``."""
    new, old = world.new_aider(), world.old_aider()
    body = f"from sys import *\npath.insert(0, {insert_old(old)})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "*", "sys")


def test_star_import_from_os_then_a_bare_execv(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``from os import *`` binds ``execv``: the old python replaces the process."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import aider.main\nfrom os import *\n"
        f"execv({str(old.python)!r}, [{str(old.python)!r}, '-m', 'aider', 'task'])\n"
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "*", "os", "execv")


def test_builtins_imported_from_a_catalogued_module(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``from aider.main import __builtins__ as b``; ``b['exec'](CODE)``."""
    new, old = world.new_aider(), world.old_aider()
    code = f"import sys; sys.path.insert(0, {insert_old(old)})"
    body = (
        "import sys\nfrom aider import __builtins__ as b\n"
        f"(b['exec'] if isinstance(b, dict) else b.exec)({code!r})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "__builtins__", "exec")


def test_bare_builtins_dict_exec(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``__builtins__.__dict__['exec'](CODE)`` in a script (``__builtins__`` is the module)."""
    new, old = world.new_aider(), world.old_aider()
    code = f"import sys; sys.path.insert(0, {insert_old(old)})"
    body = f"import sys\n__builtins__.__dict__['exec']({code!r})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "__builtins__", "exec", "__dict__")


def test_program_overwrites_the_new_aiders_main_before_importing_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``open(NEW/aider/main.py, 'w').write(...)`` then ``from aider.main import main``:
    the program itself rewrites the judged code with code running the old aider."""
    new, old = world.new_aider(), world.old_aider()
    evil = (
        f"import sys, runpy\nsys.path.insert(0, {insert_old(old)})\n"
        f"def main():\n    runpy.run_path({str(old.site / 'aider' / 'main.py')!r}, "
        "run_name='__main__')\n"
    )
    body = (
        f"with open({str(new.site / 'aider' / 'main.py')!r}, 'w') as f:\n"
        f"    f.write({evil!r})\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "open", "write")


def test_sys_argv_steering_is_not_an_escape_but_dash_m_of_old_python_is(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``sys.argv[:] = [...]`` then the new main: steering the CLI runs only the new aider
    (a legitimate use: permitted, the new code ran)."""
    new = world.new_aider()
    body = "import sys\nsys.argv[:] = ['aider', 'task']\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    assert outcome["outcome"] in {"started", "refused"}, outcome
    if outcome["outcome"] == "started":
        world.assert_permitted_and_ran(outcome, new.marker)


def test_env_dash_s_shebang_over_the_kernels_limit_cuts_a_dash_w_value(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``env -S NEW/python -W <blanks> ignore`` past 256 bytes: the kernel cuts the line
    before ``ignore``, ``-W`` takes the script's path, and the host's first argument (a
    workspace ``notes.txt``) runs as the program."""
    new, old = world.new_aider(), world.old_aider()
    head = f"#!/usr/bin/env -S {new.python} -W"
    line = head + " " * (300 - len(head)) + "ignore"
    script = write_executable(tmp_path / "bin" / "aider", line + "\n" + RUN_AIDER)
    evil = tmp_path / "ws" / "notes.txt"
    evil.parent.mkdir()
    evil.write_text(f"import sys\nsys.path.insert(0, {insert_old(old)})\n" + RUN_AIDER)
    outcome = world.spawn("aider", [str(evil)], binary=script, policy=untracked_policy,
                          env=world.env())  # fmt: skip
    world.assert_refused(outcome, old.marker, "#!", "256", "long")


@pytest.mark.parametrize("blank", ["\x0b", "\x0c", "\x1c", "\x85", "\u3000"],
                         ids=["vt", "ff", "fs", "nel", "ideographic"])  # fmt: skip
def test_env_shebang_with_a_trailing_non_kernel_blank_finds_another_program(
    world: World, untracked_policy: str, tmp_path: Path, blank: str
) -> None:
    """``#!/usr/bin/env python3<blank>``: neither the kernel nor env treats these as blanks;
    env looks up ``python3<blank>`` (a workspace script exec'ing the old python)."""
    new, old = world.new_aider(), world.old_aider()
    ws_bin = tmp_path / "wsbin"
    old_exec_script(ws_bin / f"python3{blank}", old)
    script = write_executable(
        tmp_path / "bin" / "aider", f"#!/usr/bin/env python3{blank}\n" + RUN_AIDER
    )
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env(ws_bin, new.prefix / "bin"))  # fmt: skip
    world.assert_refused(outcome, old.marker, "python3", "env", "launcher", "script", "#!")


def test_env_dash_s_shebang_with_a_carriage_return(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env -S python3\\r``: whatever env -S makes of the CR, the old python
    (``python3\\r`` in a workspace PATH folder) must not run under a permit."""
    new, old = world.new_aider(), world.old_aider()
    ws_bin = tmp_path / "wsbin"
    old_exec_script(ws_bin / "python3\r", old)
    script = write_executable(
        tmp_path / "bin" / "aider", "#!/usr/bin/env -S python3\r\n" + RUN_AIDER
    )
    outcome = world.spawn("aider", ["task"], binary=script, policy=untracked_policy,
                          env=world.env(ws_bin, new.prefix / "bin"))  # fmt: skip
    assert not old.marker.exists(), outcome
    if outcome["outcome"] == "started":
        world.assert_permitted_and_ran(outcome, new.marker)


@needs_node
@pytest.mark.parametrize("name", ["Node_Options", "node_options"])
def test_node_options_spelled_in_another_case(
    world: World, untracked_policy: str, name: str
) -> None:
    """``Node_Options=--require OLD``: node reads only NODE_OPTIONS; the old cli never runs."""
    new, old = world.new_claude(), world.old_claude()
    outcome = world.spawn(
        "claude", ["task"], policy=untracked_policy,
        env=world.env(new.bin_dir, **{name: f"--require={old.cli}"}),
    )  # fmt: skip
    assert not old.marker.exists(), outcome
    if outcome["outcome"] == "started":
        world.assert_permitted_and_ran(outcome, new.marker)


@needs_node
@pytest.mark.parametrize("blank", ["\u00a0", "\u2003", "\t", "\n"],
                         ids=["nbsp", "emsp", "tab", "newline"])  # fmt: skip
def test_node_options_with_a_non_space_blank_before_require(
    world: World, untracked_policy: str, blank: str
) -> None:
    """``NODE_OPTIONS=--title=x<blank>--require=OLD``: node splits on spaces only, so this
    is one title for node; whatever the gate makes of it, the old cli never runs."""
    new, old = world.new_claude(), world.old_claude()
    outcome = world.spawn(
        "claude", ["task"], policy=untracked_policy,
        env=world.env(new.bin_dir, NODE_OPTIONS=f"--title=x{blank}--require={old.cli}"),
    )  # fmt: skip
    assert not old.marker.exists(), outcome
    if outcome["outcome"] == "started":
        world.assert_permitted_and_ran(outcome, new.marker)
