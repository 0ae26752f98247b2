"""``floorctl doctor``: the installed version posture, sealed as a receipt."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl.commands._output import emit_json, emit_rendered, format_option
from floorctl.errors import FloorctlError
from floorguard._commands import doctor, report_formats


@click.command("doctor", short_help="Judge every tracked adapter on PATH by the map.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too (ahead_of_last_green).")
@format_option("text", "json", "sarif", "markdown")
def command(strict: bool, output_format: str) -> None:
    """Find every tracked adapter on PATH, detect its version and judge it by the map.

    Statuses: ok, below_floor, affected (inside an advisory), waived (with the waiver and
    the days left), unknown_version, not_installed, and ahead_of_last_green (ok, but newer
    than the adapter's last-green canary version in the verified chain: a warning). The
    posture is appended to the audit chain as an adapter.version_posture receipt. Exit 1
    unless every installed tracked adapter is ok, waived or (without --strict)
    ahead_of_last_green. --format sarif (SARIF 2.1.0, for code scanning) and markdown
    (a table for a pull-request comment) report the same posture.
    """
    posture = doctor.run()
    if output_format == "json":
        emit_json(posture.to_json())
    elif output_format == "text":
        click.echo(doctor.format_table(posture))
    else:
        sarif = output_format == "sarif"
        where = report_formats.doctor_map_artifact(Path.cwd()) if sarif else None
        document = posture.to_json()
        emit_rendered(
            report_formats.render(
                "doctor",
                output_format,
                document,
                where.uri if where else None,
                strict=strict,
                lines=where.lines if where else None,
                cwd=Path.cwd(),
            )
        )
    problem = posture.problem(strict=strict)
    if problem is not None:
        raise FloorctlError(problem)
