"""A refresh or publish killed (kill -9) at a chosen moment is recovered: a committed refresh
is never undone, no undo copy is left or taken for another module's, a receipt never
replaces the module, and a map and its signature are in place together or not at all.

The kill is a real SIGKILL that the process sends itself from a ``sitecustomize`` hook (the
only way to hit a window of a few microseconds without timing assertions)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl

from floorctl import render

REPO = Path(__file__).resolve().parents[2]

EMPTY_MODULE = '"""host module"""\n\n# floor-map:begin\n# floor-map:end\n'

UPDATE = "adapter.floor_update_receipt"

KILL_HOOK = r"""
import os, signal
_spec = os.environ.get("TEST_KILL_AT")
if _spec:
    _kind, _, _name = _spec.partition(":")
    _replace, _unlink = os.replace, os.unlink

    def _die():
        os.kill(os.getpid(), signal.SIGKILL)

    def replace(src, dst, *args, **kwargs):
        # "replace:NAME": killed just before the rename over NAME
        if _kind == "replace" and os.path.basename(os.fspath(dst)) == _name:
            _die()
        done = _replace(src, dst, *args, **kwargs)
        # "replaced:NAME": killed just after the rename over NAME
        if _kind == "replaced" and os.path.basename(os.fspath(dst)) == _name:
            _die()
        return done

    def unlink(path, *args, **kwargs):
        # "discard:NAME": killed just before an undo copy of NAME is dropped
        base = os.path.basename(os.fspath(path))
        if _kind == "discard" and base.startswith("." + _name + ".") and base.endswith(".undo"):
            _die()
        return _unlink(path, *args, **kwargs)

    _link = os.link

    def link(src, dst, *args, **kwargs):
        # "link:NAME": killed just before an undo copy of NAME is made
        if _kind == "link" and os.path.basename(os.fspath(src)) == _name:
            _die()
        return _link(src, dst, *args, **kwargs)

    os.replace, os.unlink, os.link = replace, unlink, link
"""


def kill_hook(tmp_path: Path) -> Path:
    folder = tmp_path / "killhook"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(KILL_HOOK)
    return folder


def killed_floorctl(
    tmp_path: Path, at: str, *args: str | Path, cwd: Path, state: Path
) -> subprocess.CompletedProcess[str]:
    """floorctl, SIGKILLed by itself at the moment ``at`` names."""
    done = floorctl(
        *args, cwd=cwd, state=state, PYTHONPATH=str(kill_hook(tmp_path)), TEST_KILL_AT=at
    )
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr)
    return done


def feed_v1(**floors: str) -> str:
    adapters = {
        name: {"min_safe_version": value, "advisory_id": "BSA-0001", "note": "n"}
        for name, value in floors.items()
    }
    return json.dumps({"schema_version": 1, "adapters": adapters})


def chain_updates(project: Path, state: Path) -> list[dict[str, Any]]:
    done = floorctl("chain", "export", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [r["receipt"] for r in records if r["event"] == UPDATE]


def ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr


# --- a refresh killed, and the next one -----------------------------------------------------------


def test_a_committed_refresh_is_not_undone_because_another_module_anchored_since(
    tmp_path: Path,
) -> None:
    """README: "if the chain's last update receipt moved the map from the kept copy to the
    module's map, the copy is dropped". Every module shares one chain, so "the last update
    receipt" is another module's as soon as that one refreshes. m1's refresh to aider 0.70
    is killed after its chain append (only the undo copy is left); m2 then refreshes; the
    next refresh of m1 must not put back the pre-0.70 map that the chain records as
    superseded and plan from it (a feed lowering aider to 0.65 would pass without
    --allow-downgrade)."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    for name in ("m1.py", "m2.py"):
        (project / name).write_text(EMPTY_MODULE)
    (project / "a.json").write_text(feed_v1(aider="0.60.0"))
    (project / "b.json").write_text(feed_v1(aider="0.70.0"))
    (project / "c.json").write_text(feed_v1(aider="0.65.0"))
    (project / "x.json").write_text(feed_v1(claude="1.0.0"))

    def refresh(feed: str, module: str) -> subprocess.CompletedProcess[str]:
        return floorctl(
            "refresh", "--feed", feed, "--module", module, "--write", "--anchor",
            cwd=project, state=state,
        )  # fmt: skip

    ok(refresh("a.json", "m1.py"))
    killed_floorctl(
        tmp_path, "discard:m1.py",
        "refresh", "--feed", "b.json", "--module", "m1.py", "--write", "--anchor",
        cwd=project, state=state,
    )  # fmt: skip
    assert chain_updates(project, state)[-1]["new_floor_map"]["aider"]["min_safe_version"] == (
        "0.70.0"
    ), "the killed refresh should have anchored its update before the kill"
    ok(refresh("x.json", "m2.py"))

    lowered = refresh("c.json", "m1.py")
    assert lowered.returncode == 1, (
        "aider's floor lowered from the anchored 0.70.0 to 0.65.0 without --allow-downgrade: "
        + lowered.stderr
    )
    assert '"0.70.0"' in (project / "m1.py").read_text()


def test_the_next_refresh_leaves_no_undo_copy_of_a_refresh_killed_before_its_rename(
    tmp_path: Path,
) -> None:
    """A refresh killed after keeping its undo copy (a hard link of the module) but before
    renaming the new module over it. The next refresh "puts back the map from before an
    interrupted refresh"; rename(2) of two links to one file does nothing, so the copy must
    be removed explicitly, or it stays holding the old map and a later refresh restores it.
    README: "is finished or undone by the next refresh"."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    (project / "a.json").write_text(feed_v1(aider="0.60.0"))
    (project / "b.json").write_text(feed_v1(aider="0.70.0"))
    args = ["--module", "m.py", "--write", "--anchor"]
    ok(floorctl("refresh", "--feed", "a.json", *args, cwd=project, state=state))
    killed_floorctl(
        tmp_path, "replace:m.py", "refresh", "--feed", "b.json", *args, cwd=project, state=state
    )
    again = floorctl("refresh", "--feed", "b.json", *args, cwd=project, state=state)
    ok(again)
    left = sorted(p.name for p in project.iterdir() if p.name.endswith(".undo"))
    assert left == [], f"undo copies left after the recovering refresh: {left}; {again.stderr}"


def module_version(module: Path) -> tuple[int, str | None]:
    """The map version and stated hash of the floor-map block in ``module``."""
    _, block = render.read_module(module.read_text(), str(module))
    return block.map_version, block.stated_hash


def _killed_once_in_force(tmp_path: Path, *extra: str) -> tuple[Path, Path, list[str]]:
    """A project whose map 1 (a.json) is anchored, then a refresh to b.json (with ``extra``
    flags) killed once the module holds its map 2, before the chain append: (project, state,
    refresh's flags). Also c.json (a newer map) and low.json (an older one)."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    for name, floor in (("a", "0.60.0"), ("b", "0.70.0"), ("c", "0.75.0"), ("low", "0.50.0")):
        (project / f"{name}.json").write_text(feed_v1(aider=floor))
    args = ["--module", "m.py", "--write", "--anchor"]
    ok(floorctl("refresh", "--feed", "a.json", *args, cwd=project, state=state))
    killed_floorctl(
        tmp_path, "replaced:m.py", "refresh", "--feed", "b.json", *args, *extra, cwd=project,
        state=state,
    )  # fmt: skip
    return project, state, args


@pytest.mark.parametrize("then", ["newer map", "killed map again", "old map again"])
def test_a_map_version_killed_in_force_is_never_reused_for_another_map(
    tmp_path: Path, then: str
) -> None:
    """A refresh killed after writing the module (map version 2), before its chain append:
    that unrecorded map was in force, and a host enforcing the module kept (2, its hash).
    The next refresh puts map 1 back; its own map must then be numbered above 2, or a host
    that took the killed map refuses the new one as "another map at version 2" (or map 1 as
    a rollback) on every spawn. Also when that next refresh first fails (a downgrade
    refused after the put-back): the one after it still numbers above 2."""
    project, state, args = _killed_once_in_force(tmp_path)
    killed_version, killed_hash = module_version(project / "m.py")
    assert killed_version == 2
    refused = floorctl("refresh", "--feed", "low.json", *args, cwd=project, state=state)
    assert refused.returncode == 1 and "put back" in refused.stderr, refused.stderr
    assert module_version(project / "m.py")[0] == 1
    feed = {"newer map": "c.json", "killed map again": "b.json", "old map again": "a.json"}[then]
    ok(floorctl("refresh", "--feed", feed, *args, cwd=project, state=state))
    version, stated = module_version(project / "m.py")
    assert version > killed_version, (version, stated, killed_hash)
    assert [r["new_map_version"] for r in chain_updates(project, state)] == [1, version]
    assert sorted(p.name for p in project.glob(".m.py.refresh.*")) == []


def test_a_map_version_put_back_after_a_failed_chain_append_is_never_reused(
    tmp_path: Path,
) -> None:
    """The chain append fails after the module holds map 2 (here: a view planted in the
    chain's database, which floorguard refuses to append to); the refresh puts map 1 back.
    Map 2 was in force meanwhile, so the next map, once the chain is sound, is numbered
    above 2, never 2 again."""
    import sqlite3

    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    (project / "a.json").write_text(feed_v1(aider="0.60.0"))
    (project / "b.json").write_text(feed_v1(aider="0.70.0"))
    (project / "c.json").write_text(feed_v1(aider="0.75.0"))
    args = ["--module", "m.py", "--write", "--anchor"]
    ok(floorctl("refresh", "--feed", "a.json", *args, cwd=project, state=state))
    database = state / "floorguard" / "chain.sqlite3"
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("CREATE VIEW planted AS SELECT 1")
        conn.commit()
    failed = floorctl("refresh", "--feed", "b.json", *args, cwd=project, state=state)
    assert failed.returncode == 1, failed.stderr
    assert module_version(project / "m.py")[0] == 1
    with contextlib.closing(sqlite3.connect(database)) as conn:
        conn.execute("DROP VIEW planted")
        conn.commit()
    ok(floorctl("refresh", "--feed", "c.json", *args, cwd=project, state=state))
    assert module_version(project / "m.py")[0] > 2
    assert sorted(p.name for p in project.glob(".m.py.refresh.*")) == []


def test_check_reports_a_module_stale_while_a_killed_refresh_awaits_recovery(
    tmp_path: Path,
) -> None:
    """After a refresh killed once the module is written, the module holds the feeds' map
    (so it looks in sync), but the chain never recorded it; after a recovery that put map
    1 back, map 1 is what the feeds say, but a host that enforced the killed map 2 refuses
    it. Either way `--check` must not say in sync: the next `--write` changes the module."""
    project, state, args = _killed_once_in_force(tmp_path)
    check = ["--module", "m.py", "--check"]
    stale = floorctl("refresh", "--feed", "b.json", *check, cwd=project, state=state)
    assert stale.returncode == 1 and "interrupted" in stale.stderr, stale.stderr
    floorctl("refresh", "--feed", "low.json", *args, cwd=project, state=state)  # puts 1 back
    assert module_version(project / "m.py")[0] == 1
    stale = floorctl("refresh", "--feed", "a.json", *check, cwd=project, state=state)
    assert stale.returncode == 1 and "interrupted" in stale.stderr, stale.stderr
    ok(floorctl("refresh", "--feed", "a.json", *args, cwd=project, state=state))
    ok(floorctl("refresh", "--feed", "a.json", *check, cwd=project, state=state))


def test_publish_refuses_a_module_whose_refresh_was_killed_until_it_is_recovered(
    tmp_path: Path,
) -> None:
    # The module holds a map the chain never recorded: publishing it would hand hosts the
    # very map the next refresh puts back.
    project, state, args = _killed_once_in_force(tmp_path)
    refused = floorctl("publish", "--module", "m.py", "--out", "pub", cwd=project, state=state)
    assert refused.returncode == 1 and "interrupted" in refused.stderr, refused.stderr
    assert not (project / "pub" / "floor-map.json").exists()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "m.py").symlink_to(project / "m.py")  # the module by a link
    linked = floorctl("publish", "--module", tmp_path / "elsewhere" / "m.py", "--out", "pub",
                      cwd=project, state=state)  # fmt: skip
    assert linked.returncode == 1 and "interrupted" in linked.stderr, linked.stderr
    ok(floorctl("refresh", "--feed", "b.json", *args, cwd=project, state=state))
    ok(floorctl("publish", "--module", "m.py", "--out", "pub", cwd=project, state=state))


def test_build_refuses_a_module_whose_refresh_was_killed_until_it_is_recovered(
    tmp_path: Path,
) -> None:
    # The killed refresh signed its receipt (--receipt-out) before it was killed: a package
    # built from it would carry, with signed provenance, a map the chain never recorded.
    project, state, args = _killed_once_in_force(tmp_path, "--receipt-out", "r2.json")
    assert (project / "r2.json").is_file()
    build = ("build", "--source", REPO / "generated", "--module", "m.py", "--receipt", "r2.json",
             "--out", "dist")  # fmt: skip
    refused = floorctl(*build, cwd=project, state=state)
    assert refused.returncode == 1 and "interrupted" in refused.stderr, refused.stderr
    assert "before building" in refused.stderr
    assert not (project / "dist").exists()
    ok(floorctl("refresh", "--feed", "b.json", *args, "--receipt-out", "r3.json", cwd=project,
                state=state))  # fmt: skip
    build = (*build[:-3], "r3.json", "--out", "dist")
    ok(floorctl(*build, cwd=project, state=state))


@pytest.mark.parametrize("command", ["publish", "build"])
def test_a_hard_link_made_of_a_killed_refreshs_module_is_refused_too(
    tmp_path: Path, command: str
) -> None:
    # Refresh keeps its journal beside the name it wrote: another name of the same file, in
    # another folder, carries the unrecorded map without it.
    project, state, _ = _killed_once_in_force(tmp_path, "--receipt-out", "r2.json")
    (project / "other").mkdir()
    os.link(project / "m.py", project / "other" / "m.py")
    args = {
        "publish": ("publish", "--module", "other/m.py", "--out", "pub"),
        "build": ("build", "--source", REPO / "generated", "--module", "other/m.py",
                  "--receipt", "r2.json", "--out", "dist"),
    }[command]  # fmt: skip
    refused = floorctl(*args, cwd=project, state=state)
    assert refused.returncode == 1 and "hard links" in refused.stderr, refused.stderr
    assert not (project / "pub").exists() and not (project / "dist").exists()


def test_publish_refuses_a_block_that_is_not_the_map_refresh_last_wrote(tmp_path: Path) -> None:
    # A hand edit restating its hash is a self-consistent block: only refresh's record of the
    # maps it wrote there tells it from the map the chain recorded.
    project, other = tmp_path / "p", tmp_path / "other"
    for folder, floor in ((project, "0.60.0"), (other, "0.40.0")):
        folder.mkdir()
        (folder / "m.py").write_text(EMPTY_MODULE)
        (folder / "f.json").write_text(feed_v1(aider=floor))
        ok(floorctl("refresh", "--feed", "f.json", "--module", "m.py", "--write", "--anchor",
                    cwd=folder, state=tmp_path / f"state-{folder.name}"))  # fmt: skip
    state = tmp_path / "state-p"
    (project / "m.py").write_bytes((other / "m.py").read_bytes())  # version 1, floor lowered
    refused = floorctl("publish", "--module", "m.py", "--out", "pub", cwd=project, state=state)
    assert refused.returncode == 1 and "not the map refresh last wrote" in refused.stderr
    assert not (project / "pub").exists()
    ok(floorctl("refresh", "--feed", "f.json", "--module", "m.py", "--write", "--force",
                "--anchor", cwd=project, state=state))  # fmt: skip
    ok(floorctl("publish", "--module", "m.py", "--out", "pub", cwd=project, state=state))


def test_a_refresh_does_not_take_another_modules_undo_copy_for_its_own(tmp_path: Path) -> None:
    """Several modules in one folder: `m.py` and a staging copy `m.py.staging`, each with its
    own lock. A refresh of the staging module is killed before its rename; its undo copy
    `.m.py.staging.<hex>.undo` would match a glob `.m.py.*.undo` of m.py's recovery: the
    next refresh of m.py must not replace m.py by the staging module's old text."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text('"""PRODUCTION"""\n\n# floor-map:begin\n# floor-map:end\n')
    (project / "m.py.staging").write_text('"""STAGING"""\n\n# floor-map:begin\n# floor-map:end\n')
    (project / "a.json").write_text(feed_v1(aider="0.60.0"))
    (project / "b.json").write_text(feed_v1(aider="0.70.0"))
    ok(floorctl("refresh", "--feed", "a.json", "--module", "m.py", "--write", cwd=project,
                state=state))  # fmt: skip
    ok(floorctl("refresh", "--feed", "a.json", "--module", "m.py.staging", "--write",
                cwd=project, state=state))  # fmt: skip
    killed_floorctl(
        tmp_path, "replace:m.py.staging",
        "refresh", "--feed", "b.json", "--module", "m.py.staging", "--write",
        cwd=project, state=state,
    )  # fmt: skip
    floorctl("refresh", "--feed", "b.json", "--module", "m.py", "--write", cwd=project,
             state=state)  # fmt: skip
    text = (project / "m.py").read_text()
    assert text.startswith('"""PRODUCTION"""'), f"m.py now holds another module's text:\n{text}"


def test_recovery_never_puts_a_receipt_in_place_of_the_module(tmp_path: Path) -> None:
    """The receipt written beside the module as `m.py.receipt.json` is kept for undo as
    `.m.py.receipt.json.<hex>.undo`, which a recovery glob `.m.py.*.undo` would also match.
    A refresh killed after keeping the receipt's copy (before the module's) must not make
    the next refresh "put back" the old receipt, a DSSE envelope, as the module (every host
    importing it would break, and that refresh fail on a module without markers)."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    (project / "a.json").write_text(feed_v1(aider="0.60.0"))
    (project / "b.json").write_text(feed_v1(aider="0.70.0"))
    args = ["--module", "m.py", "--write", "--anchor", "--receipt-out", "m.py.receipt.json"]
    ok(floorctl("refresh", "--feed", "a.json", *args, cwd=project, state=state))
    killed_floorctl(
        tmp_path, "link:m.py", "refresh", "--feed", "b.json", *args, cwd=project, state=state
    )
    floorctl("refresh", "--feed", "b.json", *args, cwd=project, state=state)
    text = (project / "m.py").read_text()
    assert "# floor-map:begin" in text, f"m.py was replaced by a receipt:\n{text[:200]}"


# --- a map and its signature: together or not at all ----------------------------------------------


def test_a_publish_killed_between_its_two_renames_is_refused_then_repaired(
    tmp_path: Path,
) -> None:
    """publish renames floor-map.json, then floor-map.json.dsse; killed between the two
    (kill -9, power loss) the new map sits beside the old signature. That pair must never
    verify (hosts refuse it), and the next publish must leave a matching pair and no copies
    behind: the README's both-or-neither holds for kills too, and no copy stays for ever."""
    project, state = tmp_path / "p", tmp_path / "s"
    project.mkdir()
    (project / "m.py").write_text(EMPTY_MODULE)
    (project / "a.json").write_text(feed_v1(aider="0.60.0"))
    (project / "b.json").write_text(feed_v1(aider="0.70.0"))
    ok(floorctl("refresh", "--feed", "a.json", "--module", "m.py", "--write", cwd=project,
                state=state))  # fmt: skip
    ok(floorctl("keygen", "--out", "k", cwd=project, state=state))
    publish = ["publish", "--out", "out", "--module", "m.py", "--signing-key", "k/signing.key"]
    ok(floorctl(*publish, cwd=project, state=state))
    ok(floorctl("refresh", "--feed", "b.json", "--module", "m.py", "--write", cwd=project,
                state=state))  # fmt: skip
    killed_floorctl(tmp_path, "replace:floor-map.json.dsse", *publish, cwd=project, state=state)
    from floorguard._crypto import dsse
    from floorguard._crypto.trust import parse_trusted_keys
    from floorguard._maps import published_map
    from floorguard.errors import FloorguardError

    out = project / "out"
    trusted = parse_trusted_keys((project / "k" / "signing.pub").read_bytes(), "k/signing.pub")

    def pair_verifies() -> bool:
        data = (out / "floor-map.json").read_bytes()
        envelope = dsse.parse_envelope((out / "floor-map.json.dsse").read_bytes())
        try:
            dsse.verify(envelope, trusted.keys, payload_type=published_map.PAYLOAD_TYPE)
        except FloorguardError:
            return False
        return envelope.payload == data

    assert not pair_verifies(), "a half-written pair must never verify"
    ok(floorctl(*publish, cwd=project, state=state))
    assert pair_verifies()
    assert [p.name for p in out.iterdir() if p.name.endswith(".undo")] == []
