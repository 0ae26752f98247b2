"""``floorctl doctor``: the installed version posture, sealed as a receipt."""

from __future__ import annotations

import click

from floorctl.commands._output import emit_json, json_option
from floorctl.errors import FloorctlError
from floorguard import doctor


@click.command("doctor", short_help="Judge every tracked adapter on PATH by the map.")
@json_option
def command(as_json: bool) -> None:
    """Find every tracked adapter on PATH, detect its version and judge it by the map.

    Statuses: ok, below_floor, affected (inside an advisory), waived (with the waiver and
    the days left), unknown_version, not_installed. The posture is appended to the audit
    chain as an adapter.version_posture receipt. Exit 1 unless every installed tracked
    adapter is ok or waived.
    """
    posture = doctor.run()
    if as_json:
        emit_json(posture.to_json())
    else:
        click.echo(doctor.format_table(posture))
    if not posture.healthy:
        unhealthy = [
            f"{a.adapter} ({a.status})" for a in posture.adapters if a.status not in doctor.HEALTHY
        ]
        raise FloorctlError(f"not ok or waived: {', '.join(unhealthy)}")
