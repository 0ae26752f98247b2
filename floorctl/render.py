"""Rendering the floor-map block from a template, and reading a block back as data.

The block is data only. Values reach a template already written as Python literals
(:func:`py_literal`), so feed text is never template or code text. Every rendered block
then passes the same gate a block read from disk does (:func:`read_block`): it is parsed
with :mod:`ast`, never imported or executed, and refused unless it holds exactly the
assignments of literals one of the known layouts names, reading back to exactly the data
that was rendered. A custom template given by path is held to the same gate. A large
block is parsed in pieces that provably read as one parse of it does (memory stays bounded).
"""

from __future__ import annotations

import ast
import importlib.resources
import io
import os
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorctl.bulk import cyclic_gc_paused
from floorctl.errors import ModuleError, RenderError
from floorctl.splice import BEGIN, END, SplitModule, split_lines, split_module
from floorguard._base._canonical import content_address
from floorguard._base.files import read_regular
from floorguard._maps import host_map
from floorguard._maps.map_model import (
    ENTRY_FIELDS,
    EXTENDED_FIELDS,
    FloorMap,
    from_entries,
    to_entries,
)
from floorguard.errors import FloorguardError, UnreadableFileError

if TYPE_CHECKING:
    import jinja2

FLOORGUARD = host_map.FLOORGUARD.name
BERNSTEIN = host_map.BERNSTEIN.name
TEMPLATE_NAMES = (FLOORGUARD, BERNSTEIN)

Entries = dict[str, dict[str, Any]]

MAX_TEMPLATE_BYTES = 1024 * 1024  # a template is a few KiB


@dataclass(frozen=True)
class Layout:
    """The names a layout assigns in the block, and the annotations each may carry."""

    name: str
    entries_name: str
    hash_name: str
    version_name: str
    # Entries as nested dict literals ("dict") or as AdapterAdvisory(...) calls ("call").
    entry_style: str
    # A host file in this layout may hold only the entries (no hash, no version) until
    # floorctl first renders into it.
    hash_optional: bool
    # Allowed annotation per name, as ast.unparse writes it. An annotation is evaluated
    # when the module runs, so it is checked like any other expression.
    annotations: Mapping[str, frozenset[str]]

    @property
    def names(self) -> frozenset[str]:
        return frozenset({self.entries_name, self.hash_name, self.version_name})


def _layout(
    names: host_map.Layout, *, entry_style: str, hash_optional: bool, entries_type: str
) -> Layout:
    """A layout the runtime reads (its names are the runtime's, ``host_map``), as rendered."""
    return Layout(
        name=names.name,
        entries_name=names.entries_name,
        hash_name=names.hash_name,
        version_name=names.version_name,
        entry_style=entry_style,
        hash_optional=hash_optional,
        annotations={
            names.entries_name: frozenset({entries_type}),
            names.hash_name: frozenset({"str"}),
            names.version_name: frozenset({"int"}),
        },
    )


FLOORGUARD_LAYOUT = _layout(
    host_map.FLOORGUARD,
    entry_style="dict",
    hash_optional=False,
    entries_type="dict[str, dict[str, str]]",
)
BERNSTEIN_LAYOUT = _layout(
    host_map.BERNSTEIN,
    entry_style="call",
    hash_optional=True,
    entries_type="dict[str, AdapterAdvisory]",
)
LAYOUTS: Mapping[str, Layout] = {FLOORGUARD: FLOORGUARD_LAYOUT, BERNSTEIN: BERNSTEIN_LAYOUT}

_FLOOR_KEYS = frozenset(ENTRY_FIELDS)
_ADVISORY_CALL = "AdapterAdvisory"
_CALL_KEYWORDS = frozenset({"adapter", *ENTRY_FIELDS})

# PEP 263: a comment like this in the first two lines of a file changes how Python decodes
# it. The block can sit on line 2, so a hand-edited one could re-decode the whole module.
_CODING_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


@dataclass(frozen=True)
class BlockData:
    """What a block states: its entries, its hash (None if it states none) and its version.

    ``layout`` is the layout the block is written in, None for an empty block.
    """

    entries: Entries
    stated_hash: str | None
    map_version: int
    layout: str | None


@dataclass(frozen=True)
class Template:
    """A jinja2 template of the block.

    ``layout`` is the layout a built-in template must produce; None for a template read
    from a path, which may produce either and is rendered in jinja2's sandbox.
    """

    name: str
    source: str
    layout: str | None


@dataclass(frozen=True)
class LiteralEntry:
    """One adapter's fields, each already written as a Python literal.

    A floor-only entry has the three floor fields as string literals. An extended entry
    (``extended``) has ``fields`` instead: (key literal, value literal) pairs, nested values
    written by :func:`py_data`; a template prints them as they are.
    """

    adapter: str
    min_safe_version: str | None
    advisory_id: str | None
    note: str | None
    extended: bool = False
    fields: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    if ch in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def py_literal(value: str | int) -> str:
    """``value`` as Python source: a double-quoted string literal, or a decimal int.

    Printable characters other than ``"`` and ``\\`` are kept as they are; everything
    else (line breaks, NUL, control and format characters, U+2028...) is escaped, so the
    literal is always one line and evaluates back to exactly ``value``. Raises RenderError
    for a bool, a negative int or another type.
    """
    if type(value) is str and value.isprintable():  # the common case, at C speed
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RenderError(f"cannot write {type(value).__name__} as a floor-map literal")
    if isinstance(value, int):
        if value < 0:
            raise RenderError(f"cannot write negative number {value} as a floor-map literal")
        return str(value)
    if value.isprintable():  # a str subclass
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return '"' + "".join(_escape_char(ch) for ch in value) + '"'


# A container whose one-line form is at most this long is written on one line.
_ONE_LINE = 72


def py_data(value: Any, indent: int = 0) -> str:
    """Nested dicts (string keys), lists, strings and ints as a Python literal.

    Every string and int goes through :func:`py_literal`; the brackets, colons and commas
    around them are this function's own, so no value can add syntax. Small containers of
    scalars take one line; others one item per line, indented from ``indent``. Raises
    RenderError for any other type.
    """
    if isinstance(value, dict):
        items = [(py_literal(_key(k)), v) for k, v in value.items()]
        if not items:
            return "{}"
        if all(isinstance(v, str | int) for _, v in items):
            line = "{" + ", ".join(f"{k}: {py_literal(v)}" for k, v in items) + "}"
            if len(line) <= _ONE_LINE:
                return line
        pad = " " * (indent + 4)
        body = "".join(f"{pad}{k}: {py_data(v, indent + 4)},\n" for k, v in items)
        return "{\n" + body + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(isinstance(v, str | int) for v in value):
            line = "[" + ", ".join(py_literal(v) for v in value) + "]"
            if len(line) <= _ONE_LINE:
                return line
        pad = " " * (indent + 4)
        body = "".join(f"{pad}{py_data(v, indent + 4)},\n" for v in value)
        return "[\n" + body + " " * indent + "]"
    return py_literal(value)


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise RenderError(f"cannot write a {type(key).__name__} key as a floor-map literal")
    return key


# ---------------------------------------------------------------------------------------
# Reading a block back (ast only)
# ---------------------------------------------------------------------------------------


class _NotData(Exception):
    def __init__(self, node: ast.AST | None, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


def _str(node: ast.expr, what: str) -> str:
    if isinstance(node, ast.Constant) and type(node.value) is str:
        return node.value
    raise _NotData(node, f"{what} is not a string literal")


def _version(node: ast.expr, what: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
        return node.value
    raise _NotData(node, f"{what} is not a non-negative integer literal")


def _dict_items(node: ast.expr, what: str) -> list[tuple[str, ast.expr]]:
    if not isinstance(node, ast.Dict):
        raise _NotData(node, f"{what} is not a dict literal")
    items: list[tuple[str, ast.expr]] = []
    seen: set[str] = set()
    for key_node, value_node in zip(node.keys, node.values, strict=True):
        if key_node is None:
            raise _NotData(value_node, f"{what} unpacks another mapping (**)")
        if isinstance(key_node, ast.Constant) and type(key_node.value) is str:
            key = key_node.value  # _str's check, without making its message
        else:
            key = _str(key_node, f"a key of {what}")
        if key in seen:
            raise _NotData(key_node, f"{what} has the key {key!r} twice")
        seen.add(key)
        items.append((key, value_node))
    return items


# An extended entry nests: entry > advisories > advisory > affected > range. Deeper is not data.
_MAX_DEPTH = 6


def _literal(node: ast.expr, what: str, depth: int) -> Any:
    """A nested literal of dicts with string keys, lists and strings; nothing else."""
    if depth > _MAX_DEPTH:
        raise _NotData(node, f"{what} nests deeper than a floor-map entry does")
    if isinstance(node, ast.Dict):
        return {key: _literal(value, what, depth + 1) for key, value in _dict_items(node, what)}
    if isinstance(node, ast.List):
        return [_literal(item, what, depth + 1) for item in node.elts]
    return _str(node, f"a value in {what}")


def _dict_entry(adapter: str, node: ast.expr) -> dict[str, Any]:
    floor = _floor_entry(node)
    if floor is not None:
        return floor
    what = f"the entry of {adapter!r}"
    fields = dict(_dict_items(node, what))
    if fields.keys() == _FLOOR_KEYS:
        return {name: _str(fields[name], f"{name} of {adapter!r}") for name in ENTRY_FIELDS}
    if not set(fields) & set(EXTENDED_FIELDS):
        raise _NotData(node, f"{what} must have exactly the keys {', '.join(ENTRY_FIELDS)}")
    unknown = set(fields) - set(ENTRY_FIELDS) - set(EXTENDED_FIELDS)
    if unknown:
        raise _NotData(node, f"{what} has the unknown key {sorted(unknown)[0]!r}")
    # Only literals here; the shape of the data is the model's to check (from_entries), as
    # every reader of a block does before using or hashing it.
    return {key: _literal(value, what, 1) for key, value in fields.items()}


def _floor_entry(node: ast.expr) -> dict[str, str] | None:
    """The entry a dict literal of exactly the three floor fields, each a string literal,
    reads as (what ``_dict_entry`` makes of it, without making the messages it would need
    for anything else); None for any other node."""
    if not isinstance(node, ast.Dict) or len(node.keys) != len(ENTRY_FIELDS):
        return None
    fields: dict[str, str] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not (
            isinstance(key, ast.Constant)
            and type(key.value) is str
            and isinstance(value, ast.Constant)
            and type(value.value) is str
        ):
            return None
        fields[key.value] = value.value
    if fields.keys() != _FLOOR_KEYS:  # a key twice, or another key
        return None
    return {name: fields[name] for name in ENTRY_FIELDS}


def _call_entry(adapter: str, node: ast.expr) -> dict[str, str]:
    what = f"the entry of {adapter!r}"
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == _ADVISORY_CALL
    ):
        raise _NotData(node, f"{what} is not an {_ADVISORY_CALL}(...) of keyword literals")
    if node.args:
        raise _NotData(node, f"{what} passes positional arguments")
    kwargs: dict[str, str] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise _NotData(keyword.value, f"{what} unpacks a mapping (**)")
        if keyword.arg in kwargs:
            raise _NotData(keyword.value, f"{what} passes {keyword.arg} twice")
        kwargs[keyword.arg] = _str(keyword.value, f"{keyword.arg} of {adapter!r}")
    if set(kwargs) != _CALL_KEYWORDS:
        raise _NotData(node, f"{what} must pass exactly {', '.join(sorted(_CALL_KEYWORDS))}")
    if kwargs["adapter"] != adapter:
        raise _NotData(node, f"{what} names another adapter ({kwargs['adapter']!r})")
    return {name: kwargs[name] for name in ENTRY_FIELDS}


def _entries(layout: Layout, node: ast.expr) -> Entries:
    read_entry = _dict_entry if layout.entry_style == "dict" else _call_entry
    items = _dict_items(node, layout.entries_name)
    return {adapter: read_entry(adapter, value) for adapter, value in sorted(items)}


def _assignment(stmt: ast.stmt) -> tuple[str, ast.expr, ast.expr | None]:
    """(name, value, annotation) of a plain ``NAME = value`` or ``NAME: T = value``."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id, stmt.value, None
    if (
        isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and stmt.simple
        and stmt.value is not None
    ):
        return stmt.target.id, stmt.value, stmt.annotation
    raise _NotData(stmt, "not an assignment of a literal to a name")


def _layout_of(names: Mapping[str, ast.stmt]) -> Layout:
    for layout in LAYOUTS.values():
        if layout.entries_name in names:
            break
    else:
        first = next(iter(names.values()))
        raise _NotData(first, "no floor-map entries assigned (unknown layout)")
    for name, stmt in names.items():
        if name not in layout.names:
            raise _NotData(stmt, f"unexpected assignment to {name} in the {layout.name} layout")
    stated = {layout.hash_name, layout.version_name} & set(names)
    if stated != {layout.hash_name, layout.version_name} and (stated or not layout.hash_optional):
        missing = sorted({layout.hash_name, layout.version_name} - stated)
        raise _NotData(names[layout.entries_name], f"{' and '.join(missing)} not assigned")
    return layout


def _check_cookies(block: str, first_line: int) -> None:
    if "coding" not in block:  # no line can be a declaration
        return
    for number, line in enumerate(split_lines(block), start=first_line):
        if _CODING_COOKIE.match(line):
            raise _NotData(ast.Pass(lineno=number), "a source-encoding declaration")


def _read_statements(body: list[ast.stmt], cut: _Cut | None = None) -> BlockData:
    if not body:
        return BlockData(entries={}, stated_hash=None, map_version=0, layout=None)
    names: dict[str, ast.stmt] = {}
    values: dict[str, ast.expr] = {}
    annotations: dict[str, ast.expr] = {}
    for stmt in body:
        name, value, annotation = _assignment(stmt)
        if name in names:
            raise _NotData(stmt, f"{name} is assigned twice")
        names[name] = stmt
        values[name] = value
        if annotation is not None:
            annotations[name] = annotation
    layout = _layout_of(names)
    for name, annotation in annotations.items():
        if ast.unparse(annotation) not in layout.annotations[name]:
            raise _NotData(annotation, f"unexpected annotation on {name}")

    node = values[layout.entries_name]
    entries = _entries(layout, node) if cut is None else _cut_entries(layout, node, cut)
    stated_hash = None
    version = 0
    if layout.hash_name in values:
        stated_hash = _str(values[layout.hash_name], layout.hash_name)
        version = _version(values[layout.version_name], layout.version_name)
    return BlockData(entries, stated_hash, version, layout.name)


_PARSE_FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError)


# --- Reading a large block in pieces ---------------------------------------------------------
#
# ast.parse of a 100,000-adapter block holds some 800 MB of syntax tree at once. A block of
# the shape floorctl renders (``NAME ... = {`` on one line, the entries, ``}`` alone on a
# line) is read instead as: the text with the entries' lines blanked (same line numbers),
# parsed whole, plus the entries' lines in pieces of about _CHUNK_CHARS, each parsed on its
# own inside ``{`` and ``}``. That reads exactly what one ast.parse reads: the blanked
# parse shows the ``{`` opens a dict display that the ``}`` line closes, and the tokenizer
# starts every piece in the state a piece parsed inside ``{``...``}`` starts in (inside one
# brace, at a line start, in no string) and ends it there again, or the piece could not
# parse as one dict display; each piece but the last ends with its items' comma, so the
# pieces' items, joined, are the dict's items. Anything else (a piece that does not parse,
# a duplicate key, any other problem) is read the plain way, whose answer and messages are
# authoritative: the pieces only ever stand in for a plain reading that succeeds.

# About this many characters per piece (some 4,000 entries): a few MB of syntax tree.
_CHUNK_CHARS = 512 * 1024
_OPENER = re.compile(
    "^(?:" + "|".join(layout.entries_name for layout in LAYOUTS.values()) + r")[^\n]*\{\n",
    re.MULTILINE,
)


class _NotLean(Exception):
    """The block cannot be read in pieces: read it the plain way."""


@dataclass(frozen=True)
class _Piece:
    """Whole lines of the entries, ``source[start:end]``; ``lines`` of them."""

    start: int
    end: int
    lines: int
    last_line: str


@dataclass(frozen=True)
class _Cut:
    """A text with the lines of its entries' dict blanked, and those lines in pieces.

    ``open_line`` and ``close_line`` are the 1-based numbers of the ``NAME ... = {`` line
    and the ``}`` line; ``brace_col`` the UTF-8 offset of the ``{``."""

    source: str
    text: str
    open_line: int
    close_line: int
    brace_col: int
    pieces: tuple[_Piece, ...]


def _cut(source: str, start: int, stop: int) -> _Cut | None:
    """The cut of ``source`` whose entries' dict lies between the offsets ``start`` and
    ``stop`` (each at a line start), or None when there is no block of floorctl's shape."""
    opener = _OPENER.search(source, start, stop)
    if opener is None:
        return None
    body = opener.end()
    # The "}" line: the first one after the opener, within the block.
    newline = source.find("\n}\n", body - 1, stop)
    if newline < body:  # none, or right after the opener (an empty dict)
        return None
    close = newline + 1
    pieces: list[_Piece] = []
    first = body
    while first < close:
        # A piece ends before the line of an item's key (indented by 4), or at the "}".
        cut = source.find('\n    "', first + _CHUNK_CHARS - 1, close)
        end = close if cut < 0 else cut + 1
        last_start = source.rfind("\n", first, end - 1) + 1
        pieces.append(
            _Piece(first, end, source.count("\n", first, end), source[max(first, last_start) : end])
        )
        first = end
    blanked = source.count("\n", body, close)
    open_line = source.count("\n", 0, opener.start()) + 1
    return _Cut(
        source=source,
        text=source[:body] + "\n" * blanked + source[close:],
        open_line=open_line,
        close_line=open_line + blanked + 1,
        brace_col=len(opener.group().encode("utf-8")) - 2,
        pieces=tuple(pieces),
    )


def _cut_entries(layout: Layout, node: ast.expr, cut: _Cut) -> Entries:
    """The entries of a cut block, read piece by piece. Raises _NotLean (read it plainly)."""
    if not (
        isinstance(node, ast.Dict)
        and not node.keys
        and (node.lineno, node.col_offset) == (cut.open_line, cut.brace_col)
        and (node.end_lineno, node.end_col_offset) == (cut.close_line, 1)
    ):
        raise _NotLean
    read_entry = _dict_entry if layout.entry_style == "dict" else _call_entry
    entries: list[tuple[str, Any]] = []
    seen: set[str] = set()
    last = len(cut.pieces) - 1
    for number, piece in enumerate(cut.pieces):
        try:
            text = cut.source[piece.start : piece.end]
            tree = ast.parse("{\n" + text + "}", mode="eval")
            body = tree.body
            if not isinstance(body, ast.Dict):
                raise _NotLean
            items = _dict_items(body, layout.entries_name)
            if items and number < last and not _ends_with_comma(body.values[-1], piece):
                raise _NotLean
            for adapter, value in items:
                if adapter in seen:
                    raise _NotLean
                seen.add(adapter)
                entries.append((adapter, read_entry(adapter, value)))
        except (_NotData, *_PARSE_FAILURES):
            raise _NotLean from None
    entries.sort(key=lambda item: item[0])
    return dict(entries)


def _ends_with_comma(value: ast.expr, piece: _Piece) -> bool:
    """The piece's last item is followed by exactly a comma and the end of its last line."""
    # Line 1 of the parsed text is the added "{": the piece's lines start at line 2.
    on_last_line = value.end_lineno == piece.lines + 1
    rest = piece.last_line.encode("utf-8")[value.end_col_offset or 0 :]
    return on_last_line and rest == b",\n"


def _read_cut(cut: _Cut, body: list[ast.stmt]) -> BlockData | None:
    try:
        return _read_statements(body, cut)
    except (_NotData, _NotLean):
        return None


def _not_data(source: str, exc: _NotData, offset: int) -> ModuleError:
    line = getattr(exc.node, "lineno", 1) + offset
    return ModuleError(
        f"{source}: floor-map block holds something other than data: line {line}: {exc.reason}"
    )


def read_block(block: str, source: str, *, first_line: int = 1) -> BlockData:
    """The data a block states, read with :mod:`ast` only (never imported or executed).

    ``first_line`` is the block's line number in its module, for messages. An empty block
    (or one holding only comments) states no entries, no hash and version 0. Raises
    ModuleError ("block holds something other than data: line N") for anything but the
    literal assignments of one known layout.
    """
    read = _read_block_in_pieces(block)
    return read if read is not None else _read_block_plain(block, source, first_line=first_line)


def _read_block_plain(block: str, source: str, *, first_line: int = 1) -> BlockData:
    """``read_block`` with one ast.parse of the whole block: the reading that decides."""
    try:
        _check_cookies(block, 1)
        with cyclic_gc_paused():
            try:
                tree = ast.parse(block)
            except _PARSE_FAILURES as exc:
                at = getattr(exc, "lineno", None) or 1
                reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
                raise _NotData(ast.Pass(lineno=at), f"not valid Python ({reason})") from None
            return _read_statements(tree.body)
    except _NotData as exc:
        raise _not_data(source, exc, first_line - 1) from None


def _read_block_in_pieces(block: str) -> BlockData | None:
    """``read_block``'s answer, the entries read in pieces; None: read it the plain way."""
    cut = _cut(block, 0, len(block))
    if cut is None:
        return None
    try:
        _check_cookies(block, 1)
        with cyclic_gc_paused():
            tree = ast.parse(cut.text)
            return _read_cut(cut, tree.body)
    except (_NotData, *_PARSE_FAILURES):
        return None


def detect_layout(block: str, source: str = "<block>") -> str | None:
    """The layout a block is written in (``floorguard`` or ``bernstein``); None if empty.

    Raises ModuleError as :func:`read_block` does.
    """
    return read_block(block, source).layout


def _require_utf8_declaration(text: str, source: str) -> None:
    # The module is read as UTF-8; if its own coding declaration told Python otherwise, the
    # interpreter would load other strings than the ones checked and hashed here.
    head = "".join(split_lines(text)[:2]).encode("utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(head).readline)
    except SyntaxError as exc:
        raise ModuleError(
            f"{source}: floor-map module has a bad coding declaration: {exc}"
        ) from None
    if encoding not in ("utf-8", "utf-8-sig"):
        raise ModuleError(
            f"{source}: floor-map module declares encoding {encoding}; it must be UTF-8"
        )


def read_module(text: str, source: str) -> tuple[SplitModule, BlockData]:
    """Split a module at its markers and read its block, checking it is at module level.

    The whole module is parsed (never run) and the block is read from the top-level
    statements on its lines, so it is read as Python will read it; a statement reaching
    across a marker (the block wrapped in a call or a string by the text around it) is
    refused. Raises ModuleError.
    """
    split = split_module(text, source)
    _require_utf8_declaration(text, source)
    first = split.block_line - 1  # the begin marker's line
    last = first + len(split_lines(split.block)) + 1  # the end marker's line
    read = _read_module_in_pieces(text, split, first, last)
    if read is None:
        read = _read_module_plain(text, split, source, first, last)
    return split, read


def _read_module_plain(
    text: str, split: SplitModule, source: str, first: int, last: int
) -> BlockData:
    """``read_module``'s reading with one ast.parse of the whole module: the one that decides."""
    try:
        with cyclic_gc_paused():
            tree = ast.parse(text)
    except _PARSE_FAILURES as exc:
        # Blame the block if it is the block that does not parse.
        read_block(split.block, source, first_line=split.block_line)
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise ModuleError(f"{source}: floor-map module is not valid Python{where}") from None
    inside: list[ast.stmt] = []
    for stmt in tree.body:
        end = stmt.end_lineno or stmt.lineno
        if end < first or stmt.lineno > last:
            continue
        if stmt.lineno <= first or end >= last:
            raise ModuleError(
                f"{source}: the floor-map markers (lines {first}, {last}) lie inside a "
                f"statement (lines {stmt.lineno}-{end}): the block is not at module level"
            )
        inside.append(stmt)
    try:
        _check_cookies(split.block, split.block_line)
        with cyclic_gc_paused():
            data = _read_statements(inside)
    except _NotData as exc:
        raise _not_data(source, exc, 0) from None
    return data


def _read_module_in_pieces(
    text: str, split: SplitModule, first: int, last: int
) -> BlockData | None:
    """``read_module``'s reading of the block between the marker lines ``first`` and
    ``last`` (1-based), the entries read in pieces; None: read it the plain way."""
    block_start = len(split.before) + len(split.begin_line)
    cut = _cut(text, block_start, block_start + len(split.block))
    if cut is None:
        return None
    try:
        _check_cookies(split.block, split.block_line)
        with cyclic_gc_paused():
            tree = ast.parse(cut.text)
    except (_NotData, *_PARSE_FAILURES):
        return None
    inside: list[ast.stmt] = []
    for stmt in tree.body:
        end = stmt.end_lineno or stmt.lineno
        if end < first or stmt.lineno > last:
            continue
        if stmt.lineno <= first or end >= last:
            return None
        inside.append(stmt)
    with cyclic_gc_paused():
        return _read_cut(cut, inside)


# ---------------------------------------------------------------------------------------
# Templates and rendering
# ---------------------------------------------------------------------------------------


def is_template_path(name_or_path: str) -> bool:
    """Whether a --template value names a file (a path separator, or ending in ``.j2``)."""
    separators = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    return any(sep in name_or_path for sep in separators) or name_or_path.endswith(".j2")


def load_template(name_or_path: str) -> Template:
    """The template ``floorguard``, ``bernstein``, or one read from a path.

    A value with a path separator or ending in ``.j2`` is a path. Raises RenderError for
    an unknown name or an unreadable file.
    """
    if name_or_path in TEMPLATE_NAMES:
        resource = importlib.resources.files("floorctl._templates") / f"{name_or_path}.py.j2"
        return Template(name_or_path, resource.read_text(encoding="utf-8"), name_or_path)
    if not is_template_path(name_or_path):
        raise RenderError(
            f"unknown template {name_or_path!r}: use {' or '.join(TEMPLATE_NAMES)}, "
            "or a path to a .j2 file"
        )
    path = Path(name_or_path)
    try:
        source = read_regular(path, max_bytes=MAX_TEMPLATE_BYTES, what="template").decode("utf-8")
    except UnreadableFileError as exc:
        raise RenderError(str(exc)) from exc
    except UnicodeDecodeError:
        raise RenderError(f"{path}: template is not valid UTF-8") from None
    return Template(str(path), source, None)


def _environment(sandboxed: bool) -> jinja2.Environment:
    # Imported here: a module already up to date (refresh --check in CI) renders nothing.
    import jinja2  # noqa: PLC0415
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: PLC0415

    options: dict[str, Any] = {
        "autoescape": False,
        "undefined": jinja2.StrictUndefined,
        "keep_trailing_newline": True,
        # Block tags take whole lines, so templates read like the code they render.
        "trim_blocks": True,
        "lstrip_blocks": True,
    }
    # A template from a path runs in the sandbox, away from Python internals (the built-in
    # ones are our own code, and the sandbox costs seconds on a large map). Either way the
    # output is trusted only after the ast gate.
    if sandboxed:
        return ImmutableSandboxedEnvironment(**options)
    return jinja2.Environment(**options)  # noqa: S701 - Python source, not HTML


def _normalised(entries: Mapping[str, Any]) -> Entries:
    try:
        return to_entries(from_entries(entries))
    except FloorguardError as exc:
        raise RenderError(f"cannot render the floor map: {exc}") from exc


# The order keys of an extended entry are written in: the floor, then what extends it.
_EXTENDED_ORDER = (*sorted(ENTRY_FIELDS), *EXTENDED_FIELDS)


def _literal_entry(adapter: str, fields: Mapping[str, Any]) -> LiteralEntry:
    if fields.keys() == _FLOOR_KEYS:
        return LiteralEntry(
            adapter=py_literal(adapter),
            min_safe_version=py_literal(fields["min_safe_version"]),
            advisory_id=py_literal(fields["advisory_id"]),
            note=py_literal(fields["note"]),
        )
    floor = {name: py_literal(fields[name]) for name in ENTRY_FIELDS if name in fields}
    return LiteralEntry(
        adapter=py_literal(adapter),
        min_safe_version=floor.get("min_safe_version"),
        advisory_id=floor.get("advisory_id"),
        note=floor.get("note"),
        extended=True,
        fields=tuple(
            (py_literal(key), py_data(fields[key], indent=8))
            for key in _EXTENDED_ORDER
            if key in fields
        ),
    )


def render_block(
    template: Template,
    entries: Mapping[str, Mapping[str, Any]],
    *,
    map_version: int,
    map_hash: str | None = None,
) -> str:
    """The block's text (between the markers, ``\\n`` line endings) for ``entries``.

    ``map_hash`` defaults to the entries' floor-map hash and must equal it when given.
    The output must hold exactly one known layout's literal assignments (the template's
    own, for a built-in one) and read back to exactly ``entries``, ``map_hash`` and
    ``map_version``. Pure: nothing is written. Raises RenderError.
    """
    data = _normalised(entries)
    if isinstance(map_version, bool) or not isinstance(map_version, int) or map_version < 0:
        raise RenderError(f"map version must be a non-negative integer, not {map_version!r}")
    try:
        # ``data`` is already the model's plain form: its content address is the map hash.
        computed = content_address(data)
    except FloorguardError as exc:
        raise RenderError(f"cannot hash the floor map: {exc}") from exc
    if map_hash is None:
        map_hash = computed
    elif map_hash != computed:
        raise RenderError(f"stated hash {map_hash} is not the floor-map hash {computed}")
    return _render(template, data, map_hash=map_hash, map_version=map_version)


def render_floor_map(
    template: Template, floor_map: FloorMap, *, map_hash: str, map_version: int
) -> str:
    """``render_block`` of a floor map whose ``floor_map_hash`` is ``map_hash`` (the
    caller has it already: on a large map, normalising and hashing once more would cost
    what reading it did). A map's ``to_entries`` is already the normal form. Raises
    RenderError.
    """
    if isinstance(map_version, bool) or not isinstance(map_version, int) or map_version < 0:
        raise RenderError(f"map version must be a non-negative integer, not {map_version!r}")
    return _render(template, to_entries(floor_map), map_hash=map_hash, map_version=map_version)


def _render(template: Template, data: Entries, *, map_hash: str, map_version: int) -> str:
    extended = [adapter for adapter, fields in data.items() if fields.keys() != _FLOOR_KEYS]
    if extended and template.layout == BERNSTEIN:
        raise RenderError(
            f"the {BERNSTEIN} template holds floors only: {extended[0]!r} carries advisories "
            f"or waivers{f' (and {len(extended) - 1} more)' if len(extended) > 1 else ''}; "
            f"use the {FLOORGUARD} template"
        )
    literal_entries = [_literal_entry(adapter, fields) for adapter, fields in data.items()]
    origin = f"template {template.name}"
    try:
        compiled = _environment(template.layout is None).from_string(template.source)
        block = compiled.render(
            entries=literal_entries,
            map_hash=py_literal(map_hash),
            map_version=py_literal(map_version),
        )
    except Exception as exc:  # a template from a path may fail in any way: refuse, don't crash
        raise RenderError(f"{origin} failed to render: {exc}") from exc
    del literal_entries  # rendered: not held while the block is read back

    if "\r" in block:
        raise RenderError(f"{origin} produced a carriage return")
    # A marker line holds the marker: only then is there a line to look for.
    if BEGIN in block or END in block:
        for number, line in enumerate(split_lines(block), start=1):
            if line.strip() in (BEGIN, END):
                raise RenderError(f"{origin} produced a floor-map marker (line {number})")
    if block and not block.endswith("\n"):
        block += "\n"
    try:
        back = read_block(block, origin)
    except ModuleError as exc:
        raise RenderError(f"refused to render: {exc}") from None
    if back.layout is None:
        raise RenderError(f"{origin} produced no floor map")
    if template.layout is not None and back.layout != template.layout:
        raise RenderError(f"{origin} produced the {back.layout} layout, not {template.layout}")
    if (back.entries, back.stated_hash, back.map_version) != (data, map_hash, map_version):
        raise RenderError(f"{origin} produced a block that does not read back to its data")
    return block
