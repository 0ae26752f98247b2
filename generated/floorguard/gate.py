"""The spawn preflight: decide, seal the decision into the audit chain, and only then answer.

Fail closed: an unknown version, a failed probe, a missing binary or an untrustworthy floor
map is a refusal, and no decision (not even a permit) leaves this module unless its receipt
is durably in the chain. The policy and the floor map are read at every call.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from floorguard import active_map, receipts
from floorguard.errors import ChainError, DetectionError, FloorMapError, SpawnRefused

POLICY_VARIABLE = "FLOORGUARD_ADAPTER_FLOOR_POLICY"
BLOCK, WARN = "block", "warn"
PERMIT, REFUSE, WARN_OVERRIDE, UNTRACKED = "permit", "refuse", "warn_override", "untracked"
ADAPTER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")


def policy_from(environ: Mapping[str, str]) -> str:
    """Exactly ``warn`` turns a below-floor or unknown-version refusal into an override.

    Anything else (``WARN``, `` warn``, ``warn-only``, empty, unset) blocks: a typo must
    not weaken the floor.
    """
    return WARN if environ.get(POLICY_VARIABLE) == WARN else BLOCK


@dataclass(frozen=True)
class Decision:
    """A decision as it was recorded; ``receipt_id`` names its receipt in the chain."""

    verdict: str
    adapter: str
    version: str | None
    floor: str | None
    advisory_id: str | None
    reason: str
    policy: str
    receipt_id: str
    binary: str | None
    detected_by: str | None
    floor_map_hash: str | None
    seq: int

    @property
    def allowed(self) -> bool:
        return self.verdict in (PERMIT, WARN_OVERRIDE, UNTRACKED)


@dataclass(frozen=True)
class _Judgement:
    verdict: str
    reason: str
    version: str | None = None
    detected_by: str | None = None
    binary: str | None = None
    floor: str | None = None
    advisory_id: str | None = None
    floor_map_hash: str | None = None


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> Any:
    from packaging.version import Version

    return Version(text)


def _below(version: str, floor: str) -> bool:
    from packaging.version import InvalidVersion

    try:
        return bool(_parsed(version) < _parsed(floor))
    except InvalidVersion as exc:
        raise DetectionError(f"version {version!r} is not PEP 440") from exc


def judge(
    adapter: str,
    *,
    binary: str | os.PathLike[str] | None,
    version: str | None,
    policy: str,
    environ: Mapping[str, str],
) -> _Judgement:
    """The verdict, without recording it. Never raises for a refusal: it returns one."""
    from floorguard import detect

    if not ADAPTER_NAME.match(adapter):
        return _Judgement(REFUSE, f"invalid adapter name {adapter!r}")
    try:
        in_force = active_map.current()
    except FloorMapError as exc:
        # Never overridable: with an untrustworthy map there is no floor to compare against.
        return _Judgement(REFUSE, f"floor map cannot be trusted: {exc}")
    advisory = in_force.floor_map.get(adapter)
    known = {"floor_map_hash": in_force.floor_map_hash}
    if advisory is not None:
        known |= {"floor": advisory.min_safe_version, "advisory_id": advisory.advisory_id}
    try:
        if advisory is None and binary is None and version is None:
            raise DetectionError("no binary or version given")
        found = detect.detect_version(
            adapter, binary=binary, version=version, path_env=environ.get("PATH")
        )
    except DetectionError as exc:
        if advisory is None:
            return _Judgement(UNTRACKED, f"{adapter} has no floor; version unknown: {exc}", **known)
        override = policy == WARN
        return _Judgement(
            WARN_OVERRIDE if override else REFUSE,
            f"unknown version of {adapter}: {exc}"
            + ("; allowed by warn policy" if override else ""),
            **known,
        )
    seen = {"version": found.version, "detected_by": found.detected_by, "binary": found.binary}
    if advisory is None:
        return _Judgement(UNTRACKED, f"{adapter} has no floor in the map", **known, **seen)
    try:
        below = _below(found.version, advisory.min_safe_version)
    except DetectionError as exc:
        return _Judgement(REFUSE, str(exc), **known, **seen)
    if not below:
        return _Judgement(
            PERMIT,
            f"{adapter} {found.version} meets the floor {advisory.min_safe_version}",
            **known,
            **seen,
        )
    message = (
        f"{adapter} {found.version} is below the floor {advisory.min_safe_version} "
        f"({advisory.advisory_id})"
    )
    if policy == WARN:
        return _Judgement(WARN_OVERRIDE, message + "; allowed by warn policy", **known, **seen)
    return _Judgement(REFUSE, message, **known, **seen)


def preflight(
    adapter: str,
    *,
    binary: str | os.PathLike[str] | None = None,
    version: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Decision:
    """Decide whether ``adapter`` may be spawned, and record the decision durably.

    Returns the Decision for permit, warn_override and untracked. Raises SpawnRefused for a
    refusal (``.decision`` holds the recorded refusal) and when the chain cannot be written
    (``.decision`` is None then: nothing could be recorded, so nothing is allowed).
    """
    env = os.environ if environ is None else environ
    policy = policy_from(env)
    judgement = judge(adapter, binary=binary, version=version, policy=policy, environ=env)
    decision = _seal(adapter, judgement, policy, env)
    if not decision.allowed:
        raise SpawnRefused(f"refusing to spawn {adapter}: {judgement.reason}", decision)
    return decision


def refuse_after(
    earlier: Decision, reason: str, environ: Mapping[str, str] | None = None
) -> SpawnRefused:
    """Record a refusal that overrules an earlier decision (e.g. the binary changed since).

    Returns the SpawnRefused to raise; its decision is the recorded refusal.
    """
    env = os.environ if environ is None else environ
    judgement = _Judgement(
        REFUSE, reason, version=earlier.version, detected_by=earlier.detected_by,
        binary=earlier.binary, floor=earlier.floor, advisory_id=earlier.advisory_id,
        floor_map_hash=earlier.floor_map_hash,
    )  # fmt: skip
    try:
        decision = _seal(earlier.adapter, judgement, earlier.policy, env)
    except SpawnRefused as unrecorded:
        return unrecorded
    return SpawnRefused(f"refusing to spawn {earlier.adapter}: {reason}", decision)


def _seal(adapter: str, judgement: _Judgement, policy: str, env: Mapping[str, str]) -> Decision:
    """Append the judgement's receipt durably; only then does it become a Decision."""
    from floorguard.chain import AuditChain

    receipt = receipts.new_receipt(
        receipts.SPAWN_PREFLIGHT, _receipt_fields(adapter, judgement, policy)
    )
    try:
        record = AuditChain.shared(env).append(receipts.SPAWN_PREFLIGHT, receipt)
    except ChainError as exc:
        raise SpawnRefused(
            f"refusing to spawn {adapter}: the decision ({judgement.verdict}) could not be "
            f"recorded in the audit chain: {exc}"
        ) from exc
    return Decision(
        verdict=judgement.verdict,
        adapter=adapter,
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
    )


def _receipt_fields(adapter: str, judgement: _Judgement, policy: str) -> dict[str, Any]:
    return {
        "adapter": adapter,
        "binary": judgement.binary,
        "version": judgement.version,
        "detected_by": judgement.detected_by,
        "floor": judgement.floor,
        "advisory_id": judgement.advisory_id,
        "verdict": judgement.verdict,
        "reason": judgement.reason,
        "policy": policy,
        "floor_map_hash": judgement.floor_map_hash,
    }
