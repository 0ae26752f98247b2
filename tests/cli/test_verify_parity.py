"""``floorctl verify receipt|chain`` and ``python -m floorguard verify receipt|chain`` are one
command: the same options and defaults (the public key without ``--pubkey``, the map archives
without ``--maps``), the same result on stdout, the same exit status, and the same notices
and errors on stderr but for the program's name.

Every case runs both real CLIs, from the same folder and environment, on the same files: a
release key, a signed update receipt, its chain record, a tampered receipt, another key, a
proven slice with its checkpoint, a NOT PROVEN slice (a below-floor permit, sealed with the
chain's own key) and a tampered slice.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env

from floorguard._chain.chain import AuditChain

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


@dataclass(frozen=True)
class Project:
    root: Path
    state: Path

    @property
    def chain_key(self) -> Path:
        return self.state / "floorguard" / "chain.key"


SPAWN = "adapter.spawn_preflight_receipt"


def spawn_receipt(ts: str, version: str, map_hash: str) -> dict[str, object]:
    """A permit of aider ``version`` under the map ``map_hash``, as the gate records one."""
    return {
        "kind": SPAWN, "schema_version": 1, "ts": ts, "adapter": "aider", "requested": "aider",
        "identified_by": None, "binary": "/usr/bin/aider", "version": version,
        "detected_by": "probe", "floor": "0.60.0", "advisory_id": "BSA-0001",
        "verdict": "permit", "reason": "as recorded", "policy": "block",
        "floor_map_hash": map_hash, "waiver_id": None,
    }  # fmt: skip


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = tmp_path_factory.mktemp("parity")
    state = root / "state"
    p = Project(root / "p", state)
    p.root.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return ok(floorctl(*args, cwd=p.root, state=state))

    run("keygen", "--out", "keys")
    run("keygen", "--out", "other")
    (p.root / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (p.root / "feed.json").write_text(json.dumps(FEED))
    run(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
        "--receipt-out", "receipt.json", "--signing-key", "keys/signing.key", "--anchor",
    )  # fmt: skip
    # A module changed after the receipt was sealed.
    module = (p.root / "floor_map.py").read_text()
    (p.root / "changed_map.py").write_text(module.replace('"0.60.0"', '"0.10.0"'))
    # The receipt's chain record: unsigned, checkable by its content address only.
    [line] = run("chain", "export").stdout.splitlines()
    (p.root / "line.json").write_text(line + "\n")
    # The signed receipt with its predicate edited (the signature no longer covers it).
    envelope = json.loads((p.root / "receipt.json").read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["downgrade_allowed"] = True
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (p.root / "tampered.json").write_text(json.dumps(envelope))
    # A proven slice and a checkpoint of it, then one record more that breaks the floor.
    run(
        "chain", "export", "--out", "proven.jsonl", "--checkpoint-out", "proven.checkpoint",
        "--signing-key", "keys/signing.key",
    )  # fmt: skip
    map_hash = json.loads(line)["receipt"]["new_floor_map_hash"]
    chain = AuditChain(state / "floorguard" / "chain.sqlite3", p.chain_key)
    chain.append(SPAWN, spawn_receipt(json.loads(line)["ts"], "0.50.0", map_hash))
    run("chain", "export", "--out", "violation.jsonl")
    lines = (p.root / "proven.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["receipt"]["downgrade_allowed"] = True
    (p.root / "tampered.jsonl").write_text(json.dumps(record) + "\n")
    return p


def both(
    project: Project, *args: str, cwd: Path | None = None, **extra: str
) -> tuple[subprocess.CompletedProcess[str], ...]:
    """``floorctl verify ARGS`` and ``python -m floorguard verify ARGS``, alike in all else."""
    args = tuple(a.replace("{chain_key}", str(project.chain_key)) for a in args)
    runs = []
    for program in ("floorctl", "floorguard"):
        runs.append(
            subprocess.run(
                [sys.executable, "-m", program, "verify", *args],
                capture_output=True,
                text=True,
                cwd=project.root if cwd is None else cwd,
                env=isolated_env(project.state, **extra),
                timeout=120,
                check=False,
            )
        )
    return tuple(runs)


def unnamed(stderr: str, program: str) -> str:
    return stderr.replace(f"{program}: ", "PROGRAM: ")


RECEIPT_CASES = {
    "signed": (0, "receipt.json", "--pubkey", "keys/signing.pub"),
    "signed-json": (0, "receipt.json", "--pubkey", "keys/signing.pub", "--json"),
    "signed-checked-against-its-module": (
        0, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map", "floor_map.py",
    ),
    "signed-module-changed-since": (
        1, "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map", "changed_map.py",
    ),
    "signed-private-key-as-pubkey": (0, "receipt.json", "--pubkey", "keys/signing.key"),
    "signed-content-only-still-needs-the-signature": (
        0, "receipt.json", "--pubkey", "keys/signing.pub", "--content-only", "--json",
    ),
    "signed-no-pubkey-no-key-in-use": (1, "receipt.json"),
    "unsigned": (1, "line.json"),
    "unsigned-json": (1, "line.json", "--json"),
    "unsigned-content-only": (0, "line.json", "--content-only"),
    "unsigned-content-only-json": (0, "line.json", "--content-only", "--json"),
    "tampered": (1, "tampered.json", "--pubkey", "keys/signing.pub"),
    "tampered-content-only": (1, "tampered.json", "--pubkey", "keys/signing.pub", "--content-only"),
    "wrong-key": (1, "receipt.json", "--pubkey", "other/signing.pub"),
    "wrong-key-json": (1, "receipt.json", "--pubkey", "other/signing.pub", "--json"),
}  # fmt: skip

CHAIN_CASES = {
    "proven-by-macs": (0, "proven.jsonl", "--key-file", "{chain_key}"),
    "proven-by-macs-json": (0, "proven.jsonl", "--key-file", "{chain_key}", "--json"),
    "proven-by-checkpoint": (
        0, "proven.jsonl", "--checkpoint", "proven.checkpoint", "--pubkey", "keys/signing.pub",
    ),
    "checkpoint-of-another-key": (
        1, "proven.jsonl", "--checkpoint", "proven.checkpoint", "--pubkey", "other/signing.pub",
    ),
    "unauthenticated-refused": (1, "proven.jsonl"),
    "unauthenticated-accepted": (0, "proven.jsonl", "--unauthenticated"),
    "not-proven-violation": (1, "violation.jsonl", "--key-file", "{chain_key}"),
    "not-proven-violation-json": (1, "violation.jsonl", "--key-file", "{chain_key}", "--json"),
    "not-proven-window-after-the-slice": (
        1, "proven.jsonl", "--key-file", "{chain_key}",
        "--since", "2999-01-01T00:00:00Z", "--until", "2999-01-02T00:00:00+01:00",
    ),
    "proven-window-before-the-violation": (
        0, "violation.jsonl", "--key-file", "{chain_key}",
        "--since", "2000-01-01T00:00:00Z", "--until", "2000-01-02T00:00:00+01:00",
    ),
    "tampered-slice": (1, "tampered.jsonl", "--key-file", "{chain_key}"),
    "tampered-slice-json": (1, "tampered.jsonl", "--key-file", "{chain_key}", "--json"),
    "missing-slice": (1, "nowhere.jsonl", "--key-file", "{chain_key}"),
    "missing-key-file": (1, "proven.jsonl", "--key-file", "nowhere.key"),
}  # fmt: skip


@pytest.mark.parametrize(
    ("check", "case"),
    [("receipt", c) for c in RECEIPT_CASES] + [("chain", c) for c in CHAIN_CASES],
)
def test_both_verify_commands_give_the_same_result(project: Project, check: str, case: str) -> None:
    expected, *args = (RECEIPT_CASES if check == "receipt" else CHAIN_CASES)[case]
    ctl, guard = both(project, check, *args)
    assert (ctl.returncode, guard.returncode) == (expected, expected), ctl.stderr + guard.stderr
    assert ctl.stdout == guard.stdout
    assert unnamed(ctl.stderr, "floorctl") == unnamed(guard.stderr, "floorguard")
    if "--json" in args and expected == 0:
        json.loads(guard.stdout)


def test_without_pubkey_both_verify_against_the_signing_key_in_use(project: Project) -> None:
    key = project.root / "keys" / "signing.key"
    ctl, guard = both(project, "receipt", "receipt.json", FLOORCTL_SIGNING_KEY=str(key))
    assert (ctl.returncode, guard.returncode) == (0, 0), ctl.stderr + guard.stderr
    assert ctl.stdout == guard.stdout
    assert guard.stdout.startswith("OK adapter.floor_update_receipt sha256:")
    notice = f"floorguard: no --pubkey: verifying against the public half of {key}\n"
    assert guard.stderr == notice
    assert unnamed(ctl.stderr, "floorctl") == unnamed(guard.stderr, "floorguard")


def test_without_pubkey_another_signing_key_in_use_is_refused_by_both(project: Project) -> None:
    key = project.root / "other" / "signing.key"
    ctl, guard = both(project, "receipt", "receipt.json", FLOORCTL_SIGNING_KEY=str(key))
    assert (ctl.returncode, guard.returncode) == (1, 1)
    assert "no signature verifies against a trusted key" in guard.stderr
    assert unnamed(ctl.stderr, "floorctl") == unnamed(guard.stderr, "floorguard")


def test_without_pubkey_a_missing_signing_key_in_use_is_named_by_both(project: Project) -> None:
    missing = project.root / "gone" / "signing.key"
    ctl, guard = both(project, "receipt", "receipt.json", FLOORCTL_SIGNING_KEY=str(missing))
    assert (ctl.returncode, guard.returncode) == (1, 1)
    assert str(missing) in guard.stderr.splitlines()[-1]
    assert "floorguard: error: " in guard.stderr
    assert unnamed(ctl.stderr, "floorctl") == unnamed(guard.stderr, "floorguard")


def test_without_pubkey_both_find_floorctls_development_key(project: Project) -> None:
    # The development key floorctl signs with by default, in FLOORCTL_HOME.
    dev = project.state / "floorctl" / "dev-key"
    dev.mkdir(parents=True, exist_ok=True)
    for name in ("signing.key", "signing.pub"):
        (dev / name).write_bytes((project.root / "keys" / name).read_bytes())
    try:
        ctl, guard = both(project, "receipt", "receipt.json", "--json")
    finally:
        for name in ("signing.key", "signing.pub"):
            (dev / name).unlink()
    assert (ctl.returncode, guard.returncode) == (0, 0), ctl.stderr + guard.stderr
    assert ctl.stdout == guard.stdout
    assert json.loads(guard.stdout)["signed"] is True
    assert f"public half of {dev / 'signing.key'}" in guard.stderr


def test_without_maps_both_read_the_checkouts_archive(project: Project, tmp_path: Path) -> None:
    # A slice whose one record pins a map that no update receipt in it carries: only the map
    # archive of a checkout (./generated/floorguard/maps of the folder run from) holds it.
    line = json.loads((project.root / "line.json").read_text())
    map_hash = line["receipt"]["new_floor_map_hash"]
    home = tmp_path / "home"
    home.mkdir()
    chain = AuditChain(home / "chain.sqlite3", home / "chain.key")
    chain.append(SPAWN, spawn_receipt(line["ts"], "0.61.0", map_hash))
    checkout = tmp_path / "checkout"
    archive = checkout / "generated" / "floorguard" / "maps"
    archive.mkdir(parents=True)
    name = f"{map_hash.replace(':', '-')}.json"
    (archive / name).write_bytes((project.root / "maps" / name).read_bytes())
    piece = tmp_path / "slice.jsonl"
    piece.write_text("".join(line + "\n" for line in chain.export_lines()))
    args = ("chain", str(piece), "--key-file", str(home / "chain.key"))
    ctl, guard = both(project, *args, cwd=checkout)
    assert (ctl.returncode, guard.returncode) == (0, 0), ctl.stdout + guard.stdout
    assert ctl.stdout == guard.stdout
    ctl, guard = both(project, *args, cwd=tmp_path)
    assert (ctl.returncode, guard.returncode) == (1, 1)
    assert ctl.stdout == guard.stdout
    assert map_hash in guard.stdout


USAGE_CASES = {
    "receipt-missing-file": ("receipt", "nowhere.json"),
    "receipt-missing-pubkey": ("receipt", "receipt.json", "--pubkey", "nowhere.pub"),
    "receipt-missing-floor-map": ("receipt", "receipt.json", "--floor-map", "nowhere.py"),
    "receipt-folder-as-file": ("receipt", "keys"),
    "chain-missing-maps-folder": ("chain", "proven.jsonl", "--maps", "nowhere"),
    "chain-file-as-maps-folder": ("chain", "proven.jsonl", "--maps", "feed.json"),
    "chain-missing-checkpoint": ("chain", "proven.jsonl", "--checkpoint", "nowhere", "--pubkey",
                                 "keys/signing.pub"),
    "chain-checkpoint-without-pubkey": ("chain", "proven.jsonl", "--checkpoint",
                                        "proven.checkpoint"),
    "chain-since-after-until": ("chain", "proven.jsonl", "--since", "2026-01-02T00:00:00Z",
                                "--until", "2026-01-01T00:00:00Z"),
    "chain-bad-time": ("chain", "proven.jsonl", "--since", "yesterday"),
    "chain-folder-as-slice": ("chain", "keys"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_both_verify_commands_refuse_the_same_command_lines_as_usage_errors(
    project: Project, case: str
) -> None:
    ctl, guard = both(project, *USAGE_CASES[case])
    assert (ctl.returncode, guard.returncode) == (2, 2), ctl.stderr + guard.stderr
    assert ctl.stdout == guard.stdout == ""
    assert ctl.stderr and guard.stderr


def test_both_read_a_bernstein_module_for_floor_map_alike(project: Project) -> None:
    # The runtime reads the bernstein layout as it reads a host's module
    # (floorguard._maps.host_map), so a Bernstein advisories.py is judged by its data hash in both.
    bernstein = Path(__file__).parents[1] / "assets" / "bernstein_advisories.py"
    args = ("receipt", "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map")
    ctl, guard = both(project, *args, str(bernstein))
    assert (ctl.returncode, guard.returncode) == (1, 1)
    assert "floor-map hash mismatch" in ctl.stderr
    assert guard.stderr == ctl.stderr.replace("floorctl:", "floorguard:")


def test_both_refuse_a_module_that_assigns_its_entries_twice_in_the_same_words(
    project: Project,
) -> None:
    # Two FLOOR_MAP_ENTRIES: which one a reader takes is a choice an attacker would exploit.
    module = project.root / "twice.py"
    module.write_text(
        "# floor-map:begin\nFLOOR_MAP_VERSION = 1\nFLOOR_MAP_HASH = 'sha256:'\n"
        "FLOOR_MAP_ENTRIES = {}\n# floor-map:end\nFLOOR_MAP_ENTRIES = {}\n"
    )
    args = ("receipt", "receipt.json", "--pubkey", "keys/signing.pub", "--floor-map")
    ctl, guard = both(project, *args, str(module))
    assert (ctl.returncode, guard.returncode) == (1, 1)
    assert "FLOOR_MAP_ENTRIES is assigned twice (line 6)" in guard.stderr
    assert guard.stderr == ctl.stderr.replace("floorctl:", "floorguard:")
