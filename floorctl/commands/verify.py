"""``floorctl verify``: offline checks of what floorguard and floorctl produce.

The checks and their rendering live in the runtime (``floorguard.window_proof``), so that
``python -m floorguard verify chain`` and this command say exactly the same thing.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from floorctl import keys
from floorctl.commands import _progress
from floorctl.commands._output import emit_json, json_option
from floorctl.commands.chain import parse_time_option
from floorguard import window_proof
from floorguard.chain_key import load_key
from floorguard.files import MAX_CHECKPOINT_BYTES, read_regular
from floorguard.slice_verify import MACS_NOT_CHECKED

# The shipped archive in a source checkout, beside the default floor-map module.
CHECKOUT_MAPS = Path("generated/floorguard/maps")


@click.group("verify", short_help="Verify receipts and audit-chain slices offline.")
def verify() -> None:
    """Verify receipts and audit-chain slices offline."""


@verify.command("chain", short_help="Prove no unsafe spawn in a window of a slice.")
@click.argument("slice_path", metavar="SLICE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--since", metavar="TS", callback=parse_time_option, help="Window start, RFC 3339.")
@click.option("--until", metavar="TS", callback=parse_time_option, help="Window end, RFC 3339.")
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The chain's HMAC key file; without it the MACs are not checked.",
)
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A signed checkpoint (C2SP signed note) that the slice must be consistent with.",
)
@click.option(
    "--pubkey",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The public key the checkpoint is signed by.",
)
@click.option(
    "--maps",
    "map_dirs",
    multiple=True,
    metavar="DIR",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A floor-map archive folder (sha256-<hex>.json); repeatable. Default: floorguard's "
    "own maps and ./generated/floorguard/maps.",
)
@click.option(
    "--unauthenticated",
    is_flag=True,
    help="Accept a slice checked without --key-file or --checkpoint: only the links between "
    "records are checked then, which anyone can recompute; the output says so.",
)
@json_option
def verify_chain(
    slice_path: str,
    since: datetime | None,
    until: datetime | None,
    key_file: Path | None,
    checkpoint_file: Path | None,
    pubkey: Path | None,
    map_dirs: tuple[Path, ...],
    unauthenticated: bool,
    as_json: bool,
) -> None:
    """Prove that no adapter below its floor was permitted to spawn in a window of SLICE.

    SLICE is an exported chain slice (- for stdin). It must be intact, continuous and cover
    the window (--since/--until; the whole slice without them); every spawn record in the
    window is re-evaluated against the floor map it pins. The records must be
    authenticated, by the chain key (--key-file) or a signed checkpoint, unless
    --unauthenticated. Prints PROVEN, or NOT PROVEN and every finding as `seq N: reason`.
    Exit status 0 only when proven.
    """
    if checkpoint_file is not None and pubkey is None:
        raise click.UsageError("--checkpoint needs --pubkey (the key the checkpoint is signed by)")
    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since is later than --until", param_hint="--since")
    key = load_key(key_file) if key_file is not None else None
    if key is None:
        click.echo(MACS_NOT_CHECKED, err=True)
    checkpoint, checkpoint_error = None, None
    if checkpoint_file is not None and pubkey is not None:
        checkpoint, checkpoint_error = window_proof.load_checkpoint(
            read_regular(checkpoint_file, max_bytes=MAX_CHECKPOINT_BYTES, what="checkpoint"),
            keys.load_public(pubkey),
        )
    dirs = list(map_dirs) if map_dirs else window_proof.default_map_dirs([CHECKOUT_MAPS])
    report = window_proof.prove_path(
        slice_path,
        key=key,
        since=since,
        until=until,
        map_dirs=dirs,
        checkpoint=checkpoint,
        checkpoint_error=checkpoint_error,
        unauthenticated_ok=unauthenticated,
        progress=_progress.counter("verify chain", "records checked"),
    )
    if as_json:
        emit_json(window_proof.report_document(report))
    else:
        click.echo(window_proof.render_text(report), nl=False)
    if not report.proven:
        raise click.exceptions.Exit(1)


# `verify receipt` lives in its own module; the group is where floorctl finds it.
from floorctl.commands import verify_receipt  # noqa: E402

verify.add_command(verify_receipt.command)
