"""``floorctl publish``: write the signed floor map for hosts (FLOORGUARD_FLOOR_MAP)."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from floorctl import keys, publish
from floorctl import refresh as refreshing
from floorctl.commands._output import emit_json, json_option, notice, report
from floorctl.commands._values import GivenPath, WholeNumber
from floorctl.commands.refresh import DEFAULT_MODULE
from floorguard._base._time import utc_now

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@click.command("publish", short_help="Publish the floor map, signed, for hosts.")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=GivenPath(path_type=Path, file_okay=False),
    help="Directory for floor-map.json and floor-map.json.dsse (created if needed).",
)
@click.option(
    "--module",
    type=GivenPath(path_type=Path, dir_okay=False),
    default=DEFAULT_MODULE,
    show_default=True,
    help="The floor-map module to publish.",
)
@click.option(
    "--signing-key",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Publisher's private key (default: $FLOORCTL_SIGNING_KEY, else the local "
    "development key, every use of which is announced on stderr).",
)
@click.option(
    "--expires-in",
    "expires_in",
    type=WholeNumber(min=1, max=3650),
    default=publish.DEFAULT_EXPIRES_DAYS,
    show_default=True,
    metavar="DAYS",
    help="Days until hosts stop accepting this map (freeze protection).",
)
@click.option(
    "--allow-downgrade",
    is_flag=True,
    help="Publish over a newer map (or another map of the same version) in --out.",
)
@json_option
def command(
    out_dir: Path,
    module: Path,
    signing_key: Path | None,
    expires_in: int,
    allow_downgrade: bool,
    as_json: bool,
) -> None:
    """Publish the module's floor map as signed canonical JSON.

    Hosts use it when FLOORGUARD_FLOOR_MAP names floor-map.json and the signature checks
    against their trusted publisher keys. A newer map already in --out (or another map of
    the same version) is not replaced without --allow-downgrade: hosts never go back.
    """
    refreshing.refuse_unsettled(module, "publishing")

    def signer() -> Ed25519PrivateKey:
        # Only for a map fit to publish: a refusal makes and announces no key.
        return keys.resolve_signing_key(
            signing_key, dict(os.environ), notify=lambda m: notice(f"floorctl: {m}")
        ).key

    done = publish.publish(
        module,
        out_dir,
        signer,
        now=utc_now(),
        expires_in=_dt.timedelta(days=expires_in),
        allow_downgrade=allow_downgrade,
    )
    kept = publish.kept_by_hosts(done)
    if kept is not None:
        notice(f"floorctl: warning: {kept}")
    if as_json:
        emit_json(
            {
                "map": str(done.map_path),
                "signature": str(done.signature_path),
                "floor_map_hash": done.floor_map_hash,
                "map_version": done.map_version,
                "expires": done.expires,
                "adapters": done.adapters,
                "warnings": [] if kept is None else [kept],
            }
        )
        return
    report(
        f"wrote {done.map_path} and {done.signature_path}: map version "
        f"{done.map_version}, {done.adapters} adapters, {done.floor_map_hash}, "
        f"expires {done.expires}"
    )
