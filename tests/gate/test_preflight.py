"""The spawn preflight fails closed, and every decision it returns is already in the chain.

Each test runs a real host process against a private copy of floorguard, with real probe
scripts as the adapters' binaries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hosts import (
    HOST,
    Host,
    calls_while_os_environ_changes,
    floor,
    map_module,
    receipt_in_chain,
    write_script,
)

ALLOWED = {"permit", "warn_override", "untracked"}


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(
        tmp_path, {"aider": floor("0.60.0"), "claude": floor("1.0.20"), "codex": floor("0.60.0")}
    )


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


def codex_binary(bin_dir: Path, version: str) -> str:
    """A native codex (published as one: judged by its --version answer, as the probe's
    tests need; a native aider would be refused as no aider at all)."""
    return str(write_script(bin_dir / "codex", f"echo 'codex-cli {version}'"))


def test_permits_a_version_at_the_floor_and_records_the_permit(host: Host, bin_dir: Path) -> None:
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.60.0"))
    assert result["raised"] is None
    assert result["verdict"] == "permit"
    assert result["detected_by"] == "probe"
    receipt = receipt_in_chain(host, result["receipt_id"])
    assert receipt["verdict"] == "permit"
    assert receipt["version"] == "0.60.0"
    assert receipt["floor"] == "0.60.0"
    assert receipt["detected_by"] == "probe"
    assert receipt["policy"] == "block"
    assert receipt["floor_map_hash"].startswith("sha256:")


def test_refuses_a_below_floor_binary(host: Host, bin_dir: Path) -> None:
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.59.9"))
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] == "refuse"
    assert "below the floor 0.60.0" in result["reason"]
    assert receipt_in_chain(host, result["receipt_id"])["verdict"] == "refuse"


def test_pre_release_of_the_floor_is_below_it(host: Host) -> None:
    result = host.preflight("aider", version="0.60.0rc1")
    assert result["verdict"] == "refuse"


def test_refuses_an_unknown_version(host: Host, bin_dir: Path) -> None:
    binary = write_script(bin_dir / "codex", "echo 'no version here'")
    result = host.preflight("codex", binary=str(binary))
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] == "refuse"
    assert "unknown version" in result["reason"]
    assert receipt_in_chain(host, result["receipt_id"])["version"] is None


def test_refuses_when_the_probe_times_out(host: Host, bin_dir: Path) -> None:
    binary = write_script(bin_dir / "codex", "sleep 30")
    result = host.preflight("codex", binary=str(binary), FLOORGUARD_PROBE_TIMEOUT="0.5")
    assert result["verdict"] == "refuse"
    assert "timed out" in result["reason"] or "timeout" in result["reason"]


def test_refuses_when_the_probe_exits_non_zero(host: Host, bin_dir: Path) -> None:
    binary = write_script(bin_dir / "codex", "echo 'codex-cli 0.70.0'; exit 3")
    assert host.preflight("codex", binary=str(binary))["verdict"] == "refuse"


def test_refuses_ambiguous_version_output(host: Host, bin_dir: Path) -> None:
    binary = write_script(bin_dir / "codex", "echo 'codex-cli 0.70.0 (needs 0.50.0)'")
    assert host.preflight("codex", binary=str(binary))["verdict"] == "refuse"


def test_refuses_a_missing_binary(host: Host, tmp_path: Path) -> None:
    result = host.preflight("aider", binary=str(tmp_path / "nowhere" / "aider"))
    assert result["verdict"] == "refuse"
    assert result["receipt_id"] is not None


def test_refuses_a_tracked_adapter_not_on_path(host: Host, bin_dir: Path) -> None:
    result = host.preflight("aider", PATH=str(bin_dir))
    assert result["verdict"] == "refuse"


def test_refuses_every_tracked_spawn_when_the_floor_map_was_tampered(
    host: Host, bin_dir: Path
) -> None:
    entries = {"codex": floor("0.60.0")}
    good = map_module(entries)
    host.set_map(good.replace('"0.60.0"', '"0.10.0"'))  # data edited, stated hash kept
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.70.0"))
    assert result["verdict"] == "refuse"
    assert "tampered" in result["reason"]


def test_tampered_floor_map_is_not_overridable_by_warn_policy(host: Host, bin_dir: Path) -> None:
    host.set_map(map_module({"codex": floor("0.60.0")}).replace('"0.60.0"', '"0.10.0"'))
    result = host.preflight(
        "codex", binary=codex_binary(bin_dir, "0.70.0"), FLOORGUARD_ADAPTER_FLOOR_POLICY="warn"
    )
    assert result["verdict"] == "refuse"


def test_refuses_when_the_floor_map_module_is_missing_its_data(host: Host) -> None:
    host.set_map("# floor-map:begin\n# floor-map:end\n")
    assert host.preflight("aider", version="1.0.0")["verdict"] == "refuse"


def test_warn_policy_records_an_override_for_a_below_floor_binary(
    host: Host, bin_dir: Path
) -> None:
    result = host.preflight(
        "codex", binary=codex_binary(bin_dir, "0.10.0"), FLOORGUARD_ADAPTER_FLOOR_POLICY="warn"
    )
    assert result["raised"] is None
    assert result["verdict"] == "warn_override"
    receipt = receipt_in_chain(host, result["receipt_id"])
    assert receipt["verdict"] == "warn_override"
    assert receipt["policy"] == "warn"


@pytest.mark.parametrize("value", ["WARN", " warn", "warn ", "warn-only", "block", ""])
def test_policy_strings_other_than_exactly_warn_block(
    host: Host, bin_dir: Path, value: str
) -> None:
    result = host.preflight(
        "codex", binary=codex_binary(bin_dir, "0.10.0"), FLOORGUARD_ADAPTER_FLOOR_POLICY=value
    )
    assert result["verdict"] == "refuse"
    assert result["policy"] == "block"


def test_unset_policy_blocks(host: Host, bin_dir: Path) -> None:
    assert host.preflight("codex", binary=codex_binary(bin_dir, "0.10.0"))["policy"] == "block"


def test_untracked_adapter_is_allowed_and_recorded_with_its_version(
    host: Host, bin_dir: Path
) -> None:
    binary = write_script(bin_dir / "newagent", "echo 'newagent 2.1.0'")
    result = host.preflight("newagent", binary=str(binary))
    assert result["verdict"] == "untracked"
    assert receipt_in_chain(host, result["receipt_id"])["version"] == "2.1.0"


def test_untracked_adapter_with_undetectable_version_is_still_allowed(
    host: Host, bin_dir: Path
) -> None:
    binary = write_script(bin_dir / "newagent", "exit 1")
    result = host.preflight("newagent", binary=str(binary))
    assert result["verdict"] == "untracked"
    assert receipt_in_chain(host, result["receipt_id"])["version"] is None


def test_refuses_an_invalid_adapter_name(host: Host) -> None:
    assert host.preflight("../aider", version="1.0")["verdict"] == "refuse"


def test_caller_stated_version_is_recorded_as_such(host: Host) -> None:
    result = host.preflight("claude", version="1.0.20")
    assert result["verdict"] == "permit"
    assert result["detected_by"] == "caller"


def test_a_stated_version_the_binary_does_not_bear_out_is_refused(
    host: Host, bin_dir: Path
) -> None:
    # The caller's version is a claim about the file judged: a below-floor codex named
    # at 9.9.9 is refused, naming both, and the receipt records what the file is.
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.50.0"), version="9.9.9")
    assert result["verdict"] == "refuse"
    assert "the caller states codex 9.9.9" in result["reason"], result
    assert "is 0.50.0 (probe)" in result["reason"], result
    receipt = receipt_in_chain(host, result["receipt_id"])
    # (recorded as what the file is: the stated version ran nowhere)
    assert (receipt["verdict"], receipt["version"], receipt["detected_by"]) == (
        "refuse", "0.50.0", "probe"
    )  # fmt: skip


def test_a_stated_version_a_binary_on_the_path_does_not_bear_out_is_refused(
    host: Host, bin_dir: Path
) -> None:
    codex_binary(bin_dir, "0.50.0")
    result = host.preflight("codex", version="0.70.0", PATH=f"{bin_dir}:/usr/bin:/bin")
    assert result["verdict"] == "refuse"
    assert "the caller states codex 0.70.0" in result["reason"], result


@pytest.mark.parametrize("entry", ["rel", "", "./rel"])
def test_a_stated_version_is_not_judged_alone_while_the_child_may_search_its_own_folder(
    host: Host, tmp_path: Path, entry: str
) -> None:
    # The name is in no absolute entry of PATH, but the child would search a relative or
    # empty one in its working directory: refused, as without a stated version.
    result = host.preflight("codex", version="0.70.0", PATH=f"{entry}:/usr/bin:/bin")
    assert result["verdict"] == "refuse", result
    assert "PATH is relative" in result["reason"], result


def test_a_warn_override_of_an_unknown_version_records_the_file_it_let_run(
    host: Host, bin_dir: Path
) -> None:
    binary = str(write_script(bin_dir / "codex", "echo 'no version here'"))
    result = host.preflight("codex", binary=binary, FLOORGUARD_ADAPTER_FLOOR_POLICY="warn")
    assert result["verdict"] == "warn_override", result
    assert receipt_in_chain(host, result["receipt_id"])["binary"] == binary


def test_a_stated_version_the_binary_bears_out_is_judged_as_the_binarys(
    host: Host, bin_dir: Path
) -> None:
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.70.0"), version="0.70.0")
    assert result["verdict"] == "permit"
    assert result["detected_by"] == "probe"


def test_refuses_every_spawn_when_the_chain_home_is_a_file(host: Host, bin_dir: Path) -> None:
    blocker = host.root / "not-a-dir"
    blocker.write_text("x")
    result = host.preflight(
        "codex", binary=codex_binary(bin_dir, "0.70.0"), FLOORGUARD_HOME=str(blocker)
    )
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] is None  # nothing could be recorded, so nothing is decided
    assert "audit chain" in result["message"]


def test_refuses_when_the_database_path_is_a_directory(host: Host, bin_dir: Path) -> None:
    (host.home / "chain.sqlite3").mkdir(parents=True)
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.70.0"))
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] is None


def test_refuses_when_the_key_file_is_corrupted(host: Host, bin_dir: Path) -> None:
    host.home.mkdir(parents=True)
    key = host.home / "chain.key"
    key.write_text("not a key\n")
    key.chmod(0o600)
    result = host.preflight("codex", binary=codex_binary(bin_dir, "0.70.0"))
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] is None
    assert host.chain_records() == []


def test_refuses_when_the_disk_is_full(host: Host, bin_dir: Path) -> None:
    # RLIMIT_FSIZE makes every write past one byte fail with EFBIG, as a full disk would.
    limited = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))\n" + HOST
    )
    request = json.dumps({"adapter": "codex", "binary": codex_binary(bin_dir, "0.70.0")})
    done = host.python("-c", limited, request)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["raised"] == "SpawnRefused"
    assert result["verdict"] is None


def test_map_tampered_in_place_after_a_permit_is_caught_even_with_mtime_put_back(
    host: Host,
) -> None:
    # Same size, same mtime: only the ctime tells the cached map from the edited file.
    code = (
        "import os, floorguard\n"
        "path = floorguard._maps.active_map.BUILTIN_MAP_FILE\n"
        "print(floorguard.preflight('aider', version='0.60.0').verdict)\n"
        "st = os.stat(path)\n"
        "data = path.read_bytes().replace(b'\"0.60.0\"', b'\"0.10.0\"')\n"
        "with open(path, 'r+b') as handle:\n"
        "    handle.write(data)\n"
        "os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))\n"
        "try:\n"
        "    floorguard.preflight('aider', version='0.20.0')\n"
        "except floorguard.SpawnRefused as refused:\n"
        "    print(refused.decision.verdict, 'tampered' in refused.decision.reason)\n"
    )
    done = host.python("-c", "import floorguard._maps.active_map\n" + code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["permit", "refuse True"]


RUN_ENVIRON_HOST = r"""
import json, os, sys
import floorguard
binary, child_home = sys.argv[1], sys.argv[2]
child = {"PATH": os.environ["PATH"], "HOME": child_home, "FLOORGUARD_HOME": child_home,
         "FLOORGUARD_ADAPTER_FLOOR_POLICY": "warn", "FLOORGUARD_UNTRACKED_POLICY": "allow"}
try:
    d = floorguard.preflight("codex", binary=binary, run_environ=child)
    print(json.dumps({"verdict": d.verdict}))
except floorguard.SpawnRefused as exc:
    print(json.dumps({"verdict": exc.decision.verdict, "receipt_id": exc.decision.receipt_id}))
"""


def test_the_child_s_environment_judged_never_sets_floorguard_s_own_policies_or_chain(
    host: Host, bin_dir: Path, tmp_path: Path
) -> None:
    """``run_environ`` is what the child runs with: judged, but floorguard's policies and
    chain stay the host's (a warn policy or another FLOORGUARD_HOME there changes nothing)."""
    child_home = tmp_path / "child-home"
    done = host.python("-c", RUN_ENVIRON_HOST, codex_binary(bin_dir, "0.59.9"), str(child_home))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "refuse", result
    assert receipt_in_chain(host, result["receipt_id"])["policy"] == "block"
    assert not child_home.exists()


JUDGED_RUN_ENVIRON_HOST = r"""
import json, os, sys
import floorguard
binary, name, value = sys.argv[1:4]
child = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
if name:
    child[name] = value
try:
    d = floorguard.preflight("codex", binary=binary, run_environ=child)
    print(json.dumps({"verdict": d.verdict, "reason": d.reason}))
except floorguard.SpawnRefused as exc:
    print(json.dumps({"verdict": exc.decision.verdict, "reason": exc.decision.reason}))
"""


@pytest.mark.parametrize(
    ("name", "value"),
    [("LD_PRELOAD", "/tmp/x.so"), ("BASH_ENV", "/tmp/x.sh"), ("BUN_OPTIONS", "--preload x"),
     ("NODE_OPTIONS", "--require ./x.js"), ("PYTHONPATH", "ws")],
)  # fmt: skip
def test_what_loads_code_into_the_child_s_environment_refuses_a_preflight_as_a_spawn(
    host: Host, bin_dir: Path, name: str, value: str
) -> None:
    binary = codex_binary(bin_dir, "0.70.0")
    done = host.python("-c", JUDGED_RUN_ENVIRON_HOST, binary, name, value)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "refuse" and name in result["reason"], result
    done = host.python("-c", JUDGED_RUN_ENVIRON_HOST, binary, "", "")
    assert json.loads(done.stdout)["verdict"] == "permit", done.stdout


@pytest.mark.parametrize(
    ("call", "named"),
    [("floorguard.preflight(b'aider')", "adapter"), ("floorguard.preflight(None)", "adapter"),
     ("floorguard.preflight('aider', binary=b'/usr/bin/aider')", "binary"),
     ("floorguard.preflight('aider', version=1)", "version"),
     ("floorguard.preflight('aider', run_environ={'PATH': None})", "run_environ"),
     ("floorguard.preflight('aider', run_environ=[('PATH', '/usr/bin')])", "run_environ"),
     ("floorguard.preflight('aider', environ={b'PATH': '/usr/bin'})", "environ"),
     ("floorguard.preflight(NotText())", "adapter"),
     ("floorguard.preflight('aider', version=NotText())", "version"),
     ("floorguard.preflight('aider', run_environ={NotText(): '1'})", "run_environ"),
     ("floorguard.preflight('aider', environ=NotMapping())", "environ")],
)  # fmt: skip
def test_arguments_of_the_wrong_type_are_a_type_error_naming_them_and_record_nothing(
    host: Host, call: str, named: str
) -> None:
    code = (
        "import floorguard\nclass NotText:\n    __class__ = property(lambda self: str)\n"
        "class NotMapping:\n    __class__ = property(lambda self: dict)\n"
        f"try:\n    {call}\nexcept TypeError as e:\n    print('TypeError', e)\n"
    )
    done = host.python("-c", code)
    assert done.stdout.startswith(f"TypeError {named} "), (done.stdout, done.stderr)
    assert host.chain_records() == []


# Text that says it is another name: its comparisons and hash lie, its characters do not.
LYING_TEXT_HOST = """
import json, sys
import floorguard

class Lying(str):
    def __eq__(self, other): return str.__eq__("goose", other)
    def __ne__(self, other): return not self == other
    def __hash__(self): return hash("goose")
    def __str__(self): return "goose"
    def startswith(self, *args): return "goose".startswith(*args)

binary, where = sys.argv[1], sys.argv[2]
try:
    if where == "adapter":
        floorguard.preflight(Lying("codex"), binary=binary)
    elif where == "binary":
        floorguard.preflight("codex", binary=Lying(binary))
    else:
        floorguard.preflight("codex", binary=binary, run_environ={Lying("HOME"): Lying("/x")})
except floorguard.SpawnRefused as exc:
    print(json.dumps({"verdict": exc.decision.verdict, "adapter": exc.decision.adapter,
                      "reason": exc.decision.reason}))
else:
    print(json.dumps({"verdict": "allowed"}))
"""


@pytest.mark.parametrize("where", ["adapter", "binary", "run_environ"])
def test_text_of_a_str_subclass_is_judged_by_its_characters_not_its_methods(
    host: Host, bin_dir: Path, where: str
) -> None:
    binary = codex_binary(bin_dir, "0.10.0")
    done = host.python("-c", LYING_TEXT_HOST, binary, where)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "refuse", result
    assert result["adapter"] == "codex" and "below the floor" in result["reason"], result
    [record] = host.chain_records()
    assert record["receipt"]["adapter"] == "codex"


def test_os_environ_changed_by_another_thread_meanwhile_is_read_whole(
    host: Host, bin_dir: Path
) -> None:
    binary = codex_binary(bin_dir, "0.70.0")
    # (another thread of the host sets and removes a variable meanwhile)
    code = calls_while_os_environ_changes(
        "floorguard.preflight('codex', binary=sys.argv[1]).verdict", 400
    )
    done = host.python("-c", code, binary)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"permit": 400}, done.stdout
