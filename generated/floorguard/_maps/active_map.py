"""The floor map in force, read from disk at every call and checked against its stated hash.

Reading at call time (not at import) means a refreshed map takes effect without a restart
and a map tampered with after import is still caught. The file is parsed with ``ast`` and
its literals evaluated with ``ast.literal_eval``: the data is never executed.
"""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from floorguard._base.files import read_regular_stat
from floorguard._maps.map_model import (
    MAP_VERSION_FORM,
    FloorMap,
    floor_map_hash,
    from_entries,
    is_map_version,
)
from floorguard.errors import FloorMapError, UnreadableFileError

BUILTIN_MAP_FILE = Path(__file__).parent.parent / "floor_map.py"
_NAMES = ("FLOOR_MAP_VERSION", "FLOOR_MAP_HASH", "FLOOR_MAP_ENTRIES")
# The annotation the floorguard template writes on each (or none): a module-level annotation
# is evaluated on import, so any other is code in the block, however harmless it looks.
ANNOTATIONS = {
    "FLOOR_MAP_VERSION": "int",
    "FLOOR_MAP_HASH": "str",
    "FLOOR_MAP_ENTRIES": "dict[str, dict[str, str]]",
}
MAX_MAP_FILE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ActiveMap:
    floor_map: FloorMap
    floor_map_hash: str
    map_version: int
    source: str


_cache_lock = threading.Lock()
_cache: dict[tuple[object, ...], ActiveMap] = {}
# The built-in map and a host's module may alternate: a few identities are kept.
_CACHE_LIMIT = 8


_MUTATORS = frozenset(
    {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
)


# Ways to reach a module's namespace without naming what is bound (``globals()[k] = v``,
# ``exec``, ``sys.modules[__name__].X = v``, ``setattr(...)``, a frame's or a function's
# globals, the collector's list of every object): a statement using one may rebind
# anything, so it counts as binding every name. (A list, not a proof: see
# docs/receipts-and-chain.md, "Verifying a receipt".)
_FRAME_AND_COLLECTOR = frozenset(
    {"currentframe", "_getframe", "stack", "getouterframes", "get_objects", "get_referrers",
     "get_referents"}
)  # fmt: skip
_DYNAMIC_NAMES = frozenset(
    {"globals", "vars", "locals", "exec", "eval", "compile", "setattr", "delattr",
     "__import__", "__builtins__", "__dict__", *_FRAME_AND_COLLECTOR}
)  # fmt: skip
# Each of them also as an attribute (``builtins.globals()``) and as an imported name
# (``from sys import modules as m``); but compile, which runs nothing (``re.compile``).
_DYNAMIC_ATTRIBUTES = frozenset(
    {"__dict__", "modules", "import_module", "setattr", "f_globals", "f_locals", "f_builtins",
     "f_back", "__globals__", "gi_frame", "cr_frame", "ag_frame", "tb_frame",
     *_FRAME_AND_COLLECTOR, *(_DYNAMIC_NAMES - {"compile"})}
)  # fmt: skip


def _base_name(node: ast.expr) -> str | None:
    """``X`` of ``X[...]``, ``X.a``, ``X[...].a[...]``, ..."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def bound_names(node: ast.AST, *, skip: ast.AST | None = None) -> set[str]:
    """Every name ``node`` (a module-level statement) can bind, delete or change in place
    (``X[k] = v``, ``del X[k]``, ``X.update(...)``) anywhere within it, but the one target
    ``skip``; ``from M import *`` counts as binding every name ("*"), and so does any
    way to reach the module's namespace without naming the binding ("?": ``globals()``,
    ``exec``, ``sys.modules``, ...)."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if sub is skip:
            continue
        if isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(
            sub.ctx, (ast.Store, ast.Del)
        ):
            names.add(_base_name(sub) or "")
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in _MUTATORS
        ):
            names.add(_base_name(sub.func.value) or "")
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            names.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in sub.names)
            if isinstance(sub, ast.ImportFrom) and any(
                alias.name in _DYNAMIC_ATTRIBUTES for alias in sub.names
            ):
                names.add("?")
        elif isinstance(sub, (ast.Global, ast.Nonlocal)):
            names.update(sub.names)
        elif (isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name) or (
            isinstance(sub, ast.ExceptHandler) and sub.name
        ):
            names.add(sub.name)
        elif (isinstance(sub, ast.Name) and sub.id in _DYNAMIC_NAMES) or (
            isinstance(sub, ast.Attribute) and sub.attr in _DYNAMIC_ATTRIBUTES
        ):
            names.add("?")
        elif isinstance(sub, ast.MatchMapping) and sub.rest:
            names.add(sub.rest)
    return names


def names_read(node: ast.AST) -> set[str]:
    """The names ``node`` (a module-level statement) reads when the module is imported:
    everywhere but inside the bodies of the functions it defines (not run on import).
    A name read there can be mutated through the value read (``x = NAME; x[k] = v``,
    ``dict.clear(NAME)``)."""
    read: set[str] = set()
    pending: list[ast.AST] = [node]
    while pending:
        sub = pending.pop()
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            read.add(sub.id)
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Only what runs on import: decorators, defaults and annotations.
            pending.extend(sub.decorator_list)
            pending.extend(d for d in (*sub.args.defaults, *sub.args.kw_defaults) if d)
            pending.extend(a.annotation for a in ast.walk(sub.args) if isinstance(a, ast.arg)
                           and a.annotation is not None)  # fmt: skip
            if sub.returns is not None:
                pending.append(sub.returns)
            continue
        pending.extend(ast.iter_child_nodes(sub))
    return read


def top_level_problem(
    node: ast.stmt, names: Collection[str], source: str, *, skip: ast.AST | None = None
) -> str | None:
    """Why the module-level statement ``node`` could change, when the module is imported,
    what one of ``names`` holds (``skip``: the one target that binds it), or None: it
    binds one of them (``import *`` counts), reaches the module's namespace without
    naming what it binds, or reads one of them where it runs on import."""
    bound = bound_names(node, skip=skip)
    if "*" in bound:
        return f"{source}: line {node.lineno}: import * can rebind the floor map"
    if "?" in bound:
        return (
            f"{source}: line {node.lineno}: reaching the module's namespace (globals(), "
            "exec, sys.modules, setattr, a frame's globals, ...) can rebind the floor map"
        )
    for name in sorted(bound & set(names)):
        return f"{source}: {name} is assigned twice (line {node.lineno})"
    for name in sorted(names_read(node) & set(names)):
        return (
            f"{source}: line {node.lineno}: {name} is read at the top level, where "
            "importing the module could change it through what was read"
        )
    return None


def parse_module(source_text: str | bytes, source: str) -> ast.Module:
    """The module's syntax tree (never run). Raises FloorMapError: it does not parse."""
    try:
        return ast.parse(source_text, filename=source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc) or type(exc).__name__
        raise FloorMapError(f"{source}: floor map module does not parse: {reason}") from exc


def module_literals(
    source_text: str | bytes,
    source: str,
    *,
    names: tuple[str, ...] = _NAMES,
    annotations: Mapping[str, str] = ANNOTATIONS,
    evaluate: Callable[[str, ast.expr], object] | None = None,
    tree: ast.Module | None = None,
    lines: dict[str, tuple[int, int]] | None = None,
) -> dict[str, object]:
    """Every name a module's top level assigns a floor-map field (``names``: by default
    FLOOR_MAP_VERSION, FLOOR_MAP_HASH, FLOOR_MAP_ENTRIES), with its literal value (read by
    ``evaluate`` when given, else ``ast.literal_eval``); the file is parsed, never run.
    ``lines`` receives each name's first and last line. Raises FloorMapError: it does not
    parse, a name is assigned twice or not a literal, or is annotated otherwise than
    ``annotations`` (the layout's template) says."""
    if tree is None:
        tree = parse_module(source_text, source)
    values: dict[str, object] = {}
    for node in tree.body:
        target: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        # Any other binding of a field's name (``|=``, ``:=``, a for or import target, ...)
        # changes what the module holds when imported: refused as a second assignment.
        skip = target if isinstance(target, ast.Name) else None
        problem = top_level_problem(node, names, source, skip=skip)
        if problem is not None:
            raise FloorMapError(problem)
        if isinstance(target, ast.Name) and target.id in names:
            if target.id in values:
                raise FloorMapError(f"{source}: {target.id} is assigned twice (line {node.lineno})")
            if isinstance(node, ast.AnnAssign):
                written = repr(ast.unparse(node.annotation))
                if not node.simple:  # ("(NAME): int = 1", which no template writes)
                    written = "on the name in parentheses"
                if written != repr(annotations.get(target.id)):
                    raise FloorMapError(
                        f"{source}: line {node.lineno}: the annotation of {target.id} is "
                        f"{written}, which runs when the module is imported; a floor-map "
                        f"block annotates it as {annotations.get(target.id)!r} or not at all"
                    )
            if lines is not None:
                lines[target.id] = (node.lineno, node.end_lineno or node.lineno)
            if evaluate is not None:
                values[target.id] = evaluate(target.id, value)
                continue
            try:
                values[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, RecursionError) as exc:
                raise FloorMapError(f"{source}: {target.id} is not a literal") from exc
            twice = _key_twice(value)
            if twice is not None:
                # (Python keeps the last of two equal keys, a reader of the file may take
                # the first: what is in force would not be what is read)
                raise FloorMapError(
                    f"{source}: {target.id} states the key {twice[0]!r} twice (line {twice[1]})"
                )
    return values


def _key_twice(literal: ast.expr) -> tuple[object, int] | None:
    """A key that a dict display in ``literal`` (evaluated: its keys are constants) states
    twice, with its line; None when every key is stated once."""
    for node in ast.walk(literal):
        if isinstance(node, ast.Dict):
            seen: set[object] = set()
            for key in node.keys:
                if not isinstance(key, ast.Constant):
                    continue  # (no floor map has such a key: its checks refuse it)
                if key.value in seen:
                    return key.value, key.lineno
                seen.add(key.value)
    return None


def entry_lines(source_text: str | bytes, source: str) -> dict[str, int]:
    """The line (1-based) of each adapter's key in the module's FLOOR_MAP_ENTRIES literal,
    for reports that point at an adapter's entry. Raises FloorMapError: it does not parse."""
    try:
        tree = ast.parse(source_text, filename=source)
    except (SyntaxError, ValueError) as exc:
        raise FloorMapError(f"{source}: floor map module does not parse") from exc
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "FLOOR_MAP_ENTRIES":
            if not isinstance(value, ast.Dict):
                return {}
            return {
                key.value: key.lineno
                for key in value.keys
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
    return {}


def parse_map_module(source_text: str, source: str) -> ActiveMap:
    """Extract and check the floor map from a module's text. Raises FloorMapError."""
    values = module_literals(source_text, source)
    missing = [name for name in _NAMES if name not in values]
    if missing:
        raise FloorMapError(
            f"{source}: no floor map ({', '.join(missing)} missing); run floorctl refresh --write"
        )
    version, stated, entries = (values[name] for name in _NAMES)
    if not is_map_version(version):
        raise FloorMapError(f"{source}: FLOOR_MAP_VERSION is not {MAP_VERSION_FORM}")
    if not isinstance(stated, str) or not isinstance(entries, dict):
        raise FloorMapError(f"{source}: FLOOR_MAP_HASH or FLOOR_MAP_ENTRIES has the wrong type")
    try:
        floor_map = from_entries(entries)
    except FloorMapError as exc:
        raise FloorMapError(f"{source}: {exc}") from exc  # name the module at fault
    actual = floor_map_hash(floor_map)
    if actual != stated:
        raise FloorMapError(
            f"{source}: floor map tampered: it states {stated} but its data hashes to {actual}"
        )
    return ActiveMap(floor_map, stated, version, source)


def load_map_file(path: Path, parse: Callable[[str, str], ActiveMap] | None = None) -> ActiveMap:
    """The checked floor map of ``path`` (read by ``parse``, by default
    ``parse_map_module``), re-parsed only when the file changed."""
    reader = parse_map_module if parse is None else parse
    try:
        # The common case on the spawn path: the file has not changed since it was read.
        seen = os.stat(path)
        with _cache_lock:
            unchanged = _cache.get(
                (reader, str(path), seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns,
                 seen.st_ctime_ns)
            )  # fmt: skip
    except OSError as exc:
        raise FloorMapError(f"{path}: cannot read the floor map: {exc.strerror or exc}") from exc
    if unchanged is not None:
        return unchanged
    try:
        # Never blocks on a FIFO or device; the identity is the open file's, so what is
        # cached is what was read.
        data, stat = read_regular_stat(path, max_bytes=MAX_MAP_FILE_BYTES, what="floor map")
    except UnreadableFileError as exc:
        raise FloorMapError(str(exc)) from exc
    # ctime too: an in-place edit that puts the mtime back still changes it.
    key = (reader, str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns,
           stat.st_ctime_ns)  # fmt: skip
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FloorMapError(f"{path}: floor map module is not UTF-8") from exc
    active = reader(text, str(path))
    with _cache_lock:
        # Only the newest identity of each file is worth keeping; when too many files
        # were seen, none of the older ones.
        for old in [k for k in _cache if k[:2] == key[:2] or len(_cache) >= _CACHE_LIMIT]:
            del _cache[old]
        _cache[key] = active
    return active


def current(floor_map: object = None) -> ActiveMap:
    """The floor map in force now. Raises FloorMapError when it cannot be trusted.

    ``floor_map``, a host's own imported floor-map module, is the map in force when given;
    else ``FLOORGUARD_FLOOR_MAP`` naming a module file makes that module the map in force
    (see ``host_map``: either is checked against its stated hash and this host's rollback
    state, and any failure is an error, never a fallback). Only a value ending in ``.json``
    names a published map, which replaces the built-in one if it passes every check (see
    ``published_map``); otherwise the built-in map stays and stderr says why. Any other
    value is taken for a module: a misspelt one (a trailing space, a folder, ``.PY``) is
    refused, never read as a published map that falls back. A built-in map that cannot be
    trusted is an error either way.
    """
    named = os.environ.get("FLOORGUARD_FLOOR_MAP")
    if floor_map is not None or (named and not named.endswith(".json")):
        from floorguard._maps import host_map

        return host_map.in_force(floor_map, os.environ)
    builtin = load_map_file(BUILTIN_MAP_FILE)
    if not named:
        return builtin
    from floorguard._maps import published_map

    return published_map.select(builtin, os.environ)
