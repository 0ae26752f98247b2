"""Which catalogued package an opened file belongs to, and at which version: the entry
point of identification, for ``examine`` (which decides what a child runs).

A host may ask for ``codey`` and get aider: a symlink or a copied console script runs the
same below-floor code under a name with no floor. Identification answers from what things
are:

- a file of an npm package: the nearest ``package.json`` above it that names a package
  names a catalogued one (here);
- a file a catalogued pip distribution installed: its ``RECORD`` lists the file, or the file
  lies inside one of the distribution's top-level packages (``pip_metadata``);
- an import: where a Python child's import system finds a top-level module, and the version
  of the distribution installed at *that* place (``python_imports``). Catalogued code where
  no distribution owns it has no known version, which refuses.

Metadata next to an opened file is read relative to its directory descriptor; every read is
non-blocking, of regular files only, and capped. Anything doubtful (a ``package.json`` that
is there but is not a JSON object, several adapters at once) raises DetectionError: the
caller refuses rather than guess. Answers are cached while every file and folder they
consulted is unchanged (``consulted``). The names examine uses from those modules are
imported here, so that it asks one module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from floorguard._identify.consulted import (
    _MAX_CACHE_ENTRIES,
    MAX_MANIFEST_BYTES,
    _identity,
    _lock,
    clear_cache,
    locate_noted,
    memo,
    new_cache,
    one_judgement,
)
from floorguard._identify.identification import (
    Identification,
    as_interpreted,
    current_packages,
)
from floorguard._identify.pip_metadata import _pip_file_identification
from floorguard._identify.python_imports import (
    LocatedModule,
    PythonPath,
    find_module,
    listing,
    locate_module,
    not_a_copy,
    python_path,
    python_version,
    resolve_import,
)
from floorguard._identify.target import Target, read_regular_at, stat_at
from floorguard.errors import DetectionError

# What examine and the tests use, wherever it is implemented.
__all__ = [
    "Identification",
    "LocatedModule",
    "PythonPath",
    "as_interpreted",
    "clear_cache",
    "find_module",
    "identify_file",
    "listing",
    "locate_module",
    "locate_noted",
    "memo",
    "new_cache",
    "not_a_copy",
    "npm_identification",
    "one_judgement",
    "python_path",
    "python_version",
    "resolve_import",
]

MAX_SOURCE_BYTES: Final = 1 << 20
_MAX_DEPTH: Final = 64


# ---------------------------------------------------------------------------- npm


def _nearest_package(
    dir_fd: int, directory: Path, *, installed: bool = False
) -> tuple[str, str, dict[str, object]] | None:
    """The package owning ``directory`` (read relative to ``dir_fd``, that directory opened):
    the nearest ``package.json`` at or above it that names a package (``installed``: only
    one where npm installs a package). Manifests without a name (``{"type": "module"}`` in a
    build folder) only set options and are passed by."""
    levels = min(len(directory.parts), _MAX_DEPTH)
    for up in range(levels):
        relative = "../" * up + "package.json"
        where = os.path.normpath(directory.joinpath(*[".."] * up, "package.json"))
        if installed and not _installed_in_node_modules(Path(where).parent):
            continue
        if stat_at(dir_fd, relative) is None:
            continue
        read = read_regular_at(dir_fd, relative, MAX_MANIFEST_BYTES)
        if read is None:
            raise DetectionError(f"{where} cannot be read as a package manifest")
        try:
            manifest = json.loads(read[0].decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise DetectionError(f"{where} is not valid JSON") from None
        if not isinstance(manifest, dict):
            raise DetectionError(f"{where} is not a JSON object")
        name = manifest.get("name")
        if name is None:
            continue
        if not isinstance(name, str):
            raise DetectionError(f"{where} has a package name that is not a string")
        return where, name, manifest
    return None


def npm_identification(dir_fd: int, path: Path, via: str) -> Identification | None:
    found = _nearest_package(dir_fd, path.parent)
    if found is None:
        return None
    if not _installed_in_node_modules(Path(found[0]).parent):
        # A package.json inside an installed package (its vendor/ folder, say) is that
        # package's file like any other: node runs it by path as such.
        found = _nearest_package(dir_fd, path.parent, installed=True) or found
    manifest_path, name, manifest = found
    adapter = current_packages().npm.get(name)
    if adapter is None:
        return None
    version = manifest.get("version")
    return Identification(
        adapter,
        via,
        str(path),
        version if isinstance(version, str) else None,
        manifest_path,
        # Any file of the package, a script or a native build it carries, is the package's
        # code at the version its metadata states: never asked for one.
        version_known=True,
        # Only a package installed where npm installs one vouches for its files: a
        # package.json anyone wrote beside a script in a workspace may only refuse it.
        vouches=_installed_in_node_modules(Path(manifest_path).parent),
    )


def _installed_in_node_modules(package: Path) -> bool:
    """Whether ``package`` (a folder holding a package.json) is where npm installs one:
    ``node_modules/NAME`` or ``node_modules/@SCOPE/NAME``."""
    above = package.parent
    if above.name.startswith("@"):
        above = above.parent
    return above.name == "node_modules" and package.name not in ("node_modules", ".bin")


# ---------------------------------------------------------------------------- files

_file_cache = new_cache()


def identify_file(opened: Target, environ: Mapping[str, str]) -> Identification | None:
    """The catalogued package the opened file belongs to (npm package or pip
    distribution), or None. Cached per file identity and the metadata that answered.

    Raises DetectionError when the answer is in doubt.
    """
    key = (str(opened.path), opened.identity, current_packages().key)
    with _lock:
        hit = _file_cache.get(key)
    if isinstance(hit, tuple):
        cached, cached_deps = hit
        if all(_identity(path) == ident for path, ident in cached_deps):
            return cached if isinstance(cached, Identification) else None
    found = npm_identification(opened.dir_fd, opened.path, "npm-package")
    if found is None:
        found = _pip_file_identification(opened.path, os.fstat(opened.fd))
    deps = tuple(
        (source, ident)
        for source in ([found.version_source] if found and found.version_source else [])
        if (ident := _identity(source)) is not None
    )
    with _lock:
        while len(_file_cache) >= _MAX_CACHE_ENTRIES:
            _file_cache.pop(next(iter(_file_cache)))
        _file_cache[key] = (found, deps)
    return found
