"""Which files a node preload names, found as node finds them (node_preloads), on folders
laid out here: the rules node's loaders follow, one by one, and what is refused for not
being read plainly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from floorguard._identify.node_preloads import IMPORT, REQUIRE, env_file_preloads, preload_files
from floorguard.errors import DetectionError

NODE = "/usr/bin/node"


def _package(folder: Path, manifest: dict, *files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("1;\n", encoding="utf-8")
    return folder


def _found(specifier: str, here: Path, kind: str = REQUIRE, **environ: str) -> list[str]:
    return [str(p) for p in preload_files(specifier, str(here), environ, NODE, kind)]


def test_a_path_is_taken_against_the_working_directory_with_node_s_extensions(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.js").write_text("1;\n")
    assert _found("./a", tmp_path) == [str(tmp_path / "a.js")]
    assert _found("./missing", tmp_path) == []


def test_an_import_is_a_url_its_escapes_decoded_and_its_query_dropped(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("1;\n")
    a = [str(tmp_path / "a.js")]
    assert _found(f"file://{tmp_path}/a%2Ejs", tmp_path, IMPORT) == a
    assert _found("./a%2Ejs", tmp_path, IMPORT) == a
    assert _found(f"{tmp_path}/a.js?x=1#y", tmp_path, IMPORT) == a
    assert _found("file://elsewhere/a.js", tmp_path, IMPORT) == []  # (node refuses the host)
    assert _found("data:text/javascript,1", tmp_path, IMPORT) == []


def test_a_file_url_given_to_require_is_a_package_name(tmp_path: Path) -> None:
    """require() takes ``file:///x`` as a name to look for in node_modules."""
    (tmp_path / "b.js").write_text("1;\n")
    url = f"file://{tmp_path}/b.js"
    with pytest.raises(DetectionError, match="found in no node_modules"):
        _found(url, tmp_path, HOME=str(tmp_path / "home"))
    folder = tmp_path / "node_modules" / f"file:{tmp_path}"
    folder.mkdir(parents=True)
    (folder / "b.js").write_text("1;\n")
    assert _found(url, tmp_path) == [str(folder / "b.js")]


def test_a_folder_is_read_as_a_folder_as_well_as_a_file_beside_it(tmp_path: Path) -> None:
    """``-r ./pkg/`` is the folder to require(); ``./pkg`` is pkg.js first: both count."""
    (tmp_path / "pkg.js").write_text("1;\n")
    _package(tmp_path / "pkg", {"main": "./lib/"}, "lib/index.js")
    folder = [str(tmp_path / "pkg" / "lib" / "index.js")]
    assert _found("./pkg/", tmp_path) == [str(tmp_path / "pkg.js"), *folder]
    assert _found("./pkg", tmp_path, IMPORT) == [str(tmp_path / "pkg.js"), *folder]


def test_a_package_naming_itself_goes_through_its_own_exports(tmp_path: Path) -> None:
    _package(tmp_path, {"name": "me", "exports": {"./x": "./real.js"}}, "real.js")
    _package(tmp_path / "node_modules" / "me", {"name": "me"}, "x.js")
    assert _found("me/x", tmp_path) == [
        str(tmp_path / "real.js"), str(tmp_path / "node_modules" / "me" / "x.js")
    ]  # fmt: skip


def test_a_package_name_is_looked_for_up_the_folders_then_on_node_path(tmp_path: Path) -> None:
    here = tmp_path / "project" / "src"
    here.mkdir(parents=True)
    _package(tmp_path / "project" / "node_modules" / "up", {"name": "up"}, "index.js")
    assert _found("up", here) == [str(tmp_path / "project" / "node_modules" / "up" / "index.js")]
    _package(tmp_path / "lib" / "far", {"name": "far", "main": "m.js"}, "m.js")
    assert _found("far", here, NODE_PATH=str(tmp_path / "lib")) == [
        str(tmp_path / "lib" / "far" / "m.js")
    ]
    with pytest.raises(DetectionError, match="found in no node_modules"):
        _found("nowhere", here, HOME=str(tmp_path / "home"))


EXPORTS = {
    ".": {"import": "./esm/index.mjs", "require": "./cjs/index.cjs"},
    "./sub/*": "./lib/*.js",
    "./both": ["./a.js", {"node": "./b.js"}],
    "./hidden": None,
}


@pytest.mark.parametrize(
    ("specifier", "files"),
    [("pkg", ["esm/index.mjs", "cjs/index.cjs"]), ("pkg/sub/x", ["lib/x.js"]),
     ("pkg/both", ["a.js", "b.js"]), ("pkg/hidden", []), ("pkg/not-exported", [])],
)  # fmt: skip
def test_a_subpath_goes_through_every_target_of_the_package_s_exports(
    tmp_path: Path, specifier: str, files: list[str]
) -> None:
    folder = _package(
        tmp_path / "node_modules" / "pkg", {"name": "pkg", "exports": EXPORTS},
        "esm/index.mjs", "cjs/index.cjs", "lib/x.js", "a.js", "b.js", "not-exported.js",
    )  # fmt: skip
    assert _found(specifier, tmp_path) == [str(folder / f) for f in files]


def test_a_hash_name_goes_through_the_working_directory_s_imports(tmp_path: Path) -> None:
    _package(tmp_path / "node_modules" / "dep", {"name": "dep"}, "index.js")
    _package(tmp_path, {"name": "me", "imports": {"#own": "./own.js", "#dep": "dep"}}, "own.js")
    assert _found("#own", tmp_path) == [str(tmp_path / "own.js")]
    assert _found("#dep", tmp_path) == [str(tmp_path / "node_modules" / "dep" / "index.js")]
    assert _found("#none", tmp_path) == []


def test_an_import_leading_to_an_export_that_is_not_there_names_no_file(
    tmp_path: Path,
) -> None:
    _package(tmp_path, {"name": "me", "imports": {"#a": "dep"}})
    _package(tmp_path / "node_modules" / "dep", {"name": "dep", "exports": {".": "./x.js"}})
    assert _found("#a", tmp_path) == []  # (node stops: nothing loads)


def test_a_manifest_that_is_not_json_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "node_modules" / "bad"
    folder.mkdir(parents=True)
    (folder / "package.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DetectionError, match="package manifest"):
        _found("bad", tmp_path)


@pytest.mark.parametrize(
    ("text", "preloads"),
    [('NODE_OPTIONS="--require ./a.js --import b"\n', (("--require", "./a.js"), ("--import", "b"))),
     ("export NODE_OPTIONS='-r x' \n", (("--require", "x"),)),
     ("NODE_OPTIONS=--require=y # a comment\n", (("--require", "y"),)),
     ("# NODE_OPTIONS=--require=z\nA=1\n", ()),
     ("NODE_OPTIONS=--max-old-space-size=64\n", ())],
)  # fmt: skip
def test_an_env_file_s_node_options_are_read_as_node_reads_them(
    tmp_path: Path, text: str, preloads: tuple[str, ...]
) -> None:
    (tmp_path / "e.env").write_text(text, encoding="utf-8")
    assert env_file_preloads("e.env", str(tmp_path)) == preloads


@pytest.mark.parametrize(
    "text", ['NODE_OPTIONS="--require x\n--import y"\n', "A=1 NODE_OPTIONS=--require x\n"]
)
def test_an_env_file_s_node_options_not_read_plainly_are_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "e.env").write_text(text, encoding="utf-8")
    with pytest.raises(DetectionError, match=r"e\.env"):
        env_file_preloads("e.env", str(tmp_path))


def test_a_missing_env_file_sets_nothing(tmp_path: Path) -> None:
    assert env_file_preloads("missing.env", str(tmp_path)) == ()


def test_a_url_s_backslashes_are_slashes_and_file_without_slashes_is_from_the_root(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.js").write_text("1;\n")
    a = str(tmp_path / "a.js")
    assert a in _found("./sub\\..\\a.js", tmp_path, IMPORT)
    assert _found(f"file:{str(tmp_path)[1:]}/a.js", tmp_path / "sub", IMPORT) == [a]


def test_a_package_s_targets_and_main_are_read_as_urls_too(tmp_path: Path) -> None:
    """``exports`` targets (to either loader) and an ES module's ``main`` are URLs against
    the package: ``./%63li.js`` is cli.js, ``./lib\\cli.js`` is lib/cli.js."""
    folder = _package(tmp_path / "node_modules" / "p", {"name": "p", "exports": "./%63li.js"},
                      "cli.js")  # fmt: skip
    assert str(folder / "cli.js") in _found("p", tmp_path)
    folder = _package(tmp_path / "node_modules" / "q", {"name": "q", "main": "./lib\\cli.js"},
                      "lib/cli.js")  # fmt: skip
    assert str(folder / "lib" / "cli.js") in _found("q", tmp_path, IMPORT)
