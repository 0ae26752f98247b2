"""``floorctl verify receipt``: signature, content address, and the floor map it pins."""

from __future__ import annotations

from pathlib import Path

import click

from floorctl import render, splice
from floorctl.commands._output import emit_result, json_option, notice
from floorctl.commands._values import GivenPath
from floorctl.errors import ModuleError
from floorguard._commands import verify_commands
from floorguard._maps.map_model import entries_hash


def module_map_hash(path: Path) -> str:
    """The floor-map hash of a module's block data, in any layout floorctl renders. A module
    whose top level outside the block binds one of the block's names again, reaches its own
    namespace without naming what it binds, or reads one of them is refused, as the
    runtime's reader refuses it (render.outside_problem): importing it would not give the
    block's data."""
    text = splice.read_module_text(path)
    split, block = render.read_module(text, str(path))
    problem = render.outside_problem(split, str(path))
    if problem is not None:
        raise ModuleError(problem)
    return entries_hash(block.entries)


def map_file_hash(path: Path) -> str:
    """The floor-map hash of a module (its block's data, any layout) or of a map JSON file."""
    return verify_commands.map_file_hash(path, module_map_hash)


@click.command("receipt", short_help="Verify a receipt's signature and pinned map.")
@click.argument(
    "receipt_file", metavar="RECEIPT", type=GivenPath(path_type=Path, dir_okay=False, exists=True)
)
@click.option(
    "--pubkey",
    type=GivenPath(path_type=Path, dir_okay=False, exists=True),
    help="Public key the receipt must be signed by (default: the signing key in use, "
    "FLOORCTL_SIGNING_KEY or the development key).",
)
@click.option(
    "--floor-map",
    "floor_map",
    type=GivenPath(path_type=Path, dir_okay=False, exists=True),
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
    # floorguard's verify receipt, with floorctl's reader of every module layout.
    result = verify_commands.verify_receipt(
        receipt_file,
        pubkey=pubkey,
        floor_map=floor_map,
        content_only=content_only,
        notify=lambda message: notice(f"floorctl: {message}"),
        module_hash=module_map_hash,
    )
    emit_result(result, as_json)
