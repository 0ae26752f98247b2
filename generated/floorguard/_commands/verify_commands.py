"""The offline ``verify receipt`` and ``verify chain`` commands, as both CLIs run them.

``python -m floorguard verify`` (argparse) and ``floorctl verify`` (click) only parse their
options and print; the defaults (which public key without ``--pubkey``, which map archives
without ``--maps``), the checks, the messages and the text they print live here once, so the
two commands cannot drift apart. ``notify`` receives the notices for stderr, which each CLI
prefixes with its own name.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorguard._base import files
from floorguard._base._text import one_line, terminal_json
from floorguard._base.files import read_regular
from floorguard.errors import CanonicalizationError, FloorMapError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from floorguard._chain.receipts import CheckedReceipt
    from floorguard._proofs import tlog
    from floorguard._proofs.checkpoint import Checkpoint
    from floorguard._proofs.window_proof import ProofReport
    from floorguard._proofs.witness import Witnessed

Notify = Callable[[str], None]
# How floorctl names its signing key (floorctl's own resolution uses these same names).
SIGNING_KEY_VARIABLE = "FLOORCTL_SIGNING_KEY"
DEV_KEY_DIR = "dev-key"
PRIVATE_KEY_NAME = "signing.key"
# The shipped map archive in a source checkout, beside the default floor-map module.
CHECKOUT_MAPS = Path("generated/floorguard/maps")


# --- defaults -----------------------------------------------------------------------------


def floorctl_state_dir(environ: Mapping[str, str]) -> Path:
    """floorctl's state: ``FLOORCTL_HOME``, ``$XDG_STATE_HOME/floorctl``, or ~/.local/state."""
    if environ.get("FLOORCTL_HOME"):
        return Path(environ["FLOORCTL_HOME"])
    if environ.get("XDG_STATE_HOME"):
        return Path(environ["XDG_STATE_HOME"]) / "floorctl"
    return Path.home() / ".local" / "state" / "floorctl"


def signing_key_path(environ: Mapping[str, str]) -> Path:
    """The signing key in use: ``FLOORCTL_SIGNING_KEY``, else floorctl's development key
    (which may not exist yet)."""
    if environ.get(SIGNING_KEY_VARIABLE):
        return Path(environ[SIGNING_KEY_VARIABLE])
    return floorctl_state_dir(environ) / DEV_KEY_DIR / PRIVATE_KEY_NAME


def default_map_dirs() -> list[Path]:
    """``verify chain`` without ``--maps``: floorguard's own archive, then the checkout's
    ``generated/floorguard/maps`` when run from a project root (those that exist)."""
    from floorguard._proofs.map_archive import default_map_dirs as package_and

    return package_and([CHECKOUT_MAPS])


def load_verify_key(path: Path) -> Ed25519PublicKey:
    """A PEM public key; a PEM private key file gives its public half. Raises
    VerificationError (not such a key) and UnreadableFileError."""
    from floorguard._crypto import dsse

    data = read_regular(path, max_bytes=files.MAX_KEY_BYTES, what="public key")
    if b"PRIVATE KEY" not in data:
        return dsse.load_public_key(data, str(path))
    dsse.require_one_pem_key(data, str(path))
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise VerificationError(f"{path}: not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise VerificationError(f"{path}: not an Ed25519 private key")
    return key.public_key()


# --- verify receipt -----------------------------------------------------------------------


def module_map_hash(path: Path) -> str:
    """The hash of the data in a floor-map module of either layout, read exactly as the
    gate reads a host's module (the markers, UTF-8 and no other coding, one layout, the
    block's names bound nowhere else, literals only; the hash it states is not trusted).
    Raises FloorMapError."""
    from floorguard._maps import host_map

    data = read_regular(path, max_bytes=files.MAX_MAP_BYTES, what="floor map")
    try:
        text = data.decode("utf-8")  # as the runtime reads its map (and floorctl a module)
    except UnicodeDecodeError as exc:
        raise FloorMapError(f"{path}: floor map module is not UTF-8") from exc
    return host_map.data_hash(text, str(path))


def map_file_hash(path: Path, module_hash: Callable[[Path], str] = module_map_hash) -> str:
    """The floor-map hash of a ``.py`` module (read by ``module_hash``: floorctl passes its
    reader of every layout) or of a map JSON file (archived or published)."""
    if path.suffix == ".py":
        return module_hash(path)
    from floorguard._maps.map_model import map_file_hash as json_map_hash

    data = read_regular(path, max_bytes=files.MAX_MAP_BYTES, what="floor map")
    return json_map_hash(data, str(path))


@dataclass(frozen=True)
class ReceiptResult:
    """A receipt that verified, and the map file it was checked against (if any)."""

    checked: CheckedReceipt
    floor_map: Path | None

    def document(self) -> dict[str, Any]:
        from floorguard._chain.receipts import checked_document

        return checked_document(self.checked, floor_map_checked=self.floor_map is not None)

    def text(self) -> str:
        from floorguard._chain.receipts import checked_headline

        lines = [checked_headline(self.checked)]
        if self.checked.signed_by:
            lines.append(f"  signed by {', '.join(sorted(self.checked.signed_by))}")
        matches = f" (matches {self.floor_map})" if self.floor_map is not None else ""
        lines.append(f"  pins floor map {self.checked.pinned_map_hash}{matches}")
        # (a file name may hold a newline: escaped, so that none adds a line of its own)
        return "\n".join(one_line(line) for line in lines) + "\n"


def receipt_keys(
    data: bytes, pubkey: Path | None, environ: Mapping[str, str], notify: Notify
) -> list[Ed25519PublicKey] | None:
    """The keys a receipt is verified against: ``--pubkey``; else, for a signed receipt,
    the public half of the signing key in use (said on stderr); else None."""
    from floorguard._chain.receipts import is_envelope_document

    if pubkey is not None:
        return [load_verify_key(pubkey)]
    if not is_envelope_document(data):
        return None  # unsigned: there is no signature to check a key against
    path = signing_key_path(environ)
    if not environ.get(SIGNING_KEY_VARIABLE) and not path.exists():
        raise VerificationError(
            f"no key given: pass --pubkey or set {SIGNING_KEY_VARIABLE} "
            f"(no development key at {path})"
        )
    notify(f"no --pubkey: verifying against the public half of {path}")
    return [load_verify_key(path)]


def verify_receipt(
    path: Path,
    *,
    pubkey: Path | None,
    floor_map: Path | None,
    content_only: bool,
    notify: Notify,
    environ: Mapping[str, str] | None = None,
    module_hash: Callable[[Path], str] = module_map_hash,
) -> ReceiptResult:
    """``verify receipt``: the signature (or, with ``content_only``, an unsigned receipt's
    content address), then the map it pins against ``floor_map``. Raises VerificationError
    (naming ``path``), FloorMapError and UnreadableFileError."""
    from floorguard._chain.receipts import NO_TRUSTED_SIGNATURE, check_receipt_document

    data = read_regular(path, max_bytes=files.MAX_RECEIPT_BYTES, what="receipt")
    env = os.environ if environ is None else environ
    trusted = receipt_keys(data, pubkey, env, notify)
    try:
        checked = check_receipt_document(data, trusted, content_only=content_only)
    except (VerificationError, CanonicalizationError) as exc:
        # The key in use is only a guess at the signer: say which one was tried and how
        # to name the right one, rather than leave a newcomer with "no signature verifies".
        hint = ""
        if pubkey is None and trusted is not None and str(exc) == NO_TRUSTED_SIGNATURE:
            hint = (
                f" (tried the public half of {signing_key_path(env)}, the signing key in use; "
                "pass --pubkey with the signer's public key)"
            )
        raise VerificationError(f"{path}: {exc}{hint}") from exc
    if floor_map is not None:
        map_hash = map_file_hash(floor_map, module_hash)
        if map_hash != checked.pinned_map_hash:
            raise VerificationError(
                f"{path}: floor-map hash mismatch: the receipt pins {checked.pinned_map_hash} "
                f"but {floor_map} hashes to {map_hash} (changed after the receipt was sealed?)"
            )
    return ReceiptResult(checked, floor_map)


# --- verify chain -------------------------------------------------------------------------


INCLUSION_OR_PREVIOUS = (
    "--inclusion and --previous-checkpoint are two ways to reach the checkpoint's root: give one"
)


def verify_chain(
    slice_path: str | Path,
    *,
    key_file: Path | None,
    checkpoint: Path | None,
    pubkey: Path | None,
    maps: Sequence[Path],
    since: datetime | None,
    until: datetime | None,
    unauthenticated: bool,
    notify: Notify,
    progress: Callable[[int], None] | None = None,
    inclusion: Path | None = None,
    witness_keys: Sequence[Path] = (),
    witnesses: int | None = None,
    previous_checkpoint: Path | None = None,
    consistency: Path | None = None,
    host_keys: Path | None = None,
) -> ProofReport:
    """``verify chain``: the window proof of a slice (``-``: standard input) with the
    commands' defaults (``maps`` empty: :func:`default_map_dirs`); ``progress`` hears the
    count of records checked, now and then (see ``window_report.prove_path``); ``inclusion`` is
    an inclusion proof of the checkpoint's last record, for a slice that does not start at
    genesis; ``host_keys`` the host-keys document that host-signed records are checked with
    (``floorguard._chain.record_signature``). Raises KeyFileError (an unusable key file or host-keys
    document), VerificationError (an unusable public key), UnreadableFileError and OSError."""
    from floorguard._chain.chain_key import load_key
    from floorguard._chain.record_signature import load_host_keys
    from floorguard._proofs import window_report
    from floorguard._proofs.slice_verify import MACS_NOT_CHECKED

    key = load_key(key_file) if key_file is not None else None
    listed = load_host_keys(host_keys) if host_keys is not None else None
    if key is None and listed is None:
        notify(MACS_NOT_CHECKED)
    verified, refused, witnessed = None, None, None
    if checkpoint is not None:
        if pubkey is None:
            raise VerificationError("--checkpoint needs --pubkey (the key it is signed by)")
        data = read_regular(checkpoint, max_bytes=files.MAX_CHECKPOINT_BYTES, what="checkpoint")
        log_key = load_verify_key(pubkey)
        verified, refused = window_report.load_checkpoint(data, log_key)
        if verified is not None:
            try:
                witnessed = check_witnesses(data, checkpoint, witness_keys, witnesses, log_key)
            except VerificationError as exc:
                verified, refused = None, str(exc)
    elif witness_keys or witnesses or previous_checkpoint or consistency or inclusion:
        raise VerificationError(
            "--witness-key, --witnesses, --previous-checkpoint, --consistency and --inclusion "
            "need --checkpoint"
        )
    if inclusion is not None and previous_checkpoint is not None:
        raise VerificationError(INCLUSION_OR_PREVIOUS)
    previous, link = None, None
    if previous_checkpoint is not None and pubkey is not None:
        from floorguard._proofs import tlog

        if consistency is None:
            raise VerificationError("--previous-checkpoint needs --consistency PROOF")
        data = read_regular(
            previous_checkpoint, max_bytes=files.MAX_CHECKPOINT_BYTES, what="checkpoint"
        )
        previous, problem = window_report.load_checkpoint(data, log_key)
        if previous is not None:
            try:
                check_witnesses(data, previous_checkpoint, witness_keys, witnesses, log_key)
                link = tlog.parse_consistency(_proof_bytes(consistency), str(consistency))
            except VerificationError as exc:
                problem = str(exc)
        if problem is not None:
            verified, refused = None, refused or f"{previous_checkpoint}: {problem}"
    elif consistency is not None:
        raise VerificationError("--consistency needs --previous-checkpoint")
    proof = None
    if inclusion is not None:
        from floorguard._proofs import tlog

        proof, problem = window_report.load_inclusion(
            read_regular(inclusion, max_bytes=tlog.MAX_PROOF_BYTES, what="inclusion proof")
        )
        if problem is not None:
            refused = refused or f"{inclusion}: {problem}"
    report = window_report.prove_path(
        slice_path,
        inclusion=proof,
        previous=previous,
        consistency=link,
        progress=progress,
        key=key,
        since=since,
        until=until,
        map_dirs=list(maps) if maps else default_map_dirs(),
        checkpoint=verified,
        checkpoint_error=refused,
        unauthenticated_ok=unauthenticated,
        host_keys=listed,
    )
    if witnessed is None or report.checkpoint is None:
        return report
    return dataclasses.replace(report, witnessed=witnessed)


def json_text(document: Any) -> str:
    """One JSON document as both CLIs print it (sorted keys, UTF-8, a final newline)."""
    return terminal_json(document) + "\n"


# --- verify inclusion / consistency (the transparency log) ----------------------------------


def _checkpoint_bytes(path: Path) -> bytes:
    return read_regular(path, max_bytes=files.MAX_CHECKPOINT_BYTES, what="checkpoint")


def _proof_bytes(path: Path) -> bytes:
    from floorguard._proofs import tlog

    return read_regular(path, max_bytes=tlog.MAX_PROOF_BYTES, what="proof")


def _named(path: Path, exc: VerificationError) -> VerificationError:
    return VerificationError(f"{path}: {exc}")


def quorum_error(keys: int, witnesses: int | None) -> str | None:
    """Why ``--witnesses`` cannot go with ``keys`` witness keys (a usage error), or None.

    A quorum of 0 with witness keys is refused: the keys would count for nothing, and a
    checkpoint no witness cosigned would pass a run that reads as a witnessed one."""
    if witnesses is None:
        return None
    if witnesses < 0 or witnesses > keys:
        return f"--witnesses {witnesses} needs at least that many --witness-key (given {keys})"
    if witnesses == 0 and keys:
        return (
            f"--witnesses 0 with --witness-key: the {keys} witness key(s) would count for "
            "nothing; give --witnesses N of at least 1, or drop the --witness-key"
        )
    return None


def witness_quorum(witness_keys: Sequence[Path], witnesses: int | None) -> int:
    """How many of ``witness_keys`` must have cosigned: ``witnesses``, by default all.
    Raises VerificationError for a quorum the keys cannot meet or that makes them count for
    nothing (the command lines refuse both as usage errors first)."""
    problem = quorum_error(len(witness_keys), witnesses)
    if problem is not None:
        raise VerificationError(problem)
    return len(witness_keys) if witnesses is None else witnesses


def check_witnesses(
    data: bytes,
    where: Path,
    witness_keys: Sequence[Path],
    witnesses: int | None,
    log_key: Ed25519PublicKey,
) -> Witnessed | None:
    """The checkpoint ``data`` (from ``where``) carries the quorum of witness cosignatures;
    how many of the keys cosigned it (None with no keys). Raises VerificationError naming
    the file, or the key file that cannot be a witness."""
    needed = witness_quorum(witness_keys, witnesses)
    if not witness_keys:
        return None
    from floorguard._proofs import checkpoint as checkpoints
    from floorguard._proofs import witness

    keys = [load_verify_key(path) for path in witness_keys]
    # A quorum counts independent parties: one key twice is one witness, and the log's own
    # key would let the log vouch for itself.
    seen: dict[bytes, Path | None] = {checkpoints.raw_public(log_key): None}
    for path, key in zip(witness_keys, keys, strict=True):
        raw = checkpoints.raw_public(key)
        if raw in seen:
            first = seen[raw]
            raise VerificationError(
                f"--witness-key {path} is the log's own key: the log cannot witness itself"
                if first is None
                else f"--witness-key {path} is the same witness key as {first}: a witness "
                "counts once"
            )
        seen[raw] = path
    try:
        return witness.require_witnesses(data, keys, needed)
    except VerificationError as exc:
        raise _named(where, exc) from exc


def _witnessed_checkpoint(
    path: Path, key: Ed25519PublicKey, witness_keys: Sequence[Path], witnesses: int | None
) -> tuple[Checkpoint, Witnessed | None]:
    """The checkpoint in ``path``, verified with the log's ``key`` and, when asked, its
    witnesses' cosignatures (how many of them did). Raises VerificationError naming
    ``path``."""
    from floorguard._proofs import checkpoint as checkpoints

    data = _checkpoint_bytes(path)
    try:
        cp = checkpoints.verify(data, key)
    except VerificationError as exc:
        raise _named(path, exc) from exc
    return cp, check_witnesses(data, path, witness_keys, witnesses, key)


def verify_inclusion(
    proof: Path,
    *,
    checkpoint: Path,
    pubkey: Path,
    witness_keys: Sequence[Path] = (),
    witnesses: int | None = None,
) -> tlog.InclusionResult:
    """``verify inclusion``: the record in PROOF is at its index in the log the signed
    checkpoint states. Raises VerificationError (naming the file at fault),
    UnreadableFileError and OSError."""
    from floorguard._proofs import tlog

    key = load_verify_key(pubkey)
    cp, witnessed = _witnessed_checkpoint(checkpoint, key, witness_keys, witnesses)
    try:
        parsed = tlog.parse_inclusion(_proof_bytes(proof))
        return tlog.InclusionResult(cp, tlog.check_inclusion(parsed, cp), witnessed)
    except VerificationError as exc:
        raise _named(proof, exc) from exc


def verify_consistency(
    *,
    old: Path,
    new: Path,
    proof: Path,
    pubkey: Path,
    witness_keys: Sequence[Path] = (),
    witnesses: int | None = None,
) -> tlog.ConsistencyResult:
    """``verify consistency``: the newer checkpoint's log extends the older one's. Raises
    VerificationError (naming the file at fault), UnreadableFileError and OSError."""
    from floorguard._proofs import tlog

    key = load_verify_key(pubkey)
    (older, old_witnessed), (newer, new_witnessed) = (
        _witnessed_checkpoint(path, key, witness_keys, witnesses) for path in (old, new)
    )
    try:
        tlog.check_consistency(tlog.parse_consistency(_proof_bytes(proof)), older, newer)
    except VerificationError as exc:
        raise _named(proof, exc) from exc
    return tlog.ConsistencyResult(older, newer, old_witnessed, new_witnessed)
