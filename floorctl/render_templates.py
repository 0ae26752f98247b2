"""Loading a template and rendering the floor-map block with it, each block checked by reading
it back.
"""

from __future__ import annotations

import importlib.resources
import io
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorctl.errors import ModuleError, RenderError
from floorctl.render_layouts import (
    _FLOOR_KEYS,
    BERNSTEIN,
    FLOORGUARD,
    MAX_TEMPLATE_BYTES,
    TEMPLATE_NAMES,
    Entries,
    LiteralEntry,
    Template,
)
from floorctl.render_literals import py_data, py_literal
from floorctl.splice import BEGIN, END, SplitModule, splice, split_lines
from floorguard._base._canonical import content_address
from floorguard._base.files import read_regular
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
    return _render(template, _PlainEntries(floor_map), map_hash=map_hash, map_version=map_version)


class _PlainEntries(Mapping[str, Mapping[str, Any]]):
    """A floor map's ``to_entries`` form, each entry made when it is asked for: rendering
    and reading back a large map then never hold its whole plain form at once."""

    def __init__(self, floor_map: FloorMap) -> None:
        self._map = floor_map
        self._names = sorted(floor_map)

    def __getitem__(self, adapter: str) -> Mapping[str, Any]:
        return self._map[adapter].as_entry()

    def __contains__(self, adapter: object) -> bool:
        return adapter in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class _LiteralEntries:
    """The entries a template iterates over, each written as literals when it is reached
    (a sequence: a template may also ask for its length or an item)."""

    def __init__(self, data: Mapping[str, Mapping[str, Any]]) -> None:
        self._data = data
        self._names = list(data)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, index: int) -> LiteralEntry:
        adapter = self._names[index]
        return _literal_entry(adapter, self._data[adapter])

    def __iter__(self) -> Iterator[LiteralEntry]:
        for adapter, fields in self._data.items():
            yield _literal_entry(adapter, fields)


def _render(
    template: Template,
    data: Mapping[str, Mapping[str, Any]],
    *,
    map_hash: str,
    map_version: int,
) -> str:
    out = io.StringIO()
    size = _write_block(out, template, data, map_hash=map_hash, map_version=map_version)
    block = out.getvalue()
    del out
    _check_block(block, 0, size, template, data, map_hash=map_hash, map_version=map_version)
    return block


def render_module(
    template: Template, floor_map: FloorMap, split: SplitModule, *, map_hash: str, map_version: int
) -> str:
    """``splice(split, render_floor_map(...))``, the block written straight into the
    module's text and checked where it lies there: a large map's module text is held once,
    never also as a block and as the pieces either was joined from. The same checks and
    refusals (RenderError; ModuleError as ``splice``).
    """
    if split.newline != "\n":  # the block's line endings are converted: the plain way
        block = render_floor_map(template, floor_map, map_hash=map_hash, map_version=map_version)
        return splice(split, block)
    if isinstance(map_version, bool) or not isinstance(map_version, int) or map_version < 0:
        raise RenderError(f"map version must be a non-negative integer, not {map_version!r}")
    data = _PlainEntries(floor_map)
    out = io.StringIO()
    out.write(split.before)
    out.write(split.begin_line)
    start = len(split.before) + len(split.begin_line)
    size = _write_block(out, template, data, map_hash=map_hash, map_version=map_version)
    out.write(split.end_line)
    out.write(split.after)
    text = out.getvalue()
    del out
    _check_block(
        text, start, start + size, template, data, map_hash=map_hash, map_version=map_version
    )
    return text


def _write_block(
    out: io.StringIO,
    template: Template,
    data: Mapping[str, Mapping[str, Any]],
    *,
    map_hash: str,
    map_version: int,
) -> int:
    """Render the block into ``out`` as jinja2 yields it (never one list of every small
    string, or a joined copy of them); a final newline is added to a block without one.
    Returns the block's length. Raises RenderError."""
    extended = []
    if template.layout == BERNSTEIN:
        extended = [adapter for adapter, fields in data.items() if fields.keys() != _FLOOR_KEYS]
    if extended:
        raise RenderError(
            f"the {BERNSTEIN} template holds floors only: {extended[0]!r} carries advisories "
            f"or waivers{f' (and {len(extended) - 1} more)' if len(extended) > 1 else ''}; "
            f"use the {FLOORGUARD} template"
        )
    origin = f"template {template.name}"
    size = 0
    last = ""
    try:
        compiled = _environment(template.layout is None).from_string(template.source)
        # Streamed: each entry is written as literals when the template reaches it.
        for piece in compiled.generate(
            entries=_LiteralEntries(data),
            map_hash=py_literal(map_hash),
            map_version=py_literal(map_version),
        ):
            if piece:
                size += out.write(piece)
                last = piece
    except RenderError:  # a value that cannot be written as a literal, said as it is
        raise
    except Exception as exc:  # a template from a path may fail in any way: refuse, don't crash
        raise RenderError(f"{origin} failed to render: {exc}") from exc
    if size and not last.endswith("\n"):
        size += out.write("\n")
    return size


def _check_block(
    text: str,
    start: int,
    stop: int,
    template: Template,
    data: Mapping[str, Mapping[str, Any]],
    *,
    map_hash: str,
    map_version: int,
) -> None:
    """Refuse the rendered block ``text[start:stop]`` unless it is data only and reads back
    to exactly ``data``, ``map_hash`` and ``map_version``. Raises RenderError."""
    origin = f"template {template.name}"
    if text.find("\r", start, stop) >= 0:
        raise RenderError(f"{origin} produced a carriage return")
    # A marker line holds the marker: only then is there a line to look for.
    if text.find(BEGIN, start, stop) >= 0 or text.find(END, start, stop) >= 0:
        for number, line in enumerate(split_lines(text[start:stop]), start=1):
            if line.strip() in (BEGIN, END):
                raise RenderError(f"{origin} produced a floor-map marker (line {number})")
    # Imported here: floorctl.render (the reader) re-imports this module's names.
    from floorctl.render import read_block_expecting  # noqa: PLC0415

    try:
        # Compared with ``data`` entry by entry as it is read: no second copy of the map.
        back = read_block_expecting(text, origin, data, start, stop)
    except ModuleError as exc:
        raise RenderError(f"refused to render: {exc}") from None
    if back.layout is None:
        raise RenderError(f"{origin} produced no floor map")
    if template.layout is not None and back.layout != template.layout:
        raise RenderError(f"{origin} produced the {back.layout} layout, not {template.layout}")
    if (back.entries, back.stated_hash, back.map_version) != (data, map_hash, map_version):
        raise RenderError(f"{origin} produced a block that does not read back to its data")
