"""``floorctl`` with schema 3 feeds, end to end: the real command on real files, the real
runtime reading what it wrote. Old data keeps its exact bytes and hash; advisories merge,
diff, and are refused when a refresh would let an affected version through."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl, isolated_env

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

REPO = Path(__file__).resolve().parents[2]
MODULE = Path("generated/floorguard/floor_map.py")
# The hash of the shipped example map, taken from main before schema 3 existed.
EXAMPLE_HASH = "sha256:c4ab55242142977dea5095fd882ad74ea6d57da68a653604ef5587c43346bc5b"
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'


def advisory(ident: str, *spans: dict[str, str], **more: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "summary": more.pop("summary", "Runs commands unasked."),
        "affected": list(spans),
        **more,
    }


def v3(**adapters: Any) -> dict[str, Any]:
    return {"schema_version": 3, "adapters": adapters}


BACKPORT = advisory(
    "GHSA-aaaa-bbbb-cccc",
    {"introduced": "0", "fixed": "1.4.7"},
    {"introduced": "2.0.0", "last_affected": "2.1.2"},
    aliases=["CVE-2025-1234"],
    versions=["3.0.0"],
    severity=[{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
    references=["https://github.com/advisories/GHSA-aaaa-bbbb-cccc"],
)
FEED = v3(
    claude={
        "ecosystem": "npm",
        "min_safe_version": "1.0.20",
        "advisory_id": "BSA-0002",
        "note": "Upgrade.",
        "advisories": [BACKPORT, advisory("GHSA-2222-3333-4444", versions=["4.0.0"])],
    },
    aider={
        "ecosystem": "PyPI",
        "advisories": [advisory("PYSEC-2025-1", {"introduced": "0.50", "fixed": "0.60"})],
    },
)


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "project"
        self.state = root / "state"
        (self.dir / MODULE.parent).mkdir(parents=True)
        (self.dir / MODULE).write_text(EMPTY_MODULE)

    def feed(self, name: str, document: dict[str, Any]) -> str:
        (self.dir / name).write_text(json.dumps(document))
        return name

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return floorctl(*args, cwd=self.dir, state=self.state)

    def write(self, *feeds: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        args = [a for f in feeds for a in ("--feed", f)]
        return self.run(
            "refresh", *args, "--write", "--receipt-out", "receipt.json", "--anchor", *extra
        )

    @property
    def module(self) -> Path:
        return self.dir / MODULE

    def receipt(self) -> dict[str, Any]:
        envelope = json.loads((self.dir / "receipt.json").read_text())
        predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        return predicate

    def runtime_map(self) -> dict[str, Any]:
        """What the runtime reads from the module, in a fresh interpreter."""
        probe = (
            "import json, sys\n"
            "from pathlib import Path\n"
            "from floorguard._maps.active_map import load_map_file\n"
            "from floorguard._maps.map_model import to_entries\n"
            "m = load_map_file(Path(sys.argv[1]))\n"
            "print(json.dumps({'hash': m.floor_map_hash, 'version': m.map_version,"
            " 'entries': to_entries(m.floor_map)}))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe, str(self.module)],
            capture_output=True,
            text=True,
            check=True,
            env=isolated_env(self.state),
        )
        result: dict[str, Any] = json.loads(done.stdout)
        return result


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines and lines[0].startswith("floorctl: error: "), done.stderr
    return lines[0]


# --- old data: the same bytes and hash ----------------------------------------------------------


def test_a_schema_1_feed_gives_the_committed_block_byte_for_byte(project: Project) -> None:
    committed = (REPO / MODULE).read_text()
    head, _, rest = committed.partition("# floor-map:begin\n")
    _, _, tail = rest.partition("# floor-map:end\n")
    project.module.write_text(f"{head}# floor-map:begin\n# floor-map:end\n{tail}")
    shutil.copy(REPO / "feeds" / "example.v1.json", project.dir / "example.json")
    done = project.write("example.json")
    assert done.returncode == 0, done.stderr
    assert project.module.read_bytes() == (REPO / MODULE).read_bytes()
    assert f'FLOOR_MAP_HASH = "{EXAMPLE_HASH}"' in project.module.read_text()
    receipt = project.receipt()
    assert receipt["new_floor_map_hash"] == EXAMPLE_HASH
    # The receipt's diff keeps exactly its old form: no advisories, no waivers.
    assert set(receipt["diff"]) == {"added", "removed", "changed"}
    assert receipt["diff"]["added"] == ["aider", "claude", "codex", "gemini", "goose", "gptme"]
    assert project.runtime_map()["hash"] == EXAMPLE_HASH
    # Refreshing again changes nothing.
    again = project.run("refresh", "--feed", "example.json", "--check")
    assert again.returncode == 0, again.stderr


# --- schema 3 end to end ----------------------------------------------------------------------


def test_a_schema_3_feed_validates_refreshes_and_the_runtime_loads_it(project: Project) -> None:
    project.feed("osv.json", FEED)
    checked = project.run("validate", "osv.json")
    assert checked.returncode == 0, checked.stderr
    done = project.write("osv.json")
    assert done.returncode == 0, done.stderr
    assert "+ claude >= 1.0.20 (BSA-0002) [npm] 2 advisories" in done.stdout
    assert "+ aider [PyPI] 1 advisory" in done.stdout
    assert "+ claude advisory GHSA-aaaa-bbbb-cccc" in done.stdout

    loaded = project.runtime_map()
    claude = loaded["entries"]["claude"]
    assert claude["ecosystem"] == "npm" and claude["min_safe_version"] == "1.0.20"
    assert [a["id"] for a in claude["advisories"]] == ["GHSA-2222-3333-4444", "GHSA-aaaa-bbbb-cccc"]
    assert claude["advisories"][1]["affected"] == BACKPORT["affected"]
    assert loaded["entries"]["aider"]["ecosystem"] == "PyPI"

    receipt = project.receipt()
    assert receipt["new_floor_map_hash"] == loaded["hash"]
    assert receipt["new_floor_map"] == loaded["entries"]
    assert receipt["diff"]["advisories"]["added"] == [
        {"adapter": "aider", "id": "PYSEC-2025-1"},
        {"adapter": "claude", "id": "GHSA-2222-3333-4444"},
        {"adapter": "claude", "id": "GHSA-aaaa-bbbb-cccc"},
    ]
    # The archive keeps the extended map under its own hash.
    archived = project.module.parent / "maps" / (loaded["hash"].replace(":", "-") + ".json")
    assert json.loads(archived.read_text()) == loaded["entries"]

    # Read-back of a module holding extended entries: check, verify, publish, re-refresh.
    assert project.run("refresh", "--feed", "osv.json", "--check").returncode == 0
    verified = project.run("verify", "receipt", "receipt.json", "--floor-map", str(MODULE))
    assert verified.returncode == 0, verified.stderr
    verified = project.run("verify", "receipt", "receipt.json", "--floor-map", str(archived))
    assert verified.returncode == 0, verified.stderr
    published = project.run("publish", "--out", "pub", "--module", str(MODULE))
    assert published.returncode == 0, published.stderr
    document = json.loads((project.dir / "pub" / "floor-map.json").read_text())
    assert document["floor_map_hash"] == loaded["hash"]
    assert document["adapters"] == loaded["entries"]
    again = project.run("refresh", "--feed", "osv.json")
    assert (
        again.returncode == 0 and "no data change" in again.stdout and "up to date" in again.stdout
    )


def test_the_bernstein_template_refuses_advisories_naming_the_adapter(project: Project) -> None:
    project.feed("osv.json", FEED)
    before = project.module.read_bytes()
    done = project.run("refresh", "--feed", "osv.json", "--template", "bernstein", "--write")
    line = one_error_line(done)
    assert "bernstein template holds floors only: 'aider' carries advisories" in line
    assert project.module.read_bytes() == before


def test_an_invalid_schema_3_feed_is_refused_with_file_and_json_path(project: Project) -> None:
    bad = json.loads(json.dumps(FEED))
    bad["adapters"]["claude"]["advisories"][0]["affected"][0]["fixed"] = "1.4"  # not SemVer
    bad["adapters"]["claude"]["advisories"][0]["summary"] = 'x"); import os; ("'
    project.feed("bad.json", bad)
    done = project.run("validate", "bad.json")
    assert done.returncode == 1
    assert (
        "bad.json: $.adapters.claude.advisories[0].affected[0].fixed: '1.4' is not a valid SemVer"
        in done.stderr
    )
    assert (
        "bad.json: $.adapters.claude.advisories[0].summary: contains a double quote" in done.stderr
    )
    before = project.module.read_bytes()
    refused = project.write("bad.json")
    assert "bad.json: $.adapters.claude.advisories[0]" in one_error_line(refused)
    assert project.module.read_bytes() == before


def test_hostile_but_valid_text_is_written_as_an_inert_literal(project: Project) -> None:
    summary = "'); __import__('os').system('touch pwned') # {x} ]}"
    feed = v3(
        claude={
            "ecosystem": "npm",
            "advisories": [advisory("GHSA-1", {"introduced": "0"}, summary=summary)],
        }
    )
    project.feed("osv.json", feed)
    assert project.write("osv.json").returncode == 0
    loaded = project.runtime_map()
    assert loaded["entries"]["claude"]["advisories"][0]["summary"] == summary
    # Importing the module runs nothing.
    subprocess.run([sys.executable, str(project.module)], check=True, cwd=project.dir)
    assert not (project.dir / "pwned").exists()


# --- merging ------------------------------------------------------------------------------------


def test_a_v1_floor_and_v3_advisories_merge_into_one_entry(project: Project) -> None:
    project.feed(
        "v1.json",
        {
            "schema_version": 1,
            "adapters": {
                "claude": {"min_safe_version": "1.0.30", "advisory_id": "BSA-9", "note": "n"}
            },
        },
    )
    project.feed("v3.json", v3(claude={"ecosystem": "npm", "advisories": [BACKPORT]}))
    done = project.write("v1.json", "v3.json")
    assert done.returncode == 0, done.stderr
    claude = project.runtime_map()["entries"]["claude"]
    assert (claude["ecosystem"], claude["min_safe_version"]) == ("npm", "1.0.30")
    assert [a["id"] for a in claude["advisories"]] == ["GHSA-aaaa-bbbb-cccc"]


def test_advisories_of_two_feeds_union_by_alias(project: Project) -> None:
    cve = advisory("CVE-2025-1234", versions=["5.0.0"])
    project.feed("a.json", v3(claude={"ecosystem": "npm", "advisories": [BACKPORT]}))
    project.feed("b.json", v3(claude={"ecosystem": "npm", "advisories": [cve]}))
    assert project.write("a.json", "b.json").returncode == 0
    (merged,) = project.runtime_map()["entries"]["claude"]["advisories"]
    assert merged["id"] == "GHSA-aaaa-bbbb-cccc" and merged["versions"] == ["3.0.0", "5.0.0"]


def test_two_feeds_stating_different_ecosystems_are_refused(project: Project) -> None:
    # (an adapter the catalog does not know: each feed's word is all there is)
    project.feed("a.json", v3(acme={"ecosystem": "npm", "advisories": []}))
    project.feed("b.json", v3(acme={"ecosystem": "PyPI", "advisories": []}))
    before = project.module.read_bytes()
    line = one_error_line(project.write("a.json", "b.json"))
    assert "acme: feeds state different ecosystems (a.json says npm, b.json says PyPI)" in line
    assert project.module.read_bytes() == before


def test_a_v1_floor_that_is_not_semver_is_refused_beside_a_v3_feed(project: Project) -> None:
    project.feed(
        "v1.json",
        {
            "schema_version": 1,
            "adapters": {
                "claude": {"min_safe_version": "1.0", "advisory_id": "BSA-9", "note": "n"}
            },
        },
    )
    project.feed("v3.json", v3(claude={"ecosystem": "npm", "advisories": []}))
    line = one_error_line(project.write("v1.json", "v3.json"))
    assert "v1.json: $.adapters.claude.min_safe_version: '1.0' is not a valid SemVer" in line


def test_a_v1_floor_of_an_npm_cli_must_be_semver_even_alone(project: Project) -> None:
    # claude is an npm CLI: the runtime compares its versions by SemVer, so a floor that is
    # no SemVer version could never be applied; refresh says so instead of writing it.
    floor_of = {"min_safe_version": "1.0", "advisory_id": "BSA-9", "note": "n"}
    project.feed("v1.json", {"schema_version": 1, "adapters": {"claude": floor_of}})
    before = project.module.read_bytes()
    line = one_error_line(project.write("v1.json"))
    assert "v1.json: $.adapters.claude.min_safe_version: '1.0' is not a valid SemVer" in line
    assert "claude is an npm CLI" in line
    assert project.module.read_bytes() == before
    # The same floor for a PyPI CLI is a PEP 440 version, as schema 1 always meant.
    project.feed("aider.json", {"schema_version": 1, "adapters": {"aider": floor_of}})
    assert project.write("aider.json").returncode == 0


def test_a_feed_stating_another_ecosystem_for_a_catalogued_cli_is_refused(
    project: Project,
) -> None:
    # claude is an npm CLI in floorguard's catalog; the runtime compares its versions by
    # SemVer whatever a feed says, so a feed calling it PyPI is refused, not half-believed.
    project.feed("v3.json", v3(claude={"ecosystem": "PyPI", "advisories": []}))
    before = project.module.read_bytes()
    line = one_error_line(project.write("v3.json"))
    assert "v3.json: $.adapters.claude.ecosystem: claude is an npm CLI" in line
    assert "not 'PyPI'" in line
    assert project.module.read_bytes() == before
    # An adapter the catalog does not know takes the ecosystem its feed states.
    project.feed("goose.json", v3(goose={"ecosystem": "npm", "advisories": []}))
    assert project.write("goose.json").returncode == 0


# --- downgrades ---------------------------------------------------------------------------------


def with_backport(*spans: dict[str, str], versions: list[str] | None = None) -> dict[str, Any]:
    changed = {
        **BACKPORT,
        "affected": list(spans),
        "versions": versions if versions is not None else ["3.0.0"],
    }
    return v3(claude={"ecosystem": "npm", "advisories": [changed]})


NARROWINGS = {
    "advisory removed": v3(claude={"ecosystem": "npm", "advisories": []}),
    "fixed lowered": with_backport(
        {"introduced": "0", "fixed": "1.4.6"}, {"introduced": "2.0.0", "last_affected": "2.1.2"}
    ),
    "introduced raised": with_backport(
        {"introduced": "1.0.0", "fixed": "1.4.7"}, {"introduced": "2.0.0", "last_affected": "2.1.2"}
    ),
    "last_affected to fixed": with_backport(
        {"introduced": "0", "fixed": "1.4.7"}, {"introduced": "2.0.0", "fixed": "2.1.2"}
    ),
    "listed version removed": with_backport(
        {"introduced": "0", "fixed": "1.4.7"},
        {"introduced": "2.0.0", "last_affected": "2.1.2"},
        versions=[],
    ),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = Project(tmp_path_factory.mktemp("v3"))
    project.feed("osv.json", v3(claude={"ecosystem": "npm", "advisories": [BACKPORT]}))
    done = project.write("osv.json")
    assert done.returncode == 0, done.stderr
    return project.root


def copy_of(written: Path, tmp_path: Path) -> Project:
    shutil.copytree(written, tmp_path / "copy")
    project = Project.__new__(Project)
    project.root, project.dir, project.state = (
        tmp_path / "copy",
        tmp_path / "copy" / "project",
        tmp_path / "copy" / "state",
    )
    return project


def chain(project: Project) -> str:
    done = project.run("chain", "export")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("case", sorted(NARROWINGS))
def test_narrowing_an_advisory_is_refused_without_allow_downgrade(
    case: str, written: Path, tmp_path: Path
) -> None:
    project = copy_of(written, tmp_path)
    project.feed("narrow.json", NARROWINGS[case])
    before = (
        project.module.read_bytes(),
        (project.dir / "receipt.json").read_bytes(),
        chain(project),
    )
    line = one_error_line(project.write("narrow.json"))
    assert "refusing a downgrade" in line
    assert ("removes advisory" if case == "advisory removed" else "narrows advisory") in line
    assert "GHSA-aaaa-bbbb-cccc of claude" in line
    assert (
        project.module.read_bytes(),
        (project.dir / "receipt.json").read_bytes(),
        chain(project),
    ) == before

    allowed = project.write("narrow.json", extra=("--allow-downgrade",))
    assert allowed.returncode == 0, allowed.stderr
    assert "downgrade (allowed)" in allowed.stdout
    receipt = project.receipt()
    assert receipt["downgrade"] is True and receipt["downgrade_allowed"] is True
    named = receipt["diff"]["advisories"]
    expected = {"adapter": "claude", "id": "GHSA-aaaa-bbbb-cccc"}
    assert named["removed" if case == "advisory removed" else "changed"] == [expected]
    assert receipt["new_floor_map_hash"] == project.runtime_map()["hash"]


def test_widening_an_advisory_is_not_a_downgrade(written: Path, tmp_path: Path) -> None:
    project = copy_of(written, tmp_path)
    project.feed(
        "wide.json",
        with_backport(
            {"introduced": "0", "fixed": "1.5.0"},
            {"introduced": "2.0.0"},
            versions=["3.0.0", "3.0.1"],
        ),
    )
    done = project.write("wide.json")
    assert done.returncode == 0, done.stderr
    assert "~ claude advisory GHSA-aaaa-bbbb-cccc" in done.stdout
    receipt = project.receipt()
    assert receipt["downgrade"] is False
    assert receipt["diff"]["advisories"]["changed"] == [
        {"adapter": "claude", "id": "GHSA-aaaa-bbbb-cccc"}
    ]


def test_the_dry_run_names_advisories_added_removed_and_changed(
    written: Path, tmp_path: Path
) -> None:
    project = copy_of(written, tmp_path)
    project.feed(
        "next.json",
        v3(
            claude={
                "ecosystem": "npm",
                "advisories": [
                    {**BACKPORT, "summary": "Restated."},
                    advisory("GHSA-5555-6666-7777", versions=["9.9.9"]),
                ],
            }
        ),
    )
    done = project.run("refresh", "--feed", "next.json")
    assert done.returncode == 0, done.stderr
    assert "+ claude advisory GHSA-5555-6666-7777" in done.stdout
    assert "~ claude advisory GHSA-aaaa-bbbb-cccc" in done.stdout
    as_json = project.run("refresh", "--feed", "next.json", "--json")
    named = json.loads(as_json.stdout)["diff"]["advisories"]
    assert named == {
        "added": [{"adapter": "claude", "id": "GHSA-5555-6666-7777"}],
        "removed": [],
        "changed": [{"adapter": "claude", "id": "GHSA-aaaa-bbbb-cccc"}],
    }
    project.feed("fewer.json", v3(claude={"ecosystem": "npm", "advisories": []}))
    dropped = project.run("refresh", "--feed", "fewer.json", "--json", "--allow-downgrade")
    assert json.loads(dropped.stdout)["diff"]["advisories"]["removed"] == [
        {"adapter": "claude", "id": "GHSA-aaaa-bbbb-cccc"}
    ]


# --- the optional identity group, and read-back with --force ------------------------------------

IDENTITY = {
    "feed_id": "acme/osv",
    "version": 2,
    "published": "2026-01-01T00:00:00Z",
    "expires": "2026-02-01T00:00:00Z",
}


def test_an_expired_schema_3_feed_is_refused_and_a_fresh_one_remembered(project: Project) -> None:
    project.feed("osv.json", {**FEED, **IDENTITY})
    before = project.module.read_bytes()
    late = project.write("osv.json", extra=("--now", "2026-03-01T00:00:00Z"))
    assert "expired" in one_error_line(late)
    assert project.module.read_bytes() == before
    done = project.write("osv.json", extra=("--now", "2026-01-15T00:00:00Z"))
    assert done.returncode == 0, done.stderr
    assert project.receipt()["feeds"][0]["feed_id"] == "acme/osv"
    # Rollback: a lower version of the same feed_id is refused.
    project.feed("old.json", {**FEED, **IDENTITY, "version": 1})
    rolled = project.write("old.json", extra=("--now", "2026-01-15T00:00:00Z"))
    assert "older than version 2" in one_error_line(rolled)


def test_require_signed_needs_the_identity_group_of_a_schema_3_feed(project: Project) -> None:
    assert project.run("keygen", "--out", "keys").returncode == 0
    project.feed("bare.json", FEED)
    project.feed("named.json", {**FEED, **IDENTITY})
    for name in ("bare.json", "named.json"):
        signed = project.run("sign", name, "--signing-key", "keys/signing.key")
        assert signed.returncode == 0, signed.stderr
    common = ("--trusted-keys", "keys/signing.pub", "--require-signed")
    bare = project.run("refresh", "--feed", "bare.json", *common)
    assert "--require-signed needs feed_id, version, published and expires" in one_error_line(bare)
    named = project.run("refresh", "--feed", "named.json", *common, "--now", "2026-01-15T00:00:00Z")
    assert named.returncode == 0, named.stderr


def test_a_hand_edited_extended_block_is_caught_and_force_overwrites_it(project: Project) -> None:
    project.feed("osv.json", FEED)
    assert project.write("osv.json").returncode == 0
    written = project.module.read_text()
    edited = written.replace('"versions": ["3.0.0"]', '"versions": []')
    assert edited != written
    project.module.write_text(edited)
    refused = project.run("refresh", "--feed", "osv.json", "--write")
    assert "edited by hand" in one_error_line(refused)
    forced = project.write("osv.json", extra=("--force",))
    assert forced.returncode == 0, forced.stderr
    assert (
        project.module.read_text().replace("FLOOR_MAP_VERSION = 2", "FLOOR_MAP_VERSION = 1")
        == written
    )
    assert project.receipt()["forced"] is True
