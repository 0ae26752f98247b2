"""What floorguard knows about each agent CLI: its executable, where its metadata lives, and
the exact shape of its ``--version`` output.

Parsing is pure (text in, version out) and fail-closed: a line is trusted only when it
matches an adapter's pattern as a whole, several different versions are an error rather
than a guess, and every accepted version must be a valid PEP 440 or SemVer version.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from floorguard._maps.map_model import invalid_adapter_name
from floorguard.errors import DetectionError

# One version token. Possessive quantifiers keep matching linear on hostile output (no
# backtracking into the digit runs); suffixes such as ``-beta.1`` or ``+local`` are taken
# whole and then judged by packaging and semver, which refuse what is neither PEP 440 nor SemVer.
_VERSION_SHAPE = r"\d++(?:\.\d++)++[0-9A-Za-z]*+(?:[-.+_][0-9A-Za-z]++)*+"
_V = rf"v?(?P<version>{_VERSION_SHAPE})"
# A line that is only the version, as most CLIs print it: no leading v, which is node's own
# answer (``v20.20.2``; a copy of node under an adapter's name is not that adapter).
_N = rf"(?P<version>{_VERSION_SHAPE})"
_BARE = frozenset({_V, _N})

# A token stands alone: not glued to a word (``python3.11``) or to another token.
_STANDALONE = re.compile(
    rf"(?<![0-9A-Za-z.+_-])v?(?P<version>{_VERSION_SHAPE})(?![0-9A-Za-z+_-])",
    re.ASCII,
)

# Longer than any real version; also keeps int() in packaging far from its digit limit.
MAX_VERSION_CHARS = 128


@dataclass(frozen=True)
class CatalogEntry:
    """One agent CLI as floorguard knows it.

    ``line_patterns`` are matched against whole stripped output lines (``fullmatch``) and
    capture the version in the group ``version``. ``npm_packages`` and
    ``pip_distributions`` name the packages whose metadata may vouch for the version.
    Versions are kept exactly as printed: amp's ``0.0.1755000000-g1234abc`` is a SemVer
    pre-release (below ``0.0.1755000000``), and rewriting it as ``+g1234abc`` build metadata
    would make SemVer order it equal to the release.

    ``native``: whether the agent is published as a native program anywhere (a release
    binary, a native installer, a platform package). One that is not (a Python or node
    package only) has no native program that is it: a native file under its name, or
    answering as it, may be anything (another tool's bare version, a build bundling its
    own interpreter and any version of the agent's code), and is refused.
    """

    adapter: str
    executable: str
    line_patterns: tuple[re.Pattern[str], ...]
    version_argv: tuple[str, ...] = ("--version",)
    npm_packages: frozenset[str] = frozenset()
    pip_distributions: frozenset[str] = frozenset()
    pip_modules: frozenset[str] = frozenset()
    native: bool = False


def _patterns(*sources: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(s.replace("{V}", _V).replace("{N}", _N), re.ASCII) for s in sources)


# The platform packages npm lays claude's native build down in (the optional dependencies
# of @anthropic-ai/claude-code): its ``claude`` binary is a file of one of them.
_CLAUDE_PLATFORM_PACKAGES: Final = tuple(
    f"@anthropic-ai/claude-code-{platform}"
    for platform in ("linux-x64", "linux-arm64", "linux-x64-musl", "linux-arm64-musl",
                     "darwin-x64", "darwin-arm64", "win32-x64", "win32-arm64")
)  # fmt: skip

_ENTRIES = (
    CatalogEntry(
        adapter="aider",
        executable="aider",
        line_patterns=_patterns(r"aider {V}"),
        pip_distributions=frozenset({"aider-chat"}),
        pip_modules=frozenset({"aider"}),
    ),
    CatalogEntry(
        adapter="amp",
        executable="amp",
        line_patterns=_patterns(r"{N}"),
        npm_packages=frozenset({"@sourcegraph/amp"}),
        native=True,  # (its install script lays down a Bun-built binary)
    ),
    CatalogEntry(
        adapter="claude",
        executable="claude",
        line_patterns=_patterns(r"{V} \(Claude Code\)"),
        npm_packages=frozenset({"@anthropic-ai/claude-code", *_CLAUDE_PLATFORM_PACKAGES}),
        native=True,  # (the native installer's build)
    ),
    CatalogEntry(
        adapter="codex",
        executable="codex",
        # The Rust CLI prints ``codex-cli X``. (The early TypeScript one printed a bare ``X``,
        # but it is a node script, judged by its package's metadata and never asked: a
        # native program answering a bare version under codex's name is some other program,
        # as a copy of ninja is.)
        line_patterns=_patterns(r"codex-cli {V}"),
        npm_packages=frozenset({"@openai/codex"}),
        native=True,  # (the Rust release binaries)
    ),
    CatalogEntry(
        adapter="gemini",
        executable="gemini",
        line_patterns=_patterns(r"{N}"),
        npm_packages=frozenset({"@google/gemini-cli"}),
    ),
    CatalogEntry(
        adapter="goose",
        executable="goose",
        # A Rust binary: no package metadata to read, only the probe.
        line_patterns=_patterns(r"{N}", r"goose(?:-cli)? {V}"),
        native=True,
    ),
    CatalogEntry(
        adapter="gptme",
        executable="gptme",
        # ``gptme v0.27.0`` (first line of a longer report), click's ``gptme, version X``,
        # and the bare ``X`` of later releases.
        line_patterns=_patterns(r"gptme {V}", r"gptme, version {V}", r"{N}"),
        pip_distributions=frozenset({"gptme"}),
        pip_modules=frozenset({"gptme"}),
    ),
    CatalogEntry(
        adapter="opencode",
        executable="opencode",
        # Printed both ``0.3.58`` and ``v0.3.58``.
        line_patterns=_patterns(r"{V}"),
        npm_packages=frozenset({"opencode-ai"}),
        native=True,  # (native builds in its platform packages)
    ),
    CatalogEntry(
        adapter="qwen",
        executable="qwen",
        line_patterns=_patterns(r"{N}"),
        npm_packages=frozenset({"@qwen-code/qwen-code"}),
    ),
)

CATALOG: Mapping[str, CatalogEntry] = MappingProxyType({e.adapter: e for e in _ENTRIES})

_ADAPTER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}", re.ASCII)


def entry_for(adapter: str) -> CatalogEntry | None:
    """The catalog entry of ``adapter``, or None for an adapter floorguard has no pattern for.

    Raises DetectionError when ``adapter`` is not a valid adapter name.
    """
    if not isinstance(adapter, str) or not _ADAPTER_NAME.fullmatch(adapter):
        raise DetectionError(invalid_adapter_name(adapter))
    return CATALOG.get(adapter)


def ecosystem_of(adapter: str) -> str | None:
    """The package ecosystem a catalogued adapter is published in (``npm`` or ``PyPI``), or
    None for one floorguard knows no package of (its versions compare by PEP 440)."""
    entry = CATALOG.get(adapter)
    if entry is None:
        return None
    if entry.npm_packages:
        return "npm"
    return "PyPI" if entry.pip_distributions else None


def executable_for(adapter: str) -> str:
    """The executable name to look up on PATH for ``adapter``; raises DetectionError."""
    entry = entry_for(adapter)
    return entry.executable if entry is not None else adapter


def validate_version(text: str) -> str:
    """Return ``text`` as an accepted version string, or raise DetectionError.

    The string is kept exactly as written (never normalized, never translated from one
    ecosystem's spelling to the other's, never rewritten). It must be a valid version in at
    least one ecosystem floorguard knows: PEP 440 or SemVer 2.0.0 (npm CLIs print
    ``0.5.0-nightly.20250911.a1b2c3``). Which order it is judged in is the map entry's
    ecosystem, asked when it is judged; a version that is not valid there is an unknown
    version then.
    """
    from floorguard._maps import versions

    if not isinstance(text, str):
        raise DetectionError(f"version is not a string: {text!r}")
    if len(text) > MAX_VERSION_CHARS:
        raise DetectionError(f"version is longer than {MAX_VERSION_CHARS} characters")
    # PEP 440 first: semver is imported only for what packaging refuses.
    if not versions.is_valid(text, versions.PYPI) and not versions.is_valid(text, versions.NPM):
        raise DetectionError(f"not a valid PEP 440 or SemVer version: {text!r}")
    return text


def _distinct(versions: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(versions))


def _decide(found: list[str]) -> str:
    if not found:
        raise DetectionError("no version found in the output")
    if len(found) > 1:
        shown = ", ".join(_shorten(v) for v in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise DetectionError(f"ambiguous version output: found {shown}{more}")
    return validate_version(found[0])


def _shorten(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def parse_version_output(adapter: str, output: str) -> str:
    """The version ``adapter`` reports in its ``--version`` output, or DetectionError.

    For a catalogued adapter, only lines that match one of its patterns as a whole count;
    other lines (warnings, banners) are ignored. For any other adapter, every stand-alone
    version-like token counts. Either way exactly one distinct version must remain.
    """
    entry = entry_for(adapter)
    if entry is None:
        return parse_generic(output)
    found: list[str] = []
    for line in output.splitlines():
        stripped = line.strip()
        for pattern in entry.line_patterns:
            match = pattern.fullmatch(stripped)
            if match is not None:
                found.append(match.group("version"))
                break
    if not found:
        raise DetectionError(f"no line of the output has the version format expected for {adapter}")
    return _decide(_distinct(found))


def adapters_named_in(output: str) -> list[str]:
    """Catalogued adapters whose own ``--version`` line, one that names the tool and not
    only a bare version (``aider 0.50.0``, ``1.0.51 (Claude Code)``, ``codex-cli 0.1.0``),
    stands in ``output`` as a whole line. A renamed copy of a binary still says who it is."""
    named = []
    lines = [line.strip() for line in output.splitlines()]
    for entry in _ENTRIES:
        telling = [p for p in entry.line_patterns if p.pattern not in _BARE]
        if any(p.fullmatch(line) for p in telling for line in lines):
            named.append(entry.adapter)
    return named


def parse_generic(output: str) -> str:
    """The one version-like token in ``output``; DetectionError if there are none or several.

    The result is always a substring of ``output`` and a valid PEP 440 or SemVer version.
    """
    return _decide(_distinct(m.group("version") for m in _STANDALONE.finditer(output)))


def _invert(attribute: str) -> Mapping[str, str]:
    return MappingProxyType({name: e.adapter for e in _ENTRIES for name in getattr(e, attribute)})


# Who a package belongs to: the reverse of the catalog, for identifying what runs.
ADAPTER_OF_NPM_PACKAGE: Mapping[str, str] = _invert("npm_packages")
ADAPTER_OF_PIP_MODULE: Mapping[str, str] = _invert("pip_modules")
ADAPTER_OF_PIP_DISTRIBUTION: Mapping[str, str] = MappingProxyType(
    {re.sub(r"[-_.]+", "-", d).lower(): e.adapter for e in _ENTRIES for d in e.pip_distributions}
)
