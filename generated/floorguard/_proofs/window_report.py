"""Running the window proof over a slice (from bytes, a file or standard input) and
rendering its report, as text and as a JSON document."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorguard._base._text import one_line
from floorguard._base._time import window_order_error
from floorguard._base.files import open_regular
from floorguard._proofs.map_archive import MapResolver
from floorguard._proofs.slice_verify import STDIN, SliceVerifier, iter_slice_lines
from floorguard._proofs.window_proof import ProofReport, WindowProof
from floorguard.errors import VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from floorguard._chain.record_signature import HostKeys
    from floorguard._proofs.checkpoint import Checkpoint
    from floorguard._proofs.tlog import ConsistencyProof, InclusionProof


def load_inclusion(data: bytes) -> tuple[InclusionProof | None, str | None]:
    """The parsed inclusion proof, or None and why it was refused."""
    from floorguard._proofs import tlog

    try:
        return tlog.parse_inclusion(data), None
    except VerificationError as exc:
        return None, str(exc)


def load_checkpoint(
    data: bytes, public_key: Ed25519PublicKey
) -> tuple[Checkpoint | None, str | None]:
    """The verified checkpoint, or None and why it was refused."""
    from floorguard._proofs import checkpoint

    try:
        return checkpoint.verify(data, public_key), None
    except VerificationError as exc:
        return None, str(exc)


def prove(
    lines: Iterable[str | bytes],
    *,
    key: bytes | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    map_dirs: Sequence[Path] = (),
    checkpoint: Checkpoint | None = None,
    checkpoint_error: str | None = None,
    unauthenticated_ok: bool = False,
    inclusion: InclusionProof | None = None,
    previous: Checkpoint | None = None,
    consistency: ConsistencyProof | None = None,
    host_keys: HostKeys | None = None,
    source: str | None = None,
) -> ProofReport:
    """Verify a slice and prove the window over it. Pure apart from reading map archives.
    ``source`` names the slice's file in the refusals that name one.

    ``checkpoint_error`` is the reason a checkpoint the caller was given did not verify;
    it is reported as an integrity error, so the slice is then not proven. A slice checked
    with neither ``key``, ``host_keys`` nor ``checkpoint`` is not proven unless
    ``unauthenticated_ok``. Raises VerificationError when ``since`` is later than ``until``.
    """
    disordered = window_order_error(since, until)
    if disordered is not None:
        raise VerificationError(disordered)
    proof = WindowProof(
        MapResolver(map_dirs),
        since,
        until,
        checkpoint,
        inclusion=inclusion,
        previous=previous,
        consistency=consistency,
    )
    verifier = SliceVerifier(
        key=key,
        on_values=proof.on_values,
        on_leaf=proof.on_leaf if checkpoint is not None else None,
        host_keys=host_keys,
        source=source,
    )
    verifier.feed_all(lines)
    return proof.finish(
        verifier.finish(),
        key_given=key is not None or host_keys is not None,
        checkpoint_error=checkpoint_error,
        unauthenticated_ok=unauthenticated_ok,
    )


PROGRESS_EVERY = 50_000


def prove_path(
    path: str | Path,
    *,
    progress: Callable[[int], None] | None = None,
    progress_every: int = PROGRESS_EVERY,
    **options: Any,
) -> ProofReport:
    """``prove`` over the slice in a file (``-`` reads standard input).

    ``progress`` (if any) hears the number of records checked so far, every
    ``progress_every`` records. Raises UnreadableFileError (not a regular file, unreadable)
    or OSError while reading.
    """
    if str(path) == "-":
        lines = _counted(iter_slice_lines(sys.stdin.buffer), progress, progress_every)
        return prove(lines, source=STDIN, **options)
    # Streamed with a cap on each line; a FIFO or device is refused, never waited on.
    with open_regular(path, what="chain slice") as stream:
        lines = _counted(iter_slice_lines(stream), progress, progress_every)
        return prove(lines, source=str(path), **options)


def _counted(
    lines: Iterator[bytes], progress: Callable[[int], None] | None, every: int
) -> Iterator[bytes]:
    """``lines``, telling ``progress`` every ``every`` lines (the lines themselves without it)."""
    if progress is None:
        return lines

    def counting() -> Iterator[bytes]:
        for count, line in enumerate(lines, start=1):
            yield line  # resumed once the verifier is done with this record
            if count % every == 0:
                progress(count)

    return counting()


def render_text(report: ProofReport) -> str:
    """``PROVEN`` and a summary, or ``NOT PROVEN`` and one line per finding by seq."""
    piece = report.slice
    start = report.since or "genesis (seq 0)"
    end = report.until or f"end of slice (seq {piece.last_seq}, {piece.last_ts})"
    if report.proven:
        lines = [
            "PROVEN",
            f"{piece.records} record(s), seq {piece.first_seq}..{piece.last_seq}, "
            f"{piece.first_ts} to {piece.last_ts}, chain {piece.chain_id}, head {piece.head}",
            f"window {start} .. {end}: {report.evaluated} spawn record(s) re-evaluated, "
            "none allowed while unsafe under its map",
        ]
        if report.checkpoint is not None:
            cosigned = "" if report.witnessed is None else f", {report.witnessed.text()}"
            lines.append(
                f"checkpoint: size {report.checkpoint.size}, issued "
                f"{report.checkpoint.time or '(no time line)'}{cosigned}"
            )
        lines.append(_authenticated_by(report))
        return "\n".join(lines) + "\n"
    lines = ["NOT PROVEN"]
    for error in report.integrity_errors:
        # (a reason quotes file names: escaped, so that none adds a line of its own)
        lines.append(
            one_line(f"seq {error.seq}: {error.reason}" if error.seq is not None else error.reason)
        )
    for violation in report.violations:
        lines.append(one_line(f"seq {violation.seq}: violation: {violation.reason}"))
    if report.not_listed:
        lines.append(f"... and {report.not_listed} more finding(s)")
    return "\n".join(lines) + "\n"


FLEET_KEY = "fleet key (HMAC, any holder of the key, the owner included)"


def authenticated_by(report: ProofReport) -> str | None:
    """What vouches for the records: ``"mac"`` (the chain key), ``"host-signatures"`` (the
    hosts' keys), ``"mac+host-signatures"`` (each record by one of them), ``"checkpoint"``,
    or None (nothing but the links, which anyone can recompute)."""
    piece = report.slice
    if piece.signatures_checked:
        if piece.macs_checked and piece.mac_records:
            return "mac+host-signatures" if piece.signed_records else "mac"
        return "host-signatures"
    if piece.macs_checked:
        return "mac"
    if report.checkpoint is not None:
        return "checkpoint"
    return None


def _authenticated_by(report: ProofReport) -> str:
    """The text of ``authenticated_by``: a proof is only as strong as this line says."""
    by = authenticated_by(report)
    if by in {"host-signatures", "mac+host-signatures"}:
        lines = [
            "authenticated: every record's host signature verified with the host keys"
            + (", every HMAC record's MAC with the chain key" if by != "host-signatures" else ""),
            "written by:",
        ]
        piece = report.slice
        lines += [f"  {host}: {count} record(s)" for host, count in piece.hosts]
        if piece.mac_records:
            lines.append(f"  {FLEET_KEY}: {piece.mac_records} record(s)")
        return "\n".join(lines)
    if by == "mac":
        return "authenticated: every record's MAC verified with the chain key"
    if by == "checkpoint" and report.checkpoint is not None:
        # Proven without the key means nothing follows the checkpoint's last record.
        return (
            f"authenticated: records up to seq {report.checkpoint.size - 1} by the signed "
            "checkpoint (MACs not checked: no --key-file or --host-keys)"
        )
    return (
        "NOT authenticated: no --key-file, --host-keys or checkpoint, so only the links "
        "between the records were checked (anyone can recompute those)"
    )


def report_document(report: ProofReport) -> dict[str, Any]:
    """The ``verify chain --json`` document (docs/receipts-and-chain.md, "Offline proofs").

    Checked with the hosts' keys (``--host-keys``) it also names the writers: ``hosts``,
    each host's count of verified records; ``writers``, the runs of consecutive verified
    records by one writer, ``{"first_seq", "last_seq", "host"}`` in seq order (``host`` null
    for HMAC records, which any holder of the chain key may have written); and
    ``writers_not_listed``, runs left out past ``slice_verify.MAX_WRITER_RUNS``.
    """
    document: dict[str, Any] = {
        "proven": report.proven,
        "since": report.since,
        "until": report.until,
        "records": report.slice.records,
        "authenticated_by": authenticated_by(report),
        "violations": [{"seq": v.seq, "reason": v.reason} for v in report.violations],
        "integrity_errors": [{"seq": e.seq, "reason": e.reason} for e in report.integrity_errors],
    }
    if report.witnessed is not None:
        document["witnesses"] = report.witnessed.document()
    piece = report.slice
    if piece.signatures_checked:
        document["hosts"] = dict(piece.hosts)
        document["writers"] = [
            {"first_seq": w.first_seq, "last_seq": w.last_seq, "host": w.host}
            for w in piece.writers
        ]
        document["writers_not_listed"] = piece.writers_not_listed
    return document
