"""``floorctl keygen``: an Ed25519 signing key pair for update receipts, feeds and maps."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl import keys
from floorctl.commands._output import emit_json, json_option, report
from floorctl.commands._values import GivenPath
from floorguard._chain.chain import is_chain_id
from floorguard._crypto import dsse
from floorguard._proofs import checkpoint


def _chain_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a chain id (32 lowercase hex), checked before any key is written."""
    if value is not None and not is_chain_id(value):
        raise click.BadParameter(f"{value!r} is not a chain id (32 hex characters)")
    return value


@click.command("keygen", short_help="Create an Ed25519 signing key pair.")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=GivenPath(path_type=Path, file_okay=False),
    help="Directory for signing.key (0600) and signing.pub; created if needed.",
)
@click.option(
    "--chain-id",
    metavar="ID",
    callback=_chain_id,
    default=None,
    help="Also print the signed-note verifier key (name+keyhash+base64, for Go's "
    "golang.org/x/mod/sumdb/note) of this key's checkpoints of chain ID: their key name is "
    "their origin, floorguard/ID.",
)
@json_option
def command(out_dir: Path, chain_id: str | None, as_json: bool) -> None:
    """Create an Ed25519 key pair. Refuses to overwrite an existing key."""
    private_path, public_path = keys.generate(out_dir)
    public = keys.load_public(public_path)
    key_id = dsse.key_id(public)
    vkey = None
    if chain_id is not None:
        name = checkpoint.ORIGIN_PREFIX + chain_id
        vkey = checkpoint.verifier_key(name, checkpoint.raw_public(public))
    if as_json:
        emit_json({
            "private_key": str(private_path),
            "public_key": str(public_path),
            "keyid": key_id,
            "vkey": vkey,
        })  # fmt: skip
        return
    report(f"wrote {private_path} (private, mode 0600) and {public_path}")
    report(f"keyid {key_id}")
    if vkey is not None:
        report(f"vkey {vkey}")
