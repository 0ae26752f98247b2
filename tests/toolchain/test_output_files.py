"""Every file floorctl writes replaces the name it was given and never follows a link there.

The attack: an output path (``--receipt-out``, ``--out``, a ``.dsse`` beside a feed, the
maps archive, the freshness state, the installed trusted keys) is a symbolic link to a file
the attacker wants overwritten. The real command must replace the link by a regular file
and leave the victim alone. A write that fails (here: a file-size limit in the child, which
makes every write of more than a few bytes fail with EFBIG) must leave a dangling link where
it was, and no temporary file behind.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from feedserver import FeedServer, envelope, new_key, trusted_file, v2_feed
from helpers.cli import isolated_env

from floorctl import keys, trust
from floorguard._maps.map_model import floor_map_hash, from_entries

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n\nTAIL = 1\n'
ENTRIES = {
    "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."},
    "claude": {"min_safe_version": "1.0.20", "advisory_id": "BSA-0002", "note": "Upgrade."},
}
VICTIM_BYTES = b"the victim's own bytes\n"
# The freshness state is read before it is written: its victim must read as a state file.
STATE_VICTIM = b'{"feeds": {}, "schema_version": 1}\n'
# The installed trusted keys are read before a rotation replaces them (they must be the
# rotation's current keys): their victim holds those keys, so a fixed key signs.
ROTATION_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
ROTATION_CURRENT = keys.public_pem(ROTATION_KEY.public_key())


def run(
    root: Path, *args: str | Path, fsize: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The real floorctl in ``root/project``; with ``fsize``, no file may grow past it."""

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    done = subprocess.run(
        [sys.executable, "-m", "floorctl", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=root / "project",
        env=isolated_env(root / "state"),
        timeout=120,
        check=False,
        preexec_fn=limit,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr


@dataclass(frozen=True)
class Writer:
    """One output of one command: how to set the project up, the command, where it writes."""

    name: str
    prepare: Callable[[Path], None]
    args: Callable[[Path], list[str]]
    output: Callable[[Path], Path]
    victim: bytes = VICTIM_BYTES
    # The file-size limit that makes this output's write fail and nothing before it.
    fsize: int | None = 16


def _project(root: Path, *, anchored: bool = True, reset: bool = True) -> None:
    """A project whose dev key, chain and map archives exist, with the module reset to empty
    (so the next refresh is stale again and finds its maps already archived) and refresh's
    record of the maps it wrote there removed with it (else the reset is a hand edit)."""
    project = root / "project"
    (project / MODULE.parent).mkdir(parents=True)
    (project / MODULE).write_text(EMPTY_MODULE)
    (project / "feed.json").write_text(json.dumps({"schema_version": 1, "adapters": ENTRIES}))
    extra = ["--anchor"] if anchored else []
    ok(run(root, "refresh", "--feed", "feed.json", "--write", "--receipt-out", "r0", *extra))
    if reset:
        _reset(root)


def _large_chain(root: Path) -> None:
    """A chain whose export is larger than SQLite's 32 KiB shared-memory file, so that a
    file-size limit between the two lets the chain be read and fails the export's write."""
    _project(root)
    many = {f"adapter-{i:04d}": ENTRIES["aider"] for i in range(600)}
    (root / "project" / "big.json").write_text(json.dumps({"schema_version": 1, "adapters": many}))
    ok(run(root, "refresh", "--feed", "big.json", "--write", "--anchor"))


def _archive_name(root: Path) -> Path:
    name = floor_map_hash(from_entries(ENTRIES)).replace(":", "-") + ".json"
    return root / "project" / MODULE.parent / "maps" / name


def _fresh_archive(root: Path) -> None:
    _project(root)
    _archive_name(root).unlink()


def _state_feed(root: Path) -> None:
    _project(root)
    (root / "project" / "feed2.json").write_bytes(v2_feed(1))
    # Archive its map now (the default state file remembers it, not state.json).
    ok(run(root, "refresh", "--feed", "feed2.json", "--write"))
    _reset(root)


def _reset(root: Path) -> None:
    """The module emptied again, and refresh's record of the maps it wrote there with it."""
    (root / "project" / MODULE).write_text(EMPTY_MODULE)
    (root / "project" / MODULE.parent / "maps" / f".{MODULE.name}.written.json").unlink()


def _rotation(root: Path) -> None:
    _project(root)
    project = root / "project"
    (project / "current.json").write_bytes(ROTATION_CURRENT)
    _, _, public = new_key(root / "publisher")
    new = trusted_file(project / "new.json", 1, public)
    Path(f"{new}.dsse").write_bytes(
        trust.sign_file(new.read_bytes(), None, ROTATION_KEY, trust.TRUSTED_KEYS_PAYLOAD_TYPE)
    )


def _installed(root: Path) -> Path:
    return trust.installed_path({"FLOORCTL_HOME": str(root / "state" / "floorctl")})


REFRESH = ["refresh", "--feed", "feed.json", "--write"]
WRITERS = [
    Writer(
        "refresh --receipt-out",
        _project,
        lambda _: [*REFRESH, "--receipt-out", "receipt.json"],
        lambda root: root / "project" / "receipt.json",
    ),
    Writer("refresh maps archive", _fresh_archive, lambda _: REFRESH, _archive_name),
    Writer(
        "refresh freshness state",
        _state_feed,
        lambda _: ["refresh", "--feed", "feed2.json", "--write", "--state-file", "state.json"],
        lambda root: root / "project" / "state.json",
        STATE_VICTIM,
        # Not injectable: the state is written after the (larger) module.
        fsize=None,
    ),
    Writer(
        "chain export --out",
        _large_chain,
        lambda _: ["chain", "export", "--out", "slice.jsonl"],
        lambda root: root / "project" / "slice.jsonl",
        fsize=40_000,
    ),
    Writer(
        "chain export --checkpoint-out",
        _project,
        lambda _: ["chain", "export", "--checkpoint-out", "checkpoint.txt"],
        lambda root: root / "project" / "checkpoint.txt",
        # Not injectable: a limit below the small note also stops SQLite reading the chain.
        # The note goes through the same writer as the export (tested above).
        fsize=None,
    ),
    Writer(
        "chain checkpoint --out",
        _project,
        lambda _: ["chain", "checkpoint", "--out", "head.txt"],
        lambda root: root / "project" / "head.txt",
        fsize=None,  # as for --checkpoint-out
    ),
    Writer(
        "publish floor-map.json",
        lambda root: _project(root, anchored=False, reset=False),
        lambda _: ["publish", "--out", "pub"],
        lambda root: root / "project" / "pub" / "floor-map.json",
    ),
    Writer(
        "publish floor-map.json.dsse",
        lambda root: _project(root, anchored=False, reset=False),
        lambda _: ["publish", "--out", "pub"],
        lambda root: root / "project" / "pub" / "floor-map.json.dsse",
        # floor-map.json is written first and is smaller than its envelope.
        fsize=600,
    ),
    Writer(
        "sign FEED.dsse",
        lambda root: _project(root, anchored=False),
        lambda _: ["sign", "feed.json"],
        lambda root: root / "project" / "feed.json.dsse",
    ),
    Writer(
        "trust rotate",
        _rotation,
        lambda _: ["trust", "rotate", "--current", "current.json", "--new", "new.json"],
        _installed,
        ROTATION_CURRENT,
        # Not injectable: a dangling link where the keys belong is refused before any write
        # (the keys in force cannot be read; tests/feeds/test_trusted_keys.py).
        fsize=None,
    ),
]


FAILABLE = [w for w in WRITERS if w.fsize is not None]


def prepared(spec: Writer, tmp_path: Path) -> tuple[Path, Path]:
    """The project ``spec`` needs, under ``tmp_path/root``; and its output path."""
    root = tmp_path / "root"
    root.mkdir()
    spec.prepare(root)
    out = spec.output(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    return root, out


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".undo")))


@pytest.mark.parametrize("spec", WRITERS, ids=[w.name for w in WRITERS])
def test_refuses_to_overwrite_the_target_of_a_linked_output(spec: Writer, tmp_path: Path) -> None:
    root, out = prepared(spec, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(spec.victim)
    out.unlink(missing_ok=True)
    out.symlink_to(victim)
    ok(run(root, *spec.args(root)))
    assert victim.read_bytes() == spec.victim
    assert not out.is_symlink()
    assert out.is_file() and out.stat().st_size > 0
    assert leftovers(out.parent) == []


@pytest.mark.parametrize("spec", FAILABLE, ids=[w.name for w in FAILABLE])
def test_a_failed_write_keeps_a_dangling_link(spec: Writer, tmp_path: Path) -> None:
    root, out = prepared(spec, tmp_path)
    gone = tmp_path / "nowhere" / "gone.txt"
    out.unlink(missing_ok=True)
    out.symlink_to(gone)
    assert spec.fsize is not None
    done = run(root, *spec.args(root), fsize=spec.fsize)
    assert done.returncode == 1, done.stderr
    # The write that failed is this output's own (not some earlier step's).
    assert f"{out.name}: cannot write: File too large" in done.stderr, done.stderr
    assert out.is_symlink() and os.readlink(out) == str(gone)
    assert not gone.exists()
    assert leftovers(out.parent) == []


# --- fetch (a real HTTP server on loopback) ------------------------------------------------


@pytest.fixture
def server() -> Iterator[FeedServer]:
    running = FeedServer()
    yield running
    running.close()


@pytest.mark.parametrize("which", ["feed", "signature", "state"])
def test_fetch_refuses_to_overwrite_the_target_of_a_linked_output(
    server: FeedServer, tmp_path: Path, which: str
) -> None:
    key, _, public = new_key(tmp_path / "publisher")
    data = v2_feed(1)
    server.serve("/feed.json", data)
    server.serve("/feed.json.dsse", envelope(data, key))
    (tmp_path / "project").mkdir()
    outputs = {
        "feed": tmp_path / "project" / "feed.json",
        "signature": tmp_path / "project" / "feed.json.dsse",
        "state": tmp_path / "project" / "state.json",
    }
    victim = tmp_path / "victim.txt"
    victim.write_bytes(STATE_VICTIM if which == "state" else VICTIM_BYTES)
    outputs[which].symlink_to(victim)
    args = ["fetch", server.url("/feed.json"), "--out", "feed.json", "--state-file"]
    args += ["state.json", "--trusted-keys", str(public), "--require-signed"]
    ok(run(tmp_path, *args))
    assert victim.read_bytes() == (STATE_VICTIM if which == "state" else VICTIM_BYTES)
    assert not outputs[which].is_symlink() and outputs[which].is_file()
    assert outputs["feed"].read_bytes() == data


# --- one command's files: an output is never another file of the same command ------------

STATE_MODULE = str(MODULE)
SAME_FILE_REFRESHES = {
    "receipt-out is the state file": ["--receipt-out", "state.json"],
    "receipt-out is the feed": ["--receipt-out", "feed2.json"],
    "receipt-out is the module": ["--receipt-out", STATE_MODULE],
    "receipt-out is a hard link of the state file": ["--receipt-out", "hard.json"],
    "receipt-out through a link to the feed": ["--receipt-out", "soft.json"],
    "receipt-out is the signing key": ["--receipt-out", "k/signing.key"],
    "receipt-out is the feed's signature": ["--receipt-out", "feed2.json.dsse"],
    "state file is the module": ["--state-file", STATE_MODULE],
    "state file is the feed": ["--state-file", "feed2.json"],
    "state file is the waivers": ["--state-file", "waivers.json"],
    # What the refresh keeps beside the module by names of its own.
    "receipt-out is the refresh's journal": [
        "--receipt-out", str(MODULE.parent / f".{MODULE.name}.refresh.json"),
    ],
    "receipt-out is the refresh's undo copy": [
        "--receipt-out", str(MODULE.parent / f".{MODULE.name}.refresh.undo"),
    ],
    "receipt-out is the refresh's lock": [
        "--receipt-out", str(MODULE.parent / f".{MODULE.name}.lock"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("extra", SAME_FILE_REFRESHES.values(), ids=SAME_FILE_REFRESHES.keys())
def test_refresh_refuses_an_output_that_is_another_of_its_files(
    tmp_path: Path, extra: list[str]
) -> None:
    # One would overwrite the other: the receipt replaced by the feed state, a feed by it.
    _project(tmp_path)
    project = tmp_path / "project"
    (project / "feed2.json").write_bytes(v2_feed(1))
    (project / "state.json").write_bytes(STATE_VICTIM)
    (project / "waivers.json").write_text('{"schema_version": 1, "waivers": []}\n')
    os.link(project / "state.json", project / "hard.json")
    (project / "soft.json").symlink_to("feed2.json")
    ok(run(tmp_path, "keygen", "--out", "k"))
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    args = ["refresh", "--feed", "feed2.json", "--write", "--state-file", "state.json"]
    args += ["--waivers", "waivers.json", "--signing-key", "k/signing.key", *extra]
    done = run(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert "is the same file as" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("output", ["--receipt-out", "--state-file"])
def test_refresh_refuses_an_output_in_the_map_archive(tmp_path: Path, output: str) -> None:
    # The archive's names are hashes known only once planned: a receipt there could replace
    # the very map it names, which then no longer hashes to its name.
    _project(tmp_path)
    project = tmp_path / "project"
    (project / "feed2.json").write_bytes(v2_feed(1))
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    done = run(tmp_path, "refresh", "--feed", "feed2.json", "--write", output,
               str(MODULE.parent / "maps" / "any.json"))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "which holds the maps that receipts name" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


def test_refresh_refuses_a_receipt_in_the_map_archive_reached_through_a_bind_mount(
    tmp_path: Path,
) -> None:
    _project(tmp_path)
    project = tmp_path / "project"
    (project / "feed2.json").write_bytes(v2_feed(1))
    alias = tmp_path / "alias"
    alias.mkdir()
    maps = project / MODULE.parent / "maps"
    if subprocess.run(["mount", "--bind", str(maps), str(alias)], capture_output=True,
                      check=False).returncode != 0:  # fmt: skip
        pytest.skip("no bind mount here (needs CAP_SYS_ADMIN)")
    try:
        before = {p: p.read_bytes() for p in maps.iterdir()}
        done = run(tmp_path, "refresh", "--feed", "feed2.json", "--write", "--receipt-out",
                   str(alias / "any.json"))  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "which holds the maps that receipts name" in done.stderr, done.stderr
        assert {p: p.read_bytes() for p in maps.iterdir()} == before
        deeper = run(tmp_path, "refresh", "--feed", "feed2.json", "--write", "--state-file",
                     str(maps / "sub" / "state.json"))  # fmt: skip
        assert deeper.returncode == 2, deeper.stderr
    finally:
        subprocess.run(["umount", str(alias)], check=False)


def test_refresh_refuses_a_receipt_over_the_development_key(tmp_path: Path) -> None:
    _project(tmp_path)  # signs with the development key, which it creates
    dev_key = tmp_path / "state" / "floorctl" / "dev-key" / "signing.key"
    before = dev_key.read_bytes()
    done = run(tmp_path, *REFRESH, "--receipt-out", dev_key)
    assert done.returncode == 2, done.stderr
    assert f"--receipt-out {dev_key} is the same file as --signing-key" in done.stderr
    assert dev_key.read_bytes() == before


@pytest.mark.parametrize(
    "args",
    [
        ["--out", "state.json", "--state-file", "state.json"],
        ["--out", "feed.json", "--state-file", "feed.json.dsse"],
        ["--out", "trusted.pem", "--state-file", "state.json", "--trusted-keys", "trusted.pem"],
    ],
    ids=["out is the state file", "signature is the state file", "out is the trusted keys"],
)
def test_fetch_refuses_an_output_that_is_another_of_its_files(
    server: FeedServer, tmp_path: Path, args: list[str]
) -> None:
    key, _, public = new_key(tmp_path / "publisher")
    data = v2_feed(1)
    server.serve("/feed.json", data)
    server.serve("/feed.json.dsse", envelope(data, key))
    project = tmp_path / "project"
    project.mkdir()
    (project / "trusted.pem").write_bytes(public.read_bytes())
    done = run(tmp_path, "fetch", server.url("/feed.json"), *args)
    assert done.returncode == 2, done.stderr
    assert "is the same file as" in done.stderr, done.stderr
    assert sorted(p.name for p in project.iterdir()) == ["trusted.pem"]
    assert (project / "trusted.pem").read_bytes() == public.read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        ["chain", "export", "--out", "s.jsonl", "--checkpoint-out", "s.jsonl"],
        ["chain", "export", "--checkpoint-out", "c.txt", "--inclusion-out", "./c.txt"],
        ["chain", "prove", "--seq", "0", "--checkpoint", "head.cp", "--out", "head.cp"],
        ["chain", "consistency", "--old", "head.cp", "--out", "head.cp"],
    ],
    ids=["export and its checkpoint", "checkpoint and its proof", "prove", "consistency"],
)
def test_chain_commands_refuse_an_output_that_is_another_of_their_files(
    tmp_path: Path, args: list[str]
) -> None:
    # One output written over another (the slice replaced by its checkpoint), or a proof
    # written over the checkpoint it was made against, which a verifier then lacks.
    _project(tmp_path)
    project = tmp_path / "project"
    ok(run(tmp_path, "chain", "checkpoint", "--out", "head.cp"))
    checkpoint_text = (project / "head.cp").read_bytes()
    before = sorted(p.name for p in project.iterdir())
    done = run(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert "is the same file as" in done.stderr, done.stderr
    assert sorted(p.name for p in project.iterdir()) == before
    assert (project / "head.cp").read_bytes() == checkpoint_text


def test_refresh_and_fetch_accept_distinct_files_in_one_folder(
    server: FeedServer, tmp_path: Path
) -> None:
    # Positive control: a feed, its state and the receipt side by side, all distinct.
    _project(tmp_path)
    data = v2_feed(1)
    server.serve("/feed.json", data)
    ok(run(tmp_path, "fetch", server.url("/feed.json"), "--out", "f.json",
           "--state-file", "state.json"))  # fmt: skip
    (tmp_path / "project" / "state.json").unlink()
    ok(run(tmp_path, "refresh", "--feed", "f.json", "--write", "--state-file", "state.json",
           "--receipt-out", "receipt.json"))  # fmt: skip


# --- keygen: never overwrites anything, a link included ---------------------------------


@pytest.mark.parametrize("name", ["signing.key", "signing.pub"])
def test_keygen_refuses_a_link_at_a_key_name(tmp_path: Path, name: str) -> None:
    (tmp_path / "project").mkdir()
    keys_dir = tmp_path / "project" / "keys"
    keys_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_BYTES)
    (keys_dir / name).symlink_to(victim)
    done = run(tmp_path, "keygen", "--out", "keys")
    assert done.returncode == 1, done.stderr
    assert "already exists; refusing to overwrite a key" in done.stderr
    assert victim.read_bytes() == VICTIM_BYTES
    assert (keys_dir / name).is_symlink()


def test_keygen_refuses_a_dangling_link_at_the_key_name(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    keys_dir = tmp_path / "project" / "keys"
    keys_dir.mkdir()
    gone = tmp_path / "gone.key"
    (keys_dir / "signing.key").symlink_to(gone)
    done = run(tmp_path, "keygen", "--out", "keys")
    assert done.returncode == 1, done.stderr
    assert "already exists" in done.stderr
    assert not gone.exists()
    assert os.readlink(keys_dir / "signing.key") == str(gone)


def test_an_output_in_a_folder_that_does_not_exist_names_the_folder(tmp_path: Path) -> None:
    _project(tmp_path)
    before = (tmp_path / "project" / MODULE).read_bytes()
    done = run(tmp_path, *REFRESH, "--receipt-out", "missing/receipt.json")
    assert done.returncode == 1, done.stderr
    assert "cannot write: the folder missing does not exist" in done.stderr, done.stderr
    assert (tmp_path / "project" / MODULE).read_bytes() == before


def test_keygen_that_fails_to_write_leaves_no_partial_key(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    done = run(tmp_path, "keygen", "--out", "keys", fsize=16)
    assert done.returncode == 1, done.stderr
    assert "signing.key: cannot write: File too large" in done.stderr
    assert sorted(os.listdir(tmp_path / "project" / "keys")) == []


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    ok(run(tmp_path, "keygen", "--out", "keys"))
    keys_dir = tmp_path / "project" / "keys"
    assert (keys_dir / "signing.key").stat().st_mode & 0o777 == 0o600
    assert (keys_dir / "signing.pub").stat().st_mode & 0o777 == 0o644


# --- the module: a link (symbolic or hard) is refused ---------------------------------------


def test_refuses_to_write_a_module_that_is_a_link(tmp_path: Path) -> None:
    _project(tmp_path)
    project = tmp_path / "project"
    real = tmp_path / "elsewhere.py"
    real.write_text(EMPTY_MODULE)
    (project / MODULE).unlink()
    (project / MODULE).symlink_to(real)
    done = run(tmp_path, *REFRESH, "--receipt-out", "receipt.json")
    assert done.returncode == 1
    assert "is a symbolic link; refusing to write through it" in done.stderr
    assert real.read_text() == EMPTY_MODULE
    assert (project / MODULE).is_symlink()
    assert not (project / "receipt.json").exists()
    # Reading through it stays allowed: a dry run and --check only read.
    assert run(tmp_path, "refresh", "--feed", "feed.json", "--check").returncode == 1


def test_refuses_to_write_a_module_that_has_another_hard_link(tmp_path: Path) -> None:
    # Replacing the module by a rename would detach the other name, which keeps the old map.
    _project(tmp_path)
    project = tmp_path / "project"
    other = project / "vendored_floor_map.py"
    os.link(project / MODULE, other)
    archives = sorted((project / MODULE.parent / "maps").iterdir())
    done = run(tmp_path, *REFRESH, "--receipt-out", "receipt.json")
    assert done.returncode == 1
    assert f"{MODULE}: has 2 hard links; refusing to replace it" in done.stderr, done.stderr
    assert (project / MODULE).read_text() == EMPTY_MODULE
    assert os.path.samefile(project / MODULE, other)
    assert not (project / "receipt.json").exists()
    assert sorted((project / MODULE.parent / "maps").iterdir()) == archives
    assert leftovers(project / MODULE.parent) == []
    # Reading through it stays allowed: a dry run and --check only read.
    assert run(tmp_path, "refresh", "--feed", "feed.json", "--check").returncode == 1
    # With the other name gone, the module is written.
    other.unlink()
    ok(run(tmp_path, *REFRESH, "--receipt-out", "receipt.json"))


def test_a_failed_module_write_puts_the_receipt_link_back(tmp_path: Path) -> None:
    """The receipt is written first; when the module write then fails, the undo must put
    back what was at the receipt's name (here a dangling link), not delete it."""
    _project(tmp_path)
    project = tmp_path / "project"
    gone = tmp_path / "gone.json"
    (project / "receipt.json").symlink_to(gone)
    # The module is far larger than a receipt: a limit between the two fails the module.
    (project / MODULE).write_text(EMPTY_MODULE + "#" * 200_000 + "\n")
    done = run(tmp_path, *REFRESH, "--receipt-out", "receipt.json", fsize=100_000)
    assert done.returncode == 1, done.stderr
    assert "floor_map.py: cannot write: File too large" in done.stderr
    assert (project / "receipt.json").is_symlink()
    assert os.readlink(project / "receipt.json") == str(gone)
    assert not gone.exists()
    assert (project / MODULE).read_text().startswith(EMPTY_MODULE)
    assert leftovers(project) == []
    assert leftovers(project / MODULE.parent) == []
