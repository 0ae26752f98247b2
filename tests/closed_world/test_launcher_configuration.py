"""A package launcher's configuration files decide what it runs as much as its command
line: an ``.npmrc`` names a script shell, node options, a cache or a registry; a
``.yarnrc.yml`` names the yarn release that runs; ``bunfig.toml`` preloads code; ``uv.toml``
and ``pip.conf`` (and pip's ``PIP_*`` variables) choose indexes and builds. A pinned launch
is judged by its spec only when no such file can change what runs: a file the gate cannot
vouch for refuses, naming the file and the setting.

And npm in a workspace looks for ``node_modules/.bin`` from the workspace root, not from
the package folder the spawn runs in.

In process and cheap, with the same judge and launcher stand-ins as
``test_package_launchers`` (nothing is run).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import probes
import pytest
from probes import write_executable

from closed_world.test_package_launchers import NPX, _exec, _local_install, bins, judge, project
from floorguard._gate.decision import PERMIT, REFUSE

__all__ = ["bins", "project"]  # fixtures, shared

PINNED = {
    "npx": ["-y", "mcp-remote@0.1.16"],
    "npm": ["exec", "--", "mcp-remote@0.1.16"],
    "pnpm": ["dlx", "mcp-remote@0.1.16"],
    "bunx": ["mcp-remote@0.1.16"],
    "yarn": ["dlx", "mcp-remote@0.1.16"],
    "uvx": ["mcp-server-fetch==2025.2.0"],
    "pipx": ["run", "mcp-server-fetch==2025.2.0"],
}


def run(program: Path, argv: list[str], cwd: Path, **env: str) -> Any:
    """The judgement, with a home of the test's own (the machine's user files stay out)."""
    return judge(program, argv, cwd, **{"HOME": str(_home_of(cwd)), **env})


def _home_of(cwd: Path) -> Path:
    for folder in (cwd, *cwd.parents):
        if folder.name == "project":
            return folder.parent / "home"
    raise AssertionError(cwd)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- npm's files


@pytest.mark.parametrize(
    ("setting", "launcher"),
    [
        ("script-shell=/tmp/evil.sh", "npx"),  # npx runs the bin through this shell
        ("node-options=--require ./evil.js", "npx"),  # NODE_OPTIONS of the bin
        ("cache=./planted-cache", "npx"),  # an _npx tree the project wrote
        ("registry=https://registry.evil.example/", "npx"),
        ("@acme:registry=https://registry.evil.example/", "npm"),
        ("node-options=--require ./evil.js", "pnpm"),
        ("script-shell = /tmp/evil.sh", "bunx"),
    ],
)
def test_a_project_npmrc_that_changes_what_runs_refuses_a_pinned_launch(
    bins: Path, project: Path, setting: str, launcher: str
) -> None:
    npmrc = write(project / ".npmrc", f"; a project's settings\n{setting}\n")
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE, judged
    key = setting.split("=", 1)[0].strip()
    assert str(npmrc) in judged.reason and repr(key) in judged.reason, judged.reason


def test_an_npmrc_above_the_working_directory_counts_too(bins: Path, project: Path) -> None:
    npmrc = write(project.parent / ".npmrc", "script-shell=/tmp/evil.sh\n")
    below = project / "packages" / "a"
    below.mkdir(parents=True)
    judged = run(bins / "npx", PINNED["npx"], below)
    assert judged.verdict == REFUSE and str(npmrc) in judged.reason, judged


def test_the_childs_home_decides_which_user_npmrc_is_read(bins: Path, project: Path) -> None:
    """A declaration's ``env`` can point HOME into the project: npm then reads that
    folder's ``.npmrc``."""
    fake_home = project / "home"
    npmrc = write(fake_home / ".npmrc", "node-options=--require ./evil.js\n")
    judged = run(bins / "npx", PINNED["npx"], project, HOME=str(fake_home))
    assert judged.verdict == REFUSE and str(npmrc) in judged.reason, judged


@pytest.mark.parametrize("value", ["/proc/self/cwd/pfx", "/proc/thread-self/cwd/pfx"])
def test_a_user_npmrc_prefix_through_the_process_refuses(
    bins: Path, project: Path, value: str
) -> None:
    """npm reads the global prefix's etc/npmrc in the child, where /proc/self/cwd is the
    child's working directory: what the gate would read there, in the host, is another
    file."""
    npmrc = write(_home_of(project) / ".npmrc", f"prefix={value}\n")
    judged = run(bins / "npx", PINNED["npx"], project)
    assert judged.verdict == REFUSE, judged
    assert str(npmrc) in judged.reason and "leads into /proc" in judged.reason, judged.reason


def test_a_user_npmrc_with_a_token_and_output_settings_is_understood(
    bins: Path, project: Path
) -> None:
    home = _home_of(project)
    write(
        home / ".npmrc",
        "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\nfund=false\n# quiet\nloglevel=warn\n",
    )
    judged = run(bins / "npx", PINNED["npx"], project)
    assert (judged.verdict, judged.version) == (PERMIT, "0.1.16"), judged


def test_an_npmrc_that_cannot_be_read_exactly_refuses(bins: Path, project: Path) -> None:
    npmrc = write(project / ".npmrc", "[section]\nfund=false\n")
    judged = run(bins / "npx", PINNED["npx"], project)
    assert judged.verdict == REFUSE and str(npmrc) in judged.reason, judged


def test_npms_global_prefix_from_the_environment_refuses(bins: Path, project: Path) -> None:
    """``PREFIX`` moves npm's global prefix, and with it the global npmrc it reads."""
    judged = run(bins / "npx", PINNED["npx"], project, PREFIX=str(project / "prefix"))
    assert judged.verdict == REFUSE and "PREFIX" in judged.reason, judged


# ------------------------------------------------- npm's own files: builtin and global npmrc


def npm_install(prefix: Path) -> Path:
    """npm as its installers lay it out under ``prefix``, its scripts run by the node first
    on PATH (``prefix/bin/node`` when ``prefix/bin`` is first). Returns ``bin/npx``."""
    return probes.node_with_npm(prefix, env_node=True) / "npx"


@pytest.mark.parametrize("spelling", ["npx", "npm exec", "node npx-cli.js"])
def test_a_project_local_npms_builtin_npmrc_refuses(
    tmp_path: Path, project: Path, spelling: str
) -> None:
    """npm reads ``npmrc`` in its own package folder (its "builtin" configuration): a
    project's own npm (``npm i npm``, its npx first on PATH) brings that file with it, and
    ``node-options`` there preloads code into the package npx runs."""
    node = npm_install(tmp_path / "nodejs").parent
    local = probes.npm_package(project / "node_modules" / "npm")
    bin_folder = project / "node_modules" / ".bin"
    bin_folder.mkdir()
    for name in ("npx", "npm"):
        (bin_folder / name).symlink_to(f"../npm/bin/{name}-cli.js")
    builtin = write(local / "npmrc", f"node-options=--require {project / 'evil.js'}\n")
    program, argv = {
        "npx": (bin_folder / "npx", PINNED["npx"]),
        "npm exec": (bin_folder / "npm", PINNED["npm"]),
        "node npx-cli.js": (node / "node", [str(local / "bin" / "npx-cli.js"), *PINNED["npx"]]),
    }[spelling]
    judged = run(program, argv, project, PATH=f"{bin_folder}:{node}:/usr/bin:/bin")
    assert judged.verdict == REFUSE, judged
    assert str(builtin) in judged.reason and "'node-options'" in judged.reason, judged.reason


@pytest.mark.parametrize("spelling", ["npx", "node npx-cli.js"])
def test_an_npm_of_the_projects_own_node_modules_refuses(
    tmp_path: Path, project: Path, spelling: str
) -> None:
    """A package.json naming itself npm in the project's node_modules is all it takes to
    be "npm's own script": its npx-cli.js is code the workspace wrote, never judged."""
    node = npm_install(tmp_path / "nodejs").parent
    local = probes.npm_package(project / "node_modules" / "npm")
    bin_folder = project / "node_modules" / ".bin"
    bin_folder.mkdir()
    (bin_folder / "npx").symlink_to("../npm/bin/npx-cli.js")
    program, argv = {
        "npx": (bin_folder / "npx", PINNED["npx"]),
        "node npx-cli.js": (node / "node", [str(local / "bin" / "npx-cli.js"), *PINNED["npx"]]),
    }[spelling]
    judged = run(program, argv, project, PATH=f"{bin_folder}:{node}:/usr/bin:/bin")
    assert judged.verdict == REFUSE, judged
    assert "the project's own" in judged.reason, judged.reason


def test_an_npm_copied_into_the_workspace_outside_node_modules_refuses(
    tmp_path: Path, project: Path
) -> None:
    node = npm_install(tmp_path / "nodejs").parent
    local = probes.npm_package(project / "vendor" / "npm")
    bin_folder = project / "bin"
    bin_folder.mkdir()
    (bin_folder / "npx").symlink_to(local / "bin" / "npx-cli.js")
    judged = run(
        bin_folder / "npx", PINNED["npx"], project, PATH=f"{bin_folder}:{node}:/usr/bin:/bin"
    )
    assert judged.verdict == REFUSE, judged
    assert "the project's own" in judged.reason, judged.reason


def test_the_global_npmrc_of_a_node_in_the_workspace_refuses(tmp_path: Path, project: Path) -> None:
    """npm's global prefix is two folders above the node that runs it: a genuine node
    binary copied into ``<workspace>/tools/bin``, first on PATH, makes
    ``<workspace>/tools/etc/npmrc`` npm's global configuration."""
    npx = npm_install(tmp_path / "nodejs")
    tools = project / "tools"
    probes.native_program(
        tools / "bin" / "node"
    )  # (a copy of a genuine node, as far as it matters)
    global_rc = write(tools / "etc" / "npmrc", "node-options=--require ./evil.js\n")
    judged = run(npx, PINNED["npx"], project, PATH=f"{tools / 'bin'}:{npx.parent}:/usr/bin:/bin")
    assert judged.verdict == REFUSE, judged
    assert str(global_rc) in judged.reason and "'node-options'" in judged.reason, judged.reason


def test_a_node_in_the_working_directory_itself_holds_its_global_npmrc_to_a_projects_rules(
    tmp_path: Path, project: Path
) -> None:
    """A node right in the working directory puts npm's prefix in the folder above it,
    outside: the registry its ``etc/npmrc`` names is still the workspace's choice."""
    npx = npm_install(tmp_path / "nodejs")
    probes.native_program(project / "node")
    global_rc = write(tmp_path / "etc" / "npmrc", "registry=https://registry.evil.example/\n")
    judged = run(npx, PINNED["npx"], project, PATH=f"{project}:{npx.parent}:/usr/bin:/bin")
    assert judged.verdict == REFUSE, judged
    assert str(global_rc) in judged.reason and "'registry'" in judged.reason, judged.reason


@pytest.mark.parametrize("key", ["globalconfig", "userconfig"])
def test_a_builtin_npmrc_naming_npms_other_files_moves_what_is_read(
    tmp_path: Path, project: Path, key: str
) -> None:
    """npm's builtin npmrc may name the global and user files (a distribution's npm points
    ``globalconfig`` at ``/etc/npmrc``): the files it names are the ones judged."""
    npx = npm_install(tmp_path / "nodejs")
    named = write(tmp_path / "elsewhere" / "npmrc", "script-shell=/tmp/evil.sh\n")
    write(npx.parent.parent / "lib" / "node_modules" / "npm" / "npmrc", f"{key}={named}\n")
    judged = run(npx, PINNED["npx"], project, PATH=f"{npx.parent}:/usr/bin:/bin")
    assert judged.verdict == REFUSE, judged
    assert str(named) in judged.reason and "'script-shell'" in judged.reason, judged.reason


def test_a_builtin_npmrc_prefix_moves_the_global_npmrc(tmp_path: Path, project: Path) -> None:
    """Homebrew's npm says ``prefix = /opt/homebrew`` in its builtin npmrc: npm's global
    npmrc is then ``/opt/homebrew/etc/npmrc``, read by the same rules."""
    npx = npm_install(tmp_path / "nodejs")
    brew = tmp_path / "homebrew"
    write(npx.parent.parent / "lib" / "node_modules" / "npm" / "npmrc", f"prefix = {brew}\n")
    path = f"{npx.parent}:/usr/bin:/bin"
    assert run(npx, PINNED["npx"], project, PATH=path).verdict == PERMIT
    global_rc = write(brew / "etc" / "npmrc", "node-options=--require /tmp/evil.js\n")
    judged = run(npx, PINNED["npx"], project, PATH=path)
    assert judged.verdict == REFUSE, judged
    assert str(global_rc) in judged.reason and "'node-options'" in judged.reason, judged.reason


def test_a_system_npms_own_files_that_change_nothing_pass(tmp_path: Path, project: Path) -> None:
    """The positive control: a distribution's npm (builtin npmrc naming its global file and
    prefix) whose global npmrc names a registry and output settings runs as pinned."""
    npx = npm_install(tmp_path / "usr")
    etc = write(tmp_path / "etc" / "npmrc", "registry=https://registry.npmjs.org/\nfund=false\n")
    write(
        npx.parent.parent / "lib" / "node_modules" / "npm" / "npmrc",
        f"# DO NOT MODIFY\nglobalconfig={etc}\nglobalignorefile=/etc/npmignore\n"
        f"prefix={tmp_path / 'usr' / 'local'}\n",
    )
    judged = run(npx, PINNED["npx"], project, PATH=f"{npx.parent}:/usr/bin:/bin")
    assert (judged.verdict, judged.version) == (PERMIT, "0.1.16"), judged


@pytest.mark.skipif(NPX is None, reason="npx is not installed")
def test_the_machines_own_npx_passes_a_pinned_fixed_version(project: Path) -> None:
    """This machine's npm as installed (its builtin npmrc, if any, and its node's global
    npmrc) holds nothing that changes what runs."""
    assert NPX is not None
    judged = run(Path(NPX), PINNED["npx"], project)
    assert (judged.verdict, judged.version) == (PERMIT, "0.1.16"), judged


@pytest.mark.parametrize(
    "variable",
    ["npm_config_globalconfig", "NPM_CONFIG_GLOBALCONFIG", "Npm_Config_Userconfig",
     "npm_config_prefix"],
)  # fmt: skip
def test_a_variable_naming_npms_own_files_refuses(
    tmp_path: Path, project: Path, variable: str
) -> None:
    """npm reads ``npm_config_*`` in any case: these name the global and user files and the
    prefix whose ``etc/npmrc`` is read."""
    npx = npm_install(tmp_path / "nodejs")
    judged = run(npx, PINNED["npx"], project, PATH=f"{npx.parent}:/usr/bin:/bin",
                 **{variable: str(project / "npmrc")})  # fmt: skip
    assert judged.verdict == REFUSE and variable in judged.reason, judged


def test_an_npx_whose_npm_is_not_seen_refuses(tmp_path: Path, project: Path) -> None:
    """A native program named npx (a version manager's shim) starts an npm the gate does not
    see: which builtin and global npmrc it reads cannot be told."""
    npx = write_executable(tmp_path / "shim" / "npx", "\x7fELF not really\n")
    judged = run(npx, PINNED["npx"], project)
    assert judged.verdict == REFUSE and "which npm runs cannot be told" in judged.reason, judged


def test_destdir_refuses_it_moves_npms_global_prefix(tmp_path: Path, project: Path) -> None:
    """npm joins ``DESTDIR`` before its default global prefix, and reads that folder's
    ``etc/npmrc``."""
    npx = npm_install(tmp_path / "nodejs")
    judged = run(npx, PINNED["npx"], project, PATH=f"{npx.parent}:/usr/bin:/bin",
                 DESTDIR=str(project))  # fmt: skip
    assert judged.verdict == REFUSE and "DESTDIR" in judged.reason, judged


# ---------------------------------------------------------------------------- other launchers


@pytest.mark.parametrize(
    ("launcher", "name", "text"),
    [
        ("yarn", ".yarnrc.yml", "yarnPath: .yarn/releases/evil.cjs\n"),
        ("bunx", "bunfig.toml", 'preload = ["./evil.ts"]\n'),
        ("pnpm", "pnpm-workspace.yaml", "packages: []\n"),
    ],
)
def test_a_launchers_own_project_file_refuses_a_pinned_launch(
    bins: Path, project: Path, launcher: str, name: str, text: str
) -> None:
    found = write(project / name, text)
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE and str(found) in judged.reason, judged


def test_uvx_reads_the_uv_toml_of_the_childs_config_home(bins: Path, project: Path) -> None:
    """uv's tool commands ignore a project's uv.toml, but read the user's, wherever the
    child's XDG_CONFIG_HOME puts it."""
    write(project / "uv.toml", 'index-url = "https://evil.example/simple"\n')
    assert run(bins / "uvx", PINNED["uvx"], project).verdict == PERMIT
    config = write(project / "cfg" / "uv" / "uv.toml", 'python-install-mirror = "https://x"\n')
    judged = run(bins / "uvx", PINNED["uvx"], project, XDG_CONFIG_HOME=str(project / "cfg"))
    assert judged.verdict == REFUSE and str(config) in judged.reason, judged
    assert "'python-install-mirror'" in judged.reason


@pytest.mark.parametrize("name", [".python-version", ".python-versions"])
def test_uvx_refuses_the_users_python_pin_which_chooses_its_interpreter(
    bins: Path, project: Path, name: str
) -> None:
    """``uv python pin --global`` writes ``$XDG_CONFIG_HOME/uv/.python-version``, the
    interpreter uvx builds the tool's environment with (a relative path there is taken
    against the working directory: a copy of CPython in the workspace, whose standard
    library the workspace wrote). A project's ``.python-version`` is not read by uv's tool
    commands."""
    write(project / ".python-version", "3.12\n")
    assert run(bins / "uvx", PINNED["uvx"], project).verdict == PERMIT
    pin = write(_home_of(project) / ".config" / "uv" / name, "./py/bin/python3.12\n")
    judged = run(bins / "uvx", PINNED["uvx"], project)
    assert judged.verdict == REFUSE and str(pin) in judged.reason, judged


@pytest.mark.parametrize("name", ["python3", "python", "python3.12", "python3.13t", "pypy3"])
def test_uvx_refuses_a_python_on_path_in_the_working_directory(
    bins: Path, project: Path, name: str
) -> None:
    """With no pin, uv builds the tool's environment on the first Python it finds on PATH:
    one in the workspace (an activated project venv, a copied CPython) is the workspace's,
    its standard library and start-up code not judged."""
    folder = project / ".venv" / "bin"
    python = write(folder / name, "#!/bin/sh\n")
    python.chmod(0o755)
    judged = run(bins / "uvx", PINNED["uvx"], project, PATH=f"{folder}:/usr/bin:/bin")
    assert judged.verdict == REFUSE and str(python) in judged.reason, judged
    assert run(bins / "uvx", PINNED["uvx"], project, PATH="/usr/bin:/bin").verdict == PERMIT


def test_uvx_refuses_a_python_linked_into_the_working_directory_or_a_conda_there(
    bins: Path, project: Path, tmp_path: Path
) -> None:
    python = write(project / "py" / "bin" / "python3", "#!/bin/sh\n")
    python.chmod(0o755)
    outside = tmp_path / "outside-bin"
    outside.mkdir()
    (outside / "python3").symlink_to(python)
    judged = run(bins / "uvx", PINNED["uvx"], project, PATH=f"{outside}:/usr/bin:/bin")
    assert judged.verdict == REFUSE and "python3" in judged.reason, judged
    judged = run(bins / "uvx", PINNED["uvx"], project, PATH="/usr/bin:/bin",
                 CONDA_PREFIX=str(project / "py"))  # fmt: skip
    assert judged.verdict == REFUSE and "CONDA_PREFIX" in judged.reason, judged


@pytest.mark.parametrize("launcher", ["uvx", "pipx"])
def test_a_relative_config_home_does_not_hide_the_users_configuration(
    bins: Path, project: Path, launcher: str
) -> None:
    """uv drops a relative XDG_CONFIG_HOME and reads ~/.config; pip takes it as it is,
    against its working directory: a relative one is read both ways."""
    name = "uv/uv.toml" if launcher == "uvx" else "pip/pip.conf"
    text = (
        'override-dependencies = ["mcp-server-fetch==2024.1.1"]\n'
        if launcher == "uvx"
        else "[install]\nno-binary = :all:\n"
    )
    users = write(_home_of(project) / ".config" / name, text)
    relative = write(project / "rel" / name, text)
    for found in (users, relative):
        judged = run(bins / launcher, PINNED[launcher], project, XDG_CONFIG_HOME="rel")
        assert judged.verdict == REFUSE and str(found) in judged.reason, (found, judged)
        found.unlink()
    assert run(bins / launcher, PINNED[launcher], project, XDG_CONFIG_HOME="rel").verdict == (
        PERMIT
    )


@pytest.mark.parametrize(
    ("launcher", "variable"),
    [
        ("pipx", "PIP_INDEX_URL"),
        ("pipx", "PIP_FIND_LINKS"),
        ("pipx", "pip_config_file"),
        ("yarn", "COREPACK_NPM_REGISTRY"),  # where corepack fetches the yarn that runs
        ("pnpm", "COREPACK_HOME"),
    ],
)
def test_a_variable_that_configures_what_the_launcher_fetches_refuses(
    bins: Path, project: Path, launcher: str, variable: str
) -> None:
    judged = run(bins / launcher, PINNED[launcher], project, **{variable: str(project)})
    assert judged.verdict == REFUSE and variable in judged.reason, judged


def test_pipx_reads_the_childs_pip_conf(bins: Path, project: Path) -> None:
    conf = write(project / "cfg" / "pip" / "pip.conf", "[install]\nno-binary = :all:\n")
    judged = run(bins / "pipx", PINNED["pipx"], project, XDG_CONFIG_HOME=str(project / "cfg"))
    assert judged.verdict == REFUSE and str(conf) in judged.reason, judged


# ---------------------------------------------------------------------------- workspaces


def test_bare_npx_in_a_workspace_package_is_judged_from_the_workspace_root(
    bins: Path, project: Path
) -> None:
    """npm takes a workspace's root as its local prefix: ``npx mcp-remote`` in
    ``packages/a`` runs the root's ``node_modules/.bin/mcp-remote``, not the package's."""
    (project / "package.json").write_text(
        json.dumps({"name": "root", "workspaces": ["packages/*"]})
    )
    _local_install(project, "0.1.15")
    member = project / "packages" / "a"
    member.mkdir(parents=True)
    (member / "package.json").write_text(json.dumps({"name": "a", "version": "1.0.0"}))
    _local_install(member, "0.1.16")
    judged = run(bins / "npx", ["mcp-remote"], member)
    assert judged.verdict == REFUSE, judged
    assert str(project / "package.json") in judged.reason, judged.reason


# ---------------------------------------------------------------------------- the local bin


@pytest.mark.parametrize(
    "text",
    [
        '#!/bin/sh\nexec /tmp/anything "$@"\n',  # a launcher: what it starts is not seen
        "exec /tmp/anything\n",  # no #! line: the shell runs it as a script
        "#!/usr/bin/env -S node --require ./evil.js\n",  # node options not examined
    ],
)
def test_bare_npx_refuses_a_local_bin_that_node_would_not_run_as_it_is(
    bins: Path, project: Path, text: str
) -> None:
    """The nearest package.json above ``node_modules/.bin`` may be the project's, named as
    the package: the bin file itself must be a program node runs, or native."""
    (project / "package.json").write_text(json.dumps({"name": "mcp-remote", "version": "0.1.16"}))
    write_executable(project / "node_modules" / ".bin" / "mcp-remote", text)
    judged = run(bins / "npx", ["mcp-remote"], project)
    assert judged.verdict == REFUSE, judged
    assert str(project / "node_modules" / ".bin" / "mcp-remote") in judged.reason, judged.reason


def test_a_user_npmrc_prefix_is_followed_to_its_own_npmrc(bins: Path, project: Path) -> None:
    """``prefix=~/.npm-global`` is a common user setting; npm then reads
    ``~/.npm-global/etc/npmrc`` too, by the same rules."""
    home = _home_of(project)
    write(home / ".npmrc", "prefix=~/.npm-global\ncache=~/.cache/npm\n")
    assert run(bins / "npx", PINNED["npx"], project).verdict == PERMIT
    global_rc = write(home / ".npm-global" / "etc" / "npmrc", "script-shell=/tmp/evil.sh\n")
    judged = run(bins / "npx", PINNED["npx"], project)
    assert judged.verdict == REFUSE and str(global_rc) in judged.reason, judged


def _global_install(prefix: Path, version: str, *, bin_version: str | None = None) -> None:
    """mcp-remote ``version`` in the global prefix's ``lib/node_modules``, and its
    ``bin/mcp-remote`` link to the cli.js of ``bin_version`` (another copy when it differs,
    as a link left from an older install would be)."""
    for stated in {version, bin_version or version}:
        folder = prefix / "lib" / "node_modules" / ("mcp-remote" if stated == version else "old")
        manifest = {"name": "mcp-remote", "version": stated, "bin": {"mcp-remote": "cli.js"}}
        write(folder / "package.json", json.dumps(manifest))
        (write(folder / "cli.js", "#!/usr/bin/env node\n")).chmod(0o755)
    target = "mcp-remote" if (bin_version or version) == version else "old"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    (prefix / "bin" / "mcp-remote").symlink_to(f"../lib/node_modules/{target}/cli.js")


@pytest.mark.parametrize("launcher", ["npx", "npm"])
def test_a_global_bin_that_is_not_the_version_pinned_refuses(
    bins: Path, project: Path, launcher: str
) -> None:
    """With nothing local, npm looks in its global prefix: when that tree holds the version
    pinned it runs ``<prefix>/bin/<bin>``, whatever file that is."""
    prefix = _home_of(project) / ".npm-global"
    write(_home_of(project) / ".npmrc", "prefix=~/.npm-global\n")
    _global_install(prefix, "0.1.16", bin_version="0.1.15")
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE, judged
    assert str(prefix / "bin" / "mcp-remote") in judged.reason, judged.reason


def test_a_global_file_named_as_the_pinned_spec_refuses(bins: Path, project: Path) -> None:
    """npm runs ``<prefix>/bin/<spec as typed>`` before anything else when it is a file."""
    prefix = _home_of(project) / ".npm-global"
    write(_home_of(project) / ".npmrc", "prefix=~/.npm-global\n")
    (write(prefix / "bin" / "mcp-remote@0.1.16", "#!/bin/sh\n")).chmod(0o755)
    judged = run(bins / "npx", PINNED["npx"], project)
    assert judged.verdict == REFUSE, judged
    assert str(prefix / "bin" / "mcp-remote@0.1.16") in judged.reason, judged.reason


@pytest.mark.parametrize("version", ["0.1.16", "0.1.15"])
def test_a_global_install_of_the_pin_or_of_another_version_passes(
    bins: Path, project: Path, version: str
) -> None:
    """The global install of the very version pinned, its bin its own, is that version; one
    of another version is not what npm runs for the pin."""
    write(_home_of(project) / ".npmrc", "prefix=~/.npm-global\n")
    _global_install(_home_of(project) / ".npm-global", version)
    assert run(bins / "npx", PINNED["npx"], project).verdict == PERMIT


# ---------------------------------------------------------------------------- run by an interpreter

NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_running_npx_cli_is_judged_as_the_package_npx_runs(project: Path) -> None:
    """``node .../npx-cli.js -y PKG@V`` is npx under another spelling (npm installed beside
    the project: one inside it is the workspace's code)."""
    npx_cli = probes.npm_package(project.parent / "npm") / "bin" / "npx-cli.js"
    assert NODE is not None
    for args in (
        ["../npm/bin/npx-cli.js", "-y", "mcp-remote@0.1.15"],
        [str(npx_cli), "mcp-remote@0.1.15"],
    ):
        judged = run(Path(NODE), args, project)
        assert (judged.verdict, judged.adapter, judged.version) == (REFUSE, "mcp-remote", "0.1.15")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("spelling", ["../npm/bin/npx-cli", "../npm/bin/./npx-cli", "npx-main"])
def test_node_running_npx_cli_under_a_spelling_node_resolves_is_npx(
    project: Path, spelling: str
) -> None:
    """node resolves its main script as its loader does: ``.../npx-cli`` loads
    ``npx-cli.js``, a folder its package.json ``main``. Each is npx, judged as the package
    it runs, never an untracked node program."""
    npx_cli = probes.npm_package(project.parent / "npm") / "bin" / "npx-cli.js"
    write(project / "npx-main" / "package.json", json.dumps({"main": str(npx_cli)}))
    assert NODE is not None
    judged = run(Path(NODE), [spelling, "-y", "mcp-remote@0.1.15"], project)
    assert (judged.verdict, judged.adapter, judged.version) == (REFUSE, "mcp-remote", "0.1.15")


def test_python_running_pipx_as_a_module_is_judged_as_pipx_run(
    project: Path, tmp_path: Path
) -> None:
    argv = ["-P", "-m", "pipx", "run", "mcp-server-fetch==2024.1.0"]
    judged = run(probes.real_venv(tmp_path / "venv"), argv, project)
    assert (judged.verdict, judged.adapter, judged.version) == (
        REFUSE, "mcp-server-fetch", "2024.1.0",
    ), judged  # fmt: skip


# ---------------------------------------------------------------------------- the real CLI


@pytest.mark.skipif(NPX is None, reason="npx is not installed")
def test_floorguard_exec_refuses_npx_under_a_project_npmrc_and_starts_nothing(
    tmp_path: Path, project: Path
) -> None:
    """The real npx through ``python -m floorguard exec``: the fixed version pinned, but the
    project's .npmrc would make npx run its bin through another program."""
    shell = tmp_path / "ran"
    (project / ".npmrc").write_text(f"script-shell={project / 'evil.sh'}\n")
    write_executable(project / "evil.sh", f"#!/bin/sh\ntouch {shell}\n")
    done = _exec(tmp_path, project, "npx", "--", "-y", "mcp-remote@0.1.16", "https://x.invalid")
    assert done.returncode == 126, done
    assert str(project / ".npmrc") in done.stderr and "'script-shell'" in done.stderr, done.stderr
    assert not shell.exists()


def test_a_home_inside_the_working_directory_is_held_to_a_projects_rules(
    bins: Path, project: Path
) -> None:
    """A declaration's env can point HOME or XDG_CONFIG_HOME into the project: the registry
    or index a file there names is the workspace's choice, not the user's."""
    inside = project / "home"
    npmrc = write(inside / ".npmrc", "registry=https://registry.evil.example/\n")
    judged = run(bins / "npx", PINNED["npx"], project, HOME=str(inside))
    assert judged.verdict == REFUSE and str(npmrc) in judged.reason, judged
    conf = write(inside / "cfg" / "pip" / "pip.conf", "[global]\nindex-url = https://x\n")
    judged = run(bins / "pipx", PINNED["pipx"], project, XDG_CONFIG_HOME=str(inside / "cfg"))
    assert judged.verdict == REFUSE and str(conf) in judged.reason, judged


# ---------------------------------------------------------------- what else a launcher runs


@pytest.mark.parametrize(
    ("launcher", "setting"),
    [
        ("bunx", {"BUN_OPTIONS": "--preload=./p.js"}),  # bun's own command line
        ("bunx", {"BUN_INSTALL_CACHE_DIR": "cache"}),  # its installs, in the workspace
        ("pnpm", {"XDG_CACHE_HOME": "cache"}),  # the dlx cache, in the workspace
        ("uvx", {"XDG_DATA_HOME": "data"}),  # uv's installed tools, in the workspace
        # bun installs and reruns `bunx NAME@V` from <temp>/bunx-<uid>-NAME@V, its temporary
        # folder the first of TMPDIR, TMP and TEMP set
        ("bunx", {"TMPDIR": "tmp"}),
        ("bunx", {"TMP": "tmp"}),
        ("bunx", {"TEMP": "tmp"}),
        ("pnpm", {"PNPM_HOME": "pnpm"}),  # pnpm's data folder (its store) before XDG's
        ("pipx", {"XDG_CACHE_HOME": "cache"}),  # pipx run's cached environments
    ],
)
def test_a_variable_that_moves_what_runs_into_the_workspace_refuses(
    bins: Path, project: Path, launcher: str, setting: dict[str, str]
) -> None:
    judged = run(bins / launcher, PINNED[launcher], project, **setting)
    assert judged.verdict == REFUSE, judged
    assert next(iter(setting)) in judged.reason, judged.reason


@pytest.mark.parametrize("launcher", sorted(PINNED))
def test_a_home_below_the_working_directory_refuses_for_its_caches(
    bins: Path, project: Path, launcher: str
) -> None:
    """A launcher's cache and installs live under HOME by default (npm's ``~/.npm/_npx``,
    uv's ``~/.cache/uv``): a HOME below the working directory (a declaration's env can name
    one) makes them the workspace's, which then says what a pinned version is."""
    judged = run(bins / launcher, PINNED[launcher], project, HOME=str(project / ".h"))
    assert judged.verdict == REFUSE, judged
    assert f"HOME={project / '.h'}" in judged.reason, judged.reason


@pytest.mark.parametrize("launcher", sorted(PINNED))
def test_an_empty_home_refuses_for_its_caches(bins: Path, project: Path, launcher: str) -> None:
    """node's ``os.homedir()`` returns an empty HOME as it is, and npm then keeps the ``~``
    of its default cache ``~/.npm``: ``<cwd>/~/.npm``, a folder of the working directory
    the workspace can ship with ``_npx`` trees in it. The other launchers' home lookups
    differ on an empty HOME too (as it is, or the user's entry)."""
    judged = run(bins / launcher, PINNED[launcher], project, HOME="")
    assert judged.verdict == REFUSE, judged
    assert "HOME is set but empty" in judged.reason, judged.reason


@pytest.mark.parametrize("launcher", ["npx", "npm"])
def test_a_user_npmrc_cache_in_the_working_directory_refuses(
    bins: Path, project: Path, launcher: str
) -> None:
    write(_home_of(project) / ".npmrc", f"cache={project / 'c'}\n")
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE and "'cache'" in judged.reason, judged.reason


def test_a_home_that_is_the_working_directory_stays_the_users(bins: Path, project: Path) -> None:
    """An agent started in the user's own home is common: that home is no workspace's."""
    home = _home_of(project)
    assert judge(bins / "npx", PINNED["npx"], home, HOME=str(home)).verdict == PERMIT


_NETWORK = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "ALL_PROXY": "socks5://127.0.0.1:9",
    "NODE_EXTRA_CA_CERTS": "ca.pem",
    "NODE_TLS_REJECT_UNAUTHORIZED": "0",
    "SSL_CERT_FILE": "ca.pem",
    "REQUESTS_CA_BUNDLE": "ca.pem",
}


@pytest.mark.parametrize("launcher", sorted(PINNED))
@pytest.mark.parametrize("variable", sorted(_NETWORK))
def test_a_proxy_or_certificate_variable_refuses_a_launcher_that_fetches(
    bins: Path, project: Path, launcher: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pinned version is fetched from the registry when nothing local holds it: a proxy
    and a certificate authority of the workspace's (an MCP declaration's env) serve it
    whatever bytes they like under that version."""
    monkeypatch.delenv(variable, raising=False)
    judged = run(bins / launcher, PINNED[launcher], project, **{variable: _NETWORK[variable]})
    assert judged.verdict == REFUSE, judged
    assert variable in judged.reason, judged.reason


def test_the_hosts_own_proxy_passes_on_to_a_launcher(
    bins: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy the host itself runs with (a company network) is the user's, not the
    workspace's: the same value passed on is no refusal."""
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp.example:3128")
    judged = run(bins / "npx", PINNED["npx"], project, HTTPS_PROXY="http://proxy.corp.example:3128")
    assert judged.verdict == PERMIT, judged


def test_a_cache_home_outside_the_working_directory_is_the_users(bins: Path, project: Path) -> None:
    judged = run(bins / "pnpm", PINNED["pnpm"], project,
                 XDG_CACHE_HOME=str(_home_of(project) / ".cache"))  # fmt: skip
    assert judged.verdict == PERMIT, judged


@pytest.mark.parametrize("file", [".yarnrc", "package.json"])
def test_yarn_dlx_that_yarn_1_reads_as_a_script_or_another_yarn_refuses(
    bins: Path, project: Path, file: str
) -> None:
    # yarn 1 has no dlx: ``yarn dlx`` runs the package.json script named dlx, and .yarnrc's
    # yarn-path runs another yarn.
    text = 'yarn-path "./y.js"\n' if file == ".yarnrc" else '{"scripts": {"dlx": "./evil"}}'
    write(project / file, text)
    judged = run(bins / "yarn", PINNED["yarn"], project)
    assert judged.verdict == REFUSE and file in judged.reason, judged


@pytest.mark.parametrize("launcher", ["pnpm", "yarn"])
def test_a_package_manager_the_project_names_refuses_its_dlx(
    bins: Path, project: Path, launcher: str
) -> None:
    """pnpm (and corepack, and yarn through it) fetch and run the version a package.json's
    packageManager names, in place of the one judged; a project without one passes."""
    assert run(bins / launcher, PINNED[launcher], project).verdict == PERMIT
    for manifest in (
        '{"packageManager": "pnpm@9.0.0+sha512.abc"}',
        '{"devEngines": {"packageManager": {"name": "pnpm", "version": "9.0.0"}}}',
    ):
        write(project / "package.json", manifest)
        judged = run(bins / launcher, PINNED[launcher], project)
        assert judged.verdict == REFUSE and "packageManager" in judged.reason, judged


@pytest.mark.parametrize("manifest", ["package.yaml", "package.json5"])
def test_pnpms_other_manifest_formats_refuse_pnpm_dlx(
    bins: Path, project: Path, manifest: str
) -> None:
    """pnpm reads package.yaml and package.json5 as it reads package.json: a packageManager
    there is not read here, so either refuses."""
    write(project / manifest, "packageManager: pnpm@9.0.0\n")
    judged = run(bins / "pnpm", PINNED["pnpm"], project)
    assert judged.verdict == REFUSE and manifest in judged.reason, judged


def test_pnpms_own_settings_file_refuses_pnpm_dlx(bins: Path, project: Path) -> None:
    config = write(_home_of(project) / ".config" / "pnpm" / "config.yaml", "cacheDir: x\n")
    judged = run(bins / "pnpm", PINNED["pnpm"], project)
    assert judged.verdict == REFUSE and str(config) in judged.reason, judged


def test_pnpms_short_names_are_pnpm() -> None:
    from floorguard._identify import launchers

    assert launchers.launcher_of(("pnx",), ["x@1.0.0"]) == ("pnpm dlx", 0)
    assert launchers.launcher_of(("pn",), ["dlx", "x@1.0.0"]) == ("pnpm dlx", 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["--from", "mcp-server-fetch==2025.2.0", "mcp-server-fetch-extra"],
        ["--from", "claude==1.0.0", "claude"],  # an untracked package named as an agent
    ],
)
def test_uvx_from_runs_only_a_command_it_can_name(
    bins: Path, project: Path, argv: list[str]
) -> None:
    judged = run(bins / "uvx", argv, project)
    assert judged.verdict == REFUSE and "own command" in judged.reason, judged


def test_a_fifo_package_json_read_for_yarn_is_refused_without_blocking(
    bins: Path, project: Path
) -> None:
    # The nearest package.json is read for yarn 1's dlx script: a FIFO there must not hang
    # the gate (nothing writes to it), and what cannot be read refuses.
    os.mkfifo(project / "package.json")
    judged = run(bins / "yarn", PINNED["yarn"], project)
    assert judged.verdict == REFUSE and "package.json" in judged.reason, judged


@pytest.mark.parametrize("launcher", ["npx", "npm", "pnpm", "bunx"])
def test_a_user_npmrc_linked_into_the_working_directory_is_held_to_a_projects_rules(
    bins: Path, project: Path, launcher: str
) -> None:
    # A dotfiles checkout the agent works in: ~/.npmrc -> project/npm/npmrc. The project
    # wrote that file, so it may not name a registry, as a project's .npmrc may not.
    dotfile = write(project / "npm" / "npmrc", "registry=http://127.0.0.1:9/\n")
    _home_of(project).mkdir(exist_ok=True)
    (_home_of(project) / ".npmrc").symlink_to(dotfile)
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE and "registry" in judged.reason, judged.reason


@pytest.mark.parametrize("launcher", ["npx", "pnpm"])
def test_a_user_npmrc_hard_linked_to_a_file_of_the_working_directory_is_a_projects(
    bins: Path, project: Path, launcher: str
) -> None:
    # No path shows a hard link: a user's file with another name may be the workspace's.
    dotfile = write(project / "npm" / "npmrc", "registry=http://127.0.0.1:9/\n")
    _home_of(project).mkdir(exist_ok=True)
    os.link(dotfile, _home_of(project) / ".npmrc")
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE and "registry" in judged.reason, judged.reason


def test_a_user_npmrc_naming_a_registry_outside_the_working_directory_is_understood(
    bins: Path, project: Path
) -> None:
    elsewhere = write(
        _home_of(project).parent / "dotfiles" / "npmrc", "registry=http://127.0.0.1:9/\n"
    )
    _home_of(project).mkdir(exist_ok=True)
    (_home_of(project) / ".npmrc").symlink_to(elsewhere)
    judged = run(bins / "npx", PINNED["npx"], project)
    assert judged.verdict == PERMIT, judged.reason


# npm_ and 36 letters and digits: an npm access token's form.
TOKEN = "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    "line",
    [
        f"{TOKEN}=true",
        f"//registry.npmjs.org/:{TOKEN}=",
        f"{TOKEN}",
        "Ym9iOmh1bnRlcjI=",  # an _auth (bob:hunter2) whose base64 padding npm reads as the =
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0=",  # a legacy token, a UUID
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY=",  # a cloud secret key
    ],
)
def test_a_token_pasted_as_an_npmrc_key_is_not_quoted(bins: Path, project: Path, line: str) -> None:
    write(project / ".npmrc", line + "\n")
    judged = run(bins / "npx", PINNED["npx"], project)
    assert judged.verdict == REFUSE and str(project / ".npmrc") in judged.reason, judged.reason
    for part in ("a1B2c3D4e5F6", "Ym9iOmh1", "0f1e2d3c", "wJalrXUt", "bPxRfiCY"):
        assert part not in judged.reason, judged.reason


def test_a_token_pasted_as_a_uv_or_pip_key_is_not_quoted(bins: Path, project: Path) -> None:
    write(project / "cfg" / "uv" / "uv.toml", f'{TOKEN} = "x"\n')
    judged = run(bins / "uvx", PINNED["uvx"], project, XDG_CONFIG_HOME=str(project / "cfg"))
    assert judged.verdict == REFUSE and "uv.toml" in judged.reason, judged.reason
    assert "a1B2c3D4e5F6" not in judged.reason, judged.reason


@pytest.mark.parametrize(
    ("launcher", "linked"),
    [
        ("npx", ".npm"),
        ("npm", ".npm"),
        ("npx", ".npm/_npx"),
        ("npm", ".npm/_npx"),
        ("npx", ".npm/_cacache"),
        ("npm", ".npm/_cacache"),
        ("npx", ".npm/_npx/0123456789abcdef"),
        ("npm", ".npm/_npx/0123456789abcdef"),
        ("uvx", ".cache/uv"),
        ("uvx", ".local/share/uv"),
        ("uvx", ".cache"),
        ("pipx", ".cache/pipx"),
        ("pipx", ".local/pipx"),
        ("pnpm", ".local/share/pnpm"),
    ],
)
def test_a_launchers_cache_or_installs_linked_into_the_working_directory_refuses(
    bins: Path, project: Path, launcher: str, linked: str
) -> None:
    # npm takes a package from its content cache (_cacache) and reruns an _npx tree it
    # finds, uv a tool it installed or cached that satisfies the pin, pipx its cached
    # environment, pnpm its store: linked into the project, the repository fills them
    # (whatever the registry serves), as it would through a variable naming a folder there.
    target = project / "cache-folder"
    target.mkdir()
    at = _home_of(project) / linked
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(target)
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == REFUSE and "leads into the working directory" in judged.reason, (
        judged.reason
    )
    assert str(at) in judged.reason, judged.reason


@pytest.mark.parametrize("launcher", ["uvx", "pipx", "pnpm"])
def test_a_launchers_cache_linked_outside_the_working_directory_is_understood(
    bins: Path, project: Path, launcher: str
) -> None:
    target = _home_of(project).parent / "volume"
    target.mkdir()
    (_home_of(project) / ".cache").parent.mkdir(parents=True, exist_ok=True)
    (_home_of(project) / ".cache").symlink_to(target)
    judged = run(bins / launcher, PINNED[launcher], project)
    assert judged.verdict == PERMIT, judged.reason
