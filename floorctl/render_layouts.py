"""The two host layouts a floor-map block is written in, and the types a block is rendered
from and read back into.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from floorguard._maps import host_map
from floorguard._maps.map_model import (
    ENTRY_FIELDS,
)

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
    # The annotation allowed on each name (the template's), as ast.unparse writes it. An
    # annotation is evaluated when the module runs, so it is checked like any other expression.
    annotations: Mapping[str, str]

    @property
    def names(self) -> frozenset[str]:
        return frozenset({self.entries_name, self.hash_name, self.version_name})


def _layout(names: host_map.Layout, *, entry_style: str, hash_optional: bool) -> Layout:
    """A layout the runtime reads (its names and annotations are the runtime's, ``host_map``),
    as rendered."""
    return Layout(
        name=names.name,
        entries_name=names.entries_name,
        hash_name=names.hash_name,
        version_name=names.version_name,
        entry_style=entry_style,
        hash_optional=hash_optional,
        annotations=names.annotations,
    )


FLOORGUARD_LAYOUT = _layout(
    host_map.FLOORGUARD,
    entry_style="dict",
    hash_optional=False,
)
BERNSTEIN_LAYOUT = _layout(
    host_map.BERNSTEIN,
    entry_style="call",
    hash_optional=True,
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

    # (Read for a check against given entries: those entries themselves, when they match.)
    entries: Mapping[str, Mapping[str, Any]]
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
