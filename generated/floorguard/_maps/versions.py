"""Each ecosystem's version order: PEP 440 for PyPI, SemVer 2.0.0 precedence for npm.

An entry of the floor map states its ``ecosystem``; an entry without one (written from a
schema 1 or 2 feed) keeps the PEP 440 order those feeds always had, so old maps decide
exactly as they did. A string that is not a valid version of the entry's ecosystem has no
place in its order: ``parse`` raises, and the caller treats the version as unknown. No npm
version is ever read as a PEP 440 one (``0.6.0-preview.1`` is not ``0.6.0rc1``).

Both libraries are imported on first use only: ``import floorguard`` stays cheap, and
``semver`` is loaded only when an npm version is compared.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from floorguard.errors import DetectionError

PYPI: Final = "PyPI"
NPM: Final = "npm"
ECOSYSTEMS: Final = (NPM, PYPI)
# A version that starts every OSV range "from the beginning".
FROM_THE_START: Final = "0"
MAX_VERSION_CHARS: Final = 128


class InvalidVersionError(DetectionError):
    """A string that is not a valid version in the ecosystem it is compared in."""


def order_name(ecosystem: str | None) -> str:
    """How versions of an entry compare, in words: for reasons and messages."""
    return "SemVer" if ecosystem == NPM else "PEP 440"


@functools.lru_cache(maxsize=1024)
def parse(version: str, ecosystem: str | None) -> Any:
    """The comparable form of ``version`` in ``ecosystem`` (None: PEP 440, as schema 1/2).

    Raises InvalidVersionError for anything that is not a valid version there. SemVer is
    strict 2.0.0: no ``v`` prefix, no missing minor or patch, no leading zeros; build
    metadata is kept in the string but ignored by comparisons, as the specification says.
    """
    if not isinstance(version, str) or not version or len(version) > MAX_VERSION_CHARS:
        raise InvalidVersionError(f"not a valid {order_name(ecosystem)} version: {version!r}")
    if ecosystem == NPM:
        import semver

        try:
            return semver.Version.parse(version)
        except (ValueError, TypeError):
            raise InvalidVersionError(f"not a valid SemVer version: {version!r}") from None
    if ecosystem not in (None, PYPI):
        raise InvalidVersionError(f"unknown ecosystem {ecosystem!r}")
    from packaging.version import InvalidVersion, Version

    if version != version.strip():
        raise InvalidVersionError(f"not a valid PEP 440 version: {version!r}")
    try:
        return Version(version)
    except (InvalidVersion, ValueError):  # ValueError: a number past int()'s digit limit
        raise InvalidVersionError(f"not a valid PEP 440 version: {version!r}") from None


def is_valid(version: str, ecosystem: str | None) -> bool:
    try:
        parse(version, ecosystem)
    except InvalidVersionError:
        return False
    return True


def compare(left: str, right: str, ecosystem: str | None) -> int:
    """-1, 0 or 1 as ``left`` sorts before, with, or after ``right``; raises
    InvalidVersionError when either is not a version of ``ecosystem``. Build metadata
    (SemVer) and local labels (PEP 440) are ignored: a rebuild is its release."""
    a, b = order_key(left, ecosystem), order_key(right, ecosystem)
    return -1 if a < b else (1 if a > b else 0)


@functools.lru_cache(maxsize=4096)
def order_key(version: str, ecosystem: str | None) -> Any:
    """A plain tuple that orders as ``parse``'s result does. semver's rich comparisons cost
    microseconds each, and a map of many advisories compares a version hundreds of times on
    every spawn; tuples compare in C. SemVer 2.0.0 precedence: a release after its
    pre-releases; pre-release identifiers one by one, numeric ones numerically and below
    alphanumeric ones, a shorter list first when all before are equal; build ignored."""
    parsed = parse(version, ecosystem)
    if ecosystem != NPM:
        # A local label (``0.64.0+ubuntu1``) marks a rebuild of the public release, the same
        # code: it compares as that release, as SemVer ignores build metadata. (PEP 440 sorts
        # it just after the release, which would put a rebuild of an affected last_affected
        # or listed version outside the advisory.) packaging's Version compares by a cached
        # tuple key.
        return parsed if parsed.local is None else parse(parsed.public, ecosystem)
    prerelease = parsed.prerelease
    if prerelease is None:
        return (parsed.major, parsed.minor, parsed.patch, 1, ())
    identifiers = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in prerelease.split(".")
    )
    return (parsed.major, parsed.minor, parsed.patch, 0, identifiers)


# The words of the platform label an npm platform package puts where SemVer has its
# pre-release (codex's states 0.171.0-linux-x64 for the build answering 0.171.0): node's
# process.platform and process.arch values and npm's libc names, which npm's "os", "cpu"
# and "libc" fields take.
_PLATFORM_WORDS: Final = frozenset(
    {
        "aix", "android", "cygwin", "darwin", "freebsd", "haiku", "linux", "netbsd",
        "openbsd", "sunos", "win32",
        "arm", "arm64", "ia32", "loong64", "mips", "mipsel", "ppc", "ppc64", "riscv64",
        "s390", "s390x", "x64",
        "glibc", "musl",
    }
)  # fmt: skip


def same_build(answered: str, stated: str, *, npm_package: bool) -> bool:
    """Whether a native build answering ``answered`` is the build of a package that states
    ``stated``: the same version in its package's order (an npm package's SemVer, a pip
    distribution's PEP 440; build metadata and local labels aside), or, for an npm package,
    ``stated``'s release when all its SemVer pre-release is a platform label."""
    candidates = [stated]
    try:
        parsed = parse(stated, NPM) if npm_package else None
    except InvalidVersionError:
        parsed = None
    words = [] if parsed is None or parsed.prerelease is None else parsed.prerelease.split("-")
    if parsed is not None and words and all(word in _PLATFORM_WORDS for word in words):
        candidates.append(f"{parsed.major}.{parsed.minor}.{parsed.patch}")
    ecosystem = NPM if npm_package else PYPI
    return is_valid(answered, ecosystem) and any(
        is_valid(each, ecosystem) and compare(answered, each, ecosystem) == 0 for each in candidates
    )


def is_below(version: str, floor: str, ecosystem: str | None) -> bool:
    return compare(version, floor, ecosystem) < 0


def sort_key(ecosystem: str | None) -> Any:
    """A key function ordering version strings of ``ecosystem`` as ``compare`` does."""
    return functools.partial(order_key, ecosystem=ecosystem)
