"""``floorctl refresh --waivers`` over schema-3 feeds: waivers that name OSV advisories by
id or alias, judged in the adapter's ecosystem order (SemVer for npm), end to end.

The written module is read back by the runtime's own reader and judged by the runtime's
own rule (floorguard._maps.verdict), so what the refresh accepted is what a host would enforce.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl
from hosts import Host, write_script

from floorguard._base._time import parse_ts
from floorguard._maps import verdict
from floorguard._maps.active_map import parse_map_module

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'
NOW = "2026-12-01T00:00:00Z"
# The runtime judges a waiver by the clock, not by --now: one in force at any date the
# suite may run on.
IN_FORCE_FOR_YEARS = "2099-01-01T00:00:00Z"
RECORDED = ("--write", "--receipt-out", "receipt.json", "--anchor", "--now", NOW)

BACKPORTED = {
    "id": "GHSA-aaaa-bbbb-cccc",
    "aliases": ["CVE-2026-1234"],
    "summary": "Prompt injection runs shell commands without asking.",
    "affected": [
        {"introduced": "0", "fixed": "1.4.7"},
        {"introduced": "2.0.0-beta.1", "fixed": "2.1.3"},
    ],
}
LISTED = {
    "id": "GHSA-dddd-eeee-ffff",
    "aliases": ["CVE-2026-9999"],
    "summary": "Token leak in one nightly.",
    "versions": ["2.0.0-beta.3"],
}


def feed(*advisories: dict[str, Any], floor: bool = False) -> dict[str, Any]:
    claude: dict[str, Any] = {"ecosystem": "npm", "advisories": list(advisories)}
    if floor:
        claude.update(min_safe_version="1.0.20", advisory_id="BSA-0002", note="Upgrade.")
    return {"schema_version": 3, "adapters": {"claude": claude}}


def waiver(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "WVR-0001",
        "adapter": "claude",
        "version": "2.0.0-beta.3",
        "advisories": ["GHSA-aaaa-bbbb-cccc", "GHSA-dddd-eeee-ffff"],
        "reason": "the beta is pinned on the build farm until 2.1.3 ships",
        "approved_by": "security team",
        "expires": IN_FORCE_FOR_YEARS,
    }
    base.update(fields)
    return base


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("v3")
    project = root / "project"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(feed(BACKPORTED, LISTED)))
    code, _, err = run(root, "refresh", "--feed", "feed.json", *RECORDED)
    assert code == 0, err
    return root


@pytest.fixture
def project(baseline: Path, tmp_path: Path) -> Path:
    shutil.copytree(baseline, tmp_path / "copy")
    return tmp_path / "copy"


def run(root: Path, *args: str) -> tuple[int, str, str]:
    done = floorctl(*args, cwd=root / "project", state=root / "state")
    return done.returncode, done.stdout, done.stderr


def refresh(root: Path, *items: dict[str, Any], extra: tuple[str, ...] = RECORDED) -> Any:
    path = root / "project" / "waivers.json"
    path.write_text(json.dumps({"schema_version": 1, "waivers": list(items)}))
    return run(root, "refresh", "--feed", "feed.json", "--waivers", "waivers.json", *extra)


def claude(root: Path) -> Any:
    text = (root / "project" / MODULE).read_text()
    return parse_map_module(text, str(MODULE)).floor_map["claude"]


def last_receipt(root: Path) -> dict[str, Any]:
    code, out, err = run(root, "chain", "export")
    assert code == 0, err
    return dict(json.loads(out.splitlines()[-1])["receipt"])


def snapshot(root: Path) -> tuple[bytes, bytes, str]:
    project = root / "project"
    return (
        (project / MODULE).read_bytes(),
        (project / "receipt.json").read_bytes(),
        run(root, "chain", "export")[1],
    )


@pytest.mark.parametrize(
    "names",
    [
        ["GHSA-aaaa-bbbb-cccc", "GHSA-dddd-eeee-ffff"],  # ids
        ["CVE-2026-1234", "CVE-2026-9999"],  # aliases
        ["CVE-2026-9999", "GHSA-aaaa-bbbb-cccc"],  # one of each
    ],
)
def test_a_waiver_naming_advisories_by_id_or_alias_is_written_and_waives(
    project: Path, names: list[str]
) -> None:
    code, out, err = refresh(project, waiver(advisories=names))
    assert code == 0, err
    assert "+ claude waiver WVR-0001" in out
    entry = claude(project)
    assert entry.ecosystem == "npm"
    (written,) = entry.waivers
    assert written.advisories == tuple(names)
    judged = verdict.assess(entry, "2.0.0-beta.3", at=parse_ts(NOW))
    assert [c.advisory_id for c in judged.causes] == ["GHSA-aaaa-bbbb-cccc", "GHSA-dddd-eeee-ffff"]
    assert judged.waiver is not None and judged.waiver.id == "WVR-0001"
    # Exactly that version: another one inside the same range stays refused.
    assert verdict.assess(entry, "2.0.0-beta.4", at=parse_ts(NOW)).waiver is None
    receipt = last_receipt(project)
    assert receipt["diff"]["waivers"]["added"] == [{"adapter": "claude", "id": "WVR-0001"}]
    assert receipt["new_floor_map"]["claude"]["waivers"][0]["advisories"] == names
    code, _, err = run(project, "verify", "receipt", "receipt.json", "--floor-map", str(MODULE))
    assert code == 0, err


SEMVER_REFUSALS: dict[str, tuple[dict[str, Any], str, str]] = {
    # Only one of two causes named: the version would stay refused, the waiver waive nothing.
    "one_cause_unnamed": (
        waiver(advisories=["CVE-2026-1234"]), "$.waivers[0].advisories", "GHSA-dddd-eeee-ffff"
    ),
    # SemVer: 2.1.3-rc.1 is below the fix at 2.1.3 (refused); 2.1.3 is fixed.
    "fixed_version": (
        waiver(version="2.1.3", advisories=["GHSA-aaaa-bbbb-cccc"]),
        "$.waivers[0].version",
        "not refused",
    ),
    # A PEP 440 spelling is not an npm version: never read as 2.0.0b3.
    "pep440_spelling": (waiver(version="2.0.0b3"), "$.waivers[0].version", "SemVer"),
    "alias_of_another_adapter": (
        waiver(version="1.0.0", advisories=["CVE-2026-0000"]),
        "$.waivers[0].advisories[0]",
        "not an id or alias",
    ),
    "advisory_not_affecting": (
        waiver(version="1.4.6", advisories=["GHSA-aaaa-bbbb-cccc", "CVE-2026-9999"]),
        "$.waivers[0].advisories[1]",
        "does not affect 1.4.6",
    ),
    "floor_without_floor": (
        waiver(version="1.4.6", advisories=["floor"]), "$.waivers[0].advisories[0]", "no floor"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(SEMVER_REFUSALS))
def test_refuses_a_waiver_that_does_not_fit_a_schema3_entry(project: Path, case: str) -> None:
    item, path, fragment = SEMVER_REFUSALS[case]
    before = snapshot(project)
    code, out, err = refresh(project, item)
    assert code == 1, (out, err)
    assert err.startswith(f"floorctl: error: waivers.json: {path}: "), err
    assert fragment in err
    assert snapshot(project) == before


def test_a_prerelease_below_the_fix_can_be_waived(project: Path) -> None:
    item = waiver(version="2.1.3-rc.1", advisories=["CVE-2026-1234"])
    code, _, err = refresh(project, item)
    assert code == 0, err
    judged = verdict.assess(claude(project), "2.1.3-rc.1", at=parse_ts(NOW))
    assert judged.waiver is not None


def test_floor_and_advisory_together_need_both_named(project: Path) -> None:
    (project / "project" / "feed.json").write_text(json.dumps(feed(BACKPORTED, LISTED, floor=True)))
    code, _, err = refresh(project, waiver(version="1.0.10", advisories=["CVE-2026-1234"]))
    assert code == 1
    assert (
        "waivers.json: $.waivers[0].advisories: claude '1.0.10' is also refused for \"floor\""
        in err
    )
    code, _, err = refresh(project, waiver(version="1.0.10", advisories=["floor", "CVE-2026-1234"]))
    assert code == 0, err
    judged = verdict.assess(claude(project), "1.0.10", at=parse_ts(NOW))
    assert [c.is_floor for c in judged.causes] == [True, False] and judged.waiver is not None


def test_an_advisory_withdrawn_from_the_feed_makes_its_waiver_stale(project: Path) -> None:
    item = waiver(version="2.0.0-beta.3", advisories=["GHSA-dddd-eeee-ffff", "CVE-2026-1234"])
    assert refresh(project, item)[0] == 0
    # The feed drops the listed-version advisory: the waiver now names an advisory that is
    # not in the entry. The refresh is refused (a downgrade in any case), nothing changes.
    (project / "project" / "feed.json").write_text(json.dumps(feed(BACKPORTED)))
    before = snapshot(project)
    code, _, err = refresh(project, item, extra=(*RECORDED, "--allow-downgrade"))
    assert code == 1
    assert "$.waivers[0].advisories[0]: GHSA-dddd-eeee-ffff is not an id or alias" in err
    assert snapshot(project) == before


def test_removing_the_waiver_leaves_the_advisories_and_says_so(project: Path) -> None:
    assert refresh(project, waiver())[0] == 0
    code, out, err = run(project, "refresh", "--feed", "feed.json", *RECORDED)
    assert code == 0, err
    assert "- claude waiver WVR-0001" in out
    receipt = last_receipt(project)
    assert receipt["downgrade"] is False
    assert receipt["diff"]["waivers"]["removed"] == [{"adapter": "claude", "id": "WVR-0001"}]
    assert receipt["diff"]["advisories"] == {"added": [], "removed": [], "changed": []}
    entry = claude(project)
    assert entry.waivers == () and len(entry.advisories) == 2
    assert verdict.assess(entry, "2.0.0-beta.3", at=parse_ts(NOW)).waiver is None


HOST_PREFLIGHT = r"""
import dataclasses, json, sys
import floorguard
try:
    d = floorguard.preflight("claude", binary=sys.argv[1])
except floorguard.SpawnRefused as exc:
    d = exc.decision
print(json.dumps(dataclasses.asdict(d)))
"""


def test_the_refreshed_waiver_is_what_the_runtime_enforces_and_proves(
    project: Path, tmp_path: Path
) -> None:
    # floorctl writes the waiver; the real runtime, given that module, waives exactly that
    # version; after a refresh without it, the next spawn is refused; verify chain proves
    # both records against the maps the refreshes archived.
    assert refresh(project, waiver())[0] == 0
    host = Host(tmp_path / "host", {})
    module = project / "project" / MODULE

    def spawn(printed: str) -> dict[str, Any]:
        folder = tmp_path / "bin" / printed
        folder.mkdir(parents=True, exist_ok=True)
        script = write_script(folder / "claude", f"echo '{printed} (Claude Code)'")
        host.set_map(module.read_text())
        done = host.python("-c", HOST_PREFLIGHT, str(script))
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    waived, other = spawn("2.0.0-beta.3"), spawn("2.0.0-beta.4")
    assert (waived["verdict"], waived["waiver_id"]) == ("waived", "WVR-0001")
    assert (other["verdict"], other["waiver_id"]) == ("refuse", None)
    assert run(project, "refresh", "--feed", "feed.json", *RECORDED)[0] == 0
    later = spawn("2.0.0-beta.3")
    assert (later["verdict"], later["waiver_id"]) == ("refuse", None)
    home = {"FLOORGUARD_HOME": str(host.home)}
    state = tmp_path / "state"
    exported = floorctl("chain", "export", "--out", "s.jsonl", cwd=tmp_path, state=state, **home)
    assert exported.returncode == 0, exported.stderr
    maps = project / "project" / MODULE.parent / "maps"
    done = floorctl(
        "verify", "chain", "s.jsonl", "--key-file", str(host.home / "chain.key"),
        "--maps", str(maps), "--json", cwd=tmp_path, state=state, **home,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["proven"] is True
