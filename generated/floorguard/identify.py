"""Which catalogued adapter a file is, whatever name it was asked for by.

A host may ask for ``codey`` and get aider: a symlink, a copied console script or
``python3 -m aider`` run the same below-floor code under a name with no floor. So the opened
file is identified from what it is:

- a file of an npm package: the nearest ``package.json`` above it names a catalogued package;
- a file a catalogued pip distribution installed: its ``RECORD`` lists the file;
- a Python script (a console-script wrapper) whose top-level imports are a catalogued
  distribution's modules;
- an interpreter invocation: ``python [options] -m MODULE`` or ``python SCRIPT``, and
  ``node [options] SCRIPT``, whose module or script belongs to a catalogued package.

Metadata next to the opened file is read relative to its directory descriptor, without
blocking and under a size cap. Anything doubtful (a ``package.json`` that is there but is not
a readable JSON object with a string name, several adapters at once) raises DetectionError:
the caller refuses rather than guess. What is not recognised stays unidentified (the name
asked for then decides, and FLOORGUARD_UNTRACKED_POLICY=refuse refuses it).
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floorguard.catalog import (
    ADAPTER_OF_NPM_PACKAGE,
    ADAPTER_OF_PIP_DISTRIBUTION,
    ADAPTER_OF_PIP_MODULE,
)
from floorguard.errors import DetectionError
from floorguard.target import (
    FileIdentity,
    Target,
    identity_of,
    open_target,
    read_regular_at,
    stat_at,
)

MAX_MANIFEST_BYTES: Final = 1 << 20
MAX_RECORD_BYTES: Final = 8 << 20
MAX_SCRIPT_BYTES: Final = 1 << 20
_MAX_DEPTH: Final = 64
_MAX_CACHE_ENTRIES: Final = 512

_PYTHON_NAME = re.compile(r"python(?:\d+(?:\.\d+)?)?\Z")
_NODE_NAME = re.compile(r"node(?:js)?\Z")
_SHEBANG = re.compile(rb"#![ \t]*(?P<interp>\S+)(?:[ \t]+(?P<arg>[^\r\n]*))?")

# Python options that take a value (``-W default``, ``-X dev``); ``-c`` and ``-m`` end them.
_PYTHON_VALUE_LETTERS: Final = frozenset("WX")
_PYTHON_LONG_WITH_VALUE: Final = frozenset({"--check-hash-based-pycs"})
# node options that take the next argument as their value.
_NODE_WITH_VALUE: Final = frozenset(
    {
        "-r", "--require", "--import", "--loader", "--experimental-loader", "-C",
        "--conditions", "--input-type", "--title", "--env-file", "--inspect-port",
        "--debug-port", "--disable-warning", "--redirect-warnings", "--report-dir",
        "--report-filename", "--secure-heap", "--stack-trace-limit", "--unhandled-rejections",
        "--experimental-default-type", "--max-old-space-size",
    }
)  # fmt: skip
_NODE_EVAL: Final = frozenset({"-e", "--eval", "-p", "--print", "-i", "--interactive"})


@dataclass(frozen=True)
class Identification:
    """A catalogued adapter recognised in what will run.

    ``via`` says how (``npm-package``, ``pip-record``, ``pip-script``, ``python -m``,
    ``python-script``, ``node-script``); ``subject`` is the file or module that was
    recognised. For interpreter invocations the interpreter's own ``--version`` says nothing
    about the package, so ``version`` and ``version_source`` carry the package's version
    from its metadata when it could be read (None: unknown, which refuses).
    """

    adapter: str
    via: str
    subject: str
    version: str | None = None
    version_source: str | None = None


# ---------------------------------------------------------------------------- npm


def _nearest_package_json(dir_fd: int, directory: Path) -> tuple[str, dict[str, Any]] | None:
    """The nearest ``package.json`` at or above ``directory`` (read relative to ``dir_fd``,
    which is that directory opened), with its path; None when there is none."""
    levels = min(len(directory.parts), _MAX_DEPTH)
    for up in range(levels):
        relative = "../" * up + "package.json"
        where = directory.joinpath(*[".."] * up, "package.json")
        if stat_at(dir_fd, relative) is None:
            continue
        read = read_regular_at(dir_fd, relative, MAX_MANIFEST_BYTES)
        if read is None:
            raise DetectionError(f"{os.path.normpath(where)} cannot be read as a package manifest")
        try:
            manifest = json.loads(read[0].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise DetectionError(f"{os.path.normpath(where)} is not valid JSON") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("name"), str):
            raise DetectionError(f"{os.path.normpath(where)} names no package")
        return os.path.normpath(where), manifest
    return None


def _npm_identification(dir_fd: int, path: Path, via: str) -> Identification | None:
    found = _nearest_package_json(dir_fd, path.parent)
    if found is None:
        return None
    manifest_path, manifest = found
    adapter = ADAPTER_OF_NPM_PACKAGE.get(manifest["name"])
    if adapter is None:
        return None
    version = manifest.get("version")
    return Identification(
        adapter,
        via,
        str(path),
        version if isinstance(version, str) else None,
        manifest_path,
    )


# ---------------------------------------------------------------------------- pip


def _canonical_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _catalogued_dist_infos(site: str) -> list[tuple[str, str]]:
    """``(dist-info directory, adapter)`` of every catalogued distribution in ``site``."""
    try:
        names = os.listdir(site)
    except OSError:
        return []
    found = []
    for name in sorted(names):
        if not name.endswith(".dist-info"):
            continue
        dist = name[: -len(".dist-info")].rsplit("-", 1)[0]
        adapter = ADAPTER_OF_PIP_DISTRIBUTION.get(_canonical_dist(dist))
        if adapter is not None:
            found.append((os.path.join(site, name), adapter))
    return found


def _read_path(path: str, cap: int) -> bytes | None:
    directory, base = os.path.split(path)
    try:
        dir_fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        read = read_regular_at(dir_fd, base, cap)
    finally:
        os.close(dir_fd)
    return None if read is None else read[0]


def _record_paths(info: str) -> list[str]:
    data = _read_path(os.path.join(info, "RECORD"), MAX_RECORD_BYTES)
    if data is None:
        return []
    paths = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        # A path with a comma is quoted in RECORD (it is CSV); such paths are not ours.
        path = line.partition(",")[0]
        if path:
            paths.append(path)
    return paths


def _metadata_version(info: str) -> str | None:
    data = _read_path(os.path.join(info, "METADATA"), MAX_MANIFEST_BYTES)
    if data is None:
        return None
    versions = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "version":
            versions.append(value.strip())
    return versions[0] if len(versions) == 1 else None


def _site_dirs_near(path: Path) -> list[str]:
    """site-packages that may have installed ``path``: its ancestors named so, and for a
    file in a ``bin`` directory, the site-packages of that prefix."""
    sites = [str(p) for p in path.parents if p.name in ("site-packages", "dist-packages")]
    if path.parent.name == "bin":
        sites += _prefix_sites(path.parent.parent)
    return sites


def _prefix_sites(prefix: Path) -> list[str]:
    found = []
    for lib in ("lib", "lib64", "local/lib"):
        base = prefix / lib
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if name.startswith("python3"):
                for leaf in ("site-packages", "dist-packages"):
                    candidate = base / name / leaf
                    if candidate.is_dir():
                        found.append(str(candidate))
    return found


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(os.path.realpath(i) for i in items))


def _pip_record_identification(opened: Target) -> Identification | None:
    """The catalogued distribution whose RECORD lists the opened file (same inode)."""
    st = os.fstat(opened.fd)
    found: set[tuple[str, str]] = set()
    for site in _unique(_site_dirs_near(opened.path)):
        wanted = os.path.normpath(os.path.relpath(opened.path, site))
        for info, adapter in _catalogued_dist_infos(site):
            for listed in _record_paths(info):
                if os.path.normpath(listed) != wanted:
                    continue
                on_disk = _stat_path(os.path.join(site, listed))
                if on_disk is not None and (on_disk.st_dev, on_disk.st_ino) == (
                    st.st_dev,
                    st.st_ino,
                ):
                    found.add((adapter, info))
    return _one(found, opened.path, "pip-record")


def _stat_path(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _one(found: set[tuple[str, str]], subject: Path | str, via: str) -> Identification | None:
    adapters = {adapter for adapter, _ in found}
    if not adapters:
        return None
    if len(adapters) > 1:
        raise DetectionError(
            f"{subject} belongs to several adapters at once: {', '.join(sorted(adapters))}"
        )
    infos = sorted(info for _, info in found)
    version = _metadata_version(infos[0]) if len(infos) == 1 else None
    source = os.path.join(infos[0], "METADATA") if len(infos) == 1 else None
    return Identification(adapters.pop(), via, str(subject), version, source)


def _module_owners(module: str, sites: Sequence[str]) -> set[tuple[str, str]]:
    """``(adapter, dist-info)`` of catalogued distributions in ``sites`` that install the
    top-level ``module``."""
    owners = set()
    for site in _unique(sites):
        for info, adapter in _catalogued_dist_infos(site):
            top_level = _read_path(os.path.join(info, "top_level.txt"), MAX_MANIFEST_BYTES)
            names = set(top_level.decode("utf-8", "replace").split()) if top_level else set()
            if module in names or any(
                p.split("/", 1)[0] in (module, f"{module}.py") for p in _record_paths(info)
            ):
                owners.add((adapter, info))
    return owners


def _module_identification(
    module: str, sites: Sequence[str], via: str, subject: str
) -> Identification | None:
    top = module.split(".", 1)[0]
    owners = _module_owners(top, sites)
    if owners:
        return _one(owners, subject, via)
    # Known by name wherever it is imported from (PYTHONPATH, a copied tree): its floor
    # applies, and with no metadata to vouch, its version is unknown.
    adapter = ADAPTER_OF_PIP_MODULE.get(top)
    return None if adapter is None else Identification(adapter, via, subject)


def _python_sites(interpreter: str, environ: Mapping[str, str]) -> list[str]:
    """Where an interpreter may import from: its prefix (a venv's, not resolved, and the
    real one), the user site, and PYTHONPATH."""
    sites = []
    for path in (interpreter, os.path.realpath(interpreter)):
        sites += _prefix_sites(Path(path).parent.parent)
    home = environ.get("HOME")
    if home:
        sites += _prefix_sites(Path(home) / ".local")
    sites += [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    return sites


def _top_level_imports(source: bytes | str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    modules = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
    return modules


def _python_script_identification(
    opened: Target, environ: Mapping[str, str], via: str
) -> Identification | None:
    """A Python script (a console-script wrapper, or a copy of one) importing a catalogued
    distribution's modules at top level."""
    head = opened.read_head(256)
    interpreter = _shebang_interpreter(head)
    if via == "pip-script" and (interpreter is None or not _is_python(interpreter)):
        return None
    source = opened.read_all(MAX_SCRIPT_BYTES)
    if source is None:
        return None
    sites = _python_sites(interpreter, environ) if interpreter else []
    return _imports_identification(source, sites, via, str(opened.path))


def _imports_identification(
    source: bytes | str, sites: Sequence[str], via: str, subject: str
) -> Identification | None:
    """The catalogued adapter whose modules ``source`` imports at top level, if any."""
    found: set[tuple[str, str]] = set()
    unowned: set[str] = set()
    for module in _top_level_imports(source):
        top = module.split(".", 1)[0]
        owners = _module_owners(top, sites)
        if owners:
            found |= owners
        elif top in ADAPTER_OF_PIP_MODULE:
            unowned.add(ADAPTER_OF_PIP_MODULE[top])
    adapters = {a for a, _ in found} | unowned
    if len(adapters) > 1:
        raise DetectionError(f"{subject} imports several adapters at once: {sorted(adapters)}")
    if found:
        return _one(found, subject, via)
    if unowned:
        return Identification(unowned.pop(), via, subject)
    return None


def _shebang_interpreter(head: bytes) -> str | None:
    match = _SHEBANG.match(head.split(b"\n", 1)[0])
    if match is None:
        return None
    interp = os.fsdecode(match.group("interp"))
    arg = os.fsdecode(match.group("arg") or b"").split()
    # ``#!/usr/bin/env python3``: the program env runs is the interpreter.
    if os.path.basename(interp) == "env" and arg:
        return arg[0]
    return interp


def _is_python(name: str) -> bool:
    return bool(_PYTHON_NAME.match(os.path.basename(name)))


def _is_node(name: str) -> bool:
    return bool(_NODE_NAME.match(os.path.basename(name)))


# ---------------------------------------------------------------------------- interpreters


def python_target(argv: Sequence[str]) -> tuple[str, str] | None:
    """What ``python ARGV`` runs: ``("module", M)``, ``("script", S)``, ``("code", ...)`` for
    ``-c``/stdin, or None for the interactive interpreter."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return ("script", args[i + 1]) if i + 1 < len(args) else None
        if arg == "-":
            return ("code", "-")
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            i += 2 if name in _PYTHON_LONG_WITH_VALUE and "=" not in arg else 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            for position, letter in enumerate(letters):
                rest = letters[position + 1 :]
                if letter in "cm":
                    value = rest or (args[i + 1] if i + 1 < len(args) else "")
                    return ("code", value) if letter == "c" else ("module", value)
                if letter in _PYTHON_VALUE_LETTERS:
                    if not rest:
                        i += 1
                    break
            i += 1
            continue
        return ("script", arg)
    return None


def node_target(argv: Sequence[str]) -> tuple[str, str] | None:
    """What ``node ARGV`` runs: ``("script", S)``, ``("code", ...)`` for eval, print and
    the REPL, or None without a script."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return ("script", args[i + 1]) if i + 1 < len(args) else None
        if arg in _NODE_EVAL or arg.split("=", 1)[0] in _NODE_EVAL:
            return ("code", arg)
        if arg.startswith("-") and arg != "-":
            i += 2 if arg in _NODE_WITH_VALUE else 1
            continue
        return ("code", "-") if arg == "-" else ("script", arg)
    return None


def _script_identification(
    script: str, cwd: str | None, environ: Mapping[str, str], python: bool
) -> Identification | None:
    where = script if os.path.isabs(script) else os.path.join(cwd or os.getcwd(), script)
    try:
        opened = open_target(where, path_env=None, executable=False)
    except DetectionError:
        return None  # the interpreter cannot run it either
    with opened:
        via = "python-script" if python else "node-script"
        hit = identify_file(opened, environ, via=via)
        if hit is None and python:
            hit = _python_script_identification(opened, environ, via)
        return hit


def identify_invocation(
    opened: Target,
    argv: Sequence[str],
    *,
    environ: Mapping[str, str],
    cwd: str | None,
) -> Identification | None:
    """When the opened file is a Python or node interpreter, the catalogued adapter its
    arguments run, if any. Raises DetectionError when that is in doubt."""
    names = (opened.requested, opened.located, str(opened.path))
    if any(_is_python(n) for n in names):
        what = python_target(argv)
        if what is None:
            return None
        kind, value = what
        sites = _python_sites(opened.located, environ)
        if kind == "module":
            return _module_identification(value, sites, "python -m", value)
        if kind == "code":
            # Only import statements are seen; importlib and __import__ are not (a named gap).
            return _imports_identification(value, sites, "python -c", "-c")
        return _script_identification(value, cwd, environ, python=True)
    if any(_is_node(n) for n in names):
        what = node_target(argv)
        if what is None or what[0] == "code":
            return None
        return _script_identification(what[1], cwd, environ, python=False)
    return None


# ---------------------------------------------------------------------------- files


@dataclass(frozen=True)
class _Cached:
    found: Identification | None
    dependencies: tuple[tuple[str, FileIdentity], ...]


_cache: dict[tuple[str, FileIdentity, str], _Cached] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def identify_file(
    opened: Target, environ: Mapping[str, str], *, via: str | None = None
) -> Identification | None:
    """The catalogued adapter the opened file belongs to, or None.

    Cached per file identity: the same bytes at the same place are the same program. A
    positive answer also depends on the metadata that gave it, which is re-examined.
    Raises DetectionError when the answer is in doubt.
    """
    key = (str(opened.path), opened.identity, via or "")
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and all(_still(path, ident) for path, ident in hit.dependencies):
        return hit.found
    found = _npm_identification(opened.dir_fd, opened.path, via or "npm-package")
    if found is None:
        found = _pip_record_identification(opened)
        if found is not None and via is not None:
            found = Identification(found.adapter, via, found.subject, found.version,
                                   found.version_source)  # fmt: skip
    if found is None and via is None:
        found = _python_script_identification(opened, environ, "pip-script")
    deps = tuple(
        (source, ident)
        for source in ([found.version_source] if found and found.version_source else [])
        if (ident := _identity_or_none(source)) is not None
    )
    with _cache_lock:
        while len(_cache) >= _MAX_CACHE_ENTRIES:
            _cache.pop(next(iter(_cache)))
        _cache[key] = _Cached(found, deps)
    return found


def _identity_or_none(path: str) -> FileIdentity | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return identity_of(st) if stat.S_ISREG(st.st_mode) else None


def _still(path: str, identity: FileIdentity) -> bool:
    return _identity_or_none(path) == identity


def identify(
    opened: Target,
    argv: Sequence[str] | None,
    *,
    environ: Mapping[str, str],
    cwd: str | None = None,
) -> Identification | None:
    """The catalogued adapter that running ``opened`` with ``argv`` runs, or None.

    An interpreter is judged by what it is asked to run (``argv`` None: by itself only).
    Raises DetectionError when the answer is in doubt.
    """
    if argv is not None:
        invoked = identify_invocation(opened, argv, environ=environ, cwd=cwd)
        if invoked is not None:
            return invoked
    return identify_file(opened, environ)
