"""``floorctl sign``: a detached DSSE signature over a file's exact bytes."""

from __future__ import annotations

import os
from pathlib import Path

import click

from floorctl import feeds, keys, trust
from floorctl.commands._output import emit_json, json_option, notice, report
from floorctl.commands._values import GivenPath
from floorctl.errors import SigningError
from floorguard._base import atomic, files
from floorguard._base.files import read_regular, read_regular_if_exists
from floorguard._crypto import dsse

KINDS = {"feed": trust.FEED_PAYLOAD_TYPE, "trusted-keys": trust.TRUSTED_KEYS_PAYLOAD_TYPE}


@click.command("sign", short_help="Write FILE.dsse, a signature over FILE's bytes.")
@click.argument("path", metavar="FILE", type=GivenPath(path_type=Path, dir_okay=False, exists=True))
@click.option(
    "--signing-key",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Private key (default: $FLOORCTL_SIGNING_KEY, else the local development key, "
    "every use of which is announced on stderr).",
)
@click.option(
    "--kind",
    type=click.Choice(sorted(KINDS)),
    default="feed",
    show_default=True,
    help="What is signed: a feed, or a new trusted-keys file (key rotation).",
)
@json_option
def command(path: Path, signing_key: Path | None, kind: str, as_json: bool) -> None:
    """Write FILE.dsse, a DSSE envelope over the exact bytes of FILE (a feed, or with
    --kind trusted-keys a new trusted-keys file).

    If FILE.dsse already signs the same bytes, this key's signature is added to it, so that
    the holders of a threshold of keys can sign one after another.
    """
    data = read_regular(path, max_bytes=feeds.MAX_FEED_BYTES, what="file to sign")
    env = dict(os.environ)
    key = keys.resolve_signing_key(signing_key, env, notify=lambda m: notice(f"floorctl: {m}")).key
    out = Path(str(path) + trust.SIGNATURE_SUFFIX)
    existing = read_regular_if_exists(out, max_bytes=files.MAX_ENVELOPE_BYTES, what="signature")
    try:
        envelope = trust.sign_file(data, existing, key, KINDS[kind])
    except SigningError as exc:
        raise SigningError(f"{out}: {exc}") from None
    atomic.write_atomic(out, envelope)
    signatures = len(dsse.parse_envelope(envelope).signatures)
    key_id = dsse.key_id(key.public_key())
    if as_json:
        emit_json({"signature": str(out), "keyid": key_id, "signatures": signatures})
        return
    report(f"wrote {out} (keyid {key_id}; {signatures} signature(s))")
