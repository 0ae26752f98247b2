"""Output helpers shared by the commands: one JSON document on stdout for ``--json``, and
notices on stderr, each one line whatever the paths and names it quotes hold."""

from __future__ import annotations

import json
from typing import Any

import click

from floorguard._text import one_line


def emit_json(document: Any) -> None:
    """Print one JSON document (sorted keys, UTF-8) on stdout."""
    click.echo(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document on stdout instead of text."
)


def notice(message: str) -> None:
    """One line on stderr (control characters escaped: a file name cannot add a line)."""
    click.echo(one_line(message), err=True)
