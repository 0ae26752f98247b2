"""A closed world at the spawn, install layouts and host arguments: what the other
closed-world tests do not cover (pnpm stores and shims, symlinked working folders, ``..``
through a linked folder, a relative ``binary=``, Popen keyword arguments, egg installs,
archives beside a namespace portion). Each attack puts a below-floor agent where the child
would run it; the safe outcome is a recorded refusal and no marker.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.closed_world import (
    CLAUDE_PACKAGE,
    DENY_BY_DEFAULT,
    HOST,
    NEW_CLAUDE,
    NODE,
    OLD_CLAUDE,
    Outcome,
    World,
)
from helpers.closed_world import needs_node as node
from probes import write_executable

# Long: hundreds of spawns in real venvs; .ci/run runs them (pytest -m attack).
pytestmark = pytest.mark.attack


# The closed-world host, with a chosen host working folder and extra Popen keywords.
HOST_WITH_KWARGS = HOST.replace(
    "request = json.loads(sys.argv[1])\n",
    "request = json.loads(sys.argv[1])\n"
    "if request.get('host_cwd'): os.chdir(request['host_cwd'])\n",
).replace(
    "stdout=-1, stderr=-1, text=True)",
    "stdout=-1, stderr=-1, text=True, **request.get('kwargs', {}))",
)


def spawn_with(
    world: World,
    adapter: str,
    argv: list[str],
    *,
    policy: str,
    env: dict[str, str],
    binary: str | None = None,
    cwd: str | None = None,
    host_cwd: str | None = None,
    kwargs: dict[str, Any] | None = None,
) -> Outcome:
    """``World.spawn`` with the host's own working folder and extra Popen keywords."""
    request = {
        "adapter": adapter,
        "argv": argv,
        "binary": binary,
        "env": env,
        "cwd": cwd,
        "host_cwd": host_cwd,
        "kwargs": kwargs or {},
    }
    host_env = {"FLOORGUARD_UNTRACKED_POLICY": "refuse"} if policy == DENY_BY_DEFAULT else {}
    done = world.host.python("-c", HOST_WITH_KWARGS, json.dumps(request), **host_env)
    assert done.returncode == 0, done.stderr
    return Outcome(json.loads(done.stdout), policy)


def assert_old_never_ran_under_an_allowance(world: World, outcome: Outcome, marker: Path) -> None:
    """The old code did not run; if anything started, no allowing receipt stands for it."""
    assert not marker.exists(), f"the below-floor code ran: {outcome!r}; {world.recorded()}"


# ============================================================ Popen keywords and argv0


@node
def test_popen_executable_keyword_swaps_the_program_after_the_check(
    world: World, untracked_policy: str
) -> None:
    """``spawn("claude", ..., executable=OLD/cli.js)``: Popen's ``executable`` replaces the
    program that is exec'd while the judged one only becomes argv[0]."""
    old, new = world.old_claude(), world.new_claude()
    outcome = spawn_with(
        world,
        "claude",
        ["task"],
        policy=untracked_policy,
        env=world.env(new.bin_dir),
        kwargs={"executable": str(old.cli)},
    )
    assert_old_never_ran_under_an_allowance(world, outcome, old.marker)


@node
def test_popen_shell_keyword_runs_the_arguments_as_a_shell_command(
    world: World, untracked_policy: str
) -> None:
    """``spawn("claude", ["task"], shell=True)`` with a first argument that is shell code
    running the old CLI: Popen hands argv to ``/bin/sh -c``."""
    old, new = world.old_claude(), world.new_claude()
    outcome = spawn_with(
        world,
        "claude",
        [f"{old.cli} task"],
        policy=untracked_policy,
        env=world.env(new.bin_dir),
        kwargs={"shell": True},
    )
    assert_old_never_ran_under_an_allowance(world, outcome, old.marker)


# ================================================================ relative binary=


@node
def test_relative_binary_is_judged_and_run_from_the_same_folder(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``binary="bin/claude"`` with the host in a folder holding the new claude and the
    child's ``cwd`` a folder holding the old one at the same relative path."""
    old, new = world.old_claude(), world.new_claude()
    outcome = spawn_with(
        world,
        "claude",
        ["task"],
        policy=untracked_policy,
        env=world.env(),
        binary="bin/claude",
        host_cwd=str(new.bin_dir.parent),
        cwd=str(old.bin_dir.parent),
    )
    assert_old_never_ran_under_an_allowance(world, outcome, old.marker)


@node
def test_legit_relative_binary_runs(world: World, untracked_policy: str) -> None:
    """``binary="bin/claude"`` relative to the host's folder, no ``cwd``: permitted, runs."""
    new = world.new_claude()
    outcome = spawn_with(
        world,
        "claude",
        ["task"],
        policy=untracked_policy,
        env=world.env(),
        binary="bin/claude",
        host_cwd=str(new.bin_dir.parent),
    )
    world.assert_permitted_and_ran(outcome, new.marker)


# =============================================================== symlinked cwd and ..


@node
def test_node_relative_script_through_dotdot_of_a_symlinked_cwd(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``cwd=WS/link`` where ``link -> OLD/lib``, ``node ../cli.js``: node reaches
    ``OLD/cli.js`` (the kernel resolves ``..`` from the real folder) while the lexical
    ``WS/link/../cli.js`` is ``WS/cli.js``, a copy of the new CLI's package."""
    old, new = world.old_claude(), world.new_claude()
    ws = tmp_path / "ws"
    shutil.copytree(new.package, ws)
    os.symlink(old.package / "lib", ws / "link")
    outcome = world.spawn(
        "node",
        ["../cli.js", "task"],
        binary=NODE,
        cwd=ws / "link",
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker)


@node
def test_binary_path_with_dotdot_through_a_symlinked_folder(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``binary=WS/link/../cli.js`` (``link -> OLD/lib``, WS a copy of the new package)
    runs the old CLI (the kernel resolves ``..`` from the link's target) under a permit recorded
    as claude 1.0.200 (``npm-package``, WS's package.json).

    The kernel opens ``OLD/cli.js``; the metadata judged is that of the lexically
    normalised path ``WS/cli.js``."""
    old, new = world.old_claude(), world.new_claude()
    ws = tmp_path / "ws"
    shutil.copytree(new.package, ws)
    os.symlink(old.package / "lib", ws / "link")
    outcome = world.spawn(
        "claude", ["task"], binary=f"{ws}/link/../cli.js", policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker)


@node
def test_node_script_through_dotdot_of_a_symlinked_folder_is_judged_as_node_resolves_it(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node WS/link/../cli.js`` (``link -> OLD/lib``, WS a new package copy installed in a
    node_modules): node normalises the main path lexically, so WS's new CLI runs, and that is
    what is judged."""
    old, new = world.old_claude(), world.new_claude()
    ws = tmp_path / "node_modules" / "ws"
    shutil.copytree(new.package, ws)
    os.symlink(old.package / "lib", ws / "link")
    outcome = world.spawn(
        "node",
        [f"{ws}/link/../cli.js", "task"],
        binary=NODE,
        policy=untracked_policy,
        env=world.env(),
    )
    assert not old.marker.exists(), outcome
    world.assert_permitted_and_ran(outcome, new.marker)


def test_python_relative_script_through_dotdot_of_a_symlinked_cwd(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``cwd=WS/link`` (``link -> OLDVENV/bin/sub``), ``python ../aider``: CPython opens the
    old venv's console script, while the lexical path is WS's harmless ``aider``."""
    old, new = world.old_aider(), world.new_aider()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "aider").write_text("print('harmless')\n", encoding="utf-8")
    (old.prefix / "bin" / "sub").mkdir()
    os.symlink(old.prefix / "bin" / "sub", ws / "link")
    outcome = world.spawn(
        "python",
        ["../aider", "task"],
        binary=new.python,
        cwd=ws / "link",
        policy=untracked_policy,
        env=world.env(PYTHONPATH=str(old.site)),
    )
    world.assert_refused(outcome, old.marker)


@node
def test_legit_symlinked_cwd_running_the_new_cli_by_relative_path_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``cwd`` a symlink to the new package folder, ``node cli.js``: permitted and runs."""
    new = world.new_claude()
    link = tmp_path / "link"
    os.symlink(new.package, link)
    outcome = world.spawn(
        "node", ["cli.js", "task"], binary=NODE, cwd=link, policy=untracked_policy, env=world.env()
    )
    world.assert_permitted_and_ran(outcome, new.marker)


# ================================================================ pnpm-style layouts


def _pnpm_project(world: World, project: Path, version: str) -> Path:
    """pnpm's layout: the package in ``node_modules/.pnpm/<pkg>@<v>/node_modules/<pkg>``,
    ``node_modules/<pkg>`` a symlink into the store. Returns the store package folder."""
    staged = world.claude(version, name=f"pnpm-staged-{project.name}-{version}")
    store = (
        project
        / "node_modules"
        / ".pnpm"
        / f"@anthropic-ai+claude-code@{version}"
        / "node_modules"
        / CLAUDE_PACKAGE
    )
    store.parent.mkdir(parents=True, exist_ok=True)
    os.rename(staged.package, store)
    top = project / "node_modules" / CLAUDE_PACKAGE
    top.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(store, top.parent), top)
    return store


@node
def test_pnpm_sh_shim_of_the_new_claude_is_a_launcher(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """pnpm writes ``node_modules/.bin/claude`` as a ``#!/bin/sh`` shim that execs node on
    the store path: a launcher, refused under claude's name (README), even for a new one."""
    project = tmp_path / "project"
    store = _pnpm_project(world, project, NEW_CLAUDE)
    shim = write_executable(
        project / "node_modules" / ".bin" / "claude",
        '#!/bin/sh\nbasedir=$(dirname "$(echo "$0" | sed -e \'s,\\\\,/,g\')")\n'
        f'exec node "$basedir/../.pnpm/@anthropic-ai+claude-code@{NEW_CLAUDE}/node_modules/'
        f'{CLAUDE_PACKAGE}/cli.js" "$@"\n',
    )
    outcome = world.spawn(
        "claude", ["task"], binary=shim, cwd=project, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, world.root / "nothing", "sh", "script", "launcher")
    assert store.exists()


@node
def test_pnpm_top_level_symlink_into_an_old_store_entry(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node node_modules/@anthropic-ai/claude-code/cli.js`` where that folder is pnpm's
    symlink into the store entry of the old claude, while a new claude's package.json
    sits (unlinked) at ``node_modules/@anthropic-ai/package.json``."""
    project = tmp_path / "project"
    _pnpm_project(world, project, OLD_CLAUDE)
    (project / "node_modules" / "@anthropic-ai" / "package.json").write_text(
        json.dumps({"name": CLAUDE_PACKAGE, "version": NEW_CLAUDE}), encoding="utf-8"
    )
    old_marker = world.root / f"pnpm-staged-project-{OLD_CLAUDE}-ran"
    outcome = world.spawn(
        "node",
        [f"node_modules/{CLAUDE_PACKAGE}/cli.js", "task"],
        binary=NODE,
        cwd=project,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old_marker)


@node
def test_legit_pnpm_store_cli_through_the_top_level_symlink_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node node_modules/@anthropic-ai/claude-code/cli.js`` into pnpm's store entry of
    the new claude: permitted and runs."""
    project = tmp_path / "project"
    _pnpm_project(world, project, NEW_CLAUDE)
    marker = world.root / f"pnpm-staged-project-{NEW_CLAUDE}-ran"
    outcome = world.spawn(
        "node",
        [f"node_modules/{CLAUDE_PACKAGE}/cli.js", "task"],
        binary=NODE,
        cwd=project,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_permitted_and_ran(outcome, marker)


# ====================================================== #!/usr/bin/env -S node --flags


@node
def test_env_dash_s_shebang_with_a_require_flag(world: World, untracked_policy: str) -> None:
    """The new cli.js copied with ``#!/usr/bin/env -S node --require=OLD/cli.js``."""
    old, new = world.old_claude(), world.new_claude()
    text = new.cli.read_text(encoding="utf-8").split("\n", 1)[1]
    write_executable(new.cli, f"#!/usr/bin/env -S node --require={old.cli}\n{text}")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=world.env(new.bin_dir))
    world.assert_refused(outcome, old.marker, "require")


@node
def test_env_dash_s_shebang_setting_node_options(world: World, untracked_policy: str) -> None:
    """``#!/usr/bin/env -S NODE_OPTIONS=--require=OLD/cli.js node``."""
    old, new = world.old_claude(), world.new_claude()
    text = new.cli.read_text(encoding="utf-8").split("\n", 1)[1]
    write_executable(new.cli, f"#!/usr/bin/env -S NODE_OPTIONS=--require={old.cli} node\n{text}")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=world.env(new.bin_dir))
    world.assert_refused(outcome, old.marker)


@node
def test_env_dash_s_shebang_with_the_script_option_of_env(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """a project-local (workspace ``node_modules``) new claude whose ``cli.js`` starts
    ``#!/usr/bin/env -S node OLD/cli.js`` runs the old CLI under a permit recorded as claude
    1.0.200 (``npm-package``): the script node is given on the ``#!`` line is not judged.

    env splits the line, so node's main script is OLD/cli.js and the new file only its
    first argument (the old CLI prints ``ran /proc/self/fd/N task``)."""
    old = world.old_claude()
    project = tmp_path / "project"
    new = world.project_claude(project, NEW_CLAUDE)
    text = new.cli.read_text(encoding="utf-8").split("\n", 1)[1]
    write_executable(new.cli, f"#!/usr/bin/env -S node {old.cli}\n{text}")
    outcome = world.spawn(
        "claude",
        ["task"],
        binary=new.bin_dir / "claude",
        cwd=project,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker)


@node
def test_legit_env_dash_s_shebang_with_an_allowlisted_flag_runs(
    world: World, untracked_policy: str
) -> None:
    """``#!/usr/bin/env -S node --no-warnings`` on the new CLI: permitted and runs."""
    new = world.new_claude()
    text = new.cli.read_text(encoding="utf-8").split("\n", 1)[1]
    write_executable(new.cli, f"#!/usr/bin/env -S node --no-warnings\n{text}")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=world.env(new.bin_dir))
    world.assert_permitted_and_ran(outcome, new.marker)


# ============================================================== package.json maps


@node
def test_type_module_package_with_an_imports_map_to_the_old_cli_requested_as_claude(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node WS/main.mjs`` that imports OLD/cli.js, beside a WS package.json with
    ``type: module`` and an ``imports`` map (``#cli`` -> OLD) but no catalogued name."""
    old = world.old_claude()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "package.json").write_text(
        json.dumps({"name": "app", "type": "module", "imports": {"#cli": str(old.cli)}}),
        encoding="utf-8",
    )
    (ws / "main.js").write_text("await import('#cli');\n", encoding="utf-8")
    outcome = world.spawn(
        "claude", ["main.js", "task"], binary=NODE, cwd=ws, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker)


@node
def test_workspace_node_modules_link_to_old_claude_required_by_a_script(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node WS/x.js`` requiring ``@anthropic-ai/claude-code`` through ``WS/node_modules``
    (a link to an old install): refused under deny-by-default, else recorded ``untracked``."""
    old = world.old_claude()
    ws = tmp_path / "ws"
    (ws / "node_modules" / "@anthropic-ai").mkdir(parents=True)
    os.symlink(old.package, ws / "node_modules" / CLAUDE_PACKAGE)
    (ws / "x.js").write_text(f"require({CLAUDE_PACKAGE!r});\n", encoding="utf-8")
    outcome = world.spawn(
        "node", ["x.js", "task"], binary=NODE, cwd=ws, policy=untracked_policy, env=world.env()
    )
    if untracked_policy == DENY_BY_DEFAULT:
        world.assert_refused(outcome, old.marker)
    else:  # the README's documented window: allowed, but recorded as untracked, not permit
        assert [r["verdict"] for r in world.recorded()] == ["untracked"], world.recorded()


# ================================================================== python layouts


def _egg_develop(world: World, name: str) -> tuple[Path, Path]:
    """A legacy ``setup.py develop`` of the old aider: its source tree holds ``aider/`` and
    ``aider_chat.egg-info`` (0.50.0); site-packages has only ``aider-chat.egg-link`` and an
    ``easy-install.pth`` path line to the tree. Returns (venv python, marker)."""
    old = world.aider("0.50.0", name=f"{name}-src")
    src = world.root / f"{name}-tree"
    shutil.copytree(old.site / "aider", src / "aider")
    info = src / "aider_chat.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: aider-chat\nVersion: 0.50.0\n", encoding="utf-8"
    )
    (info / "top_level.txt").write_text("aider\n", encoding="utf-8")
    new = world.aider("0.70.0", name=name)
    shutil.rmtree(new.site / "aider")
    (new.site / "aider-chat.egg-link").write_text(f"{src}\n.\n", encoding="utf-8")
    (new.site / "easy-install.pth").write_text(f"{src}\n", encoding="utf-8")
    return new.python, old.marker


def test_egg_link_develop_install_of_old_aider_behind_a_new_dist_info(
    world: World, untracked_policy: str
) -> None:
    """``python -m aider`` where ``aider`` resolves through easy-install.pth to an old
    develop tree, while site-packages still holds the new ``aider_chat-0.70.0.dist-info``
    (its RECORD naming files that are gone)."""
    python, marker = _egg_develop(world, "egg")
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], binary=python, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, marker)


def test_egg_directory_of_old_aider_on_easy_install_pth(
    world: World, untracked_policy: str
) -> None:
    """A ``.egg`` folder (``aider_chat-0.50.0-py3.11.egg/aider`` + ``EGG-INFO``) added by
    easy-install.pth, the new dist-info's files removed."""
    old = world.aider("0.50.0", name="eggsrc")
    new = world.aider("0.70.0", name="eggvenv")
    egg = new.site / "aider_chat-0.50.0-py3.11.egg"
    shutil.copytree(old.site / "aider", egg / "aider")
    (egg / "EGG-INFO").mkdir()
    (egg / "EGG-INFO" / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: aider-chat\nVersion: 0.50.0\n", encoding="utf-8"
    )
    shutil.rmtree(new.site / "aider")
    (new.site / "easy-install.pth").write_text(f"./{egg.name}\n", encoding="utf-8")
    outcome = world.spawn(
        "python",
        ["-m", "aider", "task"],
        binary=new.python,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker)


def test_dash_m_with_a_namespace_portion_and_a_zip_of_old_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """PYTHONPATH=NS:OLD.zip, NS holding ``aider/`` without ``__init__`` (a namespace
    portion), the zip holding the old regular package: CPython takes the zip's."""
    old, new = world.old_aider(), world.new_aider()
    ns = tmp_path / "ns"
    (ns / "aider").mkdir(parents=True)
    archive = tmp_path / "old.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in (old.site / "aider").rglob("*.py"):
            zf.write(path, path.relative_to(old.site).as_posix())
    env = world.env(PYTHONPATH=f"{ns}:{archive}")
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], binary=new.python, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker)


def test_unchecked_pyc_of_main_in_a_pythonpath_copy_of_the_new_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -m aider`` with PYTHONPATH=WS (a copy of the new aider and its
    dist-info) plus an unchecked-hash ``aider/__pycache__/__main__.cpython-3X.pyc`` runs the old
    aider under a permit recorded as aider 0.70.0 (``python -m``).

    CPython runs an unchecked-hash pyc whatever the source beside it says."""
    import py_compile
    import sys

    old, new = world.old_aider(), world.new_aider()
    ws = tmp_path / "ws"
    shutil.copytree(new.site / "aider", ws / "aider")
    for info in new.site.glob("aider_chat-*.dist-info"):
        shutil.copytree(info, ws / info.name)
    evil = tmp_path / "evil_main.py"
    evil.write_text(
        f"import sys\nsys.path.insert(0, {str(old.site)!r})\n"
        "for k in [k for k in sys.modules if k.startswith('aider')]: del sys.modules[k]\n"
        "from aider.main import main\nmain()\n",
        encoding="utf-8",
    )
    version = "".join(map(str, sys.version_info[:2]))
    py_compile.compile(
        str(evil),
        cfile=str(ws / "aider" / "__pycache__" / f"__main__.cpython-{version}.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    env = world.env(PYTHONPATH=str(ws))
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], binary=new.python, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker)


# ================================================================= PATH and preflight


@node
def test_path_with_duplicate_entries_and_an_old_claude_between(
    world: World, untracked_policy: str
) -> None:
    """PATH=NEW:OLD:NEW with the new claude's bin link removed from NEW after the host
    built the environment: the name must be found where it is, and judged there."""
    old, new = world.old_claude(), world.new_claude()
    env = world.env(new.bin_dir, old.bin_dir, new.bin_dir)
    os.remove(new.bin_dir / "claude")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker)


@node
def test_preflight_with_a_relative_binary_judges_what_spawn_would_run(
    world: World, tmp_path: Path
) -> None:
    """``preflight("claude", binary="bin/claude")`` from a folder holding the old claude:
    refused (the verdict is about the file the relative path names from the host)."""
    old = world.old_claude()
    code = (
        "import json, os, sys, floorguard\n"
        f"os.chdir({str(old.bin_dir.parent)!r})\n"
        "try:\n    d = floorguard.preflight('claude', binary='bin/claude'); v = d.verdict\n"
        "except floorguard.SpawnRefused as e:\n    v = 'refused:' + e.decision.verdict\n"
        "print(v)\n"
    )
    done = world.host.python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused:refuse", done.stdout


@node
def test_path_entry_with_dotdot_through_a_symlinked_folder(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """PATH entry ``WS/link/..`` (``link -> OLD/lib``), ``claude`` a link to ``cli.js`` in
    both WS (a new package copy) and OLD: execvp finds ``OLD/claude``."""
    old, new = world.old_claude(), world.new_claude()
    os.symlink("cli.js", old.package / "claude")
    ws = tmp_path / "ws"
    shutil.copytree(new.package, ws, symlinks=True)
    os.symlink("cli.js", ws / "claude")
    os.symlink(old.package / "lib", ws / "link")
    env = world.env()
    env["PATH"] = f"{ws}/link/..:{env['PATH']}"
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker)


def test_console_script_binary_with_dotdot_through_a_symlinked_folder(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``binary=NEWVENV/bin/link/../aider`` with ``link -> OLDVENV/bin/sub``: the name is
    resolved as the kernel resolves it (``..`` of the link's target: the old venv's script),
    and that is what is judged, refused, and never run."""
    old, new = world.old_aider(), world.new_aider()
    (old.prefix / "bin" / "sub").mkdir()
    os.symlink(old.prefix / "bin" / "sub", new.prefix / "bin" / "link")
    outcome = world.spawn(
        "aider",
        ["task"],
        binary=f"{new.prefix}/bin/link/../aider",
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "0.50.0 is below the floor")
    assert not new.marker.exists(), outcome


def test_pythonpath_entry_with_dotdot_through_a_symlinked_folder(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """PYTHONPATH=``NEWSITE/link/..`` (``link -> OLDSITE/sub``), new venv's ``python -m
    aider``: ``site`` normalises the entry by its letters (NEWSITE), ``-S`` would not: an
    entry that climbs with ``..`` is refused, whichever folder it would name."""
    old, new = world.old_aider(), world.new_aider()
    (old.site / "sub").mkdir()
    os.symlink(old.site / "sub", new.site / "link")
    env = world.env(PYTHONPATH=f"{new.site}/link/..")
    outcome = world.spawn(
        "python", ["-m", "aider", "task"], binary=new.python, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker, "PYTHONPATH")
    assert not new.marker.exists(), outcome


def _pythonpath_copy_with_pyc(
    world: World, tmp_path: Path, module: str, mode: str
) -> tuple[Any, Any, Path]:
    """PYTHONPATH=WS, WS a copy of the new aider and its dist-info, with
    ``aider/__pycache__/<module>.cpython-3X.pyc`` compiled from code running the old aider:
    ``unchecked`` (unchecked hash) or ``stamped`` (a timestamp pyc whose header carries the
    real source's mtime and size, which is all CPython compares)."""
    import py_compile
    import struct
    import sys

    old, new = world.old_aider(), world.new_aider()
    ws = tmp_path / "ws"
    shutil.copytree(new.site / "aider", ws / "aider")
    for info in new.site.glob("aider_chat-*.dist-info"):
        shutil.copytree(info, ws / info.name)
    evil = tmp_path / f"evil_{module}.py"
    body = (
        f"import sys\nsys.path.insert(0, {str(old.site)!r})\n"
        "for k in [k for k in sys.modules if k.startswith('aider')]: del sys.modules[k]\n"
        "from aider.main import main\nmain()\n"
    )
    if module == "main":
        body = "def main():\n" + "".join("    " + line + "\n" for line in body.splitlines()[:-1])
        body += "    return main()\n"
    evil.write_text(body, encoding="utf-8")
    version = "".join(map(str, sys.version_info[:2]))
    pyc = ws / "aider" / "__pycache__" / f"{module}.cpython-{version}.pyc"
    invalidation = (
        py_compile.PycInvalidationMode.UNCHECKED_HASH
        if mode == "unchecked"
        else py_compile.PycInvalidationMode.TIMESTAMP
    )
    py_compile.compile(str(evil), cfile=str(pyc), invalidation_mode=invalidation)
    if mode == "stamped":
        source = (ws / "aider" / f"{module}.py").stat()
        data = bytearray(pyc.read_bytes())
        data[8:16] = struct.pack(
            "<II", int(source.st_mtime) & 0xFFFFFFFF, source.st_size & 0xFFFFFFFF
        )
        pyc.write_bytes(bytes(data))
    return old, new, ws


def test_stamped_pyc_of_main_in_a_pythonpath_copy_of_the_new_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -m aider`` with PYTHONPATH=WS (a copy of the new aider) and a timestamp
    ``__main__`` pyc of other code whose header carries the real ``__main__.py``'s mtime and
    size runs the old aider under a permit recorded as aider 0.70.0 (``python -m``)."""
    old, new, ws = _pythonpath_copy_with_pyc(world, tmp_path, "__main__", "stamped")
    outcome = world.spawn(
        "python",
        ["-m", "aider", "task"],
        binary=new.python,
        policy=untracked_policy,
        env=world.env(PYTHONPATH=str(ws)),
    )
    world.assert_refused(outcome, old.marker)


def test_unchecked_pyc_of_a_submodule_in_a_pythonpath_copy_of_the_new_aider(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -m aider`` with PYTHONPATH=WS (a copy of the new aider) and an
    unchecked-hash pyc of ``aider/main.py`` (imported by ``__main__``) runs the old aider under
    a permit recorded as aider 0.70.0 (``python -m``)."""
    old, new, ws = _pythonpath_copy_with_pyc(world, tmp_path, "main", "unchecked")
    outcome = world.spawn(
        "python",
        ["-m", "aider", "task"],
        binary=new.python,
        policy=untracked_policy,
        env=world.env(PYTHONPATH=str(ws)),
    )
    world.assert_refused(outcome, old.marker)


def test_unchecked_pyc_of_a_submodule_in_the_cwd_with_dash_m(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``python -m aider`` in a working folder holding a copy of the new aider (first
    on the path for ``-m``) with an unchecked-hash pyc of ``aider/main.py`` runs the old aider
    under a permit recorded as aider 0.70.0 (``python -m``)."""
    old, new, ws = _pythonpath_copy_with_pyc(world, tmp_path, "main", "unchecked")
    outcome = world.spawn(
        "python",
        ["-m", "aider", "task"],
        binary=new.python,
        cwd=ws,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker)
