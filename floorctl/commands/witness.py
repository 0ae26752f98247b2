"""``floorctl witness cosign``: act as a witness of an audit-chain log (C2SP tlog-cosignature).

The witness's state (``--state DIR``) holds, per log origin, the size and root of the last
checkpoint it cosigned, in ``<chain id>.json``, replaced atomically before the cosigned
checkpoint is handed out: a crash can lose a cosignature, never the memory of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from floorctl import keys
from floorctl.commands._output import notice
from floorctl.commands._values import GivenPath
from floorguard._base import atomic, files
from floorguard._commands import verify_commands
from floorguard._proofs import checkpoint, tlog
from floorguard._proofs import witness as witnesses
from floorguard.errors import VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

_FILE = GivenPath(dir_okay=False, exists=True, path_type=Path)


@click.group("witness", short_help="Cosign checkpoints as a witness of the log.")
def witness() -> None:
    """Witness an audit-chain log: cosign its checkpoints only when they extend the last one
    cosigned (C2SP tlog-cosignature, cosignature/v1)."""


def _checkpoint(path: Path, key: Ed25519PublicKey) -> tuple[bytes, checkpoint.Checkpoint]:
    data = files.read_regular(path, max_bytes=files.MAX_CHECKPOINT_BYTES, what="checkpoint")
    try:
        return data, checkpoint.verify(data, key)
    except VerificationError as exc:
        raise VerificationError(f"{path}: {exc}") from exc


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    """Hold the state folder for one cosign. Anyone who can delete a state file makes the
    witness forget what it cosigned, so the folder must be this user's alone; and two
    cosigns at once could both accept a fork of the size they read, so the second is
    refused (exit 1) rather than made to wait. Raises VerificationError."""
    info = os.stat(state_dir)
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise VerificationError(
            f"{state_dir}: the witness state folder is writable by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}): make it yours, "
            "mode 0700"
        )
    fd = os.open(state_dir / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise VerificationError(
                f"{state_dir}: the witness state is in use by another cosign; try again"
            ) from None
        yield
    finally:
        os.close(fd)


def _last_state(state_file: Path) -> witnesses.WitnessState | None:
    """What this witness last cosigned for the log, None the first time. Anything at the
    name but a regular file (a link, even a dangling one) is refused, not taken for "none".
    Raises VerificationError and UnreadableFileError."""
    try:
        info = os.lstat(state_file)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise VerificationError(
            f"{state_file}: the witness state is not a regular file: refusing to guess what "
            "this witness cosigned"
        )
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise VerificationError(
            f"{state_file}: the witness state is writable by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid})"
        )
    raw = files.read_regular(state_file, max_bytes=files.MAX_STATE_BYTES, what="state")
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise VerificationError(f"{state_file} is not JSON") from exc
    return witnesses.parse_state(document, str(state_file))


@witness.command("cosign", short_help="Cosign a checkpoint that extends the last one.")
@click.option(
    "--old",
    "old_file",
    type=_FILE,
    required=True,
    help="The checkpoint this witness last cosigned (any, the first time).",
)
@click.option("--new", "new_file", type=_FILE, required=True, help="The checkpoint to cosign.")
@click.option(
    "--proof",
    "proof_file",
    type=_FILE,
    required=True,
    help="The consistency proof from --old to --new (floorctl chain consistency).",
)
@click.option(
    "--key",
    "key_file",
    type=_FILE,
    required=True,
    help="The witness's Ed25519 private key (PEM, from floorctl keygen).",
)
@click.option(
    "--pubkey",
    type=_FILE,
    required=True,
    help="The log's public key: both checkpoints must be signed by it.",
)
@click.option(
    "--state",
    "state_dir",
    type=GivenPath(file_okay=False, path_type=Path),
    required=True,
    help="The witness's state folder (created if missing; yours alone: writable by no one "
    "else). One per witness key.",
)
@click.option(
    "--name",
    default=None,
    help="The witness's name on its cosignature line (default: derived from its key).",
)
@click.option(
    "--out",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="Write the cosigned checkpoint to FILE atomically instead of stdout.",
)
def cosign(
    old_file: Path,
    new_file: Path,
    proof_file: Path,
    key_file: Path,
    pubkey: Path,
    state_dir: Path,
    name: str | None,
    out: Path | None,
) -> None:
    """Verify the log's signature on both checkpoints and the consistency proof between
    them, from the last size this witness cosigned for the log; then add a cosignature line
    to the new checkpoint. Refuses (exit 1) a smaller tree and a fork: two roots for one
    size, or a new tree that does not extend the last one cosigned."""
    log_key = verify_commands.load_verify_key(pubkey)
    own = keys.load_private(key_file)
    if name is not None and (not name or any(c.isspace() for c in name) or "+" in name):
        raise click.BadParameter("a witness name has no spaces and no '+'", param_hint="--name")
    _, old = _checkpoint(old_file, log_key)
    new_data, new = _checkpoint(new_file, log_key)
    proof_data = files.read_regular(proof_file, max_bytes=tlog.MAX_PROOF_BYTES, what="proof")
    proof = tlog.parse_consistency(proof_data, str(proof_file))
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _locked(state_dir):
        state_file = state_dir / f"{new.chain_id}.json"
        witnesses.check_cosign(_last_state(state_file), old, new, proof)
        body, _ = checkpoint.split_note(new_data)
        public = checkpoint.raw_public(own.public_key())
        line = witnesses.cosignature_line(
            body, name or witnesses.default_name(public), own, int(time.time())
        )
        state = json.dumps(witnesses.state_document(witnesses.state_of(new)), sort_keys=True)
        atomic.write_atomic(state_file, (state + "\n").encode())
    cosigned = new_data.decode("utf-8") + line
    if out is None:
        click.echo(cosigned, nl=False)
    else:
        atomic.write_atomic(out, cosigned.encode("utf-8"))
        notice(f"wrote the cosigned checkpoint of {new.size} record(s) to {out}")
