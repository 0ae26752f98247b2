"""Signing keys: generation, loading, and the local development key.

Private keys are Ed25519 in PEM PKCS#8, mode 0600; public keys PEM SubjectPublicKeyInfo.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from floorctl.errors import SigningError
from floorguard._base import atomic
from floorguard._base.files import read_regular
from floorguard._base.folders import make_private_folder
from floorguard._commands.verify_commands import floorctl_state_dir
from floorguard._crypto import dsse
from floorguard.errors import OutputError, UnreadableFileError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PRIVATE_NAME = "signing.key"
PUBLIC_NAME = "signing.pub"
DEV_KEY_DIR = "dev-key"
MAX_KEY_BYTES = 64 * 1024  # files.MAX_KEY_BYTES


def state_dir(environ: Mapping[str, str]) -> Path:
    """floorctl's state: ``FLOORCTL_HOME``, ``$XDG_STATE_HOME/floorctl``, or ~/.local/state.

    The runtime's rule, so that ``python -m floorguard verify receipt`` finds the same
    development key without floorctl."""
    return floorctl_state_dir(environ)


def generate(out_dir: Path) -> tuple[Path, Path]:
    """Create ``signing.key`` (0600) and ``signing.pub`` in ``out_dir``; refuses to overwrite."""
    private_path, public_path = out_dir / PRIVATE_NAME, out_dir / PUBLIC_NAME
    for path in (private_path, public_path):
        # lexists: a dangling link is something at that name too, and is never followed.
        if os.path.lexists(path):
            raise SigningError(f"{path}: already exists; refusing to overwrite a key")
    # cryptography is imported where keys are made or read: commands that only read feeds
    # (refresh --check, validate) never load it.
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: PLC0415
        Ed25519PrivateKey,
    )

    make_private_folder(out_dir)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        # Never overwrite a key someone already relies on, nor write through a link.
        atomic.create_new(private_path, private_pem, mode=0o600)
        atomic.create_new(public_path, public_pem(key.public_key()), mode=0o644)
    except OutputError as exc:
        raise SigningError(f"{exc}") from exc
    return private_path, public_path


def public_pem(key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _read_small(path: Path) -> bytes:
    try:
        return read_regular(path, max_bytes=MAX_KEY_BYTES, what="key")
    except UnreadableFileError as exc:
        raise SigningError(str(exc)) from exc


def load_private(path: Path) -> Ed25519PrivateKey:
    """Load a private key written by keygen. Raises SigningError."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: PLC0415
        Ed25519PrivateKey,
    )

    data = _read_small(path)
    try:
        dsse.require_one_pem_key(data, str(path))
    except VerificationError as exc:
        raise SigningError(str(exc)) from exc
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{path}: not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path}: not an Ed25519 private key")
    return key


def load_public(path: Path) -> Ed25519PublicKey:
    """Load a PEM public key; a private key file is accepted too (its public half is used)."""
    data = _read_small(path)
    if b"PRIVATE KEY" in data:
        return load_private(path).public_key()
    try:
        return dsse.load_public_key(data, str(path))
    except VerificationError as exc:
        raise SigningError(str(exc)) from exc


@dataclass(frozen=True)
class ResolvedKey:
    key: Ed25519PrivateKey
    path: Path


def signing_key_path(given: Path | None, environ: Mapping[str, str]) -> Path:
    """Which key ``resolve_signing_key`` reads (or creates), without reading it."""
    if given is not None:
        return given
    if environ.get("FLOORCTL_SIGNING_KEY"):
        return Path(environ["FLOORCTL_SIGNING_KEY"])
    return state_dir(environ) / DEV_KEY_DIR / PRIVATE_NAME


def resolve_signing_key(
    given: Path | None,
    environ: Mapping[str, str],
    *,
    create_dev_key: bool = True,
    notify: Callable[[str], None] = lambda _message: None,
) -> ResolvedKey:
    """``--signing-key``, else ``FLOORCTL_SIGNING_KEY``, else the local development key.

    To sign (``create_dev_key``, the default) the development key is created on first use,
    and ``notify`` hears every time it is used, not only when it is made: whatever it signs
    is trusted by nobody else, and a release signed with it by mistake must not pass
    unnoticed. To verify (``create_dev_key`` false) its absence is a SigningError.
    """
    if given is not None:
        return ResolvedKey(load_private(given), given)
    if environ.get("FLOORCTL_SIGNING_KEY"):
        path = Path(environ["FLOORCTL_SIGNING_KEY"])
        return ResolvedKey(load_private(path), path)
    dev_dir = state_dir(environ) / DEV_KEY_DIR
    dev_key = dev_dir / PRIVATE_NAME
    if dev_key.exists():
        resolved = ResolvedKey(load_private(dev_key), dev_key)
        if create_dev_key:
            notify(dev_key_notice(dev_key, created=False))
        return resolved
    if not create_dev_key:
        raise SigningError(
            "no key given: pass --pubkey/--signing-key or set FLOORCTL_SIGNING_KEY "
            f"(no development key at {dev_key})"
        )
    created = True
    try:
        generate(dev_dir)
    except SigningError:
        if not dev_key.exists():
            raise
        created = False  # another floorctl created it a moment ago: use that one
    resolved = ResolvedKey(load_private(dev_key), dev_key)
    notify(dev_key_notice(dev_key, created=created))
    return resolved


def dev_key_notice(path: Path, *, created: bool) -> str:
    """What a command says each time it signs with the development key."""
    which = (
        "a local development signing key, created now,"
        if created
        else "the local development signing key"
    )
    return (
        f"signing with {which} at {path} (trusted by nobody else); use `floorctl keygen` "
        "and --signing-key for releases"
    )
