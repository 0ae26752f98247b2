"""Which OSV package (npm or PyPI) maps to which adapter: the catalog plus --package options."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from floorctl.osv_checks import (
    _ADAPTER,
    _NPM_NAME,
    _PACKAGE_OPTION,
    _PYPI_NAME,
    ECOSYSTEMS,
    NPM,
    PYPI,
)
from floorguard._maps.catalog import ADAPTER_OF_NPM_PACKAGE, ADAPTER_OF_PIP_DISTRIBUTION
from floorguard.errors import InvalidInput

# --- mapping packages to adapters -------------------------------------------------------------


def normalise_pypi(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PackageMap:
    """Which OSV package belongs to which adapter, and each adapter's ecosystem."""

    npm: Mapping[str, str]
    pypi: Mapping[str, str]  # keys PEP 503-normalised

    def adapter_of(self, ecosystem: str, name: str) -> str | None:
        if ecosystem == NPM:
            return self.npm.get(name)
        if ecosystem == PYPI:
            return self.pypi.get(normalise_pypi(name))
        return None


def package_map(options: Sequence[str] = ()) -> PackageMap:
    """The catalog's npm packages and pip distributions, plus ``ECOSYSTEM:NAME=ADAPTER``
    options (which win over the catalog for their package).

    Raises InvalidInput (a usage error) for an option that is not of that form, names
    another ecosystem than npm or PyPI, an invalid package or adapter name, or gives one
    adapter packages in both ecosystems (its versions would have no single order).
    """
    npm = dict(ADAPTER_OF_NPM_PACKAGE)
    pypi = dict(ADAPTER_OF_PIP_DISTRIBUTION)
    for option in options:
        match = _PACKAGE_OPTION.match(option)
        shown = json.dumps(option)
        if match is None:
            raise InvalidInput(f"--package {shown}: expected ECOSYSTEM:NAME=ADAPTER")
        ecosystem, name, adapter = match["eco"], match["name"], match["adapter"]
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
    both = set(npm.values()) & set(pypi.values())
    if both:
        raise InvalidInput(
            "--package: an adapter's packages must all be npm or all PyPI, not both: "
            + ", ".join(sorted(both))
        )
    return PackageMap(npm=npm, pypi=pypi)
