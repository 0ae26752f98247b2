"""The spawn preflight: decide, seal the decision into the audit chain, and only then answer.

Fail closed: an unknown version, a failed probe, a missing binary or an untrustworthy floor
map is a refusal, and no decision (not even a permit) leaves this module unless its receipt
is durably in the chain. The policy and the floor map are read at every call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeGuard

from floorguard._base import _time
from floorguard._base._text import (
    is_text,
    own_characters,
    recordable_value,
    without_credentials,
)
from floorguard._base.state import STATE_VARIABLES, state_key
from floorguard._chain import receipts
from floorguard._chain.chain import AuditChain
from floorguard._gate.decision import (
    BLOCK,
    PERMIT,
    REFUSE,
    UNTRACKED,
    WAIVED,
    WARN,
    WARN_OVERRIDE,
    Decision,
)
from floorguard._identify import (
    detect,
    env_command,
    examine,
    kernel_exec,
    mcp_config,
    server_workspace,
)
from floorguard._identify.mcp_config import CLIENT_OF_ADAPTER, home_of
from floorguard._identify.target import open_target
from floorguard._maps import active_map, verdict, versions
from floorguard._maps.catalog import CATALOG, executable_for
from floorguard._maps.map_model import ADAPTER_NAME, invalid_adapter_name
from floorguard._maps.packages import index_of
from floorguard.errors import (
    BinaryNotFound,
    BinaryNotFoundError,
    ChainError,
    DetectionError,
    FloorMapError,
    SpawnRefused,
    cut_hidden_context,
)

if TYPE_CHECKING:
    from floorguard._identify.detect import Detection
    from floorguard._identify.env_command import EnvCommand
    from floorguard._identify.examine import Examination
    from floorguard._identify.identify import Identification
    from floorguard._identify.mcp_config import Declaration
    from floorguard._identify.target import Target
    from floorguard._maps.map_model import Advisory
    from floorguard._maps.verdict import Assessment

POLICY_VARIABLE = "FLOORGUARD_ADAPTER_FLOOR_POLICY"
UNTRACKED_POLICY_VARIABLE = "FLOORGUARD_UNTRACKED_POLICY"


def policy_from(environ: Mapping[str, str]) -> str:
    """Exactly ``warn`` turns a below-floor or unknown-version refusal into an override.

    Anything else (``WARN``, `` warn``, ``warn-only``, empty, unset) blocks: a typo must
    not weaken the floor.
    """
    return WARN if environ.get(POLICY_VARIABLE) == WARN else BLOCK


def refuses_untracked(environ: Mapping[str, str]) -> bool:
    """Exactly ``refuse`` in FLOORGUARD_UNTRACKED_POLICY refuses every untracked spawn."""
    return environ.get(UNTRACKED_POLICY_VARIABLE) == "refuse"


@dataclass(frozen=True)
class _Judgement:
    verdict: str
    reason: str
    adapter: str | None = None
    identified_by: str | None = None
    version: str | None = None
    detected_by: str | None = None
    binary: str | None = None
    floor: str | None = None
    advisory_id: str | None = None
    floor_map_hash: str | None = None
    waiver_id: str | None = None
    # The moment judged (waivers must be unexpired then); the receipt is stamped with it.
    at: str | None = None
    # For an agent that is an MCP client: every server its configuration declares, judged.
    mcp_servers: tuple[dict[str, Any], ...] | None = None
    # For a program run through env: env's file, the command as given, what it changed.
    run_through: dict[str, Any] | None = None


def judge(
    adapter: str,
    *,
    binary: str | os.PathLike[str] | None,
    version: str | None,
    policy: str,
    environ: Mapping[str, str],
    target: Target | None = None,
    argv: Sequence[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    floor_map: object = None,
    started_by_name: bool = False,
) -> _Judgement:
    """The verdict, without recording it. Never raises for a refusal: it returns one.

    ``floor_map`` is the host's own floor-map module to judge by (``active_map.current``).
    ``adapter`` is the name asked for. The binary (``target`` when the caller has opened it,
    else ``binary`` or the name on PATH) is identified from what it is, with ``argv`` for an
    interpreter: the floor applied is the identified adapter's, whatever the name.
    ``started_by_name``: someone else will start it by name with ``execvp`` (an MCP server),
    not floorguard through the opened file, so it must be a file the kernel starts as it is.
    """
    if not ADAPTER_NAME.match(adapter):
        return _Judgement(REFUSE, invalid_adapter_name(adapter))
    try:
        in_force = active_map.current(floor_map)
    except Exception as exc:  # FloorMapError, or anything else a damaged input provokes
        # Never overridable: with an untrustworthy map there is no floor to compare against.
        problem = str(exc) if isinstance(exc, FloorMapError) else f"{type(exc).__name__}: {exc}"
        return _Judgement(REFUSE, f"floor map cannot be trusted: {problem}")
    opened, unresolved = target, None
    if opened is None:
        try:
            name = executable_for(adapter) if binary is None else os.fspath(binary)
            opened = open_target(name, path_env=environ.get("PATH"))
        except (DetectionError, OSError, ValueError) as exc:
            # A caller that states the version without naming a binary may be judging an
            # install elsewhere; when the name does lead to a file here, that file is judged,
            # and so is a name the child may yet find (a relative or empty PATH entry).
            elsewhere = (
                binary is None
                and version is not None
                and isinstance(exc, BinaryNotFoundError)
                and not _searches_relative(environ)
            )
            if not elsewhere:
                unresolved = exc if isinstance(exc, DetectionError) else DetectionError(str(exc))
    try:
        if started_by_name and opened is not None:
            kernel_exec.check_kernel_starts(opened)
        elif (
            started_by_name
            and unresolved is not None
            and not isinstance(unresolved, BinaryNotFoundError)
        ):
            # Found but not opened (a FIFO, socket or device with execute bits, a file
            # that cannot be read): execvp passes over what the kernel will not start and
            # runs the next file of the name, which nothing here has judged.
            raise kernel_exec.NotStarted(str(unresolved))
        judged = _judge_run(
            adapter, opened, unresolved, in_force=in_force, version=version, policy=policy,
            environ=environ, argv=argv, cwd=cwd,
        )  # fmt: skip
        if judged.verdict != REFUSE and (
            active_map.current(floor_map).floor_map_hash != in_force.floor_map_hash
        ):
            # A refresh landed while the binary was identified and probed (a waiver revoked,
            # an adapter newly tracked, a range widened): nothing may be allowed on a map no
            # longer in force. Checked after every path that allows, untracked ones too.
            return dataclasses.replace(
                judged,
                verdict=REFUSE,
                reason=f"the floor map changed while {adapter} was being judged; decide again",
                waiver_id=None,  # nothing was waived
            )
        return judged
    except kernel_exec.NotStarted as exc:
        return _Judgement(
            REFUSE, f"cannot tell what {adapter} will run: {exc}",
            floor_map_hash=in_force.floor_map_hash, binary=str(opened.path) if opened else None,
        )  # fmt: skip
    except Exception as exc:  # a gate that cannot judge refuses, on the record
        return _Judgement(
            REFUSE,
            f"cannot judge {adapter}: {type(exc).__name__}: {exc}",
            floor_map_hash=in_force.floor_map_hash,
        )
    finally:
        if opened is not None and target is None:
            opened.close()


def _searches_relative(environ: Mapping[str, str]) -> bool:
    """Whether a child with ``environ`` searches a PATH entry that is empty or relative (its
    working directory), where the gate, which looks in absolute entries only, does not."""
    path = environ.get("PATH")
    return path is not None and not all(map(os.path.isabs, path.split(os.pathsep)))


def _claim_not_borne_out(
    named: str, stated: str, found: detect.Detection, advisory: Advisory | None
) -> str | None:
    """Why the caller's ``stated`` version of ``named`` is not the version ``found`` of the
    file judged (equal as the map's entry orders versions, else as text), or None."""
    order = None if advisory is None else advisory.order
    try:
        same = versions.parse(stated, order) == versions.parse(found.version, order)
    except versions.InvalidVersionError:
        same = stated == found.version
    if same:
        return None
    return (
        f"the caller states {named} {stated}, but {found.binary} is {found.version} "
        f"({found.detected_by})"
    )


def _judge_run(
    requested: str,
    opened: Target | None,
    unresolved: DetectionError | None,
    *,
    in_force: active_map.ActiveMap,
    version: str | None,
    policy: str,
    environ: Mapping[str, str],
    argv: Sequence[str] | None,
    cwd: str | os.PathLike[str] | None,
) -> _Judgement:
    """The judgement of what runs: for ``env COMMAND``, of the command env runs (what env
    is asked to do and is not modelled refuses, whatever the policy); else of the opened
    program itself."""
    if opened is not None and argv is not None:
        try:
            through_env = env_command.is_env(opened)
            parsed = env_command.parse_env_argv(argv) if through_env else None
        except env_command.EnvRefused as refused:
            return _Judgement(
                REFUSE, f"cannot tell what {requested} will run: {refused}",
                floor_map_hash=in_force.floor_map_hash, binary=str(opened.path),
            )  # fmt: skip
        if parsed is not None and parsed.command is not None:
            return _judge_through_env(
                requested, opened, parsed, in_force=in_force, version=version,
                policy=policy, environ=environ, cwd=cwd,
            )  # fmt: skip
    return _judge_opened(
        requested, opened, unresolved, in_force=in_force, version=version, policy=policy,
        environ=environ, argv=argv, cwd=cwd,
    )  # fmt: skip


def _judge_through_env(
    requested: str,
    env: Target,
    parsed: EnvCommand,
    *,
    in_force: active_map.ActiveMap,
    version: str | None,
    policy: str,
    environ: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
) -> _Judgement:
    """``env [-i] [-u NAME] [NAME=VALUE]... COMMAND ARGS`` judged as COMMAND ARGS spawned
    with the environment env builds (a PATH it sets decides which file is found), the way
    env's ``execvp`` finds it. The variables that load code into env itself stay doubts."""
    from floorguard._identify import child_inputs

    command = parsed.command or ""
    here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    run = parsed.environment({k: v for k, v in environ.items() if k not in _HOST_KEYS})
    view = _judging_view(environ, run)
    refused: dict[str, Any] = {
        "floor_map_hash": in_force.floor_map_hash, "binary": str(env.path),
        "run_through": parsed.record(str(env.path)),
    }  # fmt: skip
    try:
        name, path_env = env_command.command_path(command, view, here)
        program = open_target(name, path_env=path_env)
    except env_command.EnvRefused as exc:
        return _Judgement(REFUSE, f"cannot tell what {requested} will run: {exc}", **refused)
    except (DetectionError, OSError, ValueError) as exc:
        return _Judgement(
            REFUSE, f"cannot tell what {requested} will run: env's command {command!r}: {exc}",
            **refused,
        )  # fmt: skip
    base = os.path.basename(command)
    named = base if requested == "env" and ADAPTER_NAME.match(base) else requested
    # env itself is a dynamically linked program: what loads code into it decides what runs.
    # It starts no shell or runtime (the kernel starts its command: checked below), so their
    # variables count only as the command gets them.
    into_env = child_inputs.loading_variables(environ)
    with program:
        try:
            env_command.check_not_env(program)
            kernel_exec.check_kernel_starts(program)
        except (env_command.EnvRefused, kernel_exec.NotStarted) as exc:
            return _Judgement(REFUSE, f"cannot tell what {requested} will run: {exc}", **refused)
        judged = _judge_opened(
            named, program, None, in_force=in_force, version=version, policy=policy,
            environ=view, argv=parsed.args, cwd=here, doubts=into_env,
        )  # fmt: skip
    return dataclasses.replace(
        judged,
        reason=f"{judged.reason} (run through {env.path})",
        binary=judged.binary or str(program.path),
        run_through=refused["run_through"],
    )


def _judge_opened(
    requested: str,
    opened: Target | None,
    unresolved: DetectionError | None,
    *,
    in_force: active_map.ActiveMap,
    version: str | None,
    policy: str,
    environ: Mapping[str, str],
    argv: Sequence[str] | None,
    cwd: str | os.PathLike[str] | None,
    doubts: Sequence[str] = (),
) -> _Judgement:
    """The judgement of the opened program (``doubts``: inputs not understood that decide
    what it runs, found before it was opened)."""
    here = None if cwd is None else os.fspath(cwd)
    exam: Examination | None = None
    if opened is not None:
        try:
            exam = examine.examine(
                opened, argv, environ=environ, cwd=here, packages=index_of(in_force.floor_map)
            )
        except DetectionError as exc:
            # Not overridable: without knowing what runs there is no floor to apply.
            return _Judgement(
                REFUSE,
                f"cannot tell which adapter {requested} is: {exc}",
                floor_map_hash=in_force.floor_map_hash,
                binary=str(opened.path),
            )
        if doubts:
            exam = dataclasses.replace(exam, doubts=(*doubts, *exam.doubts))
        exam = _claim_that_only_refuses(exam, in_force)
    identified = exam.identified if exam is not None else None
    adapter = identified.adapter if identified is not None else requested
    named = adapter if adapter == requested else f"{adapter} (requested as {requested!r})"
    advisory = in_force.floor_map.get(adapter)
    known: dict[str, Any] = {
        "floor_map_hash": in_force.floor_map_hash,
        "adapter": adapter,
        "identified_by": identified.via if identified is not None else None,
    }
    if exam is not None and exam.runs == examine.LAUNCHER and identified is None and exam.doubts:
        # A package launcher whose package cannot be named may run a tracked one.
        return _Judgement(
            REFUSE, f"cannot tell what {named} will run: {_listed(exam.doubts)}", **known,
            binary=str(opened.path) if opened is not None else None,
        )  # fmt: skip
    if advisory is not None:
        known |= {"floor": advisory.min_safe_version, "advisory_id": advisory.advisory_id}
    elif refuses_untracked(environ):
        where: dict[str, Any] = {"binary": str(opened.path)} if opened is not None else {}
        return _Judgement(
            REFUSE,
            f"{named} is not a tracked adapter ({UNTRACKED_POLICY_VARIABLE}=refuse)",
            **known,
            **where,
        )
    if exam is not None and opened is not None:
        # A closed world for every spawn the floor decides: what is not understood refuses.
        unjudged = _unjudged(named, advisory, exam, opened, version)
        if unjudged is not None:
            return _Judgement(REFUSE, unjudged, **known, binary=str(opened.path))
        if advisory is None and identified is None and exam.runs != "native":
            # Never probed: a script's --version answer says nothing of what it runs.
            return _Judgement(
                UNTRACKED,
                f"{named} has no floor; {opened.path} is {exam.what}"
                + ("" if exam.set_aside is None else f" ({exam.set_aside})"),
                **known,
                binary=str(opened.path),
            )
    try:
        if unresolved is not None:
            raise unresolved
        # A version the caller states is a claim about the file here, when there is one:
        # that file's own version is established all the same, and must bear it out.
        stated = version if opened is None else None
        if identified is not None and identified.version_known and stated is None:
            found = _interpreted_version(identified, opened)
        else:
            found = detect.detect_version(
                adapter,
                version=stated,
                path_env=environ.get("PATH"),
                target=opened,
                environ=environ,
                cwd=here,
                packages=index_of(in_force.floor_map),
                probe=exam is None or exam.runs == "native",
            )
            if identified is not None and found.detected_by == "probe":
                _answer_names_its_package(identified, found.version)
    except DetectionError as exc:
        if advisory is None:
            return _Judgement(UNTRACKED, f"{named} has no floor; version unknown: {exc}", **known)
        override = policy == WARN
        where = {"binary": str(opened.path)} if opened is not None else {}
        return _Judgement(
            WARN_OVERRIDE if override else REFUSE,
            f"unknown version of {named}: {exc}" + ("; allowed by warn policy" if override else ""),
            **known,
            **where,
        )
    seen: dict[str, Any] = {
        "version": found.version, "detected_by": found.detected_by, "binary": found.binary
    }  # fmt: skip
    if advisory is None and found.names_adapter is not None:
        # A renamed copy that still says who it is in its --version output.
        adapter = found.names_adapter
        named = f"{adapter} (requested as {requested!r})"
        advisory = in_force.floor_map.get(adapter)
        known |= {"adapter": adapter, "identified_by": "version-output"}
        if advisory is not None:
            known |= {"floor": advisory.min_safe_version, "advisory_id": advisory.advisory_id}
        if advisory is not None and exam is not None and exam.doubts:
            return _Judgement(REFUSE, f"cannot judge what {named} will run: {_listed(exam.doubts)}",
                              **known, **seen)  # fmt: skip
        stand_in = None if exam is None else native_stand_in(named, adapter, exam)
        if advisory is not None and stand_in is not None:
            return _Judgement(REFUSE, stand_in, **known, binary=found.binary)
    if version is not None and opened is not None:
        disowned = _claim_not_borne_out(named, version, found, advisory)
        if disowned is not None:
            # (recorded as what the file is: the stated version ran nowhere)
            return _Judgement(REFUSE, disowned, **known, **seen)
    if advisory is None:
        return _Judgement(UNTRACKED, f"{named} has no floor in the map", **known, **seen)
    # The decision time is taken only now that the version is known: identifying and probing
    # may take up to FLOORGUARD_PROBE_TIMEOUT, and a waiver that expired meanwhile must not
    # waive. The receipt is stamped with this moment, before its chain record is.
    return _assessed(
        named, advisory, found.version, policy=policy, at=_time.utc_now(), known={**known, **seen}
    )


def _claim_that_only_refuses(exam: Examination, in_force: active_map.ActiveMap) -> Examination:
    """``exam`` without its identification when that came from metadata outside an install
    tree (``Identification.vouches`` False) and states a version the map lets run: the
    program is then what its source is (untracked, unless it imports an adapter); below the
    floor, or at a version the map cannot read, the claim stands, and refuses. Metadata in
    an MCP server's workspace adds a doubt instead: the code is the package's, its version
    unknown."""
    identified = exam.identified
    if identified is None or identified.version is None:
        return exam
    if identified.vouches:
        if not _written_in_the_workspace(identified.version_source):
            return exam
        # Metadata the repository declaring a server wrote names the code (by its layout:
        # a package's folder, an imported module) but cannot state its version: an unknown
        # version refuses, as it would with no metadata at all. (Dropping the claim would
        # let the metadata turn that refusal into an untracked permit.)
        why = (
            f"the package metadata naming it {identified.adapter} {identified.version} "
            f"({identified.version_source}) lies in the workspace, and vouches for nothing: "
            "its version is unknown (the workspace: the agent's folder, the folders of the "
            "configuration files its client reads for the server and every folder above "
            "them, of the home and the system's folders their node_modules; install servers "
            "outside these: globally, or in a folder of their own away from any project and "
            "from those files)"
        )
        return dataclasses.replace(exam, doubts=(*exam.doubts, why))
    entry = in_force.floor_map.get(identified.adapter)
    if entry is None:
        return exam
    try:
        versions.parse(identified.version, entry.order)
        at = _time.utc_now()
        unsafe = _assess(entry, identified.version, at, in_force.floor_map_hash).unsafe
    except versions.InvalidVersionError:
        return exam
    if unsafe:
        return exam
    why = (
        f"the package metadata naming it {identified.adapter} {identified.version} "
        f"({identified.version_source}) lies outside an install tree, and vouches for nothing"
    )
    return dataclasses.replace(exam, identified=None, set_aside=why)


def _written_in_the_workspace(source: str | None) -> bool:
    """Whether the metadata file ``source`` lies in the working directory of the agent whose
    MCP server is judged: the repository that declares the server can write an install tree
    there too (a ``.venv``, a ``node_modules``), so its metadata vouches for nothing."""
    from floorguard._identify.identification import server_workspaces

    folders = server_workspaces()
    if source is None or not folders:
        return False  # (a child judged for itself: no realpath on the preflight's path)
    from floorguard._identify.launchers import in_the_workspace

    return in_the_workspace(source, folders[0])


def _unjudged(
    named: str,
    advisory: Advisory | None,
    exam: Examination,
    opened: Target,
    version: str | None,
) -> str | None:
    """Why a spawn with a floor cannot be judged, or None. Only a native program may be
    judged by its own ``--version`` answer; a script or an interpreter must be recognised
    as the adapter's code, and every input deciding what it loads must be understood."""
    if advisory is None:
        return None
    if exam.doubts:
        return f"cannot judge what {named} will run: {_listed(exam.doubts)}"
    stand_in = native_stand_in(named, advisory.adapter, exam)
    if stand_in is not None:
        return f"{stand_in} ({opened.path})"
    if exam.identified is None and exam.runs != "native" and version is None:
        if exam.set_aside is not None:
            return f"{named}: {opened.path} is {exam.what}, and {exam.set_aside}"
        return (
            f"{named}: {opened.path} is {exam.what}, not recognised as {advisory.adapter}'s "
            "code; what it starts cannot be judged (a launcher's --version answer is not "
            "taken for it)"
        )
    return None


def native_stand_in(named: str, adapter: str, exam: Examination) -> str | None:
    """Why a native program cannot be ``adapter``, an agent never published as one (a
    Python or node package only), or None. Such a program may be anything: another tool
    answering a bare version, or a build bundling its own interpreter and any version of
    the agent's code without exporting the interpreter's symbols. Neither its answer nor
    package metadata beside it is taken for it."""
    entry = CATALOG.get(adapter)
    if exam.runs != "native" or entry is None or entry.native:
        return None
    kind = "Python" if entry.pip_distributions else "node"
    return (
        f"{named} is published only as a {kind} package, never as a native program, and "
        "this is a native program: it may be another tool, or a build carrying its own "
        f"interpreter and any version of {adapter}'s code, so neither its --version answer "
        "nor package metadata beside it is taken for it"
    )


def _listed(doubts: Sequence[str], most: int = 5) -> str:
    """The doubts, each once, the first ``most`` of them named in full."""
    distinct = list(dict.fromkeys(doubts))
    more = f"; and {len(distinct) - most} more" if len(distinct) > most else ""
    return "; ".join(distinct[:most]) + more


def _assessed(
    named: str,
    entry: Advisory,
    version: str,
    *,
    policy: str,
    at: _dt.datetime,
    known: dict[str, Any],
) -> _Judgement:
    """The verdict of the map's rule (``verdict.assess``) on a detected version, at ``at``."""
    stamp = _time.format_ts(at)
    map_hash = known["floor_map_hash"]
    try:
        if _cached_causes(map_hash, entry, version) is None:
            # (a version judged before under this map is one of the entry's ecosystem)
            versions.parse(version, entry.order)
    except versions.InvalidVersionError as exc:
        # Detection accepts PEP 440 and SemVer; the entry's ecosystem decides which counts.
        override = policy == WARN
        return _Judgement(
            WARN_OVERRIDE if override else REFUSE,
            f"unknown version of {named}: {exc} (the map compares {entry.adapter} by "
            f"{versions.order_name(entry.order)})"
            + ("; allowed by warn policy" if override else ""),
            at=stamp,
            **known,
        )
    try:
        assessment = _assess(entry, version, at, map_hash)
    except versions.InvalidVersionError as exc:
        # The version is fine: a bound in the map is not. Not overridable, as a bad map.
        return _Judgement(
            REFUSE, f"the floor map entry of {named} cannot be judged: {exc}", at=stamp, **known
        )
    if not assessment.unsafe:
        if entry.advisories:
            outside = f"is outside the affected versions of {len(entry.advisories)} advisories"
            floor = f" meets the floor {entry.min_safe_version} and" if entry.has_floor else ""
            reason = f"{named} {version}{floor} {outside}"
        else:
            reason = f"{named} {version} meets the floor {entry.min_safe_version}"
        return _Judgement(PERMIT, reason, at=stamp, **known)
    known = {**known, "advisory_id": assessment.advisory_id}
    message = f"{named} {version} " + "; ".join(
        verdict.unsafe_phrase(cause) for cause in assessment.causes
    )
    if assessment.waiver is not None:
        waiver = assessment.waiver
        return _Judgement(
            WAIVED,
            f"{message}; waived by {waiver.id} (approved by {waiver.approved_by}, expires "
            f"{waiver.expires}: {waiver.reason})",
            waiver_id=waiver.id,
            at=stamp,
            **known,
        )
    why = verdict.why_not_waived(entry, version, assessment.causes, at)
    if why is not None:
        message += f"; not waived: {why}"
    if policy == WARN:
        return _Judgement(WARN_OVERRIDE, message + "; allowed by warn policy", at=stamp, **known)
    return _Judgement(REFUSE, message, at=stamp, **known)


# (map hash, adapter, version) -> the causes, judged without waivers. The map hash covers
# every bound of every entry and the ecosystem an entry states (the version order is that
# or the catalog's, which is code), so a hit is the same judgement; a map of many
# advisories compares a version hundreds of times, which would otherwise be paid on every
# spawn. Nothing in it depends on the time or the policy: waivers (which expire) are judged
# afresh at every call, after it; the policy is applied after it; the map in force (a
# published map expires) is chosen afresh at every call and named by its hash.
_CAUSES: dict[tuple[str, str, str], Assessment] = {}
_CAUSES_LIMIT: Final = 1024


def _cached_causes(map_hash: str | None, entry: Advisory, version: str) -> Assessment | None:
    """The causes judged before for ``version`` under the map ``map_hash``, or None."""
    return None if map_hash is None else _CAUSES.get((map_hash, entry.adapter, version))


def _assess(entry: Advisory, version: str, at: _dt.datetime, map_hash: str | None) -> Assessment:
    """``verdict.assess`` at ``at``: the causes from the cache when the map is named; only an
    unsafe version of an entry with waivers is judged afresh (a waiver depends on ``at``)."""
    key = (map_hash, entry.adapter, version) if map_hash is not None else None
    cached = _CAUSES.get(key) if key is not None else None
    if cached is None:
        cached = verdict.assess(entry, version, at=None)
        if key is not None:
            if len(_CAUSES) >= _CAUSES_LIMIT:
                _CAUSES.clear()
            _CAUSES[key] = cached
    if cached.unsafe and entry.waivers:
        return verdict.assess(entry, version, at=at + verdict.WAIVER_MARGIN)
    return cached


def _answer_names_its_package(identified: Identification, answered: str) -> None:
    """That a native build's ``--version`` answer is the version of the package that
    carries it (a build of another version is not that package's). Raises DetectionError."""
    stated = identified.version
    where = identified.version_source
    if stated is None or not any(versions.is_valid(stated, e) for e in versions.ECOSYSTEMS):
        states = (
            f"its package's metadata ({where}) states "
            + ("no version" if stated is None else f"{stated!r}, which is no version")
            if where is not None
            else "no one package's metadata states its version"
        )
        raise DetectionError(
            f"{identified.subject} is a native build of {identified.adapter}'s, and {states} "
            f"to hold its answer {answered!r} to"
        )
    if not versions.same_build(answered, stated, npm_package=identified.via == "npm-package"):
        raise DetectionError(
            f"{identified.subject} answers {answered!r}, but the package that carries it "
            f"({where or identified.subject}) is {stated!r}: a build of another version is "
            "not that package's"
        )


def _interpreted_version(identified: Identification, opened: Target | None) -> Detection:
    """The version of a package an interpreter runs, from the package's own metadata."""
    from floorguard._identify.detect import Detection
    from floorguard._maps.catalog import validate_version

    if identified.version is None:
        if identified.version_source is not None:
            why = f"{identified.version_source} does not state exactly one version"
        else:
            why = "no one package's metadata states its version (none does, or several claim it)"
        raise DetectionError(f"{identified.via} {identified.subject}: {why}")
    try:
        accepted = validate_version(identified.version)
    except DetectionError as exc:
        raise DetectionError(f"{identified.version_source or identified.subject}: {exc}") from None
    kind = identified.detected_by or (
        "npm-metadata"
        if identified.via in ("node-script", "node-preload", "npm-package")
        else "pip-metadata"
    )
    binary = str(opened.path) if opened is not None else None
    return Detection(accepted, kind, binary, identified.version_source)


def preflight(
    adapter: str,
    *,
    binary: str | os.PathLike[str] | None = None,
    version: str | None = None,
    environ: Mapping[str, str] | None = None,
    floor_map: object = None,
    run_environ: Mapping[str, str] | None = None,
) -> Decision:
    """Decide whether ``adapter`` may be spawned, and record the decision durably.

    ``environ``: where floorguard's own settings are read (the policies, FLOORGUARD_HOME
    and the chain, the map in force): the host's environment (default ``os.environ``),
    never the child's. ``run_environ``: the environment the child will run with (its PATH,
    PYTHONPATH...), judged as a spawn's is (the child taken as started with no arguments:
    what loads code into it refuses); by default ``environ`` itself, whose variables a
    preflight without a command line does not judge.

    ``floor_map``: the host's own generated floor-map module (imported), to make it the map
    in force instead of the built-in or ``FLOORGUARD_FLOOR_MAP`` one; it is read from its
    file and checked as ``floorguard._maps.host_map`` says (anything else is a recorded refusal).

    Returns the Decision for permit, warn_override and untracked. Raises SpawnRefused for a
    refusal (``.decision`` holds the recorded refusal) and when the chain cannot be written
    (``.decision`` is None then: nothing could be recorded, so nothing is allowed).
    """
    adapter, binary, version, environ, run_environ = _preflight_arguments(
        adapter, binary, version, environ, run_environ
    )
    env = os.environ if environ is None else environ
    # A child's environment given is judged as a spawn's is: as started with no arguments.
    return decide(
        adapter, binary=binary, version=version, environ=env,
        run_environ=env if run_environ is None else run_environ,
        argv=None if run_environ is None else (), floor_map=floor_map,
    )  # fmt: skip


def _preflight_arguments(
    adapter: object, binary: object, version: object, environ: object, run_environ: object
) -> tuple[str, str | None, str | None, Mapping[str, str] | None, Mapping[str, str] | None]:
    """The arguments as judged: text of its own characters (a str subclass's copied), the
    mappings read once into dicts. Anything but text where the judgement reads text is a
    TypeError naming the argument, before anything is judged or recorded (as spawn's)."""
    if not is_text(adapter):
        raise TypeError(f"adapter must be a string, not {type(adapter).__name__}")
    if version is not None and not is_text(version):
        raise TypeError(f"version must be a string, not {type(version).__name__}")
    path = None
    if binary is not None:
        path = fspath_text(binary)
        if path is None:
            raise TypeError(f"binary must be a string or a path of one, not {binary!r}")
    copies: dict[int, dict[str, str]] = {}

    def environment(name: str, given: object) -> Mapping[str, str] | None:
        # (os.environ, the default, holds text only; another mapping is read once, here,
        # and one given as both is one copy)
        if given is None or given is os.environ:
            return None if given is None else os.environ
        if id(given) not in copies:
            copied = text_mapping(given)
            if copied is None:
                raise TypeError(f"{name} must map strings to strings (as os.environ does)")
            copies[id(given)] = copied
        return copies[id(given)]

    return (
        own_characters(adapter),
        path,
        None if version is None else own_characters(version),
        environment("environ", environ),
        environment("run_environ", run_environ),
    )


def fspath_text(value: object) -> str | None:
    """The text of a string or path object (its own characters), or None for anything else
    (bytes, a path of bytes)."""
    try:
        path = os.fspath(value)  # type: ignore[call-overload]
    except TypeError:
        return None
    return own_characters(path) if is_text(path) else None


def _is_mapping(value: object) -> TypeGuard[Mapping[object, object]]:
    """Whether ``value`` is a Mapping by its type (``isinstance`` believes ``__class__``)."""
    return issubclass(type(value), Mapping)


def text_mapping(given: object) -> dict[str, str] | None:
    """A mapping of strings to strings, read once into a dict of plain text; None for
    anything else."""
    if given is os.environ:
        # (read from one copy of its bytes: another thread may change it meanwhile)
        return dict(plain_environ(os.environ))
    if not _is_mapping(given):
        return None
    copied = {}
    for key, value in given.items():
        if not is_text(key) or not is_text(value):
            return None
        copied[own_characters(key)] = own_characters(value)
    return copied


def decide(
    adapter: str,
    *,
    binary: str | os.PathLike[str] | None = None,
    version: str | None = None,
    environ: Mapping[str, str],
    run_environ: Mapping[str, str],
    target: Target | None = None,
    argv: Sequence[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    floor_map: object = None,
) -> Decision:
    """:func:`preflight` for a caller that has opened the binary and knows the arguments and
    the environment it will run with (``run_environ``: its PATH, PYTHONPATH); the policies
    and the chain come from ``environ``. Raises SpawnRefused as preflight does."""
    same = run_environ is environ  # (a preflight's: read once, not compared twice)
    environ = plain_environ(environ)
    run_environ = environ if same else plain_environ(run_environ)
    policy = policy_from(environ)
    problem = None
    here = None if cwd is None else os.fspath(cwd)
    if here is None:
        try:
            os.getcwd()  # (the child would start in this process's own)
        except OSError as exc:
            problem = (
                "this process's working directory, which the child would start in, "
                f"cannot be read ({exc.strerror or exc}: it was removed?)"
            )
    if argv is not None and problem is None:
        from floorguard._identify.child_inputs import invalid_inputs

        problem = invalid_inputs(argv, run_environ, here)
        if problem is None and here is not None and not os.path.isdir(here):
            problem = f"the working directory {here} is not a directory"
        if problem is None:
            from floorguard._identify.process_paths import through_the_process

            # A path that is each process's own names one file here and another in the child.
            problem = through_the_process(
                argv, run_environ, here, None if target is None else target.argv0
            )
    if problem is not None:
        # Refused before anything is judged: a permit for a process that cannot start
        # would record something that never happened.
        judgement = _Judgement(REFUSE, f"{adapter} cannot be started as asked: {problem}")
        decision = _seal(adapter, judgement, policy, environ)
        raise SpawnRefused(f"refusing to spawn {_named(decision)}: {decision.reason}", decision)
    judgement = judge(
        adapter,
        binary=binary,
        version=version,
        policy=policy,
        environ=_judging_view(environ, run_environ),
        target=target,
        argv=argv,
        cwd=cwd,
        floor_map=floor_map,
    )
    if judgement.verdict == UNTRACKED:
        judgement = _with_policy_ignored(judgement, environ)
    if judgement.verdict != REFUSE:
        client = CLIENT_OF_ADAPTER.get(judgement.adapter or adapter)
        if client is not None:
            try:
                named, own_argv, own_environ = _as_env_runs_it(
                    adapter, judgement, argv, run_environ
                )
                judgement = _with_servers(
                    named, judgement, client, policy=policy, environ=environ,
                    run_environ=own_environ, argv=own_argv, cwd=cwd, floor_map=floor_map,
                )  # fmt: skip
            except Exception as exc:  # a gate that cannot judge refuses, on the record
                judgement = dataclasses.replace(
                    judgement,
                    verdict=REFUSE,
                    reason=f"cannot judge the MCP servers of {adapter}: "
                    f"{type(exc).__name__}: {exc}",
                    waiver_id=None,
                    mcp_servers=(),
                )
    decision = _seal(adapter, judgement, policy, environ)
    if not decision.allowed:
        raise SpawnRefused(f"refusing to spawn {_named(decision)}: {decision.reason}", decision)
    return decision


def _with_policy_ignored(judgement: _Judgement, environ: Mapping[str, str]) -> _Judgement:
    """An untracked judgement whose reason says so when FLOORGUARD_UNTRACKED_POLICY is set
    to something other than exactly ``refuse`` (``REFUSE``, ``deny``, empty: a template's
    variable left unset...), which allows it: a setting meant to refuse must not be ignored
    in silence."""
    value = environ.get(UNTRACKED_POLICY_VARIABLE)
    if value is None or value == "refuse":
        return judgement
    shown = without_credentials(repr(value[:40]))
    note = (
        f" ({UNTRACKED_POLICY_VARIABLE}={shown} is not exactly 'refuse', so untracked spawns "
        "are allowed)"
    )
    return dataclasses.replace(judgement, reason=judgement.reason + note)


def _as_env_runs_it(
    requested: str,
    judged: _Judgement,
    argv: Sequence[str] | None,
    run_environ: Mapping[str, str],
) -> tuple[str, Sequence[str] | None, Mapping[str, str]]:
    """The name, arguments and environment ``judged``'s program runs with: for a program
    run through env (``run_through``), env's command's name and arguments and the
    environment env builds from ``run_environ`` (its configuration is found by that HOME,
    its servers on that PATH); else as given."""
    if judged.run_through is None or argv is None:
        return requested, argv, run_environ
    parsed = env_command.parse_env_argv(argv)
    command = os.path.basename(parsed.command or "")
    named = command if requested == "env" and ADAPTER_NAME.match(command) else requested
    return named, parsed.args, parsed.environment(run_environ)


def _with_servers(
    requested: str,
    agent: _Judgement,
    client: str,
    *,
    policy: str,
    environ: Mapping[str, str],
    run_environ: Mapping[str, str],
    argv: Sequence[str] | None,
    cwd: str | os.PathLike[str] | None,
    floor_map: object,
) -> _Judgement:
    """``agent``'s judgement with every MCP server its client will start judged as a spawn
    of its own (same map, policies and rule): refused when a server is refused or the
    declarations cannot be read exactly; the servers are listed either way."""
    here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    named = agent.adapter or requested
    named = named if named == requested else f"{named} (requested as {requested!r})"
    # (under another name, the program may still be the agent's own file, its arguments
    # the agent's: a native build probed for its version, or a file of its package)
    wrapped = (agent.adapter or requested) != requested
    own = (
        not wrapped
        or agent.identified_by == "version-output"
        or (agent.binary is not None and mcp_config.names_agent_program(client, agent.binary, here))
    )
    judged = judge_mcp_servers(
        client, policy=policy, environ=environ, run_environ=run_environ, argv=argv or (),
        cwd=here, floor_map=floor_map, map_hash=agent.floor_map_hash, wrapped=wrapped,
        own_arguments=own,
    )  # fmt: skip
    if judged.own_environment:
        # (what it starts would load code not judged, servers or not)
        return dataclasses.replace(
            agent,
            verdict=REFUSE,
            reason=f"cannot judge what {named} would start: {named} gives its own process, "
            f"{_listed(judged.own_environment)}",
            waiver_id=None,
            mcp_servers=(),
        )
    if judged.doubts:
        return dataclasses.replace(
            agent,
            verdict=REFUSE,
            reason=f"cannot read the MCP servers {named} would start: {_listed(judged.doubts)}",
            waiver_id=None,
            mcp_servers=(),
        )
    entries, refused = judged.entries, judged.refusals
    if not refused:
        return dataclasses.replace(agent, mcp_servers=tuple(entries))
    more = f"; and {len(refused) - 1} more refused" if len(refused) > 1 else ""
    return dataclasses.replace(
        agent,
        verdict=REFUSE,
        reason=f"{named} would start {refused[0]}{more} ({named} itself: {agent.reason})",
        waiver_id=None,
        mcp_servers=tuple(entries),
    )


@dataclass(frozen=True)
class ServersJudged:
    """The MCP servers a client would start, as :func:`judge_mcp_servers` found them."""

    # One receipt entry per declaration, in the order read.
    entries: tuple[dict[str, Any], ...]
    # Why each refused server refuses the agent (naming server, command, version, file).
    refusals: tuple[str, ...]
    # What could not be read exactly; when any, nothing was judged.
    doubts: tuple[str, ...]
    # Variables the client gives its own process that would make what it starts load code
    # not judged; when any, nothing was judged.
    own_environment: tuple[str, ...] = ()


def judge_mcp_servers(
    client: str,
    *,
    policy: str,
    environ: Mapping[str, str],
    run_environ: Mapping[str, str],
    argv: Sequence[str],
    cwd: str,
    floor_map: object = None,
    map_hash: str | None = None,
    wrapped: bool = False,
    own_arguments: bool = True,
) -> ServersJudged:
    """Read the MCP servers ``client`` declares for a spawn in ``cwd`` (absolute) with
    ``argv`` and ``run_environ``, and judge each local one with :func:`judge`, without
    recording anything. ``environ`` holds the host's policies; ``map_hash``, when given, is
    the map the agent was judged by (a server judged by another is refused); ``wrapped``:
    ``argv`` are those of a program that runs the agent (``own_arguments``: or the agent's
    own, its program run under another name). Raises only for a failure of
    floorguard itself."""
    from floorguard._identify import mcp_config

    found = mcp_config.read_servers(
        client, argv=argv, cwd=cwd, environ=run_environ, wrapped=wrapped,
        own_arguments=own_arguments,
    )  # fmt: skip
    if found.doubts or found.own_environment:
        return ServersJudged((), (), found.doubts, found.own_environment)
    nested = _NESTED_SERVERS.get()
    if nested is not None:
        # Servers of agents started as servers: every path through their tree is judged,
        # so their number, not their files' size, is what is bounded.
        nested[0] += len(found.declarations)
        if nested[0] > MAX_NESTED_SERVERS:
            return ServersJudged((), (), (
                f"the agents started as MCP servers declare more than {MAX_NESTED_SERVERS} "
                "servers between them",
            ))  # fmt: skip
    entries: list[dict[str, Any]] = []
    refused: list[str] = []
    # The folders of the configuration the client reads, found once for all its servers.
    configured = (
        server_workspace.project_folders(found.files, home_of(run_environ, cwd))
        if found.declarations
        else ()
    )
    for declared in found.declarations:
        entry, problem = _judge_server(
            declared, policy=policy, environ=environ, run_environ=run_environ, cwd=cwd,
            floor_map=floor_map, map_hash=map_hash, projects=(*found.projects, *configured),
        )  # fmt: skip
        # (a server judged under several readings of its environment that all come to the
        # same is listed once)
        if entry not in entries:
            entries.append(entry)
        if problem is not None and problem not in refused:
            refused.append(problem)
    return ServersJudged(tuple(entries), tuple(refused), ())


def _judge_server(
    declared: Declaration,
    *,
    policy: str,
    environ: Mapping[str, str],
    run_environ: Mapping[str, str],
    cwd: str,
    floor_map: object,
    map_hash: str | None,
    projects: Sequence[str] = (),
) -> tuple[dict[str, Any], str | None]:
    """The receipt entry of one declared server, and why it refuses the agent, or None.
    A remote server runs nothing here and a disabled one is not started: both are recorded,
    not judged."""
    entry: dict[str, Any] = {
        "name": declared.name,
        "transport": declared.transport,
        "declared_in": declared.source,
        "at": declared.at,
        "enabled": declared.enabled,
        "declaration_digest": declared.digest(),
    }
    if declared.transport != "stdio" or not declared.enabled:
        entry["url"] = _shown_url(declared.url)
        entry["command"] = declared.command
        entry["verdict"] = "disabled" if not declared.enabled else "remote"
        return entry, None
    # The client's child changes directory into the declared cwd: the kernel follows its
    # links there, and ``..`` after one climbs from the link's target; the server's paths
    # are then taken from that real folder (node's process.cwd(), CPython's sys.path[0]).
    where = cwd if declared.cwd is None else os.path.realpath(os.path.join(cwd, declared.cwd))
    command = declared.command or ""  # a stdio declaration always has one
    if "/" in command:
        command = os.path.join(where, command)
    base = os.path.basename(command).lower()
    requested = base if ADAPTER_NAME.match(base) else "mcp-server"
    # The server's environment is the one its client starts it with (the agent's, or for
    # codex the few variables it keeps) plus its own entries; the host's policies stay the
    # host's.
    start = run_environ if declared.base_env is None else dict(declared.base_env)
    server_env = {**start, **dict(declared.env)}
    from floorguard._identify.process_paths import through_the_process

    # As for the agent itself: the client starts the server, where /proc/self is its own.
    unreadable = through_the_process(declared.args, server_env, where, command)
    if unreadable is not None:
        judged = _Judgement(REFUSE, f"{requested} cannot be judged as declared: {unreadable}")
    else:
        from floorguard._identify.identification import (
            agent_environment,
            agent_workspace,
            workspace_in_force,
        )
        from floorguard._identify.launchers import within
        from floorguard._identify.server_workspace import repository_region

        # A server's own cwd may lie below the agent's: what its inputs put anywhere in
        # the agent's working directory is the workspace's all the same (the first agent's,
        # for the servers of a server that is an agent).
        outer = agent_workspace()
        workspace = (cwd, run_environ) if outer is None else (outer, agent_environment())
        home = home_of(run_environ, cwd)
        # (and the project folders whose entries of a global file were taken)
        projects = (*server_workspace.project_folders(declared.declared_in, home), *projects)
        # (and what a repository holding any of them may have written above them)
        homes = (home, server_workspace.account_home())
        # (a server that is itself an agent: its own folder is an anchor of its servers)
        nested = () if outer is None else (cwd,)
        declaring = repository_region(cwd if outer is None else None, (*projects, *nested), homes)
        spelled = cwd if declared.cwd is None else os.path.join(cwd, declared.cwd)
        if any(within(spelled, f) for f in (workspace[0], *declaring)):
            # (a folder reached through a link from the workspace, an extension folder the
            # repository linked elsewhere, is the repository's wherever it leads)
            declaring = (*declaring, where)
        # (so is a folder the server's command or a path among its arguments reaches through
        # a link that lies in the workspace: a checkout another tool made, linked from it)
        # (and so is one a PATH entry the server's command is looked up in, or its declared
        # cwd, reaches so; and a node_modules of the workspace that is a link, where node
        # and npx look)
        bare_words = [a for a in declared.args[:8] if a and not a.startswith("-") and "/" not in a
                      and "=" not in a]  # fmt: skip
        paths = [
            command, where,
            *(os.path.join(where, a) for a in declared.args if "/" in a),
            *(
                os.path.join(where, entry, "" if "/" in command else command)
                for entry in server_env.get("PATH", "").split(os.pathsep) if entry
            ),
            # (a variable an argument sets for what it runs: `env PATH=dir:... gemini`)
            *(
                os.path.join(where, piece, name)
                for arg in declared.args if "=" in arg
                for piece in arg.split("=", 1)[1].split(os.pathsep) if "/" in piece
                for name in ("", *bare_words)
            ),
        ]  # fmt: skip
        folders = (workspace[0], *declaring)
        declaring = (
            *declaring,
            *server_workspace.linked_out_of(folders, paths),
            *server_workspace.linked_node_modules(folders),
        )
        with workspace_in_force(*workspace, declaring):
            judged = judge(
                requested,
                binary=command,
                version=None,
                policy=policy,
                environ=_judging_view(environ, server_env),
                argv=declared.args,
                cwd=where,
                floor_map=floor_map,
                started_by_name=True,
            )
            client = CLIENT_OF_ADAPTER.get(judged.adapter or requested)
            depth = _NESTING.get() + 1
            if judged.verdict != REFUSE and client is not None and depth > MAX_AGENT_NESTING:
                judged = dataclasses.replace(
                    judged, verdict=REFUSE, waiver_id=None, mcp_servers=(),
                    reason=f"{requested} is an agent started as an MCP server by agents nested "
                    f"{depth} deep (each starting the next as a server), deeper than the "
                    f"{MAX_AGENT_NESTING} followed",
                )  # fmt: skip
            elif judged.verdict != REFUSE and client is not None:
                # A server that is itself an agent: judged with the servers it will start
                # in its own folder, with its own arguments and environment, as an agent is.
                token = _NESTING.set(depth)
                counted = _NESTED_SERVERS.set(_NESTED_SERVERS.get() or [0])
                try:
                    named, own_argv, own_environ = _as_env_runs_it(
                        requested, judged, declared.args, server_env
                    )
                    judged = _with_servers(
                        named, judged, client, policy=policy, environ=environ,
                        run_environ=own_environ, argv=own_argv, cwd=where,
                        floor_map=floor_map,
                    )  # fmt: skip
                finally:
                    _NESTED_SERVERS.reset(counted)
                    _NESTING.reset(token)
    if judged.verdict != REFUSE and map_hash is not None and judged.floor_map_hash != map_hash:
        judged = dataclasses.replace(
            judged, verdict=REFUSE, reason="the floor map changed while it was judged",
            waiver_id=None,
        )  # fmt: skip
    entry |= {
        "command": declared.command,
        "verdict": judged.verdict,
        "adapter": judged.adapter or requested,
        "requested": requested,
        "identified_by": judged.identified_by,
        "binary": judged.binary,
        "version": judged.version,
        "detected_by": judged.detected_by,
        "floor": judged.floor,
        "advisory_id": judged.advisory_id,
        "waiver_id": judged.waiver_id,
        "reason": judged.reason,
    }
    if judged.run_through is not None:
        entry["run_through"] = judged.run_through
    if judged.mcp_servers is not None:  # (a server that is an agent: the servers it starts)
        entry["mcp_servers"] = list(judged.mcp_servers)
    from floorguard._identify.identification import packages_in_force

    with packages_in_force(index_of(active_map.current(floor_map).floor_map)):
        entry["reason"] = _without_arguments(
            judged.reason, declared, run_environ, keep={judged.adapter, judged.identified_by},
            here=where, files=_declaring_files(judged.mcp_servers or ()),
        )  # fmt: skip
    if judged.verdict != REFUSE:
        return entry, None
    version = judged.version or "version unknown"
    shown = declared.command
    if judged.run_through is not None:
        shown = f"{shown} {judged.run_through['command']}"  # (env npx: what env runs)
    # The version is what was identified: claude's, not node's, for `node cli.js`.
    if judged.adapter is not None and judged.adapter != requested:
        shown = f"{judged.adapter} {version}, run by {shown}"
    else:
        shown = f"{shown} {version}"
    return entry, (
        f"the MCP server {declared.name!r} ({shown}, declared in "
        f"{declared.source} at {declared.at}), which is refused: {entry['reason']}"
    )


# How many agents deep servers that are agents are followed: claude started as a server of
# gemini is one. Deeper is refused, never followed: a gemini whose folder declares gemini
# would start itself without end.
MAX_AGENT_NESTING: Final = 3
_NESTING: ContextVar[int] = ContextVar("floorguard_agent_nesting", default=0)
# How many servers the agents started as servers may declare between them, all levels.
MAX_NESTED_SERVERS: Final = 64
_NESTED_SERVERS: ContextVar[list[int] | None] = ContextVar(
    "floorguard_nested_servers", default=None
)


_URL_START: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _declaring_files(entries: Iterable[Mapping[str, Any]]) -> set[str]:
    """The files that declared the servers of ``entries`` (a nested agent's), all levels."""
    found: set[str] = set()
    for entry in entries:
        if isinstance(entry.get("declared_in"), str):
            found.add(entry["declared_in"])
        found |= _declaring_files(entry.get("mcp_servers") or ())
    return found


def _without_arguments(
    reason: str,
    declared: Declaration,
    run_environ: Mapping[str, str],
    *,
    keep: Collection[str | None] = (),
    here: str | None = None,
    files: Collection[str] = (),
) -> str:
    """``reason`` with every argument and environment value of the declaration it quotes
    named by its place instead: a server's declaration is recorded only as a digest, since
    any of them may be a credential, whatever it is called or however it is spelt. So is a
    value the client's own files gave the server's starting environment (codex's .env).
    The ``files`` it names (those that declared a nested agent's servers) are kept whole:
    an argument's word in their path is no quote of it."""
    from floorguard._identify.node_command import SHOWN_LENGTH, shown

    values = [(f"<argument {n}>", arg) for n, arg in enumerate(declared.args, 1)]
    values += [(f"<env {name}>", value) for name, value in declared.env]
    values += [
        (f"<env {name}>", value) for name, value in declared.base_env or ()
        if run_environ.get(name) != value
    ]  # fmt: skip
    # A reason may quote a value spelt otherwise or in part: a glued option apart
    # (``-Werror::TOKEN.W`` as ``-W error::TOKEN.W``), and a part of one that is no path
    # ("imports module a.TOKEN"): each long run of letters, digits, _ and - of it, which a
    # credential is. (A path's parts are not: the reason names the file it means.)
    for place, value in list(values):
        if len(value) > 3 and value[0] == "-" and value[1].isalpha() and value[2] != "=":
            values.append((place, value[2:]))
        if "/" in value:
            # A path, or a list of them (PYTHONPATH, PATH): each entry as the reason names
            # the folder it means, normalised, and found from the server's folder. (A URL
            # is one: its scheme is no entry.)
            entries = [value] if _URL_START.match(value) else value.split(":")
            for number, entry in enumerate(entries, 1):
                if not entry:
                    continue
                # (which entry of a list: the reason may name two of them)
                at = place if len(entries) == 1 else f"{place[:-1]} entry {number}>"
                values += [(at, entry), (at, os.path.normpath(entry))]
                if here is not None and not os.path.isabs(entry):
                    values.append((at, os.path.normpath(os.path.join(here, entry))))
        else:
            # (but the name of what the server was judged to be: mcp-remote@0.1.15's
            # "mcp-remote" is what the reason is about)
            values += [
                (place, piece)
                for piece in re.split(r"[^A-Za-z0-9_-]+", value)
                if len(piece) >= 8 and piece != value and piece not in keep
            ]
    # A long value a reason quotes is cut short, as node's doubts cut it: so is its place.
    values += [(place, shown(value)) for place, value in values if len(value) > SHOWN_LENGTH]
    # A nested agent's declaring files are named whole: a word of an argument inside a
    # part of their path ("serve" in "serve-app") is no quote of it. A value that is a
    # whole part is ("--mcp-config c/old.json", "--mcp-config TOKEN": the file is named by
    # the argument's place). Set aside behind marks a reason cannot hold while words are
    # replaced.
    given = {value for _, value in values}
    whole = [name for name in files if given.isdisjoint(name.split("/"))]
    marks = {f"\x00{n}\x00": f"declared in {name} at" for n, name in enumerate(whole)}
    if "\x00" in reason:
        marks = {}

    def set_aside(text: str) -> str:
        for mark, kept in sorted(marks.items(), key=lambda item: -len(item[1])):
            text = text.replace(kept, mark)
        return text

    def put_back(text: str) -> str:
        for mark, kept in marks.items():
            text = text.replace(mark, kept)
        return text

    # Longest first: a value inside another is replaced within it, not before it.
    for place, value in sorted(values, key=lambda pair: -len(pair[1])):
        if len(value) < 4:  # (not "-y", "run": words a reason uses itself)
            continue
        if value in keep or _names_a_package(value):
            continue  # (what the reason is about, and no secret: "pin mcp-remote@X.Y.Z")
        reason = put_back(reason) if "/" in value else set_aside(reason)
        if value.isalnum() and value.isascii():
            # A word is named where it stands as one: not inside the reason's own words
            # ("serve" is no part of "server").
            reason = re.sub(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", place, reason)
        else:
            reason = reason.replace(repr(value)[1:-1], place).replace(value, place)
    return put_back(reason)


def _names_a_package(value: str) -> bool:
    """Whether ``value`` is a package the map or the catalogue names, or a spec of one
    (``mcp-remote@0.1.15``, ``aider-chat==0.86.0``): public names, never credentials."""
    from floorguard._identify.identification import current_packages
    from floorguard._maps.packages import pypi_normal_form

    index = current_packages()
    npm_name = value.rsplit("@", 1)[0] if "@" in value[1:] else value
    pypi_name = re.split(r"[=<>!~\[ ]", value, maxsplit=1)[0]
    return value in CATALOG or npm_name in index.npm or pypi_normal_form(pypi_name) in index.pypi


def _shown_url(url: str | None) -> str | None:
    """A remote server's address without what may be a credential (user info, query,
    fragment, and each path segment's parameters: ``/p;token=...``)."""
    if url is None:
        return None
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "(not a URL)"
    path = "/".join(segment.partition(";")[0] for segment in parts.path.split("/"))
    shown = urlunsplit((parts.scheme, host, path, "", ""))
    if not parts.netloc or "@" in shown or "\\" in url:
        # (``https:u:p@h``, ``https:\\u:p@h``, ``u:p@h:9``: read as a URL by node, but no
        # authority here, so the user information would be kept in the path)
        return "(not a plain URL: not recorded)"
    return shown


_HOST_KEYS: Final = (POLICY_VARIABLE, UNTRACKED_POLICY_VARIABLE)
# os.environ's raw bytes as last read, and their decoded copy (one entry, replaced whole).
_environ_read: list[tuple[dict[bytes, bytes], Mapping[str, str]]] = []


# How often an os.environ of another kind is read again when a name it listed was gone.
_ENVIRON_READS: Final = 100


def plain_environ(environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ``, read once: for ``os.environ``, a read-only copy of it as it is now (copy
    it again to change it).
    os.environ decodes a name or value at every access (a decision reads all of them, some
    several times); its raw bytes compare in one step with those of the last copy, which is
    reused while they are equal. Any other mapping is returned as it is."""
    if environ is not os.environ:
        return environ
    raw = getattr(os.environ, "_data", None)
    decode_key = getattr(os.environ, "decodekey", None)
    decode_value = getattr(os.environ, "decodevalue", None)
    if type(raw) is not dict or decode_key is None or decode_value is None:
        # (an interpreter that keeps it otherwise: decoded name by name, which another
        # thread's change between a name and its value interrupts: read again)
        for _ in range(_ENVIRON_READS):
            with contextlib.suppress(KeyError):
                return MappingProxyType(dict(os.environ))
        return MappingProxyType(dict(os.environ))  # (a name it lists and never has: raises)
    for seen, decoded in _environ_read[-1:]:
        if seen == raw:
            return decoded
    # One copy of the bytes (a dict copied in C: no other thread runs meanwhile), decoded:
    # os.environ itself, decoded a name and then its value, may lose a name in between.
    snapshot = dict(raw)
    decoded = MappingProxyType({decode_key(k): decode_value(v) for k, v in snapshot.items()})
    _environ_read[:] = [(snapshot, decoded)]
    return decoded


def _judging_view(host: Mapping[str, str], run: Mapping[str, str]) -> Mapping[str, str]:
    """What judging reads: the whole run environment (every variable may decide what the
    child loads, and an unknown one must be seen to be refused), with floorguard's own
    policies from the host only (a child's environment must not loosen, or be needed to
    tighten, the host's policy). A plain dict: os.environ decodes on every access.
    A preflight's own environment, as ``plain_environ`` read it, without either policy, is
    that very view already (read-only, and the same keys in the same order): it is not
    copied."""
    if (
        run is host
        and _is_plain_environ(run)
        and POLICY_VARIABLE not in run
        and UNTRACKED_POLICY_VARIABLE not in run  # (_HOST_KEYS, without a generator)
    ):
        return run
    view = {key: value for key, value in run.items() if key not in _HOST_KEYS}
    view.update((key, value) for key in _HOST_KEYS if (value := host.get(key)) is not None)
    return view


# The chain a plain_environ copy selects, with that copy (one entry, replaced whole).
_chain_chosen: list[tuple[Mapping[str, str], AuditChain]] = []


def _chain_of(env: Mapping[str, str]) -> AuditChain:
    """``AuditChain.shared(env)``; for the copy ``plain_environ`` made, which cannot change,
    the chain found for it last, while the variables naming the chain's files are absolute
    (a relative one names other files after a chdir)."""
    for seen, chain in _chain_chosen[-1:]:
        if seen is env:
            return chain
    chain = AuditChain.shared(env)
    if _is_plain_environ(env) and len(state_key(env)) == len(STATE_VARIABLES):
        _chain_chosen[:] = [(env, chain)]
    return chain


def _is_plain_environ(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is the read-only copy ``plain_environ`` made (no one else holds
    the dict under it: it cannot change)."""
    last = _environ_read[-1:]  # (one read: another thread may replace the entry)
    return bool(last) and last[0][1] is environ


def _named(decision: Decision) -> str:
    if decision.requested in (None, decision.adapter):
        return decision.adapter
    return f"{decision.adapter} (requested as {decision.requested!r})"


def refuse_unopened(
    adapter: str,
    problem: Exception,
    environ: Mapping[str, str] | None = None,
    floor_map: object = None,
) -> SpawnRefused:
    """Record the refusal of a spawn whose binary could not even be opened (nothing is
    judged, so nothing is allowed first), and return the SpawnRefused to raise: a
    BinaryNotFound when ``problem`` is a BinaryNotFoundError and the refusal is recorded."""
    env = os.environ if environ is None else environ
    known: dict[str, Any] = {"adapter": adapter}
    try:
        in_force = active_map.current(floor_map)
    except FloorMapError:
        pass
    else:
        known["floor_map_hash"] = in_force.floor_map_hash
        advisory = in_force.floor_map.get(adapter) if ADAPTER_NAME.match(adapter) else None
        if advisory is not None:
            known |= {"floor": advisory.min_safe_version, "advisory_id": advisory.advisory_id}
    reason = f"its binary cannot be resolved or opened: {problem}"
    try:
        decision = _seal(adapter, _Judgement(REFUSE, reason, **known), policy_from(env), env)
    except SpawnRefused as unrecorded:
        # Unrecorded: the chain is the problem to report, whatever the binary's state.
        return unrecorded
    refusal = BinaryNotFound if isinstance(problem, BinaryNotFoundError) else SpawnRefused
    return refusal(f"refusing to spawn {adapter}: {reason}", decision)


def refuse_after(
    earlier: Decision, reason: str, environ: Mapping[str, str] | None = None
) -> SpawnRefused:
    """Record a refusal that overrules an earlier decision (e.g. the binary changed since).

    Returns the SpawnRefused to raise; its decision is the recorded refusal.
    """
    env = os.environ if environ is None else environ
    # The earlier decision is on the record already (sealed before this last check): the
    # refusal names it, so no reader takes it for a process that ran.
    reason = f"{reason}; the {earlier.verdict} {earlier.receipt_id} started nothing"
    judgement = _Judgement(
        REFUSE, reason, adapter=earlier.adapter, identified_by=earlier.identified_by,
        version=earlier.version, detected_by=earlier.detected_by, binary=earlier.binary,
        floor=earlier.floor, advisory_id=earlier.advisory_id,
        floor_map_hash=earlier.floor_map_hash,
    )  # fmt: skip
    try:
        decision = _seal(earlier.requested or earlier.adapter, judgement, earlier.policy, env)
    except SpawnRefused as unrecorded:
        return unrecorded
    return SpawnRefused(f"refusing to spawn {_named(decision)}: {reason}", decision)


def _seal(requested: str, judgement: _Judgement, policy: str, env: Mapping[str, str]) -> Decision:
    """Append the judgement's receipt durably; only then does it become a Decision.

    A warn_override, untracked or waived decision is also logged (logger ``floorguard``, which
    reaches stderr when the host configured no logging): an override is never silent.
    """
    judgement = _without_credentials(judgement)
    # (an adapter name holds none of the characters the hiding looks for: only a name the
    # gate refuses as invalid can change)
    requested = without_credentials(requested)
    adapter = without_credentials(judgement.adapter or requested)
    # (a name, path or reason holding bytes that are not UTF-8 is recorded escaped)
    receipt = receipts.new_receipt(
        receipts.SPAWN_PREFLIGHT,
        recordable_value(_receipt_fields(adapter, requested, judgement, policy)),
        ts=judgement.at,
    )
    try:
        record = _chain_of(env).append(receipts.SPAWN_PREFLIGHT, receipt)
    except ChainError as exc:
        cut_hidden_context(exc)
        raise SpawnRefused(
            f"refusing to spawn {requested}: the decision ({judgement.verdict}) could not be "
            f"recorded in the audit chain: {exc}"
        ) from exc
    noted = [(judgement.verdict, judgement.reason)]
    if judgement.mcp_servers and judgement.verdict != REFUSE:
        noted += [
            (server["verdict"], f"MCP server {server['name']!r}: {server['reason']}")
            for server in judgement.mcp_servers
            if "reason" in server
        ]
    for outcome, reason in noted:
        if outcome in (WARN_OVERRIDE, UNTRACKED, WAIVED):
            import logging

            from floorguard._base._text import one_line

            logging.getLogger("floorguard").warning(
                "floorguard: %s: %s (receipt %s)", outcome, one_line(reason), record.receipt_id
            )
    return Decision(
        verdict=judgement.verdict,
        adapter=adapter,
        requested=requested,
        identified_by=judgement.identified_by,
        version=judgement.version,
        floor=judgement.floor,
        advisory_id=judgement.advisory_id,
        reason=judgement.reason,
        policy=policy,
        receipt_id=record.receipt_id,
        binary=judgement.binary,
        detected_by=judgement.detected_by,
        floor_map_hash=judgement.floor_map_hash,
        seq=record.seq,
        waiver_id=judgement.waiver_id,
        mcp_servers=judgement.mcp_servers,
    )


def _without_credentials(judgement: _Judgement) -> _Judgement:
    """``judgement`` with what may be a credential hidden in its reasons (they quote
    arguments, which a receipt keeps only as a digest)."""
    servers = judgement.mcp_servers
    if servers:
        servers = tuple(
            {**entry, "reason": without_credentials(entry["reason"])} if "reason" in entry
            else entry
            for entry in servers
        )  # fmt: skip
    reason = without_credentials(judgement.reason)
    if servers is judgement.mcp_servers and reason == judgement.reason:
        # Nothing hidden (no server, or none listed): the judgement is frozen, so it is kept
        # as it is; a copy costs 5.5 us.
        return judgement
    return dataclasses.replace(judgement, reason=reason, mcp_servers=servers)


def _receipt_fields(
    adapter: str, requested: str, judgement: _Judgement, policy: str
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "adapter": adapter,
        "requested": requested,
        "identified_by": judgement.identified_by,
        "binary": judgement.binary,
        "version": judgement.version,
        "detected_by": judgement.detected_by,
        "floor": judgement.floor,
        "advisory_id": judgement.advisory_id,
        "verdict": judgement.verdict,
        "reason": judgement.reason,
        "policy": policy,
        "floor_map_hash": judgement.floor_map_hash,
        "waiver_id": judgement.waiver_id,
    }
    # (added in place: each ``|`` made a new dict of every field)
    if judgement.mcp_servers is not None:
        fields["mcp_servers"] = list(judgement.mcp_servers)
    if judgement.run_through is not None:
        fields["run_through"] = judgement.run_through
    return fields
