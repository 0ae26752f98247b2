"""Which catalogued package a file or an import belongs to, and at which version.

A host may ask for ``codey`` and get aider: a symlink or a copied console script runs the
same below-floor code under a name with no floor. This module answers from what things are,
for ``examine`` (which decides what a child runs):

- a file of an npm package: the nearest ``package.json`` above it that names a package
  names a catalogued one;
- a file a catalogued pip distribution installed: its ``RECORD`` lists the file, or the file
  lies inside one of the distribution's top-level packages (bytecode, unlisted files);
- an import: where a Python child's import system finds a top-level module
  (:func:`python_path` builds the search path as CPython and its ``site`` do,
  :func:`find_module` follows the path finder), and the version of the distribution
  installed at *that* place. Catalogued code where no distribution owns it has no known
  version, which refuses.

Metadata next to an opened file is read relative to its directory descriptor; every read is
non-blocking, of regular files only, and capped. Anything doubtful (a ``package.json`` that
is there but is not a JSON object, several adapters at once) raises DetectionError: the
caller refuses rather than guess. Answers are cached while every file and folder they
consulted is unchanged.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from floorguard._base.files import read_regular
from floorguard._identify.target import (
    FileIdentity,
    Target,
    identity_of,
    read_regular_at,
    search_path,
    stat_at,
)
from floorguard._maps.catalog import (
    ADAPTER_OF_NPM_PACKAGE,
    ADAPTER_OF_PIP_DISTRIBUTION,
    ADAPTER_OF_PIP_MODULE,
)
from floorguard.errors import DetectionError, UnreadableFileError

MAX_MANIFEST_BYTES: Final = 1 << 20
MAX_RECORD_BYTES: Final = 8 << 20
MAX_SOURCE_BYTES: Final = 1 << 20
_MAX_DEPTH: Final = 64
_MAX_CACHE_ENTRIES: Final = 1024


# How an identification was made. For these, what runs is Python or node code read by an
# interpreter, whose own --version says nothing of it: the version comes from here.
INTERPRETED: Final = frozenset({"python -m", "python -c", "python-script", "node-script"})


@dataclass(frozen=True)
class Identification:
    """A catalogued adapter recognised in what will run.

    ``via`` says how (``npm-package``, ``pip-record``, ``pip-script``, and for interpreter
    invocations ``python -m``, ``python -c``, ``python-script``, ``node-script``);
    ``subject`` is the file or module recognised. ``version`` (with ``version_source``, the
    metadata file it was read from) is set when the package's version is known from where
    its code will be loaded; ``version_known`` says whether identification is the authority
    on the version (True for interpreted code and Python wrappers: None then means unknown).
    """

    adapter: str
    via: str
    subject: str
    version: str | None = None
    version_source: str | None = None
    version_known: bool = False


# ---------------------------------------------------------------------------- small caches

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_lock = threading.Lock()
_caches: list[dict[object, object]] = []


def new_cache() -> dict[object, object]:
    made: dict[object, object] = {}
    _caches.append(made)
    return made


def memo(cache: dict[object, object], key: Hashable, compute: Callable[[], _V]) -> _V:
    """``compute()`` once per key (keys carry file identities, so a change is a new key)."""
    with _lock:
        if key in cache:
            return cache[key]  # type: ignore[return-value]
    value = compute()
    with _lock:
        while len(cache) >= _MAX_CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


def clear_cache() -> None:
    """Forget every cached identification and parsed metadata file."""
    with _lock:
        for cache in _caches:
            cache.clear()


# While an answer is computed, every file and directory it looked at is noted with its
# identity (None: absent), so that a cached answer is re-checked with one stat each.
_recording = threading.local()


def _identity(path: str) -> FileIdentity | None:
    try:
        ident: FileIdentity | None = identity_of(os.stat(path))
    except (OSError, ValueError):
        ident = None
    noted = getattr(_recording, "deps", None)
    if noted is not None:
        noted.append((path, ident))
    return ident


_Deps = tuple[tuple[str, FileIdentity | None], ...]


def _checked_memo(cache: dict[object, object], key: Hashable, compute: Callable[[], _V]) -> _V:
    """``compute()``, reused while every file and directory it consulted is unchanged."""
    with _lock:
        hit = cache.get(key)
    if isinstance(hit, tuple):
        value, deps = hit
        if all(_identity(path) == ident for path, ident in deps):
            return value  # type: ignore[no-any-return]
    outer = getattr(_recording, "deps", None)
    _recording.deps = []
    try:
        value = compute()
        deps = tuple(dict(_recording.deps).items())
    finally:
        _recording.deps = outer
    if outer is not None:
        outer.extend(deps)
    with _lock:
        while len(cache) >= _MAX_CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        cache[key] = (value, deps)
    return value


def locate_noted(name: str, path_env: str | None) -> str | None:
    """``locate`` on PATH, noting every directory searched (a program added to an earlier
    PATH directory changes the answer)."""
    for directory in search_path(path_env).split(os.pathsep):
        if not directory:
            continue
        _identity(directory)
        candidate = os.path.join(directory, name)
        if _identity(candidate) is not None and os.access(candidate, os.X_OK):
            return candidate
    return None


def _read_path(path: str, cap: int) -> bytes | None:
    """A regular file's bytes, read without blocking and under ``cap``; None otherwise."""
    try:
        return read_regular(path, max_bytes=cap, what="metadata file")
    except (UnreadableFileError, ValueError):
        return None


# ---------------------------------------------------------------------------- npm


def _nearest_package(dir_fd: int, directory: Path) -> tuple[str, str, dict[str, object]] | None:
    """The package owning ``directory`` (read relative to ``dir_fd``, that directory opened):
    the nearest ``package.json`` at or above it that names a package. Manifests without a
    name (``{"type": "module"}`` in a build folder) only set options and are passed by."""
    levels = min(len(directory.parts), _MAX_DEPTH)
    for up in range(levels):
        relative = "../" * up + "package.json"
        where = os.path.normpath(directory.joinpath(*[".."] * up, "package.json"))
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
    manifest_path, name, manifest = found
    adapter = ADAPTER_OF_NPM_PACKAGE.get(name)
    if adapter is None:
        return None
    version = manifest.get("version")
    return Identification(
        adapter,
        via,
        str(path),
        version if isinstance(version, str) else None,
        manifest_path,
        version_known=via in INTERPRETED,
    )


# ---------------------------------------------------------------------------- pip metadata


def _canonical_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_site_listings = new_cache()
_record_cache = new_cache()
_metadata_cache = new_cache()


def _catalogued_dist_infos(site: str) -> list[tuple[str, str]]:
    """``(dist-info directory, adapter)`` of every catalogued distribution in ``site``."""
    ident = _identity(site)
    if ident is None:
        return []

    def scan() -> list[tuple[str, str]]:
        try:
            names = sorted(os.listdir(site))
        except OSError:
            return []
        found = []
        for name in names:
            if name.endswith(".dist-info"):
                dist = name[: -len(".dist-info")].rsplit("-", 1)[0]
                adapter = ADAPTER_OF_PIP_DISTRIBUTION.get(_canonical_dist(dist))
                if adapter is not None:
                    found.append((os.path.join(site, name), adapter))
        return found

    return memo(_site_listings, (site, ident), scan)


@dataclass(frozen=True)
class _Record:
    paths: frozenset[str]  # normalised, relative to the site directory
    top_level: frozenset[str]  # importable top-level names the distribution installs


def _record(info: str) -> _Record:
    """What a dist-info says its distribution installed (RECORD, top_level.txt)."""
    record_path = os.path.join(info, "RECORD")
    top_path = os.path.join(info, "top_level.txt")
    key = (info, _identity(record_path), _identity(top_path))

    def parse() -> _Record:
        paths: set[str] = set()
        tops: set[str] = set()
        data = _read_path(record_path, MAX_RECORD_BYTES) or b""
        for line in data.decode("utf-8", errors="replace").splitlines():
            # A path with a comma is quoted in RECORD (it is CSV); such paths are not ours.
            path = line.partition(",")[0]
            if not path or "\x00" in path:
                continue
            normal = os.path.normpath(path)
            paths.add(normal)
            first = normal.split(os.sep, 1)[0]
            if not first.startswith("..") and not first.endswith((".dist-info", ".data")):
                tops.add(first.removesuffix(".py") if "." not in first[:-3] else first)
        top_level = _read_path(top_path, MAX_MANIFEST_BYTES)
        if top_level:
            tops |= set(top_level.decode("utf-8", errors="replace").split())
        modules = {t.split(".", 1)[0] for t in tops}
        return _Record(frozenset(paths), frozenset(modules))

    return memo(_record_cache, key, parse)


def _metadata_version(info: str) -> tuple[str | None, str]:
    """The single ``Version`` header of a dist-info's METADATA (None if not exactly one)."""
    path = os.path.join(info, "METADATA")

    def parse() -> str | None:
        data = _read_path(path, MAX_MANIFEST_BYTES)
        if data is None:
            return None
        versions = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                break  # the headers end at the first blank line
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == "version":
                versions.append(value.strip())
        return versions[0] if len(versions) == 1 else None

    return memo(_metadata_cache, (path, _identity(path)), parse), path


_prefix_cache = new_cache()
_LIBS: Final = ("lib", "lib64", "local/lib")


def _prefix_sites(prefix: Path | str, version: str | None = None) -> list[str]:
    """The site-packages and dist-packages of an installation prefix, for the interpreter
    version ``X.Y`` when it is known (``python3.11`` and Debian's ``python3``), else for every
    ``python3*`` folder (cached until one of its lib directories changes)."""
    bases = [os.path.join(prefix, lib) for lib in _LIBS]

    def wanted(name: str) -> bool:
        if version is None:
            return name.startswith("python3")
        return name in (f"python{version}", "python3")

    def scan() -> list[str]:
        found = []
        for base in bases:
            try:
                names = sorted(os.listdir(base))
            except OSError:
                continue
            for name in names:
                if wanted(name):
                    for leaf in ("site-packages", "dist-packages"):
                        candidate = os.path.join(base, name, leaf)
                        if os.path.isdir(candidate):
                            found.append(candidate)
        return found

    return memo(_prefix_cache, (version, *((b, _identity(b)) for b in bases)), scan)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(os.path.normpath(i) for i in items if "\x00" not in i))


def _installed_by(site: str, relative: str) -> tuple[str, str] | None:
    """The catalogued distribution in ``site`` that installed the file at ``relative``: its
    RECORD lists it, or it lies inside one of its top-level packages."""
    first = relative.split(os.sep, 1)[0]
    for info, adapter in _catalogued_dist_infos(site):
        record = _record(info)
        if relative in record.paths or (os.sep in relative and first in record.top_level):
            return adapter, info
    if os.sep in relative and first in ADAPTER_OF_PIP_MODULE:
        return ADAPTER_OF_PIP_MODULE[first], ""
    return None


def _pip_file_identification(path: Path, st: os.stat_result) -> Identification | None:
    """A file a catalogued pip distribution installed (same inode as the RECORD entry, or a
    file inside one of its packages), found from the site-packages above it or, for a file
    in a ``bin`` directory, the site-packages of that prefix."""
    sites = [str(p) for p in path.parents if p.name in ("site-packages", "dist-packages")]
    if path.parent.name == "bin":
        sites += _prefix_sites(path.parent.parent)
    found: set[tuple[str, str]] = set()
    for site in _unique(sites):
        relative = os.path.normpath(os.path.relpath(path, site))
        hit = _installed_by(site, relative)
        if hit is None:
            continue
        on_disk = _stat(os.path.join(site, relative))
        if on_disk is not None and (on_disk.st_dev, on_disk.st_ino) == (st.st_dev, st.st_ino):
            found.add(hit)
    return _one(found, str(path), "pip-record", version_known=False)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _one(
    found: set[tuple[str, str]], subject: str, via: str, *, version_known: bool
) -> Identification | None:
    adapters = {adapter for adapter, _ in found}
    if not adapters:
        return None
    if len(adapters) > 1:
        raise DetectionError(
            f"{subject} belongs to several adapters at once: {', '.join(sorted(adapters))}"
        )
    infos = sorted({info for _, info in found if info})
    version, source = (None, None)
    if len(infos) == 1:
        version, source = _metadata_version(infos[0])
    return Identification(adapters.pop(), via, subject, version, source, version_known)


# ---------------------------------------------------------------------------- Python imports


@dataclass(frozen=True)
class PythonPath:
    """Where a Python child finds third-party code, in CPython's order, the standard
    library left out. ``before_site`` are the entries ahead of the standard library (the
    program's folder, PYTHONPATH), whose modules shadow it; ``sites`` the site folders and
    the folders their ``.pth`` files add, which hold installed code. ``doubts`` are the
    start-up inputs not understood (``.pth`` code, ``sitecustomize``)."""

    before_site: tuple[str, ...]
    sites: tuple[str, ...]
    doubts: tuple[str, ...]

    @property
    def entries(self) -> tuple[str, ...]:
        return (*self.before_site, *self.sites)


_PATH_VARIABLES: Final = ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE")
_paths_cache = new_cache()


def python_path(
    interpreter: str,
    environ: Mapping[str, str],
    first: str | None,
    flags: frozenset[str] = frozenset(),
    cwd: str | None = None,
) -> PythonPath:
    """:func:`_python_path`, reused while every file and folder it consulted is unchanged."""
    here = cwd or os.getcwd()
    key = (
        interpreter, first, flags, here, environ.get("HOME"),
        *(environ.get(name) for name in _PATH_VARIABLES),
    )  # fmt: skip
    return _checked_memo(
        _paths_cache, key, lambda: _python_path(interpreter, environ, first, flags, here)
    )


def _python_path(
    interpreter: str,
    environ: Mapping[str, str],
    first: str | None,
    flags: frozenset[str],
    cwd: str,
) -> PythonPath:
    """Where ``interpreter`` (as started: a virtual environment's is found by its own path)
    imports third-party code from, in CPython's order: ``first`` (the script's folder, or
    the working directory for ``-m`` and ``-c``) unless safe path is on; PYTHONPATH, its
    relative entries taken against the working directory ``cwd`` and empty ones as it; then
    what ``site`` adds: a virtual environment's site-packages, then the user site
    (PYTHONUSERBASE or ``~/.local``) unless disabled (a virtual environment disables it
    unless it includes the system site-packages), then the interpreter's prefix's own
    site-packages, each followed by the folders its ``.pth`` files add. ``flags`` are the
    interpreter's one-letter options: ``-I`` (``-E -s -P``), ``-E``, ``-s``, ``-P`` and
    ``-S`` (no ``site`` at all). ``doubts`` name the start-up code not understood, archives
    on the path, and modules ahead of the standard library that shadow it."""
    from floorguard._identify import python_site

    isolated = "I" in flags
    env = {} if isolated or "E" in flags else environ
    safe = isolated or "P" in flags or bool(env.get("PYTHONSAFEPATH"))
    head = [] if first is None or safe else [first]
    python_path_dirs: list[str] = []
    if env.get("PYTHONPATH"):
        python_path_dirs = [os.path.join(cwd, e) for e in env["PYTHONPATH"].split(os.pathsep)]
    before = _unique([*head, *python_path_dirs])
    climbing = [
        f"PYTHONPATH entry {entry!r} climbs with '..' (by its letters with site, through "
        "links without it)"
        for entry in env.get("PYTHONPATH", "").split(os.pathsep)
        if ".." in Path(entry).parts
    ]
    if "S" in flags:
        return PythonPath(tuple(before), (), tuple(climbing))
    version = python_version(interpreter)
    venv = _venv_config(interpreter)
    user_enabled = not (isolated or "s" in flags or env.get("PYTHONNOUSERSITE")) and venv in (
        None,
        True,
    )
    user: list[str] = []
    if user_enabled:
        base = env.get("PYTHONUSERBASE") or (
            os.path.join(environ["HOME"], ".local") if environ.get("HOME") else ""
        )
        user = _prefix_sites(base, version) if base else []
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(interpreter)))
    system = _prefix_sites(prefix, version)
    if venv is None:
        sites = [*user, *system]
    else:
        own = _prefix_sites(os.path.dirname(os.path.dirname(interpreter)), version)
        # site adds a virtual environment's own site-packages first, ahead of the user site.
        sites = [*own, *user, *system] if venv else own
    # At start-up the program's folder is not on the path yet (CPython adds it after site).
    at_startup = _unique(python_path_dirs)
    # One folder reached twice (a virtual environment's ``lib64`` links to ``lib``) is one
    # site folder, known by the first path that reached it.
    seen: set[str] = set()
    distinct = []
    for site in sites:
        if (real := os.path.realpath(site)) not in seen:
            seen.add(real)
            distinct.append(site)
    scan = python_site.scan_sites(_unique(distinct), at_startup, _module_folder)
    for consulted in (interpreter, *sites, *scan.consulted):
        _identity(consulted)  # noted: a change to any of them is another answer
    startup = [*at_startup, *scan.directories]
    doubts = [*climbing, *scan.doubts]
    doubts += python_site.customize_doubts(lambda m: _module_folder(m, startup), user_enabled)
    doubts += [
        f"sys.path entry {entry} is a file (an archive whose modules are not read)"
        for entry in (*before, *scan.directories)
        if os.path.isfile(entry)
    ]
    doubts += [
        f"{folder} holds {name}, which shadows the standard library's {name} (code run "
        "instead of it)"
        for folder in before
        for name in _stdlib_shadows(folder, version)
    ]
    return PythonPath(tuple(before), scan.directories, tuple(doubts))


def _stdlib_shadows(folder: str, version: str | None) -> list[str]:
    """The standard library's top-level modules that ``folder`` holds a module or regular
    package of. Ahead of the standard library on the path (the program's folder,
    PYTHONPATH), such a file runs in its place: ``encodings`` at start-up, ``json`` when
    the CLI imports it."""
    import sys

    stems = sorted({name.split(".", 1)[0] for name in listing(folder)})
    return [
        stem
        for stem in stems
        if stem in sys.stdlib_module_names
        and (found := find_module(stem, [folder], version)) is not None
        and found[1] != "namespace"
    ]


_VERSIONED_NAME = re.compile(r"python(\d+\.\d+)\Z")


def python_version(interpreter: str) -> str | None:
    """``X.Y`` of the interpreter, from its real file's name (``python3.11``), or from a
    virtual environment's ``pyvenv.cfg``; None when neither says."""
    match = _VERSIONED_NAME.match(os.path.basename(os.path.realpath(interpreter)))
    if match:
        return match.group(1)
    config = _pyvenv_cfg(interpreter)
    stated = config.get("version_info") or config.get("version") or ""
    match = re.match(r"(\d+\.\d+)", stated)
    return match.group(1) if match else None


def _pyvenv_cfg(interpreter: str) -> dict[str, str]:
    """The ``key = value`` lines of the ``pyvenv.cfg`` beside or above ``interpreter``
    (empty when there is none)."""
    here = os.path.dirname(interpreter)
    for folder in (here, os.path.dirname(here)):
        config = os.path.join(folder, "pyvenv.cfg")
        if _identity(config) is None:
            continue
        text = (_read_path(config, MAX_MANIFEST_BYTES) or b"").decode("utf-8", "replace")
        values = {"": folder}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip().lower()] = value.strip()
        return values
    return {}


def _venv_config(interpreter: str) -> bool | None:
    """None when ``interpreter`` (as started) is not a virtual environment's; else whether
    its ``pyvenv.cfg`` includes the system site-packages."""
    config = _pyvenv_cfg(interpreter)
    if not config:
        return None
    return config.get("include-system-site-packages", "").lower() == "true"


# ---------------------------------------------------------------------------- the import system

_listings = new_cache()


def listing(directory: str) -> frozenset[str]:
    """The names in ``directory`` (cached per directory identity: adding or removing an
    entry changes its mtime)."""

    def scan() -> frozenset[str]:
        try:
            return frozenset(os.listdir(directory))
        except OSError:
            return frozenset()

    return memo(_listings, (directory, _identity(directory)), scan)


def _extension_suffixes(version: str | None) -> tuple[str, ...] | None:
    """The extension-module suffixes of a CPython ``X.Y`` on this machine's architecture
    (None when the version is not known)."""
    if version is None:
        return None
    import sys

    arch = getattr(sys.implementation, "_multiarch", None)
    tag = f".cpython-{version.replace('.', '')}" + (f"-{arch}" if arch else "")
    return (f"{tag}.so", ".abi3.so", ".so")


def _file_in(directory: str, names: frozenset[str], stem: str, version: str | None) -> str | None:
    """The file of module ``stem`` in ``directory`` as FileFinder finds it (extension
    modules, then source, then bytecode), or None. An extension file whose tag cannot be
    matched to the child's interpreter raises: it may or may not load."""
    suffixes = _extension_suffixes(version)
    candidates = [n for n in names if n.startswith(stem + ".") and n.endswith(".so")]
    if candidates and suffixes is None:
        raise DetectionError(
            f"{os.path.join(directory, candidates[0])}: cannot tell whether the interpreter "
            "loads this extension module"
        )
    for suffix in (*(suffixes or ()), ".py", ".pyc"):
        if stem + suffix in names and os.path.isfile(os.path.join(directory, stem + suffix)):
            return os.path.join(directory, stem + suffix)
    return None


def find_module(
    top: str, search: Sequence[str], version: str | None = None
) -> tuple[str, str] | None:
    """Where importing the top-level module ``top`` finds it, as CPython's path finder does:
    ``(folder, kind)`` with kind ``package`` or ``module`` for the first folder holding a
    regular package or a module file, else ``namespace`` for the first of the namespace
    portions (folders without ``__init__``), which are used only when nothing else is
    found anywhere on the path. None when it is not on ``search``."""
    portion = None
    for directory in search:
        names = listing(directory)
        if top in names and os.path.isdir(os.path.join(directory, top)):
            package = os.path.join(directory, top)
            if _file_in(package, listing(package), "__init__", version) is not None:
                return directory, "package"
            portion = portion or directory
        if _file_in(directory, names, top, version) is not None:
            return directory, "module"
    return (portion, "namespace") if portion is not None else None


def _module_folder(top: str, search: Sequence[str]) -> str | None:
    """The folder whose code ``import top`` runs (a namespace portion runs none)."""
    found = find_module(top, search)
    return found[0] if found is not None and found[1] != "namespace" else None


def resolve_import(
    top: str, search: Sequence[str], version: str | None = None
) -> Identification | None:
    """The catalogued adapter that importing ``top`` loads, with the version of the
    distribution installed where the interpreter will find it (None when ``top`` is not
    catalogued). A catalogued package found as a namespace portion, not where any
    distribution installed it, or not found at all has an unknown version."""
    adapter = ADAPTER_OF_PIP_MODULE.get(top)
    if adapter is None:
        return None
    found = find_module(top, search, version)
    if found is None or found[1] == "namespace":
        return Identification(adapter, "import", top)
    owners = {
        (owner, info)
        for info, owner in _catalogued_dist_infos(found[0])
        if top in _record(info).top_level
    }
    if owners:
        return _one(owners, top, "import", version_known=True)
    return Identification(adapter, "import", top)


def as_interpreted(hit: Identification, via: str, subject: str) -> Identification:
    """``hit`` recast as found through ``via``, by an interpreter: its version is the one
    identification read (None: unknown)."""
    return Identification(
        hit.adapter, via, subject, hit.version, hit.version_source, version_known=True
    )


# ---------------------------------------------------------------------------- files

_file_cache = new_cache()


def identify_file(opened: Target, environ: Mapping[str, str]) -> Identification | None:
    """The catalogued package the opened file belongs to (npm package or pip
    distribution), or None. Cached per file identity and the metadata that answered.

    Raises DetectionError when the answer is in doubt.
    """
    key = (str(opened.path), opened.identity)
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
