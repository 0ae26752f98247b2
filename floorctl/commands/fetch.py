"""``floorctl fetch``: download a feed, verify it, and only then write it."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl import fetch, freshness, keys, trust
from floorctl.commands import _progress
from floorctl.commands._feedopts import environ, feed_options, reference_time
from floorctl.commands._files import refuse_shared_files
from floorctl.commands._output import emit_json, json_option, notice, report
from floorctl.commands._values import GivenPath
from floorguard._base._time import format_ts


@click.command("fetch", short_help="Download a feed, verify it, then write it.")
@click.argument("url")
@click.option(
    "--out",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Where the verified feed is written (atomically); its signature goes to OUT.dsse.",
)
@feed_options(
    now_help="Reference time for the feed's expiry (RFC 3339; default: the clock). Fetch "
    "writes no receipt: the time is only used for this check."
)
@json_option
def command(
    url: str,
    out: Path,
    trusted_keys: Path | None,
    require_signed: bool,
    state_file: Path | None,
    now_text: str | None,
    max_bytes: int,
    timeout: float,
    as_json: bool,
) -> None:
    """Fetch a feed over HTTPS (plain http only to loopback) and write it once verified.

    The body is capped in size and time, redirects stay on the same origin, the feed is
    validated, its URL.dsse signature checked, and rollback, mix-and-match and expiry refused
    before anything is written. Exit 1 on any refusal.
    """
    env = environ()
    state_path = state_file or freshness.default_path(env)
    refuse_shared_files(
        [
            ("--out", out),
            ("--out (signature)", Path(f"{out}{trust.SIGNATURE_SUFFIX}")),
            ("--state-file", state_path),
        ],
        [("--trusted-keys", trusted_keys or trust.installed_path(env))],
    )
    now, _ = reference_time(now_text)
    trusted = trust.resolve_trusted_keys(trusted_keys, env)
    if require_signed and trusted is None:
        raise click.UsageError(
            "--require-signed needs --trusted-keys (or keys installed by `floorctl trust rotate`)"
        )
    fetched = fetch.download(
        url,
        out,
        trusted=trusted,
        require_signed=require_signed,
        limits=fetch.Limits(max_bytes=max_bytes, timeout=timeout),
        state_path=state_path,
        cache_dir=keys.state_dir(env) / fetch.CACHE_DIR,
        now=now,
        progress=_progress.download(),
        notify=lambda message: notice(f"floorctl: {message}"),
    )
    feed = fetched.feed
    if as_json:
        emit_json(
            {
                **feed.identity(),
                "out": str(out),
                "not_modified": fetched.not_modified,
                "reference_time": format_ts(now),
                "adapters": len(feed.floor_map),
            }
        )
        return
    what = f"feed {feed.feed_id!r} version {feed.version}" if feed.feed_id else "feed (schema 1)"
    signed = f", signed by {len(feed.signed_by)} trusted key(s)" if feed.signed_by else ", unsigned"
    reuse = " (not modified: cached copy re-verified)" if fetched.not_modified else ""
    report(f"wrote {out}: {what}, {len(feed.floor_map)} adapters{signed}{reuse}")
