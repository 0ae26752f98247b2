"""``floorctl doctor``: the installed version posture, sealed as a receipt."""

from __future__ import annotations

import click

from floorctl.commands._output import emit_json, json_option
from floorctl.errors import FloorctlError
from floorguard import doctor


@click.command("doctor")
@json_option
def command(as_json: bool) -> None:
    """Find every tracked adapter on PATH, detect its version and compare it to its floor.

    The posture is appended to the audit chain as an adapter.version_posture receipt.
    Exit 1 if any installed tracked adapter is below its floor or of unknown version.
    """
    posture = doctor.run()
    if as_json:
        emit_json(posture.to_json())
    else:
        click.echo(doctor.format_table(posture))
    if not posture.healthy:
        unhealthy = [
            a.adapter for a in posture.adapters if a.status not in (doctor.OK, doctor.NOT_INSTALLED)
        ]
        raise FloorctlError(f"below floor or of unknown version: {', '.join(unhealthy)}")
