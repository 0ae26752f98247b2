"""Options shared by the commands that read feeds from the network: fetch and refresh."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from floorctl import feeds, fetch
from floorctl.commands._values import GivenPath, WholeNumber
from floorguard._base._time import parse_ts, utc_now
from floorguard.errors import FloorguardError

F = TypeVar("F", bound=Callable[..., Any])


class Seconds(click.types.FloatParamType):
    """A number of seconds above 0 and at most ``fetch.MAX_TIMEOUT``. Not click's FloatRange:
    NaN passes its bounds (every comparison with NaN is false) and reached the socket."""

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        seconds = float(super().convert(value, param, ctx))
        if not 0 < seconds <= fetch.MAX_TIMEOUT:  # false for NaN too
            self.fail(
                f"{value!r} is not a number of seconds above 0 and at most "
                f"{fetch.MAX_TIMEOUT:,} (a day)",
                param,
                ctx,
            )
        return seconds


def feed_options(*, now_help: str) -> Callable[[F], F]:
    """--trusted-keys, --require-signed, --state-file, --now, --max-bytes, --timeout.

    ``now_help`` is the command's own help for --now (only refresh records it anywhere).
    """
    options = [
        click.option(
            "--trusted-keys",
            type=GivenPath(path_type=Path, dir_okay=False),
            help="Keys trusted to sign feeds: a PEM public key or "
            '{"threshold": N, "keys": [PEM, ...]} (default: the keys installed '
            "by `floorctl trust rotate`, if any; with none, a signature is not checked "
            "and a warning says so).",
        ),
        click.option(
            "--require-signed",
            is_flag=True,
            help="Refuse any feed without a valid signature (FEED.dsse / URL.dsse) "
            "by a threshold of trusted keys.",
        ),
        click.option(
            "--state-file",
            type=GivenPath(path_type=Path, dir_okay=False),
            help="Where accepted feed versions are remembered (rollback protection; "
            "default: feeds-state.json in floorctl's state directory).",
        ),
        click.option(
            "--now",
            "now_text",
            metavar="TS",
            help=now_help,
        ),
        click.option(
            "--max-bytes",
            type=WholeNumber(min=1, max=feeds.MAX_FEED_BYTES),
            metavar="N",
            default=fetch.DEFAULT_MAX_BYTES,
            show_default=True,
            help="Largest feed body accepted from the network, in bytes (at most "
            f"{feeds.MAX_FEED_BYTES:,}, 16 MiB; more is a usage error).",
        ),
        click.option(
            "--timeout",
            type=Seconds(),
            metavar="S",
            default=fetch.DEFAULT_TIMEOUT,
            show_default=True,
            help="Total seconds all downloads of the command may take together (each feed "
            f"and its URL.dsse), whatever the server sends; above 0, at most "
            f"{fetch.MAX_TIMEOUT:,} (a day).",
        ),
    ]

    def decorate(function: F) -> F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def reference_time(now_text: str | None) -> tuple[_dt.datetime, str]:
    """The reference time and where it came from (``clock`` or ``--now``)."""
    if now_text is None:
        return utc_now(), "clock"
    try:
        return parse_ts(now_text), "--now"
    except FloorguardError as exc:
        raise click.BadParameter(str(exc), param_hint="--now") from exc


def environ() -> dict[str, str]:
    return dict(os.environ)
