"""Packages a floor map names, catalogued or not: their registry names, checked strictly per
ecosystem, and the index identification asks (which map entry owns an npm package or a pip
distribution).

A map entry may name its package (``package``, with ``ecosystem`` and a ``kind``): an MCP
server or a library the runtime's catalogue has never heard of is then identified exactly as
a catalogued CLI is, from the metadata installed with its code. Names are compared in one
spelling only: an npm name exactly as the registry holds it (lower case, ASCII), a PyPI
name in its PEP 503 normal form. Anything else is refused where it is read, never folded
into a name it might be taken for (a look-alike letter, a case variant).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

NPM: Final = "npm"
PYPI: Final = "PyPI"
KINDS: Final = ("agent", "mcp-server", "library")
MAX_NPM_NAME: Final = 214
MAX_PYPI_NAME: Final = 128

# npm: what the registry accepts for a new package: lower case ASCII letters, digits and
# ``- . _ ~``, not starting with ``.`` or ``_``, optionally in one ``@scope/``.
_NPM_PART = r"[a-z0-9][a-z0-9._~-]*"
_NPM_NAME: Final = re.compile(rf"(?:@{_NPM_PART}/)?{_NPM_PART}\Z", re.ASCII)
_NPM_RESERVED: Final = frozenset({"node_modules", "favicon.ico"})
# PyPI: a PEP 508 name already in its PEP 503 normal form (lower case, runs of ``-_.``
# written as one ``-``).
_PYPI_NORMAL: Final = re.compile(r"[a-z0-9](?:-?[a-z0-9])*\Z", re.ASCII)


def npm_name_problem(name: object) -> str | None:
    """Why ``name`` is no npm package name as the registry holds one, or None."""
    if not isinstance(name, str):
        return "an npm package name is a string"
    if not name or len(name) > MAX_NPM_NAME:
        return f"an npm package name has 1 to {MAX_NPM_NAME} characters"
    if not name.isascii():
        return f"{name!r} is not an npm package name: it holds a character that is not ASCII"
    if name != name.lower():
        return f"{name!r} is not an npm package name: npm names are lower case"
    if not _NPM_NAME.match(name) or name in _NPM_RESERVED:
        return (
            f"{name!r} is not an npm package name (lower-case letters, digits and - . _ ~, "
            "optionally in one @scope/, not starting with . or _)"
        )
    return None


def pypi_normal_form(name: str) -> str:
    """``name`` as PEP 503 normalises it (runs of ``-_.`` become ``-``, lower case)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pypi_name_problem(name: object) -> str | None:
    """Why ``name`` is no PyPI project name in its PEP 503 normal form, or None."""
    if not isinstance(name, str):
        return "a PyPI project name is a string"
    if not name or len(name) > MAX_PYPI_NAME:
        return f"a PyPI project name has 1 to {MAX_PYPI_NAME} characters"
    if not name.isascii():
        return f"{name!r} is not a PyPI project name: it holds a character that is not ASCII"
    if not _PYPI_NORMAL.match(name):
        normal = pypi_normal_form(name)
        hint = f" (its normal form is {normal!r})" if _PYPI_NORMAL.match(normal) else ""
        return f"{name!r} is not a PEP 503 normalised PyPI project name{hint}"
    return None


def package_problem(ecosystem: object, name: object) -> str | None:
    """Why ``name`` cannot be a package of ``ecosystem``, or None."""
    if ecosystem == NPM:
        return npm_name_problem(name)
    if ecosystem == PYPI:
        return pypi_name_problem(name)
    return f"packages are named in the ecosystems {NPM} and {PYPI}, not {ecosystem!r}"


def kind_problem(kind: object) -> str | None:
    if kind not in KINDS:
        return f"kind must be one of {', '.join(KINDS)}, not {kind!r}"
    return None


@dataclass(frozen=True)
class PackageIndex:
    """Which map entry owns a package: ``npm`` by exact name, ``pypi`` by PEP 503 normal
    form. The catalogue's packages are always in it; a map adds the packages its entries
    name. ``key`` names the content, for caches."""

    npm: Mapping[str, str]
    pypi: Mapping[str, str]
    key: tuple[tuple[str, str, str], ...]

    def owner(self, ecosystem: str, name: str) -> str | None:
        if ecosystem == NPM:
            return self.npm.get(name)
        if ecosystem == PYPI:
            return self.pypi.get(pypi_normal_form(name))
        return None


def _catalogue_packages() -> list[tuple[str, str, str]]:
    from floorguard._maps.catalog import ADAPTER_OF_NPM_PACKAGE, ADAPTER_OF_PIP_DISTRIBUTION

    return [(NPM, name, owner) for name, owner in ADAPTER_OF_NPM_PACKAGE.items()] + [
        (PYPI, name, owner) for name, owner in ADAPTER_OF_PIP_DISTRIBUTION.items()
    ]


def build_index(named: list[tuple[str, str, str]]) -> PackageIndex:
    """The index of the catalogue's packages and ``named`` ``(ecosystem, package, entry)``.

    Raises ValueError when two entries claim one package, or an entry claims a package the
    catalogue knows as another adapter's.
    """
    owners: dict[tuple[str, str], str] = {}
    for ecosystem, name, owner in _catalogue_packages():
        owners[(ecosystem, name)] = owner
    catalogued = dict(owners)
    claimed: dict[tuple[str, str], str] = {}
    for ecosystem, name, owner in named:
        key = (ecosystem, pypi_normal_form(name) if ecosystem == PYPI else name)
        if key in claimed and claimed[key] != owner:
            raise ValueError(
                f"the {ecosystem} package {name} is named by two entries: "
                f"{claimed[key]} and {owner}"
            )
        if key in catalogued and catalogued[key] != owner:
            raise ValueError(
                f"entry {owner} names the {ecosystem} package {name}, which is {catalogued[key]}'s"
            )
        claimed[key] = owner
        owners[key] = owner
    npm = {name: owner for (eco, name), owner in owners.items() if eco == NPM}
    pypi = {name: owner for (eco, name), owner in owners.items() if eco == PYPI}
    content = tuple(sorted((eco, name, owner) for (eco, name), owner in claimed.items()))
    return PackageIndex(MappingProxyType(npm), MappingProxyType(pypi), content)


CATALOGUE_INDEX: Final = build_index([])


_INDEXES: dict[int, tuple[object, PackageIndex]] = {}


def index_of(floor_map: Mapping[str, object]) -> PackageIndex:
    """The index of the catalogue and of the packages ``floor_map``'s entries name (entries
    as ``map_model.Advisory``; the map checked them when it was built). Cached per map
    object, which the cache holds, so its id is not reused while cached."""
    held = _INDEXES.get(id(floor_map))
    if held is not None and held[0] is floor_map:
        return held[1]
    named = [
        (str(getattr(entry, "ecosystem", "")), package, name)
        for name, entry in floor_map.items()
        if (package := getattr(entry, "package", None)) is not None
    ]
    index = build_index(named) if named else CATALOGUE_INDEX
    if len(_INDEXES) >= 8:
        _INDEXES.clear()
    _INDEXES[id(floor_map)] = (floor_map, index)
    return index
