"""Reading a floor-map block back as data, the gate every block passes, rendered or read.

The block is data only. Values reach a template already written as Python literals
(:func:`py_literal`, in ``floorctl.render_literals``), so feed text is never template or code
text. Every rendered block (``floorctl.render_templates``) then passes the same gate a block
read from disk does (:func:`read_block`): it is parsed with :mod:`ast`, never imported or
executed, and refused unless it holds exactly the assignments of literals one of the known
layouts (``floorctl.render_layouts``) names, reading back to exactly the data that was
rendered. A custom template given by path is held to the same gate. A large block is parsed
in pieces that provably read as one parse of it does (memory stays bounded).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from floorctl.bulk import cyclic_gc_paused
from floorctl.errors import ModuleError
from floorctl.render_layouts import (
    _ADVISORY_CALL,
    _CALL_KEYWORDS,
    _CODING_COOKIE,
    _FLOOR_KEYS,
    BERNSTEIN,
    FLOORGUARD,
    LAYOUTS,
    TEMPLATE_NAMES,
    BlockData,
    Entries,
    Layout,
    Template,
)
from floorctl.render_literals import py_data, py_literal
from floorctl.render_templates import (
    is_template_path,
    load_template,
    render_block,
    render_floor_map,
    render_module,
)
from floorctl.splice import SplitModule, split_lines, split_module
from floorguard._maps import host_map
from floorguard._maps.active_map import top_level_problem
from floorguard._maps.host_map import LAYOUTS as READ_LAYOUTS
from floorguard._maps.map_model import (
    ENTRY_FIELDS,
    EXTENDED_FIELDS,
)
from floorguard.errors import FloorMapError

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


def _read_statements(
    body: list[ast.stmt],
    cut: _Cut | None = None,
    expected: Mapping[str, Mapping[str, Any]] | None = None,
) -> BlockData:
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
        written, allowed = ast.unparse(annotation), layout.annotations[name]
        if written != allowed:
            message = f"the annotation of {name} is {written!r}, not the template's {allowed!r}"
            raise _NotData(annotation, message)

    node = values[layout.entries_name]
    entries = _entries(layout, node) if cut is None else _cut_entries(layout, node, cut, expected)
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
# What Python's tokenizer ends a line with.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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


def _cut(source: str, start: int, stop: int, *, whole: bool = True) -> _Cut | None:
    """The cut of ``source`` whose entries' dict lies between the offsets ``start`` and
    ``stop`` (each at a line start), or None when there is no block of floorctl's shape.

    ``whole``: the cut's text is all of ``source`` (line numbers are the module's); else
    only ``source[start:stop]`` (a block inside a module's text, read as a block alone).
    """
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
    first_char, last_char = (0, len(source)) if whole else (start, stop)
    open_line = source.count("\n", first_char, opener.start()) + 1
    return _Cut(
        source=source,
        text=source[first_char:body] + "\n" * blanked + source[close:last_char],
        open_line=open_line,
        close_line=open_line + blanked + 1,
        brace_col=len(opener.group().encode("utf-8")) - 2,
        pieces=tuple(pieces),
    )


def _cut_entries(
    layout: Layout,
    node: ast.expr,
    cut: _Cut,
    expected: Mapping[str, Mapping[str, Any]] | None = None,
) -> Mapping[str, Mapping[str, Any]]:
    """The entries of a cut block, read piece by piece. Raises _NotLean (read it plainly).

    With ``expected``, each entry is compared with ``expected``'s as it is read and then
    dropped (a rendered block is checked without a second copy of its map): the answer is
    ``expected`` itself when the block states exactly those entries. Any difference
    raises _NotLean, so the plain reading decides what the block states.
    """
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
                entry = read_entry(adapter, value)
                if expected is None:
                    entries.append((adapter, entry))
                elif adapter not in expected or expected[adapter] != entry:
                    raise _NotLean
            # The piece's syntax tree (and its strings) go before the next is parsed.
            del tree, body, items
        except (_NotData, *_PARSE_FAILURES):
            raise _NotLean from None
    if expected is not None:
        if len(seen) != len(expected):
            raise _NotLean
        return expected
    entries.sort(key=lambda item: item[0])
    return dict(entries)


def _ends_with_comma(value: ast.expr, piece: _Piece) -> bool:
    """The piece's last item is followed by exactly a comma and the end of its last line."""
    # Line 1 of the parsed text is the added "{": the piece's lines start at line 2.
    on_last_line = value.end_lineno == piece.lines + 1
    rest = piece.last_line.encode("utf-8")[value.end_col_offset or 0 :]
    return on_last_line and rest == b",\n"


def _read_cut(
    cut: _Cut, body: list[ast.stmt], expected: Mapping[str, Mapping[str, Any]] | None = None
) -> BlockData | None:
    try:
        return _read_statements(body, cut, expected)
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


def read_block_expecting(
    text: str,
    source: str,
    expected: Mapping[str, Mapping[str, Any]],
    start: int = 0,
    stop: int | None = None,
) -> BlockData:
    """``read_block`` of the block ``text[start:stop]``, which should state the entries
    ``expected`` (one just rendered from them): the same reading and the same refusals, but
    a large block's entries are compared with ``expected`` as they are read instead of
    being kept, and the block is read where it lies in ``text`` (a module's), so the check
    holds no second copy of the map or of the text. The answer's entries are ``expected``
    itself when the block states exactly them, else what the block states. Raises
    ModuleError as :func:`read_block` does.
    """
    stop = len(text) if stop is None else stop
    read = _read_block_in_pieces(text, expected, start, stop)
    return read if read is not None else _read_block_plain(text[start:stop], source)


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


def _read_block_in_pieces(
    text: str,
    expected: Mapping[str, Mapping[str, Any]] | None = None,
    start: int = 0,
    stop: int | None = None,
) -> BlockData | None:
    """``read_block``'s answer for the block ``text[start:stop]``, the entries read in
    pieces; None: read it the plain way."""
    stop = len(text) if stop is None else stop
    cut = _cut(text, start, stop, whole=False)
    if cut is None:
        return None
    try:
        if text.find("coding", start, stop) >= 0:  # else no line can be a declaration
            _check_cookies(text[start:stop], 1)
        with cyclic_gc_paused():
            tree = ast.parse(cut.text)
            return _read_cut(cut, tree.body, expected)
    except (_NotData, *_PARSE_FAILURES):
        return None


def detect_layout(block: str, source: str = "<block>") -> str | None:
    """The layout a block is written in (``floorguard`` or ``bernstein``); None if empty.

    Raises ModuleError as :func:`read_block` does.
    """
    return read_block(block, source).layout


def _require_utf8_declaration(text: str, source: str) -> None:
    # The module is read as UTF-8; if its own coding declaration (or a byte order mark) told
    # Python otherwise, the interpreter would load other strings than the ones checked and
    # hashed here. The gate's own rule, so that both read one module alike.
    try:
        host_map.require_utf8(text, source)
    except FloorMapError as exc:
        raise ModuleError(str(exc)) from None


def outside_problem(split: SplitModule, source: str) -> str | None:
    """Why floorguard would refuse the module for a statement outside its block (one that
    binds a name of either layout's block again, reaches the module's namespace without
    naming what it binds, or reads one: importing the module would not give the block's
    data; active_map.top_level_problem), or None. Only the text around the block is parsed:
    read_module refused a statement reaching across a marker."""
    names = {name for layout in READ_LAYOUTS for name in layout.names}
    # The block's lines as empty ones, so a line named is the module's own line.
    blank = "\n" * len(_LINE_BREAK.findall(split.block))
    around = split.before + split.begin_line + blank + split.end_line + split.after
    try:
        tree = ast.parse(around)
    except _PARSE_FAILURES:
        return f"{source}: floor-map module is not valid Python"
    for statement in tree.body:
        problem = top_level_problem(statement, names, source)
        if problem is not None:
            return problem
    return None


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


# Used by other modules and tests from here (they moved to the render_* modules).
__all__ = [
    "BERNSTEIN",
    "FLOORGUARD",
    "TEMPLATE_NAMES",
    "BlockData",
    "Template",
    "is_template_path",
    "load_template",
    "py_data",
    "py_literal",
    "render_block",
    "render_floor_map",
    "render_module",
]
