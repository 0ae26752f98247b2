"""Extended floor-map entries (advisories, ranges, waivers) for runtime tests, and the module
that carries them, written directly: literals rendered with ``repr`` and the hash computed by
``floorguard._maps.map_model.floor_map_hash``, as refresh would state it."""

from __future__ import annotations

import json
import pprint
from pathlib import Path
from typing import Any

from floorguard._maps.map_model import floor_map_hash, from_entries

FAR_FUTURE = "2099-01-01T00:00:00Z"
LONG_AGO = "2020-01-01T00:00:00Z"


def advisory(
    advisory_id: str,
    *ranges: dict[str, str],
    versions: tuple[str, ...] = (),
    aliases: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "id": advisory_id,
        "aliases": sorted(aliases),
        "summary": f"{advisory_id} (test advisory)",
        "affected": list(ranges),
        "versions": list(versions),
        "severity": [],
        "references": [],
    }


def span(introduced: str, **end: str) -> dict[str, str]:
    """An OSV range: ``span("2.0.0", fixed="2.1.3")``, ``span("0", last_affected="1.1.0")``."""
    return {"introduced": introduced, **end}


def waiver(waiver_id: str, version: str, *covers: str, expires: str = FAR_FUTURE) -> dict[str, Any]:
    return {
        "id": waiver_id,
        "version": version,
        "advisories": list(covers),
        "reason": "reviewed: not reachable in our use",
        "approved_by": "security team",
        "expires": expires,
    }


def entry(
    ecosystem: str | None,
    *advisories: dict[str, Any],
    floor: str | None = None,
    floor_id: str = "BSA-0001",
    waivers: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """An extended map entry; ``floor`` adds the three floor fields."""
    built: dict[str, Any] = {}
    if floor is not None:
        built.update(min_safe_version=floor, advisory_id=floor_id, note=f"below {floor}")
    if ecosystem is not None:
        built["ecosystem"] = ecosystem
    built["advisories"] = sorted(advisories, key=lambda a: a["id"])
    built["waivers"] = sorted(waivers, key=lambda w: w["id"])
    return built


def map_hash(entries: dict[str, Any]) -> str:
    return floor_map_hash(from_entries(entries))


def extended_module(entries: dict[str, Any], *, version: int = 1) -> str:
    """A floor_map.py block holding ``entries`` as Python literals, with their hash."""
    return (
        "# floor-map:begin\n"
        f"FLOOR_MAP_VERSION = {version!r}\n"
        f"FLOOR_MAP_HASH = {map_hash(entries)!r}\n"
        f"FLOOR_MAP_ENTRIES = {pprint.pformat(entries, sort_dicts=True)}\n"
        "# floor-map:end\n"
    )


def verify_chain(host: Any, tmp_path: Path, maps: list[dict[str, Any]]) -> Any:
    """``floorctl verify chain --json`` over a test host's whole chain (MACs checked), with
    an archive of ``maps``."""
    from floorguard._base._canonical import canonical_bytes
    from helpers.cli import floorctl

    archive = tmp_path / "maps"
    archive.mkdir(exist_ok=True)
    for entries in maps:
        name = map_hash(entries).replace(":", "-") + ".json"
        (archive / name).write_bytes(canonical_bytes(entries))
    state = tmp_path / "state"
    home = {"FLOORGUARD_HOME": str(host.home)}
    exported = floorctl("chain", "export", "--out", "slice.jsonl", cwd=tmp_path, state=state,
                        **home)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    done = floorctl(
        "verify", "chain", "slice.jsonl", "--key-file", str(host.home / "chain.key"),
        "--maps", str(archive), "--json", cwd=tmp_path, state=state, **home,
    )  # fmt: skip
    return json.loads(done.stdout)
