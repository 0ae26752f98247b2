"""Build provenance of a floorguard wheel: an in-toto Statement v1 with a SLSA v1 predicate,
in a DSSE envelope (payloadType ``application/vnd.in-toto+json``), Ed25519-signed.

The subject is the wheel (file name and sha256). The predicate records what decides the
package's behaviour: the floor-map hash, the map's version and the id of the signed update
receipt that made that map, plus the build tooling, so that a verifier can tell which map a
wheel enforces and where it came from. No path of the build machine is recorded: paths are
kept as given when relative, else reduced to their name. Times live in ``runDetails.
metadata`` only, so two builds of one commit differ there and nowhere else.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from floorguard._base._canonical import canonical_bytes, is_digest
from floorguard._chain import receipts
from floorguard._crypto import dsse
from floorguard._maps.active_map import parse_map_module
from floorguard.errors import CanonicalizationError, FloorMapError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

STATEMENT_TYPE = receipts.STATEMENT_TYPE
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:floorctl:build-type:floorguard-wheel:v1"
DEFAULT_BUILDER_ID = "urn:floorctl:builder:local"
SUFFIX = ".provenance.dsse"  # build.PROVENANCE_SUFFIX
MAP_MEMBER = "floorguard/floor_map.py"
MAX_MAP_MEMBER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class UpdateReceipt:
    """A signed floor-update receipt checked to have made exactly the map being built."""

    receipt_id: str
    floor_map_hash: str
    map_version: int


def check_update_receipt(
    data: bytes, source: str, trusted: Iterable[Ed25519PublicKey], map_hash: str, version: int
) -> UpdateReceipt:
    """Verify the update receipt (``refresh --receipt-out``) of the map being built.

    Its signature must verify against ``trusted`` and it must pin exactly ``map_hash`` as its
    new map at ``version``: a package never claims a receipt for another map. Raises
    VerificationError.
    """
    try:
        verified = receipts.verify_update_envelope(data, trusted)
    except VerificationError as exc:
        raise VerificationError(f"{source}: not a verified update receipt: {exc}") from exc
    pinned = verified.receipt["new_floor_map_hash"]
    if pinned != map_hash:
        raise VerificationError(
            f"{source}: the update receipt's new_floor_map_hash is {pinned}, but the module's "
            f"map hashes to {map_hash}: it is not the receipt of this map"
        )
    if verified.receipt.get("new_map_version") != version:
        raise VerificationError(
            f"{source}: the update receipt's new_map_version is "
            f"{verified.receipt.get('new_map_version')!r}, but the module's map is version "
            f"{version}"
        )
    return UpdateReceipt(verified.receipt_id, pinned, version)


def portable(path: Path | str) -> str:
    """A path for the record: as given when relative, else its name (never the machine's)."""
    pure = PurePath(path)
    if pure.is_absolute() or ".." in pure.parts:
        return pure.name
    return pure.as_posix()


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def statement(
    *,
    wheel_name: str,
    wheel_sha256: str,
    sdist_name: str,
    sdist_sha256: str,
    version: str,
    module: str,
    module_sha256: str,
    source: str,
    receipt: UpdateReceipt,
    tooling: Mapping[str, str],
    builder_id: str,
    started: str,
    finished: str,
    source_date_epoch: int,
) -> dict[str, Any]:
    """The in-toto Statement v1 (SLSA provenance v1) of a built wheel."""
    dependencies: list[dict[str, Any]] = [
        {
            "name": "floor-map",
            "digest": {"sha256": _hex(receipt.floor_map_hash)},
            "annotations": {"map_version": receipt.map_version},
        },
        {"name": "floor-update-receipt", "digest": {"sha256": _hex(receipt.receipt_id)}},
        {"name": module, "digest": {"sha256": _hex(module_sha256)}},
    ]
    dependencies += [
        {"name": name, "uri": f"pkg:pypi/{name}@{tooling[name]}"}
        for name in sorted(tooling)
        if name != "python"
    ]
    if "python" in tooling:
        dependencies.append({"name": "python", "annotations": {"version": tooling["python"]}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": wheel_name, "digest": {"sha256": wheel_sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "module": module,
                    "source": source,
                    "floor_map_hash": receipt.floor_map_hash,
                    "map_version": receipt.map_version,
                    "update_receipt_id": receipt.receipt_id,
                },
                "internalParameters": {
                    "distribution": "floorguard",
                    "version": version,
                    "backend": "hatchling.build",
                    "source_date_epoch": source_date_epoch,
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": builder_id},
                "metadata": {"startedOn": started, "finishedOn": finished},
                "byproducts": [{"name": sdist_name, "digest": {"sha256": sdist_sha256}}],
            },
        },
    }


def sign(document: Mapping[str, Any], key: Ed25519PrivateKey) -> bytes:
    """The DSSE envelope (JSON bytes) over the statement's canonical bytes."""
    return dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, canonical_bytes(document), key).to_bytes()


@dataclass(frozen=True)
class VerifiedProvenance:
    wheel_name: str
    wheel_sha256: str
    floor_map_hash: str
    map_version: int
    update_receipt_id: str
    builder_id: str
    signed_by: frozenset[str]

    def document(self) -> dict[str, Any]:
        return {
            "verified": True,
            "wheel": self.wheel_name,
            "sha256": self.wheel_sha256,
            "floor_map_hash": self.floor_map_hash,
            "map_version": self.map_version,
            "update_receipt_id": self.update_receipt_id,
            "builder_id": self.builder_id,
            "signed_by": sorted(self.signed_by),
        }


def _field(mapping: Any, name: str, where: str) -> Any:
    if not isinstance(mapping, dict) or name not in mapping:
        raise VerificationError(f"provenance lacks {where}.{name}")
    return mapping[name]


def _map_in_wheel(wheel: bytes, name: str) -> tuple[str, int]:
    """The hash and version of the floor map the wheel carries. Raises VerificationError."""
    try:
        with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
            info = archive.getinfo(MAP_MEMBER)
            if info.file_size > MAX_MAP_MEMBER_BYTES:
                raise VerificationError(f"{name}: {MAP_MEMBER} is larger than 64 MiB")
            text = archive.read(info).decode("utf-8")
    except KeyError as exc:
        raise VerificationError(f"{name}: the wheel carries no {MAP_MEMBER}") from exc
    except (zipfile.BadZipFile, UnicodeDecodeError, ValueError) as exc:
        raise VerificationError(f"{name}: not a readable wheel: {exc}") from exc
    try:
        active = parse_map_module(text, f"{name}!{MAP_MEMBER}")
    except FloorMapError as exc:
        raise VerificationError(str(exc)) from exc
    return active.floor_map_hash, active.map_version


def verify(
    wheel: bytes, wheel_name: str, envelope: bytes, trusted: Iterable[Ed25519PublicKey]
) -> VerifiedProvenance:
    """Check a wheel against its provenance envelope. Raises VerificationError.

    Holds only if a trusted key signed the envelope, the payload is a canonical in-toto
    Statement v1 with the SLSA v1 predicate type, its one subject names this wheel's file
    and sha256, and the floor map inside the wheel is the one the predicate records.
    """
    parsed = dsse.parse_envelope(envelope)
    document, signed_by = receipts.open_statement(parsed, trusted, PREDICATE_TYPE)
    try:
        canonical = canonical_bytes(document)
    except CanonicalizationError as exc:  # NaN, an integer beyond JSON's: never floorctl's
        raise VerificationError(f"signed payload is not in canonical form: {exc}") from exc
    if canonical != parsed.payload:
        raise VerificationError("signed payload is not in canonical form")
    subjects = document.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise VerificationError("provenance must have exactly one subject")
    subject = subjects[0]
    if subject.get("name") != wheel_name:
        raise VerificationError(
            f"provenance subject is {subject.get('name')!r}, not this wheel {wheel_name!r}"
        )
    actual = hashlib.sha256(wheel).hexdigest()
    stated = _field(subject.get("digest"), "sha256", "subject.digest") if subject else None
    if stated != actual:
        raise VerificationError(
            f"{wheel_name}: sha256 is {actual}, but the provenance names {stated} "
            "(the wheel changed after it was built)"
        )
    predicate = _field(document, "predicate", "statement")
    definition = _field(predicate, "buildDefinition", "predicate")
    _field(definition, "buildType", "predicate.buildDefinition")
    _field(definition, "resolvedDependencies", "predicate.buildDefinition")
    params = _field(definition, "externalParameters", "predicate.buildDefinition")
    map_hash = _field(params, "floor_map_hash", "externalParameters")
    map_version = _field(params, "map_version", "externalParameters")
    receipt_id = _field(params, "update_receipt_id", "externalParameters")
    if not is_digest(map_hash) or not is_digest(receipt_id):
        raise VerificationError("provenance floor_map_hash or update_receipt_id is not a digest")
    if type(map_version) is not int:
        raise VerificationError("provenance map_version is not an integer")
    run = _field(predicate, "runDetails", "predicate")
    builder_id = _field(_field(run, "builder", "predicate.runDetails"), "id", "runDetails.builder")
    if not isinstance(builder_id, str):
        raise VerificationError("provenance runDetails.builder.id is not a string")
    carried_hash, carried_version = _map_in_wheel(wheel, wheel_name)
    if (carried_hash, carried_version) != (map_hash, map_version):
        raise VerificationError(
            f"{wheel_name}: carries floor map {carried_hash} version {carried_version}, but the "
            f"provenance records {map_hash} version {map_version}"
        )
    return VerifiedProvenance(
        wheel_name, actual, map_hash, map_version, receipt_id, builder_id, signed_by
    )
