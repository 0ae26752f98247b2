"""Which OSV package (npm or PyPI) maps to which adapter: the catalog, the packages the
feeds given with --watch name, and --package options."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from floorctl.osv_checks import (
    _ADAPTER,
    _NPM_NAME,
    _PACKAGE_OPTION,
    _PYPI_NAME,
    ECOSYSTEMS,
    NPM,
    PYPI,
)
from floorguard._maps.catalog import (
    ADAPTER_OF_NPM_PACKAGE,
    ADAPTER_OF_PIP_DISTRIBUTION,
    CATALOG,
)
from floorguard._maps.packages import KINDS, npm_name_problem
from floorguard.errors import InvalidInput

if TYPE_CHECKING:
    from floorctl.feeds import Feed

# An option's optional ``:KIND`` after the entry (an entry name holds no colon).
_DEFAULT_KIND = "library"

# --- mapping packages to adapters -------------------------------------------------------------


def normalise_pypi(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PackageMap:
    """Which OSV package belongs to which adapter, and each adapter's ecosystem."""

    npm: Mapping[str, str]
    pypi: Mapping[str, str]  # keys PEP 503-normalised
    # Entries outside the catalogue that name exactly one package: (package, kind), which
    # the feed carries so that the runtime identifies the package.
    named: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def adapter_of(self, ecosystem: str, name: str) -> str | None:
        if ecosystem == NPM:
            return self.npm.get(name)
        if ecosystem == PYPI:
            return self.pypi.get(normalise_pypi(name))
        return None


Watched = tuple[str, str, str, str]  # (ecosystem, package, kind, entry)


def package_map(options: Sequence[str] = (), watched: Sequence[Watched] = ()) -> PackageMap:
    """The catalog's npm packages and pip distributions, the packages of ``watched`` feed
    entries, plus ``ECOSYSTEM:NAME=ADAPTER[:KIND]`` options (which win over the catalog
    for their package).

    Raises InvalidInput (a usage error) for an option that is not of that form, names
    another ecosystem than npm or PyPI, an invalid package or adapter name or kind, or
    gives one adapter packages in both ecosystems (its versions would have no single
    order).
    """
    npm = dict(ADAPTER_OF_NPM_PACKAGE)
    pypi = dict(ADAPTER_OF_PIP_DISTRIBUTION)
    kinds: dict[str, str] = {}
    for ecosystem, name, kind, adapter in watched:
        (npm if ecosystem == NPM else pypi)[name] = adapter
        kinds[adapter] = kind
    for option in options:
        match = _PACKAGE_OPTION.match(option)
        shown = json.dumps(option)
        if match is None:
            raise InvalidInput(f"--package {shown}: expected ECOSYSTEM:NAME=ADAPTER")
        ecosystem, name, adapter = match["eco"], match["name"], match["adapter"]
        adapter, colon, kind = adapter.partition(":")
        if colon and kind not in KINDS:
            raise InvalidInput(f"--package {shown}: the kind must be one of {', '.join(KINDS)}")
        if ecosystem not in ECOSYSTEMS:
            raise InvalidInput(f"--package {shown}: the ecosystem must be npm or PyPI")
        if not _ADAPTER.match(adapter):
            raise InvalidInput(
                f"--package {shown}: {json.dumps(adapter)} is not an adapter name "
                "(lower-case letters, digits, '.', '_' and '-', at most 64 characters)"
            )
        if ecosystem == NPM:
            if not _NPM_NAME.match(name):
                raise InvalidInput(f"--package {shown}: not an npm package name")
            npm[name] = adapter
        else:
            if not _PYPI_NAME.match(name):
                raise InvalidInput(f"--package {shown}: not a PyPI distribution name")
            pypi[normalise_pypi(name)] = adapter
        if colon:
            kinds[adapter] = kind
    both = set(npm.values()) & set(pypi.values())
    if both:
        raise InvalidInput(
            "--package: an adapter's packages must all be npm or all PyPI, not both: "
            + ", ".join(sorted(both))
        )
    return PackageMap(npm=npm, pypi=pypi, named=_named(npm, pypi, kinds))


def _named(
    npm: Mapping[str, str], pypi: Mapping[str, str], kinds: Mapping[str, str]
) -> Mapping[str, tuple[str, str]]:
    """Entries outside the catalogue with exactly one package, a name the feed's strict
    rules accept (npm's as the registry holds it; PyPI's normalised already): the package
    and kind the imported feed states for them."""
    packages: dict[str, list[str]] = {}
    for name, adapter in [*npm.items(), *pypi.items()]:
        packages.setdefault(adapter, []).append(name)
    named = {}
    for adapter, names in packages.items():
        if adapter in CATALOG or len(names) != 1:
            continue
        name = names[0]
        if name in npm and npm_name_problem(name) is not None:
            continue
        named[adapter] = (name, kinds.get(adapter, _DEFAULT_KIND))
    return MappingProxyType(named)


def watched_packages(feeds: Sequence[Feed]) -> list[Watched]:
    """``(ecosystem, package, kind, entry)`` of every entry of ``feeds`` (checked feeds)
    that names its package."""
    found = []
    for feed in feeds:
        for entry in feed.floor_map.values():
            if entry.package is not None and entry.ecosystem is not None and entry.kind:
                found.append((entry.ecosystem, entry.package, entry.kind, entry.adapter))
    return found
