"""``floorctl verify receipt``: signature, content address, and the floor map it pins."""

from __future__ import annotations

import os
from pathlib import Path

import click

from floorctl import keys, render, splice
from floorctl.commands._output import emit_json, json_option, notice
from floorguard import files, map_model, receipts
from floorguard.errors import VerificationError
from floorguard.files import read_regular
from floorguard.map_model import entries_hash


def map_file_hash(path: Path) -> str:
    """The floor-map hash of a module (its block's data, any layout) or of a map JSON file."""
    if path.suffix == ".py":
        _, block = render.read_module(splice.read_module_text(path), str(path))
        return entries_hash(block.entries)
    data = read_regular(path, max_bytes=files.MAX_MAP_BYTES, what="floor map")
    return map_model.map_file_hash(data, str(path))


@click.command("receipt", short_help="Verify a receipt's signature and pinned map.")
@click.argument(
    "receipt_file", metavar="RECEIPT", type=click.Path(path_type=Path, dir_okay=False, exists=True)
)
@click.option(
    "--pubkey",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Public key the receipt must be signed by (default: the signing key in use).",
)
@click.option(
    "--floor-map",
    "floor_map",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="A floor-map module or map JSON; fails if its hash is not the one the receipt pins.",
)
@click.option(
    "--content-only",
    is_flag=True,
    help="Accept an unsigned receipt (a chain export line) by its content address alone; "
    "the output says it is unsigned. A signed receipt is still checked by its signature.",
)
@json_option
def command(
    receipt_file: Path,
    pubkey: Path | None,
    floor_map: Path | None,
    content_only: bool,
    as_json: bool,
) -> None:
    """Verify a receipt offline. Exit 0 only when a signature verifies against the given
    (or the signing) key, or with --content-only when the content address does; else 1."""
    data = read_regular(receipt_file, max_bytes=files.MAX_RECEIPT_BYTES, what="receipt")
    trusted = None
    if pubkey is not None:
        trusted = [keys.load_public(pubkey)]
    elif receipts.is_envelope_document(data):
        resolved = keys.resolve_signing_key(None, dict(os.environ), create_dev_key=False)
        notice(f"floorctl: no --pubkey: verifying against the public half of {resolved.path}")
        trusted = [resolved.key.public_key()]
    try:
        checked = receipts.check_receipt_document(data, trusted, content_only=content_only)
    except VerificationError as exc:
        raise VerificationError(f"{receipt_file}: {exc}") from exc
    map_hash = map_file_hash(floor_map) if floor_map is not None else None
    if map_hash is not None and map_hash != checked.pinned_map_hash:
        raise VerificationError(
            f"{receipt_file}: floor-map hash mismatch: the receipt pins {checked.pinned_map_hash} "
            f"but {floor_map} hashes to {map_hash} (changed after the receipt was sealed?)"
        )
    if as_json:
        emit_json(receipts.checked_document(checked, floor_map_checked=map_hash is not None))
        return
    click.echo(receipts.checked_headline(checked))
    if checked.signed_by:
        click.echo(f"  signed by {', '.join(sorted(checked.signed_by))}")
    click.echo(
        f"  pins floor map {checked.pinned_map_hash}"
        + (f" (matches {floor_map})" if map_hash else "")
    )
