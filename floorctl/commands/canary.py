"""``floorctl canary``: seal a conformance-canary run, and show last-green.

The rules and the projection live in the runtime (``floorguard._proofs.canary``), where the window
verifier reuses them.
"""

from __future__ import annotations

import click

from floorctl.commands._output import emit_json, json_option, report
from floorguard._chain.chain import AuditChain
from floorguard._proofs import canary as canary_rules


@click.group("canary", short_help="Record canary runs; show last-green versions.")
def canary() -> None:
    """Certify adapter versions by canary runs; last-green never goes below the floor."""


@canary.command("record", short_help="Seal a canary run into the audit chain.")
@click.option("--adapter", required=True, metavar="ADAPTER", help="The adapter the canary ran.")
@click.option(
    "--version", "version", required=True, metavar="VERSION", help="The adapter version it ran."
)
@click.option(
    "--result",
    required=True,
    type=click.Choice(sorted(canary_rules.RESULTS)),
    help="What the canary run concluded.",
)
@json_option
def record(adapter: str, version: str, result: str, as_json: bool) -> None:
    """Seal an adapter.canary_receipt into the audit chain.

    Exit 2, recording nothing, when ADAPTER is not in the floor map in force or VERSION is
    not a version of its ecosystem (PEP 440, SemVer for npm) or has an epoch or local
    segment its floor does not have. Exit 1 when certification is refused (VERSION below
    the floor or inside an advisory; a waiver never certifies), whatever the result; else 0.
    Only a pass of a version the map does not refuse, newer than last-green, advances it.
    """
    outcome = canary_rules.record_run(AuditChain.from_env(), adapter, version, result)
    judgement = outcome.judgement
    if as_json:
        emit_json(
            {
                "receipt_id": outcome.receipt_id,
                "seq": outcome.seq,
                "verdict": judgement.verdict,
                "certified": judgement.certified,
                "floor": judgement.floor,
                "reason": judgement.reason,
            }
        )
    else:
        report(f"{judgement.verdict}: {judgement.reason}")
        report(f"  receipt {outcome.receipt_id} (seq {outcome.seq})")
    if judgement.verdict == canary_rules.REFUSE:
        raise click.exceptions.Exit(1)


@canary.command("last-green", short_help="Last-green per adapter, from the chain.")
@json_option
def last_green(as_json: bool) -> None:
    """Last-green per adapter, rebuilt from the audit chain (verified with its key)."""
    projection = canary_rules.chain_projection(AuditChain.from_env())
    if as_json:
        emit_json(canary_rules.last_green_document(projection))
        return
    if not projection:
        report("no adapter has a last-green version yet")
    for adapter, entry in projection.items():
        report(f"{adapter} {entry.version} (receipt {entry.receipt_id}, {entry.ts})")
