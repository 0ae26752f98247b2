"""Which catalogued adapter will run, whatever name it was asked for by.

A host may ask for ``codey`` and get aider: a symlink, a copied console script or
``python3 -m aider`` run the same below-floor code under a name with no floor. So what will
run is identified from what it is:

- a file of an npm package: the nearest ``package.json`` above it that names a package
  names a catalogued one;
- a file a catalogued pip distribution installed: its ``RECORD`` lists the file, or the file
  lies inside one of the distribution's top-level packages (bytecode, unlisted files);
- Python code (a console-script wrapper or a copy of one, a script, ``-c`` code, the module
  ``-m`` runs) importing a catalogued distribution's modules anywhere in it;
- an interpreter invocation: ``python [options] -m MODULE | -c CODE | SCRIPT | DIR`` and
  ``node [options] SCRIPT``, judged by what it is asked to run.

For Python code the version is that of the module the interpreter will import: the import
is resolved as the interpreter resolves it (its first ``sys.path`` entry, PYTHONPATH, the
environment's site-packages, the user site), and the version is read from the distribution
installed at *that* place. Code found where no catalogued distribution owns it has no
known version, which refuses.

Metadata next to an opened file is read relative to its directory descriptor; every read is
non-blocking, of regular files only, and capped. Anything doubtful (a ``package.json`` that
is there but is not a JSON object, several adapters at once) raises DetectionError: the
caller refuses rather than guess. What is not recognised stays unidentified.
"""

from __future__ import annotations

import ast
import json
import os
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from floorguard.catalog import (
    ADAPTER_OF_NPM_PACKAGE,
    ADAPTER_OF_PIP_DISTRIBUTION,
    ADAPTER_OF_PIP_MODULE,
)
from floorguard.errors import DetectionError, UnreadableFileError
from floorguard.files import read_regular
from floorguard.target import (
    FileIdentity,
    Target,
    identity_of,
    open_target,
    read_regular_at,
    search_path,
    stat_at,
)

MAX_MANIFEST_BYTES: Final = 1 << 20
MAX_RECORD_BYTES: Final = 8 << 20
MAX_SOURCE_BYTES: Final = 1 << 20
_MAX_DEPTH: Final = 64
_MAX_CACHE_ENTRIES: Final = 1024

_PYTHON_NAME = re.compile(r"python(?:\d+(?:\.\d+)?)?\Z")
_NODE_NAME = re.compile(r"node(?:js)?\Z")
_SHEBANG = re.compile(rb"#![ \t]*(?P<line>[^\r\n]*)")
# Import statements, for source the host's own parser cannot read (a newer grammar, or
# nesting too deep for it): every ``import a.b, c`` and ``from a.b import c`` anywhere.
_IMPORT_TEXT = re.compile(
    r"(?:^|[;:\s])(?:from\s+(?P<from>[A-Za-z_][\w.]*)\s+import\b"
    r"|import\s+(?P<names>[A-Za-z_][\w.]*(?:\s+as\s+\w+)?(?:\s*,\s*[A-Za-z_][\w.]*"
    r"(?:\s+as\s+\w+)?)*))",
    re.MULTILINE,
)

# Python options that take a value (``-W default``, ``-X dev``); ``-c`` and ``-m`` end them.
_PYTHON_VALUE_LETTERS: Final = frozenset("WX")
_PYTHON_LONG_WITH_VALUE: Final = frozenset({"--check-hash-based-pycs"})
_NODE_EVAL: Final = frozenset({"-e", "--eval", "-p", "--print"})

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


def _cache() -> dict[object, object]:
    made: dict[object, object] = {}
    _caches.append(made)
    return made


def _memo(cache: dict[object, object], key: Hashable, compute: Callable[[], _V]) -> _V:
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


def _locate_noted(name: str, path_env: str | None) -> str | None:
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


def _npm_identification(dir_fd: int, path: Path, via: str) -> Identification | None:
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


_site_listings = _cache()
_record_cache = _cache()
_metadata_cache = _cache()


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

    return _memo(_site_listings, (site, ident), scan)


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

    return _memo(_record_cache, key, parse)


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

    return _memo(_metadata_cache, (path, _identity(path)), parse), path


_prefix_cache = _cache()
_LIBS: Final = ("lib", "lib64", "local/lib")


def _prefix_sites(prefix: Path | str) -> list[str]:
    """The site-packages and dist-packages of an installation prefix (cached until one of
    its lib directories changes)."""
    bases = [os.path.join(prefix, lib) for lib in _LIBS]

    def scan() -> list[str]:
        found = []
        for base in bases:
            try:
                names = sorted(os.listdir(base))
            except OSError:
                continue
            for name in names:
                if name.startswith("python3"):
                    for leaf in ("site-packages", "dist-packages"):
                        candidate = os.path.join(base, name, leaf)
                        if os.path.isdir(candidate):
                            found.append(candidate)
        return found

    return _memo(_prefix_cache, tuple((b, _identity(b)) for b in bases), scan)


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


def python_search_path(
    interpreter: str,
    environ: Mapping[str, str],
    first: str | None,
    flags: frozenset[str] = frozenset(),
    cwd: str | None = None,
) -> list[str]:
    """Where ``interpreter`` imports third-party code from, in CPython's order: ``first``
    (the script's directory, or the working directory for ``-m`` and ``-c``) unless safe
    path is on; PYTHONPATH; then in a virtual environment its site-packages (and, with
    ``include-system-site-packages``, the user site and the base's), elsewhere the user
    site before the interpreter's own site-packages. ``flags`` are the interpreter's
    one-letter options: ``-I`` (isolated: ``-E -s -P``), ``-E`` (no PYTHON* variables),
    ``-s`` (no user site), ``-P`` (no unsafe first entry), ``-S`` (no site-packages).
    Relative PYTHONPATH entries are the child's working directory ``cwd`` joined with them,
    empty ones the working directory itself; PYTHONHOME moves a non-venv interpreter's
    prefix."""
    isolated = "I" in flags
    ignore_env = isolated or "E" in flags
    env = {} if ignore_env else environ
    safe = isolated or "P" in flags or bool(env.get("PYTHONSAFEPATH"))
    no_user = isolated or "s" in flags or bool(env.get("PYTHONNOUSERSITE"))
    path = [] if first is None or safe else [first]
    if env.get("PYTHONPATH"):
        # As CPython: a relative entry is relative to the working directory, an empty one is it.
        here = cwd or os.getcwd()
        path += [os.path.join(here, entry) for entry in env["PYTHONPATH"].split(os.pathsep)]
    if "S" in flags:
        return _unique(path)
    user: list[str] = []
    if not no_user:
        base = env.get("PYTHONUSERBASE") or (
            os.path.join(environ["HOME"], ".local") if environ.get("HOME") else ""
        )
        user = _prefix_sites(base) if base else []
    home = env.get("PYTHONHOME")
    prefixes = (
        home.split(os.pathsep)
        if home
        else [os.path.dirname(os.path.dirname(os.path.realpath(interpreter)))]
    )
    real = [site for prefix in prefixes for site in _prefix_sites(prefix)]
    venv = _venv_config(interpreter)
    if venv is None:
        return _unique([*path, *user, *real])
    path += _prefix_sites(os.path.dirname(os.path.dirname(interpreter)))
    if venv:  # include-system-site-packages
        path += [*user, *real]
    return _unique(path)


def _venv_config(interpreter: str) -> bool | None:
    """None when ``interpreter`` (as started) is not a virtual environment's; else whether
    its ``pyvenv.cfg`` includes the system site-packages."""
    here = os.path.dirname(interpreter)
    for folder in (here, os.path.dirname(here)):
        config = os.path.join(folder, "pyvenv.cfg")
        if _identity(config) is None:
            continue
        text = (_read_path(config, MAX_MANIFEST_BYTES) or b"").decode("utf-8", "replace")
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() == "include-system-site-packages":
                return value.strip().lower() == "true"
        return False
    return None


_listings = _cache()


def _importable(directory: str) -> frozenset[str]:
    """Top-level names importable from ``directory``: packages and namespace directories,
    modules, extensions and bytecode (cached per directory identity)."""

    def scan() -> frozenset[str]:
        tops = set()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    stem, dot, _ = entry.name.partition(".")
                    if entry.name.endswith((".py", ".so", ".pyd", ".pyc")) or (
                        not dot and entry.is_dir()
                    ):
                        tops.add(stem)
        except OSError:
            return frozenset()
        return frozenset(tops)

    return _memo(_listings, (directory, _identity(directory)), scan)


def _find_module(top: str, search: Sequence[str]) -> str | None:
    """The first search directory from which the top-level module ``top`` imports."""
    for directory in search:
        if top in _importable(directory):
            return directory
    return None


def _resolve_import(top: str, search: Sequence[str]) -> Identification | None:
    """The catalogued adapter that importing ``top`` loads, with the version of the
    distribution installed where the interpreter will find it."""
    directory = _find_module(top, search)
    if directory is None:
        adapter = ADAPTER_OF_PIP_MODULE.get(top)
        # Known by name but not where we look (a .pth file, a zip): its version is unknown.
        return None if adapter is None else Identification(adapter, "import", top)
    owners = {
        (adapter, info)
        for info, adapter in _catalogued_dist_infos(directory)
        if top in _record(info).top_level
    }
    if owners:
        return _one(owners, top, "import", version_known=True)
    adapter = ADAPTER_OF_PIP_MODULE.get(top)
    # Code of a catalogued package where no distribution owns it (a copied tree): unknown.
    return None if adapter is None else Identification(adapter, "import", top)


_imports_cache = _cache()


def imported_modules(source: bytes | str) -> list[str]:
    """Every module that ``source`` imports by an import statement, anywhere in it.

    Source the host's parser cannot read (a newer grammar, nesting too deep for it) is
    scanned for import statements as text instead: a failed parse never means "none".
    """
    text = source.decode("utf-8", errors="replace") if isinstance(source, bytes) else source
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        modules = []
        for match in _IMPORT_TEXT.finditer(text):
            if match.group("from"):
                modules.append(match.group("from"))
            else:
                names = match.group("names").split(",")
                modules += [n.split()[0] for n in names if n.strip()]
        return modules
    modules = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
    return modules


def _catalogued_imports(source: bytes | str, key: Hashable | None) -> list[str]:
    """The distinct top-level names ``source`` imports (cached per file identity)."""

    def compute() -> list[str]:
        return list(dict.fromkeys(m.split(".", 1)[0] for m in imported_modules(source)))

    return compute() if key is None else _memo(_imports_cache, key, compute)


def _code_identification(
    source: bytes | str,
    search: Sequence[str],
    via: str,
    subject: str,
    key: Hashable | None = None,
) -> Identification | None:
    """The catalogued adapter whose modules ``source`` imports, its version from where the
    import resolves. Raises DetectionError for code importing several adapters."""
    hits = [
        hit for top in _catalogued_imports(source, key) if (hit := _resolve_import(top, search))
    ]
    adapters = {hit.adapter for hit in hits}
    if not adapters:
        return None
    if len(adapters) > 1:
        raise DetectionError(f"{subject} imports several adapters at once: {sorted(adapters)}")
    versions = {(hit.version, hit.version_source) for hit in hits}
    version, source_path = versions.pop() if len(versions) == 1 else (None, None)
    return Identification(hits[0].adapter, via, subject, version, source_path, True)


def _shebang_interpreter(head: bytes) -> str | None:
    """The program a ``#!`` line runs (through ``env``, with its options and ``-S``)."""
    match = _SHEBANG.match(head.split(b"\n", 1)[0])
    if match is None:
        return None
    words = os.fsdecode(match.group("line")).split()
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return words[0]
    for word in words[1:]:
        if word.startswith("-") or "=" in word:
            continue  # env's own options (-S, -i, -u NAME is rare in shebangs) and NAME=VALUE
        return word
    return None


def _shebang_flags(head: bytes) -> frozenset[str]:
    """The one-letter interpreter options on a ``#!`` line, as the interpreter gets them.

    The kernel passes everything after the interpreter's path as *one* argument
    (``#!/venv/bin/python -X utf8 -I`` gives ``-X`` the value ``" utf8 -I"``: not isolated);
    only ``env -S`` splits it into words.
    """
    match = _SHEBANG.match(head.split(b"\n", 1)[0])
    if match is None:
        return frozenset()
    line = os.fsdecode(match.group("line")).strip()
    program, _, rest = line.partition(" ")
    rest = rest.strip()
    if os.path.basename(program) == "env":
        words = rest.split()
        if not words or not words[0].startswith("-S"):
            return frozenset()  # env runs one program named by the whole argument
        interpreter = _shebang_interpreter(head)
        start = words.index(interpreter) + 1 if interpreter in words else len(words)
        args = words[start:]
    else:
        args = [rest] if rest else []
    found = python_target([*args, "-c", ""])
    return found[2] if found is not None else frozenset()


def _is_python(name: str) -> bool:
    return bool(_PYTHON_NAME.match(os.path.basename(name)))


def _is_node(name: str) -> bool:
    return bool(_NODE_NAME.match(os.path.basename(name)))


_script_cache = _cache()


def _python_script(
    opened: Target,
    environ: Mapping[str, str],
    interpreter: str | None,
    via: str,
    cwd: str | None,
) -> Identification | None:
    """Python code in the opened file, run by ``interpreter`` (its shebang's when None).

    The answer is reused while the file, the environment it is judged in (every variable
    given, which is what judging may read) and everything it consulted are unchanged.
    """
    here = cwd or os.getcwd()
    key = (
        str(opened.path),
        opened.identity,
        interpreter,
        via,
        here,
        tuple(sorted(environ.items())),
    )

    def compute() -> Identification | None:
        source = opened.read_all(MAX_SOURCE_BYTES)
        if source is None:
            return None
        interp = interpreter or _shebang_interpreter(source[:512]) or ""
        flags = _shebang_flags(source[:512]) if interpreter is None else frozenset()
        if interp and os.sep not in interp:
            # ``#!/usr/bin/env python3``: the interpreter is whichever PATH finds for the child.
            interp = _locate_noted(interp, environ.get("PATH")) or ""
        if interp:
            _identity(interp)  # another interpreter behind the same name: another answer
        first = str(opened.path.parent)
        search = python_search_path(interp, environ, first, flags, here) if interp else []
        return _code_identification(source, search, via, str(opened.path), key[:2])

    return _checked_memo(_script_cache, key, compute)


# ---------------------------------------------------------------------------- interpreters


def python_target(argv: Sequence[str]) -> tuple[str, str, frozenset[str]] | None:
    """What ``python ARGV`` runs: ``("module", M)``, ``("code", C)`` for ``-c`` (``"-"``
    for stdin) or ``("script", S)``, with the one-letter options given before it; None for
    the interactive interpreter."""
    args = list(argv)
    flags: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return ("script", args[i + 1], frozenset(flags)) if i + 1 < len(args) else None
        if arg == "-":
            return ("code", "-", frozenset(flags))
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
                    return ("code" if letter == "c" else "module", value, frozenset(flags))
                if letter in _PYTHON_VALUE_LETTERS:
                    if not rest:
                        i += 1
                    break
                flags.add(letter)
            i += 1
            continue
        return ("script", arg, frozenset(flags))
    return None


def node_candidates(argv: Sequence[str]) -> list[str]:
    """Every argument of ``node ARGV`` that may name a file node loads: each positional
    argument and each option value (``--require=X`` and ``--opt X`` alike), since which
    options take a value changes between node releases. Eval code is not among them."""
    candidates = []
    for arg in argv:
        if arg.startswith("-"):
            name, sep, value = arg.partition("=")
            if sep and name not in _NODE_EVAL:
                candidates.append(value)
        else:
            candidates.append(arg)
    return candidates


def _open_argument(path: str, cwd: str | None) -> Target | None:
    if "\x00" in path or not path:
        return None
    where = path if os.path.isabs(path) else os.path.join(cwd or os.getcwd(), path)
    try:
        return open_target(where, path_env=None, executable=False)
    except DetectionError:
        return None


def _python_invocation(
    opened: Target, argv: Sequence[str], environ: Mapping[str, str], cwd: str | None
) -> Identification | None:
    what = python_target(argv)
    if what is None:
        return None
    kind, value, flags = what
    here = cwd or os.getcwd()
    if kind == "module":
        search = python_search_path(opened.located, environ, here, flags, here)
        top = value.split(".", 1)[0]
        hit = _resolve_import(top, search)
        if hit is not None:
            return _as(hit, "python -m", value)
        return _module_code(value, search, environ)
    if kind == "code":
        if value == "-":
            return None  # code from stdin: not seen (a named gap)
        search = python_search_path(opened.located, environ, here, flags, here)
        return _code_identification(value, search, "python -c", "-c")
    script = value if os.path.isabs(value) else os.path.join(here, value)
    if os.path.isdir(script):
        # ``python DIR`` runs DIR/__main__.py with DIR first on sys.path.
        search = python_search_path(opened.located, environ, script, flags, here)
        main = _open_argument(os.path.join(script, "__main__.py"), None)
        return None if main is None else _judge_script(main, environ, search, opened.located)
    target = _open_argument(script, None)
    if target is None:
        return None
    search = python_search_path(opened.located, environ, str(target.path.parent), flags, here)
    return _judge_script(target, environ, search, opened.located)


def _judge_script(
    script: Target, environ: Mapping[str, str], search: Sequence[str], interpreter: str
) -> Identification | None:
    with script:
        installed = identify_file(script, environ)
        if installed is not None:
            return _as(installed, "python-script", str(script.path))
        source = script.read_all(MAX_SOURCE_BYTES)
        if source is None:
            return None
        key = (str(script.path), script.identity)
        return _code_identification(source, search, "python-script", str(script.path), key)


def _module_code(
    module: str, search: Sequence[str], environ: Mapping[str, str]
) -> Identification | None:
    """The imports of the file ``python -m module`` runs, when the module is not itself
    catalogued (a copied wrapper renamed ``codey.py`` on PYTHONPATH)."""
    parts = module.split(".")
    for directory in search:
        base = os.path.join(directory, *parts)
        for candidate in (base + ".py", os.path.join(base, "__main__.py")):
            opened = _open_argument(candidate, None)
            if opened is not None:
                with opened:
                    source = opened.read_all(MAX_SOURCE_BYTES)
                    key = (str(opened.path), opened.identity)
                    if source is None:
                        return None
                    return _code_identification(source, search, "python -m", module, key)
    return None


def _node_invocation(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None
) -> Identification | None:
    hits = []
    for candidate in node_candidates(argv):
        opened = _open_argument(candidate, cwd)
        if opened is None:
            continue
        with opened:
            hit = _npm_identification(opened.dir_fd, opened.path, "node-script")
        if hit is not None:
            hits.append(hit)
    adapters = {hit.adapter for hit in hits}
    if len(adapters) > 1:
        raise DetectionError(f"node is asked to load several adapters: {sorted(adapters)}")
    return hits[0] if hits else None


def _as(hit: Identification, via: str, subject: str) -> Identification:
    """``hit`` recast as found through ``via``, by an interpreter: its version is the one
    identification read (None: unknown)."""
    return Identification(
        hit.adapter, via, subject, hit.version, hit.version_source, version_known=True
    )


# ---------------------------------------------------------------------------- files

_file_cache = _cache()


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
    found = _npm_identification(opened.dir_fd, opened.path, "npm-package")
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


_shebang_cache = _cache()


def _runs_python(opened: Target) -> bool:
    """Whether the opened file is a ``#!`` script for Python (per file identity)."""

    def read() -> bool:
        head = opened.read_head(512)
        interpreter = _shebang_interpreter(head) if head.startswith(b"#!") else None
        return interpreter is not None and _is_python(interpreter)

    return _memo(_shebang_cache, (str(opened.path), opened.identity), read)


def identify(
    opened: Target,
    argv: Sequence[str] | None,
    *,
    environ: Mapping[str, str],
    cwd: str | None = None,
) -> Identification | None:
    """The catalogued adapter that running ``opened`` with ``argv`` runs, or None.

    What the file is comes first (a ``python`` that is really aider's console script is
    aider); an interpreter is then judged by what it is asked to run; a Python script by
    the catalogued code it imports, with the version of the copy the interpreter will load.
    ``argv`` None judges the file alone. Raises DetectionError when in doubt.
    """
    installed = identify_file(opened, environ)
    if _runs_python(opened):
        # Python code: judged by what its imports load in the child's environment.
        code = _python_script(opened, environ, None, "pip-script", cwd)
        if code is not None and installed is not None and code.adapter != installed.adapter:
            raise DetectionError(
                f"{opened.path} is {installed.adapter}'s but imports {code.adapter}"
            )
        if code is not None:
            return code
    if installed is not None:
        return installed
    if argv is None:
        return None
    names = (opened.requested, opened.located, str(opened.path))
    if any(_is_python(n) for n in names):
        return _python_invocation(opened, argv, environ, cwd)
    if any(_is_node(n) for n in names):
        return _node_invocation(argv, environ, cwd)
    return None
