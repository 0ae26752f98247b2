"""``python -m floorguard``: the runtime's own command line, usable without floorctl.

argparse only (the runtime never imports click). Each command is a ``register_*`` function
that adds its parser and sets ``handler``; a handler returns the exit status:
0 success, 1 a check failed or input was rejected, 2 usage error (argparse's own).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from floorguard import files
from floorguard._text import one_line
from floorguard.chain_key import load_key
from floorguard.errors import FloorguardError
from floorguard.files import read_regular
from floorguard.slice_verify import MACS_NOT_CHECKED

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:
    # Private in argparse and not subscriptable at run time: for the type checker only.
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _time_option(text: str) -> datetime:
    """argparse type: RFC 3339 with Z or an offset (a bad one is a usage error)."""
    from floorguard._time import parse_ts

    try:
        return parse_ts(text)
    except FloorguardError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _verify_chain(args: argparse.Namespace) -> int:
    from floorguard import window_proof

    key = load_key(args.key_file) if args.key_file is not None else None
    if key is None:
        print(MACS_NOT_CHECKED, file=sys.stderr)
    checkpoint, checkpoint_error = None, None
    if args.checkpoint is not None:
        from floorguard.dsse import load_public_key

        public = load_public_key(
            read_regular(args.pubkey, max_bytes=files.MAX_KEY_BYTES, what="public key"),
            str(args.pubkey),
        )
        checkpoint, checkpoint_error = window_proof.load_checkpoint(
            read_regular(args.checkpoint, max_bytes=files.MAX_CHECKPOINT_BYTES, what="checkpoint"),
            public,
        )
    map_dirs = args.maps if args.maps else window_proof.default_map_dirs()
    report = window_proof.prove_path(
        args.slice,
        key=key,
        since=args.since,
        until=args.until,
        map_dirs=map_dirs,
        checkpoint=checkpoint,
        checkpoint_error=checkpoint_error,
        unauthenticated_ok=args.unauthenticated,
    )
    if args.as_json:
        document = window_proof.report_document(report)
        print(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        sys.stdout.write(window_proof.render_text(report))
    return EXIT_OK if report.proven else EXIT_FAILED


def register_verify(commands: _SubParsers) -> _SubParsers:
    """``verify``: a group; returns its subparsers so that more checks can join it."""
    verify = commands.add_parser("verify", help="verify receipts and audit-chain slices offline")
    checks = verify.add_subparsers(dest="check", metavar="CHECK", required=True)
    chain = checks.add_parser(
        "chain",
        help="prove that no below-floor spawn was permitted in a window of a chain slice",
        description="Check an exported slice of the audit chain (JSON Lines; - for stdin): "
        "integrity, continuity and coverage of the window, then re-evaluate every spawn "
        "record in the window against the floor map it pins. Prints PROVEN or NOT PROVEN "
        "with every finding by seq; exit 0 only when proven.",
    )
    chain.add_argument("slice", metavar="SLICE", help="the slice file, or - for stdin")
    chain.add_argument("--since", metavar="TS", type=_time_option, help="window start (RFC 3339)")
    chain.add_argument("--until", metavar="TS", type=_time_option, help="window end (RFC 3339)")
    chain.add_argument(
        "--key-file", type=Path, default=None, help="the chain's HMAC key, to check the MACs"
    )
    chain.add_argument(
        "--checkpoint", type=Path, default=None, help="a signed checkpoint (needs --pubkey)"
    )
    chain.add_argument(
        "--pubkey", type=Path, default=None, help="PEM public key the checkpoint is signed by"
    )
    chain.add_argument(
        "--maps",
        type=Path,
        action="append",
        metavar="DIR",
        help="a floor-map archive (sha256-<hex>.json files); repeatable "
        "(default: the package's own maps)",
    )
    chain.add_argument(
        "--unauthenticated",
        action="store_true",
        help="accept a slice checked without --key-file or --checkpoint (only the links "
        "between records, which anyone can recompute; the output says so)",
    )
    chain.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )
    chain.set_defaults(handler=_verify_chain, parser=chain)
    receipt = checks.add_parser(
        "receipt",
        help="check a receipt's signature, content address and the floor map it pins",
        description="Verify a signed update receipt (DSSE envelope; needs --pubkey): exit 0 "
        "only when its signature verifies. A stored receipt without a signature, such as one "
        "line of a chain export, exits 1 unless --content-only, which recomputes its content "
        "address alone and says so. With --floor-map, fail when that map's hash is not the "
        "one the receipt pins.",
    )
    receipt.add_argument("file", type=Path, metavar="FILE")
    receipt.add_argument("--pubkey", type=Path, default=None, help="PEM public key of the signer")
    receipt.add_argument(
        "--floor-map",
        type=Path,
        default=None,
        help="a floor_map.py in the default layout, or a map JSON (archived or published)",
    )
    receipt.add_argument(
        "--content-only",
        action="store_true",
        help="accept an unsigned receipt by its content address alone (reported as unsigned); "
        "a signed receipt is still checked by its signature",
    )
    receipt.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )
    receipt.set_defaults(handler=_verify_receipt)
    return checks


def _map_file_hash(path: Path) -> str:
    from floorguard.active_map import load_map_file
    from floorguard.map_model import map_file_hash

    if path.suffix == ".py":
        return load_map_file(path).floor_map_hash
    return map_file_hash(
        read_regular(path, max_bytes=files.MAX_MAP_BYTES, what="floor map"), str(path)
    )


def _verify_receipt(args: argparse.Namespace) -> int:
    from floorguard import dsse, receipts

    trusted = None
    if args.pubkey is not None:
        trusted = [
            dsse.load_public_key(
                read_regular(args.pubkey, max_bytes=files.MAX_KEY_BYTES, what="public key"),
                str(args.pubkey),
            )
        ]
    checked = receipts.check_receipt_document(
        read_regular(args.file, max_bytes=files.MAX_RECEIPT_BYTES, what="receipt"),
        trusted,
        content_only=args.content_only,
    )
    map_hash = _map_file_hash(args.floor_map) if args.floor_map is not None else None
    if map_hash is not None and map_hash != checked.pinned_map_hash:
        print(
            one_line(
                f"floorguard: error: {args.file}: floor-map hash mismatch: the receipt pins "
                f"{checked.pinned_map_hash} but {args.floor_map} hashes to {map_hash}"
            ),
            file=sys.stderr,
        )
        return EXIT_FAILED
    if args.as_json:
        document = receipts.checked_document(checked, floor_map_checked=map_hash is not None)
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(receipts.checked_headline(checked))
    return EXIT_OK


def _doctor(args: argparse.Namespace) -> int:
    from floorguard import doctor

    posture = doctor.run()
    if args.as_json:
        print(json.dumps(posture.to_json(), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(doctor.format_table(posture))
    return EXIT_OK if posture.healthy else EXIT_FAILED


def register_doctor(commands: _SubParsers) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="version posture of every tracked adapter, sealed as a receipt",
        description="Find every tracked adapter on PATH, detect its version and judge it by "
        "the map (ok, below_floor, affected, waived, unknown_version, not_installed); the "
        "posture is appended to the audit chain as adapter.version_posture. Exit 1 unless "
        "every installed tracked adapter is ok or waived.",
    )
    doctor.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )
    doctor.set_defaults(handler=_doctor)


# The shell's statuses: "found but cannot execute" and "not found". Nothing was started.
EXIT_REFUSED = 126
EXIT_NOT_FOUND = 127


def _exec(args: argparse.Namespace) -> int:
    import errno
    import signal

    from floorguard.errors import BinaryNotFound, SpawnRefused
    from floorguard.launcher import spawn

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        child = spawn(args.adapter, argv)
    except SpawnRefused as refused:
        print(f"floorguard: {one_line(str(refused))}", file=sys.stderr)
        return EXIT_NOT_FOUND if isinstance(refused, BinaryNotFound) else EXIT_REFUSED
    except OSError as failed:
        # Allowed and recorded, but the kernel would not run it (not a program it knows, a
        # #! interpreter that is missing): a shell's 126, or 127 for "no such file".
        binary = failed.filename or args.adapter
        print(
            one_line(f"floorguard: cannot execute {binary}: {failed.strerror or failed}"),
            file=sys.stderr,
        )
        return EXIT_NOT_FOUND if failed.errno == errno.ENOENT else EXIT_REFUSED

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    # A child killed by a signal reports -N; a shell reports 128+N.
    return code if code >= 0 else 128 - code


def register_exec(commands: _SubParsers) -> None:
    run = commands.add_parser(
        "exec",
        help="preflight an adapter and run it: the check and the exec as one step",
        description="Resolve ADAPTER's binary (on PATH), run the preflight on that exact file and "
        "execute it with ARGS. Exit with the child's status; else, with one line on stderr and "
        "nothing started, 127 when the binary is not found (nothing on PATH has the name, or it "
        "leads nowhere) and 126 when it is refused or cannot be executed. Every refusal is "
        "recorded in the audit chain first.",
    )
    run.add_argument("adapter", metavar="ADAPTER")
    run.add_argument("argv", metavar="-- ARGS", nargs=argparse.REMAINDER)
    run.set_defaults(handler=_exec)


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors quote the arguments given: kept to one line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="python -m floorguard",
        description="floorguard: refuse known-unsafe agent CLIs at spawn time, and prove it.",
    )
    from floorguard._version import __version__

    parser.add_argument(
        "-V", "--version", action="version", version=f"floorguard {__version__}",
        help="print floorguard's version and exit",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register_verify(commands)
    register_doctor(commands)
    register_exec(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become one ``floorguard: error:`` line and exit status 1."""
    args = build_parser().parse_args(argv)
    if getattr(args, "checkpoint", None) is not None and args.pubkey is None:
        args.parser.error("--checkpoint needs --pubkey (the key the checkpoint is signed by)")
    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if since is not None and until is not None and since > until:
        args.parser.error("--since is later than --until")
    handler: Handler = args.handler
    try:
        return handler(args)
    except FloorguardError as error:
        print(f"floorguard: error: {one_line(str(error))}", file=sys.stderr)
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        print(
            f"floorguard: error: {one_line(where + str(error.strerror or error))}", file=sys.stderr
        )
    return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
