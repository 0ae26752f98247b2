"""Which catalogued pip distribution installed a file or a top-level module, and at which
version, from the dist-info folders of site-packages (RECORD, top_level.txt, METADATA) and
the site-packages folders of an installation prefix."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floorguard._identify.consulted import (
    MAX_MANIFEST_BYTES,
    MAX_RECORD_BYTES,
    _identity,
    _read_path,
    memo,
    new_cache,
)
from floorguard._identify.identification import Identification, current_packages
from floorguard._maps.catalog import ADAPTER_OF_PIP_MODULE
from floorguard._maps.packages import pypi_normal_form
from floorguard.errors import DetectionError


def metadata_dist(name: str) -> str | None:
    """The distribution a metadata entry of site-packages is of: a wheel's ``.dist-info``
    (``name-version``) or an older installer's ``.egg-info``, a folder or a file
    (``name-version-pyX.Y``, or ``name`` alone); None for anything else."""
    if name.endswith(".dist-info"):
        return name[: -len(".dist-info")].rsplit("-", 1)[0]
    if name.endswith(".egg-info"):
        return name[: -len(".egg-info")].split("-", 1)[0]
    return None


_site_listings = new_cache()
_record_cache = new_cache()
_metadata_cache = new_cache()


def _catalogued_dist_infos(site: str) -> list[tuple[str, str]]:
    """``(metadata entry, adapter)`` of every distribution in ``site`` that the catalogue
    or the map in force names: its dist-info, and any egg-info (an install by an older
    installer over the same files claims them too)."""
    ident = _identity(site)
    if ident is None:
        return []
    index = current_packages()

    def scan() -> list[tuple[str, str]]:
        try:
            names = sorted(os.listdir(site))
        except OSError:
            return []
        found = []
        for name in names:
            dist = metadata_dist(name)
            if dist is not None:
                adapter = index.pypi.get(pypi_normal_form(dist))
                if adapter is not None:
                    found.append((os.path.join(site, name), adapter))
        return found

    return memo(_site_listings, (site, ident, index.key), scan)


@dataclass(frozen=True)
class _Record:
    paths: frozenset[str]  # normalised, relative to the site directory
    top_level: frozenset[str]  # importable top-level names the distribution installs


def _record(info: str) -> _Record:
    """What a dist-info says its distribution installed (RECORD, top_level.txt); for an
    egg-info, installed-files.txt (paths from the egg-info folder) and top_level.txt, and
    when it lists neither (a single file), every module the catalogue knows of its
    distribution."""
    egg = info.endswith(".egg-info")
    record_path = os.path.join(info, "installed-files.txt" if egg else "RECORD")
    top_path = os.path.join(info, "top_level.txt")
    key = (info, _identity(info), _identity(record_path), _identity(top_path))

    site = os.path.dirname(info)

    def parse() -> _Record:
        paths: set[str] = set()
        tops: set[str] = set()
        data = _read_path(record_path, MAX_RECORD_BYTES) or b""
        # (installed-files.txt names one path a line, from the egg-info folder; RECORD is
        # CSV, its paths from the folder that holds the dist-info)
        start = info if egg else site
        for line in data.decode("utf-8", errors="replace").splitlines():
            path = line.strip() if egg else _record_path(line)
            # (a path ending in a slash names no file: the kernel's ENOTDIR at a file)
            if not path or "\x00" in path or path.endswith("/"):
                continue
            normal = _installed_path(start, path, site)
            if normal is None:
                continue
            paths.add(normal)
            first = normal.split(os.sep, 1)[0]
            if not first.startswith("..") and not first.endswith(
                (".dist-info", ".data", ".egg-info")
            ):
                tops.add(first.removesuffix(".py") if "." not in first[:-3] else first)
        top_level = _read_path(top_path, MAX_MANIFEST_BYTES)
        if top_level:
            tops |= set(top_level.decode("utf-8", errors="replace").split())
        if egg and not tops:
            adapter = current_packages().pypi.get(
                pypi_normal_form(metadata_dist(os.path.basename(info)) or "")
            )
            tops = {module for module, owner in ADAPTER_OF_PIP_MODULE.items() if owner == adapter}
        modules = {t.split(".", 1)[0] for t in tops}
        return _Record(frozenset(paths), frozenset(modules))

    return memo(_record_cache, key, parse)


def _record_path(line: str) -> str:
    """The path of one RECORD line (CSV: a path holding a comma or a quote is quoted)."""
    if not line.startswith('"'):
        return line.partition(",")[0]
    try:
        return next(csv.reader([line]))[0]
    except (csv.Error, StopIteration, IndexError):
        return ""


def _installed_path(start: str, path: str, site: str) -> str | None:
    """A file an installer recorded as ``path`` from the folder ``start``, relative to
    ``site`` (the folder that holds the dist-info), whatever the spelling: RECORD may name
    it by an absolute path or by one climbing out and back in. None for an entry with a
    ``..`` after a folder (``lnk/../x``): the kernel takes it from where that folder leads,
    a link's target, and no installer writes one, so it records nothing."""
    parts = path.split("/")
    for n, part in enumerate(parts):
        if part == ".." and any(p not in ("", ".", "..") for p in parts[:n]):
            return None
    return os.path.relpath(os.path.normpath(os.path.join(start, path)), site)


def distribution_installed(site: str, dist: str, relative: str) -> bool:
    """Whether the distribution ``dist`` (any spelling of its name) says it installed the
    file ``relative`` in ``site``: a dist-info of it there whose RECORD lists that file."""
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return False
    wanted = pypi_normal_form(dist)
    return any(
        name.endswith(".dist-info")
        and pypi_normal_form(metadata_dist(name) or "") == wanted
        and os.path.normpath(relative) in _record(os.path.join(site, name)).paths
        for name in names
    )


def _metadata_version(info: str) -> tuple[str | None, str]:
    """The single ``Version`` header of a dist-info's METADATA, or of an egg-info's PKG-INFO
    (the egg-info itself when it is a file); None if not exactly one."""
    if not info.endswith(".egg-info"):
        path = os.path.join(info, "METADATA")
    else:
        path = os.path.join(info, "PKG-INFO") if os.path.isdir(info) else info

    def parse() -> str | None:
        data = _read_path(path, MAX_MANIFEST_BYTES)
        if data is None:
            return None
        versions = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                break  # the headers end at the first blank line
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == "version":
                versions.append(value.strip())
        return versions[0] if len(versions) == 1 else None

    return memo(_metadata_cache, (path, _identity(path)), parse), path


_prefix_cache = new_cache()
_LIBS: Final = ("lib", "lib64", "local/lib", "local/lib64")  # (every build's, together)


def _prefix_sites(prefix: Path | str, version: str | None = None) -> list[str]:
    """The site-packages and dist-packages of an installation prefix, for the interpreter
    version ``X.Y`` when it is known (``python3.11`` and Debian's ``python3``), else for every
    ``python3*`` folder (cached until one of its lib directories changes)."""
    bases = [os.path.join(prefix, lib) for lib in _LIBS]

    def wanted(name: str) -> bool:
        if version is None:
            return name.startswith("python3")
        return name in (f"python{version}", "python3")

    def scan() -> list[str]:
        found = []
        for base in bases:
            try:
                names = sorted(os.listdir(base))
            except OSError:
                continue
            for name in names:
                if wanted(name):
                    for leaf in ("site-packages", "dist-packages"):
                        candidate = os.path.join(base, name, leaf)
                        if os.path.isdir(candidate):
                            found.append(candidate)
        return found

    return memo(_prefix_cache, (version, *((b, _identity(b)) for b in bases)), scan)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(os.path.normpath(i) for i in items if "\x00" not in i))


def _installed_by(site: str, relative: str) -> list[tuple[str, str]]:
    """The catalogued distributions in ``site`` that say they installed the file at
    ``relative`` (more than one: which one's code is there cannot be told): each whose
    record lists it, or inside one of whose top-level packages it lies."""
    first = relative.split(os.sep, 1)[0]
    found = []
    for info, adapter in _catalogued_dist_infos(site):
        record = _record(info)
        if relative in record.paths or (os.sep in relative and first in record.top_level):
            found.append((adapter, info))
    if not found and os.sep in relative and first in ADAPTER_OF_PIP_MODULE:
        found.append((ADAPTER_OF_PIP_MODULE[first], ""))
    return found


def _pip_file_identification(path: Path, st: os.stat_result) -> Identification | None:
    """A file a catalogued pip distribution installed (same inode as the RECORD entry, or a
    file inside one of its packages), found from the folders above it that are a
    site-packages or hold a catalogued distribution's metadata (``pip install --target``
    puts both in a folder of any name) or, for a file in a ``bin`` directory, the
    site-packages of that prefix."""
    sites = [
        str(p)
        for p in path.parents
        if p.name in ("site-packages", "dist-packages") or _catalogued_dist_infos(str(p))
    ]
    if path.parent.name == "bin":
        sites += _prefix_sites(path.parent.parent)
    found: set[tuple[str, str]] = set()
    for site in _unique(sites):
        relative = os.path.normpath(os.path.relpath(path, site))
        hits = _installed_by(site, relative)
        if not hits:
            continue
        on_disk = _stat(os.path.join(site, relative))
        if on_disk is not None and (on_disk.st_dev, on_disk.st_ino) == (st.st_dev, st.st_ino):
            found.update(hits)
    return _one(found, str(path), "pip-record", version_known=False)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _one(
    found: set[tuple[str, str]], subject: str, via: str, *, version_known: bool
) -> Identification | None:
    adapters = {adapter for adapter, _ in found}
    if not adapters:
        return None
    if len(adapters) > 1:
        raise DetectionError(
            f"{subject} belongs to several adapters at once: {', '.join(sorted(adapters))}"
        )
    # (one folder seen through two names, lib64 a link to lib, is one distribution)
    infos = sorted({os.path.realpath(info) for _, info in found if info})
    version, source = (None, None)
    if len(infos) == 1:
        version, source = _metadata_version(infos[0])
    return Identification(adapters.pop(), via, subject, version, source, version_known)
