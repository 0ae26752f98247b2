"""``floorctl verify``: offline checks of what floorguard and floorctl produce.

The checks and their rendering live in the runtime (``floorguard.slice_verify``), so that
``python -m floorguard verify chain`` and this command say exactly the same thing.
"""

from __future__ import annotations

from pathlib import Path

import click

from floorctl.commands._output import emit_json, json_option
from floorguard.chain_key import load_key
from floorguard.slice_verify import MACS_NOT_CHECKED, render_text, report_document, verify_path


@click.group("verify")
def verify() -> None:
    """Verify receipts and audit-chain slices offline."""


@verify.command("chain")
@click.argument("slice_path", metavar="SLICE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The chain's HMAC key file; without it the MACs are not checked.",
)
@json_option
def verify_chain(slice_path: str, key_file: Path | None, as_json: bool) -> None:
    """Check the integrity and continuity of an exported chain SLICE (- for stdin).

    Prints PROVEN, or NOT PROVEN and every integrity error as `seq N: reason`.
    Exit status 0 only when proven.
    """
    key = load_key(key_file) if key_file is not None else None
    if key is None:
        click.echo(MACS_NOT_CHECKED, err=True)
    report = verify_path(slice_path, key=key)
    if as_json:
        emit_json(report_document(report))
    else:
        click.echo(render_text(report), nl=False)
    if not report.intact:
        raise click.exceptions.Exit(1)
