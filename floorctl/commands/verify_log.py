"""``floorctl verify inclusion`` and ``verify consistency``: the audit chain's transparency-log
proofs, checked offline with the log's public key (floorguard's checks, floorguard's text)."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl.commands._output import emit_result, json_option
from floorctl.commands._values import GivenPath, WholeNumber
from floorguard._commands import verify_commands

_FILE = GivenPath(path_type=Path, dir_okay=False, exists=True)

witness_key_option = click.option(
    "--witness-key",
    "witness_keys",
    type=_FILE,
    multiple=True,
    metavar="PUB",
    help="A witness's public key; repeatable. The checkpoint counts only with --witnesses "
    "of them (at least 1) cosigning it (C2SP cosignature/v1).",
)
witnesses_option = click.option(
    "--witnesses",
    type=WholeNumber(min=0),
    default=None,
    metavar="N",
    help="How many of the --witness-key must have cosigned: at least 1 (default: all of them).",
)


@click.command("inclusion", short_help="Check that one record is in a checkpoint's log.")
@click.argument("proof", metavar="PROOF", type=_FILE)
@click.option("--checkpoint", type=_FILE, required=True, help="The signed checkpoint.")
@click.option("--pubkey", type=_FILE, required=True, help="The log's public key.")
@witness_key_option
@witnesses_option
@json_option
def inclusion(
    proof: Path,
    checkpoint: Path,
    pubkey: Path,
    witness_keys: tuple[Path, ...],
    witnesses: int | None,
    as_json: bool,
) -> None:
    """Verify the signed checkpoint, then PROOF (written by `floorctl chain prove`): the
    record it carries is at its index in that log. Needs nothing else of the log. With
    --witness-key, the checkpoint also needs its witness cosignatures. Exit 0 only when
    all verify; else 1 with the reason."""
    check_quorum(witness_keys, witnesses)
    result = verify_commands.verify_inclusion(
        proof, checkpoint=checkpoint, pubkey=pubkey, witness_keys=witness_keys,
        witnesses=witnesses,
    )  # fmt: skip
    emit_result(result, as_json)


@click.command("consistency", short_help="Check that a newer checkpoint extends an older.")
@click.option("--old", type=_FILE, required=True, help="The older signed checkpoint.")
@click.option("--new", type=_FILE, required=True, help="The newer signed checkpoint.")
@click.option(
    "--proof", type=_FILE, required=True, help="The proof from `floorctl chain consistency`."
)
@click.option("--pubkey", type=_FILE, required=True, help="The log's public key.")
@witness_key_option
@witnesses_option
@json_option
def consistency(
    old: Path,
    new: Path,
    proof: Path,
    pubkey: Path,
    witness_keys: tuple[Path, ...],
    witnesses: int | None,
    as_json: bool,
) -> None:
    """Verify both signed checkpoints, then the consistency proof: the newer log holds the
    older one's records unchanged, in order, as its first records. With --witness-key,
    each checkpoint also needs its witness cosignatures. Exit 0 only when all verify; else
    1 with the reason."""
    check_quorum(witness_keys, witnesses)
    result = verify_commands.verify_consistency(
        old=old, new=new, proof=proof, pubkey=pubkey, witness_keys=witness_keys,
        witnesses=witnesses,
    )  # fmt: skip
    emit_result(result, as_json)


def check_quorum(witness_keys: tuple[Path, ...], witnesses: int | None) -> None:
    """A quorum the keys cannot meet, or one that makes them count for nothing, is a usage
    error, before any file is read (floorguard's wording)."""
    problem = verify_commands.quorum_error(len(witness_keys), witnesses)
    if problem is not None:
        raise click.UsageError(problem)
