"""floorctl's error hierarchy. The CLI maps these (and floorguard's) to exit codes in one place."""

from __future__ import annotations


class FloorctlError(Exception):
    """Base of every error floorctl raises on purpose: exit status 1, one line on stderr."""


class FeedError(FloorctlError):
    """A feed is unreadable or invalid. ``problems`` lists every (file, JSON path, message)."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems
        first = problems[0] if problems else ("?", "$", "invalid feed")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{first[0]}: {first[1]}: {first[2]}{more}")


class WaiversError(FeedError):
    """A waivers document is unreadable or invalid, or a waiver does not fit the floor map.
    ``problems`` lists every (file, JSON path, message), as for a feed."""


class RecordError(FeedError):
    """An OSV record (or the file or zip member holding it) is unreadable or invalid.
    ``problems`` lists (file or ``ZIP!member``, JSON path, message), as for a feed."""


class ModuleError(FloorctlError):
    """The floor-map module cannot be read, spliced or written safely."""


class RenderError(FloorctlError):
    """A rendered block failed the data-only check; nothing was written."""


class DriftError(FloorctlError):
    """The block was edited by hand (stated hash no longer matches) and --force was not given."""


class DowngradeRefused(FloorctlError):
    """The new map lowers a floor or drops an adapter, and --allow-downgrade was not given."""


class StaleModule(FloorctlError):
    """``--check`` found the module out of date."""


class SigningError(FloorctlError):
    """A key cannot be read or created, or signing failed."""


class FetchError(FloorctlError):
    """A download was refused (scheme, origin, redirect, size, deadline, status).

    Nothing was written.
    """


class TrustError(FloorctlError):
    """A signature or trusted-keys file did not check out; the signed data was not accepted."""


class FreshnessError(FloorctlError):
    """A feed is older than one already accepted (rollback), differs at the same version
    (mix-and-match), or is expired (freeze)."""


class ConcurrentUpdate(FloorctlError):
    """The module changed under a refresh that had already read it; nothing was written."""


class MergeConflict(FloorctlError):
    """Feeds disagree in a way no rule settles (one adapter in two ecosystems, a floor that
    is not a version of the ecosystem another feed states); nothing was merged."""


class BuildError(FloorctlError):
    """A distribution cannot be built as asked (source, backend, update receipt); nothing
    was written to the output folder."""


class ConfigError(FloorctlError):
    """The configuration (``[tool.floorctl]`` in pyproject.toml, or ``--config``) cannot be
    read or holds an unknown key or a wrong value: a usage error, exit status 2."""
