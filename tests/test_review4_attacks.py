"""Attacks from the fourth outside review (issue 9): crash recovery of refresh, paired
writes, the Python import search order the gate emulates, and one-line error output.

Each test asserts a promise of the README; each one fails on the code it was written
against (the attack succeeds). Real CLIs and hosts in subprocesses, real files; a kill -9 at
a chosen moment is a real SIGKILL that the process sends itself from a ``sitecustomize``
hook (the only way to hit a window of a few microseconds without timing assertions).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import floorctl, isolated_env
from hosts import Host, floor
from probes import pip_install, site_packages, write_executable

EMPTY_MODULE = '"""host module"""\n\n# floor-map:begin\n# floor-map:end\n'
UPDATE = "adapter.floor_update_receipt"

# --------------------------------------------------------------------------- kill -9 hook

KILL_HOOK = r"""
import os, signal
_spec = os.environ.get("REVIEW4_KILL")
if _spec:
    _kind, _, _name = _spec.partition(":")
    _replace, _unlink = os.replace, os.unlink

    def _die():
        os.kill(os.getpid(), signal.SIGKILL)

    def replace(src, dst, *args, **kwargs):
        # "replace:NAME": killed just before the rename over NAME
        if _kind == "replace" and os.path.basename(os.fspath(dst)) == _name:
            _die()
        return _replace(src, dst, *args, **kwargs)

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
        *args, cwd=cwd, state=state, PYTHONPATH=str(kill_hook(tmp_path)), REVIEW4_KILL=at
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


# --------------------------------------------------- 1. recovery of an interrupted refresh


def test_a_committed_refresh_is_not_undone_because_another_module_anchored_since(
    tmp_path: Path,
) -> None:
    """README: "if the chain's last update receipt moved the map from the kept copy to the
    module's map, the copy is dropped". Every module shares one chain, so "the last update
    receipt" is another module's as soon as that one refreshes. m1's refresh to aider 0.70
    is killed after its chain append (only the undo copy is left); m2 then refreshes; the
    next refresh of m1 puts back the pre-0.70 map that the chain records as superseded, and
    plans from it: a feed lowering aider to 0.65 passes without --allow-downgrade."""
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
    renaming the new module over it. The next refresh says it "put back the map from
    before an interrupted refresh", but rename(2) of two links to one file does nothing:
    the copy stays, holding the old map, and a later refresh restores it. README: "is
    finished or undone by the next refresh"."""
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


def test_a_refresh_does_not_take_another_modules_undo_copy_for_its_own(tmp_path: Path) -> None:
    """Several modules in one folder: `m.py` and a staging copy `m.py.staging`, each with
    its own lock. A refresh of the staging module is killed before its rename; its undo
    copy `.m.py.staging.<hex>.undo` matches the glob `.m.py.*.undo` of m.py's recovery,
    so the next refresh of m.py replaces m.py by the staging module's old text."""
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
    `.m.py.receipt.json.<hex>.undo`, which m.py's recovery glob `.m.py.*.undo` also
    matches. A refresh killed after keeping the receipt's copy (before the module's) makes
    the next refresh "put back" the old receipt, a DSSE envelope, as the module: every
    host importing it breaks, and that refresh then fails on a module without markers."""
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


# ------------------------------------------- 2. a file and its signature: together or not


def test_a_publish_killed_between_its_two_renames_is_refused_then_repaired(
    tmp_path: Path,
) -> None:
    """publish renames floor-map.json, then floor-map.json.dsse; killed between the two
    (kill -9, power loss) the new map sits beside the old signature. That pair must never
    verify (hosts refuse it), and the next publish must leave a matching pair and no copies
    behind. (Review 4 found the README claiming both-or-neither for kills too, and the
    copies left for ever.)"""
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
    from floorguard import dsse, published_map
    from floorguard.errors import FloorguardError
    from floorguard.trust import parse_trusted_keys

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


# ------------------------------------------------- 3. the import search order, emulated


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "h", {"aider": floor("0.60.0")})


def _good_and_bad(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """aider-chat 0.70.0 installed in a venv (its console script), and a copy of an
    installed aider-chat 0.50.0 (package and dist-info) to vendor somewhere."""
    good_marker, bad_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(
        tmp_path / "good", dist="aider-chat", module="aider", version="0.70.0", marker=good_marker
    )
    pip_install(
        tmp_path / "bad", dist="aider-chat", module="aider", version="0.50.0", marker=bad_marker
    )
    return script, good_marker, site_packages(tmp_path / "bad"), bad_marker


def _vendor(bad_site: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for entry in bad_site.iterdir():
        if entry.name.startswith(("aider", "aider_chat")):
            shutil.copytree(entry, into / entry.name)


@pytest.mark.parametrize("pythonpath", ["vendor", os.pathsep + "/nonexistent"])
def test_relative_and_empty_pythonpath_entries_are_resolved_as_the_interpreter_does(
    host: Host, tmp_path: Path, pythonpath: str
) -> None:
    """README: the import "is resolved in the child's sys.path order as CPython builds it
    (...; PYTHONPATH; ...)". CPython keeps a relative PYTHONPATH entry (made absolute
    against the working directory) and turns an empty one into the working directory; the
    gate drops both. The console script of aider 0.70.0 then imports a vendored 0.50.0."""
    script, _, bad_site, bad_marker = _good_and_bad(tmp_path)
    workspace = tmp_path / "workspace"
    _vendor(bad_site, workspace / "vendor" if pythonpath == "vendor" else workspace)
    host.spawn(
        adapter="aider", binary=str(script), argv=["task"], cwd=str(workspace),
        child_env={"PYTHONPATH": pythonpath},
    )  # fmt: skip
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


def test_options_on_a_shebang_line_are_one_argument_as_the_kernel_passes_them(
    host: Host, tmp_path: Path
) -> None:
    """README: "-I, -E, -s, -S and PYTHONNOUSERSITE, also on a #! line, drop what they
    drop". Linux passes everything after the interpreter on a #! line as ONE argument:
    `#!/venv/bin/python -X utf8 -I` runs python with the -X option " utf8 -I", not
    isolated. The gate splits the line into words, believes -I, drops the script's folder
    from the search and judges the venv's aider 0.70.0; the script imports the 0.50.0
    beside it."""
    _, _, bad_site, bad_marker = _good_and_bad(tmp_path)
    tools = tmp_path / "tools"
    _vendor(bad_site, tools)
    python = tmp_path / "good" / "bin" / "python"
    runner = write_executable(
        tools / "run-agent",
        f"#!{python} -X utf8 -I\nimport sys\nfrom aider.main import main\nsys.exit(main())\n",
    )
    probe = subprocess.run([str(runner), "task"], capture_output=True, text=True, check=False)
    assert probe.returncode == 0 and bad_marker.exists(), probe.stderr  # what really runs
    bad_marker.unlink()
    host.spawn(adapter="aider", binary=str(runner), argv=["task"])
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


TWO_SPAWNS = r"""
import json, os, sys
import floorguard
request = json.loads(sys.argv[1])
results = []
for extra in request["envs"]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    env.update(extra)
    try:
        child = floorguard.spawn("aider", ["task"], binary=request["binary"], env=env, stdout=-3)
        child.wait(timeout=60)
        results.append("started")
    except floorguard.SpawnRefused as exc:
        results.append("refused")
print(json.dumps(results))
"""


def test_a_long_lived_host_does_not_reuse_an_import_answer_across_pythonsafepath(
    host: Host, tmp_path: Path
) -> None:
    """README: "an answer read from metadata is reused only while every metadata file and
    folder it consulted is unchanged", and the search honours PYTHONSAFEPATH. A host spawns
    a script that imports aider twice: first with PYTHONSAFEPATH=1 (the venv's 0.70.0 is
    imported: permit, correctly), then without it (the script's folder, holding 0.50.0,
    comes first). The second answer is the first one, from a cache keyed on PATH,
    PYTHONPATH and HOME only."""
    _, _, bad_site, bad_marker = _good_and_bad(tmp_path)
    tools = tmp_path / "tools"
    _vendor(bad_site, tools)
    python = tmp_path / "good" / "bin" / "python"
    runner = write_executable(
        tools / "run-agent", f"#!{python}\nimport sys\nfrom aider.main import main\nmain()\n"
    )
    request = {"binary": str(runner), "envs": [{"PYTHONSAFEPATH": "1"}, {}]}
    done = host.python("-c", TWO_SPAWNS, json.dumps(request))
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results[0] == "started", results
    assert not bad_marker.exists(), f"aider 0.50.0 ran on the second spawn: {results}"


def _plain_interpreter(prefix: Path) -> Path | None:
    """A non-venv interpreter at ``prefix`` (a copy of this one, standard library linked
    in, empty site-packages), as a system Python is laid out; None if it cannot be."""
    import glob

    real = Path(os.path.realpath(sys.executable))
    stdlib = Path(sys.base_prefix) / "lib" / f"python3.{sys.version_info[1]}"
    (prefix / "bin").mkdir(parents=True)
    lib = prefix / "lib" / stdlib.name
    (lib / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            os.symlink(entry, lib / entry.name)
    for shared in glob.glob(str(Path(sys.base_prefix) / "lib" / "libpython*")):
        os.symlink(shared, prefix / "lib" / Path(shared).name)
    python = prefix / "bin" / real.name
    shutil.copy2(real, python)
    os.symlink(python.name, prefix / "bin" / "python")
    done = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return python if done.stdout.strip() == str(prefix) else None


def test_pythonhome_moves_the_site_packages_the_interpreter_imports_from(
    host: Host, tmp_path: Path
) -> None:
    """PYTHONHOME (which the gate even hands its probe "so the probe loads the code the child
    will") moves a system interpreter's prefix, and with it the site-packages it imports
    from. The gate ignores it when resolving imports: it reads aider-chat 0.70.0 from the
    interpreter's own prefix and permits; the console script imports 0.50.0 from
    $PYTHONHOME's site-packages."""
    prefix = tmp_path / "usr"
    if _plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    good_marker, bad_marker = tmp_path / "new-ran", tmp_path / "old-ran"
    script = pip_install(
        prefix, dist="aider-chat", module="aider", version="0.70.0", marker=good_marker
    )
    home = tmp_path / "otherhome"
    stdlib = prefix / "lib" / f"python3.{sys.version_info[1]}"
    lib = home / "lib" / stdlib.name
    (lib / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            os.symlink(os.readlink(entry), lib / entry.name)
    (home / "bin").mkdir()
    os.symlink(prefix / "bin" / "python", home / "bin" / "python")
    pip_install(home, dist="aider-chat", module="aider", version="0.50.0", marker=bad_marker)
    child_env = {"PYTHONHOME": str(home)}
    which = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import aider; print(aider.__file__)"],
        env={**os.environ, **child_env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(lib / "site-packages") in which.stdout  # what the interpreter really imports
    host.spawn(adapter="aider", binary=str(script), argv=["task"], child_env=child_env)
    last = host.chain_records()[-1]["receipt"]
    assert not bad_marker.exists(), f"aider 0.50.0 ran under: {last}"


# ------------------------------------------------------- 4. one line, no forged lines

FORGED = "floorguard: error: FORGED"


def _forged(stderr: str, prefix: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(prefix + ": error: FORGED")]


def floorguard_cli(
    *args: str | Path, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_floorguard_verify_receipt_map_mismatch_cannot_forge_a_line(tmp_path: Path) -> None:
    """README: "Error lines escape control characters, so a file name cannot add a line of
    its own." `python -m floorguard verify receipt R --floor-map M` prints its hash
    mismatch with the receipt's name unescaped."""
    state = tmp_path / "s"
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    (tmp_path / "other.py").write_text(EMPTY_MODULE)
    (tmp_path / "a.json").write_text(feed_v1(aider="0.60.0"))
    (tmp_path / "b.json").write_text(feed_v1(aider="0.70.0"))
    ok(floorctl("keygen", "--out", "k", cwd=tmp_path, state=state))
    receipt = "r\n" + FORGED + ".json"
    ok(floorctl("refresh", "--feed", "a.json", "--module", "m.py", "--write", "--receipt-out",
                receipt, "--signing-key", "k/signing.key", cwd=tmp_path, state=state))  # fmt: skip
    ok(floorctl("refresh", "--feed", "b.json", "--module", "other.py", "--write", cwd=tmp_path,
                state=state))  # fmt: skip
    done = floorguard_cli(
        "verify", "receipt", receipt, "--pubkey", "k/signing.pub", "--floor-map", "other.py",
        cwd=tmp_path, env=isolated_env(state),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert _forged(done.stderr, "floorguard") == [], done.stderr


def test_floorguard_usage_errors_cannot_forge_a_line(tmp_path: Path) -> None:
    """`python -m floorguard verify chain SLICE EXTRA`: argparse prints "unrecognized
    arguments: ..." with the argument (a file name) unescaped."""
    done = floorguard_cli(
        "verify", "chain", "slice.jsonl", "x\n" + FORGED, cwd=tmp_path,
        env=isolated_env(tmp_path / "s"),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert _forged(done.stderr, "floorguard") == [], done.stderr


def test_floorctl_warnings_cannot_forge_a_line_from_a_feed_file_name(tmp_path: Path) -> None:
    """README: "a file name cannot add a line of its own". Two feeds that disagree make
    refresh warn, naming each feed file unescaped: a feed named "a\\nfloorctl: error: ..."
    adds error lines of its own."""
    (tmp_path / "m.py").write_text(EMPTY_MODULE)
    (tmp_path / "a.json").write_text(feed_v1(aider="0.60.0"))
    name = "b\nfloorctl: error: FORGED.json"
    (tmp_path / name).write_text(feed_v1(aider="0.70.0"))
    done = floorctl(
        "refresh", "--feed", "a.json", "--feed", name, "--module", "m.py",
        cwd=tmp_path, state=tmp_path / "s",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _forged(done.stderr, "floorctl") == [], done.stderr


def test_the_published_map_fallback_warning_cannot_forge_a_line(tmp_path: Path) -> None:
    """`python -m floorguard exec` (and every host) prints why FLOORGUARD_FLOOR_MAP is not
    used with the file's name unescaped: a folder named "x\\nfloorguard: error: ..." forges
    a line on the host's stderr beside exec's "one line"."""
    folder = tmp_path / ("x\n" + FORGED)
    folder.mkdir()
    env = isolated_env(tmp_path / "s", FLOORGUARD_FLOOR_MAP=str(folder / "floor-map.json"))
    done = floorguard_cli("exec", "true", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert _forged(done.stderr, "floorguard") == [], done.stderr
