"""A closed world at the spawn, evasions: attempts to run below-floor code under a recorded
permit through the less travelled corners of what decides what a child loads (cached
bytecode, byte-compiled and extension modules, user-site helpers, ``.pth`` path lines,
relative PATH entries, coding lines, ``env -S`` lines, node's option spellings and package
``main`` entries), plus legitimate uses in those corners that must keep working.

Each attack asserts the safe outcome: refused and recorded, the old marker absent. Every
test runs under the default policy and under deny-by-default.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.closed_world import (
    DENY_BY_DEFAULT,
    NEW_AIDER,
    NEW_CLAUDE,
    NODE,
    PY,
    RUN_AIDER,
    Venv,
    World,
    needs_node,
)
from probes import pip_install, site_packages, write_executable

# Long: hundreds of spawns in real venvs; .ci/run runs them (pytest -m attack).
pytestmark = pytest.mark.attack


def insert_path(where: Path) -> str:
    """Code that puts ``where`` first on ``sys.path``."""
    return f"import sys; sys.path.insert(0, {str(where)!r})\n"


def run_old(old_site: Path) -> str:
    """Code that runs the aider found in ``old_site`` right away."""
    return insert_path(old_site) + "from aider.main import main; main()\n"


def user_site(base: Path) -> Path:
    site = base / "lib" / PY / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def compile_to(source: str, target: Path, *, unchecked: bool = False) -> Path:
    """Byte-compile ``source`` into ``target`` (a ``.pyc`` for the running interpreter's
    version, the same as the world's venvs)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src = target.parent / (target.name + ".src.py")
    src.write_text(source, encoding="utf-8")
    mode = (
        py_compile.PycInvalidationMode.UNCHECKED_HASH
        if unchecked
        else py_compile.PycInvalidationMode.TIMESTAMP
    )
    py_compile.compile(str(src), cfile=str(target), doraise=True, invalidation_mode=mode)
    src.unlink()
    return target


def copy_of_old_site(world: World, old_site: Path, name: str) -> Path:
    """A writable copy of the old aider's site-packages (package and dist-info)."""
    dest = world.root / name
    shutil.copytree(old_site, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def clean_base_python(root: Path) -> Path:
    """A base CPython at ``root`` whose own site-packages is empty: the binary copied, the
    standard library linked in. (This machine's pyenv interpreters carry a sandbox ``.pth``
    with code in their site-packages, which would refuse every system-site spawn and hide
    what an attack does.)"""
    base = Path(sys.base_prefix)
    binary = Path(sys.executable).resolve()
    lib = root / "lib" / PY
    (lib / "site-packages").mkdir(parents=True)
    (root / "bin").mkdir()
    shutil.copy2(binary, root / "bin" / PY)
    for entry in (base / "lib" / PY).iterdir():
        if entry.name != "site-packages":
            os.symlink(entry, lib / entry.name)
    for so in (base / "lib").glob("libpython*"):
        os.symlink(so, root / "lib" / so.name)
    return root / "bin" / PY


def clean_system_site_aider(world: World, version: str, name: str) -> Venv:
    """aider-chat ``version`` in a venv with ``--system-site-packages`` (so the user site is
    on) over a clean base interpreter."""
    base = world.root / "clean-base"
    if not base.exists():
        clean_base_python(base)
    prefix = world.root / name
    subprocess.run(
        [str(base / "bin" / PY), "-m", "venv", "--without-pip", "--system-site-packages",
         str(prefix)],
        check=True,
    )  # fmt: skip
    marker = world.root / f"{name}-ran"
    script = pip_install(prefix, dist="aider-chat", module="aider", version=version, marker=marker)
    return Venv(prefix, prefix / "bin" / "python", script, site_packages(prefix), marker, version)


# =============================================================== bytecode and import order


def test_unchecked_hash_pyc_of_a_directory_programs_main(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """the gate judges ``DIR/__main__.py`` as source, but CPython runs ``DIR``'s
    ``__main__`` through the path finder, which takes an unchecked-hash pyc from
    ``__pycache__`` without looking at the source: recorded permit aider 0.70.0, 0.50.0 ran.
    ``python DIR`` whose ``__main__.py`` imports the new aider, while
    ``DIR/__pycache__/__main__.cpython-3X.pyc`` (an unchecked-hash pyc, used whatever the
    source says) inserts the old site-packages first."""
    new, old = world.new_aider(), world.old_aider()
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text(RUN_AIDER, encoding="utf-8")
    tag = sys.implementation.cache_tag
    compile_to(run_old(old.site), app / "__pycache__" / f"__main__.{tag}.pyc", unchecked=True)
    outcome = world.spawn(
        "python", [str(app), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "pyc", "__pycache__", "bytecode", "0.50.0")


def test_sourceless_sitecustomize_pyc_on_pythonpath(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``sitecustomize.pyc`` (sourceless, legacy location) on PYTHONPATH inserting the old
    site-packages; the new aider's console script."""
    new, old = world.new_aider(), world.old_aider()
    startup = tmp_path / "startup"
    compile_to(insert_path(old.site), startup / "sitecustomize.pyc")
    env = world.env(new.prefix / "bin", PYTHONPATH=str(startup))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "sitecustomize")


def test_sitecustomize_as_a_package_on_pythonpath(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``sitecustomize/__init__.py`` (a package, not a ``.py`` file) on PYTHONPATH."""
    new, old = world.new_aider(), world.old_aider()
    pkg = tmp_path / "startup" / "sitecustomize"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", PYTHONPATH=str(tmp_path / "startup"))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "sitecustomize")


def test_sourceless_regular_aider_package_on_pythonpath(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """PYTHONPATH folder holding ``aider/__init__.pyc`` and ``aider/main.pyc`` only (a regular
    package to CPython, no ``.py`` anywhere): it wins over the new aider in site-packages."""
    new, old = world.new_aider(), world.old_aider()
    lib = tmp_path / "lib"
    compile_to("", lib / "aider" / "__init__.pyc")
    main_src = (old.site / "aider" / "main.py").read_text(encoding="utf-8")
    compile_to(main_src, lib / "aider" / "main.pyc")
    env = world.env(new.prefix / "bin", PYTHONPATH=str(lib))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "pyc", "bytecode", "aider", str(lib))


def test_sourceless_aider_module_setting_dunder_path(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """PYTHONPATH folder holding ``aider.pyc``, a module whose ``__path__`` is the old
    aider's folder: ``aider.main`` is then imported from there."""
    new, old = world.new_aider(), world.old_aider()
    lib = tmp_path / "lib"
    compile_to(f"__path__ = [{str(old.site / 'aider')!r}]\n", lib / "aider.pyc")
    env = world.env(new.prefix / "bin", PYTHONPATH=str(lib))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "pyc", "bytecode", "aider", str(lib))


def test_sourceless_stdlib_shadow_re_pyc_on_pythonpath(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``re.pyc`` (sourceless) on PYTHONPATH shadows the standard library's ``re``, which the
    console-script wrapper imports first; it runs the old aider."""
    new, old = world.new_aider(), world.old_aider()
    lib = tmp_path / "lib"
    compile_to(run_old(old.site), lib / "re.pyc")
    env = world.env(new.prefix / "bin", PYTHONPATH=str(lib))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "re", "shadow", "pyc", str(lib))


def test_stdlib_shadow_re_package_beside_the_script(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python work/run.py`` where ``work/re/__init__.py`` (a package) shadows ``re``."""
    new, old = world.new_aider(), world.old_aider()
    work = tmp_path / "work"
    (work / "re").mkdir(parents=True)
    (work / "re" / "__init__.py").write_text(run_old(old.site), encoding="utf-8")
    (work / "run.py").write_text("import re\n" + RUN_AIDER, encoding="utf-8")
    outcome = world.spawn(
        "python", [str(work / "run.py"), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "re", "shadow")


def test_pycache_prefix_clustered_in_short_options(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -BXpycache_prefix=P -m aider``: ``-X`` clustered after ``-B``; P mirrors the
    new aider's ``main.py`` with an unchecked-hash pyc of other code."""
    new, old = world.new_aider(), world.old_aider()
    prefix = tmp_path / "pycache"
    src_dir = str((new.site / "aider").resolve()).lstrip("/")
    tag = sys.implementation.cache_tag
    compile_to(run_old(old.site), prefix / src_dir / f"main.{tag}.pyc", unchecked=True)
    outcome = world.spawn(
        "python", [f"-BXpycache_prefix={prefix}", "-m", "aider", "task"], binary=new.python,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "pycache_prefix", "-X", "-B")


def test_extension_module_sitecustomize_on_pythonpath(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A compiled ``sitecustomize.cpython-3X-....so`` on PYTHONPATH whose init inserts the old
    site-packages."""
    cc = shutil.which("cc") or shutil.which("gcc")
    include = Path(sys.base_prefix) / "include" / PY
    if cc is None or not (include / "Python.h").exists():
        pytest.skip("no C compiler or Python headers")
    new, old = world.new_aider(), world.old_aider()
    lib = tmp_path / "lib"
    lib.mkdir()
    code = json.dumps(insert_path(old.site))
    c = tmp_path / "sc.c"
    c.write_text(
        "#include <Python.h>\n"
        'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "sitecustomize", 0, -1, 0};\n'
        "PyMODINIT_FUNC PyInit_sitecustomize(void) {\n"
        f"  PyRun_SimpleString({code});\n"
        "  return PyModule_Create(&m);\n}\n",
        encoding="utf-8",
    )
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    subprocess.run(
        [cc, "-shared", "-fPIC", f"-I{include}", str(c), "-o", str(lib / f"sitecustomize{suffix}")],
        check=True,
    )
    env = world.env(new.prefix / "bin", PYTHONPATH=str(lib))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "sitecustomize")


# =========================================================== variables and the search path


def test_empty_pythonpath_component_puts_the_cwd_first(world: World, untracked_policy: str) -> None:
    """``PYTHONPATH=":"``: CPython turns an empty entry into the working directory, here a
    copy of the old aider's site-packages, ahead of the new venv's site-packages."""
    new, old = world.new_aider(), world.old_aider()
    lib = copy_of_old_site(world, old.site, "cwd-lib")
    env = world.env(new.prefix / "bin", PYTHONPATH=":")
    outcome = world.spawn("aider", ["task"], cwd=lib, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "0.50.0", "PYTHONPATH", str(lib))


def test_empty_pythonsafepath_does_not_drop_the_cwd_for_dash_m(
    world: World, untracked_policy: str
) -> None:
    """``PYTHONSAFEPATH=""`` is unset to CPython: ``python -m aider`` still puts the cwd
    (a copy of the old site-packages) first."""
    new, old = world.new_aider(), world.old_aider()
    lib = copy_of_old_site(world, old.site, "cwd-lib")
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], binary=new.python, cwd=lib,
        policy=untracked_policy, env=world.env(PYTHONSAFEPATH=""),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0", str(lib), "working directory")


def test_empty_pythonnousersite_keeps_the_user_site(world: World, untracked_policy: str) -> None:
    """``PYTHONNOUSERSITE=""`` does not disable the user site: a ``.pth`` import line in
    ``~/.local`` of a system-site venv still runs."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    site = user_site(world.home / ".local")
    (site / "agent-tools.pth").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", PYTHONNOUSERSITE="")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, ".pth")


def test_empty_pythonuserbase_falls_back_to_home(world: World, untracked_policy: str) -> None:
    """``PYTHONUSERBASE=""`` is ignored by CPython (``~/.local`` stays the user base), where a
    ``usercustomize.py`` inserts the old site-packages."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    site = user_site(world.home / ".local")
    (site / "usercustomize.py").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", PYTHONUSERBASE="")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "usercustomize")


def test_pth_import_line_separated_by_a_tab(world: World, untracked_policy: str) -> None:
    """A user-site ``.pth`` line ``import<TAB>sys; ...``: site.py runs lines starting with
    ``import`` followed by a space *or a tab*."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    site = user_site(world.home / ".local")
    (site / "agent-tools.pth").write_text(
        "import\t" + insert_path(old.site)[len("import ") :], encoding="utf-8"
    )
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, ".pth")


def test_pth_path_line_adding_a_folder_with_sitecustomize(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A user-site ``.pth`` path line adds a folder holding ``sitecustomize.py``."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "sitecustomize.py").write_text(insert_path(old.site), encoding="utf-8")
    (user_site(world.home / ".local") / "extra.pth").write_text(f"{extra}\n", encoding="utf-8")
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_refused(outcome, old.marker, "sitecustomize")


def test_user_site_helper_module_rewriting_sys_path(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """a module imported from a site folder (here ``~/.local``'s user site) is trusted
    without its code being examined, so it can rewrite ``sys.path``: recorded permit aider
    0.70.0 (python-script), 0.50.0 ran.
    A script imports ``agent_helpers`` (a plain module in the user site, a site folder) and
    then aider; the helper puts the old site-packages first, so 0.50.0 runs."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    site = user_site(world.home / ".local")
    (site / "agent_helpers.py").write_text(insert_path(old.site), encoding="utf-8")
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir()
    script.write_text("import agent_helpers\n" + RUN_AIDER, encoding="utf-8")
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "agent_helpers", "sys.path", "0.50.0")


def test_argv0_path_search_picks_another_venv(world: World, untracked_policy: str) -> None:
    """``spawn("python", ["-m", "aider"], binary=NEW/bin/python)`` with the old venv's bin on
    the child's PATH: CPython finds its prefix from argv[0] (searching PATH when it has no
    slash), so the old venv's site-packages could be the one used."""
    new, old = world.new_aider(), world.old_aider()
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], binary=new.python, policy=untracked_policy,
        env=world.env(old.prefix / "bin"),
    )  # fmt: skip
    if outcome["outcome"] == "started":
        assert not old.marker.exists(), f"old aider ran under {world.recorded()}"
        assert new.marker.exists(), outcome
    else:
        world.assert_refused(outcome, old.marker)


def test_script_symlink_whose_real_folder_holds_old_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python ws/run.py`` where ``run.py`` is a symlink into a folder holding a copy of the
    old aider: ``sys.path[0]`` is the real file's folder."""
    new, old = world.new_aider(), world.old_aider()
    lib = copy_of_old_site(world, old.site, "lib")
    (lib / "run.py").write_text(RUN_AIDER, encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(lib / "run.py", ws / "run.py")
    outcome = world.spawn(
        "python", [str(ws / "run.py"), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0", str(lib), "outside")


def test_dash_c_with_old_aider_copied_into_the_cwd(world: World, untracked_policy: str) -> None:
    """``python -c 'from aider.main import main; main()'`` in a cwd holding the old aider."""
    new, old = world.new_aider(), world.old_aider()
    lib = copy_of_old_site(world, old.site, "cwd-lib")
    outcome = world.spawn(
        "python", ["-c", "from aider.main import main; main()", "task"], binary=new.python,
        cwd=lib, policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0", str(lib), "outside")


# ================================================================ source encodings


def test_utf7_vim_style_cookie_hiding_a_line_in_a_comment(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``# vim: set fileencoding=utf-7 :`` (a cookie form PEP 263 names); a UTF-7 ``+AAo-``
    (a newline) inside a comment starts a hidden line inserting the old site-packages."""
    new, old = world.new_aider(), world.old_aider()
    hidden = insert_path(old.site).strip()
    escaped = __import__("base64").b64encode(("\n" + hidden + "\n").encode("utf-16-be"))
    line = "# note +" + escaped.decode("ascii").rstrip("=") + "-\n"
    script = tmp_path / "agent.py"
    script.write_bytes(("# vim: set fileencoding=utf-7 :\n" + line + RUN_AIDER).encode("ascii"))
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "utf-7", "sys.path", "coding")


def test_coding_cookie_on_line_two_after_code_is_ignored(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """Line 1 is code, so CPython ignores a ``coding: utf-7`` cookie on line 2 and reads
    UTF-8, where line 3 inserts the old site-packages; read as UTF-7 that line is a string."""
    new, old = world.new_aider(), world.old_aider()
    script = tmp_path / "agent.py"
    body = (
        "import sys\n# -*- coding: utf-7 -*-\n"
        f'_ = "+ACIAIg-"; sys.path.insert(0, {str(old.site)!r}) # +ACIAIg-\n' + RUN_AIDER
    )
    script.write_bytes(body.encode("ascii"))
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "sys.path", "coding", "utf-7")


def test_zip_archive_named_like_a_script(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python agent.py`` where agent.py is a zip with a ``__main__.py`` (CPython runs any
    file that is a zip archive as one, whatever its name)."""
    import zipfile

    new, old = world.new_aider(), world.old_aider()
    script = tmp_path / "agent.py"
    with zipfile.ZipFile(script, "w") as zf:
        zf.writestr("__main__.py", run_old(old.site))
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "zip", "archive", "decode", "agent.py")


# ==================================================================== #! lines


def test_env_dash_s_assignment_of_path(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``#!/usr/bin/env -S PATH=OLD/bin python3``: env sets PATH before it searches it, so
    the old venv's python runs a script the gate would find on the child's PATH as new."""
    new, old = world.new_aider(), world.old_aider()
    agent = write_executable(
        tmp_path / "bin" / "aider",
        f"#!/usr/bin/env -S PATH={old.prefix / 'bin'} python3\n" + RUN_AIDER,
    )
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "PATH", "env", "-S")


def test_env_dash_s_assignment_of_pythonpath(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env -S PYTHONPATH=OLD_SITE python3``: a variable set on the ``#!`` line."""
    new, old = world.new_aider(), world.old_aider()
    agent = write_executable(
        tmp_path / "bin" / "aider",
        f"#!/usr/bin/env -S PYTHONPATH={old.site} python3\n" + RUN_AIDER,
    )
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "PYTHONPATH", "env", "-S")


def test_env_dash_s_chdir_then_dash_m(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``#!/usr/bin/env -S -C DIR python3 -m aider``: env changes directory, and ``-m`` puts
    that directory (a copy of the old site-packages) first."""
    new, old = world.new_aider(), world.old_aider()
    lib = copy_of_old_site(world, old.site, "chdir-lib")
    agent = write_executable(
        tmp_path / "bin" / "aider", f"#!/usr/bin/env -S -C {lib} python3 -m aider\n"
    )
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "-C", "env", "0.50.0")


def test_env_dash_s_expanding_a_variable_into_an_option(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env -S python3 ${AGENT_FLAGS}`` with ``AGENT_FLAGS=-X...``: env expands
    the variable from the child's environment into the interpreter's options."""
    new, old = world.new_aider(), world.old_aider()
    prefix = tmp_path / "pycache"
    src_dir = str((new.site / "aider").resolve()).lstrip("/")
    tag = sys.implementation.cache_tag
    compile_to(run_old(old.site), prefix / src_dir / f"main.{tag}.pyc", unchecked=True)
    agent = write_executable(
        tmp_path / "bin" / "aider", "#!/usr/bin/env -S python3 ${AGENT_FLAGS}\n" + RUN_AIDER
    )
    env = world.env(new.prefix / "bin", AGENT_FLAGS=f"-Xpycache_prefix={prefix}")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "${AGENT_FLAGS}", "AGENT_FLAGS", "env", "$")


@pytest.mark.parametrize(
    "line",
    [
        "#!/usr/bin/env -S python3 #comment",
        "#!/usr/bin/env -S python3 -I #-x",
        "#!/usr/bin/env -S python3\t#-x",
        # What follows the comment's start is never read: quotes, $, \\c included.
        "#!/usr/bin/env -S python3 -I #it's ${X} \\c",
    ],
)
def test_env_dash_s_comment_is_not_read_as_arguments(
    world: World, untracked_policy: str, tmp_path: Path, line: str
) -> None:
    """GNU env -S ends its string at a word starting with ``#`` (``env -S 'echo a #b c'``
    prints ``a``): the interpreter runs the script with the words before it only."""
    new = world.new_aider()
    agent = write_executable(tmp_path / "bin" / "aider", f"{line}\n" + RUN_AIDER)
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, new.marker)


def test_env_dash_s_hash_inside_a_word_is_part_of_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env -S python3 run#old.py``: a ``#`` inside a word starts no comment,
    so python runs ``run#old.py`` of the working directory, not the script."""
    new, old = world.new_aider(), world.old_aider()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "run#old.py").write_text(run_old(old.site), encoding="utf-8")
    agent = write_executable(
        tmp_path / "bin" / "aider", "#!/usr/bin/env -S python3 run#old.py\n" + RUN_AIDER
    )
    env = world.env(new.prefix / "bin")
    outcome = world.spawn(
        "aider", ["task"], binary=agent, policy=untracked_policy, env=env, cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "something else than the script")


def test_env_dash_s_splits_words_at_its_own_blanks_only(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env -S python3<FS>-I`` (FS: the byte 0x1c, which Python's str.split
    takes for a blank and env does not): env runs the program named ``python3<FS>-I``, here
    one planted first on PATH that runs the old venv's python, not ``python3 -I``."""
    new, old = world.new_aider(), world.old_aider()
    planted = tmp_path / "planted"
    write_executable(planted / "python3\x1c-I", f'#!/bin/sh\nexec {old.python} "$@"\n')
    agent = write_executable(
        tmp_path / "bin" / "aider", "#!/usr/bin/env -S python3\x1c-I\n" + RUN_AIDER
    )
    env = world.env(planted, new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, str(planted / "python3\x1c-I"))


def test_relative_shebang_interpreter_resolved_in_the_child_cwd(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!bin/python`` is relative: the kernel resolves it against the child's working
    directory (the old venv), not the script's folder (which holds a ``bin/python`` of the
    new venv)."""
    new, old = world.new_aider(), world.old_aider()
    ws = tmp_path / "ws"
    (ws / "bin").mkdir(parents=True)
    os.symlink(new.python, ws / "bin" / "python")
    agent = write_executable(ws / "aider", "#!bin/python\n" + RUN_AIDER)
    outcome = world.spawn(
        "aider", ["task"], binary=agent, cwd=old.prefix, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0", "bin/python", "relative")


def test_relative_path_entry_resolved_in_the_child_cwd(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """the gate resolves ``env``'s PATH search without the relative entry (or not
    against the child's cwd), while env in the child finds the old venv's python3 there:
    recorded permit aider 0.70.0 (pip-script), 0.50.0 ran.
    ``PATH=bin:NEW/bin:...`` and ``#!/usr/bin/env python3``: ``env`` searches the relative
    ``bin`` in the child's working directory (the old venv) before the new venv's bin."""
    new, old = world.new_aider(), world.old_aider()
    agent = write_executable(tmp_path / "ws" / "aider", "#!/usr/bin/env python3\n" + RUN_AIDER)
    env = world.env(new.prefix / "bin")
    env["PATH"] = "bin:" + env["PATH"]
    outcome = world.spawn(
        "aider", ["task"], binary=agent, cwd=old.prefix, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker)


# ======================================================================== node


@needs_node
def test_node_title_with_a_separate_value_shifts_the_script(
    world: World, untracked_policy: str
) -> None:
    """``node --title NEW/cli.js OLD/cli.js``: ``--title`` takes the next argument as its
    value, so the old CLI is the main script."""
    old, new = world.old_claude(), world.new_claude()
    outcome = world.spawn(
        "node", ["--title", str(new.cli), str(old.cli), "task"], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "1.0.51", "--title")


@needs_node
def test_node_options_single_quotes_are_not_quotes_to_node(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``NODE_OPTIONS="--title='x --require=F'"``: node splits only at spaces outside double
    quotes, so it preloads ``F'`` (a link to the old CLI); a shell-like split sees a title."""
    old, new = world.old_claude(), world.new_claude()
    link = tmp_path / "agent'"
    os.symlink(old.cli, link)
    env = world.env(new.bin_dir, NODE_OPTIONS=f"--title='x --require={str(link)[:-1]}'")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "NODE_OPTIONS", "--require")


@needs_node
def test_node_options_backslash_space_is_not_an_escape_to_node(
    world: World, untracked_policy: str
) -> None:
    """``NODE_OPTIONS='--title=a\\ --require=OLD'``: outside double quotes node keeps the
    backslash and still splits at the space."""
    old, new = world.old_claude(), world.new_claude()
    env = world.env(new.bin_dir, NODE_OPTIONS=f"--title=a\\ --require={old.cli}")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "NODE_OPTIONS", "--require")


@needs_node
def test_node_package_folder_loses_to_a_js_sibling(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node node_modules/@anthropic-ai/claude-code`` where a sibling ``claude-code.js``
    (a link to the old CLI) exists: node tries extensions before the folder."""
    project = tmp_path / "project"
    world.project_claude(project, NEW_CLAUDE)
    old = world.old_claude()
    os.symlink(old.cli, project / "node_modules" / "@anthropic-ai" / "claude-code.js")
    outcome = world.spawn(
        "node", ["node_modules/@anthropic-ai/claude-code", "task"], binary=NODE, cwd=project,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "1.0.51", "claude-code.js")


@needs_node
def test_node_package_folder_runs_main_not_exports(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node DIR``, DIR's package.json: ``exports`` names the new CLI, ``main`` the old one;
    node runs ``main`` for a folder given as the program."""
    old, new = world.old_claude(), world.new_claude()
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(
        json.dumps({"name": "app", "main": str(old.cli), "exports": {".": str(new.cli)}}),
        encoding="utf-8",
    )
    outcome = world.spawn(
        "node", [str(app), "task"], binary=NODE, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "1.0.51", "main")


@needs_node
def test_node_package_folder_main_folder_s_native_index_comes_before_the_folder_s_index(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node DIR``, DIR's package.json ``main`` a folder holding only ``index.node`` (a
    native addon), DIR's own ``index.js`` a link to the at-floor CLI: node loads
    ``MAIN/index.node`` (after ``MAIN/index.js`` and ``MAIN/index.json``) before
    ``DIR/index.js``, so that addon is what runs: node runs no known CLI (no permit as the
    linked one), untracked, refused under deny-by-default."""
    new = world.new_claude()
    app = tmp_path / "app"
    (app / "sub").mkdir(parents=True)
    (app / "package.json").write_text(json.dumps({"main": "sub"}), encoding="utf-8")
    (app / "sub" / "index.node").write_bytes(b"\x7fELF planted")
    os.symlink(new.cli, app / "index.js")
    outcome = world.spawn(
        "node", [str(app), "task"], binary=NODE, policy=untracked_policy, env=world.env()
    )
    if untracked_policy == DENY_BY_DEFAULT:
        world.assert_refused(outcome, new.marker, "not a tracked adapter")
    else:
        assert [r["verdict"] for r in world.recorded()] == ["untracked"], world.recorded()
        assert not new.marker.exists()


@needs_node
def test_node_package_folder_main_relative_outside(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node DIR`` where DIR's package.json ``main`` climbs out to the old CLI."""
    old = world.old_claude()
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(
        json.dumps({"main": os.path.relpath(old.cli, app)}), encoding="utf-8"
    )
    outcome = world.spawn(
        "node", [str(app), "task"], binary=NODE, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "1.0.51", "main")


@needs_node
def test_node_script_symlink_in_workspace_to_old_cli(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node ws/agent.js`` where agent.js links to the old CLI, beside a package.json that
    names nothing catalogued."""
    old = world.old_claude()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "package.json").write_text(json.dumps({"name": "ws"}), encoding="utf-8")
    os.symlink(old.cli, ws / "agent.js")
    outcome = world.spawn(
        "node", [str(ws / "agent.js"), "task"], binary=NODE, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "1.0.51")


@needs_node
def test_node_double_dash_then_old_cli(world: World, untracked_policy: str) -> None:
    """``node --no-warnings -- OLD/cli.js``: ``--`` ends node's options."""
    old = world.old_claude()
    outcome = world.spawn(
        "node", ["--no-warnings", "--", str(old.cli), "task"], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "1.0.51")


# ============================================================ legitimate uses (must run)


@needs_node
def test_legit_node_underscore_spelling_of_an_allowlisted_option_runs(
    world: World, untracked_policy: str
) -> None:
    """``node --max_old_space_size=4096 NEW/cli.js``: node treats ``_`` and ``-`` alike in
    option names, so this is the allowlisted memory limit."""
    new = world.new_claude()
    outcome = world.spawn(
        "node", ["--max_old_space_size=4096", str(new.cli), "task"], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


@needs_node
def test_legit_node_title_with_a_separate_value_runs(world: World, untracked_policy: str) -> None:
    """``node --title agent NEW/cli.js task``: the allowlisted ``--title`` in its two-argument
    form."""
    new = world.new_claude()
    outcome = world.spawn(
        "node", ["--title", "agent", str(new.cli), "task"], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_legit_clustered_isolated_dash_m_runs(world: World, untracked_policy: str) -> None:
    """``python -Im aider`` (clustered short options) with the new venv's python."""
    new = world.new_aider()
    outcome = world.spawn(
        "python", ["-Im", "aider", "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_legit_pythonnousersite_and_utf8_mode_run(world: World, untracked_policy: str) -> None:
    """The new aider's console script with ``PYTHONNOUSERSITE=1`` and ``PYTHONUTF8=1``."""
    new = world.new_aider()
    env = world.env(new.prefix / "bin", PYTHONNOUSERSITE="1", PYTHONUTF8="1")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, new.marker)


@needs_node
def test_legit_node_options_with_two_spaces_runs(world: World, untracked_policy: str) -> None:
    """``NODE_OPTIONS="--max-old-space-size=4096  --no-warnings"`` (two spaces)."""
    new = world.new_claude()
    env = world.env(new.bin_dir, NODE_OPTIONS="--max-old-space-size=4096  --no-warnings")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, new.marker)


def test_legit_console_script_of_a_clean_system_site_venv_runs(
    world: World, untracked_policy: str
) -> None:
    """Control for the user-site attacks: the new aider in a ``--system-site-packages`` venv
    over a clean base interpreter, nothing in the user site, runs."""
    new = clean_system_site_aider(world, NEW_AIDER, "new-sys")
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_permitted_and_ran(outcome, new.marker)


def test_user_site_pth_import_line_over_a_clean_base(world: World, untracked_policy: str) -> None:
    """The suite's own user-site ``.pth`` attack again, over a base interpreter with no
    sandbox ``.pth`` of its own (so the refusal must come from the attack's file)."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    site = user_site(world.home / ".local")
    (site / "agent-tools.pth").write_text(insert_path(old.site), encoding="utf-8")
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_refused(outcome, old.marker, "agent-tools.pth")


def test_timestamp_pyc_of_a_directory_programs_main_matching_the_source(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """same as the unchecked-hash case with a plain timestamp pyc whose header states
    the source's mtime and size: recorded permit aider 0.70.0, 0.50.0 ran.
    ``python DIR`` with an ordinary (timestamp) ``__pycache__/__main__`` pyc whose header
    states ``__main__.py``'s mtime and size while its code inserts the old site-packages."""
    import struct

    new, old = world.new_aider(), world.old_aider()
    app = tmp_path / "app"
    app.mkdir()
    main = app / "__main__.py"
    main.write_text(RUN_AIDER, encoding="utf-8")
    tag = sys.implementation.cache_tag
    pyc = compile_to(run_old(old.site), app / "__pycache__" / f"__main__.{tag}.pyc")
    st = main.stat()
    data = bytearray(pyc.read_bytes())
    data[8:16] = struct.pack("<II", int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
    pyc.write_bytes(bytes(data))
    outcome = world.spawn(
        "python", [str(app), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "pyc", "__pycache__", "bytecode", "0.50.0")


def test_a_directory_program_whose_main_is_sourceless_bytecode_is_refused_naming_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python DIR`` where DIR holds no ``__main__.py``, only ``__main__.pyc`` (sourceless, the
    legacy place): the path finder runs that bytecode, so the refusal names it, not a
    ``__main__.py`` that is missing."""
    new, old = world.new_aider(), world.old_aider()
    app = tmp_path / "app"
    app.mkdir()
    compile_to(run_old(old.site), app / "__main__.pyc")
    outcome = world.spawn(
        "python", [str(app), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "__main__.pyc")
    assert "not found" not in outcome.reason, outcome.reason


# ====================================================== program source reaching sys.path


def script_spawn(world: World, untracked_policy: str, tmp_path: Path, new: Venv, body: str):  # type: ignore[no-untyped-def]
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(body, encoding="utf-8")
    return world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip


def test_from_sys_import_path_then_insert(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``from sys import path; path.insert(0, OLD)``: sys.path reached by a from-import."""
    new, old = world.new_aider(), world.old_aider()
    body = f"from sys import path\npath.insert(0, {str(old.site)!r})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "path", "sys")


def test_sys_path_reached_through_os_sys(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``os.sys.path.insert(0, OLD)``: ``os`` re-exports the ``sys`` module as an attribute."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import os\nos.sys.path.insert(0, {str(old.site)!r})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "os.sys", "sys")


def test_sys_path_reached_through_os_path_sys(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``os.path.sys.path.insert(0, OLD)``: posixpath holds ``sys`` too."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import os.path\nos.path.sys.path.insert(0, {str(old.site)!r})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "os.path.sys", "sys")


def test_sys_path_reached_through_vars(world: World, untracked_policy: str, tmp_path: Path) -> None:
    """``vars(sys)["path"].insert(0, OLD)``: a builtin hands out the module's namespace."""
    new, old = world.new_aider(), world.old_aider()
    body = f"import sys\nvars(sys)['path'].insert(0, {str(old.site)!r})\n" + RUN_AIDER
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "vars", "sys")


def test_sys_reached_through_a_catalogued_module_attribute(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``import aider.main as m; m.sys.path.insert(...); m.sys.modules.pop(...)``: the new
    aider's own module exposes ``sys``; evicting aider and importing again loads 0.50.0."""
    new, old = world.new_aider(), world.old_aider()
    body = (
        "import aider.main as m\n"
        f"m.sys.path.insert(0, {str(old.site)!r})\n"
        "m.sys.modules.pop('aider.main')\nm.sys.modules.pop('aider')\n" + RUN_AIDER
    )
    outcome = script_spawn(world, untracked_policy, tmp_path, new, body)
    world.assert_refused(outcome, old.marker, "m.sys", "sys", "aider.main")


def test_sourceless_main_pyc_of_a_directory_program(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python DIR`` where DIR holds only ``__main__.pyc`` (legacy sourceless location)."""
    new, old = world.new_aider(), world.old_aider()
    app = tmp_path / "app"
    compile_to(run_old(old.site), app / "__main__.pyc")
    outcome = world.spawn(
        "python", [str(app), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "__main__", "pyc", "bytecode", str(app))


def test_user_site_pth_path_to_a_workspace_folder_with_a_helper(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """a ``.pth`` path line makes a workspace folder a "site folder", whose modules are
    then trusted unexamined: recorded permit aider 0.70.0 (python-script), 0.50.0 ran.
    A user-site ``.pth`` path line adds a workspace folder; a script imports
    ``agent_helpers`` from there (a site folder's addition), which puts the old site first."""
    new, old = clean_system_site_aider(world, NEW_AIDER, "new-sys"), world.old_aider()
    libs = tmp_path / "ws" / "libs"
    libs.mkdir(parents=True)
    (libs / "agent_helpers.py").write_text(insert_path(old.site), encoding="utf-8")
    (user_site(world.home / ".local") / "ws.pth").write_text(f"{libs}\n", encoding="utf-8")
    outcome = script_spawn(
        world, untracked_policy, tmp_path, new, "import agent_helpers\n" + RUN_AIDER
    )
    world.assert_refused(outcome, old.marker, "agent_helpers", "sys.path", "0.50.0")


def test_pythonpath_helper_module_rewriting_sys_path(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """The same helper on PYTHONPATH (outside every site folder): the README refuses it."""
    new, old = world.new_aider(), world.old_aider()
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "agent_helpers.py").write_text(insert_path(old.site), encoding="utf-8")
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir()
    script.write_text("import agent_helpers\n" + RUN_AIDER, encoding="utf-8")
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(PYTHONPATH=str(libs)),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "agent_helpers", "outside", str(libs))


@pytest.mark.parametrize(
    "cookie",
    [
        "\x0c# coding: utf-7\n",
        "#coding=utf7\n",
        "# -*- coding: UTF_7 -*-\n",
        "#!/usr/bin/python3\n# vim:fileencoding=utf-7\n",
    ],
    ids=["form-feed", "utf7-alias", "upper-underscore", "shebang-then-vim"],
)
def test_utf7_cookie_variants_hiding_a_line_in_a_comment(
    world: World, untracked_policy: str, tmp_path: Path, cookie: str
) -> None:
    """Other spellings of a UTF-7 cookie CPython honours; a ``+AAo-`` inside a comment starts
    a hidden line inserting the old site-packages."""
    import base64

    new, old = world.new_aider(), world.old_aider()
    hidden = insert_path(old.site).strip()
    escaped = base64.b64encode(("\n" + hidden + "\n").encode("utf-16-be"))
    line = "# note +" + escaped.decode("ascii").rstrip("=") + "-\n"
    script = tmp_path / "agent.py"
    script.write_bytes((cookie + line + RUN_AIDER).encode("ascii"))
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "utf-7", "utf7", "sys.path", "coding")


@needs_node
def test_node_package_folder_index_js_linking_old_cli(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node DIR`` with no ``main``: node runs ``DIR/index.js``, a link to the old CLI."""
    old = world.old_claude()
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app"}), encoding="utf-8")
    os.symlink(old.cli, app / "index.js")
    outcome = world.spawn(
        "node", [str(app), "task"], binary=NODE, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "1.0.51")


@needs_node
def test_node_exact_file_wins_over_js_extension(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node ws/agent`` where ``agent`` (a link to the old CLI) and ``agent.js`` (a link to
    the new one) both exist: node runs the exact name first."""
    old, new = world.old_claude(), world.new_claude()
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(old.cli, ws / "agent")
    os.symlink(new.cli, ws / "agent.js")
    outcome = world.spawn(
        "node", [str(ws / "agent"), "task"], binary=NODE, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "1.0.51")


# ------------------------------------------------------------------ more legitimate uses


@needs_node
def test_legit_node_options_with_a_quoted_title_runs(world: World, untracked_policy: str) -> None:
    """``NODE_OPTIONS='--title="my agent"'``: double quotes group words, as node documents."""
    new = world.new_claude()
    env = world.env(new.bin_dir, NODE_OPTIONS='--title="my agent"')
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, new.marker)


@needs_node
def test_legit_node_disable_warning_runs(world: World, untracked_policy: str) -> None:
    """``node --disable-warning=ExperimentalWarning NEW/cli.js`` (allowlisted)."""
    new = world.new_claude()
    outcome = world.spawn(
        "node", ["--disable-warning=ExperimentalWarning", str(new.cli), "task"], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


@needs_node
def test_legit_node_running_the_new_package_folder_runs(
    world: World, untracked_policy: str
) -> None:
    """``node NEW_PACKAGE_DIR`` runs the package's ``main``: the new claude."""
    new = world.new_claude()
    outcome = world.spawn(
        "node", [str(new.package), "task"], binary=NODE, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_legit_warning_filters_run(world: World, untracked_policy: str) -> None:
    """``python -P -Wignore::DeprecationWarning -m aider`` with
    ``PYTHONWARNINGS=ignore::UserWarning`` (builtin categories only)."""
    new = world.new_aider()
    outcome = world.spawn(
        "python", ["-P", "-Wignore::DeprecationWarning", "-m", "aider", "task"], binary=new.python,
        policy=untracked_policy, env=world.env(PYTHONWARNINGS="ignore::UserWarning"),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_legit_pythonpath_project_with_folders_named_like_stdlib_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """The console script with a project on PYTHONPATH that has ``html/``, ``test/`` and
    ``email/`` folders (no ``__init__.py``: namespace portions never shadow the standard
    library's packages)."""
    new = world.new_aider()
    project = tmp_path / "project"
    for folder in ("html", "test", "email"):
        (project / folder).mkdir(parents=True)
        (project / folder / "README.txt").write_text("docs\n", encoding="utf-8")
    (project / "html" / "index.html").write_text("<p>hi</p>\n", encoding="utf-8")
    outcome = world.spawn(
        "aider", ["task"], cwd=project, policy=untracked_policy,
        env=world.env(new.prefix / "bin", PYTHONPATH=str(project)),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_legit_console_script_with_compiled_bytecode_runs(
    world: World, untracked_policy: str
) -> None:
    """The new aider's console script after its site-packages was byte-compiled (as pip
    does at install time and Python does on first import)."""
    import compileall

    new = world.new_aider()
    assert compileall.compile_dir(str(new.site), quiet=1)
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_permitted_and_ran(outcome, new.marker)


def test_empty_path_entry_is_the_child_cwd_for_env(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``PATH=:NEW/bin:...`` (an empty entry means the working directory to ``execvp``) and
    ``#!/usr/bin/env python3``, with the child's cwd the old venv's ``bin``. Observed: a
    permit for the new venv's python is recorded while env starts the old venv's python3,
    which then dies in CPython's getpath (argv[0] found through the empty entry), so no
    below-floor code runs: asserted here is only that the old aider never ran."""
    new, old = world.new_aider(), world.old_aider()
    agent = write_executable(tmp_path / "ws" / "aider", "#!/usr/bin/env python3\n" + RUN_AIDER)
    env = world.env(new.prefix / "bin")
    env["PATH"] = ":" + env["PATH"]
    outcome = world.spawn(
        "aider", ["task"], binary=agent, cwd=old.prefix / "bin", policy=untracked_policy,
        env=env,
    )  # fmt: skip
    assert not old.marker.exists(), f"the old aider ran: {outcome!r}; {world.recorded()}"
    assert outcome["outcome"] == "refused" or outcome["returncode"] != 0, outcome


def test_relative_path_entry_decides_the_interpreters_venv_through_argv0(
    world: World, untracked_policy: str
) -> None:
    """the gate looks ``python`` up past the relative ``bin`` entry and judges the new
    venv, but CPython, given argv[0] ``python``, searches PATH in the child's cwd, finds
    ``bin/python`` of the old venv and takes that venv's site-packages: recorded permit aider
    0.70.0 (``python -m``), 0.50.0 ran.
    ``spawn("python", ["-m", "aider"])`` with ``PATH=bin:NEW/bin:...`` and the child's cwd
    the old venv: CPython finds its venv from argv[0] by searching PATH in its own cwd."""
    new, old = world.new_aider(), world.old_aider()
    env = world.env(new.prefix / "bin")
    env["PATH"] = "bin:" + env["PATH"]
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], cwd=old.prefix, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker)


@needs_node
def test_node_relative_script_resolved_in_the_child_cwd(
    world: World, untracked_policy: str
) -> None:
    """``node cli.js`` (relative) with the child's cwd the old package folder."""
    old = world.old_claude()
    outcome = world.spawn(
        "node", ["cli.js", "task"], binary=NODE, cwd=old.package, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "1.0.51")


def test_python_relative_script_resolved_in_the_child_cwd(
    world: World, untracked_policy: str
) -> None:
    """``python run.py`` (relative) with the child's cwd a copy of the old site-packages that
    holds ``run.py``: its folder, first on sys.path, holds the old aider."""
    new, old = world.new_aider(), world.old_aider()
    lib = copy_of_old_site(world, old.site, "cwd-lib")
    (lib / "run.py").write_text(RUN_AIDER, encoding="utf-8")
    outcome = world.spawn(
        "python", ["run.py", "task"], binary=new.python, cwd=lib, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "0.50.0", str(lib))


@pytest.mark.parametrize("form", ["#!/usr/bin/env {python}", "#!/usr/bin/env -S {python} -I"])
def test_env_naming_an_absolute_interpreter_runs_it_as_named(
    world: World, untracked_policy: str, tmp_path: Path, form: str
) -> None:
    """``#!/usr/bin/env /opt/venv/bin/python3``: env runs the path as given, searching no
    PATH; the interpreter is that file, not a relative one."""
    new = world.new_aider()
    line = form.format(python=new.prefix / "bin" / "python3")
    agent = write_executable(tmp_path / "bin" / "aider", f"{line}\n" + RUN_AIDER)
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, new.marker)


def test_env_naming_a_relative_interpreter_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``#!/usr/bin/env ./python3``: env finds it from the child's working directory."""
    new, old = world.new_aider(), world.old_aider()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "python3").symlink_to(old.prefix / "bin" / "python3")
    agent = write_executable(tmp_path / "bin" / "aider", "#!/usr/bin/env ./python3\n" + RUN_AIDER)
    env = world.env(new.prefix / "bin")
    outcome = world.spawn(
        "aider", ["task"], binary=agent, policy=untracked_policy, env=env, cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "relative interpreter")


def test_env_stops_at_a_symbolic_link_loop_on_its_path(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """glibc's execvp goes on to the next PATH folder only after a few errors (not found,
    permission): at a ``python3`` that is a link loop it stops, and env starts nothing. No
    permit may stand for it."""
    new = world.new_aider()
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "python3").symlink_to("python3")
    agent = write_executable(tmp_path / "bin" / "aider", "#!/usr/bin/env python3\n" + RUN_AIDER)
    env = world.env(loop, new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], binary=agent, policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, "python3")


@pytest.mark.parametrize("layout", ["module", "package"])
def test_a_refusal_of_sourceless_aider_names_no_file_that_is_not_there(
    world: World, tmp_path: Path, layout: str
) -> None:
    """The reason says what is there (a single module; a package without its __init__.py
    source), never ``.../aider/__init__.py`` where there is none."""
    new = world.new_aider()
    lib = tmp_path / "lib"
    if layout == "module":
        compile_to("", lib / "aider.pyc")
    else:
        compile_to("", lib / "aider" / "__init__.pyc")
    outcome = world.spawn(
        "aider", ["task"], policy="default", env=world.env(new.prefix / "bin", PYTHONPATH=str(lib))
    )
    assert outcome["verdict"] == "refuse", outcome
    assert str(lib / "aider" / "__init__.py ") not in outcome.reason + " ", outcome.reason
    expected = "is a single module" if layout == "module" else "has no __init__.py source"
    assert expected in outcome.reason, outcome.reason
