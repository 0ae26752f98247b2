"""``floorctl verify provenance``: a wheel against its signed build provenance."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl import keys, provenance
from floorctl.commands._output import emit_json, json_option, report
from floorctl.commands._values import GivenPath
from floorguard._base.files import MAX_ENVELOPE_BYTES, read_regular
from floorguard.errors import VerificationError

MAX_WHEEL_BYTES = 256 * 1024 * 1024


@click.command("provenance", short_help="Verify a wheel against its signed provenance.")
@click.argument("wheel", type=GivenPath(path_type=Path, dir_okay=False))
@click.option(
    "--provenance",
    "provenance_file",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The provenance envelope (default: WHEEL.provenance.dsse beside the wheel).",
)
@click.option(
    "--pubkey",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Public key the provenance must be signed by.",
)
@json_option
def command(wheel: Path, provenance_file: Path | None, pubkey: Path, as_json: bool) -> None:
    """Verify WHEEL against its provenance (floorctl build).

    Exit 0 only when the key signed an in-toto Statement v1 of predicate type
    https://slsa.dev/provenance/v1 whose one subject is this wheel's file name and sha256,
    and the floor map inside the wheel is the one the provenance records; else 1.
    """
    envelope_path = provenance_file or wheel.with_name(wheel.name + provenance.SUFFIX)
    trusted = keys.load_public(pubkey)
    data = read_regular(wheel, max_bytes=MAX_WHEEL_BYTES, what="wheel")
    envelope = read_regular(envelope_path, max_bytes=MAX_ENVELOPE_BYTES, what="provenance")
    try:
        checked = provenance.verify(data, wheel.name, envelope, [trusted])
    except VerificationError as exc:
        raise VerificationError(f"{envelope_path}: {exc}") from exc
    if as_json:
        emit_json(checked.document())
        return
    report(
        f"provenance OK: {wheel.name} (sha256 {checked.wheel_sha256}) carries floor map "
        f"{checked.floor_map_hash} version {checked.map_version}, update receipt "
        f"{checked.update_receipt_id}; built by {checked.builder_id}, signed by "
        f"{', '.join(sorted(checked.signed_by))}"
    )
