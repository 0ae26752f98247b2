"""``floorctl trust rotate``: replace the trusted feed keys, authorised by the current ones."""

from __future__ import annotations

import os
from pathlib import Path

import click

from floorctl import trust
from floorctl.commands._output import notice, report
from floorctl.commands._values import GivenPath


@click.group("trust", short_help="Manage the keys trusted to sign feeds.")
def group() -> None:
    """Manage the keys trusted to sign feeds."""


@group.command("rotate", short_help="Install new trusted keys signed by the current.")
@click.option(
    "--current",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The trusted-keys file in force now (the installed keys, when some are).",
)
@click.option(
    "--new",
    "new",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The new trusted-keys file; NEW.dsse must be signed by a threshold of CURRENT "
    "(floorctl sign NEW --kind trusted-keys).",
)
def rotate(current: Path, new: Path) -> None:
    """Install NEW as the trusted keys if a threshold of CURRENT signed it.

    Afterwards fetch and refresh use the installed keys when --trusted-keys is not given.
    """
    environ = dict(os.environ)
    installed = trust.rotate(
        trust.load_trusted_keys(current),
        new,
        environ,
        notify=lambda m: notice(f"floorctl: {m}"),
    )
    report(f"installed {new} as the trusted feed keys ({installed})")
