"""The conformance canary: certify an adapter version, and the last-green projection.

A canary run of adapter A at version V ends in ``pass`` or ``fail`` and is sealed as an
``adapter.canary_receipt`` that pins the floor map in force. Its verdict:

- ``refuse``: V is unsafe under the map's rule (below A's floor, or inside an affected range
  or listed by one of A's advisories; ``verdict.assess``), or is not a version of A's
  ecosystem (PEP 440, or SemVer for an npm entry), whatever the result. Such a version is
  never certified, waiver or not: a waiver lets a version run, it does not vouch for it.
- ``certify``: a ``pass`` of a version that is not unsafe (or of an adapter with no entry)
  newer than A's last-green: last-green advances to V.
- ``record``: anything else (a ``fail``, or a ``pass`` not newer than last-green). Recorded;
  moves nothing.

Last-green is a projection of the chain, never state of its own: ``project`` replays canary
records and advances an adapter only on a ``certify`` record whose version is at or above
the floor it recorded and newer than the current last-green (compared in the ecosystem it
recorded), so a record that claims more than that still cannot move last-green onto a
below-floor or older version. (Advisories are checked against the pinned map by the window
proof, which has the map.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from floorguard.errors import InvalidInput, VerificationError

if TYPE_CHECKING:
    from floorguard._chain.chain import AuditChain, ChainRecord
    from floorguard._maps.map_model import Advisory

CANARY = "adapter.canary_receipt"
PASS, FAIL = "pass", "fail"
RESULTS = frozenset({PASS, FAIL})
CERTIFY, REFUSE, RECORD = "certify", "refuse", "record"
ECOSYSTEMS = frozenset({"npm", "PyPI"})


def parse_version(text: object, ecosystem: str | None = None) -> Any | None:
    """``text`` parsed in ``ecosystem``'s order (None: PEP 440), or None when it is not a
    version there (versions.parse is cached: verifiers call this a lot)."""
    from floorguard._maps import versions

    if not isinstance(text, str):
        return None
    try:
        return versions.parse(text, ecosystem)  # refuses surrounding whitespace: exact
    except versions.InvalidVersionError:
        return None


def below_floor(version: object, floor: str, ecosystem: str | None = None) -> bool:
    """True when ``version`` is below ``floor``, or either is not a valid version of
    ``ecosystem`` (fail closed)."""
    seen, minimum = parse_version(version, ecosystem), parse_version(floor, ecosystem)
    return seen is None or minimum is None or bool(seen < minimum)


@dataclass(frozen=True)
class LastGreen:
    """An adapter's last certified version and the receipt that certified it."""

    version: str
    receipt_id: str
    ts: str

    def to_json(self) -> dict[str, str]:
        return {"version": self.version, "receipt_id": self.receipt_id, "ts": self.ts}


@dataclass(frozen=True)
class CanaryJudgement:
    verdict: str
    certified: bool
    floor: str | None
    advisory_id: str | None
    reason: str


def judge(
    adapter: str,
    version: str,
    result: str,
    advisory: Advisory | None,
    last_green: LastGreen | None,
) -> CanaryJudgement:
    """The verdict of one canary run (pure). Raises VerificationError for an unknown result."""
    from floorguard._maps import verdict, versions
    from floorguard._maps.verdict import unsafe_phrase

    if result not in RESULTS:
        raise VerificationError(f"canary result must be pass or fail, not {result!r}")
    floor = advisory.min_safe_version if advisory is not None else None
    advisory_id = advisory.advisory_id if advisory is not None else None
    ecosystem = advisory.order if advisory is not None else None
    seen = parse_version(version, ecosystem)
    if seen is None:
        return CanaryJudgement(
            REFUSE,
            False,
            floor,
            advisory_id,
            f"{version!r} is not a {versions.order_name(ecosystem)} version",
        )
    if advisory is not None:
        try:
            # No moment: waivers never certify.
            assessment = verdict.assess(advisory, version, at=None)
        except versions.InvalidVersionError as exc:
            return CanaryJudgement(
                REFUSE, False, floor, advisory_id, f"the map entry cannot be judged: {exc}"
            )
        if assessment.unsafe:
            phrases = "; ".join(unsafe_phrase(cause) for cause in assessment.causes)
            return CanaryJudgement(
                REFUSE,
                False,
                floor,
                assessment.advisory_id,
                f"{adapter} {version} {phrases}: not certified",
            )
    if result != PASS:
        return CanaryJudgement(RECORD, False, floor, advisory_id, f"{adapter} {version} failed")
    current = parse_version(last_green.version, ecosystem) if last_green is not None else None
    if last_green is not None and (current is None or seen <= current):
        return CanaryJudgement(
            RECORD,
            True,
            floor,
            advisory_id,
            f"{adapter} {version} passed but is not newer than last-green {last_green.version}",
        )
    return CanaryJudgement(
        CERTIFY, True, floor, advisory_id, f"{adapter} {version} passed: last-green advances"
    )


def _sort_marks(version: Any) -> list[str]:
    """The parts of a PEP 440 version that sort it outside the ordinary release line: an
    epoch puts it above every release without one, a local segment is a private build.
    (SemVer has neither: build metadata does not take part in its order.)"""
    from packaging.version import Version

    if not isinstance(version, Version):
        return []
    marks = []
    if version.epoch != 0:
        marks.append("an epoch")
    if version.local is not None:
        marks.append("a local segment")
    return marks


def _unlike_floor(seen: Any, floor: str | None, ecosystem: str | None) -> list[str]:
    """The marks ``seen`` has that the floor does not (no floor: every mark counts)."""
    minimum = parse_version(floor, ecosystem) if floor is not None else None
    allowed = _sort_marks(minimum) if minimum is not None else []
    return [mark for mark in _sort_marks(seen) if mark not in allowed]


def input_problem(adapter: str, version: str, advisory: Advisory | None) -> str | None:
    """Why a canary run cannot be recorded at all (a usage error), or None.

    The adapter must be in the map in force; the version must be a version of its
    ecosystem (PEP 440, or SemVer for npm), and a PEP 440 one may carry an epoch or a local
    segment only when the floor does (``1!0.1`` would otherwise sort above every real
    release and freeze last-green there).
    """
    from floorguard._maps import versions

    if advisory is None:
        return f"adapter {adapter!r} is not in the floor map in force: nothing to certify"
    seen = parse_version(version, advisory.order)
    if seen is None:
        # Show a version of the right form: the floor's, when the entry has one.
        like = f" such as {adapter}'s floor {advisory.min_safe_version}"
        example = like if advisory.min_safe_version is not None else ""
        order = versions.order_name(advisory.order)
        return f"--version {version!r} is not a {order} version{example}"
    unlike = _unlike_floor(seen, advisory.min_safe_version, advisory.order)
    if unlike:
        return (
            f"--version {version} has {' and '.join(unlike)}, which {adapter}'s floor "
            f"{advisory.min_safe_version} does not: it would sort outside the release line"
        )
    return None


def advances(receipt: Mapping[str, Any], current: LastGreen | None) -> bool:
    """Whether a canary receipt moves last-green, by the rules, whatever it claims."""
    if receipt.get("verdict") != CERTIFY or receipt.get("result") != PASS:
        return False
    if receipt.get("certified") is not True:
        return False
    ecosystem = receipt.get("ecosystem")
    if ecosystem is not None and ecosystem not in ECOSYSTEMS:
        return False
    version = receipt.get("version")
    seen = parse_version(version, ecosystem)
    if seen is None:
        return False
    floor = receipt.get("floor")
    if floor is not None and (not isinstance(floor, str) or below_floor(version, floor, ecosystem)):
        return False
    if _unlike_floor(seen, floor, ecosystem):
        return False  # recorded before input_problem refused it: never frozen above releases
    if current is None:
        return True
    previous = parse_version(current.version, ecosystem)
    return previous is None or bool(seen > previous)


class Projection:
    """Last-green per adapter, built by feeding canary records in chain order."""

    def __init__(self) -> None:
        self.last_green: dict[str, LastGreen] = {}

    def feed(self, record: ChainRecord) -> bool:
        """Apply one record; True when it moved last-green."""
        if record.event != CANARY:
            return False
        receipt = record.receipt
        adapter = receipt.get("adapter")
        if not isinstance(adapter, str):
            return False
        if not advances(receipt, self.last_green.get(adapter)):
            return False
        self.last_green[adapter] = LastGreen(str(receipt["version"]), record.receipt_id, record.ts)
        return True


def project(records: Iterable[ChainRecord]) -> dict[str, LastGreen]:
    """The last-green projection of ``records`` (in chain order)."""
    projection = Projection()
    for record in records:
        projection.feed(record)
    return dict(sorted(projection.last_green.items()))


def last_green_document(projection: Mapping[str, LastGreen]) -> dict[str, dict[str, str]]:
    """The ``canary last-green --json`` document: ``{adapter: {version, receipt_id, ts}}``."""
    return {adapter: entry.to_json() for adapter, entry in sorted(projection.items())}


@dataclass(frozen=True)
class CanaryOutcome:
    judgement: CanaryJudgement
    receipt: dict[str, Any]
    receipt_id: str
    seq: int


def record_run(chain: AuditChain, adapter: str, version: str, result: str) -> CanaryOutcome:
    """Judge one canary run against the map in force and seal it into ``chain``.

    Bad input is refused before the chain is touched. Last-green is rebuilt from the chain
    first (the chain, verified by its MACs, is the only state). Raises InvalidInput (an
    invalid adapter name, an adapter not in the map, a version that is not acceptable:
    nothing recorded), VerificationError (a chain that does not verify), FloorMapError (no
    trustworthy map) and ChainError (the receipt could not be written).
    """
    from floorguard._chain import receipts
    from floorguard._maps import active_map
    from floorguard._maps.map_model import ADAPTER_NAME, ADAPTER_NAME_FORM

    if not ADAPTER_NAME.match(adapter):
        # Refused as the gate refuses it, before the map or the chain is read.
        raise InvalidInput(f"invalid adapter name {adapter!r} ({ADAPTER_NAME_FORM})")
    if result not in RESULTS:
        raise InvalidInput(f"canary result must be pass or fail, not {result!r}")
    in_force = active_map.current()
    advisory = in_force.floor_map.get(adapter)
    problem = input_problem(adapter, version, advisory)
    if problem is not None:
        raise InvalidInput(problem)
    current = chain_projection(chain).get(adapter)
    judgement = judge(adapter, version, result, advisory, current)
    receipt = receipts.new_receipt(
        CANARY,
        {
            "adapter": adapter,
            "version": version,
            "result": result,
            "floor": judgement.floor,
            "advisory_id": judgement.advisory_id,
            "certified": judgement.certified,
            "verdict": judgement.verdict,
            "reason": judgement.reason,
            "previous_last_green": current.to_json() if current is not None else None,
            "floor_map_hash": in_force.floor_map_hash,
            # The order the version was judged in, so the projection compares alike.
            "ecosystem": advisory.order if advisory is not None else None,
        },
    )
    record = chain.append(CANARY, receipt)
    return CanaryOutcome(judgement, receipt, record.receipt_id, record.seq)


def chain_projection(chain: AuditChain) -> dict[str, LastGreen]:
    """Last-green rebuilt from the whole chain, which must verify with the chain's keys
    (``AuditChain.verification_keys``: the HMAC key, and the hosts' keys for signed records).

    Streams: only the projection is kept. Raises VerificationError when the chain does not
    verify (the projection of a tampered chain is refused, not shown) and KeyFileError when
    its key cannot be read.
    """
    from floorguard._proofs.slice_verify import SliceVerifier

    if not chain.exists() or chain.head() is None:
        return {}
    projection = Projection()

    def feed(record: ChainRecord, intact: bool) -> None:
        if intact:
            projection.feed(record)

    key, host_keys = chain.verification_keys()
    verifier = SliceVerifier(key=key, on_record=feed, host_keys=host_keys)
    verifier.feed_all(chain.export_lines())
    report = verifier.finish()
    if not report.intact or report.first_seq != 0:
        first = report.integrity_errors[0] if report.integrity_errors else None
        where = f" (seq {first.seq}: {first.reason})" if first is not None else ""
        raise VerificationError(f"the audit chain {chain.location} does not verify{where}")
    return dict(sorted(projection.last_green.items()))
