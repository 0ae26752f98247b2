"""``floorctl import osv SOURCE... --out FEED``: OSV records to a schema-3 feed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from floorctl import feeds, osv, osv_packages, osv_sources
from floorctl.commands import _progress
from floorctl.commands._files import refuse_hard_linked, refuse_outputs_in, refuse_shared_files
from floorctl.commands._output import emit_json, json_option, notice
from floorctl.commands._values import GivenPath
from floorctl.errors import RecordError
from floorguard._base import atomic


@click.group("import", short_help="Turn OSV advisories into a feed.")
def group() -> None:
    """Turn advisories published elsewhere into a floorctl feed."""


@group.command("osv", short_help="OSV records to a schema-3 feed.")
@click.argument(
    "sources", nargs=-1, required=True, metavar="SOURCE...", type=GivenPath(path_type=Path)
)
@click.option(
    "--out",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The schema-3 feed to write (atomically; only if the import succeeds).",
)
@click.option(
    "--package",
    "packages",
    multiple=True,
    metavar="ECOSYSTEM:NAME=ADAPTER[:KIND]",
    help="Also map this npm package or PyPI distribution to ADAPTER (repeatable); "
    "the catalog's packages are always mapped. KIND (agent, mcp-server, library; default "
    "library) is what the feed says the package is.",
)
@click.option(
    "--watch",
    "watch",
    multiple=True,
    metavar="FEED",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Also map every package this feed's entries name to its entry (repeatable).",
)
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Report each invalid record on stderr, count it and go on (default: stop at the "
    "first, writing nothing).",
)
@json_option
def command(
    sources: tuple[Path, ...],
    out: Path,
    packages: tuple[str, ...],
    watch: tuple[Path, ...],
    skip_invalid: bool,
    as_json: bool,
) -> None:
    """Import OSV records from each SOURCE: a record file (one record or an array), a
    folder tree of them (the GitHub advisory database layout), or a zip (the OSV export
    all.zip). Only npm and PyPI packages that map to an adapter are kept; counts go
    to stderr (and with --json to stdout)."""
    # A source written over would be lost (a feed is not OSV records), and a feed written
    # into a folder SOURCE would be read as one of its records next time. A watched feed
    # may be the one rewritten: it is read whole before the atomic write.
    refuse_shared_files([("--out", out)], [("SOURCE", source) for source in sources])
    for source in sources:
        if source.is_dir():
            refuse_outputs_in([("--out", out)], source, "the OSV records this import reads")
    refuse_hard_linked("--out", out)
    watched = osv_packages.watched_packages([feeds.load_feed(path) for path in watch])
    package_map = osv.package_map(packages, watched)
    progress = _progress.counter("import osv", "records read")

    def items() -> Iterator[osv_sources.Item]:
        for source in sources:
            yield from osv_sources.iter_source(source)

    result = osv.import_records(
        items(),
        package_map,
        skip_invalid=skip_invalid,
        on_invalid=_report_invalid,
        progress=progress,
    )
    atomic.write_atomic(out, osv.feed_bytes(result.feed, str(out)))
    notice(f"floorctl: wrote {out}: {result.counts.describe()}")
    if as_json:
        emit_json({"out": str(out), **result.counts.as_json()})


def _report_invalid(error: RecordError) -> None:
    for source, path, message in error.problems:
        notice(f"floorctl: warning: {source}: {path}: {message}; invalid record skipped")
