"""Where a Python child finds code, as CPython builds its path: the start-up files ``site``
runs, the order of folders, how an import is resolved in them, and a cached answer that
notices every change. Real virtual environments and files; nothing mocked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from probes import real_venv, site_packages

from floorguard import identify

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
    found = paths(python, tmp_path)
    assert found.sites == (str(site), str(tmp_path / "src"))
    assert found.doubts == ()


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
    assert [d for d in found.doubts if "sitecustomize" in d] == [
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
    assert [d for d in doubts if "shadows" in d] == [
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


def test_namespace_portion_first_on_the_path_loses_to_a_regular_package_after_it(
    tmp_path: Path,
) -> None:
    early, late = tmp_path / "early", tmp_path / "late"
    (early / "aider").mkdir(parents=True)
    (late / "aider").mkdir(parents=True)
    (late / "aider" / "__init__.py").write_text("")
    assert identify.find_module("aider", [str(early), str(late)]) == (str(late), "package")
    assert identify.find_module("aider", [str(early)]) == (str(early), "namespace")


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
    assert f"sys.path entry {archive} is a file (an archive whose modules are not read)" in doubts
