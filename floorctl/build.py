"""``floorctl build``: the floorguard wheel and sdist carrying one floor map, reproducibly.

The floorguard project (``generated/``: its ``pyproject.toml``, ``README.md`` and the
``floorguard`` package) is copied into a staging folder with the module's floor map as
``floor_map.py`` and the version stamped into ``_version.py`` (RELEASE + "." + the map's
version), then built by pypa ``build`` without isolation (offline) through the project's
own backend, hatchling: the sdist first, then the wheel from the unpacked sdist, as
``python -m build`` does, so the sdist is proven complete. Every timestamp is
``BUILD_EPOCH`` (SOURCE_DATE_EPOCH), so two builds of one map are byte-identical wherever
and whenever they run.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from floorctl.errors import BuildError, ModuleError
from floorguard._base import atomic
from floorguard._base._canonical import canonical_bytes, sha256_digest
from floorguard._base.files import MAX_MAP_BYTES, read_regular
from floorguard._maps.active_map import ActiveMap, parse_map_module
from floorguard._maps.map_model import map_file_hash, to_entries
from floorguard.errors import FloorMapError, UnreadableFileError

# 1980-01-01T00:00:00Z: the earliest time a zip entry can hold. Fixed, never the clock nor
# the caller's SOURCE_DATE_EPOCH: the same map must give the same bytes everywhere.
BUILD_EPOCH = 315532800
BACKEND = "hatchling"
PACKAGE = "floorguard"
# What the package is made of; anything else in the folder (caches, lock and undo files of
# refresh, editors' files) is left out.
# "*/*.py": the runtime's subpackages (floorguard/chainstore/).
PACKAGE_FILES = ("*.py", "*/*.py", "py.typed", "trusted_keys.json")
PROJECT_FILES = ("pyproject.toml", "README.md")
ARCHIVE_NAME = re.compile(r"sha256-[0-9a-f]{64}\.json")
VERSION_LINE = re.compile(r"^__version__ = .*$", re.MULTILINE)
# A final release of numbers only: RELEASE + "." + the map's version is then a PEP 440
# release whose last part is the map's version (after "0.3.0rc1" or "0.2.0+local" it would
# be invalid, or sit in a local label that package indexes refuse).
FINAL_RELEASE = re.compile(r"[0-9]+(?:\.[0-9]+)*")
MAX_OUTPUT_LINES = 20
MAX_SOURCE_FILE_BYTES = 16 * 1024 * 1024
PROVENANCE_SUFFIX = ".provenance.dsse"


@dataclass(frozen=True)
class MapModule:
    """A floor-map module as read: its bytes and the checked map they hold."""

    data: bytes
    active: ActiveMap


@dataclass(frozen=True)
class Artifacts:
    wheel: Path
    sdist: Path
    version: str
    backend_versions: Mapping[str, str]


def read_map_module(path: Path) -> MapModule:
    """Read and check a floor-map module (default layout). Raises ModuleError.

    Refused: a module that cannot be read, has no floor map, or whose block's data does not
    hash to the hash it states (a hand edit): a package must never carry a map its own
    runtime would refuse.
    """
    try:
        data = read_regular(path, max_bytes=MAX_MAP_BYTES, what="floor-map module")
    except UnreadableFileError as exc:
        raise ModuleError(str(exc)) from exc
    try:
        active = parse_map_module(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        raise ModuleError(f"{path}: the floor-map module is not UTF-8") from exc
    except FloorMapError as exc:
        raise ModuleError(f"cannot build: {exc}") from exc
    return MapModule(data, active)


def distribution_version(release: str, map_version: int) -> str:
    """RELEASE + "." + the map's version: a newer map is a higher PEP 440 version."""
    return f"{release}.{map_version}"


def _refuse_link(path: Path) -> None:
    # A link in the source would carry whatever it points at (a key in the runner's temp
    # folder, a secret) into a public package: only regular files are packaged.
    if path.is_symlink():
        raise BuildError(
            f"{path}: a symbolic link among the files to package: only regular files are "
            "packaged (a link could carry a file from outside the source into the package)"
        )


def _read_source(path: Path) -> bytes:
    # Never blocks: a FIFO or device in the source tree is refused at once, by name.
    _refuse_link(path)
    try:
        return read_regular(path, max_bytes=MAX_SOURCE_FILE_BYTES, what="source file")
    except UnreadableFileError as exc:
        raise BuildError(str(exc)) from exc


def read_release(source: Path) -> str:
    """``RELEASE`` of the floorguard project in ``source``. Raises BuildError."""
    path = source / PACKAGE / "_version.py"
    try:
        tree = ast.parse(_read_source(path).decode("utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise BuildError(f"{path}: cannot read the release: {exc}") from exc
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "RELEASE"
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            release = node.value.value
            if not FINAL_RELEASE.fullmatch(release):
                raise BuildError(
                    f"{path}: RELEASE {release!r} is not a final release of numbers (such as "
                    "0.2.0): the map's version appended to it must make a higher PEP 440 "
                    "release"
                )
            return release
    raise BuildError(f"{path}: no RELEASE = '...' string")


def check_source(source: Path) -> None:
    """``source`` must be the floorguard project. Raises BuildError."""
    pyproject = source / "pyproject.toml"
    try:
        project = tomllib.loads(_read_source(pyproject).decode("utf-8")).get("project")
    except UnicodeDecodeError as exc:
        raise BuildError(f"{pyproject}: not UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BuildError(f"{pyproject}: not TOML: {exc}") from exc
    # Valid TOML that Python's reader cannot take.
    except RecursionError:
        raise BuildError(f"{pyproject}: not TOML: arrays or tables nested too deeply") from None
    except ValueError:  # an integer past Python's digit limit
        raise BuildError(f"{pyproject}: not TOML: a number too large to read") from None
    name = project.get("name") if isinstance(project, dict) else None
    if name != PACKAGE or not (source / PACKAGE).is_dir():
        raise BuildError(f"{source}: not the floorguard project (pyproject.toml and floorguard/)")
    _refuse_link(source / PACKAGE)


def archived_maps(folders: Sequence[Path]) -> dict[str, bytes]:
    """The map archives to ship (``maps/`` of the source and beside the module), each checked
    to hash to its name. Raises BuildError."""
    found: dict[str, bytes] = {}
    for folder in folders:
        _refuse_link(folder)  # a linked maps/ is a folder from outside the source
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if not ARCHIVE_NAME.fullmatch(path.name):
                continue
            _refuse_link(path)
            try:
                data = read_regular(path, max_bytes=MAX_MAP_BYTES, what="archived floor map")
            except UnreadableFileError as exc:
                raise BuildError(str(exc)) from exc
            try:
                actual = map_file_hash(data, str(path))
            except FloorMapError as exc:
                raise BuildError(f"{path}: not an archived floor map: {exc}") from exc
            if actual.replace(":", "-") + ".json" != path.name:
                raise BuildError(f"{path}: hashes to {actual}, not to its name")
            if sha256_digest(data) != actual:
                # (refresh writes the map's canonical JSON, which its hash is of; other bytes
                # under that name are someone else's file)
                raise BuildError(f"{path}: not the canonical JSON of the map it names")
            found[path.name] = data
    return found


def stage(source: Path, module: MapModule, maps: Mapping[str, bytes], staging: Path) -> str:
    """Write the project to build into ``staging``; returns the distribution version."""
    version = distribution_version(read_release(source), module.active.map_version)
    for name in PROJECT_FILES:
        (staging / name).write_bytes(_read_source(source / name))
    package = staging / PACKAGE
    package.mkdir()
    for pattern in PACKAGE_FILES:
        for path in sorted((source / PACKAGE).glob(pattern)):
            relative = path.relative_to(source / PACKAGE)
            if any(part.startswith(".") for part in relative.parts):
                continue  # an editor's file (.#x.py, a dangling link) or hatchling's exclude
            (package / relative).parent.mkdir(exist_ok=True)
            (package / relative).write_bytes(_read_source(path))
    (package / "floor_map.py").write_bytes(module.data)
    version_file = package / "_version.py"
    text, count = VERSION_LINE.subn(
        f"__version__ = {version!r}", version_file.read_text(encoding="utf-8")
    )
    if count != 1:
        raise BuildError(f"{source / PACKAGE / '_version.py'}: no single __version__ line")
    version_file.write_text(text, encoding="utf-8")
    archive = package / "maps"
    archive.mkdir()
    own = dict(maps)
    # The map the package carries is always resolvable from its own archive.
    own_name = module.active.floor_map_hash.replace(":", "-") + ".json"
    own.setdefault(own_name, canonical_bytes(to_entries(module.active.floor_map)))
    for name in sorted(own):
        (archive / name).write_bytes(own[name])
    return version


def _runner(log: list[str]) -> object:
    def run(
        cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None
    ) -> None:
        env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
        env.update(extra_environ or {})
        env["SOURCE_DATE_EPOCH"] = str(BUILD_EPOCH)
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        log.extend((done.stdout + done.stderr).splitlines())
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, cmd)

    return run


def backend_versions() -> dict[str, str]:
    """The build tooling in use (recorded in the provenance: other versions, other bytes)."""
    found = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in ("build", BACKEND):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def run_build(staging: Path, out: Path) -> tuple[Path, Path]:
    """Build the sdist of ``staging``, then the wheel from it, into ``out``. Raises BuildError."""
    try:
        # A declared dependency, but floorctl may run from a checkout without it.
        import build as pypa_build  # noqa: PLC0415
    except ImportError as exc:
        raise BuildError(
            "floorctl build needs pypa build and hatchling: pip install build hatchling"
        ) from exc
    log: list[str] = []

    def builder(folder: Path) -> pypa_build.ProjectBuilder:
        project = pypa_build.ProjectBuilder(folder, runner=_runner(log))  # type: ignore[arg-type]
        missing = project.check_dependencies("sdist") | project.check_dependencies("wheel")
        if missing:
            names = ", ".join(sorted(" ".join(chain) for chain in missing))
            raise BuildError(
                f"the build backend's requirements are not installed ({names}); floorctl "
                "builds without isolation, offline: pip install build hatchling"
            )
        return project

    try:
        sdist = Path(builder(staging).build("sdist", out))
        unpacked = staging.parent / "sdist"
        with tarfile.open(sdist) as archive:
            archive.extractall(unpacked, filter="data")
        (root,) = unpacked.iterdir()
        wheel = Path(builder(root).build("wheel", out))
    except (pypa_build.BuildException, pypa_build.BuildBackendException) as exc:
        tail = "; ".join(log[-MAX_OUTPUT_LINES:])
        raise BuildError(f"the build failed: {exc}{': ' + tail if tail else ''}") from exc
    return wheel, sdist


def build(source: Path, module: MapModule, module_path: Path, work: Path) -> Artifacts:
    """Build wheel and sdist in ``work`` (a fresh folder). Raises BuildError, ModuleError."""
    check_source(source)
    maps = archived_maps([source / PACKAGE / "maps", module_path.parent / "maps"])
    staging = work / "project"
    staging.mkdir()
    version = stage(source, module, maps, staging)
    out = work / "dist"
    out.mkdir()
    wheel, sdist = run_build(staging, out)
    return Artifacts(wheel, sdist, version, backend_versions())


def publish(artifacts: Artifacts, provenance: bytes, out_dir: Path) -> tuple[Path, Path, Path]:
    """Write the wheel, the sdist and ``<wheel>.provenance.dsse`` into ``out_dir``.

    Each is written atomically and the three as one: if any write fails, every name gets
    back what it held, so a wheel never stands beside the provenance of another build.
    Raises OutputError, OSError.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / artifacts.wheel.name
    sdist = out_dir / artifacts.sdist.name
    statement = out_dir / (artifacts.wheel.name + PROVENANCE_SUFFIX)
    with atomic.undoable([wheel, sdist, statement]):
        atomic.write_atomic(wheel, artifacts.wheel.read_bytes(), mode=atomic.DEFAULT_MODE)
        atomic.write_atomic(sdist, artifacts.sdist.read_bytes(), mode=atomic.DEFAULT_MODE)
        atomic.write_atomic(statement, provenance, mode=atomic.DEFAULT_MODE)
    return wheel, sdist, statement


def file_sha256(path: Path) -> str:
    """Hex sha256 of a built file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def module_digest(module: MapModule) -> str:
    return sha256_digest(module.data)


def temporary_work() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="floorctl-build-")
