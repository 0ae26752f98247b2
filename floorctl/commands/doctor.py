"""``floorctl doctor``: the installed version posture, sealed as a receipt."""

from __future__ import annotations

import click

from floorctl.commands._output import emit_json, json_option
from floorctl.errors import FloorctlError
from floorguard import doctor


@click.command("doctor")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too (ahead_of_last_green).")
@json_option
def command(strict: bool, as_json: bool) -> None:
    """Find every tracked adapter on PATH, detect its version and judge it by the map.

    Statuses: ok, below_floor, affected (inside an advisory), waived (with the waiver and
    the days left), unknown_version, not_installed, and ahead_of_last_green (ok, but newer
    than the adapter's last-green canary version in the verified chain: a warning). The
    posture is appended to the audit chain as an adapter.version_posture receipt. Exit 1
    unless every installed tracked adapter is ok, waived or (without --strict)
    ahead_of_last_green.
    """
    posture = doctor.run()
    if as_json:
        emit_json(posture.to_json())
    else:
        click.echo(doctor.format_table(posture))
    problem = posture.problem(strict=strict)
    if problem is not None:
        raise FloorctlError(problem)
