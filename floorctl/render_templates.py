"""Loading a template and rendering the floor-map block with it, each block checked by reading
it back.
"""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Mapping
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
from floorctl.splice import BEGIN, END, split_lines
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
    # Imported here: floorctl.render (the reader) re-imports this module's names.
    from floorctl.render import read_block  # noqa: PLC0415

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
