"""A host's own floor-map module (``floorctl init`` / ``refresh --write``) as the map in force.

A host names it from code (``preflight(..., floor_map=module)``, ``spawn(..., floor_map=)``)
or from the environment (``FLOORGUARD_FLOOR_MAP`` naming a module file). Either way the
file is read from disk at every call, parsed with ``ast`` and never run (a module named only
by the environment is never imported), exactly as the built-in map is:

- it must be a floor-map module: one ``# floor-map:begin`` and one ``# floor-map:end`` line,
  the map's names assigned between them and nowhere else at its top level, in the
  ``floorguard`` layout (``FLOOR_MAP_*`` literals) or the ``bernstein`` one
  (``ADAPTER_MIN_SAFE_VERSIONS`` of ``AdapterAdvisory(...)`` keyword literals, read as data);
- its data must hash to the hash it states (a block that states none is refused);
- it is kept under the per-host rollback state of published maps (``accepted_map``): a map
  older than one enforced on this host, or another map at the same version, is refused.

Any failure is a FloorMapError, so every spawn is refused: never a silent fallback to the
built-in map, which the host did not choose.
"""

from __future__ import annotations

import ast
import codecs
import io
import os
import tokenize
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from floorguard._base._text import is_text, own_characters
from floorguard._maps.active_map import (
    ANNOTATIONS,
    ActiveMap,
    load_map_file,
    module_literals,
    parse_module,
)
from floorguard._maps.map_model import (
    ENTRY_FIELDS,
    MAP_VERSION_FORM,
    floor_map_hash,
    from_entries,
    is_map_version,
)
from floorguard.errors import FloorMapError

ENV_MAP = "FLOORGUARD_FLOOR_MAP"
BEGIN = "# floor-map:begin"
END = "# floor-map:end"
_ADVISORY_CALL = "AdapterAdvisory"
_CALL_KEYWORDS = frozenset({"adapter", *ENTRY_FIELDS})


@dataclass(frozen=True)
class Layout:
    name: str
    entries_name: str
    hash_name: str
    version_name: str
    # The annotation the layout's template writes on each name (a block may carry that one
    # or none), as ast.unparse writes it.
    annotations: Mapping[str, str]

    @property
    def names(self) -> tuple[str, str, str]:
        return (self.version_name, self.hash_name, self.entries_name)


FLOORGUARD = Layout(
    "floorguard", "FLOOR_MAP_ENTRIES", "FLOOR_MAP_HASH", "FLOOR_MAP_VERSION", ANNOTATIONS
)
BERNSTEIN = Layout(
    "bernstein",
    "ADAPTER_MIN_SAFE_VERSIONS",
    "ADAPTER_FLOOR_MAP_HASH",
    "ADAPTER_FLOOR_MAP_VERSION",
    {
        "ADAPTER_MIN_SAFE_VERSIONS": f"dict[str, {_ADVISORY_CALL}]",
        "ADAPTER_FLOOR_MAP_HASH": "str",
        "ADAPTER_FLOOR_MAP_VERSION": "int",
    },
)
LAYOUTS = (FLOORGUARD, BERNSTEIN)


@dataclass(frozen=True)
class ModuleData:
    """What a module's block states: its layout, entries, stated hash (None: none) and
    version (0 when it states none)."""

    layout: Layout
    entries: dict[str, object]
    stated_hash: str | None
    map_version: int


def module_file(module: object) -> Path:
    """The source file of an imported floor-map module. Raises FloorMapError."""
    if not isinstance(module, ModuleType):
        raise FloorMapError(
            f"floor_map= takes an imported floor-map module, not {type(module).__name__}"
        )
    file = getattr(module, "__file__", None)
    # (read once, by its characters: a str subclass's methods do not choose the file)
    file = own_characters(file) if is_text(file) else None
    if file is None or not file.endswith(".py"):
        raise FloorMapError(
            f"module {module.__name__} is not a floor-map module: it has no .py source file "
            "for floorguard to check"
        )
    # The file its import loaded it from: a module made by hand, or one whose own code names
    # another file as its own, would have another file judged than the one it holds.
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    origin = own_characters(origin) if is_text(origin) else None
    if origin is None or os.path.normpath(origin) != os.path.normpath(file):
        raise FloorMapError(
            f"module {module.__name__} was not imported from {file}, the file it names as its "
            f"own (its import loaded it from {origin or 'no file'})"
        )
    return Path(file)


def _marker_lines(text: str, source: str) -> tuple[int, int]:
    """The 1-based lines of the one begin and one end marker. Lines end at ``\\n`` only, as
    Python's tokenizer (and floorctl) read them."""
    lines = text.split("\n")
    begins = [n for n, line in enumerate(lines, start=1) if line.strip() == BEGIN]
    ends = [n for n, line in enumerate(lines, start=1) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise FloorMapError(
            f"{source}: not a floor-map module: it needs one {BEGIN!r} line and, after it, one "
            f"{END!r} line (found {len(begins)} and {len(ends)}); create one with "
            "floorctl init --module PATH"
        )
    return begins[0], ends[0]


def require_utf8(text: str, source: str) -> None:
    """Refuses a module (its text, read as UTF-8) that Python would decode otherwise: by its
    coding declaration (any name of UTF-8 is UTF-8), or, starting with a byte order mark,
    as other characters than the ones read and hashed here. Raises FloorMapError."""
    if text.startswith("\ufeff"):
        raise FloorMapError(
            f"{source}: starts with a byte order mark (which Python skips); write it as UTF-8 "
            "without one"
        )
    head = "\n".join(text.split("\n")[:2]).encode("utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(head).readline)
    except SyntaxError as exc:
        raise FloorMapError(f"{source}: bad coding declaration: {exc}") from exc
    # (tokenize names a few spellings as written: utf8, u8; the codec is the same)
    if codecs.lookup(encoding).name not in ("utf-8", "utf-8-sig"):
        raise FloorMapError(f"{source}: declares encoding {encoding}; it must be UTF-8")


def _call_entry(source: str, adapter: object, node: ast.expr) -> dict[str, str]:
    """An ``AdapterAdvisory(adapter=..., min_safe_version=..., advisory_id=..., note=...)``
    of string literals, read as the entry it states (the call is never made)."""
    where = f"{source}: the entry of {adapter!r}"
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == _ADVISORY_CALL
        and not node.args
    ):
        raise FloorMapError(f"{where} is not an {_ADVISORY_CALL}(...) of keyword literals")
    fields: dict[str, str] = {}
    for keyword in node.keywords:
        value = keyword.value
        if keyword.arg is None or keyword.arg in fields:
            raise FloorMapError(f"{where} unpacks a mapping or passes an argument twice")
        if not (isinstance(value, ast.Constant) and type(value.value) is str):
            raise FloorMapError(f"{where}: {keyword.arg} is not a string literal")
        fields[keyword.arg] = value.value
    if set(fields) != _CALL_KEYWORDS or fields["adapter"] != adapter:
        raise FloorMapError(
            f"{where} must pass exactly {', '.join(sorted(_CALL_KEYWORDS))}, naming its adapter"
        )
    return {name: fields[name] for name in ENTRY_FIELDS}


def _bernstein_reader(source: str) -> Callable[[str, ast.expr], object]:
    def evaluate(name: str, node: ast.expr) -> object:
        if name != BERNSTEIN.entries_name:
            try:
                return ast.literal_eval(node)
            except (ValueError, TypeError, SyntaxError, RecursionError) as exc:
                raise FloorMapError(f"{source}: {name} is not a literal") from exc
        if not isinstance(node, ast.Dict) or any(key is None for key in node.keys):
            raise FloorMapError(f"{source}: {name} is not a dict literal")
        entries: dict[str, object] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and type(key.value) is str):
                raise FloorMapError(f"{source}: a key of {name} is not a string literal")
            if key.value in entries:
                raise FloorMapError(f"{source}: {name} has the key {key.value!r} twice")
            entries[key.value] = _call_entry(source, key.value, value)
        return entries

    return evaluate


def _only_the_maps_assignments(
    tree: ast.Module, layout: Layout, first: int, last: int, source: str
) -> None:
    """Refuses a statement between the markers (begin ``first``, end ``last``) that is not
    one of ``layout``'s names assigned, as floorctl reads a block: what it renders there is
    what a reader of the file takes for the map, and nothing else."""
    for node in tree.body:
        if (node.end_lineno or node.lineno) < first or node.lineno > last:
            continue
        target: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        if not (isinstance(target, ast.Name) and target.id in layout.names):
            raise FloorMapError(
                f"{source}: line {node.lineno}: the block holds something other than the map's "
                f"assignments ({', '.join(layout.names)}), which is all floorctl writes there"
            )


def read_module(text: str, source: str) -> ModuleData:
    """The data a floor-map module's block states, in either layout, read with ``ast``
    only. The stated hash is not checked here. Raises FloorMapError."""
    first, last = _marker_lines(text, source)
    require_utf8(text, source)
    tree = parse_module(text, source)
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    layouts = [layout for layout in LAYOUTS if layout.entries_name in assigned]
    if len(layouts) != 1:
        raise FloorMapError(
            f"{source}: not a floor-map module: "
            + ("it assigns the entries of both layouts" if layouts else "no floor-map entries "
               f"({FLOORGUARD.entries_name} or {BERNSTEIN.entries_name}) between the markers")
        )  # fmt: skip
    layout = layouts[0]
    _only_the_maps_assignments(tree, layout, first, last, source)
    lines: dict[str, tuple[int, int]] = {}
    values = module_literals(
        text,
        source,
        names=layout.names,
        annotations=layout.annotations,
        evaluate=_bernstein_reader(source) if layout is BERNSTEIN else None,
        tree=tree,
        lines=lines,
    )
    for name, (start, end) in lines.items():
        if start <= first or end >= last:
            raise FloorMapError(
                f"{source}: {name} (lines {start}-{end}) is not between the floor-map markers "
                f"(lines {first}, {last})"
            )
    entries = values[layout.entries_name]
    if not isinstance(entries, dict):
        raise FloorMapError(f"{source}: {layout.entries_name} is not a dict")
    stated, version = values.get(layout.hash_name), values.get(layout.version_name, 0)
    if (stated is None) != (layout.version_name not in values):
        raise FloorMapError(f"{source}: states one of {layout.hash_name} and "
                            f"{layout.version_name} without the other")  # fmt: skip
    if not is_map_version(version):
        raise FloorMapError(f"{source}: {layout.version_name} is not {MAP_VERSION_FORM}")
    if stated is not None and not isinstance(stated, str):
        raise FloorMapError(f"{source}: {layout.hash_name} is not a string")
    return ModuleData(layout, entries, stated, version)


def parse(text: str, source: str) -> ActiveMap:
    """The checked map of a host's floor-map module. Raises FloorMapError."""
    data = read_module(text, source)
    if data.stated_hash is None:
        raise FloorMapError(
            f"{source}: the block states no {data.layout.hash_name}, so its data cannot be "
            "checked; run floorctl refresh --write on it"
        )
    try:
        floor_map = from_entries(data.entries)
    except FloorMapError as exc:
        raise FloorMapError(f"{source}: {exc}") from exc
    actual = floor_map_hash(floor_map)
    if actual != data.stated_hash:
        raise FloorMapError(
            f"{source}: floor map tampered: it states {data.stated_hash} but its data hashes "
            f"to {actual}"
        )
    return ActiveMap(floor_map, actual, data.map_version, source)


def data_hash(text: str, source: str) -> str:
    """The hash of the data in a floor-map module of either layout (the hash it states is
    not trusted). Raises FloorMapError."""
    data = read_module(text, source)
    try:
        return floor_map_hash(from_entries(data.entries))
    except FloorMapError as exc:
        raise FloorMapError(f"{source}: {exc}") from exc


def in_force(floor_map: object, environ: Mapping[str, str]) -> ActiveMap:
    """The host's module as the map in force: ``floor_map`` (an imported module) when given,
    else the module file ``FLOORGUARD_FLOOR_MAP`` names. Checked against its stated hash
    and this host's record of the highest map enforced here, which it raises when newer.
    Raises FloorMapError naming the file."""
    from floorguard._maps import accepted_map

    if floor_map is not None:
        path, named = module_file(floor_map), "floor_map= module"
    else:
        value = environ.get(ENV_MAP, "")
        if value.endswith("/"):
            # (Path would drop the slash: the value names a folder, not a module file)
            raise FloorMapError(f"{ENV_MAP}: {value!r} ends in a slash: it names a folder, not "
                                "a module file")  # fmt: skip
        path, named = Path(value), ENV_MAP
    try:
        active = load_map_file(path, parse)
    except FloorMapError as exc:
        raise FloorMapError(f"{named}: {_naming(exc, path)}") from exc
    record = accepted_map.state_path(environ)
    try:
        highest = accepted_map.read(record)
        accepted_map.check(active.map_version, active.floor_map_hash, highest, record)
        if highest is None or active.map_version > highest.map_version:
            # Remembered before it is used: a map that cannot be remembered is not used.
            accepted_map.accept(record, active.map_version, active.floor_map_hash)
    except FloorMapError as exc:
        raise FloorMapError(f"{named}: {_naming(exc, path)}") from exc
    return active


def _naming(exc: FloorMapError, path: Path) -> str:
    text = str(exc)
    return text if str(path) in text else f"{path}: {text}"
