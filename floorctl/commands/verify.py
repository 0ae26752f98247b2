"""``floorctl verify``: offline checks of what floorguard and floorctl produce.

The defaults, the checks and their rendering live in the runtime
(``floorguard._commands.verify_commands``, ``floorguard._proofs.window_report``), so that
``python -m floorguard verify`` and these commands take the same options and say exactly the
same thing.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from floorctl.commands import _progress, verify_log
from floorctl.commands._output import emit_json, emit_rendered, format_option, notice
from floorctl.commands._time_option import parse_time_option
from floorctl.commands._values import ExistingFolder, GivenPath
from floorguard._base._time import window_order_error
from floorguard._commands import verify_commands


@click.group("verify", short_help="Verify receipts and audit-chain slices offline.")
def verify() -> None:
    """Verify receipts, audit-chain slices and build provenance offline."""


@verify.command("chain", short_help="Prove no unsafe spawn in a window of a slice.")
@click.argument("slice_path", metavar="SLICE", type=GivenPath(dir_okay=False, allow_dash=True))
@click.option("--since", metavar="TS", callback=parse_time_option, help="Window start, RFC 3339.")
@click.option("--until", metavar="TS", callback=parse_time_option, help="Window end, RFC 3339.")
@click.option(
    "--key-file",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="The chain's HMAC key file; without it the MACs are not checked.",
)
@click.option(
    "--host-keys",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help='The hosts\' public keys, {"hosts": {NAME: PEM, ...}}: host-signed records are '
    "checked with them, and the output names the host that wrote each record.",
)
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A signed checkpoint (C2SP signed note) that the slice must be consistent with.",
)
@click.option(
    "--pubkey",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The public key the checkpoint is signed by.",
)
@click.option(
    "--inclusion",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    metavar="PROOF",
    help="An inclusion proof of the checkpoint's last record (floorctl chain prove), needed "
    "when the slice does not start at genesis.",
)
@click.option(
    "--previous-checkpoint",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The checkpoint the last audit ended at: with --consistency, the records appended "
    "since it are bound to --checkpoint without the records before it.",
)
@click.option(
    "--consistency",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    metavar="PROOF",
    help="The consistency proof from --previous-checkpoint to --checkpoint.",
)
@verify_log.witness_key_option
@verify_log.witnesses_option
@click.option(
    "--maps",
    "map_dirs",
    multiple=True,
    metavar="DIR",
    type=ExistingFolder(),
    help="A floor-map archive folder (sha256-<hex>.json); repeatable. Default: floorguard's "
    "own maps and ./generated/floorguard/maps.",
)
@click.option(
    "--unauthenticated",
    is_flag=True,
    help="Accept a slice checked without --key-file or --checkpoint: only the links between "
    "records are checked then, which anyone can recompute; the output says so.",
)
@format_option("text", "json", "sarif", "markdown")
def verify_chain(
    slice_path: str,
    since: datetime | None,
    until: datetime | None,
    key_file: Path | None,
    host_keys: Path | None,
    checkpoint_file: Path | None,
    pubkey: Path | None,
    inclusion: Path | None,
    previous_checkpoint: Path | None,
    consistency: Path | None,
    witness_keys: tuple[Path, ...],
    witnesses: int | None,
    map_dirs: tuple[Path, ...],
    unauthenticated: bool,
    output_format: str,
) -> None:
    """Prove that no adapter below its floor was permitted to spawn in a window of SLICE.

    SLICE is an exported chain slice (- for stdin). It must be intact, continuous and cover
    the window (--since/--until; the whole slice without them); every spawn record in the
    window is re-evaluated against the floor map it pins. The records must be
    authenticated, by the chain key (--key-file), the hosts' keys (--host-keys) or a signed
    checkpoint, unless --unauthenticated; given --key-file or --host-keys, a record neither
    verifies (an HMAC record without --key-file, a host-signed one without --host-keys or
    by a host it does not list) fails. Prints PROVEN, or NOT PROVEN and every finding as
    `seq N: reason` (--format json, sarif or markdown: the same verdict and findings); with
    --host-keys, also the host that wrote the records. Exit status 0 only when proven.
    """
    if checkpoint_file is not None and pubkey is None:
        raise click.UsageError("--checkpoint needs --pubkey (the key the checkpoint is signed by)")
    # (in the order python -m floorguard checks them: the same usage error first)
    verify_log.check_quorum(witness_keys, witnesses)
    if (witness_keys or witnesses is not None) and checkpoint_file is None:
        raise click.UsageError("--witness-key and --witnesses need --checkpoint")
    if (previous_checkpoint is None) != (consistency is None):
        raise click.UsageError("--previous-checkpoint and --consistency go together")
    if previous_checkpoint is not None and checkpoint_file is None:
        raise click.UsageError("--previous-checkpoint needs --checkpoint")
    if inclusion is not None and checkpoint_file is None:
        raise click.UsageError("--inclusion needs --checkpoint")
    if inclusion is not None and previous_checkpoint is not None:
        raise click.UsageError(verify_commands.INCLUSION_OR_PREVIOUS)
    disordered = window_order_error(since, until)
    if disordered is not None:
        raise click.BadParameter(disordered, param_hint="--since")
    # The defaults, the checks and the text are floorguard's: python -m floorguard verify
    # chain runs the very same.
    report = verify_commands.verify_chain(
        slice_path,
        key_file=key_file,
        host_keys=host_keys,
        checkpoint=checkpoint_file,
        pubkey=pubkey,
        maps=map_dirs,
        since=since,
        until=until,
        unauthenticated=unauthenticated,
        notify=lambda message: notice(f"floorctl: {message}"),
        progress=_progress.counter("verify chain", "records checked"),
        inclusion=inclusion,
        witness_keys=witness_keys,
        witnesses=witnesses,
        previous_checkpoint=previous_checkpoint,
        consistency=consistency,
    )
    # (Loaded here: every other verify command, run far more often, needs neither.)
    from floorguard._commands import report_formats  # noqa: PLC0415
    from floorguard._proofs import window_report as window_proof  # noqa: PLC0415

    if output_format == "json":
        emit_json(window_proof.report_document(report))
    elif output_format == "text":
        click.echo(window_proof.render_text(report), nl=False)
    else:
        document = window_proof.report_document(report)
        where = report_formats.artifact_uri(slice_path, Path.cwd())
        emit_rendered(report_formats.render("chain", output_format, document, where))
    if not report.proven:
        raise click.exceptions.Exit(1)


# `verify receipt`, `verify provenance` and the log's checks live in their own modules; the
# group is where floorctl finds them.
from floorctl.commands import verify_provenance, verify_receipt  # noqa: E402

verify.add_command(verify_receipt.command)
verify.add_command(verify_provenance.command)
verify.add_command(verify_log.inclusion)
verify.add_command(verify_log.consistency)
