"""What CPython's ``site`` module does at start-up, before the program's first line runs.

For each site directory, in order, ``site`` appends the directory to ``sys.path`` and then
reads its ``*.pth`` files (sorted by name): a line starting with ``import`` is executed, any
other line names a directory to append. Then it imports ``sitecustomize`` and, with the user
site enabled, ``usercustomize``, from wherever ``sys.path`` finds them first. All of that is
code the child runs before the CLI, so it is understood here or refused:

- a path line is followed (the directory joins the search path, as ``site`` appends it);
- an import line is understood only in the forms installers write, and only when the module
  it imports is the one beside the ``.pth`` file: setuptools' ``distutils-precedence.pth``,
  virtualenv's and uv's ``_virtualenv.pth``, and setuptools' editable-install finders
  (whose mapping must name no catalogued package, whose version could not be told, nor a
  name imported though no program names it: ``sitecustomize``, a standard-library probe);
  and only in an install tree: in the user site (wherever HOME or PYTHONUSERBASE puts it)
  the module beside the line is the user environment's, not an installer's;
- every other import line, an unreadable ``.pth`` file, and any ``sitecustomize`` or
  ``usercustomize`` module on the search path is a doubt that names the file.

The standard library's own folder is not searched here: a ``sitecustomize`` there (Debian
ships one) belongs to the interpreter's installation, which is trusted as the system's.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from floorguard._base.files import read_regular
from floorguard._identify.process_paths import reaches_the_process
from floorguard._maps.catalog import ADAPTER_OF_PIP_MODULE
from floorguard.errors import UnreadableFileError

MAX_PTH_BYTES: Final = 1 << 20
_NOT_PLAIN: Final = re.compile(rb"[^\t\n\r\x20-\x7e]")
MAX_FINDER_BYTES: Final = 1 << 20

# The line setuptools installs as distutils-precedence.pth (one form since setuptools 49).
_DISTUTILS_PRECEDENCE = re.compile(
    r"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; "
    r"enabled = os\.environ\.get\(var, 'local'\) == 'local'; "
    r"enabled and __import__\('_distutils_hack'\)\.add_shim\(\); ?\Z"
)
_VIRTUALENV = re.compile(r"import _virtualenv\Z")
_EDITABLE_FINDER = re.compile(
    r"import (?P<module>__editable___[A-Za-z0-9_]+_finder); "
    r"(?P=module)\.install\(\)\Z"
)


@dataclass(frozen=True)
class SiteScan:
    """The directories ``site`` appends (each site directory followed by its ``.pth``
    directories, in order), the start-up inputs not understood, and every file or folder
    read or looked for on the way (``consulted``: a cached answer is checked against them)."""

    directories: tuple[str, ...]
    doubts: tuple[str, ...]
    consulted: tuple[str, ...] = ()
    # Top-level names an editable install's finder maps (asked after the path's own search).
    mapped: tuple[str, ...] = ()
    # Each folder such a finder maps a name to: (the finder's file, the name, the folder).
    mapped_folders: tuple[tuple[str, str, str], ...] = ()
    # Each directory a ``.pth`` path line added, with that ``.pth`` file.
    added_by: tuple[tuple[str, str], ...] = ()


_USER_SITE_IMPORT: Final = (
    "an import line in the user site, the user's environment: set PYTHONNOUSERSITE=1 or remove it"
)
# Top-level names the standard library imports where it finds them, none of them its own:
# probes for other platforms and implementations (copy and pickle try org.python.core,
# platform java, _winreg and vms_lib, logging.handlers the win32 modules) and optional
# helpers (distutils' docutils, lib2to3's pgen2). A module of such a name ahead of the site
# folders runs in a program that imports copy. (A test scans this interpreter's standard
# library for any it lacks.)
STDLIB_PROBES: Final = frozenset(
    {"org", "java", "_winreg", "vms_lib", "win32api", "win32con", "win32evtlog",
     "win32evtlogutil", "docutils", "pgen2"}
)  # fmt: skip


@functools.cache
def reserved_names() -> frozenset[str]:
    """Top-level names the standard library imports wherever the path finds them, though
    this interpreter's does not hold them: STDLIB_PROBES, and the names
    ``sys.stdlib_module_names`` lists that this build lacks (another platform's, such as
    ``nt``, ``msvcrt``, ``winreg`` and ``_winapi``, which ``pathlib``, ``subprocess`` and
    ``mimetypes`` try; a module left out of the build, such as ``_dbm``). A module of such
    a name anywhere on the path runs in a program that never names it."""
    import sys
    import sysconfig

    held = set(sys.builtin_module_names)
    for key in ("stdlib", "platstdlib"):
        folder = sysconfig.get_paths().get(key)
        if folder:
            for place in (folder, os.path.join(folder, "lib-dynload")):
                try:
                    held.update(entry.split(".", 1)[0] for entry in os.listdir(place))
                except OSError:
                    continue
    return frozenset((set(sys.stdlib_module_names) - held) | STDLIB_PROBES)


def _imported_unasked() -> frozenset[str]:
    """Names imported though no program names them: by site at start-up, and by the
    standard library where it finds them."""
    return reserved_names() | {"sitecustomize", "usercustomize"}


# Where a top-level module imports from, given the search path so far (None: not there).
Finder = Callable[[str, Sequence[str]], "str | None"]


def scan_sites(
    sites: Sequence[str], before: Sequence[str], find: Finder, user: Collection[str] = ()
) -> SiteScan:
    """Follow ``site``'s processing of ``sites`` (in the order it adds them), after the
    entries ``before`` them on the search path (the script's folder is not there yet).
    ``user``: the user site's folders, where no import line is understood (the module an
    installer's line imports is the installer's only in an install tree; the user site is
    wherever HOME or PYTHONUSERBASE puts it)."""
    directories: list[str] = []
    doubts: list[str] = []
    consulted: list[str] = []
    mapped: list[str] = []
    folders: list[tuple[str, str, str]] = []
    added_by: list[tuple[str, str]] = []
    for site in sites:
        if site in directories or not os.path.isdir(site):
            continue
        directories.append(site)
        so_far = [*before, *directories]

        def found(module: str, path: list[str] = so_far) -> str | None:
            return find(module, path)

        for pth in _pth_files(site):
            added, problems = _read_pth(
                site, pth, found, consulted, mapped=mapped, folders=folders, user_site=site in user
            )
            # site adds a folder once (it keeps a set of those it has): so does the path
            # searched here, however many lines name it (each would be searched again).
            new = [d for d in dict.fromkeys(added) if d not in directories]
            directories += new
            so_far += new
            added_by += [(directory, os.path.join(site, pth)) for directory in new]
            doubts += problems
    return SiteScan(
        tuple(directories), tuple(doubts), tuple(dict.fromkeys(consulted)), tuple(mapped),
        tuple(folders), tuple(added_by),
    )  # fmt: skip


def customize_doubts(found: Callable[[str], str | None], user_site: bool) -> tuple[str, ...]:
    """``sitecustomize`` (and ``usercustomize`` with the user site on) found by ``found``
    (which names the folder a top-level module imports from, or None)."""
    names = ("sitecustomize", "usercustomize") if user_site else ("sitecustomize",)
    return tuple(
        f"{name} in {where} runs at start-up, before the program"
        for name in names
        if (where := found(name)) is not None
    )


def _pth_files(site: str) -> list[str]:
    try:
        return sorted(name for name in os.listdir(site) if name.endswith(".pth"))
    except OSError:
        return []


def _read_pth(
    site: str,
    name: str,
    found: Callable[[str], str | None],
    consulted: list[str],
    *,
    mapped: list[str],
    folders: list[tuple[str, str, str]],
    user_site: bool = False,
) -> tuple[list[str], list[str]]:
    path = os.path.join(site, name)
    consulted.append(path)
    try:
        data = read_regular(path, max_bytes=MAX_PTH_BYTES, what=".pth file")
        if data.startswith(b"\xef\xbb\xbf"):
            # 3.13's site drops it; 3.11's and 3.12's keep it as the first line's first
            # character (a relative path, joined to the site folder): no one reading holds.
            return [], [f"{path} starts with a byte-order mark, read differently by each Python"]
        if _NOT_PLAIN.search(data):
            # 3.11's and 3.12's site read it in the locale's encoding, the child's (any
            # LANG or LC_* it is given), not the gate's: only printable ASCII (escape
            # sequences are a stateful codeset's) reads one way.
            return [], [
                f"{path} holds bytes other than printable ASCII, read by some Pythons in "
                "the locale's encoding"
            ]
        # site.py reads it as UTF-8 from 3.13, and in the locale's
        # encoding before: text that is not UTF-8 might read differently there.
        text = data.decode("utf-8")
    except (UnreadableFileError, ValueError) as exc:
        return [], [f"{path} cannot be read as a .pth file ({exc})"]
    added: list[str] = []
    doubts: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith(("import ", "import\t")):
            problem = (
                _USER_SITE_IMPORT
                if user_site
                else _import_line_problem(
                    site, line.strip(), found, consulted, mapped=mapped, folders=folders
                )
            )
            if problem is not None:
                doubts.append(f"{path} line {number} runs code at start-up ({problem})")
            continue
        directory = os.path.normpath(os.path.join(site, line.rstrip()))
        consulted.append(directory)
        if "\x00" in directory:
            continue
        if reaches_the_process(directory, site):
            # site adds it by its letters: the child finds its own folder there.
            doubts.append(f"{path} line {number} adds {directory}, which leads into /proc")
        elif os.path.exists(directory):
            added.append(directory)
    return added, doubts


def _import_line_problem(
    site: str,
    line: str,
    found: Callable[[str], str | None],
    consulted: list[str],
    *,
    mapped: list[str],
    folders: list[tuple[str, str, str]],
) -> str | None:
    """Why an import line of a ``.pth`` file in ``site`` is not understood, or None (an
    editable finder's top-level names are added to ``mapped``, the folders it maps them to
    to ``folders``)."""
    if _DISTUTILS_PRECEDENCE.match(line):
        return _beside(site, "_distutils_hack", found)
    if _VIRTUALENV.match(line):
        return _beside(site, "_virtualenv", found)
    editable = _EDITABLE_FINDER.match(line)
    if editable is None:
        return "not a form floorguard understands"
    module = editable.group("module")
    problem = _beside(site, module, found)
    if problem is not None:
        return problem
    consulted.append(os.path.join(site, module + ".py"))
    # (a package of its name, or an extension module, is imported ahead of the .py read here)
    from importlib.machinery import EXTENSION_SUFFIXES

    for other in (module, *(module + suffix for suffix in (*EXTENSION_SUFFIXES, ".pyc"))):
        consulted.append(os.path.join(site, other))
        if os.path.lexists(os.path.join(site, other)):
            return f"{other} beside it is imported instead of {module}.py"
    return _editable_mapping_problem(os.path.join(site, module + ".py"), mapped, folders)


def _beside(site: str, module: str, found: Callable[[str], str | None]) -> str | None:
    """The module an understood line imports must be the installer's, beside the line,
    and what the search path finds first (a PYTHONPATH copy would run instead)."""
    where = found(module)
    if where is not None and os.path.normpath(where) == os.path.normpath(site):
        return None
    return f"{module} is not imported from beside it" if where else f"{module} is not beside it"


_TABLES: Final = frozenset({"MAPPING", "NAMESPACES"})
# What the finder's own code does with its tables: reads them.
_TABLE_READS: Final = frozenset({"get", "items", "keys", "values"})


def _finder_tables_changed(tree: ast.Module) -> str | None:
    """How the finder's code may change MAPPING or NAMESPACES after binding them once, or
    None: each use must be one of the reads setuptools' template makes (``name in T``,
    ``not T``, ``T[key]``, ``T.get``/``items``/``keys``/``values``). Anything else (an
    alias, an argument, ``T.update``, a second binding, ``global``) may change them."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    bound: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global | ast.Nonlocal) and _TABLES & set(node.names):
            return "declares its tables global"
        if not (isinstance(node, ast.Name) and node.id in _TABLES):
            continue
        if not isinstance(node.ctx, ast.Load):
            bound[node.id] = bound.get(node.id, 0) + 1
            continue
        parent = parents.get(node)
        read = (
            (isinstance(parent, ast.Compare) and node in parent.comparators
             and all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops))
            or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not))
            or (isinstance(parent, ast.Subscript) and parent.value is node
                and isinstance(parent.ctx, ast.Load))
            or (isinstance(parent, ast.Attribute) and parent.attr in _TABLE_READS)
        )  # fmt: skip
        if not read:
            return f"uses {node.id} otherwise than by reading it"
    twice = sorted(name for name, count in bound.items() if count > 1)
    return f"binds {', '.join(twice)} more than once" if twice else None


def _editable_mapping_problem(
    finder: str, mapped: list[str], folders: list[tuple[str, str, str]]
) -> str | None:
    """An editable finder maps top-level names to source folders (added to ``mapped``, the
    folders to ``folders``: where they lie is judged with the working directory); one naming
    a catalogued package would load that package from a folder whose version nothing
    states. Its NAMESPACES maps namespace packages to folders too."""
    try:
        source = read_regular(finder, max_bytes=MAX_FINDER_BYTES, what="editable finder")
        tree = ast.parse(source)
    except (UnreadableFileError, ValueError, SyntaxError, RecursionError, MemoryError):
        return f"{finder} cannot be read"
    changed = _finder_tables_changed(tree)
    if changed is not None:
        return f"{finder} {changed}: not the form setuptools writes"
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in ("MAPPING", "NAMESPACES"):
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    try:
                        found[name] = (
                            ast.literal_eval(node.value) if node.value is not None else None
                        )
                    except (ValueError, TypeError, SyntaxError, RecursionError):
                        return f"{finder} has a {name} that is not a literal"
    if "MAPPING" not in found:
        return f"{finder} has no MAPPING"
    mapping, namespaces = found["MAPPING"], found.get("NAMESPACES", {})
    if not isinstance(mapping, dict):
        return f"{finder} has a MAPPING that is not a dict"
    if not isinstance(namespaces, dict):
        return f"{finder} has a NAMESPACES that is not a dict"
    if namespaces:
        # install() then appends "<name>.__path_hook__" to sys.path: a relative entry, which
        # the import system looks up in the child's working directory (a folder or zip file
        # of that name there answers any import).
        return f"{finder} maps namespace packages, and so adds a relative entry to sys.path"
    to: list[tuple[str, object]] = [(str(name), where) for name, where in mapping.items()]
    for name, where in namespaces.items():
        if not isinstance(where, list):
            return f"{finder} maps the namespace {name} to something other than a list of folders"
        to += [(str(name), folder) for folder in where]
    for name, folder in to:
        if not isinstance(folder, str) or "\x00" in folder:
            return f"{finder} maps {name} to something other than a folder's path"
        if not os.path.isabs(folder):
            # (the finder takes it from the child's working directory at each import)
            return f"{finder} maps {name} to the relative folder {folder!r}"
        folders.append((finder, name, folder))
    tops = [str(name).split(".")[0] for name in mapping]
    mapped += tops
    unasked = sorted(set(tops) & _imported_unasked())
    if unasked:
        return (
            f"{finder} maps {', '.join(unasked)}, imported at start-up or by the "
            "standard library though no program names it"
        )
    catalogued = sorted(
        str(name) for name in mapping if str(name).split(".")[0] in ADAPTER_OF_PIP_MODULE
    )
    if catalogued:
        return f"an editable install of {', '.join(catalogued)}, whose version is not known"
    return None
