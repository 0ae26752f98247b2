"""The doctor: the installed version posture of every tracked adapter, sealed as a receipt.

Each installed version is judged by the rule the gate applies (``verdict.assess``) at the
clock's time: ``ok``, ``below_floor``, ``affected`` (inside an advisory), ``waived`` (an
unexpired waiver covers every cause; with its id and the days left), ``unknown_version``
(not a version in the entry's ecosystem, or no version at all) and ``not_installed``; and
``ahead_of_last_green``: a version that would be ``ok`` but is newer, in the entry's version
order, than the adapter's last-green canary version (a warning: no canary has certified it).
Last-green is the projection of the audit chain, which must verify with its key first; an
adapter that no canary has certified has nothing to be ahead of and stays ``ok``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from floorguard._base import _time
from floorguard._chain import receipts
from floorguard._maps import active_map
from floorguard._maps.map_model import Advisory
from floorguard.errors import DetectionError

if TYPE_CHECKING:
    from floorguard._proofs.canary import LastGreen

OK, BELOW_FLOOR, AFFECTED, WAIVED, UNKNOWN_VERSION, NOT_INSTALLED = (
    "ok",
    "below_floor",
    "affected",
    "waived",
    "unknown_version",
    "not_installed",
)
AHEAD_OF_LAST_GREEN = "ahead_of_last_green"
# What an installed adapter may be for the doctor to exit 0; --strict drops the warnings.
HEALTHY = frozenset({OK, WAIVED, NOT_INSTALLED, AHEAD_OF_LAST_GREEN})
WARNINGS = frozenset({AHEAD_OF_LAST_GREEN})


@dataclass(frozen=True)
class AdapterPosture:
    adapter: str
    binary: str | None
    version: str | None
    detected_by: str | None
    floor: str | None
    status: str
    reason: str
    advisory_id: str | None = None
    waiver_id: str | None = None
    waiver_days_left: int | None = None
    # The adapter's last-green canary version when it has one (whatever the status).
    last_green: str | None = None
    # The boundary the gate refuses below (``verdict.refusal_boundary``): ``floor`` raised
    # by the advisories that continue it; what the "floor" column shows.
    refuses_below: str | None = None


@dataclass(frozen=True)
class ServerPosture:
    """An MCP server an installed agent would start here (this working directory, HOME),
    judged as the gate would judge it; ``verdict`` ``refuse`` for a declaration that cannot
    be read (``name`` None then), ``remote`` and ``disabled`` for servers not judged."""

    agent: str
    name: str | None
    verdict: str
    declared_in: str | None = None
    at: str | None = None
    command: str | None = None
    version: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Posture:
    receipt_id: str
    floor_map_hash: str
    adapters: tuple[AdapterPosture, ...]
    # Listed (and in the JSON and the receipt) only when an agent declares any.
    mcp_servers: tuple[ServerPosture, ...] = ()

    @property
    def healthy(self) -> bool:
        """False unless every installed tracked adapter is ok, waived or only ahead of its
        last-green version."""
        return self.passes(strict=False)

    def failing(self, *, strict: bool) -> list[AdapterPosture]:
        allowed = HEALTHY - WARNINGS if strict else HEALTHY
        return [a for a in self.adapters if a.status not in allowed]

    def passes(self, *, strict: bool) -> bool:
        """Whether the doctor exits 0; ``strict`` also fails on the warnings. A refused MCP
        server fails it: the gate would refuse the agent that starts it."""
        return not self.failing(strict=strict) and not self.refused_servers()

    def refused_servers(self) -> list[ServerPosture]:
        return [s for s in self.mcp_servers if s.verdict == "refuse"]

    def problem(self, *, strict: bool) -> str | None:
        """The one-line error both doctors print when they exit 1, or None."""
        failing = self.failing(strict=strict)
        listed = [f"{a.adapter} ({a.status})" for a in failing]
        listed += [f"{s.agent}'s MCP server {s.name or '(configuration)'} (refused)"
                   for s in self.refused_servers()]  # fmt: skip
        if not listed:
            return None
        return f"not ok or waived{' (--strict)' if strict else ''}: {', '.join(listed)}"

    def to_json(self) -> dict[str, Any]:
        found = {
            "receipt_id": self.receipt_id,
            "floor_map_hash": self.floor_map_hash,
            "adapters": [asdict(a) for a in self.adapters],
        }
        if self.mcp_servers:
            found["mcp_servers"] = [asdict(s) for s in self.mcp_servers]
        return found


def examine(
    entry: Advisory,
    path_env: str | None,
    *,
    at: _dt.datetime | None = None,
    last_green: LastGreen | None = None,
) -> AdapterPosture:
    """One adapter's posture on this PATH, judged at ``at`` (default: the clock) and against
    its ``last_green`` canary version; detection failures become statuses, not errors."""
    posture = dataclasses.replace(_examine(entry, path_env, at), refuses_below=_boundary(entry))
    if last_green is None:
        return posture
    posture = dataclasses.replace(posture, last_green=last_green.version)
    return _ahead(entry, posture, last_green) if posture.status == OK else posture


def _boundary(entry: Advisory) -> str | None:
    """The refusal boundary as the doctor shows it; the stated floor when a bound is not a
    version of the entry's ecosystem (the gate then refuses every version as unknown)."""
    from floorguard._maps import verdict, versions

    try:
        boundary = verdict.refusal_boundary(entry)
    except versions.InvalidVersionError:
        return entry.min_safe_version
    return None if boundary is None else boundary.describe()


def _ahead(entry: Advisory, posture: AdapterPosture, last_green: LastGreen) -> AdapterPosture:
    """``ok`` becomes ``ahead_of_last_green`` when the version is newer than last-green."""
    from floorguard._maps import versions

    if posture.version is None:  # never for ok, which means a version was judged
        return posture
    try:
        newer = versions.compare(posture.version, last_green.version, entry.order) > 0
        why = f"newer than last-green {last_green.version}"
    except versions.InvalidVersionError:
        # A last-green recorded in another order (the entry changed ecosystem): it cannot
        # vouch for this version, so warn rather than call it certified.
        newer = True
        why = (
            f"last-green {last_green.version} is not a "
            f"{versions.order_name(entry.order)} version to compare with"
        )
    if not newer:
        return posture
    return dataclasses.replace(
        posture,
        status=AHEAD_OF_LAST_GREEN,
        reason=f"{posture.reason}; {why} (receipt {last_green.receipt_id}): no canary has "
        "certified this version",
    )


def _unjudged(adapter: str, binary: str | os.PathLike[str], path_env: str | None) -> str | None:
    """Why the gate could not judge this binary of ``adapter`` by itself, as it would refuse
    to spawn it: a launcher (a script not recognised as the adapter's code, never probed), a
    file whose inputs are not understood, or a native program standing for an agent
    published only as a package. None when it can be judged."""
    from floorguard._identify import examine
    from floorguard._identify.target import open_target

    try:
        with open_target(os.fspath(binary), path_env=path_env) as opened:
            environ = dict(os.environ) if path_env is None else {**os.environ, "PATH": path_env}
            exam = examine.examine(opened, None, environ=environ)
    except DetectionError as exc:
        return str(exc)
    if exam.doubts:
        return "; ".join(exam.doubts)
    if exam.identified is None and exam.runs != "native":
        return f"{opened.path} is {exam.what}, a launcher whose --version answer is not taken"
    from floorguard._gate.gate import native_stand_in

    return native_stand_in(adapter, adapter, exam)


def _examine(entry: Advisory, path_env: str | None, at: _dt.datetime | None) -> AdapterPosture:
    from floorguard._identify import detect
    from floorguard._maps import verdict, versions

    adapter, floor = entry.adapter, entry.min_safe_version
    try:
        binary = detect.resolve_binary(adapter, None, path_env=path_env)
    except DetectionError as exc:
        return AdapterPosture(adapter, None, None, None, floor, NOT_INSTALLED, str(exc))
    unjudged = _unjudged(adapter, binary, path_env)
    if unjudged is not None:
        return AdapterPosture(adapter, str(binary), None, None, floor, UNKNOWN_VERSION, unjudged)
    try:
        found = detect.detect_version(adapter, binary=binary, path_env=path_env)
    except DetectionError as exc:
        return AdapterPosture(adapter, str(binary), None, None, floor, UNKNOWN_VERSION, str(exc))
    where = (adapter, found.binary or str(binary), found.version, found.detected_by, floor)
    # Read after the probe, which may take seconds: a waiver is judged when the version is.
    moment = _time.utc_now() if at is None else at
    try:
        # The gate's rule: a waiver in its last two minutes no longer waives.
        assessment = verdict.assess(entry, found.version, at=moment + verdict.WAIVER_MARGIN)
    except versions.InvalidVersionError as exc:
        return AdapterPosture(*where, UNKNOWN_VERSION, str(exc))
    if not assessment.unsafe:
        reason = f"meets the floor {floor}" if floor is not None else "not known to be affected"
        if entry.advisories:
            reason += f"; outside the affected versions of {len(entry.advisories)} advisories"
        return AdapterPosture(*where, OK, reason)
    first = assessment.causes[0]
    status = BELOW_FLOOR if first.is_floor else AFFECTED
    reason = assessment.describe()
    waiver = assessment.waiver
    if waiver is not None:
        left = _time.parse_ts(waiver.expires) - moment
        days = left.days  # whole days left; 0 on the last day
        return AdapterPosture(
            *where,
            WAIVED,
            f"{reason}; waived by {waiver.id} ({days} day(s) left, expires {waiver.expires})",
            assessment.advisory_id,
            waiver.id,
            days,
        )
    why = verdict.why_not_waived(entry, found.version, assessment.causes, moment)
    if why is not None:
        reason += f"; not waived: {why}"
    return AdapterPosture(*where, status, reason, assessment.advisory_id)


def run(environ: Mapping[str, str] | None = None) -> Posture:
    """Examine every tracked adapter and append an ``adapter.version_posture`` receipt.

    Raises FloorMapError (map untrustworthy), VerificationError (the chain, whose canary
    records give last-green, does not verify: nothing is examined or recorded), KeyFileError
    and ChainError (posture not recorded).
    """
    from floorguard._chain.chain import AuditChain
    from floorguard._proofs.canary import chain_projection

    env = os.environ if environ is None else environ
    in_force = active_map.current()
    chain = AuditChain.shared(env)
    projection = chain_projection(chain)
    postures = tuple(
        examine(entry, env.get("PATH"), last_green=projection.get(adapter))
        for adapter, entry in sorted(in_force.floor_map.items())
    )
    servers = _servers(postures, env, in_force.floor_map_hash)
    fields: dict[str, Any] = {
        "floor_map_hash": in_force.floor_map_hash,
        "adapters": [asdict(p) for p in postures],
    }
    if servers:
        fields["mcp_servers"] = [asdict(s) for s in servers]
    receipt = receipts.new_receipt(receipts.VERSION_POSTURE, fields)
    record = chain.append(receipts.VERSION_POSTURE, receipt)
    return Posture(record.receipt_id, in_force.floor_map_hash, postures, servers)


def _servers(
    postures: tuple[AdapterPosture, ...], env: Mapping[str, str], map_hash: str
) -> tuple[ServerPosture, ...]:
    """The MCP servers each installed MCP-client agent would start from this working
    directory and HOME (no arguments of its own), judged as the gate judges them."""
    from floorguard._gate.gate import judge_mcp_servers, policy_from
    from floorguard._identify.mcp_config import CLIENT_OF_ADAPTER

    found: list[ServerPosture] = []
    for posture in postures:
        client = CLIENT_OF_ADAPTER.get(posture.adapter)
        if client is None or posture.status == NOT_INSTALLED:
            continue
        judged = judge_mcp_servers(
            client, policy=policy_from(env), environ=env, run_environ=env, argv=(),
            cwd=os.path.abspath(os.getcwd()), map_hash=map_hash,
        )  # fmt: skip
        found += [ServerPosture(posture.adapter, None, "refuse", reason=d) for d in judged.doubts]
        found += [
            ServerPosture(posture.adapter, None, "refuse",
                          reason=f"{posture.adapter} gives its own process, {d}")
            for d in judged.own_environment
        ]  # fmt: skip
        found += [
            ServerPosture(
                posture.adapter,
                e["name"],
                e["verdict"],
                e["declared_in"],
                e["at"],
                e.get("command") or e.get("url"),
                e.get("version"),
                e.get("reason"),
            )
            for e in judged.entries
        ]
    return tuple(found)


def format_table(posture: Posture) -> str:
    header = ("adapter", "binary", "version", "detected by", "floor", "status")
    rows = [header] + [
        (
            a.adapter,
            a.binary or "-",
            a.version or "-",
            a.detected_by or "-",
            a.refuses_below or "-",
            _status_text(a),
        )
        for a in posture.adapters
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    if posture.mcp_servers:
        lines.append("MCP servers (this working directory and HOME):")
        for server in posture.mcp_servers:
            what = " ".join(filter(None, [server.command, server.version]))
            where = f"{server.declared_in} at {server.at}" if server.declared_in else ""
            lines.append(
                f"  {server.agent}: {server.name or '(configuration)'}"
                + (f" ({what})" if what else "")
                + f" {server.verdict}"
                + (f", {where}" if where else "")
                + (f": {server.reason}" if server.verdict == "refuse" else "")
            )
    lines.append(f"floor map {posture.floor_map_hash}")
    lines.append(f"posture receipt {posture.receipt_id}")
    return "\n".join(lines)


def _status_text(posture: AdapterPosture) -> str:
    if posture.status == AHEAD_OF_LAST_GREEN:
        return f"{posture.status} (last-green {posture.last_green})"
    if posture.status == WAIVED:
        return f"waived ({posture.waiver_id}, {posture.waiver_days_left} day(s) left)"
    if posture.status in (BELOW_FLOOR, AFFECTED) and posture.advisory_id is not None:
        return f"{posture.status} ({posture.advisory_id})"
    return posture.status
