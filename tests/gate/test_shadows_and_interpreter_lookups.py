"""What the child really loads, in every form a shadow or an interpreter lookup can take:

- a module ahead of the site folders (the program's folder, the working directory for
  ``-m``/``-c``, PYTHONPATH) named like a standard-library module or like a module installed
  in a site folder is refused, whatever form either takes (namespace package, editable
  install, bytecode only, extension module, a folder a ``.pth`` file adds, the user site);
- a PYTHONPATH entry that is a file, or a path inside one, is refused;
- ``python -x`` is refused, however it is spelt;
- the interpreter the child will really find is the one judged (a relative binary, a
  ``#!/usr/bin/env python3`` line searched on the child's own PATH: none, or an empty or
  relative entry, is refused as env itself is);
- ``python -c`` without ``-P`` is refused: ``''`` first on its path follows the program
  wherever it moves; so is ``python -m``: the working directory first on its path can answer
  an optional import nothing installed provides;
- inputs exec cannot take are refused before any decision is sealed, and names that are
  not UTF-8 are recorded escaped.

Every agent is real code in a real virtual environment that leaves a marker when it runs;
the gate runs in a fresh host process.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sysconfig
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers.closed_world import (
    DEFAULT,
    DENY_BY_DEFAULT,
    HOST,
    PY,
    RUN_AIDER,
    SYSTEM_PATH,
    Outcome,
    Venv,
    World,
    needs_node,
    old_aider_code,
)
from helpers.noexec import noexec_command, skip_without_noexec_mounts
from probes import write_executable

pytestmark = pytest.mark.attack


def make_aider_import(site: Path, statement: str) -> None:
    """The installed (at-floor) aider runs ``statement`` first, as a real CLI imports its
    dependencies."""
    main = site / "aider" / "main.py"
    main.write_text(statement + "\n" + main.read_text(encoding="utf-8"), encoding="utf-8")


def spawn_ahead(
    world: World,
    where: str,
    *,
    new_python: Path,
    new_bin: Path,
    workspace: Path,
    folder: Path,
) -> Outcome:
    """Run the at-floor aider with ``folder`` ahead of the site folders: as the working
    directory of ``python -m aider``, on PYTHONPATH of the console script, or as the folder
    of a launcher script ``python run.py``."""
    if where == "cwd -m":
        return world.spawn(
            "python",
            ["-m", "aider", "task"],
            policy=DENY_BY_DEFAULT,
            binary=new_python,
            env=world.env(),
            cwd=folder,
        )
    if where == "PYTHONPATH":
        return world.spawn(
            "aider",
            ["task"],
            policy=DENY_BY_DEFAULT,
            env=world.env(new_bin, PYTHONPATH=str(folder)),
            cwd=workspace,
        )
    assert where == "script folder"
    (folder / "run.py").write_text(RUN_AIDER, encoding="utf-8")
    return world.spawn("python", [str(folder / "run.py"), "task"], policy=DENY_BY_DEFAULT,
                       binary=new_python, env=world.env(), cwd=workspace)  # fmt: skip


WHERE = ["cwd -m", "PYTHONPATH", "script folder"]


def host_spawn(
    world: World, request: Mapping[str, object], host_env: dict[str, str]
) -> dict[str, Any]:
    """``floorguard.spawn`` in a host process whose own environment is exactly ``host_env``
    on top of the test's (its PATH decides what a name is found as when the child has none)."""
    done = world.host.python("-c", HOST, json.dumps(request), **host_env)
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


# ================================================ shadows and lookups, each form refused


@pytest.mark.parametrize("ahead", ["namespace portion", "regular package"])
@pytest.mark.parametrize("where", WHERE)
def test_a_folder_named_like_an_installed_namespace_package_is_refused(
    world: World, where: str, ahead: str
) -> None:
    # identification.md refuses "a module ahead of the standard library and the site folders
    # ... that shadows ... a module installed in a site folder". A namespace package
    # installed in site-packages (google, zope, jaraco, sphinxcontrib ... are) is such a
    # module: a folder of the same name ahead of it (a namespace portion, whose submodules
    # CPython searches first, or a regular package, which wins outright) replaces what the
    # at-floor aider imports: aider 0.50.0 would run under aider 0.70.0's name.
    old, new = world.old_aider(), world.new_aider()
    (new.site / "nspkg").mkdir()
    (new.site / "nspkg" / "mod.py").write_text("VALUE = 1\n", encoding="utf-8")
    make_aider_import(new.site, "import nspkg.mod")
    workspace = world.root / "ws"
    folder = workspace / "lib"
    (folder / "nspkg").mkdir(parents=True)
    if ahead == "namespace portion":
        (folder / "nspkg" / "mod.py").write_text(old_aider_code(old.site), encoding="utf-8")
    else:
        (folder / "nspkg" / "__init__.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = spawn_ahead(
        world,
        where,
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=folder,
    )
    world.assert_refused(outcome, old.marker, "nspkg")


@pytest.mark.parametrize("where", WHERE)
def test_a_module_named_like_an_editable_install_is_refused(world: World, where: str) -> None:
    # identification.md understands "setuptools' editable-install finders" among the .pth
    # import lines, so a dependency installed editable (pip install -e) is a module installed
    # in a site folder. Its finder is appended to sys.meta_path, after the path finder: a
    # helperdep.py ahead of the site folders is what aider imports instead.
    editable = pytest.importorskip("setuptools.command.editable_wheel")
    old, new = world.old_aider(), world.new_aider()
    source = world.root / "project" / "src" / "helperdep"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
    finder = "__editable___helperdep_1_0_finder"
    template = editable._finder_template(finder, {"helperdep": str(source)}, {})
    (new.site / f"{finder}.py").write_text(template, encoding="utf-8")
    (new.site / "__editable__.helperdep-1.0.pth").write_text(
        f"import {finder}; {finder}.install()\n", encoding="utf-8"
    )
    make_aider_import(new.site, "import helperdep")
    workspace = world.root / "ws"
    folder = workspace / "lib"
    folder.mkdir(parents=True)
    (folder / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = spawn_ahead(
        world,
        where,
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=folder,
    )
    world.assert_refused(outcome, old.marker, "helperdep")


@pytest.mark.parametrize(
    ("statement", "layout"),
    [
        pytest.param("import sysconfig\nsysconfig.get_config_vars()",
                     sysconfig._get_sysconfigdata_name() + ".py",  # type: ignore[attr-defined]
                     id="sysconfigdata"),
        pytest.param("import test.support", "test/__init__.py", id="test-package"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("where", WHERE)
def test_a_module_named_like_a_standard_library_file_outside_stdlib_module_names_is_refused(
    world: World, where: str, statement: str, layout: str
) -> None:
    # The standard library's own folder holds modules sys.stdlib_module_names does not list:
    # the build's _sysconfigdata_* (which sysconfig.get_config_vars() imports by name) and
    # the `test` package. A file of that name ahead of the standard library is "a module ...
    # that shadows one of the standard library's" (identification.md): it would run aider
    # 0.50.0.
    old, new = world.old_aider(), world.new_aider()
    make_aider_import(new.site, statement)
    workspace = world.root / "ws"
    folder = workspace / "lib"
    target = folder / layout
    target.parent.mkdir(parents=True)
    target.write_text(old_aider_code(old.site) + "build_time_vars = {}\n", encoding="utf-8")
    outcome = spawn_ahead(
        world,
        where,
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=folder,
    )
    module = layout.split("/", maxsplit=1)[0].removesuffix(".py")
    world.assert_refused(outcome, old.marker, module)


@pytest.mark.parametrize("layout", ["org/python/core.py", "org/__init__.py"])
@pytest.mark.parametrize("where", WHERE)
def test_a_module_the_standard_library_imports_when_present_is_refused(
    world: World, where: str, layout: str
) -> None:
    # copy and pickle try ``from org.python.core import PyStringMap`` (a probe for Jython):
    # org is neither in the standard library nor installed, so an org package or namespace
    # folder ahead of the site folders is code the at-floor aider runs as soon as it
    # imports copy (dataclasses does).
    old, new = world.old_aider(), world.new_aider()
    make_aider_import(new.site, "import copy")
    workspace = world.root / "ws"
    folder = workspace / "lib"
    target = folder / layout
    target.parent.mkdir(parents=True)
    target.write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = spawn_ahead(
        world,
        where,
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=folder,
    )
    world.assert_refused(outcome, old.marker, "org")


def default_path_python() -> Path | None:
    """The python3 the C library's default search path (/bin:/usr/bin) finds, if any."""
    for folder in ("/bin", "/usr/bin"):
        candidate = Path(folder) / "python3"
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def user_site_of(python: Path, home: Path) -> Path:
    version = subprocess.run(
        [str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True, text=True, check=True, env={"HOME": str(home)},
    ).stdout.strip()  # fmt: skip
    return home / ".local" / "lib" / f"python{version}" / "site-packages"


@pytest.mark.parametrize("policy", [DEFAULT, DENY_BY_DEFAULT])
def test_an_env_shebang_script_without_path_in_the_child_is_judged_by_the_child_s_lookup(
    world: World, policy: str
) -> None:
    # identification.md judges a `#!` script "as that interpreter running the script" where
    # the interpreter is "what env ... finds on the child's PATH", and refuses an env command
    # "looked up on a PATH that is not set (the C library's default search path would
    # decide)"; a Python interpreter named on PATH is refused when the child has no PATH.
    # Here the child's environment has no PATH: env finds python3 on the C library's default
    # path (/bin:/usr/bin), a base interpreter whose user site holds aider 0.50.0, not the
    # python3 on the host's own PATH (a venv with aider 0.70.0).
    system_python = default_path_python()
    if system_python is None:
        pytest.skip("no python3 on the C library's default search path")
    old, new = world.old_aider(), world.new_aider()
    shutil.copytree(old.site, user_site_of(system_python, world.home))
    workspace = world.root / "ws"
    workspace.mkdir()
    script = write_executable(workspace / "codey", "#!/usr/bin/env python3\n" + RUN_AIDER)
    request = {
        "adapter": "codey",
        "argv": ["task"],
        "binary": str(script),
        "env": {"HOME": str(world.home), "LANG": "C.UTF-8"},
        "cwd": str(workspace),
    }
    host_env = {"PATH": f"{new.prefix / 'bin'}:{SYSTEM_PATH}"}
    if policy == DENY_BY_DEFAULT:
        host_env["FLOORGUARD_UNTRACKED_POLICY"] = "refuse"
    outcome = Outcome(host_spawn(world, request, host_env), policy)
    world.assert_refused(outcome, old.marker)


def test_an_env_shebang_script_with_an_empty_path_is_refused_as_env_itself_is(
    world: World,
) -> None:
    # An empty PATH is one empty entry: env searches it in its working directory.
    # identification.md refuses "whatever the policy" an env command looked up on a PATH
    # that "holds an empty or relative entry", and `env python3 ...` with PATH="" is refused
    # so. The same lookup made by a `#!/usr/bin/env python3` line is instead recorded as
    # `untracked` ("a script with no interpreter"), and the workspace's python3 (a link to a
    # base interpreter, which with no PATH cannot find a venv and reads the user site) runs
    # aider 0.50.0.
    old, new = world.old_aider(), world.new_aider()
    shutil.copytree(old.site, world.home / ".local" / "lib" / PY / "site-packages")
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "python3").symlink_to(new.prefix / "bin" / "python3")
    script = write_executable(workspace / "codey", "#!/usr/bin/env python3\n" + RUN_AIDER)
    env = world.env()
    env["PATH"] = ""
    outcome = world.spawn("codey", ["task"], policy=DEFAULT, binary=script, env=env, cwd=workspace)
    world.assert_refused(outcome, old.marker, "PATH")


def test_python_c_follows_the_directory_the_cli_moves_to(world: World) -> None:
    # With -c CPython puts '' first on sys.path: not the working directory that was judged,
    # but whatever directory the process is in at each import. A CLI that changes directory
    # (to its project's root, say) and then imports a dependency imports it from there: the
    # folder above the workspace holds helperdep.py, which shadows the helperdep installed
    # beside aider, and aider 0.50.0 would run. (`-m` puts the absolute working directory
    # there instead, and is not affected.) Refused unless -P takes '' off the path.
    old, new = world.old_aider(), world.new_aider()
    (new.site / "helperdep.py").write_text("VALUE = 1\n", encoding="utf-8")
    make_aider_import(new.site, "import os\nos.chdir('..')\nimport helperdep")
    project = world.root / "project"
    workspace = project / "sub"
    workspace.mkdir(parents=True)
    (project / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "python", ["-c", RUN_AIDER, "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker)


def test_python_m_refuses_a_workspace_that_can_answer_an_optional_import(world: World) -> None:
    # -m puts the working directory first on sys.path. The at-floor aider tries an optional
    # dependency nothing installed provides; the workspace holds a module of that name, so
    # aider 0.50.0's code would run under aider 0.70.0's permit. No shadow check can see it
    # (nothing installed has that name), and the workspace may gain such a module while the
    # agent runs: -m is refused unless -P takes the working directory off the path.
    old, new = world.old_aider(), world.new_aider()
    make_aider_import(new.site, "try:\n    import optional_extra\nexcept ImportError:\n    pass")
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "optional_extra.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], policy=DEFAULT, binary=new.python,
        env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "python -m puts the working directory")
    assert "give -P" in outcome.reason


@pytest.mark.parametrize("safe", [["-P"], ["-I"], ["PYTHONSAFEPATH"]])
def test_python_m_with_the_working_directory_off_the_path_runs_the_installed_code(
    world: World, safe: list[str]
) -> None:
    # The same workspace, the working directory off the path: the optional import fails as
    # it would anywhere, the at-floor aider runs, and nothing of the workspace is loaded.
    old, new = world.old_aider(), world.new_aider()
    make_aider_import(new.site, "try:\n    import optional_extra\nexcept ImportError:\n    pass")
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "optional_extra.py").write_text(old_aider_code(old.site), encoding="utf-8")
    flags = [] if safe == ["PYTHONSAFEPATH"] else safe
    env = world.env(**({"PYTHONSAFEPATH": "1"} if safe == ["PYTHONSAFEPATH"] else {}))
    outcome = world.spawn(
        "python", [*flags, "-m", "aider", "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=env, cwd=workspace,
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)
    assert not old.marker.exists()


# ========================================================== other spellings, refused
# ========================================================== other spellings, refused


def write_pyc(target: Path, code: str) -> None:
    source = target.with_name("tmp_source_for_pyc.py")
    source.write_text(code, encoding="utf-8")
    py_compile.compile(str(source), cfile=str(target), doraise=True)
    source.unlink()


@pytest.mark.parametrize("layout", ["pathlib.pyc", "pathlib/__init__.pyc"])
def test_bytecode_only_stdlib_shadow_in_the_working_directory_is_refused(
    world: World, layout: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    (workspace / layout).parent.mkdir(parents=True, exist_ok=True)
    write_pyc(workspace / layout, old_aider_code(old.site))
    outcome = spawn_ahead(
        world,
        "cwd -m",
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=workspace,
    )
    world.assert_refused(outcome, old.marker, "pathlib")


def build_extension(name: str, body: str, out: Path) -> None:
    include = sysconfig.get_paths()["include"]
    if shutil.which("gcc") is None or not Path(include, "Python.h").exists():
        pytest.skip("no C compiler or Python headers")
    code = body.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    source = out.parent / f"{name}_ext.c"
    source.write_text(
        "#include <Python.h>\n"
        f'static struct PyModuleDef d = {{PyModuleDef_HEAD_INIT, "{name}", 0, -1, 0}};\n'
        f'PyMODINIT_FUNC PyInit_{name}(void) {{ PyRun_SimpleString("{code}");'
        " return PyModule_Create(&d); }\n",
        encoding="utf-8",
    )
    subprocess.run(["gcc", "-shared", "-fPIC", "-I", include, str(source), "-o", str(out)],
                   check=True, capture_output=True)  # fmt: skip
    source.unlink()


@pytest.mark.parametrize("suffix", [".so", ".abi3.so", importlib.machinery.EXTENSION_SUFFIXES[0]])
def test_an_extension_module_shadowing_the_standard_library_is_refused(
    world: World, suffix: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    build_extension("pathlib", old_aider_code(old.site), workspace / f"pathlib{suffix}")
    outcome = spawn_ahead(
        world,
        "cwd -m",
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=workspace,
    )
    world.assert_refused(outcome, old.marker, "pathlib")


@pytest.mark.parametrize(
    "installed",
    ["bytecode only", "in a folder a .pth adds", "in a folder a relative .pth line adds",
     "regular package, nested import"],
)  # fmt: skip
def test_a_workspace_module_shadowing_a_dependency_however_installed_is_refused(
    world: World, installed: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    name = "helperdep"
    if installed == "bytecode only":
        write_pyc(new.site / "helperdep.pyc", "VALUE = 1\n")
        make_aider_import(new.site, "import helperdep")
    elif installed == "in a folder a .pth adds":
        vendor = world.root / "vendor"
        vendor.mkdir()
        (vendor / "helperdep.py").write_text("VALUE = 1\n", encoding="utf-8")
        (new.site / "vendor.pth").write_text(f"{vendor}\n", encoding="utf-8")
        make_aider_import(new.site, "import helperdep")
    elif installed == "in a folder a relative .pth line adds":
        (new.site / "vendor").mkdir()
        (new.site / "vendor" / "helperdep.py").write_text("VALUE = 1\n", encoding="utf-8")
        (new.site / "vendor.pth").write_text("vendor\n", encoding="utf-8")
        make_aider_import(new.site, "import helperdep")
    else:
        name = "helperpkg"
        (new.site / "helperpkg").mkdir()
        (new.site / "helperpkg" / "__init__.py").write_text("", encoding="utf-8")
        (new.site / "helperpkg" / "sub.py").write_text("VALUE = 1\n", encoding="utf-8")
        make_aider_import(new.site, "import helperpkg.sub")
    if name == "helperpkg":
        (workspace / "helperpkg").mkdir()
        (workspace / "helperpkg" / "__init__.py").write_text(
            old_aider_code(old.site), encoding="utf-8"
        )
    else:
        (workspace / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = spawn_ahead(
        world,
        "cwd -m",
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=workspace,
    )
    world.assert_refused(outcome, old.marker, name)


@pytest.mark.parametrize("site", ["user site", "PYTHONUSERBASE"])
def test_a_dependency_in_the_user_site_of_a_system_site_venv_is_not_shadowed(
    world: World, site: str
) -> None:
    old = world.old_aider()
    new = world.aider("0.70.0", name="new-aider", system_site=True)
    extra: dict[str, str] = {}
    if site == "user site":
        user_site = world.home / ".local" / "lib" / PY / "site-packages"
    else:
        user_site = world.root / "userbase" / "lib" / PY / "site-packages"
        extra["PYTHONUSERBASE"] = str(world.root / "userbase")
    user_site.mkdir(parents=True)
    (user_site / "helperdep.py").write_text("VALUE = 1\n", encoding="utf-8")
    make_aider_import(new.site, "import helperdep")
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn("python", ["-m", "aider", "task"], policy=DENY_BY_DEFAULT,
                          binary=new.python, env=world.env(**extra), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker)


def test_pythonpath_shadowing_a_module_a_site_pth_imports_at_start_up_is_refused(
    world: World,
) -> None:
    # PYTHONPATH is on the path while site runs the .pth files: a _distutils_hack there would
    # run at start-up in place of setuptools' own.
    old, new = world.old_aider(), world.new_aider()
    (new.site / "_distutils_hack").mkdir()
    (new.site / "_distutils_hack" / "__init__.py").write_text(
        "def add_shim():\n    pass\n", encoding="utf-8"
    )
    (new.site / "distutils-precedence.pth").write_text(
        "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') =="
        " 'local'; enabled and __import__('_distutils_hack').add_shim(); \n",
        encoding="utf-8",
    )
    workspace = world.root / "ws"
    (workspace / "lib" / "_distutils_hack").mkdir(parents=True)
    (workspace / "lib" / "_distutils_hack" / "__init__.py").write_text(
        old_aider_code(old.site), encoding="utf-8"
    )
    outcome = spawn_ahead(
        world,
        "PYTHONPATH",
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=workspace / "lib",
    )
    world.assert_refused(outcome, old.marker, "_distutils_hack")


@pytest.mark.parametrize(
    "entry",
    ["{ws}/bundle.zip/sub/", "{ws}/./bundle.zip//sub", "bundle.zip/sub", "{ws}/link/sub",
     "{ws}/into", "{ws}/bundle.zip/", "{ws}/bundle.zip/a/b/../sub"],
)  # fmt: skip
def test_pythonpath_entries_inside_an_archive_are_refused_however_spelt(
    world: World, entry: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    shadow = (
        "import sys\ndel sys.modules['pathlib']\n"
        "sys.path[:] = [p for p in sys.path if 'bundle' not in p and 'link' not in p"
        " and 'into' not in p]\n"
        "import pathlib as real\nsys.modules['pathlib'] = real\n" + old_aider_code(old.site)
    )
    with zipfile.ZipFile(workspace / "bundle.zip", "w") as zipped:
        zipped.writestr("sub/pathlib.py", shadow)
        zipped.writestr("pathlib.py", shadow)
    (workspace / "link").symlink_to(workspace / "bundle.zip")
    (workspace / "into").symlink_to(workspace / "bundle.zip" / "sub")
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT,
        env=world.env(new.prefix / "bin", PYTHONPATH=entry.format(ws=workspace)), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker)


def test_a_pth_line_naming_an_archive_is_refused(world: World) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    with zipfile.ZipFile(workspace / "bundle.zip", "w") as zipped:
        zipped.writestr("helperdep.py", old_aider_code(old.site))
    (new.site / "bundle.pth").write_text(f"{workspace / 'bundle.zip'}\n", encoding="utf-8")
    outcome = world.spawn("aider", ["task"], policy=DENY_BY_DEFAULT,
                          env=world.env(new.prefix / "bin"), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker, "bundle.zip")


SKIPPED_FIRST_LINE = (
    's = """\n'
    'import sys; sys.path.insert(0, OLD)  # """\n'
    "import sys\nfrom aider.main import main\nsys.exit(main())\n"
)


@pytest.mark.parametrize(
    "form",
    ["#!/usr/bin/env -S python3 -x", "#!NEW -x", "env python3 -x", "python -bbx",
     "python -qX utf8 -x", "python -x DIR"],
)  # fmt: skip
def test_python_dash_x_is_refused_however_it_is_reached(world: World, form: str) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    body = SKIPPED_FIRST_LINE.replace("OLD", repr(str(old.site)))
    if form.startswith("#!"):
        line = form.replace("NEW", str(new.python))
        script = write_executable(workspace / "codey", line + "\n" + body)
        outcome = world.spawn("codey", ["task"], policy=DENY_BY_DEFAULT, binary=script,
                              env=world.env(new.prefix / "bin"), cwd=workspace)  # fmt: skip
    elif form.startswith("env"):
        (workspace / "run.py").write_text(body, encoding="utf-8")
        outcome = world.spawn("env", ["python3", "-x", str(workspace / "run.py"), "task"],
                              policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
                              cwd=workspace)  # fmt: skip
    else:
        options = form.split()[1:]
        if options[-1] == "DIR":
            (workspace / "app").mkdir()
            (workspace / "app" / "__main__.py").write_text(body, encoding="utf-8")
            argv = [*options[:-1], str(workspace / "app"), "task"]
        else:
            (workspace / "run.py").write_text(body, encoding="utf-8")
            argv = [*options, str(workspace / "run.py"), "task"]
        outcome = world.spawn("python", argv, policy=DENY_BY_DEFAULT, binary=new.python,
                              env=world.env(), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker, "-x")


@pytest.mark.parametrize("binary", ["bin/python3", "link/../v/bin/python3", "v/bin/aider"])
def test_a_relative_binary_is_judged_in_the_child_s_working_directory(
    world: World, binary: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    if binary.startswith("bin/"):
        cwd = old.prefix
    else:
        cwd = workspace
        (workspace / "v").symlink_to(old.prefix)
        (workspace / "link").mkdir()
    name = "aider" if binary.endswith("aider") else "python3"
    argv = ["task"] if name == "aider" else ["-P", "-m", "aider", "task"]
    outcome = world.spawn(name, argv, policy=DENY_BY_DEFAULT, binary=binary,
                          env=world.env(new.prefix / "bin"), cwd=cwd)  # fmt: skip
    # (an interpreter named through `link/..` is refused for that spelling itself)
    world.assert_refused(outcome, old.marker, "below the floor", "written plainly")


@pytest.mark.parametrize("first", ["link to a venv python", "truncated ELF beside an old venv"])
def test_the_python3_first_on_the_child_s_path_is_the_one_judged(world: World, first: str) -> None:
    old, new = world.old_aider(), world.new_aider()
    shutil.copytree(old.site, world.home / ".local" / "lib" / PY / "site-packages")
    workspace = world.root / "ws"
    tools = workspace / "fake" / "bin"
    tools.mkdir(parents=True)
    if first == "link to a venv python":
        # no pyvenv.cfg beside the link: CPython follows it to the base interpreter
        (tools / "python3").symlink_to(new.prefix / "bin" / "python3")
    else:
        (workspace / "fake" / "pyvenv.cfg").write_bytes((old.prefix / "pyvenv.cfg").read_bytes())
        (workspace / "fake" / "lib").symlink_to(old.prefix / "lib")
        (tools / "python3").write_bytes(Path(new.python).resolve().read_bytes()[:64])
        (tools / "python3").chmod(0o755)
    outcome = world.spawn("python3", ["-m", "aider", "task"], policy=DENY_BY_DEFAULT,
                          env=world.env(tools, new.prefix / "bin"), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker)


def venv_of_copied_python(folder: Path, packages: Venv, python: Path) -> Path:
    """``folder/bin/python3``: a copy of ``python`` (mode 755) with the ``pyvenv.cfg`` and
    ``lib`` of ``packages`` beside it, so CPython taking it for itself runs their code."""
    (folder / "bin").mkdir(parents=True)
    shutil.copy2(python.resolve(), folder / "bin" / "python3")
    (folder / "bin" / "python3").chmod(0o755)
    shutil.copy2(packages.prefix / "pyvenv.cfg", folder / "pyvenv.cfg")
    (folder / "lib").symlink_to(packages.prefix / "lib")
    return folder / "bin"


@pytest.mark.parametrize("through", ["#! line", "env command"])
def test_a_python3_the_kernel_will_not_execute_is_not_taken_for_an_env_interpreter(
    world: World, through: str
) -> None:
    # `#!/usr/bin/env python3` (or `env python3 ...`): env's execvp passes over a python3 the
    # kernel refuses (EACCES, here on a noexec mount) and runs the next one with argv[0]
    # "python3"; CPython then searches PATH for itself by mode bits alone, takes the first,
    # and its pyvenv.cfg makes the old aider's packages its environment, under a judgement
    # of the next one.
    noexec = world.root / "noexec"
    skip_without_noexec_mounts(noexec)
    old, new = world.old_aider(), world.new_aider()
    passed_over = venv_of_copied_python(noexec / "old", old, new.python)
    workspace = world.root / "ws"
    workspace.mkdir()
    script = write_executable(workspace / "codey", "#!/usr/bin/env python3\n" + RUN_AIDER)
    name, argv, binary = ("codey", ["task"], script) if through == "#! line" else (
        "env", ["python3", "-I", "-m", "aider", "task"], None)  # fmt: skip
    outcome = world.spawn(name, argv, policy=DENY_BY_DEFAULT, binary=binary,
                          env=world.env(passed_over, new.prefix / "bin"), cwd=workspace,
                          wrap=noexec_command(noexec))  # fmt: skip
    world.assert_refused(outcome, old.marker, f"takes {passed_over / 'python3'} for itself")


@needs_node
def test_a_python3_the_kernel_will_not_execute_is_not_taken_for_an_mcp_server(
    world: World,
) -> None:
    # The same through an MCP server declared {"command": "python3"}: node's spawn searches
    # the server's PATH with execvp and passes argv[0] "python3" to the next one.
    noexec = world.root / "noexec"
    skip_without_noexec_mounts(noexec)
    old, new, claude = world.old_aider(), world.new_aider(), world.new_claude()
    passed_over = venv_of_copied_python(noexec / "old", old, new.python)
    workspace = world.root / "ws"
    workspace.mkdir()
    server_path = f"{passed_over}:{new.prefix / 'bin'}:{SYSTEM_PATH}"
    server = {"command": "python3", "args": ["-I", "-m", "aider"], "env": {"PATH": server_path}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"helper": server}}))
    outcome = world.spawn("claude", ["-p", "task"], policy=DENY_BY_DEFAULT,
                          env=world.env(claude.bin_dir), cwd=workspace,
                          wrap=noexec_command(noexec))  # fmt: skip
    # (the folder, an entry of the server's own PATH, named by its place: a value)
    world.assert_refused(outcome, claude.marker, "takes <env PATH entry 1>/python3 for itself")


@pytest.mark.parametrize("first", ["a python3 without an x bit", "a folder named python3"])
def test_a_python3_neither_env_nor_cpython_takes_leaves_the_env_interpreter_judged(
    world: World, first: str
) -> None:
    new = world.new_aider()
    skipped = world.root / "skipped" / "bin"
    skipped.mkdir(parents=True)
    if first == "a folder named python3":
        (skipped / "python3").mkdir()
    else:
        shutil.copy2(Path(new.python).resolve(), skipped / "python3")
        (skipped / "python3").chmod(0o644)
    workspace = world.root / "ws"
    workspace.mkdir()
    script = write_executable(workspace / "codey", "#!/usr/bin/env python3\n" + RUN_AIDER)
    outcome = world.spawn("codey", ["task"], policy=DENY_BY_DEFAULT, binary=script,
                          env=world.env(skipped, new.prefix / "bin"), cwd=workspace)  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


@pytest.mark.parametrize("link", ["absolute", "relative", "folder", "DIR"])
def test_a_launcher_reached_through_a_link_is_judged_in_the_folder_python_uses(
    world: World, link: str
) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    real = workspace / "real"
    real.mkdir(parents=True)
    (real / "run.py").write_text(RUN_AIDER, encoding="utf-8")
    (real / "__main__.py").write_text(RUN_AIDER, encoding="utf-8")
    (real / "pathlib.py").write_text(old_aider_code(old.site), encoding="utf-8")
    if link == "absolute":
        (workspace / "run.py").symlink_to(real / "run.py")
        target = workspace / "run.py"
    elif link == "relative":
        (workspace / "run.py").symlink_to("real/run.py")
        target = workspace / "run.py"
    elif link == "folder":
        (workspace / "lnk").symlink_to(real)
        target = workspace / "lnk" / "run.py"
    else:
        (workspace / "app").symlink_to(real)
        target = workspace / "app"
    outcome = world.spawn("python", [str(target), "task"], policy=DENY_BY_DEFAULT,
                          binary=new.python, env=world.env(), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker, "pathlib")


def run_host_from_file(
    world: World, request: Mapping[str, object], **host_env: str
) -> dict[str, Any]:
    request_file = world.root / "request.json"
    request_file.write_text(json.dumps(request), encoding="utf-8")
    host = HOST.replace(
        "request = json.loads(sys.argv[1])", "request = json.loads(open(sys.argv[1]).read())"
    )
    done = world.host.python("-c", host, str(request_file), **host_env)
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        pytest.param(["\u00e9" * 70_000], {}, id="argument-of-few-characters-but-many-bytes"),
        pytest.param(["task"], {"X": "\u00e9" * 70_000}, id="variable-of-many-bytes"),
        pytest.param(["x" * 131_072], {}, id="argument-one-byte-over"),
        pytest.param(["task"], {"X": "x" * 131_070}, id="variable-one-byte-over"),
        pytest.param(["x"] * 250_000, {}, id="many-tiny-arguments-pointer-space"),
        pytest.param(["task"], {f"V{i}": "" for i in range(200_000)}, id="many-tiny-variables"),
    ],
)
def test_a_command_line_over_the_kernel_s_limits_is_refused_before_a_permit(
    world: World, argv: list[str], extra: dict[str, str]
) -> None:
    new = world.new_aider()
    request = {"adapter": "aider", "argv": argv, "binary": None,
               "env": world.env(new.prefix / "bin", **extra), "cwd": str(world.root)}  # fmt: skip
    outcome = run_host_from_file(world, request, FLOORGUARD_UNTRACKED_POLICY="refuse")
    assert outcome["outcome"] == "refused", outcome
    assert "kernel" in outcome["reason"], outcome
    world.assert_no_permit_recorded()
    assert [r["verdict"] for r in world.recorded()] == ["refuse"]


def test_an_argument_at_the_kernel_s_limit_still_starts(world: World) -> None:
    new = world.new_aider()
    request = {"adapter": "aider", "argv": ["x" * 131_071], "binary": None,
               "env": world.env(new.prefix / "bin"), "cwd": str(world.root)}  # fmt: skip
    outcome = run_host_from_file(world, request, FLOORGUARD_UNTRACKED_POLICY="refuse")
    assert outcome["outcome"] == "started" and outcome["returncode"] == 0, outcome
    assert new.marker.exists()


@pytest.mark.parametrize("where", ["PYTHONPATH folder", "working directory", ".pth file name"])
def test_names_that_are_not_utf8_are_recorded_escaped_in_a_refusal(
    world: World, where: str
) -> None:
    _old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    odd = os.fsencode(str(workspace)) + b"/d\xff"
    request: dict[str, object] = {
        "adapter": "aider",
        "argv": ["task"],
        "binary": None,
        "env": world.env(new.prefix / "bin"),
        "cwd": str(workspace),
    }
    if where == "PYTHONPATH folder":
        os.mkdir(odd)
        (Path(os.fsdecode(odd)) / "pathlib.py").write_text("x = 1\n", encoding="utf-8")
        request["env"] = world.env(new.prefix / "bin", PYTHONPATH=os.fsdecode(odd))
    elif where == "working directory":
        os.mkdir(odd)
        (Path(os.fsdecode(odd)) / "pathlib.py").write_text("x = 1\n", encoding="utf-8")
        request.update(adapter="python", argv=["-m", "aider"], binary=str(new.python),
                       cwd=os.fsdecode(odd))  # fmt: skip
    else:
        with open(os.fsencode(str(new.site)) + b"/z\xff.pth", "w", encoding="utf-8") as pth:
            pth.write("import os\n")
    outcome = run_host_from_file(world, request, FLOORGUARD_UNTRACKED_POLICY="refuse")
    assert outcome["outcome"] == "refused", outcome
    assert "\\udcff" in json.dumps(outcome["reason"]), outcome
    [recorded] = world.recorded()
    assert recorded["verdict"] == "refuse"
    assert "\\udcff" in recorded["reason"], recorded
    assert not new.marker.exists()


@pytest.mark.parametrize("options", [["-E"], ["-Es"]])
def test_pythonsafepath_ignored_under_dash_e_leaves_the_working_directory_judged(
    world: World, options: list[str]
) -> None:
    # -E makes CPython ignore PYTHONSAFEPATH: the working directory is first on the path.
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    (workspace / "pathlib.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "python", [*options, "-m", "aider", "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(PYTHONSAFEPATH="1"), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "pathlib")


@pytest.mark.parametrize("linked", ["installed file", "installed folder", "workspace file"])
def test_shadows_reached_through_symbolic_links_are_refused(world: World, linked: str) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = world.root / "ws"
    workspace.mkdir()
    elsewhere = world.root / "elsewhere"
    elsewhere.mkdir()
    if linked == "workspace file":
        (elsewhere / "evil.py").write_text(old_aider_code(old.site), encoding="utf-8")
        (workspace / "pathlib.py").symlink_to(elsewhere / "evil.py")
        name = "pathlib"
    else:
        if linked == "installed file":
            (elsewhere / "helperdep.py").write_text("VALUE = 1\n", encoding="utf-8")
            (new.site / "helperdep.py").symlink_to(elsewhere / "helperdep.py")
        else:
            (elsewhere / "helperdep").mkdir()
            (elsewhere / "helperdep" / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
            (new.site / "helperdep").symlink_to(elsewhere / "helperdep")
        make_aider_import(new.site, "import helperdep")
        (workspace / "helperdep.py").write_text(old_aider_code(old.site), encoding="utf-8")
        name = "helperdep"
    outcome = spawn_ahead(
        world,
        "cwd -m",
        new_python=new.python,
        new_bin=new.prefix / "bin",
        workspace=workspace,
        folder=workspace,
    )
    world.assert_refused(outcome, old.marker, name)


# The spellings that were always refused run before a release (marker slow), not in CI.
for _held in (
    test_bytecode_only_stdlib_shadow_in_the_working_directory_is_refused,
    test_an_extension_module_shadowing_the_standard_library_is_refused,
    test_a_workspace_module_shadowing_a_dependency_however_installed_is_refused,
    test_a_dependency_in_the_user_site_of_a_system_site_venv_is_not_shadowed,
    test_pythonpath_shadowing_a_module_a_site_pth_imports_at_start_up_is_refused,
    test_pythonpath_entries_inside_an_archive_are_refused_however_spelt,
    test_a_pth_line_naming_an_archive_is_refused,
    test_python_dash_x_is_refused_however_it_is_reached,
    test_a_relative_binary_is_judged_in_the_child_s_working_directory,
    test_the_python3_first_on_the_child_s_path_is_the_one_judged,
    test_a_launcher_reached_through_a_link_is_judged_in_the_folder_python_uses,
    test_a_command_line_over_the_kernel_s_limits_is_refused_before_a_permit,
    test_an_argument_at_the_kernel_s_limit_still_starts,
    test_names_that_are_not_utf8_are_recorded_escaped_in_a_refusal,
    test_pythonsafepath_ignored_under_dash_e_leaves_the_working_directory_judged,
    test_shadows_reached_through_symbolic_links_are_refused,
):
    pytest.mark.slow(_held)
