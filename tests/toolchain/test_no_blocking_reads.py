"""No read can hang: a FIFO, a device or an oversized file wherever floorctl or floorguard
reads a file is refused at once, naming the file, and never waited on.

Every attack runs the real command (``floorctl``, ``python -m floorguard``) or a real host
process in a subprocess with a short timeout: a read that waited would block forever on
``open()`` of the FIFO (or read ``/dev/zero`` without end).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from feedserver import envelope
from helpers.cli import isolated_env
from hosts import HOST, Host, floor, map_module

from floorctl import keys
from floorguard._base import files
from floorguard._base._canonical import canonical_bytes
from floorguard._base._time import format_ts, utc_now
from floorguard._maps import published_map
from floorguard._maps.map_model import from_entries
from floorguard.errors import UnreadableFileError

# Generous for "does not hang": an interpreter start plus the command, on a loaded machine.
NO_HANG_SECONDS = 20
MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'
FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


def make_fifo(path: Path) -> Path:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def make_device(path: Path, device: str = "/dev/zero") -> Path:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(device)
    return path


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command, which must end by itself well within the bound (TimeoutExpired = hang)."""
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=NO_HANG_SECONDS,
        stdin=subprocess.DEVNULL,
        check=False,
    )


# --- the helper itself ---------------------------------------------------------------------------


def test_read_regular_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "fifo")
    with pytest.raises(UnreadableFileError, match="not a regular file \\(the key is a FIFO\\)"):
        files.read_regular(fifo, max_bytes=10, what="key")


def test_read_regular_refuses_a_character_device(tmp_path: Path) -> None:
    zero = make_device(tmp_path / "zero")
    with pytest.raises(UnreadableFileError, match="is a character device"):
        files.read_regular(zero, max_bytes=10, what="key")


def test_read_regular_refuses_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFileError, match="is a folder"):
        files.read_regular(tmp_path, max_bytes=10, what="key")


def test_read_regular_refuses_a_file_over_its_cap(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(UnreadableFileError, match="larger than 10 bytes") as refused:
        files.read_regular(big, max_bytes=10, what="key")
    assert refused.value.too_large and not refused.value.missing
    assert files.read_regular(big, max_bytes=11, what="key") == b"x" * 11


def test_read_regular_stat_reads_relative_to_an_open_folder(tmp_path: Path) -> None:
    (tmp_path / "key").write_bytes(b"k")
    make_fifo(tmp_path / "fifo")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        data, info = files.read_regular_stat("key", max_bytes=1, what="key", dir_fd=dir_fd)
        assert data == b"k" and info.st_ino == (tmp_path / "key").stat().st_ino
        with pytest.raises(UnreadableFileError, match="fifo: not a regular file"):
            files.read_regular_stat("fifo", max_bytes=1, what="key", dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def test_read_regular_says_when_nothing_is_there(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFileError, match="No such file") as refused:
        files.read_regular(tmp_path / "absent", max_bytes=10, what="key")
    assert refused.value.missing
    assert files.read_regular_if_exists(tmp_path / "absent", max_bytes=1, what="key") is None


# --- floorctl ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a module, feed, receipt, chain, slice, checkpoint and keys."""
    root = tmp_path_factory.mktemp("reads")
    project = root / "project"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps(FEED))
    keys.generate(root / "keys")
    env = isolated_env(root / "state")
    cli = [sys.executable, "-m", "floorctl"]
    for args in (
        ["refresh", "--feed", "feed.json", "--write", "--receipt-out", "receipt.json", "--anchor"],
        ["chain", "export", "--out", "slice.jsonl", "--checkpoint-out", "checkpoint.txt",
         "--signing-key", str(root / "keys" / "signing.key")],
        ["trust", "rotate", "--help"],
    ):  # fmt: skip
        done = run([*cli, *args], env, project)
        assert done.returncode == 0, done.stderr
    shutil.copy(root / "keys" / "signing.pub", project / "trusted.pem")
    return root


@pytest.fixture
def root(baseline: Path, tmp_path: Path) -> Path:
    shutil.copytree(baseline, tmp_path / "copy", symlinks=True)
    return tmp_path / "copy"


# (id, arguments, the file that becomes a FIFO); {p} is the project, {r} the root.
# The verify commands read the same files in both CLIs.
VERIFY_CASES = [
    ("verify-chain-slice", ["verify", "chain", "{p}/s.jsonl"], "{p}/s.jsonl"),
    ("verify-chain-key-file", ["verify", "chain", "{p}/slice.jsonl", "--key-file", "{p}/k"],
     "{p}/k"),
    ("verify-chain-checkpoint", ["verify", "chain", "{p}/slice.jsonl", "--checkpoint",
     "{p}/cp.txt", "--pubkey", "{p}/trusted.pem"], "{p}/cp.txt"),
    ("verify-chain-pubkey", ["verify", "chain", "{p}/slice.jsonl", "--checkpoint",
     "{p}/checkpoint.txt", "--pubkey", "{p}/pk.pem"], "{p}/pk.pem"),
    ("verify-receipt", ["verify", "receipt", "{p}/r.json"], "{p}/r.json"),
    ("verify-receipt-pubkey", ["verify", "receipt", "{p}/receipt.json", "--pubkey",
     "{p}/pk.pem"], "{p}/pk.pem"),
    ("verify-receipt-floor-map", ["verify", "receipt", "{p}/receipt.json", "--pubkey",
     "{r}/state/floorctl/dev-key/signing.pub", "--floor-map", "{p}/map.json"], "{p}/map.json"),
    ("verify-receipt-floor-map-module", ["verify", "receipt", "{p}/receipt.json", "--pubkey",
     "{r}/state/floorctl/dev-key/signing.pub", "--floor-map", "{p}/map.py"], "{p}/map.py"),
]  # fmt: skip

FLOORCTL_CASES = [
    ("validate-feed", ["validate", "{p}/feed.json"], "{p}/feed.json"),
    ("refresh-feed", ["refresh", "--feed", "{p}/feed.json"], "{p}/feed.json"),
    ("refresh-module", ["refresh", "--feed", "feed.json", "--module", "{p}/m.py"], "{p}/m.py"),
    ("refresh-template", ["refresh", "--feed", "feed.json", "--template", "{p}/t.j2"], "{p}/t.j2"),
    ("refresh-trusted-keys", ["refresh", "--feed", "feed.json", "--trusted-keys", "{p}/tk.json"],
     "{p}/tk.json"),
    ("refresh-feed-signature", ["refresh", "--feed", "{p}/feed.json", "--trusted-keys",
     "{p}/trusted.pem"], "{p}/feed.json.dsse"),
    ("refresh-state-file", ["refresh", "--feed", "feed.json", "--state-file", "{p}/state.json"],
     "{p}/state.json"),
    ("installed-trusted-keys", ["refresh", "--feed", "feed.json"],
     "{r}/state/floorctl/trusted-keys.json"),
    ("refresh-signing-key", ["refresh", "--feed", "feed.json", "--write", "--receipt-out",
     "r2.json", "--signing-key", "{p}/k.pem"], "{p}/k.pem"),
    ("anchor-chain-key", ["refresh", "--feed", "feed.json", "--write", "--force", "--anchor",
     "--allow-downgrade"], "{r}/state/floorguard/chain.key"),
    ("sign-feed", ["sign", "{p}/f2.json", "--signing-key", "{r}/keys/signing.key"],
     "{p}/f2.json"),
    ("sign-existing-signature", ["sign", "{p}/feed.json", "--signing-key",
     "{r}/keys/signing.key"], "{p}/feed.json.dsse"),
    ("sign-signing-key", ["sign", "{p}/feed.json", "--signing-key", "{p}/k.pem"], "{p}/k.pem"),
    ("publish-module", ["publish", "--module", "{p}/m.py", "--out", "{p}/pub", "--signing-key",
     "{r}/keys/signing.key"], "{p}/m.py"),
    ("trust-rotate-current", ["trust", "rotate", "--current", "{p}/tk.json", "--new",
     "{p}/trusted.pem"], "{p}/tk.json"),
    ("trust-rotate-new", ["trust", "rotate", "--current", "{p}/trusted.pem", "--new",
     "{p}/new.json"], "{p}/new.json"),
    *VERIFY_CASES,
]  # fmt: skip


def _fill(text: str, root: Path) -> str:
    return text.format(p=root / "project", r=root)


@pytest.mark.parametrize(
    ("args", "target"),
    [pytest.param(args, target, id=name) for name, args, target in FLOORCTL_CASES],
)
def test_floorctl_refuses_a_fifo_by_name_without_hanging(
    root: Path, args: list[str], target: str
) -> None:
    fifo = make_fifo(Path(_fill(target, root)))
    done = run(
        [sys.executable, "-m", "floorctl", *(_fill(a, root) for a in args)],
        isolated_env(root / "state"),
        root / "project",
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    # The last line is the error (verify chain first notes that MACs are not checked).
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"floorctl: error: {fifo}: "), done.stderr
    assert "not a regular file" in last


def test_floorctl_refuses_a_fifo_as_its_fetch_state(root: Path) -> None:
    fifo = make_fifo(root / "state" / "floorctl" / "feeds-state.json")
    done = run(
        [sys.executable, "-m", "floorctl", "fetch", "https://feeds.invalid/feed.json", "--out",
         "out.json"],
        isolated_env(root / "state"),
        root / "project",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        f"floorctl: error: {fifo}: not a regular file (the feed state is a FIFO)\n"
    )


@pytest.mark.parametrize(
    ("args", "target", "device"),
    [
        (["verify", "receipt", "{p}/r.json"], "{p}/r.json", "/dev/zero"),
        (["validate", "{p}/f.json"], "{p}/f.json", "/dev/urandom"),
        (["sign", "{p}/feed.json", "--signing-key", "{p}/k.pem"], "{p}/k.pem", "/dev/zero"),
    ],
    ids=["receipt", "feed", "signing-key"],
)
def test_floorctl_refuses_a_character_device(
    root: Path, args: list[str], target: str, device: str
) -> None:
    link = make_device(Path(_fill(target, root)), device)
    done = run(
        [sys.executable, "-m", "floorctl", *(_fill(a, root) for a in args)],
        isolated_env(root / "state"),
        root / "project",
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"floorctl: error: {link}: ")
    assert "not a regular file" in done.stderr and "character device" in done.stderr


def test_floorctl_refuses_an_oversized_signing_key(root: Path) -> None:
    big = root / "project" / "big.pem"
    big.write_bytes(b"-" * (files.MAX_KEY_BYTES + 1))
    done = run(
        [sys.executable, "-m", "floorctl", "sign", "feed.json", "--signing-key", str(big)],
        isolated_env(root / "state"),
        root / "project",
    )
    assert done.returncode == 1
    assert done.stderr == f"floorctl: error: {big}: the key is larger than 64 KiB\n"


def test_floorctl_still_reads_a_slice_from_stdin(root: Path) -> None:
    project = root / "project"
    with (project / "slice.jsonl").open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "floorctl", "verify", "chain", "-", "--unauthenticated"],
            capture_output=True,
            env=isolated_env(root / "state"),
            cwd=project,
            stdin=stdin,
            timeout=NO_HANG_SECONDS,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"PROVEN")


# --- python -m floorguard ------------------------------------------------------------------------

FLOORGUARD_CASES = VERIFY_CASES


@pytest.mark.parametrize(
    ("args", "target"),
    [pytest.param(args, target, id=name) for name, args, target in FLOORGUARD_CASES],
)
def test_floorguard_cli_refuses_a_fifo_by_name_without_hanging(
    root: Path, args: list[str], target: str
) -> None:
    fifo = make_fifo(Path(_fill(target, root)))
    done = run(
        [sys.executable, "-m", "floorguard", *(_fill(a, root) for a in args)],
        isolated_env(root / "state"),
        root / "project",
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"floorguard: error: {fifo}: not a regular file"), done.stderr


# --- a real host process: the spawn path ---------------------------------------------------------


def _document(entries: dict[str, Any], version: int) -> bytes:
    expires = format_ts(utc_now().replace(microsecond=0).replace(year=utc_now().year + 1))
    return canonical_bytes(published_map.document(from_entries(entries), version, expires))


class Spawner:
    """A host with a built-in map (aider floor 0.50.0, version 3) and a signed published one."""

    def __init__(self, root: Path) -> None:
        self.host = Host(root / "host", {})
        self.host.set_map(map_module({"aider": floor("0.50.0")}, version=3))
        self.host.home.mkdir(mode=0o700)
        self.key, _, self.public = _new_key(root / "publisher")
        self.map = root / "site" / "floor-map.json"
        self.map.parent.mkdir()
        data = _document({"aider": floor("0.60.0")}, 4)
        self.map.write_bytes(data)
        Path(str(self.map) + ".dsse").write_bytes(
            envelope(data, self.key, payload_type=published_map.PAYLOAD_TYPE)
        )

    def published(self) -> dict[str, str]:
        return {"FLOORGUARD_FLOOR_MAP": str(self.map), "FLOORGUARD_TRUSTED_KEYS": str(self.public)}

    def preflight(self, **extra: str) -> tuple[dict[str, Any], str]:
        request = json.dumps({"adapter": "aider", "version": "0.55.0"})
        done = run([sys.executable, "-c", HOST, request], self.host.env(**extra), self.host.root)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result, done.stderr


def _new_key(folder: Path) -> tuple[Any, Path, Path]:
    private, public = keys.generate(folder)
    return keys.load_private(private), private, public


@pytest.fixture
def spawner(tmp_path: Path) -> Spawner:
    return Spawner(tmp_path)


def _unrecorded(result: dict[str, Any], path: Path, kind: str = "a FIFO") -> None:
    assert result["raised"] == "SpawnRefused"
    assert result["receipt_id"] is None  # nothing could be recorded
    assert f"{path}: not a regular file (the chain key file is {kind})" in result["message"]


def test_refuses_a_spawn_when_the_chain_key_is_a_fifo(spawner: Spawner) -> None:
    fifo = make_fifo(spawner.host.home / "chain.key")
    result, _ = spawner.preflight()
    _unrecorded(result, fifo)


def test_refuses_a_spawn_when_the_chain_key_file_variable_names_a_fifo(
    spawner: Spawner, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path / "elsewhere.key")
    result, _ = spawner.preflight(FLOORGUARD_CHAIN_KEY_FILE=str(fifo))
    _unrecorded(result, fifo)


def test_refuses_a_spawn_when_the_chain_key_is_a_device(spawner: Spawner) -> None:
    link = make_device(spawner.host.home / "chain.key")
    result, _ = spawner.preflight()
    _unrecorded(result, link, "a character device")


def test_refuses_a_spawn_when_the_chain_key_is_oversized(spawner: Spawner) -> None:
    big = spawner.host.home / "chain.key"
    big.write_bytes(b"0" * 4096)
    big.chmod(0o600)
    result, _ = spawner.preflight()
    assert result["raised"] == "SpawnRefused" and result["receipt_id"] is None
    assert f"{big}: the chain key file is larger than 66 bytes" in result["message"]


def test_refuses_a_spawn_when_the_chain_database_is_a_fifo(spawner: Spawner) -> None:
    fifo = make_fifo(spawner.host.home / "chain.sqlite3")
    result, _ = spawner.preflight()
    assert result["raised"] == "SpawnRefused" and result["receipt_id"] is None
    assert f"{fifo}: not a regular file" in result["message"]


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_refuses_a_spawn_when_a_sqlite_side_file_is_a_fifo(spawner: Spawner, suffix: str) -> None:
    # SQLite itself opens these; it answers a FIFO with an I/O error rather than blocking.
    first, _ = spawner.preflight()
    assert first["receipt_id"] is not None
    make_fifo(spawner.host.home / f"chain.sqlite3{suffix}")
    result, _ = spawner.preflight()
    assert result["raised"] == "SpawnRefused" and result["receipt_id"] is None
    assert "could not be recorded in the audit chain" in result["message"]


def test_refuses_a_spawn_when_the_builtin_map_is_a_fifo(spawner: Spawner) -> None:
    fifo = make_fifo(spawner.host.map_file)
    result, _ = spawner.preflight()
    assert result["raised"] == "SpawnRefused" and result["verdict"] == "refuse"
    assert result["reason"] == (
        f"floor map cannot be trusted: {fifo}: not a regular file (the floor map is a FIFO)"
    )


@pytest.mark.parametrize(
    ("which", "what"),
    [
        ("map", "published floor map"),
        ("signature", "signature"),
        ("trusted-keys", "trusted keys"),
    ],
)
def test_a_fifo_published_map_file_is_named_and_never_waited_on(
    spawner: Spawner, which: str, what: str
) -> None:
    target = {
        "map": spawner.map,
        "signature": Path(str(spawner.map) + ".dsse"),
        "trusted-keys": spawner.public,
    }[which]
    fifo = make_fifo(target)
    # Nothing accepted yet on this host: the built-in map stands in, and stderr says why.
    result, stderr = spawner.preflight(**spawner.published())
    assert result["verdict"] == "permit" and result["floor"] == "0.50.0"
    assert f"{fifo}: not a regular file (the {what} is a FIFO)" in stderr


def test_refuses_spawns_when_an_accepted_published_map_becomes_a_fifo(spawner: Spawner) -> None:
    result, _ = spawner.preflight(**spawner.published())
    assert result["verdict"] == "refuse" and result["floor"] == "0.60.0"  # accepted: v4
    fifo = make_fifo(spawner.map)
    result, _ = spawner.preflight(**spawner.published())
    assert result["raised"] == "SpawnRefused" and result["receipt_id"] is not None
    assert result["reason"].startswith(
        f"floor map cannot be trusted: FLOORGUARD_FLOOR_MAP={fifo} cannot be used: {fifo}: "
        "not a regular file"
    )


def test_refuses_spawns_when_the_accepted_map_record_is_a_fifo(spawner: Spawner) -> None:
    fifo = make_fifo(spawner.host.home / "published-map.json")
    result, _ = spawner.preflight(**spawner.published())
    assert result["raised"] == "SpawnRefused" and result["receipt_id"] is not None
    assert result["reason"] == (
        f"floor map cannot be trusted: {fifo}: not a regular file "
        "(the published-map state file is a FIFO)"
    )


def test_an_oversized_published_map_is_refused_unread(spawner: Spawner) -> None:
    with spawner.map.open("wb") as sparse:
        sparse.truncate(published_map.MAX_MAP_BYTES + 1)
    result, stderr = spawner.preflight(**spawner.published())
    assert result["floor"] == "0.50.0"
    assert f"{spawner.map}: the published floor map is larger than 64 MiB" in stderr
