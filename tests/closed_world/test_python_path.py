"""Where a Python child finds code, as CPython builds its path: the start-up files ``site``
runs, the order of folders, how an import is resolved in them, and a cached answer that
notices every change. Real virtual environments and files; nothing mocked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hosts import Host, floor
from probes import (
    pip_install,
    plain_interpreter,
    real_venv,
    site_packages,
    write_executable,
)

from floorguard._identify import identify

DISTUTILS_LINE = (
    "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == "
    "'local'; enabled and __import__('_distutils_hack').add_shim(); \n"
)


@pytest.fixture
def venv(tmp_path: Path) -> tuple[Path, Path]:
    """A real venv (no system site-packages): its python and its site-packages."""
    python = real_venv(tmp_path / "venv")
    return python, site_packages(tmp_path / "venv")


def paths(python: Path, tmp_path: Path, **env: str) -> identify.PythonPath:
    identify.clear_cache()
    return identify.python_path(str(python), env, str(tmp_path), frozenset(), str(tmp_path))


def test_pth_path_lines_join_the_search_path_after_their_site(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    (tmp_path / "src").mkdir()
    (site / "project.pth").write_text(f"# a comment\n\n{tmp_path / 'src'}\n/does/not/exist\n")
    workspace = tmp_path / "ws"  # (src is outside it: a folder of the user's own)
    workspace.mkdir()
    identify.clear_cache()
    found = identify.python_path(str(python), {}, str(workspace), frozenset(), str(workspace))
    assert found.sites == (str(site), str(tmp_path / "src"))
    assert found.doubts == ()


def test_a_pth_path_line_naming_a_folder_in_the_working_directory_is_a_doubt(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    (tmp_path / "src").mkdir()
    (site / "project.pth").write_text(f"{tmp_path / 'src'}\n")
    [doubt] = paths(python, tmp_path).doubts
    assert "which a .pth file adds to the path, lies in the working directory" in doubt


def test_pth_import_line_of_any_other_form_is_a_doubt(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    (site / "evil.pth").write_text("import sys; sys.path.insert(0, '/old')\n")
    [doubt] = paths(python, tmp_path).doubts
    assert "evil.pth line 1 runs code at start-up" in doubt


def test_distutils_precedence_is_understood_beside_its_module(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    (site / "distutils-precedence.pth").write_text(DISTUTILS_LINE)
    (site / "_distutils_hack").mkdir()
    (site / "_distutils_hack" / "__init__.py").write_text("def add_shim(): pass\n")
    assert paths(python, tmp_path).doubts == ()


def test_distutils_precedence_whose_module_pythonpath_shadows_is_a_doubt(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    (site / "distutils-precedence.pth").write_text(DISTUTILS_LINE)
    (site / "_distutils_hack").mkdir()
    (site / "_distutils_hack" / "__init__.py").write_text("def add_shim(): pass\n")
    planted = tmp_path / "planted"
    (planted / "_distutils_hack").mkdir(parents=True)
    (planted / "_distutils_hack" / "__init__.py").write_text("import os; os.system('x')\n")
    doubts = paths(python, tmp_path, PYTHONPATH=str(planted)).doubts
    assert any("_distutils_hack is not imported from beside it" in d for d in doubts), doubts


def test_editable_finder_of_a_catalogued_package_is_a_doubt(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    finder = "__editable___aider_chat_0_50_0_finder"
    (site / "__editable__.aider_chat-0.50.0.pth").write_text(
        f"import {finder}; {finder}.install()\n"
    )
    (site / f"{finder}.py").write_text("MAPPING = {'aider': '/src/aider'}\n")
    [doubt] = paths(python, tmp_path).doubts
    assert "an editable install of aider" in doubt


def test_editable_finder_of_another_package_is_understood(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    finder = "__editable___mytool_1_0_finder"
    (site / "__editable__.mytool-1.0.pth").write_text(f"import {finder}; {finder}.install()\n")
    (site / f"{finder}.py").write_text("MAPPING: dict[str, str] = {'mytool': '/src/mytool'}\n")
    assert paths(python, tmp_path).doubts == ()


def test_sitecustomize_on_pythonpath_is_a_doubt_but_not_in_the_program_folder(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    """CPython imports sitecustomize before it adds the program's folder to the path."""
    python, _ = venv
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text("import sys\n")
    (tmp_path / "sitecustomize.py").write_text("import sys\n")
    found = paths(python, tmp_path, PYTHONPATH=str(planted))
    assert [d for d in found.doubts if "runs at start-up" in d] == [
        f"sitecustomize in {planted} runs at start-up, before the program"
    ]


def test_a_module_that_shadows_the_standard_library_ahead_of_it_is_a_doubt(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _ = venv
    planted = tmp_path / "planted"
    (planted / "encodings").mkdir(parents=True)
    (planted / "encodings" / "__init__.py").write_text("")
    (planted / "json").mkdir()  # a namespace portion: the standard library's json wins
    doubts = paths(python, tmp_path, PYTHONPATH=str(planted)).doubts
    assert [d for d in doubts if "which shadows" in d] == [
        f"{planted} holds encodings, which shadows the standard library's encodings "
        "(code run instead of it)"
    ]


def test_a_venv_with_system_site_puts_its_own_site_packages_before_the_user_site(
    tmp_path: Path,
) -> None:
    import venv as venv_module

    venv_module.EnvBuilder(with_pip=False, symlinks=True, system_site_packages=True).create(
        tmp_path / "venv"
    )
    own = site_packages(tmp_path / "venv")
    user = tmp_path / "userbase" / "lib" / own.parent.name / "site-packages"
    user.mkdir(parents=True)
    found = paths(
        tmp_path / "venv" / "bin" / "python", tmp_path, PYTHONUSERBASE=str(user.parents[2])
    )
    assert found.sites.index(str(own)) < found.sites.index(str(user))


@pytest.mark.parametrize(
    ("flags", "user_site"),
    [("", True), ("E", True), ("EP", True), ("Es", False), ("I", False)],
)
def test_site_reads_the_user_base_whatever_e_says_and_only_s_or_i_turn_the_user_site_off(
    tmp_path: Path, flags: str, user_site: bool
) -> None:
    # -E keeps CPython's C start-up from reading PYTHON* variables; site.py reads
    # PYTHONUSERBASE from os.environ itself.
    import venv as venv_module

    venv_module.EnvBuilder(with_pip=False, symlinks=True, system_site_packages=True).create(
        tmp_path / "venv"
    )
    version = site_packages(tmp_path / "venv").parent.name
    user = tmp_path / "userbase" / "lib" / version / "site-packages"
    user.mkdir(parents=True)
    identify.clear_cache()
    found = identify.python_path(
        str(tmp_path / "venv" / "bin" / "python"), {"PYTHONUSERBASE": str(user.parents[2])},
        None, frozenset(flags), str(tmp_path),
    )  # fmt: skip
    assert (str(user) in found.sites) == user_site, found.sites


@pytest.mark.parametrize("variable", ["HOME", "PYTHONUSERBASE"])
def test_a_relative_home_or_user_base_puts_the_user_site_below_the_working_directory(
    tmp_path: Path, variable: str
) -> None:
    # site takes HOME as given (~/.local) and makes the user site absolute against the
    # child's working directory: a workspace holding hh/.local/lib/... puts it on the path.
    import venv as venv_module

    venv_module.EnvBuilder(with_pip=False, symlinks=True, system_site_packages=True).create(
        tmp_path / "venv"
    )
    version = site_packages(tmp_path / "venv").parent.name
    workspace = tmp_path / "workspace"
    base = workspace / "hh" / (".local" if variable == "HOME" else "")
    user = base / "lib" / version / "site-packages"
    user.mkdir(parents=True)
    identify.clear_cache()
    found = identify.python_path(
        str(tmp_path / "venv" / "bin" / "python"), {variable: "hh"}, str(workspace),
        frozenset(), str(workspace),
    )  # fmt: skip
    assert str(user) in found.sites, found.sites


def test_namespace_portion_first_on_the_path_loses_to_a_regular_package_after_it(
    tmp_path: Path,
) -> None:
    early, late = tmp_path / "early", tmp_path / "late"
    (early / "aider").mkdir(parents=True)
    (late / "aider").mkdir(parents=True)
    (late / "aider" / "__init__.py").write_text("")
    assert identify.find_module("aider", [str(early), str(late)]) == (str(late), "package")
    assert identify.find_module("aider", [str(early)]) == (str(early), "namespace")


def test_a_lookup_answered_once_a_judgement_still_binds_the_answers_kept_over_judgements(
    tmp_path: Path,
) -> None:
    """Within one judgement, where an import finds a module is looked at once; an answer
    kept over judgements that took it from there must still change when those folders do
    (what the first look consulted is noted again with every answer it gives)."""
    from floorguard._identify.consulted import _checked_memo, new_cache, one_judgement

    early, late = tmp_path / "early", tmp_path / "late"
    early.mkdir()
    (late / "aider").mkdir(parents=True)
    (late / "aider" / "__init__.py").write_text("")
    first, second = new_cache(), new_cache()

    def judged() -> tuple[object, object]:
        with one_judgement():
            where = [str(early), str(late)]
            one = _checked_memo(first, "a", lambda: identify.find_module("aider", where))
            two = _checked_memo(second, "b", lambda: identify.find_module("aider", where))
            return one, two

    assert judged() == ((str(late), "package"), (str(late), "package"))
    # a module file earlier on the path: both kept answers must see it
    (early / "aider.py").write_text("")
    assert judged() == ((str(early), "module"), (str(early), "module"))


def test_a_cached_answer_notices_a_pth_file_added_or_rewritten(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, site = venv
    identify.clear_cache()
    ask = lambda: identify.python_path(  # noqa: E731
        str(python), {}, str(tmp_path), frozenset(), str(tmp_path)
    )
    assert ask().doubts == ()
    pth = site / "late.pth"
    pth.write_text("# nothing yet\n")
    assert ask().doubts == ()
    # Rewritten in place (the same inode): its size and ctime change.
    with open(pth, "w") as rewrite:
        rewrite.write("import x\n")
    assert any("late.pth line 1" in d for d in ask().doubts)
    os.remove(pth)
    assert ask().doubts == ()


def test_virtualenv_pth_is_understood_beside_its_module(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    """virtualenv and uv write ``_virtualenv.pth`` (``import _virtualenv``) beside the module."""
    python, site = venv
    (site / "_virtualenv.pth").write_text("import _virtualenv\n")
    (site / "_virtualenv.py").write_text("")
    assert paths(python, tmp_path).doubts == ()
    os.remove(site / "_virtualenv.py")
    [doubt] = paths(python, tmp_path).doubts
    assert "_virtualenv.pth line 1 runs code at start-up (_virtualenv is not beside it)" in doubt


def test_an_archive_on_pythonpath_is_a_doubt(venv: tuple[Path, Path], tmp_path: Path) -> None:
    """zipimport would load modules from it that are never read here."""
    python, _ = venv
    archive = tmp_path / "old.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    doubts = paths(python, tmp_path, PYTHONPATH=str(archive)).doubts
    assert (
        f"sys.path entry {archive} is a file, or a path inside one (an archive whose modules "
        "are not read)"
    ) in doubts


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "h", {"aider": floor("0.60.0")})


def _good_and_bad(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """aider-chat 0.70.0 installed in a venv (its console script), and a copy of an
    installed aider-chat 0.50.0 (package and dist-info) to vendor somewhere."""
    good_marker, bad_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(
        tmp_path / "good", dist="aider-chat", module="aider", version="0.70.0", marker=good_marker
    )
    pip_install(
        tmp_path / "bad", dist="aider-chat", module="aider", version="0.50.0", marker=bad_marker
    )
    return script, good_marker, site_packages(tmp_path / "bad"), bad_marker


def _vendor(bad_site: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for entry in bad_site.iterdir():
        if entry.name.startswith(("aider", "aider_chat")):
            shutil.copytree(entry, into / entry.name)


TWO_SPAWNS = r"""
import json, os, sys
import floorguard
request = json.loads(sys.argv[1])
results = []
for extra in request["envs"]:
    # (PYTHONPATH is the host's own, for its copy of floorguard)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONSAFEPATH", "PYTHONPATH"}}
    env.update(extra)
    try:
        child = floorguard.spawn("aider", ["task"], binary=request["binary"], env=env, stdout=-3)
        child.wait(timeout=60)
        results.append("started")
    except floorguard.SpawnRefused as exc:
        results.append("refused")
        print(exc, file=sys.stderr)  # (why, for a failing test's message)
print(json.dumps(results))
"""


@pytest.mark.parametrize("pythonpath", ["vendor", os.pathsep + "/nonexistent"])
def test_relative_and_empty_pythonpath_entries_are_resolved_as_the_interpreter_does(
    host: Host, tmp_path: Path, pythonpath: str
) -> None:
    """README: the import "is resolved in the child's sys.path order as CPython builds it
    (...; PYTHONPATH; ...)". CPython keeps a relative PYTHONPATH entry (made absolute
    against the working directory) and turns an empty one into the working directory; the
    gate must do the same, not drop both: the console script of aider 0.70.0 then imports a
    vendored 0.50.0."""
    script, _, bad_site, bad_marker = _good_and_bad(tmp_path)
    workspace = tmp_path / "workspace"
    _vendor(bad_site, workspace / "vendor" if pythonpath == "vendor" else workspace)
    host.spawn(
        adapter="aider", binary=str(script), argv=["task"], cwd=str(workspace),
        child_env={"PYTHONPATH": pythonpath},
    )  # fmt: skip
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


def test_options_on_a_shebang_line_are_one_argument_as_the_kernel_passes_them(
    host: Host, tmp_path: Path
) -> None:
    """README: "-I, -E, -s, -S and PYTHONNOUSERSITE, also on a #! line, drop what they
    drop". Linux passes everything after the interpreter on a #! line as ONE argument:
    `#!/venv/bin/python -X utf8 -I` runs python with the -X option " utf8 -I", not
    isolated. The gate must not split the line into words and believe -I (dropping the
    script's folder from the search and judging the venv's aider 0.70.0): the script
    imports the 0.50.0 beside it."""
    _, _, bad_site, bad_marker = _good_and_bad(tmp_path)
    tools = tmp_path / "tools"
    _vendor(bad_site, tools)
    python = tmp_path / "good" / "bin" / "python"
    runner = write_executable(
        tools / "run-agent",
        f"#!{python} -X utf8 -I\nimport sys\nfrom aider.main import main\nsys.exit(main())\n",
    )
    probe = subprocess.run([str(runner), "task"], capture_output=True, text=True, check=False)
    assert probe.returncode == 0 and bad_marker.exists(), probe.stderr  # what really runs
    bad_marker.unlink()
    host.spawn(adapter="aider", binary=str(runner), argv=["task"])
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


def test_a_long_lived_host_does_not_reuse_an_import_answer_across_pythonsafepath(
    host: Host, tmp_path: Path
) -> None:
    """README: "an answer read from metadata is reused only while every metadata file and
    folder it consulted is unchanged", and the search honours PYTHONSAFEPATH. A host spawns
    a script that imports aider twice: first with PYTHONSAFEPATH=1 (the venv's 0.70.0 is
    imported: permit, correctly), then without it (the script's folder, holding 0.50.0,
    comes first). The second answer must not be the first one, from a cache keyed on PATH,
    PYTHONPATH and HOME only."""
    _, _, bad_site, bad_marker = _good_and_bad(tmp_path)
    tools = tmp_path / "tools"
    _vendor(bad_site, tools)
    python = tmp_path / "good" / "bin" / "python"
    runner = write_executable(
        tools / "run-agent", f"#!{python}\nimport sys\nfrom aider.main import main\nmain()\n"
    )
    request = {"binary": str(runner), "envs": [{"PYTHONSAFEPATH": "1"}, {}]}
    done = host.python("-c", TWO_SPAWNS, json.dumps(request))
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results[0] == "started", (results, done.stderr)
    assert not bad_marker.exists(), f"aider 0.50.0 ran on the second spawn: {results}"


def test_pythonhome_moves_the_site_packages_the_interpreter_imports_from(
    host: Host, tmp_path: Path
) -> None:
    """PYTHONHOME (which the gate even hands its probe "so the probe loads the code the child
    will") moves a system interpreter's prefix, and with it the site-packages it imports
    from. The gate must resolve imports there too, not read aider-chat 0.70.0 from the
    interpreter's own prefix and permit while the console script imports 0.50.0 from
    $PYTHONHOME's site-packages."""
    prefix = tmp_path / "usr"
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    good_marker, bad_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(
        prefix, dist="aider-chat", module="aider", version="0.70.0", marker=good_marker
    )
    home = tmp_path / "otherhome"
    stdlib = prefix / "lib" / f"python3.{sys.version_info[1]}"
    lib = home / "lib" / stdlib.name
    (lib / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            os.symlink(os.readlink(entry), lib / entry.name)
    (home / "bin").mkdir()
    os.symlink(prefix / "bin" / "python", home / "bin" / "python")
    pip_install(home, dist="aider-chat", module="aider", version="0.50.0", marker=bad_marker)
    child_env = {"PYTHONHOME": str(home)}
    which = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import aider; print(aider.__file__)"],
        env={**os.environ, **child_env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(lib / "site-packages") in which.stdout  # what the interpreter really imports
    host.spawn(adapter="aider", binary=str(script), argv=["task"], child_env=child_env)
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


def test_every_name_the_standard_library_imports_outside_itself_is_a_known_probe() -> None:
    """Every top-level name this interpreter's standard library imports that is not its
    own is in STDLIB_PROBES (a module of that name ahead of the site folders is refused),
    or is refused elsewhere (the start-up customizers) or installed (pip)."""
    import ast
    import sysconfig

    from floorguard._identify.python_site import STDLIB_PROBES

    refused_elsewhere = {"sitecustomize", "usercustomize", "pip", "__main__"}
    own = {*sys.stdlib_module_names, "test"}  # (the test package is in its folder)
    root = Path(sysconfig.get_paths()["stdlib"])
    outside: dict[str, str] = {}
    for source in root.rglob("*.py"):
        parts = source.relative_to(root).parts
        if parts[0] in ("site-packages", "idlelib") or {"test", "tests"} & set(parts):
            continue  # (test suites import test-only modules)
        try:
            tree = ast.parse(source.read_bytes())
        except (SyntaxError, ValueError):
            continue  # (lib2to3's test data, Python 2 files)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".", 1)[0]
                if top not in own:
                    outside.setdefault(top, str(source.relative_to(root)))
    missing = {name: where for name, where in outside.items()
               if name not in STDLIB_PROBES | refused_elsewhere}  # fmt: skip
    assert not missing, missing
    assert "org" in outside  # (the scan sees the probe it is about)


def _user_site_venv(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A venv with the system site (so the user site is on) and a user base: its python,
    its own site-packages and the user site."""
    import venv as venv_module

    venv_module.EnvBuilder(with_pip=False, symlinks=True, system_site_packages=True).create(
        tmp_path / "venv"
    )
    own = site_packages(tmp_path / "venv")
    user = tmp_path / "userbase" / "lib" / own.parent.name / "site-packages"
    user.mkdir(parents=True)
    return tmp_path / "venv" / "bin" / "python", own, user


INSTALLER_LINES = {
    "_virtualenv.pth": ("import _virtualenv\n", "_virtualenv.py"),
    "distutils-precedence.pth": (DISTUTILS_LINE, "_distutils_hack/__init__.py"),
}


@pytest.mark.parametrize("pth", sorted(INSTALLER_LINES))
def test_an_installer_pth_line_in_the_user_site_is_refused(tmp_path: Path, pth: str) -> None:
    """The installers' own .pth lines run the module beside them: in an install tree that
    is the installer's code, but the user site is the user's environment (a PYTHONUSERBASE
    can put it in the workspace), where that module can be anything."""
    python, _, user = _user_site_venv(tmp_path)
    line, module = INSTALLER_LINES[pth]
    (user / pth).write_text(line)
    (user / module).parent.mkdir(parents=True, exist_ok=True)
    (user / module).write_text("open('marker', 'w')\n")
    doubts = paths(python, tmp_path, PYTHONUSERBASE=str(user.parents[2])).doubts
    # (Neither file is recorded by an installer there either: each is a doubt of its own.)
    assert (
        f"{user / pth} line 1 runs code at start-up (an import line in the user site, the "
        "user's environment: set PYTHONNOUSERSITE=1 or remove it)"
    ) in doubts


@pytest.mark.parametrize("name", ["sitecustomize", "usercustomize", "org", "msvcrt", "_winapi"])
def test_an_editable_finder_mapping_a_name_imported_unasked_is_refused(
    tmp_path: Path, name: str
) -> None:
    """An editable install's finder serves every name the path does not find: one mapping
    sitecustomize (imported by site), usercustomize, or a name the standard library probes
    for (org) runs its folder's code in a program that never names it."""
    editable = pytest.importorskip("setuptools.command.editable_wheel")
    python = real_venv(tmp_path / "venv")
    own = site_packages(tmp_path / "venv")
    source = tmp_path / "project" / "src"
    source.mkdir(parents=True)
    finder = "__editable___tool_1_0_finder"
    template = editable._finder_template(finder, {name: str(source)}, {})
    (own / f"{finder}.py").write_text(template)
    (own / "__editable__.tool-1.0.pth").write_text(f"import {finder}; {finder}.install()\n")
    workspace = tmp_path / "ws"  # (the project is the user's, outside it)
    workspace.mkdir()
    doubts = paths(python, workspace).doubts
    assert len(doubts) == 1 and f"maps {name}" in doubts[0], doubts


def test_a_pth_naming_one_folder_many_times_is_searched_once(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    """site adds a folder once however many lines name it; so is it searched once: 20,000
    spellings of one folder holding 500 files cost one folder's search, not 20,000 (the
    same .pth made every decision take minutes)."""
    python, site = venv
    folder = site / "b"
    folder.mkdir()
    for n in range(500):
        (folder / f"f{n}.txt").write_text("")
    (site / "a.pth").write_text("".join(f"b/{n}/..\n" for n in range(20_000)))
    assert paths(python, tmp_path).sites.count(str(folder)) == 1


def test_a_pth_starting_with_a_byte_order_mark_is_refused(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    """Python 3.13's site drops a BOM; 3.11's and 3.12's read it as the first character of
    the first line, so ``\\ufeff/abs/dir`` becomes a folder inside the site folder."""
    python, site = venv
    (site / "a.pth").write_bytes(b"\xef\xbb\xbf" + str(tmp_path / "absent").encode() + b"\n")
    doubts = paths(python, tmp_path).doubts
    assert doubts == (f"{site / 'a.pth'} starts with a byte-order mark, read differently by "
                      "each Python",)  # fmt: skip


@pytest.mark.parametrize(
    "name", ["nt.py", "_winapi.py", "msvcrt/__init__.py", "org/python/core.py"]
)
@pytest.mark.parametrize("where", ["user site", "venv site", "a folder a .pth adds"])
def test_a_module_the_standard_library_imports_when_there_is_refused_anywhere_on_the_path(
    tmp_path: Path, name: str, where: str
) -> None:
    """This interpreter's standard library lacks nt, msvcrt, _winapi (another platform's)
    and org (a Jython probe), so pathlib's, subprocess's and copy's imports of them find
    whatever folder holds one, after the standard library too."""
    python, own, user = _user_site_venv(tmp_path)
    folder = {"user site": user, "venv site": own, "a folder a .pth adds": tmp_path / "added"}
    target = folder[where] / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("open('marker', 'w')\n")
    if where == "a folder a .pth adds":
        (user / "added.pth").write_text(f"{folder[where]}\n")
    doubts = paths(python, tmp_path, PYTHONUSERBASE=str(user.parents[2])).doubts
    module = name.split("/", maxsplit=1)[0].removesuffix(".py")
    assert (
        f"{folder[where]} holds {module}, which the standard library imports when it is "
        "there (code run by a program that never names it)" in doubts
    ), doubts


@pytest.mark.parametrize("line", [b"/\x1b(Bold", "/ünïcode".encode(), b"/a\x0cb"])
def test_a_pth_holding_bytes_other_than_printable_ascii_is_refused(
    venv: tuple[Path, Path], tmp_path: Path, line: bytes
) -> None:
    """3.11's and 3.12's site read a .pth in the child's locale encoding: a path line that
    is not printable ASCII may name another folder there (or, under a stateful codeset,
    hide an import line behind an escape sequence)."""
    python, site = venv
    (site / "a.pth").write_bytes(str(tmp_path).encode() + line + b"\n")
    doubts = paths(python, tmp_path).doubts
    assert doubts == (f"{site / 'a.pth'} holds bytes other than printable ASCII, read by some "
                      "Pythons in the locale's encoding",), doubts  # fmt: skip


def _home_line(python: Path) -> bytes:
    cfg = python.parent.parent / "pyvenv.cfg"
    return next(line for line in cfg.read_bytes().splitlines() if line.startswith(b"home"))


GETPATH_MISREAD = {
    "a folder": None,
    "not UTF-8": lambda home: b"# caf\xe9\n" + home + b"\n",
    "32 KB": lambda home: home + b"\n" + b"#" * (32 * 1024) + b"\n",
    "home climbing with ..": lambda home: home + b"/../bin\n",
}


@pytest.mark.parametrize("config", sorted(GETPATH_MISREAD))
def test_a_pyvenv_cfg_getpath_may_read_otherwise_is_a_doubt(tmp_path: Path, config: str) -> None:
    python = real_venv(tmp_path / "venv")
    cfg = tmp_path / "venv" / "pyvenv.cfg"
    make = GETPATH_MISREAD[config]
    if make is None:
        cfg.unlink()
        cfg.mkdir()
    else:
        cfg.write_bytes(make(_home_line(python)))
    doubts = paths(python, tmp_path).doubts
    assert any(d.startswith(str(cfg)) for d in doubts), doubts


def test_a_venv_as_venv_writes_it_leaves_getpath_no_doubt(tmp_path: Path) -> None:
    python = real_venv(tmp_path / "venv")
    cfg = tmp_path / "venv" / "pyvenv.cfg"
    cfg.write_bytes(cfg.read_bytes().replace(b"\n", b"\r\n"))  # (written on Windows)
    assert paths(python, tmp_path).doubts == ()


def test_the_user_site_holds_only_what_an_installer_recorded(tmp_path: Path) -> None:
    python, _, user = _user_site_venv(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    recorded = user / "tool-1.0.dist-info"
    recorded.mkdir()
    (recorded / "RECORD").write_text(
        "tool/__init__.py,,\ntool.pth,,\ntool-1.0.dist-info/RECORD,,\n", encoding="utf-8"
    )
    (user / "tool").mkdir()
    (user / "tool" / "__init__.py").write_text("", encoding="utf-8")
    (user / "tool.pth").write_text("", encoding="utf-8")
    (user / "__pycache__").mkdir()
    identify.clear_cache()
    env = {"PYTHONUSERBASE": str(user.parents[2])}
    found = identify.python_path(str(python), env, None, frozenset(), str(workspace))
    assert [d for d in found.doubts if str(user) in d] == []
    (user / "ujson.py").write_text("", encoding="utf-8")
    (user / "extra.pth").write_text("", encoding="utf-8")
    identify.clear_cache()
    found = identify.python_path(str(python), env, None, frozenset(), str(workspace))
    assert [d for d in found.doubts if str(user) in d] == [
        f"the user site {user} holds {name}, which no installer recorded there (code "
        "imported ahead of the installed ones)"
        for name in ("extra.pth", "ujson.py")
    ]


def test_the_search_path_judged_for_an_agents_server_is_not_the_one_cached_without_it(
    tmp_path: Path,
) -> None:
    # The same interpreter and variables, judged once for itself and then for a server of
    # an agent whose working directory holds the user site: the second answer is its own.
    from floorguard._identify.identification import workspace_in_force

    python, _, user = _user_site_venv(tmp_path)
    agent = user.parents[3]  # (tmp_path: the user base lies in the agent's folder)
    server = tmp_path / "server"
    server.mkdir()
    identify.clear_cache()
    env = {"PYTHONUSERBASE": str(user.parents[2])}
    alone = identify.python_path(str(python), env, str(server), frozenset(), str(server))
    with workspace_in_force(str(agent)):
        for_the_agent = identify.python_path(
            str(python), env, str(server), frozenset(), str(server)
        )
    assert not any("the user site" in d for d in alone.doubts)
    assert any("lies in the workspace" in d for d in for_the_agent.doubts)


def test_a_folder_the_gate_cannot_list_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder of mode 0311 can be searched but not listed by a host that is not root: the
    # interpreter finds a package or bytecode in it by name, the gate would see nothing.
    from floorguard.errors import DetectionError

    folder = tmp_path / "lib"
    folder.mkdir()
    real = os.listdir

    def denied(path: Any) -> list[str]:
        if os.fspath(path) == str(folder):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "listdir", denied)
    with pytest.raises(DetectionError, match="cannot be listed"):
        identify.listing(str(folder))
    assert identify.listing(str(tmp_path / "absent")) == frozenset()
