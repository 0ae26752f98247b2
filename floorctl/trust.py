"""Which keys floorctl trusts for feeds, how feed signatures are checked, and key rotation.

Trusted keys come from ``--trusted-keys PATH``, else from the file that ``floorctl trust
rotate`` installed in floorctl's state directory. A signature is never ignored: with
trusted keys (and so with ``--require-signed``, which needs them), a signature that is
present must verify. Without trusted keys nothing can vouch for a signer, so a feed is used
as an unsigned one, as it would be with its signature removed; what can be checked without
a key still is (the envelope parses, its payload type is a feed's and its payload is the
feed's exact bytes), and the caller is told that the signature went unchecked.

Rotation: the new trusted-keys file must come with ``NEW.dsse``, signed by a threshold of
the keys trusted now (the installed ones, when some are; ``--current`` must name them).
Only then is it installed, so control over the feed's keys passes
from old keys to new ones and never to whoever can write a file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from floorctl import keys, locking
from floorctl.errors import SigningError, TrustError
from floorguard._base import atomic
from floorguard._base.files import MAX_ENVELOPE_BYTES, read_regular
from floorguard._crypto import dsse
from floorguard._crypto.trust import TrustedKeys, parse_trusted_keys, verify_detached
from floorguard.errors import UnreadableFileError, VerificationError

FEED_PAYLOAD_TYPE = "application/vnd.floorctl.feed+json"
TRUSTED_KEYS_PAYLOAD_TYPE = "application/vnd.floorctl.trusted-keys+json"
INSTALLED_NAME = "trusted-keys.json"
SIGNATURE_SUFFIX = ".dsse"

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
MAX_FILE_BYTES = 1024 * 1024


def installed_path(environ: Mapping[str, str]) -> Path:
    """Where ``floorctl trust rotate`` keeps the trusted keys in force."""
    return keys.state_dir(environ) / INSTALLED_NAME


def load_trusted_keys(path: Path) -> TrustedKeys:
    """Read a trusted-keys file (PEM or JSON). Raises TrustError."""
    try:
        data = read_regular(path, max_bytes=MAX_FILE_BYTES, what="trusted keys")
    except UnreadableFileError as exc:
        raise TrustError(str(exc)) from exc
    try:
        return parse_trusted_keys(data, str(path))
    except VerificationError as exc:
        raise TrustError(str(exc)) from exc


def resolve_trusted_keys(given: Path | None, environ: Mapping[str, str]) -> TrustedKeys | None:
    """``--trusted-keys``, else the installed file, else None (nothing is trusted)."""
    if given is not None:
        return load_trusted_keys(given)
    installed = installed_path(environ)
    # lexists, not exists: a dangling or looping link where the installed keys belong is
    # an error naming it (load fails), never "no key is trusted", which would let a signed
    # feed through unchecked.
    if os.path.lexists(installed):
        return load_trusted_keys(installed)
    return None


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of checking a feed's signature: who signed (empty when unsigned), and
    whether a signature was present but left unchecked because no key is trusted."""

    signed_by: frozenset[str]
    unchecked: bool = False

    @property
    def signed(self) -> bool:
        return bool(self.signed_by)


def check_signature(
    data: bytes,
    envelope: bytes | None,
    trusted: TrustedKeys | None,
    *,
    require_signed: bool,
    source: str,
    payload_type: str = FEED_PAYLOAD_TYPE,
) -> SignatureCheck:
    """Decide whether ``data`` may be used given its detached signature, if any.

    Raises TrustError when a signature is required but missing, when one is present but does
    not verify against the trusted keys, or (without trusted keys) when a present envelope
    is malformed or does not sign exactly ``data`` with ``payload_type``. With no trusted
    keys a well-formed signature of ``data`` vouches for nothing: the result is unsigned,
    ``unchecked`` (the caller says so).
    """
    where = f"{source}{SIGNATURE_SUFFIX}"
    if envelope is None:
        if require_signed:
            raise TrustError(f"{source}: unsigned (no {where}) and --require-signed was given")
        return SignatureCheck(frozenset())
    if trusted is None:
        if require_signed:  # callers refuse this earlier; fail closed all the same
            raise TrustError(f"{where}: --require-signed was given but no key is trusted")
        try:
            parsed = dsse.parse_envelope(envelope)
        except VerificationError as exc:
            raise TrustError(f"{where}: bad signature: {exc}") from exc
        # The checks verify_detached makes before it needs a key, in its words.
        if parsed.payload_type != payload_type:
            raise TrustError(
                f"{where}: bad signature: signature payloadType is {parsed.payload_type!r}, "
                f"expected {payload_type!r}"
            )
        if parsed.payload != data:
            raise TrustError(
                f"{where}: bad signature: the signature covers different bytes than the file "
                "(stale or mismatched signature)"
            )
        return SignatureCheck(frozenset(), unchecked=True)
    try:
        signed_by = verify_detached(data, envelope, trusted, payload_type=payload_type)
    except VerificationError as exc:
        raise TrustError(f"{where}: bad signature: {exc}") from exc
    return SignatureCheck(signed_by)


def sign_file(
    data: bytes, existing: bytes | None, key: Ed25519PrivateKey, payload_type: str
) -> bytes:
    """An envelope signing ``data``; adds to ``existing`` if that one signs the same bytes.

    Adding lets several holders of a threshold each sign in turn. An existing envelope over
    other bytes (an older version) is replaced, never merged; one over the same bytes as
    another kind of document (a published map's) is not replaced: raises SigningError.
    """
    fresh = dsse.sign(payload_type, data, key)
    if existing is not None:
        try:
            previous = dsse.parse_envelope(existing)
        except VerificationError:
            previous = None
        if previous is not None and previous.payload == data:
            if previous.payload_type != payload_type:
                raise SigningError(
                    f"the signature file already signs these bytes as "
                    f"{previous.payload_type!r}, not as {payload_type!r}: signing them again "
                    "would replace those signatures (sign them with the command that made it, "
                    "floorctl publish for a floor map, or remove it first)"
                )
            ours = fresh.signatures[0]
            others = tuple(s for s in previous.signatures if s.keyid != ours.keyid)
            fresh = dsse.Envelope(payload_type, data, (*others, ours))
    return fresh.to_bytes()


def rotate(
    current: TrustedKeys,
    new_path: Path,
    environ: Mapping[str, str],
    *,
    notify: Callable[[str], None] = lambda _message: None,
) -> Path:
    """Install ``new_path`` as the trusted keys if ``NEW.dsse`` is signed by ``current``.

    Returns the installed path. Raises TrustError when ``current`` is not the keys installed
    now (when some are), or when the new file is unreadable, not a valid trusted-keys
    document, or not signed by a threshold of the current keys. Rotations take turns
    (``notify`` is told when one waits): each is judged against what the one before it
    installed, so two signed by the same old keys cannot both report success.
    """
    target = installed_path(environ)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = target.parent / f".{target.name}.lock"
    with locking.exclusive_lock(lock, "another trust rotate", notify=notify):
        return _rotate_locked(current, new_path, environ, target)


def _rotate_locked(
    current: TrustedKeys, new_path: Path, environ: Mapping[str, str], target: Path
) -> Path:
    in_force = resolve_trusted_keys(None, environ)
    # Checked against the installed keys, not only the caller's CURRENT: otherwise anyone
    # could name their own key as CURRENT and sign their own NEW with it. Judged by keys and
    # threshold, not bytes, so a PEM and the JSON holding that one key name the same set.
    if in_force is not None and (in_force.threshold, in_force.key_ids) != (
        current.threshold,
        current.key_ids,
    ):
        raise TrustError(
            f"{current.source}: rotation refused: not the trusted keys in force "
            f"({installed_path(environ)}); a rotation must be signed by the keys it replaces"
        )
    try:
        data = read_regular(new_path, max_bytes=MAX_FILE_BYTES, what="new trusted keys")
    except UnreadableFileError as exc:
        raise TrustError(str(exc)) from exc
    signature_path = Path(str(new_path) + SIGNATURE_SUFFIX)
    try:
        envelope = read_regular(signature_path, max_bytes=MAX_ENVELOPE_BYTES, what="signature")
    except UnreadableFileError as exc:
        raise TrustError(f"{exc}; the new trusted keys must be signed by the current ones") from exc
    try:
        parse_trusted_keys(data, str(new_path))
        verify_detached(data, envelope, current, payload_type=TRUSTED_KEYS_PAYLOAD_TYPE)
    except VerificationError as exc:
        raise TrustError(f"{new_path}: rotation refused: {exc}") from exc
    atomic.write_atomic(target, data)
    return target
