"""``floorctl build``: the floorguard wheel and sdist with a floor map, and its provenance."""

from __future__ import annotations

import os
from pathlib import Path

import click

from floorctl import build, keys, provenance
from floorctl import refresh as refreshing
from floorctl.commands._output import emit_json, json_option, notice, report
from floorctl.commands._values import GivenPath
from floorctl.commands.refresh import DEFAULT_MODULE
from floorctl.errors import BuildError
from floorguard._base import files
from floorguard._base._time import now_ts
from floorguard._base.files import read_regular
from floorguard.errors import VerificationError

DEFAULT_SOURCE = Path("generated")


@click.command("build", short_help="Build the floorguard wheel, sdist and provenance.")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=GivenPath(path_type=Path, file_okay=False),
    help="Folder for the wheel, the sdist and WHEEL.provenance.dsse (created if needed).",
)
@click.option(
    "--module",
    type=GivenPath(path_type=Path, dir_okay=False),
    default=DEFAULT_MODULE,
    show_default=True,
    help="The floor-map module the package carries; refused if its data does not match the "
    "hash it states.",
)
@click.option(
    "--receipt",
    "receipt_file",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The signed update receipt of that map (refresh --receipt-out); it must pin exactly "
    "the module's map hash and version. Its id goes into the provenance.",
)
@click.option(
    "--receipt-pubkey",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Public key the receipt is signed by (default: the public half of the signing key).",
)
@click.option(
    "--signing-key",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Private key that signs the provenance (default: $FLOORCTL_SIGNING_KEY, else the "
    "development key).",
)
@click.option(
    "--source",
    type=GivenPath(path_type=Path, file_okay=False),
    default=DEFAULT_SOURCE,
    show_default=True,
    help="The floorguard project (its pyproject.toml, README.md and floorguard/).",
)
@click.option(
    "--builder-id",
    default=provenance.DEFAULT_BUILDER_ID,
    show_default=True,
    help="The builder's URI recorded in the provenance (e.g. the CI workflow's).",
)
@json_option
def command(
    out_dir: Path,
    module: Path,
    receipt_file: Path,
    receipt_pubkey: Path | None,
    signing_key: Path | None,
    source: Path,
    builder_id: str,
    as_json: bool,
) -> None:
    """Build the floorguard wheel and sdist carrying the module's floor map.

    Reproducible: two builds of one map are byte-identical (every timestamp is
    1980-01-01, files in sorted order). The version is the release followed by the map's
    version (0.2.0 with map version 7: 0.2.0.7). Also writes WHEEL.provenance.dsse, a signed
    in-toto statement (SLSA provenance v1) naming the wheel's sha256, the floor-map hash,
    the map version and the update receipt id; check it with `floorctl verify provenance`.
    """
    started = now_ts()
    refreshing.refuse_unsettled(module, "building")
    environ = dict(os.environ)
    resolved = keys.resolve_signing_key(
        signing_key, environ, notify=lambda m: notice(f"floorctl: {m}")
    )
    trusted = (
        keys.load_public(receipt_pubkey)
        if receipt_pubkey is not None
        else resolved.key.public_key()
    )
    mapped = build.read_map_module(module)
    receipt_data = read_regular(receipt_file, max_bytes=files.MAX_RECEIPT_BYTES, what="receipt")
    try:
        receipt = provenance.check_update_receipt(
            receipt_data,
            str(receipt_file),
            [trusted],
            mapped.active.floor_map_hash,
            mapped.active.map_version,
        )
    except VerificationError as exc:
        raise BuildError(f"cannot build: {exc}") from exc
    with build.temporary_work() as work:
        artifacts = build.build(source, mapped, module, Path(work))
        wheel_sha = build.file_sha256(artifacts.wheel)
        statement = provenance.statement(
            wheel_name=artifacts.wheel.name,
            wheel_sha256=wheel_sha,
            sdist_name=artifacts.sdist.name,
            sdist_sha256=build.file_sha256(artifacts.sdist),
            version=artifacts.version,
            module=provenance.portable(module),
            module_sha256=build.module_digest(mapped),
            source=provenance.portable(source),
            receipt=receipt,
            tooling=artifacts.backend_versions,
            builder_id=builder_id,
            started=started,
            finished=now_ts(),
            source_date_epoch=build.BUILD_EPOCH,
        )
        envelope = provenance.sign(statement, resolved.key)
        wheel, sdist, provenance_path = build.publish(artifacts, envelope, out_dir)
    if as_json:
        emit_json(
            {
                "wheel": str(wheel),
                "sdist": str(sdist),
                "provenance": str(provenance_path),
                "version": artifacts.version,
                "sha256": wheel_sha,
                "floor_map_hash": receipt.floor_map_hash,
                "map_version": receipt.map_version,
                "update_receipt_id": receipt.receipt_id,
            }
        )
        return
    report(
        f"built floorguard {artifacts.version} (floor map version {receipt.map_version}, "
        f"{receipt.floor_map_hash}): {wheel}, {sdist}, {provenance_path}"
    )
