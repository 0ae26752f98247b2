"""``floorctl chain``: the audit chain from the outside (export, signed checkpoints, and
the transparency log's inclusion and consistency proofs), ``chain init`` of a PostgreSQL
chain, and ``chain view``: what this host has seen of each chain (and its re-anchoring).

Reading only, but for ``init``: these commands never create the database or the chain key
(a checkpoint may create floorctl's local development signing key, and says so). A chain
written before the Merkle tree existed gets its tree built, from its unchanged records, on
first use.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path

import click

from floorctl import keys
from floorctl.commands._files import refuse_shared_files
from floorctl.commands._output import emit_json, json_option, notice, report
from floorctl.commands._time_option import parse_time_option
from floorctl.commands._values import GivenPath, WholeNumber
from floorguard._base import atomic, files
from floorguard._base._time import window_order_error
from floorguard._base.state import state_paths
from floorguard._chain.chain import AuditChain
from floorguard._chain.chain_key import key_check, load_or_create_key
from floorguard._chain.chain_view import ChainViews, TreeView
from floorguard._chain.slice_export import export_slice
from floorguard._commands._cli_io import stdout_failed
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog
from floorguard.chainstore import timeout_from_env
from floorguard.chainstore.postgres import redact
from floorguard.chainstore.postgres_init import init_schema
from floorguard.errors import ChainError, FloorguardError, VerificationError


@click.group("chain", short_help="Export chain slices; sign checkpoints; prove records.")
def chain() -> None:
    """The audit chain floorguard writes: export slices of it, sign checkpoints of it, prove
    one record's inclusion or one checkpoint's extension by another."""


_signing_key_option = click.option(
    "--signing-key",
    type=GivenPath(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Ed25519 private key (PEM) to sign with; default $FLOORCTL_SIGNING_KEY, else the "
    "local development key (every use of it is announced on stderr).",
)


def _signed(
    audit: AuditChain, signing_key: Path | None, last_seq: int | None, *, full: bool = False
) -> tuple[checkpoint.Checkpoint, str, bytes]:
    """The checkpoint, its signed note and the signer's raw public key.

    The last checkpoint of this chain this host signed with this key (kept in
    FLOORGUARD_HOME, its signature checked before it is used) is where verification starts:
    only the records after it are verified, unless ``full``."""
    resolved = keys.resolve_signing_key(
        signing_key, dict(os.environ), notify=lambda m: notice(f"floorctl: {m}")
    )
    public = checkpoint.raw_public(resolved.key.public_key())
    paths = state_paths()
    views = ChainViews(paths.chain_view)
    before = views.load()
    head = audit.head()
    previous, kept = None, None
    if head is not None:
        kept = checkpoint.memory_path(paths.home, head.chain_id, public)
        previous, unusable = checkpoint.last_signed(kept, resolved.key.public_key(), head.chain_id)
        if unusable is not None:
            notice(f"floorctl: {unusable}: verifying every record from genesis")
    try:
        statement = checkpoint.of_chain(
            audit, last_seq, previous=previous, full=full,
            notify=lambda m: notice(f"floorctl: {m}"),
        )  # fmt: skip
    except FloorguardError:
        _witness_rollback(audit, views, before)
        raise
    # The head's tree, verified: this host witnesses it, and refuses to sign a chain smaller
    # than, or inconsistent with, what it has seen; a checkpoint of a prefix too (an export's
    # --checkpoint-out), judged by the whole chain it was read from.
    size, root = statement.size, statement.root
    if last_seq is not None:
        head = audit.head()
        size = statement.size if head is None else head.seq + 1
        root = _stored_root(audit, size)
    views.observe(
        before, statement.chain_id, size, root,
        location=audit.location, root_of=lambda m: _stored_root(audit, m),
        doing="sign a checkpoint of",
    )  # fmt: skip
    note = checkpoint.sign(statement, resolved.key)
    if kept is not None and (previous is None or statement.size >= previous.size):
        try:
            checkpoint.remember(kept, note)
        except FloorguardError as exc:
            notice(
                f"floorctl: could not keep this checkpoint as the last signed ({exc}): the "
                "next one verifies every record from genesis"
            )
    return statement, note, public


def _witness_rollback(audit: AuditChain, views: ChainViews, before: Mapping[str, TreeView]) -> None:
    """A chain refused (by the last checkpoint signed, or a record that does not verify)
    that is also smaller than the tree this host remembers is refused as that rollback, and
    recorded, as every read of it is: the refusal is this host's evidence. Any other
    refusal stands as it is (a larger tree that was not verified is never remembered)."""
    try:
        head = audit.head()
        seen = None if head is None else before.get(head.chain_id)
        if head is None or seen is None or seen.size <= head.seq + 1:
            return
        size = head.seq + 1
        root = _stored_root(audit, size)
    except FloorguardError:
        return  # the refusal already raised says what is wrong
    views.observe(
        before, head.chain_id, size, root,
        location=audit.location, root_of=lambda m: _stored_root(audit, m),
        doing="sign a checkpoint of",
    )  # fmt: skip


def _stored_root(audit: AuditChain, size: int) -> bytes:
    root = checkpoint.stored_root(audit, size)
    if root is None:
        raise ChainError(f"the audit chain {audit.location} has fewer than {size} records")
    return root


@chain.command("checkpoint", short_help="Sign a checkpoint of the chain's head.")
@_signing_key_option
@click.option(
    "--out",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="Write the checkpoint to FILE atomically instead of stdout.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Verify every record from genesis, not only those since the last checkpoint this "
    "host signed with this key.",
)
@json_option
def checkpoint_command(
    signing_key: Path | None, out: Path | None, full: bool, as_json: bool
) -> None:
    """Sign a checkpoint of the chain's current head (a C2SP signed note).

    The chain is verified with its key first: a tampered chain is never signed. The first
    time, every record; after that, the records appended since the last checkpoint this
    host signed with this key (kept in FLOORGUARD_HOME, its signature checked), and the
    stored tree against it (--full: every record again). With --json: the checkpoint, its
    origin and size, and the signed-note verifier key (vkey, name+keyhash+base64) that
    verifies it.
    """
    audit = AuditChain.from_env()
    if out is not None:
        atomic.refuse_kept_file(out)
    statement, note, public = _signed(audit, signing_key, None, full=full)
    if out is not None:
        _write_atomically(out, note.splitlines())
        notice(f"wrote a checkpoint to {out}")
    if as_json:
        emit_json({
            "checkpoint": note,
            "origin": statement.origin,
            "size": statement.size,
            "vkey": checkpoint.verifier_key(statement.origin, public),
        })  # fmt: skip
    elif out is None:
        click.echo(note, nl=False)


@chain.command("export", short_help="Export a slice of the audit chain (JSON Lines).")
@click.option(
    "--since",
    metavar="TS",
    callback=parse_time_option,
    help="Start of the window (inclusive), RFC 3339.",
)
@click.option(
    "--until",
    metavar="TS",
    callback=parse_time_option,
    help="End of the window (inclusive), RFC 3339.",
)
@click.option(
    "--out",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="Write the slice to FILE atomically instead of stdout.",
)
@click.option(
    "--checkpoint-out",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a signed checkpoint ending at the slice's last record to FILE.",
)
@click.option(
    "--inclusion-out",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="With --checkpoint-out: also the inclusion proof of the slice's last record in that "
    "checkpoint, which `verify chain --inclusion` needs for a slice not from genesis.",
)
@_signing_key_option
def export(
    since: datetime | None,
    until: datetime | None,
    out: Path | None,
    checkpoint_out: Path | None,
    inclusion_out: Path | None,
    signing_key: Path | None,
) -> None:
    """Export a contiguous slice of the audit chain as JSON Lines.

    The slice reaches one record before --since and one after --until when there are
    such records (else from genesis, or up to the head), so that a verifier can see
    that the window is covered.
    """
    disordered = window_order_error(since, until)
    if disordered is not None:
        raise click.BadParameter(disordered, param_hint="--since")
    if inclusion_out is not None and checkpoint_out is None:
        raise click.UsageError("--inclusion-out needs --checkpoint-out")
    refuse_shared_files(
        [("--out", out), ("--checkpoint-out", checkpoint_out), ("--inclusion-out", inclusion_out)],
        [("--signing-key", signing_key)],
    )
    audit = AuditChain.from_env()
    for given in (checkpoint_out, inclusion_out):
        if given is not None:
            atomic.refuse_kept_file(given)
    try:
        exported = export_slice(audit, since, until, out)
    except BrokenPipeError:
        # The reader stopped early (| head): the slice is incomplete, so exit 1, quietly.
        stdout_failed()
        raise click.exceptions.Exit(1) from None
    if out is not None:
        notice(f"wrote {exported.count} record(s) to {out}")
    if checkpoint_out is not None:
        last_seq = exported.last_seq
        if last_seq is None:
            raise ChainError("the slice is empty: there is nothing to checkpoint")
        statement, note, _ = _signed(audit, signing_key, last_seq)
        _write_atomically(checkpoint_out, note.splitlines())
        notice(f"wrote a checkpoint of {last_seq + 1} record(s) to {checkpoint_out}")
        if inclusion_out is not None:
            proof = tlog.prove_inclusion(audit, seq=last_seq, checkpoint=statement)
            _emit_proof(
                tlog.proof_text(proof), inclusion_out, f"the inclusion proof of record {last_seq}"
            )


def _write_atomically(path: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``path`` through the shared atomic writer; the number written."""
    count = 0

    def chunks() -> Iterator[bytes]:
        nonlocal count
        for line in lines:
            count += 1
            yield (line + "\n").encode("utf-8")

    atomic.write_chunks_atomic(path, chunks())
    return count


_out_option = click.option(
    "--out",
    type=GivenPath(dir_okay=False, path_type=Path),
    default=None,
    help="Write the proof to FILE atomically instead of stdout.",
)
_EXISTING = GivenPath(dir_okay=False, exists=True, path_type=Path)


def _read_checkpoint(path: Path) -> checkpoint.Checkpoint:
    """A checkpoint file's statement. Its signature is the verifier's business (the proof
    is checked against the tree here, which a wrong statement cannot match)."""
    data = files.read_regular(path, max_bytes=files.MAX_CHECKPOINT_BYTES, what="checkpoint")
    try:
        body, _ = checkpoint.split_note(data)
        return checkpoint.parse_body(body)
    except FloorguardError as exc:
        raise type(exc)(f"{path}: {exc}") from exc


def _emit_proof(text: str, out: Path | None, what: str) -> None:
    if out is None:
        click.echo(text, nl=False)
        return
    atomic.write_chunks_atomic(out, iter([text.encode("utf-8")]))
    notice(f"wrote {what} to {out}")


@chain.command("prove", short_help="Write the inclusion proof of one record.")
@click.option("--receipt-id", metavar="ID", default=None, help="The record of this receipt.")
@click.option("--seq", type=WholeNumber(min=0), default=None, help="The record at seq N.")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=_EXISTING,
    default=None,
    help="Prove it in the tree of this checkpoint's size (default: the current head).",
)
@_out_option
def prove(
    receipt_id: str | None, seq: int | None, checkpoint_file: Path | None, out: Path | None
) -> None:
    """Write the inclusion proof of one record: its export line and the audit path to the
    root of the tree of the checkpoint's size (JSON). With the signed checkpoint, anyone
    can check it offline (`floorctl verify inclusion`) without the rest of the log."""
    if (receipt_id is None) == (seq is None):
        raise click.UsageError("give exactly one of --receipt-id and --seq")
    refuse_shared_files([("--out", out)], [("--checkpoint", checkpoint_file)])
    audit = AuditChain.from_env()
    if out is not None:
        atomic.refuse_kept_file(out)
    cp = _read_checkpoint(checkpoint_file) if checkpoint_file is not None else None
    proof = tlog.prove_inclusion(audit, seq=seq, receipt_id=receipt_id, checkpoint=cp)
    _emit_proof(tlog.proof_text(proof), out, f"the inclusion proof of record {proof.leaf_index}")


@chain.command("consistency", short_help="Write a consistency proof between checkpoints.")
@click.option("--old", "old_file", type=_EXISTING, required=True, help="The older checkpoint.")
@click.option(
    "--new",
    "new_file",
    type=_EXISTING,
    default=None,
    help="The newer checkpoint (default: the current head).",
)
@_out_option
def consistency(old_file: Path, new_file: Path | None, out: Path | None) -> None:
    """Write the consistency proof from the older checkpoint's tree to the newer one's
    (JSON): it shows, with both signed checkpoints, that the newer log holds the older
    one's records unchanged as its first records (`floorctl verify consistency`)."""
    refuse_shared_files([("--out", out)], [("--old", old_file), ("--new", new_file)])
    audit = AuditChain.from_env()
    if out is not None:
        atomic.refuse_kept_file(out)
    old = _read_checkpoint(old_file)
    new = _read_checkpoint(new_file) if new_file is not None else None
    proof = tlog.prove_consistency(audit, old, new)
    _emit_proof(
        tlog.proof_text(proof),
        out,
        f"the consistency proof from size {proof.old_size} to {proof.new_size}",
    )


def _url_source() -> str:
    """What gave this command its chain URL, as a message names it: --url, or the variable
    (click's envvar, or the environment read when the option is not given)."""
    given = click.get_current_context().get_parameter_source("url")
    return "--url" if given == click.core.ParameterSource.COMMANDLINE else "FLOORGUARD_CHAIN_URL"


@chain.command("init", short_help="Create a PostgreSQL chain's schema and appender role.")
@click.option(
    "--url",
    required=True,
    envvar="FLOORGUARD_CHAIN_URL",
    metavar="URL",
    help="libpq URL of the database, connecting as the role that will own the chain's "
    "tables (default $FLOORGUARD_CHAIN_URL).",
)
@click.option(
    "--grant",
    "grant_to",
    multiple=True,
    metavar="ROLE",
    help="Grant the appender role to this existing login role (a host's); repeatable.",
)
def init(url: str, grant_to: tuple[str, ...]) -> None:
    """Create, idempotently, the schemas of a PostgreSQL audit chain: floorguard (its
    tables, and triggers that refuse UPDATE, DELETE and TRUNCATE to everyone but the tables'
    owner), floorguard_api (the functions through which alone hosts read and append), and
    the role floorguard_appender_DATABASE (those functions only, one role per database),
    granted to each --grant ROLE. Run it again after an upgrade: it revokes what earlier
    versions granted. A host's session that holds what init must wait for (the chain's lock
    past the hold limit, or a catalog row) is ended, as an append would end it.

    It also makes the chain key here if there is none (FLOORGUARD_CHAIN_KEY_FILE, else
    chain.key in FLOORGUARD_HOME): copy that file to every host that appends; hosts never
    create a shared chain's key.
    """
    key_file = state_paths().chain_key
    existed = key_file.exists()
    key_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The key first: the database keeps its check value, so that a host (or a later init)
    # holding another key is refused before it writes.
    key = load_or_create_key(key_file)
    try:
        done = init_schema(
            url, timeout=timeout_from_env(), grant_to=grant_to, key_check=key_check(key),
            source=_url_source(),
        )  # fmt: skip
    except FloorguardError:
        if not existed:  # (kept: the database may hold its check already)
            notice(f"chain key {key_file} was created by this run and is kept: the next "
                   "chain init uses it")  # fmt: skip
        raise
    state = "created" if done["created"] else "already in place; checked"
    report(f"audit chain {redact(url)}: schema floorguard {state}")
    report(f"chain_id {done['chain_id']}; tables owned by {done['owner']}")
    report(
        f"appender role {done['appender_role']}: reads and appends through the functions of "
        "schema floorguard_api only; no privilege in schema floorguard"
    )
    for session in done["ended_sessions"]:
        report(f"ended session {session}: it held what chain init had to wait for")
    if not done["ends_lock_holders"]:
        report(
            f"warning: {done['owner']} cannot end a session that holds the chain's lock too "
            f"long (any appender could then stop every append): GRANT pg_signal_backend TO "
            f"{done['owner']}, as a superuser"
        )
    if done["prepared_transactions"]:
        report(
            "warning: max_prepared_transactions is "
            f"{done['prepared_transactions']}: an appender could hold the chain's lock in a "
            "prepared transaction that no append can end; set it to 0"
        )
    for role in done["granted_to"]:
        report(f"granted {done['appender_role']} to {role}")
    report(
        f"chain key {key_file} ({'existing' if existed else 'created'}): copy it to every "
        "appending host (FLOORGUARD_CHAIN_KEY_FILE), mode 0600"
    )


@chain.command("view", short_help="Show or re-anchor what this host has seen of the chain.")
@click.option(
    "--accept-current",
    is_flag=True,
    help="Re-anchor this host on the chain as it is now (verified with its key first), "
    "after a refused rollback or fork was investigated; the view replaced is recorded.",
)
@click.option(
    "--url",
    envvar="FLOORGUARD_CHAIN_URL",
    metavar="URL",
    default=None,
    help="With --accept-current: the chain's libpq URL (default $FLOORGUARD_CHAIN_URL, else "
    "the SQLite chain in FLOORGUARD_HOME).",
)
@json_option
def view(accept_current: bool, url: str | None, as_json: bool) -> None:
    """Show the largest tree (size and root) of each chain this host has appended to or
    read, as kept in FLOORGUARD_HOME. Appends refuse a chain that is smaller than it (a
    rollback) or whose first records have another root (a fork).

    With --accept-current, the chain as it is now becomes what this host remembers: the
    old view goes into the host's refusals record (chain-refusals.jsonl) first.
    """
    env = dict(os.environ)
    if url is not None:
        env["FLOORGUARD_CHAIN_URL"] = url
    audit = AuditChain.from_env(env, url_source=_url_source())
    views = ChainViews(state_paths(env).chain_view)
    if not accept_current:
        remembered = views.load()
        if as_json:
            emit_json({
                "view_file": str(views.path), "refusals_file": str(views.refusals_path),
                "chains": {cid: v.document() for cid, v in sorted(remembered.items())},
            })  # fmt: skip
            return
        if not remembered:
            report(f"this host has seen no chain yet ({views.path})")
        for cid, seen in sorted(remembered.items()):
            report(f"chain {cid} at {seen.location}: {seen.size} records, root "
                       f"{seen.root.hex()}, seen {seen.seen}")  # fmt: skip
        return
    exists = audit.exists()
    if not exists and env.get("FLOORGUARD_CHAIN_URL"):
        # (a database named wrongly while recovering: nothing there to adopt)
        raise ChainError(
            f"no floorguard chain at {audit.location}: nothing to accept (is it the chain's "
            "database? A new one is made with `floorctl chain init --url URL`)"
        )
    if not exists or audit.head() is None:
        # An empty chain (a new one where another was): nothing to remember of it.
        statement = checkpoint.Checkpoint("", 0, merkle.EMPTY_ROOT, None)
        old = views.accept(None, 0, statement.root, audit.location)
    else:
        try:
            statement = checkpoint.of_chain(audit)
        except VerificationError as exc:
            # (of_chain words it for a checkpoint; what was asked is to adopt the chain)
            raise VerificationError(
                f"cannot accept the chain as it is: only a chain that verifies is adopted ({exc})"
            ) from exc
        old = views.accept(statement.chain_id, statement.size, statement.root, audit.location)
    document = {
        "chain_id": statement.chain_id or None, "location": audit.location,
        "accepted": {"size": statement.size, "root": statement.root.hex()},
        "replaced": None if old is None else old.document(),
        "refusals_file": str(views.refusals_path),
    }  # fmt: skip
    if as_json:
        emit_json(document)
        return
    before = "nothing" if old is None else f"{old.size} records (root {old.root.hex()})"
    report(
        f"chain {statement.chain_id or '(empty)'} at {audit.location}: this host now remembers "
        f"{statement.size} records (root {statement.root.hex()}); it remembered {before}, "
        f"recorded in {views.refusals_path}"
    )
