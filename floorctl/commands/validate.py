"""``floorctl validate FEED...``: schema and semantic checks of feed files, every error reported."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl.commands._output import emit_json, json_option
from floorctl.errors import FeedError
from floorctl.feeds import load_feed


@click.command("validate")
@click.argument("feeds", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
@click.pass_context
def command(ctx: click.Context, feeds: tuple[Path, ...], as_json: bool) -> None:
    """Check each FEED against its schema and the semantic rules.

    Prints one line per valid feed; every problem of every invalid feed is reported
    (file, JSON path, message), and the exit status is 1 if any feed is invalid.
    """
    problems: list[tuple[str, str, str]] = []
    files: list[dict[str, object]] = []
    for path in feeds:
        try:
            feed = load_feed(path)
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
        count = len(feed.floor_map)
        files.append({"file": str(path), "valid": True, "adapters": count, "errors": []})
        if not as_json:
            click.echo(f"ok  {path} ({count} adapters)")
    if as_json:
        emit_json({"valid": not problems, "files": files})
        if problems:
            ctx.exit(1)
        return
    if problems:
        raise FeedError(problems)
