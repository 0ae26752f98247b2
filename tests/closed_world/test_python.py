"""A closed world at the spawn, Python: what a Python child imports is not always what the
gate resolved. Namespace portions, start-up code (sitecustomize, usercustomize, ``.pth``
import lines, a user site enabled in a venv), scripts that change ``sys.path`` and source
the scanner cannot read all run a below-floor aider under a permit today; each must be
refused and recorded, with a reason naming the input responsible.

Every test runs under the default policy and under deny-by-default.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from helpers.closed_world import DENY_BY_DEFAULT, PY, RUN_AIDER, World, old_aider_code


def insert_path(where: Path) -> str:
    """Code that puts ``where`` first on ``sys.path``."""
    return f"import sys; sys.path.insert(0, {str(where)!r})\n"


def user_site(base: Path) -> Path:
    """The user site-packages folder CPython derives from a user base (POSIX layout)."""
    site = base / "lib" / PY / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


# ------------------------------------------------------------------ namespace portions


def namespace_portion(root: Path) -> Path:
    """``root/aider/`` with no ``__init__.py`` and a 9.9.9 dist-info claiming it."""
    (root / "aider").mkdir(parents=True)
    (root / "aider" / "helpers.py").write_text("VALUE = 1\n", encoding="utf-8")
    info = root / "aider_chat-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: aider-chat\nVersion: 9.9.9\n", encoding="utf-8"
    )
    (info / "top_level.txt").write_text("aider\n", encoding="utf-8")
    (info / "RECORD").write_text(
        "aider/helpers.py,,\naider_chat-9.9.9.dist-info/METADATA,,\n"
        "aider_chat-9.9.9.dist-info/top_level.txt,,\naider_chat-9.9.9.dist-info/RECORD,,\n",
        encoding="utf-8",
    )
    return root


def test_namespace_portion_on_pythonpath_does_not_vouch_for_old_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """The old aider's console script on PATH and ``PYTHONPATH=ns`` where ``ns/aider`` is a
    namespace portion with a 9.9.9 dist-info beside it: CPython skips the portion for the
    regular package further on, so 0.50.0 runs. Judged 0.50.0 or refused for doubt, never
    permitted as 9.9.9."""
    old = world.old_aider()
    ns = namespace_portion(tmp_path / "ns")
    env = world.env(old.prefix / "bin", PYTHONPATH=str(ns))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "0.50.0", "namespace")
    assert outcome["version"] != "9.9.9", outcome


def test_namespace_portion_with_python_dash_m_does_not_vouch_for_old_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """The same portion when the host runs ``python -P -m aider`` with the old venv's python."""
    old = world.old_aider()
    ns = namespace_portion(tmp_path / "ns")
    outcome = world.spawn(
        "python",
        ["-P", "-m", "aider", "task"],
        binary=old.python,
        policy=untracked_policy,
        env=world.env(PYTHONPATH=str(ns)),
    )
    world.assert_refused(outcome, old.marker, "0.50.0", "namespace")
    assert outcome["version"] != "9.9.9", outcome


# ------------------------------------------------------------------------ start-up code


def test_sitecustomize_on_pythonpath_inserting_old_site_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A ``sitecustomize.py`` on PYTHONPATH puts the old aider's site-packages first; the new
    aider's console script then imports 0.50.0."""
    new, old = world.new_aider(), world.old_aider()
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "sitecustomize.py").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", PYTHONPATH=str(startup))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "sitecustomize")


def test_sitecustomize_on_pythonpath_with_python_dash_m_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """The same ``sitecustomize.py`` under ``python -m aider`` with the new venv's python."""
    new, old = world.new_aider(), world.old_aider()
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "sitecustomize.py").write_text(insert_path(old.site), encoding="utf-8")
    outcome = world.spawn(
        "python",
        ["-m", "aider", "task"],
        binary=new.python,
        policy=untracked_policy,
        env=world.env(PYTHONPATH=str(startup)),
    )
    world.assert_refused(outcome, old.marker, "sitecustomize")


def test_usercustomize_in_user_base_of_a_system_site_venv_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A venv made with ``--system-site-packages`` keeps the user site, so a
    ``usercustomize.py`` under PYTHONUSERBASE runs at start-up and imports the old aider."""
    new, old = world.new_aider(system_site=True), world.old_aider()
    base = tmp_path / "userbase"
    (user_site(base) / "usercustomize.py").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", PYTHONUSERBASE=str(base))
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "usercustomize")


@pytest.mark.parametrize("options", [["-E", "-P"], ["-EP"]])
def test_the_user_base_is_followed_whatever_e_says(
    world: World, untracked_policy: str, tmp_path: Path, options: list[str]
) -> None:
    """``-E`` stops CPython's own start-up from reading PYTHON* variables, but ``site`` reads
    PYTHONUSERBASE from the environment itself: the user site it names is still on the path
    and its ``usercustomize.py`` still runs."""
    new, old = world.new_aider(system_site=True), world.old_aider()
    base = tmp_path / "userbase"
    (user_site(base) / "usercustomize.py").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", PYTHONUSERBASE=str(base))
    outcome = world.spawn("python", [*options, "-m", "aider", "task"], binary=new.python,
                          policy=untracked_policy, env=env)  # fmt: skip
    world.assert_refused(outcome, old.marker, "usercustomize")


def test_pth_import_line_in_the_user_site_is_refused(world: World, untracked_policy: str) -> None:
    """A ``.pth`` file in ``~/.local``'s user site (reachable from a system-site venv) whose
    ``import`` line inserts the old aider's site-packages."""
    new, old = world.new_aider(system_site=True), world.old_aider()
    site = user_site(world.home / ".local")
    (site / "agent-tools.pth").write_text(insert_path(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, ".pth")


# ------------------------------------------------------ scripts changing the import system


def test_script_inserting_old_site_into_sys_path_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python script.py`` with the new venv's python, the script putting the old aider's
    site-packages first on ``sys.path`` before importing aider."""
    new, old = world.new_aider(), world.old_aider()
    script = tmp_path / "work" / "run_agent.py"
    script.parent.mkdir()
    script.write_text(insert_path(old.site) + RUN_AIDER, encoding="utf-8")
    outcome = world.spawn(
        "python", [str(script), "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "sys.path", "0.50.0")


def test_dash_w_swallowing_dash_m_runs_a_script_named_aider_and_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -I -W -m aider``: ``-W`` takes ``-m`` as its value, so ``aider`` is a script
    in the cwd, here one that inserts the old site-packages and imports aider."""
    new, old = world.new_aider(), world.old_aider()
    work = tmp_path / "work"
    work.mkdir()
    (work / "aider").write_text(insert_path(old.site) + RUN_AIDER, encoding="utf-8")
    outcome = world.spawn(
        "python", ["-I", "-W", "-m", "aider"], binary=new.python, cwd=work,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "-W", "script", "sys.path", "0.50.0")


# ------------------------------------------------------------ source the scanner misreads


def test_script_starting_with_a_utf8_bom_importing_old_aider_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A script that begins with a UTF-8 byte order mark (valid for CPython) and imports the
    old aider."""
    old = world.old_aider()
    script = tmp_path / "agent" / "bom_agent.py"  # (alone in its folder, first on the path)
    script.parent.mkdir()
    script.write_bytes(b"\xef\xbb\xbf" + RUN_AIDER.encode("utf-8"))
    outcome = world.spawn(
        "python", [str(script)], binary=old.python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "0.50.0", "BOM", "byte order mark")


def test_script_in_utf7_with_an_escaped_import_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``# -*- coding: utf-7 -*-`` and the import statement written entirely as UTF-7
    escapes: no ``import`` or ``aider`` appears in the bytes."""
    old = world.old_aider()
    statement = "from aider.main import main; main()"
    escaped = base64.b64encode(statement.encode("utf-16-be")).decode("ascii").rstrip("=")
    script = tmp_path / "agent" / "utf7_agent.py"  # (alone in its folder, first on the path)
    script.parent.mkdir()
    script.write_bytes(f"# -*- coding: utf-7 -*-\n+{escaped}-\n".encode("ascii"))
    assert b"aider" not in script.read_bytes()
    outcome = world.spawn(
        "python", [str(script)], binary=old.python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "utf-7", "coding", "0.50.0")


def test_script_over_one_mib_with_the_import_at_the_end_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A script padded past 1 MiB of comments with the import of the old aider last."""
    old = world.old_aider()
    script = tmp_path / "big_agent.py"
    padding = "# " + "x" * 77 + "\n"
    script.write_text(padding * (1200 * 1024 // len(padding)) + RUN_AIDER, encoding="utf-8")
    assert script.stat().st_size > 1024 * 1024
    outcome = world.spawn(
        "python", [str(script)], binary=old.python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "0.50.0", "MiB", "large", "size", "bytes")


@pytest.mark.parametrize("name", ["python3.10", "python3"])
def test_a_python_older_than_3_11_or_of_no_known_version_is_refused(
    world: World, untracked_policy: str, name: str
) -> None:
    """Python 3.10 has no -P and ignores PYTHONSAFEPATH: ``PYTHONSAFEPATH=1 python3.10 -m
    aider`` puts the workspace first on its path. Its command line and start-up are not the
    ones read here, so the interpreter itself is refused (told by its file's name); so is
    one whose version nothing states (a copy under a plain ``python3``)."""
    import os
    import shutil
    import sys

    new = world.new_aider()
    bin_dir = world.root / "py310" / "bin"
    bin_dir.mkdir(parents=True)
    old_python = bin_dir / name
    # (a copy: a hard link of the tests' own Python would change its file under every
    # other test judging it at the same time)
    shutil.copy2(os.path.realpath(sys.executable), old_python)
    env = world.env(new.prefix / "bin", PYTHONSAFEPATH="1")
    outcome = world.spawn("python", ["-m", "aider"], policy=untracked_policy,
                          binary=old_python, env=env)  # fmt: skip
    world.assert_refused(outcome, new.marker, "older than the 3.11", "cannot be told")


def _runner_package(lib: Path, init: str, *, sub: bool) -> list[str]:
    """``lib/runner`` (a package whose ``__main__`` runs aider, as a console script does),
    and the ``-m`` target: ``runner``, or ``runner.sub`` one level down."""
    package = lib / "runner" / "sub" if sub else lib / "runner"
    package.mkdir(parents=True)
    (package / "__main__.py").write_text(RUN_AIDER, encoding="utf-8")
    (lib / "runner" / "__init__.py").write_text(init, encoding="utf-8")
    if sub:
        (package / "__init__.py").write_text("", encoding="utf-8")
    return ["-P", "-m", "runner.sub" if sub else "runner"]


@pytest.mark.parametrize("sub", [False, True], ids=["package", "subpackage"])
def test_python_dash_m_judges_the_package_init_it_runs_first(
    world: World, untracked_policy: str, tmp_path: Path, sub: bool
) -> None:
    """runpy imports ``runner`` (and every package above the module) before it runs
    ``runner/__main__.py``: code in that ``__init__.py`` runs first, and is judged."""
    old, new = world.old_aider(), world.new_aider()
    lib = tmp_path / "lib"
    argv = _runner_package(lib, old_aider_code(old.site), sub=sub)
    outcome = world.spawn("python", [*argv, "task"], binary=new.python,
                          policy=untracked_policy, env=world.env(PYTHONPATH=str(lib)))  # fmt: skip
    world.assert_refused(outcome, old.marker, "__init__.py")


def test_python_dash_m_with_an_empty_package_init_runs_the_judged_main(
    world: World, tmp_path: Path
) -> None:
    new = world.new_aider()
    lib = tmp_path / "lib"
    argv = _runner_package(lib, "", sub=False)
    outcome = world.spawn("python", [*argv, "task"], binary=new.python, policy=DENY_BY_DEFAULT,
                          env=world.env(PYTHONPATH=str(lib)))  # fmt: skip
    assert outcome["outcome"] == "started", outcome
    assert new.marker.exists()


def test_a_sysconfig_build_variable_in_the_environment_is_refused(
    world: World, untracked_policy: str
) -> None:
    """_PYTHON_SYSCONFIGDATA_NAME names the module sysconfig imports (aider calls
    sysconfig.get_config_var), whatever -E says."""
    new = world.new_aider()
    env = world.env(new.prefix / "bin", _PYTHON_SYSCONFIGDATA_NAME="planted")
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, "_PYTHON_SYSCONFIGDATA_NAME")


def test_pythonexecutable_is_refused_even_under_isolation(
    world: World, untracked_policy: str
) -> None:
    """getpath reads PYTHONEXECUTABLE under -I as well: the pyvenv.cfg beside the program it
    names makes that folder the child's environment (here the below-floor aider's)."""
    old, new = world.old_aider(), world.new_aider()
    env = world.env(PYTHONEXECUTABLE=str(old.python))
    outcome = world.spawn("python", ["-I", "-m", "aider", "task"], binary=new.python,
                          policy=untracked_policy, env=env)  # fmt: skip
    world.assert_refused(outcome, old.marker, "PYTHONEXECUTABLE")
