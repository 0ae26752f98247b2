"""Map entries naming their package (``package``, ``kind``): names checked strictly per
ecosystem, one entry per package, the hash of maps without them unchanged, the rendered
module data-only with the new strings, and ``import osv`` mapping the packages that
feeds watch (the real GHSA-6xpm-ggf7-wc3p record for mcp-remote)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl

from floorctl import feeds, osv, osv_packages
from floorctl.render_templates import load_template, render_block
from floorguard._maps import map_model, packages
from floorguard.errors import FloorMapError


def _entry(**fields: Any) -> dict[str, Any]:
    return {"ecosystem": "npm", "advisories": [], "waivers": [], **fields}


@pytest.mark.parametrize(
    ("ecosystem", "name", "shown"),
    [
        ("npm", "MCP-Remote", "lower case"),
        ("npm", "mcp-rem\u043ete", "not ASCII"),  # Cyrillic o
        ("npm", "mcp remote", "not an npm package name"),
        ("npm", "@scope/", "not an npm package name"),
        ("npm", "@a/b/c", "not an npm package name"),
        ("npm", ".hidden", "not an npm package name"),
        ("npm", "_private", "not an npm package name"),
        ("npm", "node_modules", "not an npm package name"),
        ("npm", "x" * 215, "1 to 214"),
        ("PyPI", "Mcp_Server.Fetch", "its normal form is 'mcp-server-fetch'"),
        ("PyPI", "mcp--server", "PEP 503"),
        ("PyPI", "-mcp", "PEP 503"),
        ("PyPI", "mcp\uff0dserver", "not ASCII"),  # a full-width hyphen
        ("cargo", "serde", "ecosystems npm and PyPI"),
    ],
)
def test_package_names_are_refused_unless_in_their_one_spelling(
    ecosystem: str, name: str, shown: str
) -> None:
    problem = packages.package_problem(ecosystem, name)
    assert problem is not None and shown in problem, problem
    with pytest.raises(FloorMapError, match=r"package|ecosystem"):
        map_model.from_entries({"x": _entry(ecosystem=ecosystem, package=name, kind="mcp-server")})


@pytest.mark.parametrize(
    "name", ["mcp-remote", "@modelcontextprotocol/server-filesystem", "a.b_c~d"]
)
def test_valid_npm_names_are_accepted(name: str) -> None:
    assert packages.npm_name_problem(name) is None


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"package": "mcp-remote"}, "package and kind come together"),
        ({"kind": "mcp-server"}, "package and kind come together"),
        ({"package": "mcp-remote", "kind": "plugin"}, "kind must be one of"),
        ({"package": "mcp-remote", "kind": None}, "kind must be one of"),
        ({"package": 7, "kind": "library"}, "is a string"),
    ],
)
def test_package_and_kind_are_checked_together(fields: dict[str, Any], shown: str) -> None:
    with pytest.raises(FloorMapError, match=shown):
        map_model.from_entries({"x": _entry(**fields)})


def test_a_package_needs_an_ecosystem() -> None:
    waiver = {"id": "W-1", "version": "1.0.0", "advisories": ["floor"], "reason": "r",
              "approved_by": "a", "expires": "2030-01-01T00:00:00Z"}  # fmt: skip
    entry = {"advisories": [], "waivers": [waiver], "package": "x", "kind": "library"}
    with pytest.raises(FloorMapError, match="with its ecosystem"):
        map_model.from_entries({"x": entry})


def test_one_package_belongs_to_one_entry() -> None:
    twice = {
        "a": _entry(package="mcp-remote", kind="mcp-server"),
        "b": _entry(package="mcp-remote", kind="mcp-server"),
    }
    with pytest.raises(FloorMapError, match="named by two entries"):
        map_model.from_entries(twice)
    stolen = {"evil": _entry(package="@anthropic-ai/claude-code", kind="agent")}
    with pytest.raises(FloorMapError, match="which is claude's"):
        map_model.from_entries(stolen)
    pypi = {
        "a": _entry(ecosystem="PyPI", package="aider-chat", kind="agent"),
    }
    with pytest.raises(FloorMapError, match="aider's"):
        map_model.from_entries(pypi)
    # A catalogued adapter may name its own package.
    own = map_model.from_entries(
        {"claude": _entry(package="@anthropic-ai/claude-code", kind="agent")}
    )
    assert own["claude"].package == "@anthropic-ai/claude-code"


def test_the_package_is_hashed_and_maps_without_one_keep_their_hash() -> None:
    bare = {"mcp-remote": _entry()}
    named = {"mcp-remote": _entry(package="mcp-remote", kind="mcp-server")}
    library = {"mcp-remote": _entry(package="mcp-remote", kind="library")}
    hashes = {map_model.entries_hash(m) for m in (bare, named, library)}
    assert len(hashes) == 3
    assert map_model.to_entries(map_model.from_entries(bare)) == bare


def test_the_index_finds_map_packages_beside_the_catalogue() -> None:
    floor_map = map_model.from_entries(
        {
            "mcp-remote": _entry(package="mcp-remote", kind="mcp-server"),
            "fetch": _entry(ecosystem="PyPI", package="mcp-server-fetch", kind="mcp-server"),
        }
    )
    index = packages.index_of(floor_map)
    assert index.owner("npm", "mcp-remote") == "mcp-remote"
    assert index.owner("npm", "MCP-Remote") is None  # npm names compare exactly
    assert index.owner("PyPI", "MCP_Server.Fetch") == "fetch"  # PyPI ones normalised
    assert index.owner("npm", "@anthropic-ai/claude-code") == "claude"
    assert packages.index_of(floor_map) is index


@pytest.mark.parametrize(
    "hostile",
    [
        'x"; import os; os.system("id"); "',
        "x\nFLOOR_MAP_HASH = 'sha256:0'",
        "{{ entries }}",
        "x\\",
    ],
)
def test_the_rendered_module_stays_data_when_a_package_string_is_hostile(hostile: str) -> None:
    """The map refuses such a name before rendering; rendered directly, the block is
    still only literals that read back to the data (the ast gate)."""
    with pytest.raises(FloorMapError):
        map_model.from_entries({"x": _entry(package=hostile, kind="library")})
    block = render_block(
        load_template("floorguard"),
        {"x": _entry(package="mcp-remote", kind="mcp-server")},
        map_version=1,
    )
    assert '"package": "mcp-remote"' in block and '"kind": "mcp-server"' in block
    with pytest.raises(Exception, match="package"):
        render_block(
            load_template("floorguard"),
            {"x": _entry(package=hostile, kind="mcp-server")},
            map_version=1,
        )


# ---------------------------------------------------------------------------- feeds


def _feed(entry: dict[str, Any]) -> bytes:
    return json.dumps({"schema_version": 3, "adapters": {"mcp-remote": entry}}).encode()


def test_a_v3_feed_carries_the_package_into_the_map() -> None:
    entry = {"ecosystem": "npm", "package": "mcp-remote", "kind": "mcp-server", "advisories": []}
    feed = feeds.parse_feed(_feed(entry), "feed.json")
    found = feed.floor_map["mcp-remote"]
    assert (found.package, found.kind, found.ecosystem) == ("mcp-remote", "mcp-server", "npm")


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"package": "MCP-Remote", "kind": "mcp-server"}, "lower case"),
        ({"package": "mcp-remote"}, "give all of package, kind, or none"),
        ({"package": "mcp-remote", "kind": "plugin"}, "kind must be one of"),
        ({"package": "mcp-rem\u043ete", "kind": "mcp-server"}, "not ASCII"),
    ],
)
def test_a_v3_feed_with_a_bad_package_is_refused_at_its_path(
    fields: dict[str, Any], shown: str
) -> None:
    entry = {"ecosystem": "npm", "advisories": [], **fields}
    with pytest.raises(feeds.FeedError) as raised:
        feeds.parse_feed(_feed(entry), "feed.json")
    assert any(shown in message for _, _, message in raised.value.problems), raised.value


# ---------------------------------------------------------------------------- import osv

GHSA_MCP_REMOTE = {
    "schema_version": "1.4.0",
    "id": "GHSA-6xpm-ggf7-wc3p",
    "modified": "2025-07-09T18:08:44Z",
    "published": "2025-07-09T15:30:44Z",
    "aliases": ["CVE-2025-6514"],
    "summary": "mcp-remote exposed to OS command injection via untrusted MCP server connections",
    "details": "mcp-remote is exposed to OS command injection when connecting to untrusted MCP "
    "servers due to crafted input from the authorization_endpoint response URL",
    "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:H/I:H/A:H"}],
    "affected": [
        {
            "package": {"ecosystem": "npm", "name": "mcp-remote"},
            "ranges": [
                {"type": "ECOSYSTEM", "events": [{"introduced": "0.0.5"}, {"fixed": "0.1.16"}]}
            ],
        }
    ],
    "references": [
        {"type": "ADVISORY", "url": "https://nvd.nist.gov/vuln/detail/CVE-2025-6514"},
        {"type": "PACKAGE", "url": "https://github.com/geelen/mcp-remote"},
    ],
    "database_specific": {"cwe_ids": ["CWE-78"], "severity": "CRITICAL", "github_reviewed": True},
}


def _import(package_map: osv_packages.PackageMap) -> dict[str, Any]:
    item = ("GHSA-6xpm-ggf7-wc3p.json", json.dumps(GHSA_MCP_REMOTE).encode())
    return osv.import_records([item], package_map, skip_invalid=False).feed


def test_the_ghsa_record_is_skipped_until_mcp_remote_is_watched() -> None:
    assert _import(osv.package_map()) == {"schema_version": 3, "adapters": {}}


def test_watching_a_feed_imports_the_ghsa_record_with_its_package() -> None:
    watched = feeds.parse_feed(
        _feed(
            {"ecosystem": "npm", "package": "mcp-remote", "kind": "mcp-server", "advisories": []}
        ),
        "watch.json",
    )
    feed = _import(osv.package_map((), osv_packages.watched_packages([watched])))
    entry = feed["adapters"]["mcp-remote"]
    assert (entry["ecosystem"], entry["package"], entry["kind"]) == (
        "npm",
        "mcp-remote",
        "mcp-server",
    )
    [advisory] = entry["advisories"]
    assert advisory["id"] == "GHSA-6xpm-ggf7-wc3p" and advisory["aliases"] == ["CVE-2025-6514"]
    assert advisory["affected"] == [{"introduced": "0.0.5", "fixed": "0.1.16"}]
    # What the import wrote is a valid feed whose map refuses 0.1.15 and permits 0.1.16.
    floor_map = feeds.parse_feed(osv.feed_bytes(feed, "out.json"), "out.json").floor_map
    from floorguard._maps import verdict

    assert verdict.assess(floor_map["mcp-remote"], "0.1.15", at=None).unsafe
    assert not verdict.assess(floor_map["mcp-remote"], "0.1.16", at=None).unsafe


def test_a_package_option_names_the_entry_and_its_kind() -> None:
    feed = _import(osv.package_map(("npm:mcp-remote=bridge:mcp-server",)))
    assert feed["adapters"]["bridge"]["package"] == "mcp-remote"
    assert feed["adapters"]["bridge"]["kind"] == "mcp-server"
    plain = _import(osv.package_map(("npm:mcp-remote=bridge",)))
    assert plain["adapters"]["bridge"]["kind"] == "library"


def test_the_command_line_takes_watch_and_refuses_a_bad_kind(tmp_path: Path) -> None:
    (tmp_path / "osv").mkdir()
    (tmp_path / "osv" / "GHSA-6xpm-ggf7-wc3p.json").write_text(json.dumps(GHSA_MCP_REMOTE))
    (tmp_path / "watch.json").write_bytes(
        _feed({"ecosystem": "npm", "package": "mcp-remote", "kind": "mcp-server", "advisories": []})
    )
    done = floorctl(
        "import", "osv", "osv", "--watch", "watch.json", "--out", "out.json",
        cwd=tmp_path, state=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["adapters"]["mcp-remote"]["package"] == "mcp-remote"
    bad = floorctl(
        "import", "osv", "osv", "--package", "npm:mcp-remote=x:plugin", "--out", "o.json",
        cwd=tmp_path, state=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and "the kind must be one of" in bad.stderr


# ---------------------------------------------------------------------------- refresh


def test_merging_feeds_keeps_one_package_and_refuses_two() -> None:
    from floorctl import merge

    named = map_model.from_entries({"mcp-remote": _entry(package="mcp-remote", kind="mcp-server")})
    bare = map_model.from_entries({"mcp-remote": _entry()})
    merged = merge.merge([("a.json", named), ("b.json", bare)]).floor_map
    assert merged["mcp-remote"].package == "mcp-remote"
    other = map_model.from_entries({"mcp-remote": _entry(package="mcp-remote", kind="library")})
    with pytest.raises(merge.MergeConflict, match="feeds name different packages"):
        merge.merge([("a.json", named), ("c.json", other)])


def test_dropping_or_changing_a_package_is_a_downgrade() -> None:
    from floorctl import merge

    named = map_model.from_entries({"mcp-remote": _entry(package="mcp-remote", kind="mcp-server")})
    bare = map_model.from_entries({"mcp-remote": _entry()})
    dropped = merge.diff(named, bare)
    assert any("changes the package of mcp-remote" in d for d in dropped.downgrades), dropped
    assert {"adapter": "mcp-remote", "field": "package", "old": "mcp-remote", "new": None} in (
        dropped.changed
    )
    assert not merge.diff(bare, named).downgrades  # naming a package tracks more: no downgrade
