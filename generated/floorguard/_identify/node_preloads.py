"""Whose code a node child preloads: the files its preload options name, found as node finds
them.

``node -r X``, ``--import X``, a loader, the same options in NODE_OPTIONS (from the
environment or an ``--env-file``), and a ``#!`` line's: node loads and runs X before the
program. A spawn whose preload is a tracked package's file runs that package, whatever its
main script is, so it is judged as that package (where the preload itself refuses it).

X is found as node finds it: a path or ``file:`` URL against the working directory (a file,
with ``.js``/``.json``/``.node`` added, or a folder's ``main`` or ``index``); a package name
in the ``node_modules`` of the working directory and every folder above it, then NODE_PATH
and CommonJS's global folders, its subpath through the package's ``exports`` (every target
of every condition) or, without them, as a path inside it; a ``#name`` through the
``imports`` of the working directory's package.json, its targets found the same way. Every
candidate is opened through its links and told by its nearest ``package.json`` with a name,
so a link, an npm alias folder or a ``main`` leading into a tracked package's folder is that
package. What is not a file (``data:``, ``node:``) names no package file; a package name
found nowhere, or anything that cannot be read plainly, raises DetectionError: node may find
it where this does not look.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floorguard.errors import DetectionError

__all__ = ["env_file_preloads", "preload_files"]

_MAX_DEPTH: Final = 8  # #imports and exports leading to further package names
_MAX_MANIFEST_BYTES: Final = 1 << 20
_MAX_ENV_FILE_BYTES: Final = 1 << 20


REQUIRE: Final = "require"  # -r/--require: CommonJS's require() reads the name
IMPORT: Final = "import"  # --import, --loader: the ES module loader reads it as a URL
_EXTENSIONS: Final = ("", ".js", ".json", ".node", ".mjs", ".cjs")


def preload_files(
    specifier: str, here: str, environ: Mapping[str, str], node: str, kind: str = REQUIRE
) -> list[Path]:
    """Every file node may load for the preload ``specifier`` (given to ``-r`` for
    ``kind`` REQUIRE, to ``--import`` or a loader for IMPORT) to ``node`` (its path), in
    the working directory ``here`` and ``environ``; none: it names no file. More than node
    loads, never less: each reading either loader could take of the name is followed."""
    return _Search(here, environ, node).files(specifier, 0, kind)


@dataclass(frozen=True)
class _Search:
    """Where a node child started in ``here`` with ``environ`` finds what it is named."""

    here: str
    environ: Mapping[str, str]
    node: str

    def files(self, specifier: str, depth: int, kind: str = REQUIRE) -> list[Path]:
        from urllib.parse import unquote, urlsplit

        if depth > _MAX_DEPTH:
            raise DetectionError(f"node's preload {specifier!r} leads through too many names")
        if specifier.startswith("#"):
            return self._imported(specifier, depth)
        if kind == IMPORT:
            # A URL: a relative or absolute one (and a file: URL) against the working
            # directory, as the URL parser reads it (a backslash is a slash, %-escapes
            # decoded, query and fragment dropped; file:REL from the root), and as a path.
            if specifier.startswith("file:"):
                parts = urlsplit(specifier.replace("\\", "/"))
                if parts.netloc not in ("", "localhost"):
                    return []  # (node refuses a file URL naming another host)
                path = unquote(parts.path)
                return self._path_files(path if path.startswith("/") else "/" + path)
            slashed = specifier.replace("\\", "/")
            if slashed.startswith(("/", "./", "../")) or slashed in (".", ".."):
                readings = _url_readings(specifier)
                return _unique([each for text in readings for each in self._path_files(text)])
            if ":" in specifier.split("/", 1)[0]:
                return []  # another scheme (data:, node:, http:): no file of a package
        elif specifier.startswith(("/", "./", "../")) or specifier in (".", ".."):
            return self._path_files(specifier)
        elif specifier.startswith("node:"):
            return []  # (a builtin module)
        return self._package_files(specifier, depth)

    def _path_files(self, text: str) -> list[Path]:
        """The files a path names against the working directory, as either loader takes it:
        as given, with an extension added, or as a folder (its ``main``, its ``index``):
        a trailing ``/`` or ``/.`` makes CommonJS take the folder only."""
        where = os.path.normpath(os.path.join(self.here, text))
        found = [Path(where + e) for e in _EXTENSIONS if os.path.isfile(where + e)]
        if os.path.isdir(where):
            found += _folder_files(where)
        return _unique(found)

    def _package_files(self, specifier: str, depth: int) -> list[Path]:
        """The files a package name (and subpath) names: the working directory's own
        package when the name is its own (a self-reference, through its ``exports``), and
        the package found in node's folders; refused when it is found nowhere."""
        scoped = specifier.startswith("@")
        name = "/".join(specifier.split("/")[: 2 if scoped else 1])
        subpath = "." + specifier[len(name) :]
        found = self._self_reference(name, subpath, specifier, depth)
        for folder in self._folders():
            package = os.path.join(folder, name)
            if os.path.isdir(package):
                return _unique([*found, *self._in_package(package, subpath, specifier, depth)])
        if found:
            return found
        raise DetectionError(
            f"node's preload {specifier!r} names a package found in no node_modules at or "
            f"above {self.here}, nor on NODE_PATH or in node's global folders: node may find "
            "it elsewhere"
        )

    def _self_reference(self, name: str, subpath: str, specifier: str, depth: int) -> list[Path]:
        """A package may name itself: the package scope of the working directory (the
        nearest package.json at or above it), when it is ``name`` and has ``exports``."""
        scope = self._package_scope()
        if scope is None:
            return []
        folder, manifest = scope
        exports = manifest.get("exports")
        if manifest.get("name") != name or exports is None:
            return []
        files: list[Path] = []
        for target in _targets(_entry(exports, subpath), specifier):
            files += self._target_files(target, folder, depth)
        return files

    def _package_scope(self) -> tuple[str, dict[str, Any]] | None:
        """The package scope of the working directory: the nearest package.json at or above
        it, with its folder (None: there is none)."""
        start = Path(os.path.normpath(self.here))
        for folder in (start, *start.parents):
            manifest = _manifest(str(folder))
            if manifest is not None:
                return str(folder), manifest
        return None

    def _folders(self) -> Iterator[str]:
        """Where CommonJS looks for a package name required from ``here``, in order (ESM
        looks in the first of them only: more is never less)."""
        from floorguard._identify.node_resolution import global_folders

        start = Path(os.path.normpath(self.here))
        for folder in (start, *start.parents):
            if folder.name != "node_modules":
                yield str(folder / "node_modules")
        for entry in self.environ.get("NODE_PATH", "").split(os.pathsep):
            if entry:
                yield os.path.join(self.here, entry)
        yield from global_folders(self.environ, self.here, self.node)

    def _in_package(self, package: str, subpath: str, specifier: str, depth: int) -> list[Path]:
        """The files ``subpath`` (``.`` or ``./x``) names in the package folder ``package``."""
        exports = (_manifest(package) or {}).get("exports")
        if exports is None:
            # (joined as node's path.resolve joins it: "file:///x" is file:/x in the folder;
            # and, to the ES module loader, as a URL)
            if subpath == ".":
                return self._path_files(package)
            inside = [os.path.normpath(package + "/" + text) for text in _url_readings(subpath[2:])]
            return _unique([each for path in inside for each in self._path_files(path)])
        files: list[Path] = []
        for target in _targets(_entry(exports, subpath), specifier):
            files += self._target_files(target, package, depth)
        return files

    def _target_files(self, target: str, base: str, depth: int) -> list[Path]:
        """The file a target names: ``./x`` inside ``base``; a package name (``imports``
        only) found from ``here``; anything else names none."""
        if target.replace("\\", "/").startswith("./"):
            # (a target is a URL against the package: read as the URL parser and as a path)
            found = [Path(os.path.normpath(os.path.join(base, text)))
                     for text in _url_readings(target)]  # fmt: skip
            return _unique([each for each in found if each.is_file()])
        if target.startswith(("/", "../", "#")) or ":" in target.split("/", 1)[0]:
            return []  # (node refuses these as targets, or they are not files)
        return self.files(target, depth + 1)

    def _imported(self, specifier: str, depth: int) -> list[Path]:
        """``#name``: through the ``imports`` of the package scope of ``here`` (the nearest
        package.json at or above it)."""
        scope = self._package_scope()
        if scope is None:
            return []
        folder, manifest = scope
        imports = manifest.get("imports")
        entry = _entry(imports, specifier) if isinstance(imports, dict) else None
        files: list[Path] = []
        for target in _targets(entry, specifier):
            files += self._target_files(target, folder, depth)
        return files


def _url_readings(text: str) -> list[str]:
    """``text`` as given and as a URL parser reads it against a folder: a backslash a
    slash, %-escapes decoded, query and fragment dropped."""
    from urllib.parse import unquote, urlsplit

    slashed = text.replace("\\", "/")
    return list(dict.fromkeys([text, slashed, unquote(urlsplit(slashed).path)]))


def _unique(paths: list[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def _folder_files(folder: str) -> list[Path]:
    """Every file a folder names to either loader: its package.json ``main`` (as given,
    with an extension, or its ``index``: ``"./lib/"`` is ``lib/index.js`` to the ES module
    loader), then its own ``index``. Raises DetectionError for a package.json that cannot
    be read plainly, or a ``main`` leading into /proc."""
    from floorguard._identify.process_paths import reaches_the_process

    found: list[Path] = []
    main = (_manifest(folder) or {}).get("main")
    if isinstance(main, str) and main:
        for text in _url_readings(main):  # (the ES module loader reads it as a URL)
            base = os.path.join(folder, text)
            if reaches_the_process(base, folder):
                raise DetectionError(f"{folder}/package.json: its main {main!r} leads into /proc")
            normal = os.path.normpath(base)
            found += [Path(normal + e) for e in _EXTENSIONS if os.path.isfile(normal + e)]
            found += [Path(normal, "index" + e) for e in _EXTENSIONS[1:]
                      if os.path.isfile(os.path.join(normal, "index" + e))]  # fmt: skip
    found += [Path(folder, "index" + e) for e in _EXTENSIONS[1:]
              if os.path.isfile(os.path.join(folder, "index" + e))]  # fmt: skip
    return found


def _manifest(folder: str) -> dict[str, Any] | None:
    """``folder``'s package.json as a JSON object (None: there is none). Raises
    DetectionError for one that cannot be read plainly."""
    from floorguard._base.files import read_regular
    from floorguard.errors import UnreadableFileError

    path = os.path.join(folder, "package.json")
    if not os.path.lexists(path):
        return None
    try:
        document = json.loads(
            read_regular(path, max_bytes=_MAX_MANIFEST_BYTES, what="package manifest")
        )
    except (UnreadableFileError, ValueError, RecursionError, UnicodeDecodeError):
        raise DetectionError(f"{path} cannot be read as a package manifest") from None
    if not isinstance(document, dict):
        raise DetectionError(f"{path} is not a JSON object")
    return document


def _entry(field: Any, subpath: str) -> Any:
    """The entry of an ``exports`` or ``imports`` field for ``subpath``, a pattern's ``*``
    put in its targets (None: none matches)."""
    if isinstance(field, (str, list)) or (
        isinstance(field, dict) and not any(str(k).startswith((".", "#")) for k in field)
    ):
        return field if subpath == "." else None  # (conditions or a target, for "." only)
    if not isinstance(field, dict):
        return None
    if subpath in field:
        return field[subpath]
    for key, value in field.items():
        head, star, tail = str(key).partition("*")
        fits = len(subpath) >= len(head) + len(tail)
        if star and fits and subpath.startswith(head) and subpath.endswith(tail):
            return _substituted(value, subpath[len(head) : len(subpath) - len(tail)])
    return None


def _substituted(value: Any, match: str) -> Any:
    if isinstance(value, str):
        return value.replace("*", match)
    if isinstance(value, list):
        return [_substituted(v, match) for v in value]
    if isinstance(value, dict):
        return {k: _substituted(v, match) for k, v in value.items()}
    return value


def _targets(entry: Any, specifier: str) -> Iterator[str]:
    """Every string target of an ``exports``/``imports`` entry, whatever the conditions."""
    if isinstance(entry, str):
        yield entry
    elif isinstance(entry, list):
        for each in entry:
            yield from _targets(each, specifier)
    elif isinstance(entry, dict):
        for each in entry.values():
            yield from _targets(each, specifier)
    elif entry is not None:
        raise DetectionError(f"node's preload {specifier!r}: a target that is not a string")


_ASSIGNMENT: Final = re.compile(r"[ \t]*(?:export[ \t]+)?NODE_OPTIONS[ \t]*=[ \t]*(.*)\Z")


def env_file_preloads(path: str, here: str) -> tuple[tuple[str, str], ...]:
    """What the NODE_OPTIONS assignments of the env file ``path`` (against ``here``) preload
    (none when it is missing: ``--env-file`` then stops node, ``--env-file-if-exists`` reads
    nothing). Raises DetectionError for a file that cannot be read, or an assignment not
    read here as node reads it (a value continuing on the next line)."""
    from floorguard._base.files import read_regular
    from floorguard._identify.node_command import node_options_preloads
    from floorguard.errors import UnreadableFileError

    where = os.path.join(here, path)
    if not os.path.lexists(where):
        return ()  # (node stops for a missing --env-file; nothing runs)
    try:
        text = read_regular(where, max_bytes=_MAX_ENV_FILE_BYTES, what="env file").decode()
    except (UnreadableFileError, UnicodeDecodeError):
        raise DetectionError(f"node's env file {where} cannot be read plainly") from None
    preloads: list[tuple[str, str]] = []
    for line in text.splitlines():
        assigned = _ASSIGNMENT.match(line)
        if assigned is None:
            if "NODE_OPTIONS" in line and not line.lstrip().startswith("#"):
                raise DetectionError(
                    f"node's env file {where} names NODE_OPTIONS in a line not read here"
                )
            continue
        value = _env_value(assigned[1], where)
        preloads += node_options_preloads({"NODE_OPTIONS": value})
    return tuple(preloads)


def _env_value(raw: str, where: str) -> str:
    """A value as node's env-file reader takes it: quoted up to its closing quote on the
    line, else up to a ``#`` comment, trimmed."""
    if raw[:1] in ("'", '"', "`"):
        end = raw.find(raw[0], 1)
        if end < 0:
            raise DetectionError(
                f"node's env file {where}: NODE_OPTIONS's quoted value goes on past its line"
            )
        value = raw[1:end]
        return value.replace("\\n", "\n") if raw[0] == '"' else value
    return raw.split("#", 1)[0].strip()
