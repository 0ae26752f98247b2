"""The window proof: no known-unsafe adapter version was allowed to spawn between T1 and T2.

It rides on ``SliceVerifier`` (through ``on_values``), so the slice is read once and memory
stays flat: what is kept is the floor maps seen, a version cache and the findings.
Running it over a slice file and rendering its report is ``window_report``; finding a map
by its hash is ``map_archive``.

PROVEN means all of:

1. **Intact**: every integrity check of ``slice_verify`` passed (MACs when the chain key is
   given, host signatures when the hosts' keys are, and then every record by one of them;
   content addresses, digests, links, contiguous seq and one chain id always).
2. **Covered**: the slice starts at genesis (seq 0) or at a record stamped before T1, and
   ends at a record stamped after T2, or at a signed checkpoint issued after T2 whose size
   is the last seq + 1 and whose head is the last record's digest. Without a window there
   is nothing to cover beyond the slice itself; an open end (no T2) is the slice's end.
3. **Checkpoint** (when given): it names the slice's chain, its size falls within the slice
   and its head equals the digest of record ``size - 1``. Without a key, records past the
   checkpoint are unauthenticated and reported.
4. **No violation**: every spawn record stamped inside the window is re-evaluated, not
   trusted. The floor map it pins is resolved from floor-update receipts earlier in the
   slice (they carry the whole new map) or from content-addressed map archives, and the
   recorded version is judged by that map's entry for the adapter with the gate's rule
   (``verdict.assess``: below the floor, inside an affected range or listed by an
   advisory, in the entry's ecosystem order). A ``permit`` of an unsafe version or of a
   missing or invalid one, a permit of an adapter the pinned map does not track, any
   ``warn_override``, an ``untracked`` record of an adapter the pinned map tracks, a
   record that fails its own integrity checks, a pinned map that cannot be resolved, and an
   unknown verdict are violations. A ``waived`` record stands only if the pinned map
   carried the waiver it names, for that adapter and exact version, unexpired at the
   receipt's decision time (its ``ts``, which must not be later than the record's) and
   covering every cause. An allowed agent's MCP servers (``mcp_servers``) are judged the
   same way, each by the map the agent's record pins: a refused server, or one whose own
   verdict is one of the violations above, is a violation of the agent's record (remote
   and disabled servers are recorded, not judged). A refusal never is a violation.
   Canary records anywhere in the slice are re-evaluated the same way: a last-green step
   (verdict ``certify``) onto an unsafe or invalid version is a violation (waivers never
   certify).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from floorguard._base._time import format_ts, parse_ts_ceiling
from floorguard._chain.chain import ChainRecord, parse_any_ts
from floorguard._crypto import merkle
from floorguard._maps import verdict as verdict_rule
from floorguard._maps import versions
from floorguard._maps.map_model import ADAPTER_NAME, ADAPTER_NAME_FORM
from floorguard._proofs import canary
from floorguard._proofs.map_archive import MapResolver
from floorguard._proofs.slice_verify import IntegrityError, RecordValues, SliceReport
from floorguard.errors import FloorguardError, VerificationError

if TYPE_CHECKING:
    from floorguard._proofs.checkpoint import Checkpoint
    from floorguard._proofs.tlog import ConsistencyProof, InclusionProof
    from floorguard._proofs.witness import Witnessed

SPAWN = "adapter.spawn_preflight_receipt"
FLOOR_UPDATE = "adapter.floor_update_receipt"
CANARY = canary.CANARY
# An MCP server of an agent that was recorded, not judged (nothing runs here, or it is off).
SERVER_REMOTE, SERVER_DISABLED = "remote", "disabled"
PERMIT, REFUSE, WARN_OVERRIDE, UNTRACKED = "permit", "refuse", "warn_override", "untracked"
WAIVED = "waived"
MAX_REPORTED_VIOLATIONS = 1000
_MEMO_LIMIT = 4096
_UNSEEN = object()
UNAUTHENTICATED = (
    "unauthenticated: no --key-file, --host-keys or --checkpoint, so only the links between the "
    "records were checked, which anyone can recompute (--unauthenticated accepts that)"
)


class Violation(NamedTuple):
    """A record whose decision breaks the floor: its seq and why."""

    seq: int | None
    reason: str


# --- the proof ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProofReport:
    """The verdict of ``verify chain``: the slice, the window, and every finding by seq."""

    slice: SliceReport
    since: str | None
    until: str | None
    violations: tuple[Violation, ...]
    integrity_errors: tuple[IntegrityError, ...]
    evaluated: int
    checkpoint: Checkpoint | None
    not_listed: int = 0
    # How the checkpoint's witnesses counted, when witness keys were given.
    witnessed: Witnessed | None = None

    @property
    def proven(self) -> bool:
        return not self.violations and not self.integrity_errors and self.not_listed == 0


def _fast_stamp(ts: str) -> bool:
    """The fixed-width form floorguard writes, which sorts as text."""
    return len(ts) == 27 and ts[-1] == "Z" and ts[19] == "."


@dataclass
class WindowProof:
    """Feed records through ``on_values`` (SliceVerifier's callback), then ``finish``."""

    maps: MapResolver
    since: datetime | None = None
    until: datetime | None = None
    checkpoint: Checkpoint | None = None
    max_violations: int = MAX_REPORTED_VIOLATIONS
    # An inclusion proof of the checkpoint's last record: how a slice that does not start
    # at genesis reaches the checkpoint's Merkle root (its links then vouch for the rest).
    inclusion: InclusionProof | None = None
    # Or: the checkpoint the last audit ended at, and the consistency proof from it to
    # ``checkpoint``: the records appended since then are bound by that proof.
    previous: Checkpoint | None = None
    consistency: ConsistencyProof | None = None

    _violations: list[Violation] = field(default_factory=list, init=False)
    _not_listed: int = field(default=0, init=False)
    _evaluated: int = field(default=0, init=False)
    _since_text: str | None = field(default=None, init=False)
    _until_text: str | None = field(default=None, init=False)
    _checkpoint_digest: str | None = field(default=None, init=False)
    _previous_digest: str | None = field(default=None, init=False)
    _checkpoint_leaf: bytes | None = field(default=None, init=False)
    _tree: merkle.CompactRange | None = field(default=None, init=False)
    _tree_root: bytes | None = field(default=None, init=False)
    _leaves_seen: bool = field(default=False, init=False)
    _appended: dict[int, bytes] = field(default_factory=dict, init=False)
    # The first record past the previous checkpoint stamped before that checkpoint's time.
    _before_previous: tuple[int, str] | None = field(default=None, init=False)
    _judged: dict[tuple[object, ...], object] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._since_text = format_ts(self.since) if self.since is not None else None
        self._until_text = format_ts(self.until) if self.until is not None else None

    # -- streaming --

    def on_leaf(self, seq: int, leaf_input: bytes) -> None:
        """SliceVerifier's leaf callback: grow the tree of a slice that starts at genesis."""
        checkpoint = self.checkpoint
        if checkpoint is None:
            return
        if not self._leaves_seen:
            self._leaves_seen = True
            if seq == 0:
                self._tree = merkle.CompactRange()
        tree = self._tree
        if tree is not None:
            if seq != tree.size:
                self._tree = None  # a gap or a repeat: the links already report it
            elif tree.size < checkpoint.size:
                tree.append(merkle.leaf_hash(leaf_input))
                if tree.size == checkpoint.size:
                    self._tree_root = tree.root()
        if seq == checkpoint.size - 1:
            self._checkpoint_leaf = merkle.leaf_hash(leaf_input)
        previous = self.previous
        if previous is not None and previous.size <= seq < checkpoint.size:
            self._appended[seq] = merkle.leaf_hash(leaf_input)

    def on_values(self, values: RecordValues, intact: bool) -> None:
        """SliceVerifier's ``on_values``: one record's values, in ``RECORD_FIELDS`` order
        (no ChainRecord is made for a record unless its digest is wanted)."""
        seq, ts, _, event, _, receipt, _, _ = values
        if event == SPAWN:
            since, until = self._since_text, self._until_text
            if since is not None and until is not None and len(ts) == 27 and ts[19] == ".":
                inside = ts[-1] == "Z" and since <= ts <= until  # (_in_window, inlined)
            else:
                inside = self._in_window(ts)
            if not inside and until is not None and ts > until:
                # A clock stepped back stamps the record with the head's later time, not the
                # decision's (a receipt is stamped before its record, never after): a
                # decision the receipt dates inside the window is in it too.
                stated = receipt.get("ts") if type(receipt) is dict else None
                inside = type(stated) is str and self._in_window(stated)
            if inside:
                self._evaluated += 1
                self._spawn(seq, ts, receipt, intact)
        elif event == FLOOR_UPDATE:
            if intact:
                stated, carried = receipt.get("new_floor_map_hash"), receipt.get("new_floor_map")
                if isinstance(stated, str) and self.maps.learn(carried, stated):
                    # A map that could not be resolved before may be now: judge again.
                    self._judged.clear()
        elif event == CANARY:
            self._canary(seq, receipt, intact)
        checkpoint = self.checkpoint
        if checkpoint is not None and seq == checkpoint.size - 1:
            self._checkpoint_digest = ChainRecord.from_values(values).digest()
        previous = self.previous
        if previous is not None and seq == previous.size - 1:
            self._previous_digest = ChainRecord.from_values(values).digest()
        elif (
            previous is not None and seq >= previous.size and self._before_previous is None
            and previous.time is not None and _stamped_before(ts, previous.time)
        ):  # fmt: skip
            self._before_previous = (seq, ts)

    def _in_window(self, ts: str) -> bool:
        since, until = self._since_text, self._until_text
        if since is None and until is None:
            return True
        if len(ts) == 27 and ts[-1] == "Z" and ts[19] == ".":  # (_fast_stamp, inlined)
            return (since is None or ts >= since) and (until is None or ts <= until)
        try:
            moment = parse_any_ts(ts)
        except FloorguardError:
            return True  # an unreadable time is already an integrity error; judge it too
        return (self.since is None or moment >= self.since) and (
            self.until is None or moment <= self.until
        )

    def _violation(self, seq: int, reason: str) -> None:
        if len(self._violations) < self.max_violations:
            self._violations.append(Violation(seq, reason))
        else:
            self._not_listed += 1

    def _spawn(self, seq: int, ts: str, receipt: dict[str, Any], intact: bool) -> None:
        verdict = receipt.get("verdict")
        if verdict == REFUSE:
            return
        adapter = receipt.get("adapter")
        # ``requested`` (the name the host asked for) only names the record; the floor is
        # always the identified adapter's. Any other extra field is ignored.
        requested = receipt.get("requested")
        alias = requested if type(requested) is str and requested != adapter else None
        # The identified adapter is always a map name, and so is the name asked for (the
        # gate refuses any other before judging it): an allowed decision under another
        # (``AIDER``) was not the gate's, and must not pass as untracked. Records from before
        # ``requested`` was recorded have none.
        if not _valid_name(adapter):
            self._violation(
                seq,
                f"the spawn record names the adapter {adapter!r}, not a valid adapter name "
                f"({ADAPTER_NAME_FORM}): the gate refuses such a name, yet the record says "
                f"{verdict!r}",
            )
            return
        if "requested" in receipt and not _valid_name(requested):
            self._violation(
                seq,
                f"the spawn record says it was requested as {requested!r}, not a valid "
                f"adapter name ({ADAPTER_NAME_FORM}): the gate refuses such a name, yet the "
                f"record says {verdict!r}",
            )
            return
        if not intact:
            self._violation(
                seq,
                f"{verdict} of {_named(adapter, alias, quoted=True)}: the record fails its "
                "integrity checks, so its decision cannot be trusted",
            )
            return
        if "mcp_servers" in receipt and type(adapter) is str:
            self._servers(seq, ts, receipt, adapter, alias)
        if verdict == WAIVED:
            # Depends on the decision time (the waiver's expiry): judged every time.
            waived = self._judge_waived(ts, receipt, adapter, alias)
            if waived is not None:
                self._violation(seq, waived)
            return
        # Most decisions repeat (same adapter, version and map): judge each one once.
        # Only str/None values are cached; anything else is judged afresh.
        version, map_hash = receipt.get("version"), receipt.get("floor_map_hash")
        if (
            type(verdict) is str
            and type(adapter) is str
            and type(map_hash) is str
            and (version is None or type(version) is str)
        ):
            memo = (verdict, adapter, version, map_hash, alias)
            cached = self._judged.get(memo, _UNSEEN)
            if cached is _UNSEEN:
                if len(self._judged) >= _MEMO_LIMIT:
                    self._judged.clear()
                cached = self._judged[memo] = self._judge_spawn(
                    verdict, adapter, version, map_hash, alias
                )
            reason = cached
        else:
            reason = self._judge_spawn(verdict, adapter, version, map_hash, alias)
        if reason is not None:
            self._violation(seq, str(reason))

    def _judge_spawn(
        self,
        verdict: object,
        adapter: object,
        version: object,
        map_hash: object,
        alias: str | None = None,
    ) -> str | None:
        """Why an allowed spawn decision breaks the floor of the map it pins, or None."""
        quoted = _named(adapter, alias, quoted=True)
        if verdict not in (PERMIT, WARN_OVERRIDE, UNTRACKED):
            return f"unknown verdict {verdict!r} for {quoted}"
        if verdict == WARN_OVERRIDE:
            stated = "" if version is None else f" {version!r}"
            return (
                f"warn_override: {quoted}{stated} was allowed by the warn policy, "
                + self._overridden(adapter, version, map_hash)
            )
        floor_map = self.maps.resolve(map_hash)
        if isinstance(floor_map, str):
            return f"{verdict} of {quoted} {floor_map}"
        advisory = floor_map.get(adapter) if isinstance(adapter, str) else None
        if verdict == UNTRACKED:
            if advisory is not None:
                floor = advisory.min_safe_version
                if floor is None:
                    return f"untracked {quoted}, but the pinned map has advisories for it"
                return f"untracked {quoted}, but the pinned map has the floor {floor} for it"
            return None
        if advisory is None:
            return f"permit of {quoted}, which the pinned map has no floor for"
        floor = advisory.min_safe_version
        if canary.parse_version(version, advisory.order) is None:
            order = versions.order_name(advisory.order)
            return f"permit of {quoted} with no valid version ({version!r}); " + (
                f"floor {floor}" if floor is not None else f"{order} order"
            )
        try:
            # No moment: a waiver never turns a permit into anything but a violation.
            assessment = verdict_rule.assess(advisory, str(version), at=None)
        except versions.InvalidVersionError as exc:
            return f"permit of {quoted}: the pinned map's entry cannot be judged: {exc}"
        if assessment.unsafe:
            return (
                f"permit of {_named(adapter, alias, quoted=False)} {version}, "
                f"{_causes(assessment.causes)} of the pinned map"
            )
        return None

    def _overridden(self, adapter: object, version: object, map_hash: object) -> str:
        """What the warn policy overrode for ``adapter`` at ``version``, as far as the
        pinned map tells (it is a violation whatever it was)."""
        if version is None:
            return "with an unknown version"
        floor_map = self.maps.resolve(map_hash)
        advisory = None
        if not isinstance(floor_map, str) and isinstance(adapter, str):
            advisory = floor_map.get(adapter)
        if advisory is None or canary.parse_version(version, advisory.order) is None:
            return "over a refusal"
        try:
            assessment = verdict_rule.assess(advisory, str(version), at=None)
        except versions.InvalidVersionError:
            return "over a refusal"
        if not assessment.unsafe:
            return "over a refusal"
        return f"{_causes(assessment.causes)} of the pinned map"

    def _servers(
        self, seq: int, ts: str, receipt: dict[str, Any], adapter: str, alias: str | None
    ) -> None:
        """The MCP servers an allowed agent would start, each judged again like a spawn of
        its own by the map the agent's record pins: a refused one (the agent should have
        been refused with it) or one the rule finds unsafe is a violation of the agent's."""
        servers = receipt.get("mcp_servers")
        agent = _named(adapter, alias, quoted=True)
        if type(servers) is not list:
            self._violation(seq, f"the MCP servers of {agent} are not a list")
            return
        map_hash = receipt.get("floor_map_hash")
        for server in servers:
            if type(server) is not dict:
                self._violation(seq, f"an MCP server of {agent} is not an object")
                continue
            name, verdict = server.get("name"), server.get("verdict")
            declared = f"(declared in {server.get('declared_in')})"
            where = f"MCP server {name!r} of {agent} {declared}"
            if verdict in (SERVER_REMOTE, SERVER_DISABLED):
                # Not judged, so nothing to judge again; but only a remote server or one
                # turned off goes unjudged: a local enabled one so recorded escapes the proof.
                contradiction = _unjudged_contradiction(server, verdict)
                if contradiction is not None:
                    self._violation(seq, f"{where} {contradiction}")
                continue
            if verdict == REFUSE:
                self._violation(
                    seq,
                    f"{receipt.get('verdict')} of {agent}, yet its MCP server {name!r} "
                    f"{declared} was refused"
                    + (f": {server['reason']}" if isinstance(server.get("reason"), str) else ""),
                )
                continue
            server_adapter = server.get("adapter")
            if not _valid_name(server_adapter):
                self._violation(seq, f"{where} names the adapter {server_adapter!r}")
                continue
            if verdict == WAIVED:
                reason = self._judge_waived(ts, receipt, server_adapter, None, stated=server)
            else:
                reason = self._judge_spawn(verdict, server_adapter, server.get("version"), map_hash)
            if reason is not None:
                self._violation(seq, f"{where}: {reason}")
            if "mcp_servers" in server and isinstance(server_adapter, str):
                # A server that is an agent, with the servers it starts: held to them as
                # the agent is, by the same map.
                started = {key: receipt.get(key) for key in ("ts", "floor_map_hash")}
                started |= {"verdict": verdict, "mcp_servers": server["mcp_servers"]}
                self._servers(seq, ts, started, server_adapter, None)

    def _judge_waived(
        self,
        ts: str,
        receipt: dict[str, Any],
        adapter: object,
        alias: str | None,
        stated: dict[str, object] | None = None,
    ) -> str | None:
        """Why a ``waived`` spawn is not backed by a waiver of the map it pins, or None.
        ``ts``: the record's stamp; ``stated``: the version and waiver of an MCP server in the
        record, not its own."""
        quoted = _named(adapter, alias, quoted=True)
        held = receipt if stated is None else stated
        version, waiver_id = held.get("version"), held.get("waiver_id")
        floor_map = self.maps.resolve(receipt.get("floor_map_hash"))
        if isinstance(floor_map, str):
            return f"waived spawn of {quoted} {floor_map}"
        entry = floor_map.get(adapter) if isinstance(adapter, str) else None
        if entry is None:
            return f"waived spawn of {quoted}, which the pinned map does not track"
        if not isinstance(version, str) or not isinstance(waiver_id, str):
            return f"waived spawn of {quoted} names no version or no waiver id"
        waiver = next((w for w in entry.waivers if w.id == waiver_id), None)
        named = f"{_named(adapter, alias, quoted=False)} {version}"
        if waiver is None:
            return f"waived spawn of {named}: the pinned map carries no waiver {waiver_id!r} for it"
        if waiver.version != version:
            return f"waived spawn of {named}: waiver {waiver.id} is for version {waiver.version}"
        # The waiver must hold when the record was written: the spawn starts only after it,
        # so a waiver that expired while the decision waited for the chain waived nothing
        # (the gate asks for two minutes to spare). The receipt's own decision time cannot be
        # later than its record either: such a receipt was forged or back-dated.
        decided = receipt.get("ts")
        # (rounded up: digits past the microsecond still place it after its record)
        moment = _moment(decided, ceiling=True) if isinstance(decided, str) else None
        recorded = _moment(ts)
        if moment is None or recorded is None:
            return f"waived spawn of {named} states no readable decision time"
        if moment > recorded:
            return (
                f"waived spawn of {named}: its receipt is dated {decided}, after its record at {ts}"
            )
        if not verdict_rule.waiver_in_force(waiver, recorded):
            return (
                f"waived spawn of {named} recorded at {ts}: waiver {waiver.id} of the "
                f"pinned map expired at {waiver.expires}"
            )
        try:
            assessment = verdict_rule.assess(entry, version, at=None)
        except versions.InvalidVersionError as exc:
            return f"waived spawn of {named}: the pinned map's entry cannot be judged: {exc}"
        uncovered = [cause for cause in assessment.causes if not cause.covered_by(waiver)]
        if uncovered:
            return (
                f"waived spawn of {named}: waiver {waiver.id} of the pinned map does not "
                f"cover " + "; ".join(cause.describe() for cause in uncovered)
            )
        return None

    def _canary(self, seq: int, receipt: dict[str, Any], intact: bool) -> None:
        if receipt.get("verdict") != canary.CERTIFY and receipt.get("certified") is not True:
            return
        adapter, version = receipt.get("adapter"), receipt.get("version")
        if not intact:
            self._violation(seq, f"canary certification of {adapter!r} fails its integrity checks")
            return
        if not _valid_name(adapter):
            # canary record refuses such a name: no honest certification names one.
            self._violation(
                seq,
                f"canary certified {adapter!r}, not a valid adapter name ({ADAPTER_NAME_FORM})",
            )
            return
        if receipt.get("verdict") == canary.CERTIFY and receipt.get("result") != canary.PASS:
            self._violation(seq, f"canary certified {adapter!r} {version!r} without a pass")
        floor_map = self.maps.resolve(receipt.get("floor_map_hash"))
        if isinstance(floor_map, str):
            self._violation(seq, f"canary certification of {adapter!r} {floor_map}")
            return
        advisory = floor_map.get(adapter) if isinstance(adapter, str) else None
        if advisory is None:
            # canary record refuses an adapter the map in force does not hold.
            self._violation(
                seq, f"canary certified {adapter!r}, which the floor map it pins does not hold"
            )
            return
        ecosystem = advisory.order
        if canary.parse_version(version, ecosystem) is None:
            self._violation(seq, f"canary certified {adapter!r} with no valid version")
        elif advisory is not None and isinstance(version, str):
            try:
                causes = verdict_rule.assess(advisory, version, at=None).causes
            except versions.InvalidVersionError as exc:
                self._violation(seq, f"canary certified {adapter} {version}: {exc}")
                return
            if causes:
                self._violation(
                    seq,
                    f"canary certified {adapter} {version}, {_causes(causes, ids=False)} "
                    "of the pinned map (last-green must not advance onto it)",
                )

    # -- the verdict --

    def finish(
        self,
        report: SliceReport,
        *,
        key_given: bool,
        checkpoint_error: str | None = None,
        unauthenticated_ok: bool = False,
    ) -> ProofReport:
        """Combine the slice's integrity with coverage, the checkpoint and the violations.

        Without a key and a checkpoint nothing vouches for the records (anyone can write a
        slice whose links check): that is a finding unless ``unauthenticated_ok``.
        """
        errors = list(report.integrity_errors)
        if checkpoint_error is not None:
            errors.append(IntegrityError(None, f"checkpoint: {checkpoint_error}"))
        elif not key_given and self.checkpoint is None and not unauthenticated_ok:
            errors.append(IntegrityError(None, UNAUTHENTICATED))
        if report.records:
            errors.extend(self._coverage(report))
            errors.extend(self._checkpoint_findings(report, key_given))
        return ProofReport(
            slice=report,
            since=self._since_text,
            until=self._until_text,
            violations=tuple(self._violations),
            integrity_errors=tuple(errors),
            evaluated=self._evaluated,
            checkpoint=self.checkpoint,
            not_listed=self._not_listed + report.errors_not_listed,
        )

    def _coverage(self, report: SliceReport) -> list[IntegrityError]:
        """Whether the slice holds every record the window's statement speaks of."""
        found: list[IntegrityError] = []
        first_seq = report.first_seq if report.first_seq is not None else 0
        missing = f"records 0..{first_seq - 1} are missing from the slice"
        if self.since is None:
            # The window starts at genesis: only the whole chain from seq 0 shows it.
            if first_seq != 0:
                found.append(
                    IntegrityError(
                        first_seq,
                        f"{missing}: the window starts at genesis (no --since), so the "
                        "slice must start at seq 0",
                    )
                )
        else:
            first = _moment(report.first_ts or "")
            if first_seq != 0 and not (first is not None and first < self.since):
                found.append(
                    IntegrityError(
                        first_seq,
                        f"the slice does not cover the start of the window: it starts at seq "
                        f"{first_seq}, not stamped before {self._since_text}, and {missing}",
                    )
                )
            last = _moment(report.last_ts or "")
            if self.until is None and (last is None or last < self.since):
                # "since .. end of slice" with the end before the start shows nothing.
                found.append(
                    IntegrityError(
                        report.last_seq,
                        f"the window starts at {self._since_text}, after the slice's last "
                        f"record (stamped {report.last_ts}): the slice shows nothing of it",
                    )
                )
        if self.until is not None:
            last = _moment(report.last_ts or "")
            by_record = last is not None and last > self.until
            if not by_record and not self._checkpoint_closes(report):
                found.append(
                    IntegrityError(
                        report.last_seq,
                        "the slice does not cover the end of the window: its last record "
                        f"is not stamped after {self._until_text}, and no checkpoint issued "
                        "after it ends the slice",
                    )
                )
        return found

    def _checkpoint_closes(self, report: SliceReport) -> bool:
        checkpoint = self.checkpoint
        if checkpoint is None or self.until is None or report.last_seq is None:
            return False
        # A checkpoint without a time line says nothing about when: it closes no window.
        issued = _moment(checkpoint.time) if checkpoint.time is not None else None
        return (
            checkpoint.chain_id == report.chain_id
            and checkpoint.size == report.last_seq + 1
            and self._root_problem(report) is None
            and issued is not None
            and issued > self.until
        )

    def _root_problem(self, report: SliceReport) -> str | None:
        """Why the slice does not reach the checkpoint's root; None when it does."""
        from floorguard._proofs import checkpoint as checkpoints

        checkpoint = self.checkpoint
        if checkpoint is None:
            return "no checkpoint"
        last = checkpoint.size - 1
        digest = self._checkpoint_digest
        old = None if digest is None else checkpoints.old_format_reason(checkpoint, digest)
        if self._tree_root is not None:
            if self._tree_root == checkpoint.root:
                # Given where the last audit ended, this log must extend it: a slice from
                # genesis that matches a re-signed fork is still a fork.
                if self.inclusion is not None:
                    return self._inclusion_problem(old)
                return None if self.previous is None else self._extends_previous()
            return old or (
                f"the Merkle tree hash of records 0..{last} is not the checkpoint's root "
                "(records up to it were changed, removed or reordered)"
            )
        if self.previous is not None:
            return self._previous_problem(report, old)
        if self.inclusion is None:
            return old or (
                f"the slice starts at seq {report.first_seq}, not at genesis: the "
                f"checkpoint's root covers records 0..{last}; give --inclusion, an inclusion "
                f"proof of record {last} (floorctl chain prove --seq {last} --checkpoint FILE)"
            )
        return self._inclusion_problem(old)

    def _inclusion_problem(self, old: str | None) -> str | None:
        """Whether the inclusion proof leads the slice's record ``size - 1`` to the
        checkpoint's root (checked whenever one is given, needed or not)."""
        checkpoint, proof = self.checkpoint, self.inclusion
        if checkpoint is None or proof is None:
            return "no checkpoint"
        last = checkpoint.size - 1
        if self._checkpoint_leaf is None:
            return f"record {last} is not a well-formed record of the slice"
        if (proof.origin, proof.tree_size, proof.leaf_index) != (
            checkpoint.origin,
            checkpoint.size,
            last,
        ):
            return (
                f"the inclusion proof is for leaf {proof.leaf_index} of {proof.tree_size} in "
                f"{proof.origin}, not record {last} of the checkpoint's log"
            )
        try:
            root = merkle.root_from_inclusion(last, checkpoint.size, self._checkpoint_leaf,
                                              proof.hashes)  # fmt: skip
        except merkle.ProofError as exc:
            return f"the inclusion proof of record {last}: {exc}"
        if root != checkpoint.root:
            return old or (
                f"record {last} with its inclusion proof does not lead to the checkpoint's root "
                "(records up to it were changed, removed or reordered)"
            )
        return None

    def _extends_previous(self) -> str | None:
        """Whether the consistency proof shows the checkpoint's log extends ``previous``."""
        from floorguard._proofs import tlog

        checkpoint, previous, proof = self.checkpoint, self.previous, self.consistency
        if checkpoint is None or previous is None:
            return "no checkpoint"
        if proof is None:
            return "--previous-checkpoint needs --consistency, the proof from it to --checkpoint"
        late = self._previous_time_problem()
        if late is not None:
            return late
        try:
            tlog.check_consistency(proof, previous, checkpoint)
        except VerificationError as exc:
            return f"previous checkpoint: {self._previous_old_format() or exc}"
        return None

    def _previous_time_problem(self) -> str | None:
        """Why the previous checkpoint's time is not one no later record is stamped before
        (the time a chain's clock, or a server reporting one, put ahead), or None."""
        checkpoint, previous = self.checkpoint, self.previous
        if checkpoint is None or previous is None or previous.time is None:
            return None
        if (
            checkpoint.size > previous.size
            and checkpoint.time is not None
            and _stamped_before(checkpoint.time, previous.time)
        ):
            # (of the same size, a checkpoint signed without the chain's lock states its
            # last record's time, earlier than one signed with it: no contradiction)
            return (
                f"the checkpoint is dated {checkpoint.time}, before the previous checkpoint "
                f"({previous.time}) of fewer records: one of them states a time the chain's "
                "clock had not reached"
            )
        late = self._late_record()
        return None if late is None else late[1]

    def _late_record(self) -> tuple[int, str] | None:
        """The record after the previous checkpoint's that is stamped before its time, and
        why that is wrong; None when there is none."""
        previous = self.previous
        if previous is None or previous.time is None or self._before_previous is None:
            return None
        seq, ts = self._before_previous
        return seq, (
            f"record {seq}, after the previous checkpoint's {previous.size} records, is "
            f"stamped {ts}, before that checkpoint's time {previous.time}: its time was "
            "ahead of the chain's clock, and windows it closed may leave records out"
        )

    def _previous_old_format(self) -> str | None:
        """Why the previous checkpoint is of the old format, when the slice holds its last
        record and its root is that record's digest."""
        from floorguard._proofs import checkpoint as checkpoints

        previous, digest = self.previous, self._previous_digest
        if previous is None or digest is None:
            return None
        return checkpoints.old_format_reason(previous, digest)

    def _previous_problem(self, report: SliceReport, old: str | None) -> str | None:
        """Whether the consistency proof from ``previous`` binds the records appended since
        it, as the slice holds them, to the checkpoint's root."""
        from floorguard._proofs import tlog

        checkpoint, previous, proof = self.checkpoint, self.previous, self.consistency
        if checkpoint is None or previous is None:
            return "no checkpoint"
        if proof is None:
            return "--previous-checkpoint needs --consistency, the proof from it to --checkpoint"
        if previous.size >= checkpoint.size:
            return (
                f"the previous checkpoint covers {previous.size} records, the checkpoint "
                f"{checkpoint.size}: it binds none of the slice's records"
            )
        late = self._previous_time_problem()
        if late is not None:
            return late
        try:
            tlog.check_consistency(proof, previous, checkpoint)
        except VerificationError as exc:
            return f"previous checkpoint: {self._previous_old_format() or exc}"
        start = previous.size
        if report.first_seq is None or report.first_seq > start:
            return (
                f"the slice starts at seq {report.first_seq}, after the previous checkpoint's "
                f"last record {start - 1}: records from {start} on must be in it"
            )
        ranges = merkle.consistency_ranges(previous.size, checkpoint.size)
        for (low, high), expected in zip(ranges, proof.hashes, strict=True):
            if low < start:
                continue
            leaves = [self._appended.get(seq) for seq in range(low, high)]
            if any(leaf is None for leaf in leaves):
                return f"records {low}..{high - 1} are not all well-formed records of the slice"
            if merkle.hash_of_leaves([leaf for leaf in leaves if leaf is not None]) != expected:
                return old or (
                    f"records {low}..{high - 1} are not the records the consistency proof "
                    "says were appended (records were changed, removed or reordered)"
                )
        return None

    def _checkpoint_findings(self, report: SliceReport, key_given: bool) -> list[IntegrityError]:
        checkpoint = self.checkpoint
        if checkpoint is None or report.first_seq is None or report.last_seq is None:
            return []
        found = []
        if checkpoint.chain_id != report.chain_id:
            return [
                IntegrityError(
                    None,
                    f"checkpoint is for chain {checkpoint.chain_id} (origin "
                    f"{checkpoint.origin}), but the slice is chain {report.chain_id}",
                )
            ]
        last_covered = checkpoint.size - 1
        if last_covered > report.last_seq:
            found.append(
                IntegrityError(
                    report.last_seq,
                    f"the checkpoint covers {checkpoint.size} records but the slice ends at "
                    f"seq {report.last_seq}: records {report.last_seq + 1}.."
                    f"{last_covered} are missing (truncated), and without them the records "
                    "present cannot be checked against its root (any of them may differ "
                    "from those it signed)",
                )
            )
        elif last_covered < report.first_seq:
            found.append(
                IntegrityError(
                    None,
                    f"the checkpoint covers records up to seq {last_covered}, before the "
                    f"slice's first record {report.first_seq}",
                )
            )
        elif (problem := self._root_problem(report)) is not None:
            # (a finding of one record is listed under that record's seq)
            late = self._late_record()
            at = late[0] if late is not None and late[1] == problem else last_covered
            found.append(IntegrityError(at, problem))
        if not key_given and report.last_seq > last_covered >= report.first_seq:
            found.append(
                IntegrityError(
                    last_covered + 1,
                    f"records {last_covered + 1}..{report.last_seq} come after the checkpoint "
                    "and no --key-file or --host-keys was given: nothing authenticates them",
                )
            )
        return found


def _causes(causes: tuple[verdict_rule.Cause, ...], *, ids: bool = True) -> str:
    """The causes as a reason names them: a floor as it always read, each advisory with
    its aliases and how it affects the version."""
    return "; ".join(
        (c.detail + (f" ({c.advisory_id})" if ids else ""))
        if c.is_floor
        else f"affected by {c.describe()}"
        for c in causes
    )


_VALID_NAMES: set[str] = set()


def _unjudged_contradiction(server: dict[str, Any], verdict: str) -> str | None:
    """Why a server recorded as not judged (``remote``, ``disabled``) is one the gate judges:
    a transport other than remote, or ``enabled`` other than false; None when it is not."""
    if verdict == SERVER_REMOTE and server.get("transport") != SERVER_REMOTE:
        return (
            f"is recorded as remote, but its transport is {server.get('transport')!r}: a "
            "server that is not remote is judged"
        )
    if verdict == SERVER_DISABLED and server.get("enabled") is not False:
        return "is recorded as disabled, but it is enabled: an enabled server is judged"
    return None


def _valid_name(name: object) -> bool:
    if type(name) is not str:
        return False
    if name in _VALID_NAMES:  # most records name a few adapters
        return True
    if ADAPTER_NAME.match(name) is None:
        return False
    if len(_VALID_NAMES) < _MEMO_LIMIT:
        _VALID_NAMES.add(name)
    return True


def _named(adapter: object, alias: str | None, *, quoted: bool) -> str:
    """The adapter as a reason names it: ``aider (requested as 'codey')`` when the host
    asked for it under another name."""
    name = repr(adapter) if quoted else str(adapter)
    return name if alias is None else f"{name} (requested as {alias!r})"


def _moment(ts: str, *, ceiling: bool = False) -> datetime | None:
    try:
        return parse_ts_ceiling(ts) if ceiling else parse_any_ts(ts)
    except FloorguardError:
        return None


def _stamped_before(ts: str, moment: str) -> bool:
    """Whether stamp ``ts`` is earlier than the time ``moment`` (either unreadable: no)."""
    if len(ts) == len(moment) == 27 and ts[19] == moment[19] == "." and ts[-1] == moment[-1] == "Z":
        return ts < moment  # (fixed-width stamps: compared as text)
    first, second = _moment(ts), _moment(moment)
    return first is not None and second is not None and first < second
