"""``floorctl keygen``: an Ed25519 signing key pair for update receipts, feeds and maps."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl import keys
from floorctl.commands._output import emit_json, json_option
from floorguard import dsse


@click.command("keygen", short_help="Create an Ed25519 signing key pair.")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory for signing.key (0600) and signing.pub; created if needed.",
)
@json_option
def command(out_dir: Path, as_json: bool) -> None:
    """Create an Ed25519 key pair. Refuses to overwrite an existing key."""
    private_path, public_path = keys.generate(out_dir)
    key_id = dsse.key_id(keys.load_public(public_path))
    if as_json:
        emit_json(
            {"private_key": str(private_path), "public_key": str(public_path), "keyid": key_id}
        )
        return
    click.echo(f"wrote {private_path} (private, mode 0600) and {public_path}")
    click.echo(f"keyid {key_id}")
