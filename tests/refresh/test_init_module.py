"""``floorctl init``: a host starts its own floor-map module, which refresh then fills.

Through the real CLI; the module it writes is read the ways its users read it: imported by
path, parsed by floorguard's map reader, and read back by floorctl's block reader.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers.cli import floorctl, isolated_env

from floorctl import render, splice
from floorguard._maps.active_map import parse_map_module
from floorguard._maps.map_model import floor_map_hash, from_entries

REPO = Path(__file__).resolve().parents[2]
FEED = REPO / "feeds" / "example.v1.json"
EMPTY_HASH = floor_map_hash(from_entries({}))


def init(project: Path, *args: str | Path) -> tuple[int, str, str]:
    done = floorctl("init", *args, cwd=project, state=project.parent)
    return done.returncode, done.stdout, done.stderr


def refresh(project: Path, *args: str | Path) -> tuple[int, str]:
    done = floorctl("refresh", "--feed", FEED, *args, cwd=project, state=project.parent)
    return done.returncode, done.stdout + done.stderr


def import_by_path(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"host_map_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty host project: no src/ folder yet."""
    folder = tmp_path / "host"
    folder.mkdir()
    return folder


# --- what is refused --------------------------------------------------------------------------


def test_init_refuses_an_existing_file_and_leaves_it_untouched(project: Path) -> None:
    module = project / "floor_map.py"
    module.write_text("# the host's own file\nVALUE = 1\n")
    before = module.read_bytes(), module.stat().st_mtime_ns
    code, out, err = init(project, "--module", "floor_map.py")
    assert code == 1, err
    assert "already exists; refusing to overwrite it" in err
    assert "floor_map.py" in err
    assert (module.read_bytes(), module.stat().st_mtime_ns) == before
    assert out == ""


def test_init_refuses_a_dangling_link_and_never_writes_through_it(project: Path) -> None:
    (project / "floor_map.py").symlink_to(project / "elsewhere.py")
    code, _, err = init(project, "--module", "floor_map.py")
    assert code == 1, err
    assert "already exists" in err
    assert (project / "floor_map.py").is_symlink()
    assert not (project / "elsewhere.py").exists()


def test_an_unknown_template_is_a_usage_error_naming_the_known_ones(project: Path) -> None:
    code, _, err = init(project, "--module", "floor_map.py", "--template", "jinja")
    assert code == 2, err
    assert "'jinja'" in err and "floorguard" in err and "bernstein" in err
    assert "floorctl init --help" in err
    assert not (project / "floor_map.py").exists()


def test_init_without_a_module_or_a_configured_one_is_a_usage_error(project: Path) -> None:
    code, _, err = init(project)
    assert code == 2, err
    assert "--module" in err and "[tool.floorctl]" in err
    assert list(project.iterdir()) == []


def test_init_with_a_json_error_prints_one_error_document(project: Path) -> None:
    (project / "floor_map.py").write_text("x = 1\n")
    code, out, _ = init(project, "--module", "floor_map.py", "--json")
    assert code == 1
    assert json.loads(out)["error"]["exit_status"] == 1


def test_a_template_file_that_renders_code_is_refused_and_nothing_is_created(
    project: Path,
) -> None:
    (project / "evil.j2").write_text(
        "import os\nFLOOR_MAP_VERSION = {{ map_version }}\n"
        "FLOOR_MAP_HASH = {{ map_hash }}\nFLOOR_MAP_ENTRIES = {}\n"
    )
    code, _, err = init(project, "--module", "src/m.py", "--template", "evil.j2")
    assert code == 1, err
    assert "something other than data" in err
    assert not (project / "src").exists()  # not even the folder


def test_a_parent_that_is_a_file_is_refused(project: Path) -> None:
    (project / "src").write_text("a file\n")
    code, _, err = init(project, "--module", "src/m.py")
    assert code == 1, err
    assert "cannot create its folder" in err
    assert (project / "src").read_text() == "a file\n"


def test_of_two_inits_of_one_path_exactly_one_writes(project: Path) -> None:
    def start(template: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "floorctl", "init", "--module", "m.py", "--template", template],
            cwd=project, env=isolated_env(project.parent), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    runs = [start("floorguard"), start("bernstein")]
    codes = sorted(run.wait(timeout=120) for run in runs)
    for run in runs:
        run.communicate()
    assert codes == [0, 1]
    _, block = render.read_module((project / "m.py").read_text(), "m.py")
    assert block.stated_hash == EMPTY_HASH  # one whole module, either layout


# --- what is written --------------------------------------------------------------------------


def test_the_new_module_is_an_empty_map_that_floorguard_accepts(project: Path) -> None:
    code, _, err = init(project, "--module", "floor_map.py")
    assert code == 0, err
    text = (project / "floor_map.py").read_text()
    active = parse_map_module(text, "floor_map.py")  # the runtime's own reader
    assert (len(active.floor_map), active.map_version) == (0, 0)
    assert active.floor_map_hash == EMPTY_HASH
    imported = import_by_path(project / "floor_map.py")
    assert imported.FLOOR_MAP_ENTRIES == {}
    assert imported.FLOOR_MAP_VERSION == 0
    assert imported.FLOOR_MAP_HASH == EMPTY_HASH
    assert imported.__doc__ and "floorctl" in imported.__doc__


def test_init_then_refresh_from_the_shipped_feed_fills_a_module_whose_hash_verifies(
    project: Path,
) -> None:
    # The README's config example: a folder the empty project does not have yet.
    code, out, err = init(project, "--module", "src/host/floor_map.py")
    assert code == 0, err
    module = project / "src" / "host" / "floor_map.py"
    assert f"wrote {Path('src/host/floor_map.py')}" in out
    assert module.stat().st_mode & 0o777 == 0o644
    head = module.read_text().split(splice.BEGIN)[0]

    code, said = refresh(project, "--module", "src/host/floor_map.py", "--check")
    assert code == 1 and "stale" in said, said
    code, said = refresh(project, "--module", "src/host/floor_map.py", "--write")
    assert code == 0, said
    code, said = refresh(project, "--module", "src/host/floor_map.py", "--check")
    assert code == 0, said

    imported = import_by_path(module)
    computed = floor_map_hash(from_entries(imported.FLOOR_MAP_ENTRIES))
    assert imported.FLOOR_MAP_HASH == computed != EMPTY_HASH
    assert imported.FLOOR_MAP_VERSION == 1
    assert json.loads(FEED.read_text())["adapters"].keys() == imported.FLOOR_MAP_ENTRIES.keys()
    # What init wrote outside the markers is kept by refresh, byte for byte.
    assert module.read_text().startswith(head + splice.BEGIN + "\n")


def test_init_with_the_bernstein_template_writes_a_module_refresh_keeps_in_that_layout(
    project: Path,
) -> None:
    code, _, err = init(project, "--module", "advisories.py", "--template", "bernstein")
    assert code == 0, err
    module = project / "advisories.py"
    _, block = render.read_module(module.read_text(), "advisories.py")  # refresh's reader
    assert (block.layout, block.entries, block.map_version) == (render.BERNSTEIN, {}, 0)
    assert block.stated_hash == EMPTY_HASH
    assert "AdapterAdvisory" in module.read_text().split(splice.BEGIN)[0]  # the docstring says

    bernstein = ("--module", "advisories.py", "--template", "bernstein")
    code, said = refresh(project, *bernstein, "--check")
    assert code == 1 and "stale" in said, said
    code, said = refresh(project, *bernstein, "--write")
    assert code == 0, said
    _, block = render.read_module(module.read_text(), "advisories.py")
    assert block.layout == render.BERNSTEIN and block.map_version == 1
    assert block.stated_hash == floor_map_hash(from_entries(block.entries))
    assert "AdapterAdvisory(" in module.read_text()
    assert refresh(project, *bernstein, "--check")[0] == 0


@pytest.mark.parametrize("template", ["floorguard", "bernstein"])
def test_the_new_module_holds_a_docstring_the_markers_and_literal_assignments_only(
    project: Path, template: str
) -> None:
    code, _, err = init(project, "--module", "m.py", "--template", template)
    assert code == 0, err
    text = (project / "m.py").read_text()
    lines = text.splitlines()
    assert lines.count(splice.BEGIN) == 1 and lines.count(splice.END) == 1
    assert lines.index(splice.BEGIN) < lines.index(splice.END)
    tree = ast.parse(text)
    docstring, *assignments = tree.body
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
    assert "generated by floorctl" in docstring.value.value
    assert "by hand" in docstring.value.value
    assert assignments and all(isinstance(s, ast.Assign | ast.AnnAssign) for s in assignments)
    for statement in assignments:
        assert statement.value is not None
        ast.literal_eval(statement.value)  # data, never code
    # Every statement after the docstring lies between the markers.
    begin, end = lines.index(splice.BEGIN) + 1, lines.index(splice.END) + 1
    assert all(begin < s.lineno and (s.end_lineno or s.lineno) < end for s in assignments)


def test_init_json_names_the_module_its_layout_hash_and_version(project: Path) -> None:
    code, out, err = init(project, "--module", "m.py", "--template", "bernstein", "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "module": "m.py",
        "template": "bernstein",
        "layout": "bernstein",
        "floor_map_hash": EMPTY_HASH,
        "map_version": 0,
        "written": True,
    }


# --- configuration ----------------------------------------------------------------------------


def test_the_configured_module_and_template_are_the_defaults(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        "[tool.floorctl]\n"
        f"feeds = [{json.dumps(str(FEED))}]\n"
        'module = "src/host/floor_map.py"\n'
        'template = "bernstein"\n'
    )
    (project / "docs").mkdir()
    code, _, err = init(project / "docs")  # from a subfolder: relative to pyproject.toml
    assert code == 0, err
    module = project / "src" / "host" / "floor_map.py"
    _, block = render.read_module(module.read_text(), str(module))
    assert block.layout == render.BERNSTEIN
    done = floorctl("refresh", "--check", cwd=project, state=project.parent)
    assert done.returncode == 1 and "stale" in done.stderr, done.stderr


def test_a_module_flag_overrides_the_configured_one(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.floorctl]\nmodule = "configured.py"\n')
    code, _, err = init(project, "--module", "flagged.py")
    assert code == 0, err
    assert (project / "flagged.py").exists() and not (project / "configured.py").exists()


def test_init_keeps_no_temporary_file_beside_the_module(project: Path) -> None:
    assert init(project, "--module", "m.py")[0] == 0
    assert sorted(os.listdir(project)) == ["m.py"]


def test_a_module_path_through_a_link_and_dot_dot_is_written_where_its_folder_was_made(
    tmp_path: Path,
) -> None:
    # The kernel reads sl/.. as the link's parent: the folder made and the file written must
    # be in that one place, not the folder there and the file looked for textually here.
    elsewhere = tmp_path / "else" / "sub"
    elsewhere.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "sl").symlink_to(elsewhere)
    done = floorctl("init", "--module", "sl/../newdir/m.py", cwd=work, state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "else" / "newdir" / "m.py").is_file()
    assert not (work / "newdir").exists()


@pytest.mark.parametrize("module", ["src/host/floor_map.py", "floor_map.py"])
@pytest.mark.parametrize("write", [("--write",), ()])
def test_refresh_of_a_module_that_does_not_exist_says_so_and_suggests_init(
    project: Path, module: str, write: tuple[str, ...]
) -> None:
    code, out = refresh(project, "--module", module, *write)
    assert code == 1, out
    assert out == (
        f"floorctl: error: {module}: floor-map module does not exist; create it with "
        f"floorctl init --module {module}\n"
    )
    assert sorted(p.name for p in project.iterdir()) == []  # no folder, no lock file


def test_refresh_without_a_template_keeps_the_layout_init_wrote(project: Path) -> None:
    # What init advises ("fill it with: floorctl refresh --write --module M --feed SRC")
    # must not rewrite a bernstein module in another layout its host does not import.
    code, said, err = init(project, "--module", "advisories.py", "--template", "bernstein")
    assert code == 0, err
    advice = next(line for line in said.splitlines() if line.startswith("fill it with:"))
    assert "--template" not in advice
    code, said = refresh(project, "--module", "advisories.py", "--write")
    assert code == 0, said
    module = project / "advisories.py"
    _, block = render.read_module(module.read_text(), "advisories.py")
    assert block.layout == render.BERNSTEIN and block.map_version == 1
    assert refresh(project, "--module", "advisories.py", "--check")[0] == 0


def test_an_explicit_template_changes_the_layout(project: Path) -> None:
    code, _, err = init(project, "--module", "advisories.py", "--template", "bernstein")
    assert code == 0, err
    code, said = refresh(project, "--module", "advisories.py", "--template", "floorguard",
                         "--write")  # fmt: skip
    assert code == 0, said
    _, block = render.read_module((project / "advisories.py").read_text(), "advisories.py")
    assert block.layout == render.FLOORGUARD
