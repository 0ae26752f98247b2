"""``floorctl validate FILE...``: schema and semantic checks of feeds and waivers documents,
every error reported."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl import waivers
from floorctl.commands._output import emit_json, json_option, report
from floorctl.commands._values import GivenPath
from floorctl.errors import FeedError
from floorctl.feeds import MAX_FEED_BYTES, load_feed
from floorguard._base.files import read_regular
from floorguard.errors import UnreadableFileError


def _is_waivers(path: Path) -> bool:
    """A waivers document is told from a feed by its top level: ``waivers``, no ``adapters``.
    Anything unreadable is left to the feed checks, which say what is wrong with it."""
    try:
        data = read_regular(path, max_bytes=MAX_FEED_BYTES, what="file")
    except UnreadableFileError:
        return False
    return waivers.looks_like_waivers(data)


def _check(path: Path) -> dict[str, object]:
    """What one file is and how many entries it holds. Raises FeedError (WaiversError)."""
    if _is_waivers(path):
        document = waivers.load_waivers(path)
        return {"kind": "waivers", "waivers": len(document.waivers)}
    return {"kind": "feed", "adapters": len(load_feed(path).floor_map)}


@click.command("validate", short_help="Check feeds and waivers documents.")
@click.argument("feeds", nargs=-1, required=True, metavar="FILE...", type=GivenPath(path_type=Path))
@json_option
@click.pass_context
def command(ctx: click.Context, feeds: tuple[Path, ...], as_json: bool) -> None:
    """Check each FILE, a feed or a waivers document (told apart by its top-level shape),
    against its schema and the semantic rules.

    Prints one line per valid file; every problem of every invalid file is reported
    (file, JSON path, message), and the exit status is 1 if any file is invalid.
    Without FILE: the feed files and the waivers document of [tool.floorctl] (URL feeds
    are checked where they are fetched: fetch and refresh).
    """
    problems: list[tuple[str, str, str]] = []
    files: list[dict[str, object]] = []
    for path in feeds:
        try:
            checked = _check(path)
        except FeedError as error:
            problems.extend(error.problems)
            files.append(
                {
                    "file": str(path),
                    "valid": False,
                    "adapters": None,
                    "errors": [{"path": p, "message": m} for _, p, m in error.problems],
                }
            )
            continue
        if checked["kind"] == "waivers":
            count = checked["waivers"]
            files.append({"file": str(path), "valid": True, **checked, "errors": []})
            if not as_json:
                report(f"ok  {path} ({count} waivers)")
            continue
        count = checked["adapters"]
        files.append({"file": str(path), "valid": True, "adapters": count, "errors": []})
        if not as_json:
            report(f"ok  {path} ({count} adapters)")
    if as_json:
        emit_json({"valid": not problems, "files": files})
        if problems:
            ctx.exit(1)
        return
    if problems:
        raise FeedError(problems)
