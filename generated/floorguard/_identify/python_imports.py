"""Where a Python child's import system finds a top-level module: the search path built as
CPython and its ``site`` build it (:func:`python_path`), the path finder followed
(:func:`find_module`), and the catalogued distribution installed at the place found, with
its version (:func:`resolve_import`)."""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floorguard._identify.consulted import (
    MAX_MANIFEST_BYTES,
    _checked_memo,
    _identity,
    _read_path,
    memo,
    new_cache,
    once_a_judgement,
)
from floorguard._identify.identification import (
    Identification,
    current_packages,
    server_workspaces,
)
from floorguard._identify.pip_metadata import (
    _catalogued_dist_infos,
    _one,
    _prefix_sites,
    _record,
    _unique,
    metadata_dist,
)
from floorguard._identify.python_site import reserved_names
from floorguard._maps.catalog import ADAPTER_OF_PIP_MODULE
from floorguard._maps.packages import pypi_normal_form
from floorguard.errors import DetectionError


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
    # The site folders (and what their .pth files add) that some builds of CPython read and
    # others do not, or in another order: all but a virtual environment's own site-packages
    # and the user site.
    build_ordered: tuple[str, ...] = ()

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
    *,
    program: str | None = None,
    folder_program: bool = False,
    module: str | None = None,
) -> PythonPath:
    """:func:`_python_path`, reused while every file and folder it consulted is unchanged."""
    here = cwd or os.getcwd()
    key = (
        interpreter, first, flags, here, program, folder_program, module, environ.get("HOME"),
        server_workspaces(), *(environ.get(name) for name in _PATH_VARIABLES),
    )  # fmt: skip
    return _checked_memo(
        _paths_cache,
        key,
        lambda: _python_path(
            interpreter, environ, first, flags, here, program=program,
            folder_program=folder_program, module=module,
        ),
    )  # fmt: skip


def _python_path(
    interpreter: str,
    environ: Mapping[str, str],
    first: str | None,
    flags: frozenset[str],
    cwd: str,
    *,
    program: str | None = None,
    folder_program: bool = False,
    module: str | None = None,
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
    on the path, and modules ahead of the standard library that shadow it.

    ``program``: the file run (a script, or a folder's ``__main__.py``), which may sit in
    ``first``; ``folder_program``: ``first`` is a folder (or archive) run as the program,
    which CPython puts first on the path whatever the safe path says; ``module``: the
    top-level name ``-m`` runs (its package, judged as the program, is the program's own)."""
    from floorguard._identify import python_site

    isolated = "I" in flags
    env = {} if isolated or "E" in flags else environ
    safe = isolated or "P" in flags or bool(env.get("PYTHONSAFEPATH"))
    head = [] if first is None or (safe and not folder_program) else [first]
    python_path_dirs: list[str] = []
    if env.get("PYTHONPATH"):
        python_path_dirs = [os.path.join(cwd, e) for e in env["PYTHONPATH"].split(os.pathsep)]
    before = _unique([*head, *python_path_dirs])
    path_doubts = [
        f"PYTHONPATH entry {entry!r} climbs with '..' (by its letters with site, through "
        "links without it)"
        for entry in env.get("PYTHONPATH", "").split(os.pathsep)
        if ".." in Path(entry).parts
    ]
    if any(part in (".", "..") for part in interpreter.split("/")):
        # getpath looks for pyvenv.cfg beside the executable as spelled, site beside its
        # normal form: `bin/./python3` finds an environment for one and not the other.
        path_doubts.append(
            f"the interpreter's path {interpreter} is not written plainly (a '.' or '..' in "
            "it): CPython's getpath and site find its environment by different spellings of it"
        )
    # CPython's getpath (3.11 on) reads a ``._pth`` file beside the interpreter on every
    # platform, whatever the options: its lines replace the whole search path.
    for folder in dict.fromkeys(
        (os.path.dirname(interpreter), os.path.dirname(os.path.realpath(interpreter)))
    ):
        path_doubts += [
            f"{os.path.join(folder, name)} replaces the interpreter's search path"
            for name in sorted(listing(folder))
            if name.endswith("._pth")
        ]
    # getpath finds the standard library from pyvenv.cfg's home, with -S too.
    home, venv_doubts = _getpath_home(interpreter)
    path_doubts += venv_doubts
    from floorguard._identify.process_paths import reaches_the_process

    for folder in (os.path.dirname(interpreter), os.path.dirname(os.path.dirname(interpreter))):
        if reaches_the_process(os.path.join(folder, "pyvenv.cfg"), cwd):
            # The child reads its own: another file than this process would read.
            path_doubts.append(f"{folder}/pyvenv.cfg leads into /proc")
    if home and reaches_the_process(home, cwd):
        # It reads it in the child, where /proc/self is the child's own.
        path_doubts.append(f"the pyvenv.cfg home {home!r} leads into /proc")
    path_doubts += _build_tree_doubts(interpreter, home)
    version = python_version(interpreter)
    prefix = _base_prefix(interpreter, home, version)
    if version is not None and not os.path.isdir(
        os.path.join(prefix, "lib", f"python{version}", "lib-dynload")
    ):
        # getpath looks for the platform library on its own, up from the executable: the
        # folder it finds one in is sys.exec_prefix, whose site-packages site adds too.
        path_doubts.append(
            f"the interpreter's standard library {prefix}/lib/python{version} has no "
            "lib-dynload beside it: CPython looks for its platform library (its exec_prefix) "
            "in other folders, and adds that prefix's site-packages, which is not judged here"
        )
    if _in_the_workspace(prefix, cwd):
        # Its standard library runs before anything judged (encodings, site, a
        # sitecustomize), and is trusted as the system's: not when the workspace wrote it.
        path_doubts.append(
            f"the interpreter's standard library ({prefix}/lib) lies in {_workspace_of(cwd)}: "
            "the workspace's own copy, whose start-up code is not judged"
        )
    elif version is not None:
        # ... nor when its folder, or a module in it, is a link into the workspace.
        stdlib = os.path.join(prefix, "lib", f"python{version}")
        if _in_the_workspace(stdlib, cwd):
            path_doubts.append(
                f"the interpreter's standard library {stdlib} lies in {_workspace_of(cwd)}: "
                "the workspace's own copy, whose start-up code is not judged"
            )
        else:
            for folder in (stdlib, os.path.join(stdlib, "lib-dynload")):
                path_doubts += _links_into_the_workspace(
                    folder, cwd, "the standard library's entry"
                )
    if "S" in flags:
        return PythonPath(tuple(before), (), tuple(path_doubts))
    venv = _venv_config(interpreter)
    no_user_site = env_flag(env.get("PYTHONNOUSERSITE"))
    user_enabled = not (isolated or "s" in flags or no_user_site) and venv in (None, True)
    user: list[str] = []
    if user_enabled:
        # site adds the user site only when isdir() of its path as spelled holds (the
        # kernel resolving each `..` through links, failing a path over PATH_MAX), and adds
        # it normalized: what it does not find is no user site, whatever the normal form
        # leads to.
        spelled = os.path.join(cwd, _user_base_text(environ))
        if version is None:
            found = True  # (every python3* folder is looked at: a spelling must be plain)
            if spelled != os.path.normpath(spelled):
                path_doubts.append(
                    f"the user base {spelled!r} is not written plainly, and which user site "
                    "the interpreter (of a version not known here) finds by it is not known"
                )
        else:
            found = os.path.isdir(os.path.join(spelled, "lib", f"python{version}", "site-packages"))
        if version is None:
            user = _prefix_sites(os.path.normpath(spelled), version) if found else []
        else:
            # (the one folder every build's site takes for the user site)
            user = [_user_site(spelled, version)] if found else []
        path_doubts += [doubt for site in user for doubt in _user_site_doubts(site, cwd)]
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
    path_doubts += [
        f"the site folder {site} leads into /proc (the child finds its own there)"
        for site in _unique(distinct)
        if reaches_the_process(site, cwd)
    ]
    scan = python_site.scan_sites(_unique(distinct), at_startup, _module_folder, user=user)
    for consulted in (interpreter, *sites, *scan.consulted):
        _identity(consulted)  # noted: a change to any of them is another answer
    startup = [*at_startup, *scan.directories]
    doubts = [*path_doubts, *scan.doubts]
    doubts += [
        f"{finder}, an editable install's finder, maps {name} to {folder}, which lies in "
        f"{_workspace_of(cwd)}: {_WORKSPACE_CODE}"
        for finder, name, folder in scan.mapped_folders
        # (the finder loads the folder's package, or a module of the folder's name beside it)
        if any(_in_the_workspace(where, cwd) for where in _finder_candidates(folder, version))
    ]
    added = {folder for folder, _ in scan.added_by}
    for folder in scan.directories:
        what = (
            "an entry of a folder a .pth file adds" if folder in added else "a site folder's entry"
        )
        doubts += _links_into_the_workspace(folder, cwd, what)
    doubts += python_site.customize_doubts(lambda m: _module_folder(m, startup), user_enabled)
    doubts += [
        f"sys.path entry {entry} is a file, or a path inside one (an archive whose modules "
        "are not read)"
        for entry in (*before, *scan.directories)
        if _in_a_file(entry)
    ]
    installed = tuple(_unique(distinct))
    # The folders -m runs its module from: the one holding it, or each holding a portion of
    # a namespace package (whose __main__ may be in any of them).
    searched = [*before, *scan.directories]
    run_from: set[str] = set()
    run = locate_module(module, searched, version) if module else None
    if module and run is not None and run.kind == "namespace":
        run_from = {entry for entry in searched if os.path.join(entry, module) in run.search}
    elif run is not None:
        run_from = {run.directory}
    for folder in before:
        doubts += _shadow_doubts(folder, scan.directories, scan.mapped, version)
        runs_here = module if folder in run_from else None
        doubts += _first_folder_doubts(
            folder, cwd, program, scan.directories, installed=installed, version=version,
            module=runs_here,
        )  # fmt: skip
    added_by = dict(scan.added_by)
    for folder in scan.directories:
        doubts += _reserved_doubts(folder, version)
        if os.path.realpath(folder) not in seen:
            doubts += _pth_folder_doubts(
                folder, added_by.get(folder), cwd, scan.directories, installed=installed,
                version=version,
            )  # fmt: skip
    every_build_reads = set(user)
    if venv is not None and version is not None:
        every_build_reads.add(_user_site(os.path.dirname(os.path.dirname(interpreter)), version))
    by_build = {site for site in _unique(distinct) if site not in every_build_reads}
    by_build.update(folder for folder, pth in scan.added_by if os.path.dirname(pth) in by_build)
    ordered = tuple(folder for folder in scan.directories if folder in by_build)
    return PythonPath(tuple(before), scan.directories, tuple(doubts), ordered)


def not_a_copy(folder: str, top: str, version: str | None) -> str | None:
    """Why the code of ``top`` in site folder ``folder`` is not the copy its metadata
    describes, or None: the package or module is a link, a file or folder in the package
    is one (``flit install --symlink``, an install whose files link into a store or a
    checkout), or the installer's ``direct_url.json`` says the install is editable. Its
    metadata then states the version it was installed at, not what the links lead to now."""
    package = os.path.join(folder, top)
    names = listing(folder)
    is_package = top in names and os.path.isdir(package)
    path = package if is_package else _file_in(folder, names, top, version)
    if path is None:
        return None
    if os.path.islink(path):
        return (
            f"{path} is a link (an install by link: its metadata states the version it was "
            "installed at, not what the link leads to now)"
        )
    linked = _checked_memo(_linked_cache, path, lambda: _first_link_below(path))
    if linked is not None:
        return (
            f"{linked} is a link (an install whose files link elsewhere: its metadata "
            "states the version it was installed at, not what the links lead to now)"
        )
    for info, _adapter in _catalogued_dist_infos(folder):
        if top in _record(info).top_level and _says_editable(info):
            return (
                f"{info}/direct_url.json says the install is editable (its metadata states "
                "the version it was installed at, not what its source folder holds now)"
            )
    return None


_linked_cache = new_cache()


def _first_link_below(package: str) -> str | None:
    """The first entry below ``package`` (a folder, walked whole) that is a link."""
    pending = [package]
    while pending:
        directory = pending.pop()
        _identity(directory)  # (noted: an entry added, removed or replaced changes it)
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        return entry.path
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:
            continue
    return None


def _says_editable(info: str) -> bool:
    """Whether a dist-info's ``direct_url.json`` (PEP 610) says the install is editable; one
    that is there but cannot be read as such an object says so too (fail closed)."""
    import json

    path = os.path.join(info, "direct_url.json")
    if _identity(path) is None:
        return False
    data = _read_path(path, MAX_MANIFEST_BYTES)
    try:
        stated = json.loads(data) if data is not None else None
    except ValueError:
        return True
    if not isinstance(stated, dict):
        return True
    dir_info = stated.get("dir_info")
    if dir_info is None:
        return False  # (an install from an archive or a VCS: its files are copies)
    if not isinstance(dir_info, dict):
        return True
    return dir_info.get("editable", False) is not False  # (true, or not a boolean)


def _user_site(base: str, version: str) -> str:
    """``BASE/lib/pythonX.Y/site-packages``: the user site of a user base, and the folder
    every build of CPython reads first in a virtual environment."""
    return os.path.normpath(os.path.join(base, "lib", f"python{version}", "site-packages"))


def user_base(environ: Mapping[str, str], cwd: str) -> str:
    """The user base of a child with ``environ`` started in ``cwd``, as ``site`` adds it: a
    relative base made absolute by its letters against the child's working directory."""
    return os.path.normpath(os.path.join(cwd, _user_base_text(environ)))


def _user_base_text(environ: Mapping[str, str]) -> str:
    """The user base as ``site`` computes it (``getuserbase``, ``posixpath.expanduser``):
    PYTHONUSERBASE when set and not empty (site reads it from the environment itself,
    whatever -E says), else ``~/.local`` with ``~`` the HOME variable (an empty one is
    ``/``), or, with no HOME at all, this user's home in the password database (the
    child's: spawn starts it as the gate's own user); as spelled, not normalized."""
    base = environ.get("PYTHONUSERBASE")
    if not base:
        home = environ.get("HOME")
        if home is None:
            import pwd

            try:
                home = pwd.getpwuid(os.getuid()).pw_dir
            except KeyError:  # (expanduser then leaves ``~`` as it is)
                home = None
        base = "~/.local" if home is None else home.rstrip("/") + "/.local"
    return base


def _first_folder_doubts(
    folder: str,
    cwd: str,
    program: str | None,
    sites: Sequence[str],
    *,
    installed: Sequence[str],
    version: str | None,
    module: str | None = None,
) -> list[str]:
    """What ``folder``, ahead of the installed code on the path (the program's folder, a
    folder run as the program, a PYTHONPATH entry), holds that an import would load: a
    module or package, or a folder of modules, of any name, wherever the folder lies. Named
    like nothing installed, it still answers an optional import (``try: import ujson``) of
    the program or of any package it runs. Only the program's own file (or ``module``, the
    package ``-m`` runs from it, judged as the program), the ``activate_this`` a virtual
    environment's tools write beside its scripts, and, outside the working directory (the
    agent's workspace), a module an installer of the environment recorded there (pip's
    copy of jmespath's ``jp.py`` in ``bin/``) are known."""
    real = os.path.realpath(folder)
    known = {"__main__"} if module is None else {"__main__", module}
    if program is not None and os.path.dirname(os.path.realpath(program)) == real:
        # The program's own name, when an import of it finds the program's own source:
        # not a package or an extension module of that name beside it (found first), nor
        # bytecode cached for it (run instead of the source).
        base = os.path.basename(program)
        own = base.split(".", 1)[0]
        beside = [e for e in listing(folder) if e.split(".", 1)[0] == own]
        if beside == [base] and not _cached_for(folder, own):
            known.add(own)
    if os.path.isfile(os.path.join(os.path.dirname(real), "pyvenv.cfg")):
        known.add("activate_this")
    found = _loadable_names(folder, known, sites, version)
    in_workspace = _inside(folder, cwd)
    if found and not in_workspace:
        recorded = _recorded_outside(tuple(installed))
        found = [name for name in found if not _recorded_module(folder, name, recorded, version)]
    if not found:
        return []
    where = "first on the path" + (" and in the working directory" if in_workspace else "")
    return [f"{folder}, {where}, holds {_some(found)}: {_ANSWERS_ANY_IMPORT}"]


_ANSWERS_ANY_IMPORT: Final = (
    "any import of such a name (an optional one included) would run it, code that is not judged"
)


def _pth_folder_doubts(
    folder: str,
    pth: str | None,
    cwd: str,
    sites: Sequence[str],
    *,
    installed: Sequence[str],
    version: str | None,
) -> list[str]:
    """A folder a ``.pth`` file adds to the path (an editable or develop install's source
    tree) is an installation only inside a site folder: elsewhere nobody installed or
    recorded what it holds, and any name there answers an optional import. In the working
    directory it is refused outright; outside it, it may hold only the top-level names of
    the distribution whose RECORD lists that ``.pth`` (the editable install's own)."""
    if any(_inside(folder, site) for site in installed):
        return []
    if _in_the_workspace(folder, cwd):
        return [
            f"{folder}, which a .pth file adds to the path, lies in {_workspace_of(cwd)}: "
            f"{_WORKSPACE_CODE}"
        ]
    own, tracked = _editable_own_names(pth) if pth is not None else (frozenset(), ())
    doubts = []
    if tracked:
        # Its metadata says what was installed; the folder holds what the checkout holds
        # now (moved to an old release's tag, say), which no metadata follows.
        doubts.append(
            f"{folder}, which {pth} adds to the path, is the source folder of an editable "
            f"install of {', '.join(tracked)}, whose version is not known (its metadata "
            "states the version it was installed at, not what the folder holds now)"
        )
    found = _loadable_names(folder, {"__main__", *own}, sites, version)
    if found:
        doubts.append(
            f"{folder}, which {pth} adds to the path, holds {_some(found)}: {_ANSWERS_ANY_IMPORT}"
        )
    return doubts


def _some(names: Sequence[str]) -> str:
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"{', '.join(names[:3])}{more}"


def _cached_for(folder: str, name: str) -> list[str]:
    """The bytecode cached in ``folder`` for module ``name`` (run instead of its source when
    its header matches)."""
    cache = os.path.join(folder, "__pycache__")
    return [os.path.join(cache, e) for e in sorted(listing(cache)) if e.startswith(name + ".")]


def _loadable_names(
    folder: str, known: Collection[str], sites: Sequence[str], version: str | None
) -> list[str]:
    """The top-level names in ``folder``, ``known`` aside, whose import would load something
    from it: a module, a regular package, or a folder of modules used as a namespace
    package (a portion is used only when no module or regular package of the name is found
    anywhere on the path, and runs no code but the modules it holds)."""
    held = sorted({entry.split(".", 1)[0] for entry in listing(folder)} - set(known))
    found = []
    for name in held:
        if not name.isidentifier():
            continue
        kind = find_module(name, [folder], version)
        if kind is None:
            continue
        if kind[1] == "namespace" and (
            name in _stdlib_names()
            or _regular(find_module(name, sites, version))
            or not _holds_modules(os.path.join(folder, name), version)
        ):
            continue
        found.append(name)
    return found


def _recorded_module(folder: str, name: str, recorded: frozenset[str], version: str | None) -> bool:
    """Whether importing ``name`` from ``folder`` loads only files ``recorded``
    (:func:`_recorded_outside`) lists: the module file found first, and any bytecode cached
    for it. A package, or a file beside the recorded one that is found first (an extension
    module), is not."""
    kind = find_module(name, [folder], version)
    if kind is None or kind[1] != "module":
        return False
    found = _file_in(folder, listing(folder), name, version)
    return found is not None and all(
        _by_real_folder(path) in recorded for path in (found, *_cached_for(folder, name))
    )


def _recorded_outside(sites: tuple[str, ...]) -> frozenset[str]:
    """The files the dist-infos of ``sites`` record outside their site folder
    (``../../../bin/jp.py``: the scripts an installer wrote, and their bytecode), each
    named by its folder's real path and its own name (a link of another name to a recorded
    file is not one)."""
    files = set()
    for site in sites:
        for entry in sorted(listing(site)):
            if entry.endswith(".dist-info"):
                for path in _record(os.path.join(site, entry)).paths:
                    if path.split(os.sep, 1)[0] == os.pardir:
                        files.add(_by_real_folder(os.path.join(site, path)))
    return frozenset(files)


def _by_real_folder(path: str) -> str:
    folder, name = os.path.split(os.path.normpath(path))
    return os.path.join(os.path.realpath(folder), name)


def _editable_own_names(pth: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The top-level names of the distribution whose RECORD lists ``pth`` (an editable
    install's): those its RECORD and top_level.txt name, and its own name as a module's
    (hatchling's editable installs write no top_level.txt); the ``.pth`` file's aside. And
    the tracked adapters such a distribution is (the catalogue's or the map's)."""
    site, name = os.path.split(pth)
    own: set[str] = set()
    tracked: list[str] = []
    pypi = current_packages().pypi
    for entry in sorted(listing(site)):
        dist = metadata_dist(entry)
        if dist is None or not entry.endswith(".dist-info"):
            continue
        record = _record(os.path.join(site, entry))
        if name in record.paths:
            own |= record.top_level - {name.split(".", 1)[0]}
            own.add(pypi_normal_form(dist).replace("-", "_"))
            adapter = pypi.get(pypi_normal_form(dist))
            if adapter is not None:
                tracked.append(adapter)
    return frozenset(own), tuple(tracked)


def _regular(found: tuple[str, str] | None) -> bool:
    return found is not None and found[1] != "namespace"


def _holds_modules(folder: str, version: str | None, depth: int = 3) -> bool:
    """Whether a folder without ``__init__`` holds a module or regular package, itself or
    in the folders without ``__init__`` below it (``depth`` levels down)."""
    for entry in listing(folder):
        name = entry.split(".", 1)[0]
        if not name.isidentifier():
            continue
        found = find_module(name, [folder], version)
        if _regular(found):
            return True
        if (
            found is not None
            and depth > 1
            and _holds_modules(os.path.join(folder, name), version, depth - 1)
        ):
            return True
    return False


def _reserved_doubts(folder: str, version: str | None) -> list[str]:
    """A site folder (or one a ``.pth`` adds) holding a module of a name the standard
    library imports where it finds it (``nt``, ``org``): found after the standard library,
    which lacks it, it runs in any program that imports ``pathlib`` or ``copy``."""
    reserved = reserved_names()
    held = {entry.split(".", 1)[0] for entry in listing(folder)} & reserved
    return [
        f"{folder} holds {name}, which the standard library imports when it is there "
        "(code run by a program that never names it)"
        for name in sorted(held)
        if find_module(name, [folder], version) is not None
    ]


def env_flag(value: str | None) -> bool:
    """Whether CPython takes a flag variable (PYTHONNOUSERSITE, ...) as set: a non-empty
    value that reads as a positive integer, or as no integer at all (``0``, ``00``, ``-0``
    and `` +0`` leave it unset; ``x`` and ``-1`` set it)."""
    if not value:
        return False
    digits = value.lstrip(" \t\n\v\f\r")  # (strtol skips leading white space only)
    if "_" in digits or digits != digits.rstrip():
        return True
    try:
        return int(digits, 10) != 0
    except ValueError:
        return True


def _shadow_doubts(
    folder: str, sites: Sequence[str], mapped: Sequence[str], version: str | None
) -> list[str]:
    """What ``folder``, ahead of the standard library and the site folders on the path
    (the program's folder, the working directory for ``-m`` and ``-c``, PYTHONPATH), holds
    that is imported in place of other code, as CPython's path finder resolves a name: a
    module or regular package named like one of the standard library's (``encodings`` at
    start-up, ``json`` when the program imports it) or like anything installed in a site
    folder (a dependency of the program, read from there instead); a folder without
    ``__init__`` joining a namespace package installed there, ahead of it (its submodules
    found first); and anything of a name an editable install's finder maps (the finder is
    asked only when the path finds nothing)."""
    stdlib = _stdlib_names()
    later = {name.split(".", 1)[0] for site in sites for name in listing(site)}
    later.update(mapped)
    doubts = []
    held = {entry.split(".", 1)[0] for entry in listing(folder)}
    reserved = reserved_names()
    for name in sorted(held & (stdlib | later | reserved)):
        here = find_module(name, [folder], version)
        if here is None:
            continue
        regular = here[1] != "namespace"
        installed = find_module(name, sites, version) if name in later else None
        if name in reserved and installed is None:
            doubts.append(
                f"{folder} holds {name}, which the standard library imports when it is there "
                "(code run by a program that never names it)"
            )
        elif name in stdlib and regular:
            doubts.append(
                f"{folder} holds {name}, which shadows the standard library's {name} (code "
                "run instead of it)"
            )
        elif installed is not None and regular:
            doubts.append(
                f"{folder} holds {name}, which shadows the {name} installed in "
                f"{installed[0]} (code run instead of it)"
            )
        elif installed is not None and installed[1] == "namespace":
            doubts.append(
                f"{folder} holds {name}, a folder that joins the namespace package {name} "
                f"installed in {installed[0]} ahead of it (its modules found first)"
            )
        elif installed is None and name in mapped:
            doubts.append(
                f"{folder} holds {name}, which shadows the editable install of {name} (its "
                "finder is asked only when the path finds nothing)"
            )
    return doubts


@functools.cache
def _stdlib_names() -> frozenset[str]:
    """The standard library's top-level names: ``sys.stdlib_module_names`` and every
    module in the standard library's folders (it leaves out ``test`` and the
    ``_sysconfigdata`` modules ``sysconfig`` imports by name)."""
    import sys
    import sysconfig

    names = set(sys.stdlib_module_names)
    for key in ("stdlib", "platstdlib"):
        folder = sysconfig.get_paths().get(key)
        if folder:
            names.update(entry.split(".", 1)[0] for entry in listing(folder))
            names.update(
                entry.split(".", 1)[0] for entry in listing(os.path.join(folder, "lib-dynload"))
            )
    names.discard("site-packages")
    return frozenset(names)


def _in_a_file(entry: str) -> bool:
    """Whether the path entry ``entry`` is a file, or a path inside one (``lib.zip/sub``):
    CPython's zip importer reads modules from both."""
    import stat

    try:
        info = os.stat(entry)
    except NotADirectoryError:
        return True  # a folder of the path is a file
    except OSError:
        return False  # absent: nothing is imported from it
    return not stat.S_ISDIR(info.st_mode)


_VERSIONED_NAME = re.compile(r"python(\d+\.\d+)\Z")


def python_version(interpreter: str) -> str | None:
    """``X.Y`` of the interpreter, from its real file's name (``python3.11``), or from a
    virtual environment's ``pyvenv.cfg``; None when neither says."""
    from floorguard._identify.target import real_path  # (the kernel's lookup: one call)

    match = _VERSIONED_NAME.match(os.path.basename(real_path(interpreter)))
    if match:
        return match.group(1)
    config = _pyvenv_cfg(interpreter)
    stated = config.get("version_info") or config.get("version") or ""
    match = re.match(r"(\d+\.\d+)", stated)
    return match.group(1) if match else None


# The lines of a text file as Python's text mode reads them (universal newlines): str's
# splitlines also breaks at \v, \f, \x1c-\x1e, \x85, \u2028 and \u2029, which would
# make a key of what site reads as part of another line's value.
_TEXT_LINES = re.compile(r"\r\n|\r|\n")


def _pyvenv_cfg(interpreter: str) -> dict[str, str]:
    """The ``key = value`` lines of the ``pyvenv.cfg`` beside or above ``interpreter``
    (empty when there is none), read as ``site`` reads them: the first of the two that is
    a regular file, in UTF-8, a line with no ``=`` skipped, the last of a key kept. A file
    that cannot be read so (too large, not UTF-8) reads as one stating nothing, so that
    ``site``'s defaults apply."""
    here = os.path.dirname(interpreter)
    for folder in (here, os.path.dirname(here)):
        config = os.path.join(folder, "pyvenv.cfg")
        if _identity(config) is None or not os.path.isfile(config):
            continue  # (site takes only a regular file, through links)
        try:
            text = (_read_path(config, MAX_MANIFEST_BYTES) or b"").decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        values = {"": folder}
        for line in _TEXT_LINES.split(text):
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip().lower()] = value.strip()
        return values
    return {}


# getpath reads a file through one buffer of 32 KB, and fails to start on a larger one.
_GETPATH_MAX_FILE: Final = 32 * 1024


def _getpath_home(interpreter: str) -> tuple[str | None, list[str]]:
    """The ``home`` CPython's getpath takes from a ``pyvenv.cfg`` (None when there is none),
    and the doubts about it. getpath looks for the file in another order than ``site``
    does (the folder above the interpreter's first, then the interpreter's own) and reads
    it its own way (:func:`_getpath_lines`) to its first ``home`` line. A file it would read
    otherwise than the gate, one without a ``home`` it reads (getpath then searches the
    standard library from the interpreter's folder: a copied one finds the environment's
    own ``lib/``), and a ``home`` it would take against the working directory are doubts."""
    here = os.path.dirname(interpreter)
    for folder in (os.path.dirname(here), here):
        config = os.path.join(folder, "pyvenv.cfg")
        if _identity(config) is None:
            continue  # (getpath goes on when it is not found)
        if not os.path.isfile(config):
            return None, [f"{config} is not a regular file (CPython's getpath reads it as empty)"]
        lines = _getpath_lines(_read_path(config, MAX_MANIFEST_BYTES))
        if lines is None:
            return None, [
                f"{config} is not plain UTF-8 text under 32 KB with \\n line ends (CPython's "
                "getpath would read it otherwise than the gate)"
            ]
        for line in lines:
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() == "home":
                return value.strip(), _home_doubts(config, value.strip())
        return None, [
            f"{config} has no home line as CPython's getpath reads it (it then takes the "
            "standard library from beside the interpreter)"
        ]
    return None, []


def _getpath_lines(data: bytes | None) -> list[str] | None:
    """The lines of a file as getpath's ``readlines`` returns them, or None where the gate
    cannot be sure it reads them alike: unreadable, 32 KB or more, not UTF-8 (getpath keeps
    such bytes, escaped), a NUL (getpath stops there) or a carriage return not ending a line
    (getpath splits at ``\\n`` only, where ``site`` splits at every line end)."""
    if data is None or len(data) >= _GETPATH_MAX_FILE or b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text.replace("\r\n", ""):
        return None
    return [line.removesuffix("\r") for line in text.split("\n")]


def _home_doubts(config: str, home: str) -> list[str]:
    """A ``home`` that does not name one folder by itself: a relative one is taken against
    the child's working directory (the workspace supplies the standard library), and one
    that climbs with ``..`` is followed through links by getpath, by its letters here."""
    if not os.path.isabs(home):
        return [
            f"{config} home {home!r} is not an absolute path (CPython's getpath takes it "
            "against the working directory)"
        ]
    if ".." in Path(home).parts:
        return [f"{config} home {home!r} climbs with '..' (getpath follows links there)"]
    return []


# getpath takes an interpreter with either beside its real file (a venv's: in its home) for
# one run from a build tree: the standard library is then that folder's ``Lib``.
_BUILD_TREE_MARKERS: Final = ("pybuilddir.txt", os.path.join("Modules", "Setup.local"))


def _build_tree_doubts(interpreter: str, home: str | None) -> list[str]:
    """The build-tree markers getpath looks for beside the interpreter's real file, or in a
    virtual environment's home (the interpreter's own folder too, to be safe)."""
    folders = [os.path.dirname(interpreter), os.path.dirname(os.path.realpath(interpreter))]
    if home and os.path.isabs(home):
        folders.append(home)
    return [
        f"{os.path.join(folder, marker)} makes CPython take the interpreter for one in its "
        f"build tree (the standard library from {os.path.join(folder, 'Lib')})"
        for folder in dict.fromkeys(folders)
        for marker in _BUILD_TREE_MARKERS
        if _identity(os.path.join(folder, marker)) is not None
        or os.path.islink(os.path.join(folder, marker))
    ]


def _base_prefix(interpreter: str, home: str | None, version: str | None) -> str:
    """The installation whose site-packages ``site`` takes as the system's, as CPython's
    getpath finds it: the nearest folder holding ``lib/pythonX.Y/os.py`` (or ``os.pyc``)
    from a virtual environment's ``pyvenv.cfg`` ``home`` up, else from the interpreter's
    real folder up (by its letters: a prefix reached through a link keeps its own
    site-packages); two folders above the interpreter's real file when none does."""
    real = os.path.realpath(interpreter)
    start = os.path.normpath(home) if home and os.path.isabs(home) else os.path.dirname(real)
    if version:
        folder = start
        while True:
            stdlib = os.path.join(folder, "lib", f"python{version}")
            if any(os.path.isfile(os.path.join(stdlib, name)) for name in ("os.py", "os.pyc")):
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return os.path.dirname(os.path.dirname(real))


def _user_site_doubts(site: str, cwd: str) -> list[str]:
    """The user site ``site`` (ahead of the system's site-packages) is an installation only
    outside the working directory, where HOME or PYTHONUSERBASE may put it, and only for
    what an installer recorded there: a module no dist-info's RECORD lists replaces an
    installed dependency, or answers an optional import, with code nothing installed."""
    if _in_the_workspace(site, cwd):
        return [
            f"the user site {site} lies in {_workspace_of(cwd)} (HOME or PYTHONUSERBASE puts "
            "it there): set PYTHONNOUSERSITE=1"
        ]
    names = listing(site)
    paths = {
        os.path.normpath(path)
        for name in names
        if metadata_dist(name) is not None
        for path in _record(os.path.join(site, name)).paths
    }
    recorded = {path.split(os.sep, 1)[0] for path in paths}
    doubts = [
        f"the user site {site} holds {name}, which no installer recorded there (code "
        "imported ahead of the installed ones)"
        for name in sorted(names)
        if _importable_entry(name) and name not in recorded
    ]
    # Bytecode cached beside a recorded module runs instead of its source when its header
    # matches the source's (or is an unchecked hash one): only what an installer wrote, in
    # the site itself and in every folder of a recorded package that holds a recorded file.
    folders = {
        os.path.dirname(path)
        for path in paths
        if path.split(os.sep, 1)[0] in names and not path.startswith(os.pardir + os.sep)
    }
    # Inside a recorded package, a module or package no RECORD lists is imported like its
    # own (a package folder, or an extension module, before the recorded source beside it).
    holding: set[str] = set()  # (every folder a recorded file lies in, and those above)
    for path in paths:
        above = os.path.dirname(path)
        while above and above not in holding:
            holding.add(above)
            above = os.path.dirname(above)
    for folder in sorted(folders - {""}):
        doubts += [
            f"the user site {site} holds {entry}, which no installer recorded there (code "
            "imported in place of the package's own)"
            for entry in (
                os.path.join(folder, name) for name in sorted(listing(os.path.join(site, folder)))
            )
            if entry not in paths
            and entry not in holding
            and _nested_module(os.path.basename(entry), os.path.join(site, entry))
        ]
    for folder in ("", *sorted(folders - {""})):
        cache = os.path.join(folder, "__pycache__")
        doubts += [
            f"the user site {site} holds {os.path.join(cache, entry)}, bytecode no installer "
            "recorded there (it runs instead of the source beside it)"
            for entry in sorted(listing(os.path.join(site, cache)))
            if os.path.join(cache, entry) not in paths
        ]
    return doubts


def _nested_module(name: str, path: str) -> bool:
    """Whether an entry of a package's folder can be imported as one of its modules: a
    folder or a source, bytecode or extension file named as Python names modules."""
    stem, dot, _ = name.partition(".")
    if name == "__pycache__" or not stem.isidentifier():
        return False
    return name.endswith((".py", ".pyc", ".pyw", ".so")) if dot else os.path.isdir(path)


def _importable_entry(name: str) -> bool:
    """Whether a site folder's entry ``name`` can be imported or run at start-up: a module,
    package or namespace folder named as Python names them, or a ``.pth`` file."""
    if name == "__pycache__" or metadata_dist(name) is not None:
        return False
    return name.endswith(".pth") or name.split(".", 1)[0].isidentifier()


def _in_the_workspace(path: str, cwd: str) -> bool:
    """Whether ``path`` lies in the working directory ``cwd`` or, for an MCP server, in a
    folder the repository declaring it may have written (its agent's folder, the folders
    above it, ...: identification.server_workspaces), by its letters, through links, or by
    way of a link that lies there (which the workspace may point elsewhere at any time)."""
    from floorguard._identify.process_paths import reaches_the_process

    folders = (cwd, *server_workspaces())
    if any(_inside(path, f) for f in folders) or reaches_the_process(path, cwd):
        # (a path through /proc/self/cwd is the child's own working directory)
        return True
    links = _links_on_the_way(path)
    return any(
        os.path.commonpath([link, real]) == real
        for link in links
        for real in {os.path.realpath(f) for f in folders}
    )


def _links_on_the_way(path: str) -> list[str]:
    """Each link the kernel follows to reach ``path`` (as posixpath.realpath follows them),
    at its own place: its folder resolved, its name as written."""
    links: list[str] = []
    seen: dict[str, str | None] = {}

    def walk(done: str, rest: str) -> tuple[str, bool]:
        if rest.startswith("/"):
            done, rest = "/", rest.lstrip("/")
        for name in rest.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                done = os.path.dirname(done) if done != "/" else "/"
                continue
            step = os.path.join(done, name)
            # noted: an entry of it replaced (a folder by a link) is another answer
            _identity(done)
            try:
                is_link = stat.S_ISLNK(os.lstat(step).st_mode)
            except (OSError, ValueError):
                is_link = False
            if not is_link:
                done = step
                continue
            links.append(step)
            if step in seen:
                known = seen[step]
                if known is None:
                    return step, False  # a loop: the kernel fails here too
                done = known
                continue
            seen[step] = None
            try:
                target = os.readlink(step)
            except OSError:
                return step, False
            done, ok = walk(done, target)
            if not ok:
                return done, False
            seen[step] = done
        return done, True

    walk("/", os.path.join(os.getcwd(), path))  # ('..' left to the walk, as the kernel)
    return links


_WORKSPACE_CODE: Final = (
    "any import of a name it holds (an optional one included) runs the workspace's code; "
    "install the agent in an environment of its own"
)


def _finder_candidates(folder: str, version: str | None) -> list[str]:
    """What setuptools' editable finder loads for a name mapped to ``folder``: the folder's
    ``__init__.py``, else the first module of the folder's name with a suffix (the child's
    extension suffixes, which name its version, as well as this Python's)."""
    from importlib.machinery import all_suffixes

    suffixes = dict.fromkeys([*all_suffixes(), *(_extension_suffixes(version) or ())])
    return [folder, *(folder + suffix for suffix in suffixes)]


def _links_into_the_workspace(folder: str, cwd: str, what: str) -> list[str]:
    """A doubt for each entry of ``folder`` that is a link leading into the workspace: the
    folder is judged as an installation, and what the link leads to is the workspace's.
    (Links further down are not looked for here: identification.md, Remaining windows.)"""
    return [
        f"{path}, {what}, is a link into {_workspace_of(cwd)} ({os.path.realpath(path)}): "
        f"{_WORKSPACE_CODE}"
        for name in sorted(_links_in(folder))
        if _in_the_workspace(path := os.path.join(folder, name), cwd)
    ]


def _workspace_of(cwd: str) -> str:
    """Where the workspace is, as a reason names it."""
    if server_workspaces():
        return (
            f"the workspace (the working directory {cwd} or a folder its repository may "
            "have written)"
        )
    return f"the working directory {cwd}"


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it, by its letters or through links."""
    pairs = ((os.path.abspath(path), os.path.abspath(folder)),
             (os.path.realpath(path), os.path.realpath(folder)))  # fmt: skip
    return any(os.path.commonpath([p, f]) == f for p, f in pairs)


def _venv_config(interpreter: str) -> bool | None:
    """None when ``interpreter`` (as started) is not a virtual environment's; else whether
    its ``pyvenv.cfg`` includes the system site-packages (and so the user site): ``site``
    includes them when the key says ``true`` (in any case) and when it is absent."""
    config = _pyvenv_cfg(interpreter)
    if not config:
        return None
    return config.get("include-system-site-packages", "true").lower() == "true"


# ---------------------------------------------------------------------------- the import system

_listings = new_cache()


def listing(directory: str) -> frozenset[str]:
    """The names in ``directory`` (cached per directory identity: adding or removing an
    entry changes its mtime); none when it is not there, or not a folder. Raises
    DetectionError for a folder that cannot be listed: the interpreter needs only to search
    it (a folder of mode 0311) to find a package or bytecode in it by name."""

    def scan() -> frozenset[str]:
        try:
            return frozenset(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return frozenset()
        except OSError as exc:
            raise DetectionError(
                f"{directory} cannot be listed ({exc.strerror or exc}): what the interpreter "
                "may find in it by name is not known"
            ) from None

    return memo(_listings, (directory, _identity(directory)), scan)


_link_listings = new_cache()


def _links_in(directory: str) -> frozenset[str]:
    """The names in ``directory`` that are symbolic links (as the directory itself says:
    no stat of each entry), cached per directory identity as ``listing`` is; none when it
    cannot be read (``listing`` refuses that where it matters)."""

    def scan() -> frozenset[str]:
        try:
            with os.scandir(directory) as entries:
                return frozenset(entry.name for entry in entries if entry.is_symlink())
        except OSError:
            return frozenset()

    return memo(_link_listings, (directory, _identity(directory)), scan)


@functools.lru_cache(maxsize=8)  # (a pure function of its argument and this machine)
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
    found anywhere on the path. None when it is not on ``search``. Looked at once a
    judgement: the checks of one judgement that ask again take the first answer."""
    return once_a_judgement(
        (find_module, top, tuple(search), version), lambda: _find_module(top, search, version)
    )


def _find_module(top: str, search: Sequence[str], version: str | None) -> tuple[str, str] | None:
    found = locate_module(top, search, version)
    return None if found is None else (found.directory, found.kind)


@dataclass(frozen=True)
class LocatedModule:
    """Where the path finder finds a module: ``kind`` package (``file``: its ``__init__``),
    module (``file``: the module's file) or namespace (no file); ``directory``: the path
    entry it was found in (a namespace's first portion's); ``search``: the path its
    submodules are looked for on (a package's folder, every portion of a namespace)."""

    kind: str
    directory: str
    file: str | None
    search: tuple[str, ...]


def locate_module(name: str, search: Sequence[str], version: str | None) -> LocatedModule | None:
    """Where importing ``name`` (one part of a dotted name) from the folders ``search``
    finds it, as CPython's path finder does: in each folder, a regular package first, then
    a module file (extension modules, then source, then bytecode: ``_file_in``), and a
    folder without ``__init__`` kept as a namespace portion; the first package or module
    of any folder wins, and the portions make a namespace only when none is found. None
    when nothing is found."""
    portions: list[str] = []
    for directory in search:
        names = listing(directory)
        folder = os.path.join(directory, name)
        if name in names and os.path.isdir(folder):
            init = _file_in(folder, listing(folder), "__init__", version)
            if init is not None:
                return LocatedModule("package", directory, init, (folder,))
            portions.append(directory)
        file = _file_in(directory, names, name, version)
        if file is not None:
            return LocatedModule("module", directory, file, ())
    if not portions:
        return None
    return LocatedModule(
        "namespace", portions[0], None, tuple(os.path.join(d, name) for d in portions)
    )


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
        return _map_package_import(top, search, version)
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


def _map_package_import(
    top: str, search: Sequence[str], version: str | None
) -> Identification | None:
    """A module of a distribution the map in force names (not the catalogue): its modules
    are known only from its installed metadata, so the folder ``top`` is found in is asked
    which of those distributions installed it."""
    if not any(ecosystem == "PyPI" for ecosystem, _, _ in current_packages().key):
        return None
    found = find_module(top, search, version)
    if found is None or found[1] == "namespace":
        return None
    owners = {
        (owner, info)
        for info, owner in _catalogued_dist_infos(found[0])
        if top in _record(info).top_level
    }
    return _one(owners, top, "import", version_known=True) if owners else None
