"""The click callback of the options that name a window's ends (``--since``, ``--until``):
kept apart from the commands that use it, so that ``floorctl verify`` does not load the chain
commands (and their stores) to read two timestamps."""

from __future__ import annotations

from datetime import datetime

import click

from floorguard._base._time import parse_ts, parse_ts_ceiling
from floorguard.errors import FloorguardError


def parse_time_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """Click callback: RFC 3339 with ``Z`` or an offset (a window's ends, its start rounded
    up past microseconds); else usage error."""
    if value is None:
        return None
    try:
        return parse_ts_ceiling(value) if param.name == "since" else parse_ts(value)
    except FloorguardError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
