"""Fail-closed detection of an installed agent CLI's version.

Strategies, safest first: the caller's own statement; package metadata read from disk
without executing anything (npm ``package.json``, pip ``METADATA``); and only then running
``BINARY --version`` with a scrubbed environment, a timeout and an output cap. Anything
doubtful (a missing binary, a timeout, a non-zero exit, output that names no version or
several) raises DetectionError; nothing here ever guesses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from base64 import urlsafe_b64encode
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floorguard._identify.pip_metadata import metadata_dist
from floorguard._identify.target import (
    FileIdentity,
    Target,
    identity_of,
    open_target,
    read_regular_at,
    search_path,
)
from floorguard._maps.catalog import (
    CatalogEntry,
    adapters_named_in,
    entry_for,
    executable_for,
    parse_version_output,
)
from floorguard._maps.catalog import validate_version as _validate_version
from floorguard._maps.packages import PackageIndex, pypi_normal_form
from floorguard.errors import DetectionError

# ``launcher-spec``: the exact version a package launcher's spec pins (``launchers``).
DETECTED_BY = ("caller", "npm-metadata", "pip-metadata", "probe", "launcher-spec")
INTERPRETER_VARIABLES: Final = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONUSERBASE",
    "NODE_PATH", "NODE_OPTIONS",
)  # fmt: skip
TIMEOUT_ENV: Final = "FLOORGUARD_PROBE_TIMEOUT"
MAX_TIMEOUT_S: Final = 600.0
# Metadata files (package.json, METADATA, RECORD) larger than this are not read.
MAX_METADATA_BYTES: Final = 1 << 20
_MAX_CACHE_ENTRIES: Final = 512


@dataclass(frozen=True)
class Detection:
    """A version and how it was established.

    ``detected_by`` is one of ``caller``, ``npm-metadata``, ``pip-metadata``, ``probe``,
    ``launcher-spec``;
    ``binary`` the resolved real path (None when the caller vouched without naming one);
    ``raw`` what the version was read from (the probe's output, or the metadata file's path).
    """

    version: str
    detected_by: str
    binary: str | None
    raw: str | None
    # An untracked binary whose --version output names a catalogued adapter (a renamed copy).
    names_adapter: str | None = None


@dataclass(frozen=True)
class ProbeSettings:
    """Limits of the ``--version`` probe."""

    timeout_s: float = 10.0
    max_output_bytes: int = 65536

    def __post_init__(self) -> None:
        timeout = self.timeout_s
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S)
        ):
            raise DetectionError(
                f"probe timeout must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], "
                f"got {self.timeout_s!r}"
            )
        cap = self.max_output_bytes
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise DetectionError(
                f"probe output cap must be at least 1 byte, got {self.max_output_bytes!r}"
            )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ProbeSettings:
        """Defaults, with the timeout from FLOORGUARD_PROBE_TIMEOUT when set.

        Raises DetectionError when the variable is set but is not a valid timeout: a
        misconfiguration is reported, not silently replaced by the default.
        """
        text = environ.get(TIMEOUT_ENV)
        if text is None:
            return cls()
        try:
            value = float(text.strip())
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
            raise DetectionError(
                f"{TIMEOUT_ENV}={text!r} is not a timeout in seconds in (0, {MAX_TIMEOUT_S:g}]"
            )
        return cls(timeout_s=value)


# ---------------------------------------------------------------------------- resolution


def file_identity(path: str | os.PathLike[str]) -> FileIdentity:
    """``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of ``path``, following links.

    Any replacement or in-place rewrite of the file changes it (ctime catches a rewrite
    whose mtime was put back). Raises DetectionError when the file cannot be examined.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DetectionError(f"cannot examine {os.fspath(path)}: {exc.strerror}") from None
    return identity_of(st)


def resolve_binary(
    adapter: str,
    binary: str | os.PathLike[str] | None = None,
    *,
    path_env: str | None = None,
) -> Path:
    """The real path of the executable to run for ``adapter``.

    ``binary`` is a path (absolute, or relative to the current directory) or a bare name to
    look up on PATH; without it the catalog's executable name for ``adapter`` is looked up.
    ``path_env`` replaces the PATH of the environment. Symlinks are resolved.
    Raises DetectionError: invalid adapter or binary name, binary not found, not a regular
    file, or not executable.
    """
    name = executable_for(adapter) if binary is None else os.fspath(binary)
    # The same checks as the spawn path makes, by opening it (never blocking on a FIFO).
    with open_target(name, path_env=path_env) as opened:
        return opened.path


# ---------------------------------------------------------------------------- cache


@dataclass(frozen=True)
class _Cached:
    detection: Detection
    # Every other file the result was read from, with its identity at the time.
    dependencies: tuple[tuple[str, FileIdentity], ...]


_CacheKey = tuple[str, str, FileIdentity, tuple[tuple[str, str], ...], str | None]
_cache: dict[_CacheKey, _Cached] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget every cached detection (for tests, or after an upgrade)."""
    with _cache_lock:
        _cache.clear()


def _cache_get(key: _CacheKey) -> Detection | None:
    with _cache_lock:
        hit = _cache.get(key)
    if hit is None:
        return None
    for dep_path, identity in hit.dependencies:
        try:
            still = file_identity(dep_path)
        except DetectionError:
            still = None
        if still != identity:
            with _cache_lock:
                _cache.pop(key, None)
            return None
    return hit.detection


def _cache_put(key: _CacheKey, value: _Cached) -> None:
    with _cache_lock:
        _cache.pop(key, None)
        while len(_cache) >= _MAX_CACHE_ENTRIES:
            _cache.pop(next(iter(_cache)))
        _cache[key] = value


# ---------------------------------------------------------------------------- metadata


def _read_near(target: Target, path: Path) -> tuple[bytes, FileIdentity] | None:
    """A metadata file next to the opened binary, read relative to the directory that held
    it when it was opened (not through the path again), without blocking, under the cap."""
    relative = os.path.relpath(path, target.path.parent)
    return read_regular_at(target.dir_fd, relative, MAX_METADATA_BYTES)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def _npm_package_dir(resolved: Path) -> tuple[Path, str] | None:
    """The nearest ``node_modules`` package directory holding ``resolved``, and its name."""
    for directory in resolved.parents:
        parent = directory.parent
        if parent.name == "node_modules" and not directory.name.startswith("@"):
            return directory, directory.name
        if parent.name.startswith("@") and parent.parent.name == "node_modules":
            return directory, f"{parent.name}/{directory.name}"
    return None


def _npm_bin_paths(manifest: Mapping[str, Any]) -> list[str] | None:
    bins = manifest.get("bin")
    if isinstance(bins, str):
        return [bins]
    if isinstance(bins, dict) and all(isinstance(v, str) for v in bins.values()):
        return list(bins.values())
    return None


def _npm_metadata(
    target: Target, entry: CatalogEntry
) -> tuple[str, Path, tuple[tuple[str, FileIdentity], ...]] | None:
    """Version from the npm package that contains ``resolved``, when it clearly is the
    adapter's: an expected package name, matching its directory, declaring ``resolved``
    among its ``bin`` entries. None (fall through to the probe) otherwise."""
    if not entry.npm_packages:
        return None
    resolved = target.path
    found = _npm_package_dir(resolved)
    if found is None:
        return None
    package_dir, dir_name = found
    if dir_name not in entry.npm_packages:
        return None
    manifest_path = package_dir / "package.json"
    read = _read_near(target, manifest_path)
    if read is None:
        return None
    data, identity = read
    try:
        manifest = json.loads(data.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("name") != dir_name:
        return None
    bins = _npm_bin_paths(manifest)
    if bins is None:
        return None
    declared = {os.path.realpath(package_dir / b) for b in bins if "\x00" not in b}
    if str(resolved) not in declared:
        return None
    version = manifest.get("version")
    if not isinstance(version, str):
        return None
    try:
        accepted = _validate_version(version)
    except DetectionError:
        return None
    return accepted, manifest_path, ((str(manifest_path), identity),)


_SHEBANG_PYTHON = re.compile(rb"#!(?P<interp>/\S+/python(?:\d+(?:\.\d+)?)?)[ \t]*\r?\n")


def _metadata_headers(data: bytes) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the body is the description
        key, sep, value = line.partition(":")
        if sep and not line[0].isspace():
            headers.setdefault(key.strip().lower(), []).append(value.strip())
    return headers


def _record_hash_matches(record: bytes, site: Path, target: Target) -> bool:
    """Whether RECORD lists ``script`` and, when it gives a sha256, the script still has it."""
    for line in record.decode("utf-8", errors="replace").splitlines():
        path_text, _, rest = line.partition(",")
        if not path_text or "\x00" in path_text:
            continue
        listed = os.path.normpath(os.path.join(site, path_text))
        if os.path.realpath(listed) != str(target.path):
            continue
        digest_text = rest.partition(",")[0]
        if not digest_text:
            return True
        algo, _, expected = digest_text.partition("=")
        if algo != "sha256":
            return False
        content = target.read_all(MAX_METADATA_BYTES)
        if content is None:
            return False
        actual = urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        return actual == expected
    return False


def _pip_metadata(
    target: Target, entry: CatalogEntry
) -> tuple[str, Path, tuple[tuple[str, FileIdentity], ...]] | None:
    """Version from the installed distribution whose console script ``resolved`` is.

    The script's shebang must name a python in its own ``bin`` directory; the prefix's
    site-packages must hold exactly one dist-info of an expected distribution, whose
    RECORD lists this very script (with a matching hash when one is given).
    """
    if not entry.pip_distributions:
        return None
    resolved = target.path
    try:
        head = target.read_head(4096)
    except OSError:
        return None
    first_line = head.split(b"\n", 1)[0] + b"\n"
    shebang = _SHEBANG_PYTHON.fullmatch(first_line)
    if shebang is None:
        return None
    interp = Path(os.fsdecode(shebang.group("interp")))
    bin_dir = resolved.parent
    if Path(os.path.realpath(interp.parent)) != bin_dir:
        return None
    prefix = bin_dir.parent
    wanted = {pypi_normal_form(d) for d in entry.pip_distributions}
    candidates: list[Path] = []
    for lib in ("lib", "lib64"):
        for site in sorted((prefix / lib).glob("python3*/site-packages")):
            for info in sorted(site.glob("*-info")):
                # (an egg-info of the same distribution claims the same files: two)
                dist_part = metadata_dist(info.name)
                if dist_part is not None and pypi_normal_form(dist_part) in wanted:
                    candidates.append(info)
    # lib64 is often a symlink to lib: the same dist-info seen twice is one candidate.
    unique = list(dict.fromkeys(Path(os.path.realpath(c)) for c in candidates))
    if len(unique) != 1:
        return None
    info = unique[0]
    metadata_path = info / "METADATA"
    record_path = info / "RECORD"
    metadata_read = _read_near(target, metadata_path)
    record_read = _read_near(target, record_path)
    if metadata_read is None or record_read is None:
        return None
    (metadata, metadata_identity), (record, record_identity) = metadata_read, record_read
    headers = _metadata_headers(metadata)
    names = headers.get("name", [])
    versions = headers.get("version", [])
    if len(names) != 1 or pypi_normal_form(names[0]) not in wanted or len(versions) != 1:
        return None
    if not _record_hash_matches(record, info.parent, target):
        return None
    try:
        accepted = _validate_version(versions[0])
    except DetectionError:
        return None
    deps = ((str(metadata_path), metadata_identity), (str(record_path), record_identity))
    return accepted, metadata_path, deps


# ---------------------------------------------------------------------------- probe


def probe_environment(path_env: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The whole environment a probe gets: an allow-list, never credentials."""
    env = {
        "PATH": search_path(path_env if path_env is not None else environ.get("PATH", "")),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    home = environ.get("HOME")
    if home:
        # Node-based CLIs fail without HOME; it names a directory, not a secret.
        env["HOME"] = home
    # What decides which code an interpreter loads: the probe must load what the child will.
    for name in INTERPRETER_VARIABLES:
        if name in environ:
            env[name] = environ[name]
    return env


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _leader_exited(pid: int) -> bool:
    # WNOWAIT leaves the leader a zombie, so its process-group id cannot be reused
    # before we kill the group's stragglers.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def run_probe(
    target: Target,
    argv: tuple[str, ...],
    settings: ProbeSettings,
    env: Mapping[str, str],
    *,
    cwd: str | None = None,
) -> str:
    """Run the opened file with ``argv`` and return its combined stdout and stderr as text.

    The file run is the open descriptor itself (``/proc/self/fd/N``), never the path again,
    so what is probed is what was opened. No shell, stdin from /dev/null, its own session;
    the whole process group is killed once the probe is over, so nothing it started
    survives it.
    Raises DetectionError on failure to start, timeout, oversized output, non-zero exit
    or empty output.
    """
    deadline = time.monotonic() + settings.timeout_s
    binary = target.path
    try:
        proc = subprocess.Popen(
            [target.argv0, *argv],
            executable=target.exec_path,
            pass_fds=(target.fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        if cwd is not None and exc.filename == cwd:  # the child's chdir failed, not its exec
            raise DetectionError(
                f"cannot run {binary} in the working directory {cwd}: {exc.strerror or exc}"
            ) from None
        raise DetectionError(f"cannot run {binary}: {exc.strerror or exc}") from None
    if proc.stdout is None:  # pragma: no cover - stdout=PIPE always gives a pipe
        raise DetectionError(f"cannot read the output of {binary}")
    chunks: list[bytes] = []
    total = 0
    failure: str | None = None
    try:
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    failure = f"timeout: still running after {settings.timeout_s:g}s"
                    break
                if not selector.select(remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                total += len(chunk)
                if total > settings.max_output_bytes:
                    failure = f"output exceeds {settings.max_output_bytes} bytes"
                    break
                chunks.append(chunk)
        if failure is None:
            delay = 0.001
            while not _leader_exited(proc.pid):
                if time.monotonic() >= deadline:
                    failure = f"timeout: still running after {settings.timeout_s:g}s"
                    break
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
    finally:
        _kill_group(proc.pid)
        proc.stdout.close()
        proc.wait()
    if failure is not None:
        raise DetectionError(f"{binary} {' '.join(argv)}: {failure}")
    if proc.returncode != 0:
        raise DetectionError(f"{binary} {' '.join(argv)}: exited with status {proc.returncode}")
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if not text.strip():
        raise DetectionError(f"{binary} {' '.join(argv)}: printed nothing")
    return text


# ---------------------------------------------------------------------------- detection


def detect_version(
    adapter: str,
    *,
    binary: str | os.PathLike[str] | None = None,
    version: str | None = None,
    path_env: str | None = None,
    settings: ProbeSettings | None = None,
    target: Target | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    packages: PackageIndex | None = None,
    probe: bool = True,
) -> Detection:
    """Establish the version of ``adapter``'s installed CLI, safest strategy first.

    1. ``version``, when the caller states it (validated; the binary is resolved and
       recorded only if given).
    2. npm or pip metadata of the binary, read without executing anything.
    3. ``BINARY --version`` under :func:`run_probe`, parsed by the adapter's pattern.

    ``target`` is the already opened binary (the spawn path opens it once and judges and
    runs that); without it, the binary is located and opened here. ``environ`` is the
    environment the binary will run with (default this process's): the probe gets its
    HOME and the variables that decide which code an interpreter loads, never more, and
    runs in ``cwd``, the child's working directory (a program may read files there).
    The result of 2 is cached per binary identity, while every file it was read from is
    unchanged; 3 is run at every call (a program's answer may depend on what it reads);
    failures are not cached. ``settings`` defaults to
    :meth:`ProbeSettings.from_environ`, read only when a probe is needed.
    ``packages``: the map in force's package index; an adapter the catalogue does not
    know but whose entry names its package has its metadata read like a catalogued one.
    ``probe`` False (the program is a script, not a native program): 3 is never run.
    Raises DetectionError with the reason: invalid adapter or version, binary not found or
    not executable, invalid FLOORGUARD_PROBE_TIMEOUT, probe failure, unrecognized or
    ambiguous output.
    """
    entry = entry_for(adapter)
    if entry is None and packages is not None:
        entry = _map_entry(adapter, packages)
    if version is not None:
        if not isinstance(version, str):
            raise DetectionError(f"stated version is not a string: {version!r}")
        if version != version.strip():
            raise DetectionError(f"stated version {version!r} has surrounding whitespace")
        accepted = _validate_version(version)
        if target is not None:
            where: str | None = str(target.path)
        elif binary is not None:
            where = str(resolve_binary(adapter, binary, path_env=path_env))
        else:
            where = None
        return Detection(version=accepted, detected_by="caller", binary=where, raw=None)
    run_env = os.environ if environ is None else environ
    if target is not None:
        return _detect_opened(
            adapter, entry, target, path_env=path_env, settings=settings, run_env=run_env,
            cwd=cwd, probe=probe,
        )  # fmt: skip
    name = executable_for(adapter) if binary is None else os.fspath(binary)
    with open_target(name, path_env=path_env) as opened:
        return _detect_opened(
            adapter, entry, opened, path_env=path_env, settings=settings, run_env=run_env,
            cwd=cwd, probe=probe,
        )  # fmt: skip


def _map_entry(adapter: str, packages: PackageIndex) -> CatalogEntry | None:
    """A catalogue entry for a package only the map names: its metadata, no output pattern
    (its ``--version`` answer is parsed by the generic rule)."""
    npm = frozenset(name for name, owner in packages.npm.items() if owner == adapter)
    pip = frozenset(name for name, owner in packages.pypi.items() if owner == adapter)
    if not npm and not pip:
        return None
    return CatalogEntry(adapter, adapter, (), npm_packages=npm, pip_distributions=pip)


def _detect_opened(
    adapter: str,
    entry: CatalogEntry | None,
    target: Target,
    *,
    path_env: str | None,
    settings: ProbeSettings | None,
    run_env: Mapping[str, str],
    cwd: str | None = None,
    probe: bool = True,
) -> Detection:
    resolved = target.path
    argv = entry.version_argv if entry is not None else ("--version",)
    env = probe_environment(path_env, run_env)
    # The probe's environment is part of the key: PATH decides which interpreter a script
    # runs under, PYTHONPATH and the like which code it loads.
    key: _CacheKey = (
        adapter, str(resolved), target.identity, tuple(sorted(env.items())), cwd,
    )  # fmt: skip
    cached = _cache_get(key)
    if cached is not None:
        return cached

    if entry is not None:
        for kind, reader in (("npm-metadata", _npm_metadata), ("pip-metadata", _pip_metadata)):
            found = reader(target, entry)
            if found is not None:
                accepted, source, deps = found
                detection = Detection(accepted, kind, str(resolved), str(source))
                _cache_put(key, _Cached(detection, deps))
                return detection

    if not probe:
        # A script answers --version with whatever it chooses to print, having run its code.
        raise DetectionError(
            f"{resolved} is a script whose package metadata states no valid version (a "
            "script's --version answer is never taken)"
        )
    chosen = settings if settings is not None else ProbeSettings.from_environ(os.environ)
    output = run_probe(target, argv, chosen, env, cwd=cwd)
    named = adapters_named_in(output) if entry is None else []
    if len(named) > 1:
        raise DetectionError(f"{resolved} {' '.join(argv)}: answers as {', '.join(named)}")
    try:
        accepted = parse_version_output(named[0] if named else adapter, output)
    except DetectionError as exc:
        raise DetectionError(f"{resolved} {' '.join(argv)}: {exc}") from None
    # Never kept: what a program answers may depend on anything it reads (a version
    # manager's shim answers for the version its working directory names), so each
    # judgement asks it again.
    return Detection(accepted, "probe", str(resolved), output, named[0] if named else None)
