"""The spawn gate judges what the child will really load, and records every decision:

- a module ahead of the installed ones on the path (the working directory for ``-m`` and
  ``-c``, PYTHONPATH, a copied console script's folder) named like one of the program's
  installed dependencies is refused, as one named like the standard library always was;
- a PYTHONPATH entry inside an archive (``bundle.zip/sub``) is refused like the archive;
- ``python -x`` (the script run without its first line) is refused;
- a relative program path is found from the child's working directory and given to the
  child absolute, and a Python interpreter named without a PATH in the child's
  environment is refused: either way the interpreter would find another installation;
- inputs exec cannot take (a lone surrogate, a string or a command line over the
  kernel's limits) are refused before any decision is sealed, and a name that is not
  UTF-8 is recorded, escaped, like any other;
- the spellings that were always refused (forged bytecode, interpreter options, ``#!``
  forms, env(1) forms, PATH entries, ...) stay refused.

Every agent is real code on disk (real virtual environments, real node CLIs) that leaves a
marker file when it runs; the gate runs in a fresh host process through ``floorguard.spawn``
or ``python -m floorguard exec``.
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.closed_world import (
    DENY_BY_DEFAULT,
    HOST,
    NODE,
    PY,
    RUN_AIDER,
    SYSTEM_PATH,
    World,
    needs_node,
    old_aider_code,
)
from hosts import EXEC_COPY
from probes import write_executable

pytestmark = pytest.mark.attack


def add_dependency(site: Path, name: str) -> None:
    """Make the installed (at-floor) aider import ``name``, a dependency installed beside it
    in the same site-packages, as every real CLI imports its dependencies."""
    main = site / "aider" / "main.py"
    main.write_text(f"import {name}\n" + main.read_text(encoding="utf-8"), encoding="utf-8")
    (site / f"{name}.py").write_text("VALUE = 1\n", encoding="utf-8")


def assert_nothing_unjudged_permitted(world: World, outcome: object, marker: Path) -> None:
    """The below-floor code never ran and no allowing decision was sealed for the spawn."""
    recorded = world.recorded()
    assert not marker.exists(), f"below-floor aider ran: {outcome!r}; recorded {recorded}"
    allowed = [r for r in recorded if r["verdict"] in {"permit", "untracked", "warn_override"}]
    assert not allowed, f"an allowing decision was sealed: {recorded}"


# ================================================= what runs in place of what was judged


@pytest.mark.parametrize("how", ["python -m", "python -c"])
def test_a_working_directory_module_shadowing_a_dependency_of_the_tracked_cli_is_refused(
    world: World, untracked_policy: str, how: str
) -> None:
    # threat-model.md: in scope is "everything a child's ... working directory ... can change
    # about the code it loads". `python -m aider` / `-c` put the working directory first on
    # sys.path, so a file there named like one of aider's installed dependencies is what
    # aider imports: the at-floor aider 0.70.0 would run aider 0.50.0's code.
    old, new = world.old_aider(), world.new_aider()
    add_dependency(new.site, "helperdep")
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    argv = ["-m", "aider", "task"] if how == "python -m" else ["-c", RUN_AIDER, "task"]
    outcome = world.spawn(
        "python", argv, policy=untracked_policy, binary=new.python, env=world.env(), cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "helperdep")


def test_a_pythonpath_module_shadowing_a_dependency_of_the_tracked_cli_is_refused(
    world: World, untracked_policy: str
) -> None:
    # The console script itself, with PYTHONPATH naming a folder of the workspace: PYTHONPATH
    # comes before site-packages, so its helperdep.py replaces aider's dependency.
    old, new = world.old_aider(), world.new_aider()
    add_dependency(new.site, "helperdep")
    workspace = world.root / "ws"
    (workspace / "lib").mkdir(parents=True)
    (workspace / "lib" / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "aider",
        ["task"],
        policy=untracked_policy,
        env=world.env(new.prefix / "bin", PYTHONPATH=str(workspace / "lib")),
        cwd=workspace,
    )
    world.assert_refused(outcome, old.marker, "helperdep", "PYTHONPATH")


def test_a_copied_wrapper_beside_a_module_shadowing_a_dependency_is_refused(
    world: World, untracked_policy: str
) -> None:
    # A copy of the at-floor console script in the workspace (threat-model.md: "a copied old
    # CLI"): its folder is sys.path[0], so a helperdep.py beside it runs instead of aider's.
    old, new = world.old_aider(), world.new_aider()
    add_dependency(new.site, "helperdep")
    tools = world.root / "ws" / "tools"
    tools.mkdir(parents=True)
    wrapper = write_executable(tools / "codey", new.script.read_text(encoding="utf-8"))
    (tools / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "codey", ["task"], policy=untracked_policy, binary=wrapper, env=world.env(),
        cwd=tools.parent,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "helperdep")


def shadowing_stdlib_module(name: str, site: Path, archive: str) -> str:
    """A module named like the standard library's ``name``: it loads the real one, then runs
    the below-floor aider installed at ``site``."""
    return (
        "import sys\n"
        f"del sys.modules[{name!r}]\n"
        f"saved = [p for p in sys.path if {archive!r} in p]\n"
        f"sys.path[:] = [p for p in sys.path if {archive!r} not in p]\n"
        f"import {name} as real\n"
        f"sys.modules[{name!r}] = real\n" + old_aider_code(site)
    )


@pytest.mark.parametrize("archive", ["bundle.zip", "bundle"])
def test_a_folder_inside_an_archive_on_pythonpath_is_refused(
    world: World, untracked_policy: str, archive: str
) -> None:
    # identification.md refuses "an archive on the path", and `PYTHONPATH=lib.zip` is refused.
    # `PYTHONPATH=lib.zip/sub` is a folder inside the archive, which CPython's zipimporter
    # serves too: the archive's pathlib.py (shadowing the standard library's, which aider
    # imports) would run aider 0.50.0 under aider 0.70.0's name.
    import zipfile

    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    with zipfile.ZipFile(workspace / archive, "w") as zipped:
        zipped.writestr("sub/pathlib.py", shadowing_stdlib_module("pathlib", old.site, archive))
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy,
        env=world.env(new.prefix / "bin", PYTHONPATH=f"{workspace / archive}/sub"),
        cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "archive", archive)


@pytest.mark.parametrize("option", ["-x", "-Bx"])
def test_a_script_run_with_dash_x_is_judged_without_its_first_line(
    world: World, untracked_policy: str, option: str
) -> None:
    # identification.md allowlists -x and promises "the source of a Python program, decoded
    # exactly as CPython decodes it ... and every statement in it that changes the import
    # system". With -x CPython skips the first line, so a triple quote opened there does not
    # exist for it: the sys.path edit on line 2 runs, where the whole file reads as a
    # string: aider 0.50.0 would run.
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "run.py").write_text(
        's = """\n'
        f'import sys; sys.path.insert(0, {str(old.site)!r})  # """\n'
        "import sys\nfrom aider.main import main\nsys.exit(main())\n",
        encoding="utf-8",
    )
    outcome = world.spawn(
        "python", [option, str(workspace / "run.py"), "task"], policy=untracked_policy,
        binary=new.python, env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "sys.path", "-x")


def test_a_relative_binary_is_judged_where_the_child_will_find_it(
    world: World, untracked_policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # identification.md: "The child sees the program name it was asked for as argv[0] (so a
    # virtual environment's python3 finds its environment)". With binary=".venv/bin/python3"
    # a child started in the workspace resolves a relative argv[0] there, finds the
    # workspace's own .venv (pyvenv.cfg) and imports its aider 0.50.0, whatever file the
    # host's directory holds under that name.
    old, new = world.old_aider(), world.new_aider()
    host_dir = world.root / "host-cwd"
    workspace = world.root / "ws"
    host_dir.mkdir()
    workspace.mkdir()
    (host_dir / ".venv").symlink_to(new.prefix)
    (workspace / ".venv").symlink_to(old.prefix)
    monkeypatch.chdir(host_dir)  # the host process inherits this as its working directory
    outcome = world.spawn(
        "python3",
        ["-m", "aider", "task"],
        policy=untracked_policy,
        binary=".venv/bin/python3",
        env=world.env(),
        cwd=workspace,
    )
    assert not old.marker.exists(), f"below-floor aider ran: {outcome!r}; {world.recorded()}"
    if outcome["outcome"] == "refused":
        receipt_verdicts = [r["verdict"] for r in world.recorded()]
        assert receipt_verdicts == ["refuse"], receipt_verdicts


def test_a_child_environment_without_path_runs_the_interpreter_that_was_judged(
    world: World, untracked_policy: str
) -> None:
    # A host passes the child an environment without PATH (env={"HOME": ...}), and python3
    # is found on the host's own PATH (a venv holding aider 0.70.0). The child gets argv[0]
    # "python3" and no PATH to search, so CPython cannot find the venv: it
    # starts as the base interpreter, with the user site of the child's HOME enabled, and
    # imports the aider 0.50.0 installed there. identification.md: "a virtual environment's
    # python3 finds its environment"; threat-model.md: PYTHONUSERBASE / ~/.local site-packages
    # are inputs the gate must follow.
    old, new = world.old_aider(), world.new_aider()
    shutil.copytree(old.site, world.home / ".local" / "lib" / PY / "site-packages")
    workspace = world.root / "ws"
    workspace.mkdir()
    request = {
        "adapter": "python3",
        "argv": ["-m", "aider", "task"],
        "binary": None,
        "env": {"HOME": str(world.home), "LANG": "C.UTF-8"},
        "cwd": str(workspace),
    }
    host_env = {"PATH": f"{new.prefix / 'bin'}:{SYSTEM_PATH}"}
    if untracked_policy == DENY_BY_DEFAULT:
        host_env["FLOORGUARD_UNTRACKED_POLICY"] = "refuse"
    done = world.host.python("-c", HOST, json.dumps(request), **host_env)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert not old.marker.exists(), f"below-floor aider ran: {outcome}; {world.recorded()}"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["\udcff", "--", "task"], id="undecodable-adapter-name"),
        pytest.param(["env", "--", "-u", "\udcff", "aider", "task"], id="env-unset-undecodable"),
    ],
)
def test_a_decision_about_a_name_that_is_not_utf8_is_recorded(
    world: World, args: list[str]
) -> None:
    # Each decision is a receipt in the audit chain, whatever the names it is about: a byte
    # 0xff in the program's name, or in a variable env is told to unset, is recorded escaped.
    new = world.new_aider()
    env = world.host.env(PATH=f"{new.prefix / 'bin'}:/usr/bin:/bin")
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-I", b"-c", EXEC_COPY.encode(),
         os.fsencode(world.host.site), b"exec", *[os.fsencode(a) for a in args]],
        capture_output=True, env=env, timeout=120, check=False, cwd=world.root,
    )  # fmt: skip
    assert b"could not be recorded" not in done.stderr, done.stderr
    # whatever the verdict, the decision taken for this spawn is in the chain
    assert len(world.recorded()) == 1, done.stderr


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        pytest.param(["\ud800"], {}, id="lone-surrogate-argument"),
        pytest.param(["task"], {"X": "\ud800"}, id="lone-surrogate-variable"),
        pytest.param(["task"], {"A\ud800": "x"}, id="lone-surrogate-variable-name"),
    ],
)
def test_an_argument_the_child_cannot_be_started_with_is_refused_before_a_permit(
    world: World, argv: list[str], extra: dict[str, str]
) -> None:
    # threat-model.md: "Inputs the child cannot be started with (a NUL byte in an argument
    # or a variable, ...) are refused before any decision is sealed: a permit is never
    # recorded for a process that could not start." A lone surrogate cannot be encoded for
    # exec: the spawn is refused, and nothing allowing it is sealed.
    new = world.new_aider()
    outcome = world.spawn(
        "aider", argv, policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin", **extra),
        cwd=world.root,
    )  # fmt: skip
    assert outcome["outcome"] == "refused", outcome
    world.assert_no_permit_recorded()


def test_a_working_directory_that_cannot_be_encoded_is_a_recorded_refusal(world: World) -> None:
    # threat-model.md: "a working directory that is not a folder" is refused and recorded;
    # decisions.md: "No decision is returned or raised before its receipt is durably in the
    # chain". A cwd holding a lone surrogate makes spawn() raise UnicodeEncodeError, with no
    # SpawnRefused and nothing in the chain.
    new = world.new_aider()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=f"{world.root}/\ud800",
    )  # fmt: skip
    assert outcome["outcome"] == "refused", outcome
    assert [r["verdict"] for r in world.recorded()] == ["refuse"]


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        pytest.param(["x" * 200_000], {}, id="argument-over-the-kernel-limit"),
        pytest.param(["task"], {"BIG": "x" * 200_000}, id="variable-over-the-kernel-limit"),
        pytest.param(["x" * 1000] * 3000, {}, id="argument-list-over-the-kernel-limit"),
    ],
)
def test_a_command_line_the_kernel_rejects_is_refused_before_a_permit(
    world: World, argv: list[str], extra: dict[str, str]
) -> None:
    # The same promise for E2BIG: refused before anything allowing it is sealed.
    new = world.new_aider()
    request = {
        "adapter": "aider",
        "argv": argv,
        "binary": None,
        "env": world.env(new.prefix / "bin", **extra),
        "cwd": str(world.root),
    }
    request_file = world.root / "request.json"
    request_file.write_text(json.dumps(request), encoding="utf-8")
    host = HOST.replace(
        "request = json.loads(sys.argv[1])", "request = json.loads(open(sys.argv[1]).read())"
    )
    done = world.host.python("-c", host, str(request_file), FLOORGUARD_UNTRACKED_POLICY="refuse")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["outcome"] == "refused", outcome
    world.assert_no_permit_recorded()


def test_a_command_line_under_the_kernel_limit_but_not_its_margin_says_why() -> None:
    # Refused though its size is below the number the kernel reports: the reason must say
    # what floorguard keeps back, or the refusal reads as a miscount.
    from floorguard._identify.child_inputs import invalid_inputs

    limit = min(os.sysconf("SC_ARG_MAX"), 6 * 1024 * 1024)
    argv = ["x" * 999] * ((limit - 4096) // 1008)  # each: 999 bytes, its NUL, its pointer
    size = sum(len(arg) + 1 + 8 for arg in argv)
    assert limit - 8192 < size < limit
    reason = invalid_inputs(argv, {}, None)
    assert reason is not None
    assert f"come to {size} bytes, over the {limit - 8192}" in reason, reason
    assert f"kernel's limit ({limit})" in reason and "8192 bytes floorguard keeps" in reason


# ============================================================ other spellings, refused


def pyc_bytes(code_text: str, filename: str, source: Path | None) -> bytes:
    """Bytecode for ``code_text`` whose header matches ``source`` (mtime and size), so
    CPython takes it for the cache of that source."""
    code = compile(code_text, filename, "exec")
    mtime = size = 0
    if source is not None:
        st = source.stat()
        mtime, size = int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF
    return importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, mtime, size) + marshal.dumps(code)


@pytest.mark.parametrize("how", ["DIR", "-m"])
def test_a_forged_bytecode_cache_beside_a_judged_main_is_refused(
    world: World, untracked_policy: str, how: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    app = workspace / "app"
    app.mkdir(parents=True)
    if how == "-m":
        (app / "__init__.py").write_text("", encoding="utf-8")
    (app / "__main__.py").write_text(RUN_AIDER, encoding="utf-8")
    cache = app / "__pycache__"
    cache.mkdir()
    (cache / f"__main__.{sys.implementation.cache_tag}.pyc").write_bytes(
        pyc_bytes(old_aider_code(old.site), str(app / "__main__.py"), app / "__main__.py")
    )
    argv = [str(app), "task"] if how == "DIR" else ["-m", "app", "task"]
    outcome = world.spawn(
        "python", argv, policy=untracked_policy, binary=new.python, env=world.env(), cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "pyc")


def test_a_script_that_is_bytecode_under_a_py_name_is_refused(world: World) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "run.py").write_bytes(pyc_bytes(old_aider_code(old.site), "run.py", None))
    outcome = world.spawn(
        "python", [str(workspace / "run.py")], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "bytecode")


@pytest.mark.parametrize(
    ("argv", "extra", "names"),
    [
        pytest.param(["-sXpycache_prefix=WS", "-m", "aider"], {}, ["pycache_prefix"],
                     id="clustered-pycache-prefix"),
        pytest.param(["--check-hash-based-pycs", "never", "-m", "aider"], {},
                     ["check-hash-based-pycs"], id="unchecked-pycs"),
        pytest.param(["-m", "aider"], {"PYTHONWARNINGS": "ignore,default::os.X"},
                     ["PYTHONWARNINGS"], id="dotted-warning-category-in-a-list"),
        pytest.param(["-m", "aider"], {"PYTHONPLATLIBDIR": "lib64"}, ["PYTHONPLATLIBDIR"],
                     id="platlibdir"),
        pytest.param(["-m", "aider"], {"PYTHONHOME": ""}, ["PYTHONHOME"], id="empty-pythonhome"),
    ],
)  # fmt: skip
def test_interpreter_options_and_variables_that_move_code_are_refused(
    world: World, argv: list[str], extra: dict[str, str], names: list[str]
) -> None:
    _old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    argv = [a.replace("WS", str(workspace)) for a in argv]
    outcome = world.spawn(
        "python", argv, policy=DENY_BY_DEFAULT, binary=new.python, env=world.env(**extra),
        cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, *names)


@pytest.mark.parametrize(
    ("layout", "extra"),
    [
        pytest.param("pathlib.py", {}, id="stdlib-module-in-cwd"),
        pytest.param("pathlib/__init__.py", {}, id="stdlib-package-in-cwd"),
        pytest.param("aider/__init__.py", {"PYTHONSAFEPATH": ""}, id="empty-safepath"),
    ],
)
def test_a_workspace_module_ahead_of_the_judged_ones_is_refused(
    world: World, layout: str, extra: dict[str, str]
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    target = workspace / layout
    target.parent.mkdir(parents=True)
    target.write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(**extra), cwd=workspace,
    )  # fmt: skip
    module = layout.split("/", maxsplit=1)[0].split(".", maxsplit=1)[0]
    world.assert_refused(outcome, old.marker, module)


@pytest.mark.parametrize(
    "prelude",
    [
        pytest.param("vars(sys)['path'].insert(0, OLD)\n", id="vars"),
        pytest.param("from sys import path as p\np.insert(0, OLD)\n", id="from-import-alias"),
        pytest.param("(lambda s: s.path.insert(0, OLD))(sys)\n", id="module-as-value"),
        pytest.param("import os\nos.sys.path.insert(0, OLD)\n", id="os-sys"),
        pytest.param("match sys:\n    case object(path=p): p.insert(0, OLD)\n", id="match"),
    ],
)
def test_a_launcher_script_that_edits_the_import_path_indirectly_is_refused(
    world: World, prelude: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    body = "import sys\n" + prelude.replace("OLD", repr(str(old.site))) + RUN_AIDER
    (workspace / "run.py").write_text(body, encoding="utf-8")
    outcome = world.spawn(
        "python", [str(workspace / "run.py"), "task"], policy=DENY_BY_DEFAULT,
        binary=new.python, env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "line ")


def test_a_coding_cookie_only_a_line_splitter_would_see_is_refused(world: World) -> None:
    # Lines ended by CR alone: CPython's tokenizer ignores a cookie on line 3 and reads the
    # file as UTF-8 (sys.path edited); a reader splitting on LF only would see one line with
    # a UTF-7 cookie, in which the edit is inside a string.
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    source = (
        "# launcher\rimport sys\r# coding: utf-7\r"
        f's = "a+ACI-"; sys.path.insert(0, {str(old.site)!r})  #"\r'
        "from aider.main import main\rsys.exit(main())\r"
    )
    (workspace / "run.py").write_bytes(source.encode())
    outcome = world.spawn(
        "python", [str(workspace / "run.py"), "task"], policy=DENY_BY_DEFAULT,
        binary=new.python, env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "utf-7", "sys.path")


def test_a_shebang_running_code_instead_of_the_script_is_refused(world: World) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    code = f"import sys;sys.path.insert(0,{str(old.site)!r});from aider.main import main;main()"
    script = write_executable(workspace / "codey", f"#!{new.python} -Esc{code}\n" + RUN_AIDER)
    outcome = world.spawn(
        "codey", ["task"], policy=DENY_BY_DEFAULT, binary=script, env=world.env(), cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "#! line", "not a tracked adapter")


@pytest.mark.parametrize("entry", ["bin", "", "./bin"])
def test_a_relative_path_entry_that_leads_to_another_venv_is_refused(
    world: World, entry: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    env = world.env()
    env["PATH"] = f"{entry}:{new.prefix / 'bin'}:{env['PATH']}"
    cwd = old.prefix / "bin" if entry == "" else old.prefix
    outcome = world.spawn(
        "python3", ["-m", "aider", "task"], policy=DENY_BY_DEFAULT, env=env, cwd=cwd
    )
    world.assert_refused(outcome, old.marker, "relative")


def test_a_workspace_dressed_as_a_venv_around_an_at_floor_interpreter_is_refused(
    world: World,
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    (workspace / "bin").mkdir(parents=True)
    (workspace / "bin" / "python3").symlink_to(new.prefix / "bin" / "python3")
    (workspace / "pyvenv.cfg").write_bytes((old.prefix / "pyvenv.cfg").read_bytes())
    (workspace / "lib").symlink_to(old.prefix / "lib")
    outcome = world.spawn(
        "python3", ["-P", "-m", "aider", "task"], policy=DENY_BY_DEFAULT,
        env=world.env(workspace / "bin"), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "below the floor")


@pytest.mark.parametrize(
    "env_args",
    [
        pytest.param(["-i", "PATH=OLD:/usr/bin:/bin", "aider", "task"], id="clear-then-path"),
        pytest.param(["-iuFOO", "PATH=OLD:/usr/bin:/bin", "aider", "task"], id="clustered"),
        pytest.param(["PATH=/nonexistent", "PATH=OLD", "aider", "task"], id="path-twice"),
        pytest.param(["--uns=PATH", "aider", "task"], id="abbreviated-unset-path"),
    ],
)
def test_env_forms_that_lead_to_a_below_floor_aider_are_refused(
    world: World, env_args: list[str]
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    args = [a.replace("OLD", str(old.prefix / "bin")) for a in env_args]
    outcome = world.spawn(
        "env", args, policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"), cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "below the floor", "PATH")


@needs_node
@pytest.mark.parametrize(
    "template",
    [
        pytest.param("--title='x --require=EVIL --title=y'", id="single-quotes"),
        pytest.param('--title="x" --require=EVIL', id="double-quotes"),
        pytest.param("--title=a\\ --require=EVIL", id="backslash-space"),
    ],
)
def test_node_options_smuggling_a_require_is_refused(world: World, template: str) -> None:
    old, new = world.old_claude(), world.new_claude()
    workspace = world.root / "ws"
    workspace.mkdir()
    evil = workspace / "evil.js"
    evil.write_text(f"require('fs').writeFileSync({str(old.marker)!r}, 'ran');\n")
    env = world.env(new.bin_dir, NODE_OPTIONS=template.replace("EVIL", str(evil)))
    outcome = world.spawn("claude", ["-p", "x"], policy=DENY_BY_DEFAULT, env=env, cwd=workspace)
    world.assert_refused(outcome, old.marker, "--require")


@needs_node
def test_node_openssl_config_option_is_refused(world: World) -> None:
    new = world.new_claude()
    workspace = world.root / "ws"
    workspace.mkdir()
    outcome = world.spawn(
        "node", [f"--openssl-config={workspace / 'x.cnf'}", str(new.cli), "-p", "x"],
        policy=DENY_BY_DEFAULT, binary=NODE, env=world.env(new.bin_dir), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, "openssl")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pth_file_that_is_not_a_regular_file_is_refused_without_hanging(
    world: World, kind: str
) -> None:
    new = world.new_aider()
    pth = new.site / "zz.pth"
    if kind == "fifo":
        os.mkfifo(pth)
    else:
        pth.symlink_to("/dev/zero")
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=world.root,
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, "zz.pth")


def test_chain_holds_a_json_decision_for_each_refusal_above(world: World) -> None:
    # Sanity for this file's assertions: a refused spawn leaves exactly one refuse receipt.
    old = world.old_aider()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(old.prefix / "bin"),
        cwd=world.root,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "below the floor")
    assert json.dumps(world.recorded())
    assert_nothing_unjudged_permitted(world, outcome, old.marker)


# The spellings that were always refused run before a release (marker slow), not in CI.
for _held in (
    test_a_forged_bytecode_cache_beside_a_judged_main_is_refused,
    test_a_script_that_is_bytecode_under_a_py_name_is_refused,
    test_interpreter_options_and_variables_that_move_code_are_refused,
    test_a_workspace_module_ahead_of_the_judged_ones_is_refused,
    test_a_launcher_script_that_edits_the_import_path_indirectly_is_refused,
    test_a_coding_cookie_only_a_line_splitter_would_see_is_refused,
    test_a_shebang_running_code_instead_of_the_script_is_refused,
    test_a_relative_path_entry_that_leads_to_another_venv_is_refused,
    test_a_workspace_dressed_as_a_venv_around_an_at_floor_interpreter_is_refused,
    test_env_forms_that_lead_to_a_below_floor_aider_are_refused,
    test_node_options_smuggling_a_require_is_refused,
    test_node_openssl_config_option_is_refused,
    test_a_pth_file_that_is_not_a_regular_file_is_refused_without_hanging,
    test_chain_holds_a_json_decision_for_each_refusal_above,
):
    pytest.mark.slow(_held)


def test_an_environment_variable_over_the_kernels_limit_for_one_is_named_by_its_start() -> None:
    # A name of 200,000 characters would make a refusal of 200 KB, recorded whole.
    from floorguard._identify.child_inputs import invalid_inputs

    name = "N" * 200_000
    reason = invalid_inputs([], {name: "x"}, None)
    assert reason is not None
    assert reason.startswith(f"environment variable {'N' * 64}... is 200002 bytes"), reason[:200]
    assert len(reason) < 200
