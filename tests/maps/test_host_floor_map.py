"""A host's own generated floor-map module as the map in force.

Named from code (``floorguard.preflight(..., floor_map=module)``, ``spawn(..., floor_map=)``)
or from the environment (``FLOORGUARD_FLOOR_MAP`` naming a ``.py`` file), the module is
checked against its stated hash exactly as the built-in map is, read with ``ast`` (never
run when only named by the environment), and kept under the per-host rollback state of
published maps. Each test is a real host process and the real floorctl CLI.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl, isolated_env
from hosts import write_script
from probes.native import require_native

from floorguard._maps.active_map import ANNOTATIONS
from floorguard._maps.map_model import entries_hash, floor_map_hash, from_entries

BUILTIN_HASH = "sha256:c4ab55242142977dea5095fd882ad74ea6d57da68a653604ef5587c43346bc5b"

# Run by the host process: import the module the test names (as a host would), then ask.
HOST = r"""
import importlib.util, json, os, sys
import floorguard
request = json.loads(sys.argv[1])
given = request.get("floor_map")
if given == "module":
    spec = importlib.util.spec_from_file_location("host_floor_map", request["module"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    given = module
elif given == "module-whose-file-says-another":
    # __file__ spelled as the module's own path, saying another when asked as text
    class Another(str):
        def __str__(self): return request["other"]
        def __fspath__(self): return request["other"]
        def endswith(self, *args): return request["other"].endswith(*args)
    spec = importlib.util.spec_from_file_location("host_floor_map", request["module"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.__file__ = Another(request["module"])
    given = module
elif given == "module-never-imported":
    import types
    given = types.ModuleType("host_floor_map")
    given.__file__ = request["other"]
elif given == "module-pointing-elsewhere":
    # imported from its file, whose own code then names another as its file
    spec = importlib.util.spec_from_file_location("host_floor_map", request["module"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.__file__ = request["other"]
    given = module
elif given == "dict":
    given = {"claude": {"min_safe_version": "0.0.1"}}
elif given == "path":
    given = request["module"]
elif given == "json":
    import json as given
kwargs = {} if given is None else {"floor_map": given}
try:
    if request.get("spawn"):
        child = floorguard.spawn(request["adapter"], ["--version"], binary=request["binary"],
                                 stdout=-1, text=True, **kwargs)
        child.communicate(timeout=60)
        out = {"started": True}
    else:
        d = floorguard.preflight(request["adapter"], binary=request["binary"], **kwargs)
        out = {"verdict": d.verdict, "reason": d.reason, "hash": d.floor_map_hash}
except floorguard.SpawnRefused as exc:
    d = exc.decision
    out = {"started": False, "message": str(exc), "verdict": d.verdict if d else None,
           "reason": d.reason if d else None, "hash": d.floor_map_hash if d else None}
print(json.dumps(out))
"""


def floor(version: str, advisory: str = "HOST-0001") -> dict[str, str]:
    return {"min_safe_version": version, "advisory_id": advisory, "note": "host floor"}


def module_text(entries: dict[str, Any], *, version: int = 1, stated: str | None = None) -> str:
    """A module in the floorguard layout, as floorctl renders it, with code around the block."""
    return (
        '"""The host\'s floor map."""\n\n'
        "# floor-map:begin\n"
        f"FLOOR_MAP_VERSION = {version}\n"
        f"FLOOR_MAP_HASH = {json.dumps(stated or entries_hash(entries))}\n"
        f"FLOOR_MAP_ENTRIES = {json.dumps(entries, indent=4, sort_keys=True)}\n"
        "# floor-map:end\n"
    )


class HostProject:
    """A host's folder, its state, a claude stand-in (a native program) and its module."""

    def __init__(self, root: Path) -> None:
        require_native()
        self.root = root
        self.state = root / "state"
        self.module = root / "src" / "host" / "floor_map.py"
        self.module.parent.mkdir(parents=True)
        self.bin = root / "bin"
        self.bin.mkdir()

    def claude(self, version: str) -> Path:
        return write_script(self.bin / f"claude-{version}", f"echo '{version} (Claude Code)'")

    def write(self, text: str) -> None:
        self.module.write_text(text)

    def ask(self, version: str, *, floor_map: str | None = "module", spawn: bool = False,
            module: Path | None = None, **env: str) -> dict[str, Any]:  # fmt: skip
        request = {
            "adapter": "claude",
            "binary": str(self.claude(version)),
            "floor_map": floor_map,
            "module": str(module or self.module),
            "spawn": spawn,
            "other": str(self.root / "other_map.py"),
        }
        done = subprocess.run(
            [sys.executable, "-c", HOST, json.dumps(request)],
            capture_output=True,
            text=True,
            cwd=self.root,
            env=isolated_env(self.state, **env),
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout), stderr=done.stderr)

    def by_env(self, version: str, path: Path | None = None, **kw: Any) -> dict[str, Any]:
        return self.ask(version, floor_map=None, FLOORGUARD_FLOOR_MAP=str(path or self.module),
                        **kw)  # fmt: skip

    @property
    def accepted(self) -> dict[str, Any]:
        record = self.state / "floorguard" / "published-map.json"
        return dict(json.loads(record.read_text()))


@pytest.fixture
def host(tmp_path: Path) -> HostProject:
    return HostProject(tmp_path)


HIGH = {"claude": floor("2.0.0")}  # above the built-in 1.0.20: only the host map refuses 1.5.0
HIGH_HASH = entries_hash(HIGH)


# --- what must be refused ---------------------------------------------------------------------


@pytest.mark.parametrize("named_by", ["code", "environment"])
def test_a_hand_edited_block_whose_stated_hash_no_longer_matches_is_refused(
    host: HostProject, named_by: str
) -> None:
    host.write(module_text(HIGH).replace('"2.0.0"', '"1.0.0"'))
    asked = host.ask("1.5.0") if named_by == "code" else host.by_env("1.5.0")
    assert asked["verdict"] == "refuse", asked
    assert "floor map cannot be trusted" in asked["reason"]
    assert "tampered" in asked["reason"] and str(host.module) in asked["reason"]


def test_a_hand_edit_that_restates_the_hash_is_refused_once_the_host_enforced_the_original(
    host: HostProject,
) -> None:
    host.write(module_text(HIGH, version=3))
    assert host.by_env("1.5.0")["verdict"] == "refuse"  # version 3 is now enforced here
    lowered = {"claude": floor("1.0.0")}
    host.write(module_text(lowered, version=3))  # data and hash edited together
    asked = host.by_env("1.5.0")
    assert asked["verdict"] == "refuse", asked
    assert "map_version 3 was accepted on this host as another map" in asked["reason"]
    assert str(host.module) in asked["reason"]


@pytest.mark.parametrize("named_by", ["code", "environment"])
def test_an_older_module_after_a_newer_one_on_the_same_host_is_refused(
    host: HostProject, named_by: str
) -> None:
    def ask() -> dict[str, Any]:
        return host.ask("1.5.0") if named_by == "code" else host.by_env("1.5.0")

    host.write(module_text(HIGH, version=2))
    assert ask()["hash"] == HIGH_HASH
    assert host.accepted["map_version"] == 2  # the published maps' record, not a second one
    host.write(module_text({"claude": floor("1.0.0")}, version=1))
    asked = ask()
    assert asked["verdict"] == "refuse", asked
    assert "map_version 1 is lower than version 2 already accepted on this host" in asked["reason"]


@pytest.mark.parametrize("named_by", ["code", "environment"])
@pytest.mark.parametrize("name", ["Claude", "cl\u0430ude", "clau\u200bde"])
def test_a_module_whose_entry_only_looks_like_an_adapters_name_is_refused(
    host: HostProject, named_by: str, name: str
) -> None:
    # Its stated hash is the hash of what it holds; taken, it would leave claude untracked
    # (permitted by default) while the file reads "claude >= 2.0.0".
    entries = {name: floor("2.0.0")}
    canonical = json.dumps(entries, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    stated = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    host.write(module_text(entries, stated=stated))
    asked = host.ask("1.5.0") if named_by == "code" else host.by_env("1.5.0")
    assert asked["verdict"] == "refuse", asked
    assert "floor map cannot be trusted" in asked["reason"], asked
    assert "not a valid adapter name" in asked["reason"], asked


@pytest.mark.parametrize("where", ["adapters", "fields"])
def test_a_module_whose_literal_states_a_key_twice_is_refused(
    host: HostProject, where: str
) -> None:
    # Python keeps the last of two equal keys; a reader of the file may take the first. The
    # hash states the entry taken (the lax one): what is in force is not what a reader sees.
    lax = {"claude": floor("1.0.0")}
    text = module_text(lax)
    if where == "adapters":
        strict = f'"claude": {json.dumps(floor("2.0.0"))},'
        text = text.replace("FLOOR_MAP_ENTRIES = {", "FLOOR_MAP_ENTRIES = {" + strict, 1)
    else:
        stated = '"min_safe_version": "1.0.0"'
        text = text.replace(stated, '"min_safe_version": "2.0.0", ' + stated, 1)
    assert text != module_text(lax)
    host.write(text)
    asked = host.by_env("1.5.0")
    assert asked["verdict"] == "refuse", asked
    assert "twice" in asked["reason"], asked


@pytest.mark.parametrize(
    ("annotation", "named_by"),
    [("'int'", "code"), ("float", "code"), ("(str)", "code"), ("1", "environment"),
     ("typing.Final", "environment"), ("Final[int]", "environment"),
     ("int | None", "environment")],
)  # fmt: skip
def test_a_map_name_annotated_otherwise_than_its_template_writes_is_refused(
    host: HostProject, annotation: str, named_by: str
) -> None:
    # An annotation is evaluated when the module is imported: code, in the block. Only the
    # template's own (or none) is read as data, by the gate as by floorctl's readers.
    # (Named from code, the module is imported first: only annotations that import.)
    text = module_text(HIGH).replace("FLOOR_MAP_VERSION = ", f"FLOOR_MAP_VERSION: {annotation} = ")
    host.write(text)
    asked = host.ask("1.5.0") if named_by == "code" else host.by_env("1.5.0")
    assert asked["verdict"] == "refuse", asked
    assert "the annotation of FLOOR_MAP_VERSION" in asked["reason"], asked


@pytest.mark.parametrize("name", ["utf8", "UTF8", "u8"])
def test_a_module_declaring_utf8_under_another_of_its_names_is_taken(
    host: HostProject, name: str
) -> None:
    host.write(f"# -*- coding: {name} -*-\n" + module_text(HIGH))
    refused, permitted = host.by_env("1.5.0"), host.by_env("2.0.0")
    assert (refused["verdict"], refused["hash"]) == ("refuse", HIGH_HASH), refused
    assert (permitted["verdict"], permitted["hash"]) == ("permit", HIGH_HASH), permitted


def test_a_module_starting_with_a_byte_order_mark_is_refused_saying_so(host: HostProject) -> None:
    # (as floorctl refuses it: Python skips the mark, the bytes hashed here would hold it)
    host.module.write_bytes(b"\xef\xbb\xbf" + module_text(HIGH).encode())
    asked = host.by_env("2.0.0")
    assert asked["verdict"] == "refuse", asked
    assert "byte order mark" in asked["reason"], asked


@pytest.mark.parametrize(
    "extra",
    ["X = 1\n", "X = 1 \\\n", "import os\n", "'a note'\n", "if True:\n    X = 1\n"],
    ids=["assignment", "continued-onto-the-end-marker", "import", "string", "if"],
)
def test_a_block_holding_anything_but_the_maps_assignments_is_refused(
    host: HostProject, extra: str
) -> None:
    # As floorctl reads a block: the map's names assigned, and nothing else.
    host.write(module_text(HIGH).replace("# floor-map:end", extra + "# floor-map:end"))
    asked = host.by_env("2.0.0")
    assert asked["verdict"] == "refuse", asked
    assert "other than the map's assignments" in asked["reason"], asked


@pytest.mark.parametrize("name", ["FLOOR_MAP_VERSION", "FLOOR_MAP_HASH", "FLOOR_MAP_ENTRIES"])
def test_a_map_name_annotated_in_parentheses_is_refused(host: HostProject, name: str) -> None:
    # ``(NAME): int = 1`` assigns NAME as ``NAME: int = 1`` does; floorctl never writes it
    # and its readers refuse it: the gate too, or one module gets two answers.
    annotation = ANNOTATIONS[name]
    host.write(module_text(HIGH).replace(f"{name} = ", f"({name}): {annotation} = "))
    asked = host.by_env("2.0.0")
    assert asked["verdict"] == "refuse", asked
    assert f"the annotation of {name}" in asked["reason"], asked


def test_the_annotations_the_template_writes_are_taken(host: HostProject) -> None:
    text = module_text(HIGH)
    for name, annotation in (("FLOOR_MAP_VERSION", "int"), ("FLOOR_MAP_HASH", "str"),
                             ("FLOOR_MAP_ENTRIES", "dict[str, dict[str, str]]")):  # fmt: skip
        text = text.replace(f"{name} = ", f"{name}: {annotation} = ")
    host.write(text)
    refused, permitted = host.by_env("1.5.0"), host.by_env("2.0.0")
    assert (refused["verdict"], refused["hash"]) == ("refuse", HIGH_HASH), refused
    assert (permitted["verdict"], permitted["hash"]) == ("permit", HIGH_HASH), permitted


def test_a_module_named_by_the_environment_that_does_not_exist_is_refused_naming_it(
    host: HostProject,
) -> None:
    missing = host.root / "src" / "host" / "no_such_map.py"
    asked = host.by_env("1.5.0", missing)
    assert asked["verdict"] == "refuse", asked
    assert str(missing) in asked["reason"] and "FLOORGUARD_FLOOR_MAP" in asked["reason"]


def test_a_module_named_by_the_environment_that_is_a_folder_is_refused_naming_it(
    host: HostProject,
) -> None:
    folder = host.root / "maps.py"
    folder.mkdir()
    asked = host.by_env("1.5.0", folder)
    assert asked["verdict"] == "refuse", asked
    assert str(folder) in asked["reason"]


def test_a_module_named_by_the_environment_that_is_a_fifo_is_refused_without_blocking(
    host: HostProject,
) -> None:
    fifo = host.root / "floor_map.py"
    os.mkfifo(fifo)  # a read would wait for a writer forever
    asked = host.by_env("1.5.0", fifo)
    assert asked["verdict"] == "refuse", asked
    assert f"{fifo}: not a regular file" in asked["reason"]


@pytest.mark.parametrize(
    "spelling",
    ["trailing space", "trailing slash", "its folder", "upper-case suffix", "no suffix"],
)
def test_a_value_that_does_not_name_a_published_map_json_is_a_module_and_never_falls_back(
    host: HostProject, spelling: str
) -> None:
    # Only a value ending in .json names a published map (which may fall back to the
    # built-in map); anything else the host meant as its own module: read as one, or refused.
    host.write(module_text(HIGH))
    upper = host.module.with_name("FLOOR_MAP.PY")
    upper.symlink_to(host.module.name)
    bare = host.module.with_name("floor_map")
    bare.symlink_to(host.module.name)
    value = {
        "trailing space": f"{host.module} ",
        "trailing slash": f"{host.module}/",
        "its folder": str(host.module.parent),
        "upper-case suffix": str(upper),
        "no suffix": str(bare),
    }[spelling]
    asked = host.ask("1.5.0", floor_map=None, FLOORGUARD_FLOOR_MAP=value)
    assert asked["verdict"] == "refuse", asked
    assert asked["hash"] != BUILTIN_HASH
    assert "stays in force" not in asked["stderr"]
    if spelling == "trailing slash":  # (refused as such, not read as the module it ends)
        assert "ends in a slash" in asked["reason"], asked


def test_a_version_past_what_json_holds_exactly_is_refused_and_never_recorded(
    host: HostProject,
) -> None:
    # Recorded, it would pin this host's rollback record above every map to come.
    host.write(module_text(HIGH, version=2**53))
    asked = host.by_env("2.1.0")
    assert asked["verdict"] == "refuse", asked
    assert (
        f"{host.module}: FLOOR_MAP_VERSION is not a non-negative integer up to" in (asked["reason"])
    )
    assert not (host.state / "floorguard" / "published-map.json").exists()


def test_a_module_named_by_the_environment_is_read_never_run(host: HostProject) -> None:
    ran = host.root / "module-ran"
    host.write(
        f"from pathlib import Path\nPath({str(ran)!r}).write_text('ran')\n" + module_text(HIGH)
    )
    refused, permitted = host.by_env("1.5.0"), host.by_env("2.0.0")
    assert not ran.exists(), "the code outside the block was run"
    assert (refused["verdict"], refused["hash"]) == ("refuse", HIGH_HASH), refused
    assert (permitted["verdict"], permitted["hash"]) == ("permit", HIGH_HASH), permitted


def test_a_module_whose_map_names_are_rebound_outside_the_block_is_refused(
    host: HostProject,
) -> None:
    # Imported, it would hold the empty map; read, the block's: neither may be in force.
    host.write(module_text(HIGH) + "FLOOR_MAP_ENTRIES = {}\n")
    asked = host.by_env("1.5.0")
    assert asked["verdict"] == "refuse" and "assigned twice" in asked["reason"], asked


def test_a_module_without_the_markers_is_refused_as_not_a_floor_map_module(
    host: HostProject,
) -> None:
    text = module_text(HIGH).replace("# floor-map:begin\n", "").replace("# floor-map:end\n", "")
    host.write(text)
    asked = host.by_env("1.5.0")
    assert asked["verdict"] == "refuse", asked
    assert "not a floor-map module" in asked["reason"] and "floor-map:begin" in asked["reason"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("dict", "takes an imported floor-map module, not dict"),
        ("path", "takes an imported floor-map module, not str"),
        ("json", "not a floor-map module"),
        ("module-never-imported", "was not imported from"),
        ("module-pointing-elsewhere", "was not imported from"),
    ],
)
def test_floor_map_given_something_that_is_not_a_floor_map_module_is_refused(
    host: HostProject, given: str, says: str
) -> None:
    host.write(module_text(HIGH))
    # (a lower map in another file, which a module may name as its own)
    (host.root / "other_map.py").write_text(module_text({"claude": floor("0.0.1")}))
    for spawn in (False, True):
        asked = host.ask("2.0.0", floor_map=given, spawn=spawn)
        assert asked["verdict"] == "refuse" and asked.get("started") is not True, asked
        assert says in asked["reason"], asked


def test_a_module_whose_file_name_says_another_when_asked_is_read_by_its_characters(
    host: HostProject,
) -> None:
    host.write(module_text(HIGH))
    (host.root / "other_map.py").write_text(module_text({"claude": floor("0.0.1")}))
    for spawn in (False, True):
        asked = host.ask("1.5.0", floor_map="module-whose-file-says-another", spawn=spawn)
        assert asked["verdict"] == "refuse" and asked.get("started") is not True, asked
        assert asked["hash"] == HIGH_HASH, asked


def test_a_bernstein_block_that_states_no_hash_is_refused(host: HostProject) -> None:
    host.write(
        "# floor-map:begin\nADAPTER_MIN_SAFE_VERSIONS: dict[str, AdapterAdvisory] = {\n"
        '    "claude": AdapterAdvisory(adapter="claude", min_safe_version="2.0.0", '
        'advisory_id="HOST-0001", note="host floor"),\n}\n# floor-map:end\n'
    )
    asked = host.by_env("2.0.0")
    assert asked["verdict"] == "refuse", asked
    assert "states no ADAPTER_FLOOR_MAP_HASH" in asked["reason"]


# --- what is permitted, and what is recorded --------------------------------------------------


@pytest.mark.parametrize("named_by", ["code", "environment"])
def test_the_host_module_is_the_map_in_force_at_and_above_its_floor_and_below_it(
    host: HostProject, named_by: str
) -> None:
    host.write(module_text(HIGH, version=4))
    for version, verdict in (("2.0.0", "permit"), ("2.1.0", "permit"), ("1.5.0", "refuse")):
        asked = host.ask(version) if named_by == "code" else host.by_env(version)
        assert asked["verdict"] == verdict, (version, asked)
        # The receipt names the map in force: the host's, not the built-in one.
        assert asked["hash"] == HIGH_HASH != BUILTIN_HASH
    assert "is below the floor 2.0.0 (HOST-0001)" in asked["reason"]
    assert host.accepted == {"schema_version": 1, "map_version": 4, "floor_map_hash": HIGH_HASH}


def test_spawn_with_the_host_module_starts_nothing_below_its_floor(host: HostProject) -> None:
    host.write(module_text(HIGH))
    assert host.ask("2.0.0", spawn=True)["started"] is True
    refused = host.ask("1.5.0", spawn=True)
    assert refused["started"] is False and refused["verdict"] == "refuse", refused
    assert refused["hash"] == HIGH_HASH


def test_the_module_argument_wins_over_the_environment(host: HostProject) -> None:
    host.write(module_text(HIGH))
    other = host.root / "other.py"
    other.write_text(module_text({"claude": floor("9.0.0")}))
    asked = host.ask("2.0.0", FLOORGUARD_FLOOR_MAP=str(other))
    assert (asked["verdict"], asked["hash"]) == ("permit", HIGH_HASH), asked


def _bernstein(project: HostProject, *refresh: str | Path) -> Path:
    """A bernstein module made by floorctl init and refresh --write; its path."""
    feed = project.root / "feed.json"
    feed.write_text(json.dumps({"schema_version": 1, "adapters": HIGH}))
    bern = project.module.with_name("bern.py")
    for args in (
        ("init", "--module", bern, "--template", "bernstein"),
        ("refresh", "--module", bern, "--feed", feed, "--template", "bernstein", "--write",
         *refresh),
    ):  # fmt: skip
        done = floorctl(*args, cwd=project.root, state=project.state)
        assert done.returncode == 0, done.stdout + done.stderr
    return bern


def test_a_bernstein_module_written_by_floorctl_is_enforced_and_a_hand_edit_refused(
    host: HostProject,
) -> None:
    bern = _bernstein(host)
    assert "AdapterAdvisory(" in bern.read_text()
    assert host.by_env("1.5.0", bern)["verdict"] == "refuse"
    permitted = host.by_env("2.0.0", bern)
    assert (permitted["verdict"], permitted["hash"]) == ("permit", HIGH_HASH), permitted
    bern.write_text(bern.read_text().replace('"2.0.0"', '"1.0.0"'))
    asked = host.by_env("1.5.0", bern)
    assert asked["verdict"] == "refuse" and "tampered" in asked["reason"], asked


def test_the_runtime_cli_checks_a_receipt_against_a_bernstein_module(host: HostProject) -> None:
    envelope = host.root / "update.dsse.json"
    bern = _bernstein(host, "--receipt-out", envelope)
    checked = subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "receipt", str(envelope),
         "--floor-map", str(bern)],
        capture_output=True, text=True, env=isolated_env(host.state), check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert HIGH_HASH in checked.stdout


def test_the_empty_module_floorctl_init_writes_is_in_force_and_tracks_nothing(
    host: HostProject,
) -> None:
    done = floorctl("init", "--module", host.module, cwd=host.root, state=host.state)
    assert done.returncode == 0, done.stderr
    asked = host.by_env("1.5.0")
    assert asked["verdict"] == "untracked", asked
    assert asked["hash"] == floor_map_hash(from_entries({}))


def test_an_auditor_proves_the_host_decisions_against_the_host_map_and_only_that_map(
    host: HostProject,
) -> None:
    feed = host.root / "feed.json"
    feed.write_text(json.dumps({"schema_version": 1, "adapters": HIGH}))
    for args in (
        ("init", "--module", host.module),
        ("refresh", "--module", host.module, "--feed", feed, "--write"),
    ):
        done = floorctl(*args, cwd=host.root, state=host.state)
        assert done.returncode == 0, done.stderr
    assert host.by_env("2.0.0")["verdict"] == "permit"
    assert host.by_env("1.5.0")["verdict"] == "refuse"
    exported = host.root / "slice.jsonl"
    done = floorctl("chain", "export", "--out", exported, cwd=host.root, state=host.state)
    assert done.returncode == 0, done.stderr
    spawns = [
        json.loads(line)["receipt"]
        for line in exported.read_text().splitlines()
        if json.loads(line)["event"] == "adapter.spawn_preflight_receipt"
    ]
    assert [r["verdict"] for r in spawns] == ["permit", "refuse"]
    assert {r["floor_map_hash"] for r in spawns} == {HIGH_HASH}

    def verify(*maps: Path) -> subprocess.CompletedProcess[str]:
        key = host.state / "floorguard" / "chain.key"
        folders = [arg for folder in maps for arg in ("--maps", str(folder))]
        return subprocess.run(
            [sys.executable, "-m", "floorguard", "verify", "chain", str(exported),
             "--key-file", str(key), *folders],
            capture_output=True, text=True, cwd=host.root, env=isolated_env(host.state),
            check=False,
        )  # fmt: skip

    proven = verify(host.module.parent / "maps")  # refresh archives each map it writes
    assert proven.returncode == 0 and "PROVEN" in proven.stdout, proven.stdout + proven.stderr
    # With the built-in maps alone the permit cannot be judged: it pins the host's map.
    unproven = verify()
    assert unproven.returncode == 1, unproven.stdout + unproven.stderr
    assert f"pins floor map {HIGH_HASH}" in unproven.stdout
