"""``floorctl refresh --waivers`` and ``floorctl validate`` on waivers documents, end to end.

Every refusal ends with exit 1, one line naming the waivers file and the JSON path, and the
module, the receipt file and the audit chain exactly as they were.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl

from floorguard._base._time import parse_ts
from floorguard._maps import verdict
from floorguard._maps.active_map import parse_map_module
from floorguard._maps.map_model import floor_map_hash, from_entries

pytestmark = pytest.mark.slow  # (in neither the README's test command nor .ci/run)

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'
NOW = "2026-12-01T00:00:00Z"


def entry(version: str, advisory: str) -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": advisory, "note": "Upgrade."}


FEED = {
    "schema_version": 1,
    "adapters": {"aider": entry("0.60.0", "BSA-0001"), "claude": entry("1.0.20", "BSA-0002")},
}


def waiver(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "WVR-0001",
        "adapter": "claude",
        "version": "1.0.10",
        "advisories": ["floor"],
        "reason": "pinned for the migration; upgrade tracked in OPS-12",
        "approved_by": "security team",
        "expires": "2030-01-01T00:00:00Z",
    }
    base.update(fields)
    return base


def waivers_doc(*items: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "waivers": list(items)}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose module, receipt and chain were written by one refresh --anchor."""
    root = tmp_path_factory.mktemp("baseline")
    project = root / "project"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(FEED))
    code, _, err = run(root, "refresh", "--feed", "feed.json", *RECORDED)
    assert code == 0, err
    return root


@pytest.fixture
def project(baseline: Path, tmp_path: Path) -> Path:
    shutil.copytree(baseline, tmp_path / "copy")
    return tmp_path / "copy"


RECORDED = ("--write", "--receipt-out", "receipt.json", "--anchor")


def run(root: Path, *args: str) -> tuple[int, str, str]:
    done = floorctl(*args, cwd=root / "project", state=root / "state")
    return done.returncode, done.stdout, done.stderr


def write_waivers(root: Path, document: Any, name: str = "waivers.json") -> str:
    path = root / "project" / name
    path.write_bytes(document if isinstance(document, bytes) else json.dumps(document).encode())
    return name


def refresh_with(root: Path, document: Any, *extra: str) -> tuple[int, str, str]:
    name = write_waivers(root, document)
    return run(root, "refresh", "--feed", "feed.json", "--waivers", name, *extra)


def records(root: Path) -> list[dict[str, Any]]:
    code, out, err = run(root, "chain", "export")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def snapshot(root: Path) -> tuple[bytes, bytes, list[dict[str, Any]]]:
    project = root / "project"
    return (project / MODULE).read_bytes(), (project / "receipt.json").read_bytes(), records(root)


def module_entries(root: Path) -> Any:
    return parse_map_module((root / "project" / MODULE).read_text(), str(MODULE)).floor_map


def test_a_waiver_is_written_into_the_block_hashed_signed_and_anchored(project: Path) -> None:
    code, out, err = refresh_with(project, waivers_doc(waiver()), *RECORDED, "--now", NOW)
    assert code == 0, err
    assert "+ claude waiver WVR-0001" in out
    floor_map = module_entries(project)  # the runtime's own reader: parses and checks the hash
    claude = floor_map["claude"]
    assert [w.as_entry() for w in claude.waivers] == [
        {
            "id": "WVR-0001",
            "version": "1.0.10",
            "advisories": ["floor"],
            "reason": "pinned for the migration; upgrade tracked in OPS-12",
            "approved_by": "security team",
            "expires": "2030-01-01T00:00:00.000000Z",
        }
    ]
    judged = verdict.assess(claude, "1.0.10", at=parse_ts(NOW))
    assert judged.waiver is not None and judged.waiver.id == "WVR-0001"
    assert verdict.assess(claude, "1.0.11", at=parse_ts(NOW)).waiver is None
    # The receipt carries the waiver in its map, names it in the diff, records the document.
    receipt = records(project)[-1]["receipt"]
    assert receipt["new_floor_map"]["claude"]["waivers"][0]["id"] == "WVR-0001"
    assert receipt["diff"]["waivers"] == {
        "added": [{"adapter": "claude", "id": "WVR-0001"}],
        "removed": [],
        "changed": [],
    }
    assert receipt["downgrade"] is False
    document_bytes = (project / "project" / "waivers.json").read_bytes()
    assert receipt["waivers"] == {
        "source": "waivers.json",
        "digest": "sha256:" + hashlib.sha256(document_bytes).hexdigest(),
        "schema_version": 1,
        "waivers": 1,
    }
    assert (receipt["reference_time"], receipt["reference_time_source"]) == (
        "2026-12-01T00:00:00.000000Z",
        "--now",
    )
    code, _, err = run(project, "verify", "receipt", "receipt.json", "--floor-map", str(MODULE))
    assert code == 0, err
    assert run(project, "refresh", "--feed", "feed.json", "--check")[0] == 1  # without waivers
    assert (
        run(project, "refresh", "--feed", "feed.json", "--waivers", "waivers.json", "--check")[0]
        == 0
    )


def _dry_hash(root: Path, document: Any) -> str:
    code, out, err = refresh_with(root, document, "--json", "--now", NOW)
    assert code == 0, err
    return str(json.loads(out)["new_floor_map_hash"])


def test_the_hash_covers_every_field_of_a_waiver(project: Path) -> None:
    variants = [
        waiver(),
        waiver(id="WVR-0002"),
        waiver(adapter="aider", version="0.50.0"),
        waiver(version="1.0.11"),
        waiver(reason="another reason"),
        waiver(approved_by="someone else"),
        waiver(expires="2030-01-01T00:00:01Z"),
    ]
    hashes = [_dry_hash(project, waivers_doc(item)) for item in variants]
    assert len(set(hashes)) == len(hashes)
    no_waiver = floor_map_hash(from_entries(FEED["adapters"]))
    assert no_waiver not in hashes


def test_a_later_refresh_without_the_waiver_removes_it_and_the_diff_says_so(
    project: Path,
) -> None:
    code, _, err = refresh_with(project, waivers_doc(waiver()), *RECORDED)
    assert code == 0, err
    # Not a downgrade: no --allow-downgrade needed to drop a waiver.
    code, out, err = run(project, "refresh", "--feed", "feed.json", *RECORDED)
    assert code == 0, err
    assert "- claude waiver WVR-0001" in out
    first, _, removal = (r["receipt"] for r in records(project))
    assert removal["diff"]["waivers"] == {
        "added": [],
        "removed": [{"adapter": "claude", "id": "WVR-0001"}],
        "changed": [],
    }
    assert removal["downgrade"] is False and "waivers" not in removal
    # Back to exactly the floor-only map (and hash) of the first refresh.
    assert removal["new_floor_map_hash"] == first["new_floor_map_hash"]
    assert module_entries(project)["claude"].waivers == ()


def test_a_changed_waiver_is_named_as_changed(project: Path) -> None:
    assert refresh_with(project, waivers_doc(waiver()), *RECORDED)[0] == 0
    code, out, err = refresh_with(project, waivers_doc(waiver(reason="renewed")), *RECORDED)
    assert code == 0, err
    assert "~ claude waiver WVR-0001" in out
    assert records(project)[-1]["receipt"]["diff"]["waivers"]["changed"] == [
        {"adapter": "claude", "id": "WVR-0001"}
    ]


# ------------------------------------------------ refusals: exit 1, nothing changed


SEMANTIC_REFUSALS: dict[str, tuple[dict[str, Any], tuple[str, ...], str, str]] = {
    "adapter_not_in_map": (waiver(adapter="codex"), (), "$.waivers[0].adapter", "not in the"),
    "version_not_refused": (waiver(version="1.0.20"), (), "$.waivers[0].version", "not refused"),
    "version_above_floor": (waiver(version="2.0.0"), (), "$.waivers[0].version", "not refused"),
    "version_invalid": (waiver(version="1.0.x"), (), "$.waivers[0].version", "SemVer"),
    "advisory_not_in_entry": (
        waiver(advisories=["GHSA-aaaa-bbbb-cccc"]), (), "$.waivers[0].advisories[0]", "not an id"
    ),
    "floor_named_by_its_id": (
        waiver(advisories=["BSA-0002"]), (), "$.waivers[0].advisories[0]", '"floor"'
    ),
    "expired_by_the_clock": (
        waiver(expires="2020-01-01T00:00:00Z"), (), "$.waivers[0].expires", "expired"
    ),
    "expired_by_now": (
        waiver(), ("--now", "2030-01-01T00:00:00Z"), "$.waivers[0].expires", "expired"
    ),
    "expired_by_now_with_offset": (
        waiver(), ("--now", "2030-01-01T01:00:00+01:00"), "$.waivers[0].expires", "expired"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(SEMANTIC_REFUSALS))
def test_refuses_a_waiver_that_does_not_fit_the_map(project: Path, case: str) -> None:
    item, extra, path, fragment = SEMANTIC_REFUSALS[case]
    before = snapshot(project)
    code, out, err = refresh_with(project, waivers_doc(item), *RECORDED, *extra)
    assert code == 1, (out, err)
    line = err.strip()
    assert line.startswith(f"floorctl: error: waivers.json: {path}: "), err
    assert fragment in line and "Traceback" not in err
    assert snapshot(project) == before


def test_a_waiver_unexpired_at_now_is_accepted(project: Path) -> None:
    extra = ("--now", "2029-12-31T23:59:59Z")
    code, _, err = refresh_with(project, waivers_doc(waiver()), *RECORDED, *extra)
    assert code == 0, err


def huge(root: Path) -> bytes:
    return b'{"schema_version": 1, "waivers": [], "x": "' + b"a" * (1024 * 1024) + b'"}'


DOCUMENT_REFUSALS: dict[str, tuple[Any, str]] = {
    "malformed_json": (b'{"schema_version": 1, "waivers": [', "$"),
    "duplicate_keys": (
        b'{"schema_version": 1, "waivers": [], "waivers": []}', "$.waivers"
    ),
    "unknown_field": (waivers_doc(waiver(exec="x")), "$.waivers[0].exec"),
    "wrong_schema": (dict(waivers_doc(waiver()), schema_version=3), "$.schema_version"),
    "duplicate_id": (waivers_doc(waiver(), waiver(version="1.0.11")), "$.waivers[1].id"),
    "id_injection": (waivers_doc(waiver(id='W"; import os; "')), "$.waivers[0].id"),
    "reason_quote": (waivers_doc(waiver(reason='x"""; import os; """')), "$.waivers[0].reason"),
    "reason_backslash": (waivers_doc(waiver(reason="a\\x00")), "$.waivers[0].reason"),
    "reason_newline": (waivers_doc(waiver(reason="a\nFLOOR_MAP_HASH = 1")), "$.waivers[0].reason"),
    "reason_template": (waivers_doc(waiver(reason="{% raw %}")), "$.waivers[0].reason"),
    "approved_by_control": (waivers_doc(waiver(approved_by="\x1b[2J")), "$.waivers[0].approved_by"),
    "approved_by_bidi": (waivers_doc(waiver(approved_by="a\u202eb")), "$.waivers[0].approved_by"),
    "version_space": (waivers_doc(waiver(version="1.0.10 ")), "$.waivers[0].version"),
    "empty_advisories": (waivers_doc(waiver(advisories=[])), "$.waivers[0].advisories"),
    "expires_without_zone": (
        waivers_doc(waiver(expires="2030-01-01T00:00:00")), "$.waivers[0].expires"
    ),
    "expires_with_an_offset": (
        waivers_doc(waiver(expires="2030-01-01T01:00:00+01:00")), "$.waivers[0].expires"
    ),
    "expires_with_a_zero_offset": (
        waivers_doc(waiver(expires="2030-01-01T00:00:00+00:00")), "$.waivers[0].expires"
    ),
    "expires_with_a_lowercase_z": (
        waivers_doc(waiver(expires="2030-01-01T00:00:00z")), "$.waivers[0].expires"
    ),
    "huge_file": (huge, "$"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DOCUMENT_REFUSALS))
def test_refuses_an_invalid_waivers_document_and_changes_nothing(project: Path, case: str) -> None:
    document, path = DOCUMENT_REFUSALS[case]
    if callable(document):
        document = document(project)
    before = snapshot(project)
    code, out, err = refresh_with(project, document, *RECORDED)
    assert code == 1, (out, err)
    assert f"floorctl: error: waivers.json: {path}: " in err, err
    assert "Traceback" not in err
    assert snapshot(project) == before


def test_injection_through_reason_approved_by_and_id_stays_inert(project: Path) -> None:
    hostile = "'); import os; os.system('id'); (' # } ]} FLOOR_MAP_HASH = 'x'"
    item = waiver(reason=hostile, approved_by="o'brien ]]} ) ; exec('1')")
    code, _, err = refresh_with(project, waivers_doc(item), *RECORDED)
    assert code == 0, err
    text = (project / "project" / MODULE).read_text()
    tree = ast.parse(text)
    # Still nothing but the module docstring, the three literal assignments and the tail.
    assert [type(node).__name__ for node in tree.body] == ["Expr"] + ["Assign"] * 4
    assert all(isinstance(ast.literal_eval(node.value), (str, int, dict)) for node in tree.body[1:])
    (written,) = module_entries(project)["claude"].waivers
    assert (written.reason, written.approved_by) == (item["reason"], item["approved_by"])


# ------------------------------------------------ validate


def test_validate_accepts_a_waivers_document_by_its_shape(project: Path) -> None:
    name = write_waivers(project, waivers_doc(waiver(), waiver(id="WVR-0002", version="1.0.11")))
    code, out, err = run(project, "validate", name, "feed.json")
    assert code == 0, err
    assert out.splitlines() == [f"ok  {name} (2 waivers)", "ok  feed.json (2 adapters)"]
    code, out, _ = run(project, "validate", "--json", name)
    assert json.loads(out)["files"] == [
        {"file": name, "valid": True, "kind": "waivers", "waivers": 2, "errors": []}
    ]


def test_validate_refuses_an_expiry_with_an_offset_naming_file_and_path(project: Path) -> None:
    # Documented as UTC with Z: an offset is refused, never silently normalised.
    name = write_waivers(project, waivers_doc(waiver(expires="2026-12-31T00:00:00+01:00")))
    before = (project / "project" / name).read_bytes()
    code, out, err = run(project, "validate", name)
    assert code == 1 and out == ""
    assert err.strip() == (
        f"floorctl: error: {name}: $.waivers[0].expires: '2026-12-31T00:00:00+01:00' is not "
        "an RFC 3339 UTC time with Z and at most six fractional digits (such as "
        "2026-12-31T00:00:00Z)"
    ), err
    assert (project / "project" / name).read_bytes() == before


def test_validate_reports_every_problem_of_a_waivers_document(project: Path) -> None:
    name = write_waivers(project, waivers_doc(waiver(id="bad id"), waiver(reason="a\nb")))
    code, out, err = run(project, "validate", name)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert [line.split(": ")[3] for line in lines] == ["$.waivers[0].id", "$.waivers[1].reason"]
    assert all(line.startswith(f"floorctl: error: {name}: ") for line in lines)


def test_the_bernstein_layout_refuses_a_map_with_waivers(project: Path) -> None:
    before = snapshot(project)
    code, _, err = refresh_with(
        project, waivers_doc(waiver()), "--template", "bernstein", *RECORDED
    )
    assert code == 1
    assert "the bernstein template holds floors only: 'claude' carries advisories or waivers" in err
    assert snapshot(project) == before
