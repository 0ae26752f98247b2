"""``floorctl publish``: the floor map as signed canonical JSON, and a host that picks it up."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from feedserver import floorctl, floorctl_here, new_key
from hosts import Host, floor, map_module

from floorguard._base._canonical import canonical_bytes
from floorguard._base._time import parse_ts
from floorguard._crypto import dsse
from floorguard._maps import published_map
from floorguard._maps.map_model import entries_hash

PRINT_HASH = "import floorguard; print(floorguard.FLOOR_MAP_HASH)"


def publish(
    module: Path, out: Path, publisher: tuple[Path, Path], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``floorctl publish`` of ``module`` into ``out``, signed by the test publisher."""
    return floorctl_here(
        "publish", "--out", str(out), "--module", str(module), "--signing-key",
        str(publisher[0]), home=tmp_path / "home",
    )  # fmt: skip


@pytest.fixture
def publisher(tmp_path: Path) -> tuple[Path, Path]:
    _, private, public = new_key(tmp_path / "publisher")
    return private, public


def test_publish_writes_canonical_json_and_a_signature_over_its_bytes(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    entries = {"aider": floor("0.60.0"), "codex": floor("1.2.0", "GHSA-jfh8-c2jp-5v3q")}
    module = tmp_path / "floor_map.py"
    module.write_text(map_module(entries, version=7))
    out = tmp_path / "site"
    done = floorctl_here(
        "publish",
        "--out",
        str(out),
        "--module",
        str(module),
        "--signing-key",
        str(publisher[0]),
        "--expires-in",
        "10",
        "--json",
        home=tmp_path / "home",
    )
    assert done.returncode == 0, done.stderr
    data = (out / "floor-map.json").read_bytes()
    document = json.loads(data)
    assert set(document) == {
        "schema_version",
        "floor_map_hash",
        "map_version",
        "expires",
        "adapters",
    }
    assert canonical_bytes(document) == data
    assert document["floor_map_hash"] == entries_hash(entries)
    assert document["map_version"] == 7
    assert document["adapters"] == entries
    report = json.loads(done.stdout)
    assert parse_ts(document["expires"]) == parse_ts(report["expires"])
    envelope = dsse.parse_envelope((out / "floor-map.json.dsse").read_bytes())
    assert envelope.payload == data
    assert envelope.payload_type == published_map.PAYLOAD_TYPE


def test_publish_refuses_a_hand_edited_module(tmp_path: Path, publisher: tuple[Path, Path]) -> None:
    module = tmp_path / "floor_map.py"
    module.write_text(map_module({"aider": floor("0.60.0")}, stated_hash="sha256:" + "1" * 64))
    done = publish(module, tmp_path / "site", publisher, tmp_path)
    assert done.returncode == 1
    assert "tampered" in done.stderr
    assert not (tmp_path / "site").exists()


def test_publish_refuses_a_module_without_a_map(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    module = tmp_path / "floor_map.py"
    module.write_text("# floor-map:begin\n# floor-map:end\n")
    done = publish(module, tmp_path / "site", publisher, tmp_path)
    assert done.returncode == 1
    assert "no floor-map entries" in done.stderr


@pytest.mark.parametrize(
    "trick", ["coding cookie", "both layouts", "annotation runs", "annotation not the template's"]
)
def test_publish_refuses_a_module_the_gate_would_refuse(
    tmp_path: Path, publisher: tuple[Path, Path], trick: str
) -> None:
    # publish signs what the gate reads of a host's module, and nothing the gate refuses:
    # imported, each of these is not the block read as data.
    text = map_module({"aider": floor("0.60.0")})
    if trick == "coding cookie":
        text = "# -*- coding: latin-1 -*-\n" + text
    elif trick == "both layouts":
        second = "ADAPTER_MIN_SAFE_VERSIONS: dict = {}\n"
        text = text.replace("# floor-map:end", second + "# floor-map:end")
    elif trick == "annotation runs":
        text = text.replace("FLOOR_MAP_VERSION = ", "FLOOR_MAP_VERSION: print('ran') = ")
    else:
        text = text.replace("FLOOR_MAP_VERSION = ", "FLOOR_MAP_VERSION: float = ")
    module = tmp_path / "floor_map.py"
    module.write_text(text)
    done = publish(module, tmp_path / "site", publisher, tmp_path)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr and not (tmp_path / "site").exists(), done.stderr


@pytest.mark.parametrize("stated", [" 0.50.1", "0.50.1\n", "0.50.0_1", "latest"])
def test_publish_refuses_a_floor_the_gate_cannot_judge(
    tmp_path: Path, publisher: tuple[Path, Path], stated: str
) -> None:
    # (the gate would refuse every aider spawn, unable to judge; no feed states such a floor)
    module = tmp_path / "floor_map.py"
    module.write_text(map_module({"aider": floor(stated), "claude": floor("1.0.20")}))
    done = publish(module, tmp_path / "site", publisher, tmp_path)
    assert done.returncode == 1, done.stdout
    assert "not a valid PEP 440 version" in done.stderr and "aider" in done.stderr, done.stderr
    assert not (tmp_path / "site").exists()


def test_publish_takes_a_bernstein_module_as_the_gate_reads_it(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    from floorctl.render_templates import load_template, render_block

    entries = {"aider": floor("0.60.0")}
    module = tmp_path / "adapter_advisories.py"
    block = render_block(load_template("bernstein"), entries, map_version=7)
    module.write_text(f"# floor-map:begin\n{block}# floor-map:end\n")
    done = publish(module, tmp_path / "site", publisher, tmp_path)
    assert done.returncode == 0, done.stderr
    parsed = published_map.parse((tmp_path / "site" / "floor-map.json").read_bytes(), "m")
    assert (parsed.floor_map_hash, parsed.map_version) == (entries_hash(entries), 7)


def test_a_published_map_round_trips_into_a_host(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    host = Host(tmp_path / "host", {"aider": floor("0.50.0")})  # built-in map, version 1
    newer = {"aider": floor("0.60.0"), "goose": floor("1.0.0")}
    module = tmp_path / "release" / "floor_map.py"
    module.parent.mkdir()
    module.write_text(map_module(newer, version=2))
    out = tmp_path / "site"
    done = floorctl(
        "publish",
        "--out",
        str(out),
        "--module",
        str(module),
        "--signing-key",
        str(publisher[0]),
        home=tmp_path / "home",
    )
    assert done.returncode == 0, done.stderr
    run = host.python(
        "-c",
        PRINT_HASH,
        FLOORGUARD_FLOOR_MAP=str(out / "floor-map.json"),
        FLOORGUARD_TRUSTED_KEYS=str(publisher[1]),
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == entries_hash(newer)
    assert run.stderr == ""


def test_refuses_to_publish_an_older_map_over_a_newer_one(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    # Hosts keep the highest version they took: an older map published over it would be
    # refused by all of them, which silently puts them back on their built-in map.
    newer, older = tmp_path / "newer.py", tmp_path / "older.py"
    newer.write_text(map_module({"aider": floor("0.70.0")}, version=8))
    older.write_text(map_module({"aider": floor("0.60.0")}, version=7))
    out = tmp_path / "site"
    assert publish(newer, out, publisher, tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    refused = publish(older, out, publisher, tmp_path)
    assert refused.returncode == 1
    assert "is map version 8; publishing version 7 over it would roll hosts back" in (
        refused.stderr
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    forced = floorctl_here(
        "publish", "--out", str(out), "--module", str(older), "--signing-key",
        str(publisher[0]), "--allow-downgrade", home=tmp_path / "home",
    )  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "floor-map.json").read_bytes())["map_version"] == 7


def test_refuses_another_map_of_the_same_version_but_republishes_the_same_map(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    first, other = tmp_path / "first.py", tmp_path / "other.py"
    first.write_text(map_module({"aider": floor("0.70.0")}, version=8))
    other.write_text(map_module({"aider": floor("0.71.0")}, version=8))
    out = tmp_path / "site"
    assert publish(first, out, publisher, tmp_path).returncode == 0
    refused = publish(other, out, publisher, tmp_path)
    assert refused.returncode == 1
    assert "another map of the same version 8" in refused.stderr
    # The same map again (a new expiry, say) is what a scheduled publish does: allowed.
    again = publish(first, out, publisher, tmp_path)
    assert again.returncode == 0, again.stderr


def test_publishes_over_a_damaged_file(tmp_path: Path, publisher: tuple[Path, Path]) -> None:
    module = tmp_path / "floor_map.py"
    module.write_text(map_module({"aider": floor("0.70.0")}, version=3))
    out = tmp_path / "site"
    out.mkdir()
    (out / "floor-map.json").write_text("not a map")
    done = publish(module, out, publisher, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "floor-map.json").read_bytes())["map_version"] == 3


@pytest.mark.parametrize("version", [0, 1], ids=["below the built-in map", "beside it"])
def test_publishing_a_map_hosts_would_set_aside_for_their_built_in_one_warns(
    tmp_path: Path, publisher: tuple[Path, Path], version: int
) -> None:
    # A host's own map starts at version 0 and its first refresh makes it 1, the version the
    # built-in map has: hosts would keep the built-in map, saying so only on their stderr.
    module = tmp_path / "floor_map.py"
    module.write_text(map_module({"codex": floor("0.5.0")}, version=version))
    done = floorctl_here(
        "publish", "--out", str(tmp_path / "site"), "--module", str(module), "--signing-key",
        str(publisher[0]), "--json", home=tmp_path / "home",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [warning] = json.loads(done.stdout)["warnings"]
    assert "will not use this map" in warning and f"map version {version} is" in warning
    assert f"floorctl: warning: {warning}" in done.stderr


def test_publishing_a_map_above_the_built_in_one_does_not_warn(
    tmp_path: Path, publisher: tuple[Path, Path]
) -> None:
    module = tmp_path / "floor_map.py"
    module.write_text(map_module({"codex": floor("0.5.0")}, version=2))
    done = floorctl_here(
        "publish", "--out", str(tmp_path / "site"), "--module", str(module), "--signing-key",
        str(publisher[0]), "--json", home=tmp_path / "home",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["warnings"] == []
    assert "warning" not in done.stderr
