"""``python -m floorguard``: the runtime's own command line, usable without floorctl.

argparse only (the runtime never imports click). Each command is a ``register_*`` function
that adds its parser and sets ``handler``; a handler returns the exit status:
0 success, 1 a check failed or input was rejected, 2 usage error (argparse's own).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from floorguard._base._text import one_line, terminal_json
from floorguard._commands._cli_io import requested_format, stdout_failed
from floorguard.errors import FloorguardError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:
    import subprocess

    from floorguard._commands.verify_commands import ReceiptResult
    from floorguard._proofs.tlog import ConsistencyResult, InclusionResult

    # Private in argparse and not subscriptable at run time: for the type checker only.
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    LogResult = ReceiptResult | InclusionResult | ConsistencyResult


def _time_option(text: str) -> datetime:
    """argparse type: RFC 3339 with Z or an offset (a bad one is a usage error)."""
    from floorguard._base._time import parse_ts

    try:
        return parse_ts(text)
    except FloorguardError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _since_option(text: str) -> datetime:
    """argparse type: a window's start (rounded up past microseconds: parse_ts_ceiling)."""
    from floorguard._base._time import parse_ts_ceiling

    try:
        return parse_ts_ceiling(text)
    except FloorguardError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _whole_number_option(text: str) -> int:
    """argparse type: a whole number in ASCII digits (a usage error otherwise)."""
    from floorguard._base._text import whole_number

    try:
        return whole_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _path_option(*, exists: bool, dir_okay: bool, file_okay: bool = True) -> Callable[[str], Path]:
    """argparse type: a path checked as floorctl's click options check theirs (a usage error
    otherwise), so that the two CLIs refuse the same command lines alike."""

    def check(text: str) -> Path:
        if not text:  # (Path("") is the working directory: click refuses it as no path)
            raise argparse.ArgumentTypeError("an empty path names no file")
        path = Path(text)
        if not os.path.exists(path):
            if exists:
                raise argparse.ArgumentTypeError(f"path {text!r} does not exist")
        elif not dir_okay and os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"file {text!r} is a directory")
        elif not file_okay and not os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"directory {text!r} is a file")
        return path

    return check


_EXISTING_FILE = _path_option(exists=True, dir_okay=False)
_FILE = _path_option(exists=False, dir_okay=False)
_EXISTING_DIR = _path_option(exists=True, dir_okay=True, file_okay=False)


def _notify(message: str) -> None:
    print(one_line(f"floorguard: {message}"), file=sys.stderr)


def _slice_option(text: str) -> str:
    return text if text == "-" else str(_FILE(text))


def _verify_chain(args: argparse.Namespace) -> int:
    from floorguard._commands import verify_commands
    from floorguard._proofs import window_report

    report = verify_commands.verify_chain(
        args.slice,
        key_file=args.key_file,
        host_keys=args.host_keys,
        checkpoint=args.checkpoint,
        pubkey=args.pubkey,
        maps=args.maps or [],
        since=args.since,
        until=args.until,
        unauthenticated=args.unauthenticated,
        notify=_notify,
        inclusion=args.inclusion,
        witness_keys=args.witness_keys or [],
        witnesses=args.witnesses,
        previous_checkpoint=args.previous_checkpoint,
        consistency=args.consistency,
    )
    if args.output_format == "text":
        sys.stdout.write(window_report.render_text(report))
    else:
        from floorguard._commands import report_formats as formats

        document = window_report.report_document(report)
        where = formats.artifact_uri(args.slice, Path.cwd())
        sys.stdout.write(formats.render("chain", args.output_format, document, where))
        args.emitted = True
    return EXIT_OK if report.proven else EXIT_FAILED


def add_format(parser: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    """``--format CHOICE`` (default text) and ``--json`` (= ``--format json``), as floorctl
    has them; ``main`` resolves the two into ``args.output_format``."""
    parser.add_argument(
        "--format",
        dest="format_choice",
        choices=choices,
        default=None,
        help="output format (default text)",
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="the same as --format json"
    )


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
    chain.add_argument(
        "slice", metavar="SLICE", type=_slice_option, help="the slice file, or - for stdin"
    )
    chain.add_argument("--since", metavar="TS", type=_since_option, help="window start (RFC 3339)")
    chain.add_argument("--until", metavar="TS", type=_time_option, help="window end (RFC 3339)")
    chain.add_argument(
        "--key-file",
        type=_FILE,
        default=None,
        help="the chain's HMAC key file; without it the MACs are not checked",
    )
    chain.add_argument(
        "--host-keys",
        type=_EXISTING_FILE,
        default=None,
        help='the hosts\' public keys, {"hosts": {NAME: PEM, ...}}: host-signed records are '
        "checked with them, and the output names the host that wrote each record",
    )
    chain.add_argument(
        "--checkpoint",
        type=_EXISTING_FILE,
        default=None,
        help="a signed checkpoint (C2SP signed note) the slice must be consistent with",
    )
    chain.add_argument(
        "--pubkey",
        type=_EXISTING_FILE,
        default=None,
        help="the public key the checkpoint is signed by",
    )
    chain.add_argument(
        "--inclusion",
        type=_EXISTING_FILE,
        default=None,
        metavar="PROOF",
        help="an inclusion proof of the checkpoint's last record (floorctl chain prove), "
        "needed when the slice does not start at genesis",
    )
    chain.add_argument(
        "--previous-checkpoint",
        type=_EXISTING_FILE,
        default=None,
        help="the checkpoint the last audit ended at: with --consistency, the records "
        "appended since it are bound to --checkpoint without the records before it",
    )
    chain.add_argument(
        "--consistency",
        type=_EXISTING_FILE,
        default=None,
        metavar="PROOF",
        help="the consistency proof from --previous-checkpoint to --checkpoint",
    )
    add_witness_options(chain)
    chain.add_argument(
        "--maps",
        type=_EXISTING_DIR,
        action="append",
        metavar="DIR",
        help="a floor-map archive folder (sha256-<hex>.json); repeatable (default: "
        "floorguard's own maps and ./generated/floorguard/maps)",
    )
    chain.add_argument(
        "--unauthenticated",
        action="store_true",
        help="accept a slice checked without --key-file or --checkpoint (only the links "
        "between records, which anyone can recompute; the output says so)",
    )
    add_format(chain, ("text", "json", "sarif", "markdown"))
    chain.set_defaults(handler=_verify_chain, parser=chain)
    receipt = checks.add_parser(
        "receipt",
        help="check a receipt's signature, content address and the floor map it pins",
        description="Verify a signed update receipt (DSSE envelope) against --pubkey, or "
        "without it the signing key in use: exit 0 only when its signature verifies. A stored "
        "receipt without a signature, such as one line of a chain export, exits 1 unless "
        "--content-only, which recomputes its content address alone and says so. With "
        "--floor-map, fail when that map's hash is not the one the receipt pins.",
    )
    receipt.add_argument("file", type=_EXISTING_FILE, metavar="FILE")
    receipt.add_argument(
        "--pubkey",
        type=_EXISTING_FILE,
        default=None,
        help="public key the receipt must be signed by (default: the signing key in use, "
        "FLOORCTL_SIGNING_KEY or floorctl's development key)",
    )
    receipt.add_argument(
        "--floor-map",
        type=_EXISTING_FILE,
        default=None,
        help="a floor_map.py in the default layout, or a map JSON (archived or published); "
        "fails if its hash is not the one the receipt pins",
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
    register_log_checks(checks)
    return checks


def add_witness_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--witness-key",
        dest="witness_keys",
        type=_EXISTING_FILE,
        action="append",
        metavar="PUB",
        help="a witness's public key; repeatable: the checkpoint counts only with --witnesses "
        "of them (at least 1) cosigning it (C2SP cosignature/v1)",
    )
    parser.add_argument(
        "--witnesses",
        type=_whole_number_option,
        default=None,
        metavar="N",
        help="how many of the --witness-key must have cosigned: at least 1 (default: all of them)",
    )


def register_log_checks(checks: _SubParsers) -> None:
    """``verify inclusion`` and ``verify consistency`` (the transparency log)."""
    inclusion = checks.add_parser(
        "inclusion",
        help="check that one record is in the log a signed checkpoint states",
        description="Verify the signed checkpoint against --pubkey, then the inclusion proof "
        "(floorctl chain prove): the record it carries is at its index in that log. Exit 0 "
        "only when both verify.",
    )
    inclusion.add_argument("proof", type=_EXISTING_FILE, metavar="PROOF")
    inclusion.add_argument("--checkpoint", type=_EXISTING_FILE, required=True)
    inclusion.add_argument("--pubkey", type=_EXISTING_FILE, required=True)
    add_witness_options(inclusion)
    inclusion.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )
    inclusion.set_defaults(handler=_verify_inclusion, parser=inclusion)
    consistency = checks.add_parser(
        "consistency",
        help="check that a newer checkpoint's log extends an older one's",
        description="Verify both signed checkpoints against --pubkey, then the consistency "
        "proof (floorctl chain consistency) between them. Exit 0 only when all verify.",
    )
    consistency.add_argument("--old", type=_EXISTING_FILE, required=True)
    consistency.add_argument("--new", type=_EXISTING_FILE, required=True)
    consistency.add_argument("--proof", type=_EXISTING_FILE, required=True)
    consistency.add_argument("--pubkey", type=_EXISTING_FILE, required=True)
    add_witness_options(consistency)
    consistency.add_argument(
        "--json", dest="as_json", action="store_true", help="print one JSON document"
    )
    consistency.set_defaults(handler=_verify_consistency, parser=consistency)


def _print_result(args: argparse.Namespace, result: LogResult) -> None:
    """A verify command's result, as text or (--json) one JSON document."""
    from floorguard._commands import verify_commands

    if args.as_json:
        sys.stdout.write(verify_commands.json_text(result.document()))
    else:
        sys.stdout.write(result.text())


def _verify_inclusion(args: argparse.Namespace) -> int:
    from floorguard._commands import verify_commands

    result = verify_commands.verify_inclusion(
        args.proof,
        checkpoint=args.checkpoint,
        pubkey=args.pubkey,
        witness_keys=args.witness_keys or [],
        witnesses=args.witnesses,
    )
    _print_result(args, result)
    return EXIT_OK


def _verify_consistency(args: argparse.Namespace) -> int:
    from floorguard._commands import verify_commands

    result = verify_commands.verify_consistency(
        old=args.old,
        new=args.new,
        proof=args.proof,
        pubkey=args.pubkey,
        witness_keys=args.witness_keys or [],
        witnesses=args.witnesses,
    )
    _print_result(args, result)
    return EXIT_OK


def _verify_receipt(args: argparse.Namespace) -> int:
    from floorguard._commands import verify_commands

    result = verify_commands.verify_receipt(
        args.file,
        pubkey=args.pubkey,
        floor_map=args.floor_map,
        content_only=args.content_only,
        notify=_notify,
    )
    _print_result(args, result)
    return EXIT_OK


def _doctor(args: argparse.Namespace) -> int:
    from floorguard._commands import doctor

    posture = doctor.run()
    if args.output_format == "text":
        print(doctor.format_table(posture))
    else:
        from floorguard._commands import report_formats as formats

        sarif = args.output_format == "sarif"
        where = formats.doctor_map_artifact(Path.cwd()) if sarif else None
        document = posture.to_json()
        sys.stdout.write(
            formats.render(
                "doctor",
                args.output_format,
                document,
                where.uri if where else None,
                strict=args.strict,
                lines=where.lines if where else None,
                cwd=Path.cwd(),
            )
        )
        args.emitted = True
    problem = posture.problem(strict=args.strict)
    if problem is None:
        return EXIT_OK
    print(f"floorguard: error: {one_line(problem)}", file=sys.stderr)
    return EXIT_FAILED


def register_doctor(commands: _SubParsers) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="version posture of every tracked adapter, sealed as a receipt",
        description="Find every tracked adapter on PATH, detect its version and judge it by "
        "the map (ok, below_floor, affected, waived, unknown_version, not_installed, and "
        "ahead_of_last_green: ok but newer than the adapter's last-green canary version, "
        "from the verified audit chain); the posture is appended to the audit chain as "
        "adapter.version_posture. Exit 1 unless every installed tracked adapter is ok, "
        "waived or ahead_of_last_green (a warning; --strict fails on it too).",
    )
    doctor.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on warnings as well (ahead_of_last_green)",
    )
    add_format(doctor, ("text", "json", "sarif", "markdown"))
    doctor.set_defaults(handler=_doctor, parser=doctor)


def _chain_export(args: argparse.Namespace) -> int:
    from floorguard._chain.chain import AuditChain
    from floorguard._chain.slice_export import export_slice

    try:
        exported = export_slice(AuditChain.from_env(), args.since, args.until, args.out)
    except BrokenPipeError:
        # The reader stopped early (| head): the slice is incomplete, so exit 1, quietly.
        stdout_failed()
        return EXIT_FAILED
    if args.out is not None:
        print(one_line(f"floorguard: wrote {exported.count} record(s) to {args.out}"),
              file=sys.stderr)  # fmt: skip
    return EXIT_OK


def register_chain(commands: _SubParsers) -> None:
    chain = commands.add_parser("chain", help="read the audit chain this host writes")
    actions = chain.add_subparsers(dest="action", metavar="ACTION", required=True)
    export = actions.add_parser(
        "export",
        help="a contiguous slice of the audit chain as JSON Lines",
        description="Write a contiguous slice of the audit chain (FLOORGUARD_CHAIN_URL, else "
        "the local SQLite chain) as JSON Lines, one record per line, as floorctl chain export "
        "does. The slice reaches one record before --since and one after --until when there "
        "are such records (else from genesis, or up to the head), so that a verifier can see "
        "that the window is covered. Exit 1 when there is no chain, or when the reader of "
        "standard output stops early.",
    )
    export.add_argument("--since", metavar="TS", type=_since_option, help="window start (RFC 3339)")
    export.add_argument("--until", metavar="TS", type=_time_option, help="window end (RFC 3339)")
    export.add_argument(
        "--out", metavar="FILE", type=_FILE, help="write to FILE atomically instead of stdout"
    )
    export.set_defaults(handler=_chain_export, parser=export)


# The shell's statuses: "found but cannot execute" and "not found". Nothing was started.
EXIT_REFUSED = 126
EXIT_NOT_FOUND = 127


def _child_arguments(args: argparse.Namespace) -> list[str]:
    """The arguments after ADAPTER, less exec's own ``--`` (the first one only: argparse
    versions differ on whether REMAINDER keeps it, so they are taken from the command line
    as given when it is known)."""
    given: list[str] | None = getattr(args, "given", None)
    if given is not None and "exec" in given:
        rest = given[given.index("exec") + 1 :]
        if rest and rest[0] == args.adapter:
            return rest[2:] if rest[1:2] == ["--"] else rest[1:]
    argv = list(args.argv)
    return argv[1:] if argv[:1] == ["--"] else argv


def _exec(args: argparse.Namespace) -> int:
    import errno
    import signal

    from floorguard._gate import launcher
    from floorguard._gate.launcher import spawn
    from floorguard.errors import BinaryNotFound, SpawnRefused

    argv = _child_arguments(args)
    problems = _own_start_up_problems()
    if problems:
        print(
            one_line(
                "floorguard: refusing to run the gate: this Python may already have run code "
                f"from the child's inputs: {'; '.join(problems)}; nothing was started or "
                "recorded. Start it by absolute path with -I: "
                "/path/to/python -I -m floorguard exec ..."
            ),
            file=sys.stderr,
        )
        return EXIT_REFUSED
    signals = _ChildSignals()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signals.handle)
    launcher._starting_hook = signals.starting
    try:
        child = spawn(args.adapter, argv)
    except _Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        print(f"floorguard: aborted ({name}): nothing was started", file=sys.stderr)
        return 128 + stopped.signum
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
    finally:
        launcher._starting_hook = None
    signals.started(child)
    code = child.wait()
    # A child killed by a signal reports -N; a shell reports 128+N.
    return code if code >= 0 else 128 - code


class _Stopped(BaseException):
    """A signal before the child was started: exec stops, starting nothing (a
    BaseException, as KeyboardInterrupt is: nothing on the way catches it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _ChildSignals:
    """exec's SIGINT, SIGTERM and SIGHUP. Before the child is about to start, one stops
    exec there; from then on it is the child's: held while the child is being started (a
    gate killed then would leave the child running unsupervised), sent to it once it is."""

    def __init__(self) -> None:
        self._child: subprocess.Popen[Any] | None = None
        self._starting = False
        self._held: list[int] = []

    def starting(self) -> None:
        self._starting = True

    def handle(self, signum: int, _frame: object) -> None:
        if self._child is not None:
            self._child.send_signal(signum)
        elif self._starting:
            self._held.append(signum)
        else:
            raise _Stopped(signum)

    def started(self, child: subprocess.Popen[Any]) -> None:
        self._child = child
        while self._held:
            child.send_signal(self._held.pop(0))


def _own_start_up_problems() -> tuple[str, ...]:
    import site

    from floorguard._gate.own_start_up import own_executable_problems, start_up_problems

    problems = start_up_problems(
        flags=sys.flags,
        path=sys.path,
        environ=os.environ,
        cwd=_working_directory(),
        user_site=site.USER_SITE if site.ENABLE_USER_SITE else None,
    )
    executable = os.path.realpath(sys.executable) if sys.executable else ""
    return (*problems, *own_executable_problems(executable, _started_from()))


def _started_from() -> str | None:
    """The file the kernel started this process from (None when it cannot be read)."""
    try:
        return os.readlink("/proc/self/exe")
    except OSError:
        return None


def _working_directory() -> str:
    try:
        return os.getcwd()
    except OSError:  # (removed under it: the spawn says so; nothing lies within it here)
        return "/nonexistent-working-directory"


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
    args = run.add_argument(
        "argv", metavar="-- ARGS", nargs=argparse.REMAINDER, help="the adapter's arguments"
    )
    # REMAINDER matches nothing as well: without this a missing ADAPTER is reported as
    # "required: ADAPTER, -- ARGS", telling the user to give arguments they need not.
    args.required = False
    run.set_defaults(handler=_exec)


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors quote the arguments given: kept to one line, and with
    json asked for on the command line, also one JSON error document on stdout."""

    json_requested = False  # set by main before parsing (the parse may fail at any option)

    def error(self, message: str) -> NoReturn:
        # One line, as floorctl's: what is wrong, and the help that says what is right.
        line = f"{one_line(message)} (see '{self.prog} --help')"
        if _Parser.json_requested:
            _print_error_document(line, EXIT_USAGE)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {line}\n")


def _print_error_document(message: str, status: int) -> None:
    document = {"error": {"message": message, "exit_status": status}}
    try:
        print(terminal_json(document), flush=True)
    except OSError:
        stdout_failed()  # the stderr line has said what failed


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
    register_chain(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become one ``floorguard: error:`` line and exit status 1."""
    given = sys.argv[1:] if argv is None else list(argv)
    _Parser.json_requested = requested_format(given) == "json"
    parser = build_parser()
    args, unknown = parser.parse_known_args(given)
    args.given = given  # (exec hands its child the arguments exactly as given)
    if unknown:
        # Named by the command's own parser, whose --help lists what it takes.
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "checkpoint", None) is not None and args.pubkey is None:
        args.parser.error("--checkpoint needs --pubkey (the key the checkpoint is signed by)")
    keys, quorum = getattr(args, "witness_keys", None) or [], getattr(args, "witnesses", None)
    if quorum is not None:
        from floorguard._commands.verify_commands import quorum_error

        unusable_quorum = quorum_error(len(keys), quorum)
        if unusable_quorum is not None:
            args.parser.error(unusable_quorum)
    if (keys or quorum is not None) and getattr(args, "checkpoint", "") is None:
        args.parser.error("--witness-key and --witnesses need --checkpoint")
    previous, link = getattr(args, "previous_checkpoint", None), getattr(args, "consistency", "")
    if (previous is None) != (link is None) and link != "":
        args.parser.error("--previous-checkpoint and --consistency go together")
    if previous is not None and args.checkpoint is None:
        args.parser.error("--previous-checkpoint needs --checkpoint")
    inclusion = getattr(args, "inclusion", None)
    if inclusion is not None and args.checkpoint is None:
        args.parser.error("--inclusion needs --checkpoint")
    if inclusion is not None and previous is not None:
        from floorguard._commands.verify_commands import INCLUSION_OR_PREVIOUS

        args.parser.error(INCLUSION_OR_PREVIOUS)
    from floorguard._base._time import window_order_error

    disordered = window_order_error(getattr(args, "since", None), getattr(args, "until", None))
    if disordered is not None:
        args.parser.error(disordered)
    chosen = getattr(args, "format_choice", None)
    if getattr(args, "as_json", False) and chosen not in (None, "json"):
        args.parser.error(f"--json conflicts with --format {chosen}")
    if hasattr(args, "format_choice"):
        args.output_format = "json" if args.as_json else (chosen or "text")
        args.as_json = args.output_format == "json"
    args.emitted = False
    handler: Handler = args.handler
    try:
        try:
            return handler(args)
        except FloorguardError as error:
            message = one_line(str(error))
        except OSError as error:
            # No file name and a stdout that fails: the output itself could not be written.
            if error.filename:
                where = f"{error.filename}: "
            else:
                where = "standard output: " if stdout_failed() else ""
            message = one_line(where + str(error.strerror or error))
        print(f"floorguard: error: {message}", file=sys.stderr)
        if getattr(args, "as_json", False) and not args.emitted:
            # With json a failure is still one JSON document, as floorctl prints it.
            _print_error_document(message, EXIT_FAILED)
        return EXIT_FAILED
    except KeyboardInterrupt:
        # As floorctl: one line, the JSON document with json, exit 1; never a traceback.
        print("floorguard: aborted", file=sys.stderr)
        if getattr(args, "as_json", False) and not args.emitted:
            _print_error_document("aborted", EXIT_FAILED)
        # exec answers as a shell does for a command stopped by SIGINT (nothing was started).
        return 128 + 2 if handler is _exec else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
