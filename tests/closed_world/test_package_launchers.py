"""Package launchers (npx, npm exec, pnpm dlx, bunx, yarn dlx, uvx, pipx run) are judged as
the package they run, and packages named only in the map (no catalogue entry) are
identified from their installed metadata. Hostile specs and options are refused with a
reason that names them.

In process and cheap: the gate's own judgement (``_judge_opened``) on an ``ActiveMap``
holding the real GHSA-6xpm-ggf7-wc3p shape for mcp-remote, small local package trees
(package.json files, dist-info folders) and launcher files that are never run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.advisory_maps import extended_module
from helpers.cli import isolated_env
from probes import (
    node_with_npm,
    npm_layout,
    pip_install,
    pip_layout,
    real_venv,
    write_executable,
)
from probes.native import native_program

from floorguard._gate import gate
from floorguard._gate.decision import BLOCK, PERMIT, REFUSE, UNTRACKED
from floorguard._identify import identify, launchers
from floorguard._identify.target import open_target
from floorguard._maps import map_model
from floorguard._maps.active_map import ActiveMap

# The GitHub advisory GHSA-6xpm-ggf7-wc3p (CVE-2025-6514) as a map entry: npm mcp-remote,
# affected >= 0.0.5, < 0.1.16, fixed in 0.1.16.
MCP_REMOTE = {
    "ecosystem": "npm",
    "package": "mcp-remote",
    "kind": "mcp-server",
    "advisories": [
        {
            "id": "GHSA-6xpm-ggf7-wc3p",
            "aliases": ["CVE-2025-6514"],
            "summary": "mcp-remote exposed to OS command injection via untrusted MCP server "
            "connections",
            "affected": [{"introduced": "0.0.5", "fixed": "0.1.16"}],
            "versions": [],
            "severity": [],
            "references": [],
        }
    ],
    "waivers": [],
}
FETCH_SERVER = {
    "min_safe_version": "2025.1.0",
    "advisory_id": "BSA-0100",
    "note": "a floor for a PyPI MCP server",
    "ecosystem": "PyPI",
    "package": "mcp-server-fetch",
    "kind": "mcp-server",
    "advisories": [],
    "waivers": [],
}
SCOPED = {**MCP_REMOTE, "package": "@acme/mcp-tool", "kind": "mcp-server"}


def _in_force() -> ActiveMap:
    floor_map = map_model.from_entries(
        {"mcp-remote": MCP_REMOTE, "mcp-server-fetch": FETCH_SERVER, "acme-tool": SCOPED}
    )
    return ActiveMap(floor_map, map_model.floor_map_hash(floor_map), 1, "test")


IN_FORCE = _in_force()


@pytest.fixture(autouse=True)
def _fresh_identification() -> None:
    identify.clear_cache()


def judge(program: Path, argv: list[str], cwd: Path, **env: str) -> Any:
    environ = {"PATH": "/usr/bin:/bin", **env}
    with open_target(str(program), path_env=environ["PATH"]) as opened:
        return gate._judge_opened(
            program.name, opened, None, in_force=IN_FORCE, version=None, policy=BLOCK,
            environ=environ, argv=argv, cwd=str(cwd),
        )  # fmt: skip


@pytest.fixture
def bins(tmp_path: Path) -> Path:
    """Launcher files named as each launcher is (never run: what they are named decides
    which command line is read; native launchers are ELF, here a copy's name is enough).
    npx and npm are npm's own scripts, linked from an npm install whose node runs them
    (npm's builtin and global configuration are read from where they are)."""
    folder = tmp_path / "bin"
    # A launcher must be what its name says: a native one answers --version as it does
    # (bun's and pnpm's standalone build: a bare version), yarn is yarn's own script.
    for name in ("pnpm", "pnpx", "bunx", "bun"):
        native_program(folder / name, stdout=b"10.0.0\n")
    yarn_script(tmp_path / "yarnpkg", folder / "yarn")
    # uv's must say they are uv when asked; pipx must be a Python program, judged (this one
    # imports nothing: it could run nothing the gate would not see).
    native_program(folder / "uvx", stdout=b"uvx 0.9.4 (0000000 2025-10-01)\n")
    native_program(folder / "uv", stdout=b"uv 0.9.4 (0000000 2025-10-01)\n")
    # (Its python is a venv of its own: the test run's has this repository's editable
    # install, whose .pth adds a folder of modules to its path.)
    python = real_venv(tmp_path / "pipx-venv")
    write_executable(folder / "pipx", f"#!{python}\nimport sys\nsys.exit(0)\n")
    npm = node_with_npm(tmp_path / "nodejs")
    for name in ("npx", "npm"):
        (folder / name).symlink_to(npm / name)
    return folder


def yarn_script(package: Path, link: Path) -> Path:
    """yarn 1 as npm installs it: the package ``yarn`` whose ``bin/yarn.js`` (a node
    script) ``link`` points to."""
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "yarn", "version": "1.22.22"}))
    write_executable(package / "bin" / "yarn.js", "#!/usr/bin/env node\n")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(package / "bin" / "yarn.js")
    return link


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


# ---------------------------------------------------------------------------- pinned


@pytest.mark.parametrize(
    ("launcher", "argv"),
    [
        ("npx", ["-y", "mcp-remote@0.1.15", "https://example.com/sse"]),
        ("npx", ["--yes", "--", "mcp-remote@0.1.15"]),
        ("npm", ["exec", "--", "mcp-remote@0.1.15", "--header", "x"]),
        ("npm", ["x", "-y", "mcp-remote@0.1.15"]),
        ("pnpm", ["dlx", "mcp-remote@0.1.15"]),
        ("pnpx", ["mcp-remote@0.1.15"]),
        ("bunx", ["mcp-remote@0.1.15"]),
        ("bun", ["x", "mcp-remote@0.1.15"]),
        ("yarn", ["dlx", "-q", "mcp-remote@0.1.15"]),
    ],
)
def test_a_pinned_affected_mcp_remote_is_refused_through_every_npm_launcher(
    bins: Path, project: Path, launcher: str, argv: list[str]
) -> None:
    judged = judge(bins / launcher, argv, project)
    assert judged.verdict == REFUSE, judged
    assert judged.adapter == "mcp-remote" and judged.version == "0.1.15"
    assert judged.detected_by == "launcher-spec"
    assert "GHSA-6xpm-ggf7-wc3p" in judged.reason and "CVE-2025-6514" in judged.reason


def test_the_fixed_version_is_permitted_and_says_how_it_was_known(
    bins: Path, project: Path
) -> None:
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == PERMIT, judged
    assert (judged.adapter, judged.version, judged.identified_by) == ("mcp-remote", "0.1.16", "npx")


@pytest.mark.parametrize(
    ("launcher", "argv", "verdict"),
    [
        ("uvx", ["mcp-server-fetch==2024.9.1"], REFUSE),
        ("uvx", ["mcp-server-fetch@2024.9.1"], REFUSE),
        ("uv", ["tool", "run", "mcp-server-fetch==2025.2.0"], PERMIT),
        ("uvx", ["--from", "mcp-server-fetch==2024.9.1", "mcp-server-fetch"], REFUSE),
        ("uvx", ["Mcp_Server.Fetch==2024.9.1"], REFUSE),  # PyPI names compare normalised
        ("pipx", ["run", "mcp-server-fetch==2024.9.1"], REFUSE),
        ("pipx", ["run", "--spec", "mcp-server-fetch==2025.2.0", "mcp-server-fetch"], PERMIT),
        # PEP 440's arbitrary equality names one version string: pinned too
        ("uvx", ["mcp-server-fetch===2025.2.0"], PERMIT),
        ("pipx", ["run", "mcp-server-fetch===2025.2.0"], PERMIT),
    ],
)
def test_pinned_pypi_launches_are_judged_by_the_floor(
    bins: Path, project: Path, launcher: str, argv: list[str], verdict: str
) -> None:
    judged = judge(bins / launcher, argv, project)
    assert judged.verdict == verdict, judged
    assert judged.adapter == "mcp-server-fetch"


def test_a_scoped_package_is_found_under_its_entry(bins: Path, project: Path) -> None:
    judged = judge(bins / "npx", ["-y", "@acme/mcp-tool@0.1.2"], project)
    assert (judged.verdict, judged.adapter) == (REFUSE, "acme-tool"), judged


def test_an_untracked_pinned_package_is_untracked_and_refused_under_deny_by_default(
    bins: Path, project: Path
) -> None:
    assert judge(bins / "npx", ["-y", "cowsay@1.6.0"], project).verdict == UNTRACKED
    denied = judge(bins / "npx", ["cowsay@1.6.0"], project, FLOORGUARD_UNTRACKED_POLICY="refuse")
    assert denied.verdict == REFUSE


# ---------------------------------------------------------------------------- unpinned


@pytest.mark.parametrize(
    ("launcher", "argv", "shown"),
    [
        ("npx", ["mcp-remote@latest"], "'latest' is a tag or a range"),
        ("npx", ["-y", "mcp-remote"], "no version"),
        ("npx", ["mcp-remote@^0.1.16"], "is a tag or a range"),
        ("npx", ["mcp-remote@0.1"], "is a tag or a range"),
        ("npx", ["mcp-remote@v0.1.16"], "is a tag or a range"),
        ("npx", ["mcp-remote@=0.1.16"], "is a tag or a range"),
        ("npx", ["mcp-remote@0.1.16+build.1"], "is a tag or a range"),
        ("pnpm", ["dlx", "mcp-remote@next"], "is a tag or a range"),
        ("uvx", ["mcp-server-fetch>=1"], "a range of versions"),
        ("uvx", ["mcp-server-fetch"], "no version"),
        ("uvx", ["mcp-server-fetch@latest"], "@latest"),
        ("uvx", ["mcp-server-fetch==2025.*"], "is no one version"),
        ("uvx", ["mcp-server-fetch~=2025.1"], "a range of versions"),
        ("pipx", ["run", "mcp-server-fetch"], "no version"),
    ],
)
def test_an_unpinned_tracked_package_is_refused_with_the_advice_to_pin(
    bins: Path, project: Path, launcher: str, argv: list[str], shown: str
) -> None:
    judged = judge(bins / launcher, argv, project)
    assert judged.verdict == REFUSE, judged
    assert shown in judged.reason and launchers.PIN_ADVICE in judged.reason, judged.reason


def _local_install(root: Path, version: str, *, package: str = "mcp-remote") -> None:
    """``node_modules/<package>`` with its package.json and the ``.bin`` link npm makes."""
    folder = root / "node_modules" / package
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(
        json.dumps({"name": package, "version": version, "bin": {"mcp-remote": "cli.js"}}),
        encoding="utf-8",
    )
    write_executable(folder / "cli.js", "#!/usr/bin/env node\n")
    (root / "node_modules" / ".bin").mkdir(exist_ok=True)
    os.symlink(f"../{package}/cli.js", root / "node_modules" / ".bin" / "mcp-remote")


@pytest.mark.parametrize(("local", "verdict"), [("0.1.16", PERMIT), ("0.1.15", REFUSE)])
def test_a_pinned_npx_passes_a_local_bin_only_when_it_is_the_version_pinned(
    bins: Path, project: Path, local: str, verdict: str
) -> None:
    """npm runs the nearest node_modules/.bin of the bin's name: the very version pinned
    there is what was judged; another is not."""
    _local_install(project, local)
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16", "https://example.com/sse"], project)
    assert judged.verdict == verdict, judged
    if verdict == REFUSE:
        assert "node_modules/.bin/mcp-remote (first when npm" in judged.reason, judged.reason


def test_bare_npx_runs_the_local_install_it_prefers_and_is_judged_by_its_version(
    bins: Path, project: Path
) -> None:
    _local_install(project, "0.1.15")
    below = project / "src" / "deep"
    below.mkdir(parents=True)
    judged = judge(bins / "npx", ["-y", "mcp-remote", "https://example.com/sse"], below)
    assert (judged.verdict, judged.version, judged.detected_by) == (
        REFUSE, "0.1.15", "npm-metadata",
    ), judged  # fmt: skip
    assert "GHSA-6xpm-ggf7-wc3p" in judged.reason


def test_bare_npx_with_a_fixed_local_install_is_permitted(bins: Path, project: Path) -> None:
    _local_install(project, "0.1.16")
    judged = judge(bins / "npx", ["mcp-remote"], project)
    assert (judged.verdict, judged.version) == (PERMIT, "0.1.16"), judged


def test_a_local_bin_of_another_package_under_the_tracked_name_is_refused(
    bins: Path, project: Path
) -> None:
    _local_install(project, "9.9.9", package="not-mcp-remote")
    judged = judge(bins / "npx", ["mcp-remote"], project)
    assert judged.verdict == REFUSE and "not mcp-remote's" in judged.reason, judged


def test_bare_npx_in_a_project_whose_own_bin_is_the_command_is_refused(
    bins: Path, project: Path
) -> None:
    """npx runs the local project's own bin before any install: code nobody judged."""
    (project / "package.json").write_text(
        json.dumps({"name": "my-fork", "version": "0.1.16", "bin": {"mcp-remote": "x.js"}})
    )
    judged = judge(bins / "npx", ["mcp-remote"], project)
    assert judged.verdict == REFUSE and "project's own bin" in judged.reason, judged


# ---------------------------------------------------------------------------- hostile


@pytest.mark.parametrize(
    ("launcher", "argv", "shown"),
    [
        ("npx", ["-y", "mcp-remote@0.1.15 "], "white space"),
        ("npx", ["-y", " mcp-remote@0.1.16"], "white space"),
        ("npx", ["mcp-remote@ 0.1.16"], "white space"),
        ("npx", ["mcp-remote@0.1.16\u00a0"], "white space"),
        ("npx", ["mcp-remote@npm:mcp-remote@0.1.15"], "npm: alias"),
        ("npx", ["mcp-remote@npm:evil@1.0.0"], "npm: alias"),
        ("npx", ["git+https://github.com/geelen/mcp-remote.git"], "path, URL or git spec"),
        ("npx", ["github:geelen/mcp-remote"], "path, URL or git spec"),
        ("npx", ["geelen/mcp-remote"], "git host shorthand"),
        ("npx", ["mcp-remote@github:geelen/mcp-remote#v0.1.16"], "URL, git or file spec"),
        ("npx", ["https://example.com/mcp-remote-0.1.16.tgz"], "path, URL or git spec"),
        ("npx", ["file:../mcp-remote"], "path, URL or git spec"),
        ("npx", ["./mcp-remote"], "path, URL or git spec"),
        ("npx", ["mcp-remote@file:../x"], "URL, git or file spec"),
        ("npx", ["mcp-rem\u043ete@0.1.16"], "not printable ASCII"),  # Cyrillic o
        ("npx", ["MCP-Remote@0.1.16"], "lower case"),
        ("npx", ["-p", "mcp-remote@0.1.16", "mcp-remote"], "'-p' names the packages"),
        ("npx", ["--package=mcp-remote@0.1.16", "mcp-remote"], "'--package=mcp-remote@0.1.16'"),
        ("npx", ["-c", "mcp-remote"], "runs a shell command"),
        ("npx", ["--registry=https://evil.example", "mcp-remote@0.1.16"], "another registry"),
        ("npx", ["--prefer-offline", "mcp-remote@0.1.16"], "not understood"),
        ("npx", ["-y"], "no package to run"),
        ("npm", ["exec", "mcp-remote@0.1.16", "--package=mcp-remote@0.1.15"], "put --"),
        ("npm", ["--yes", "exec", "mcp-remote@0.1.16"], "options before exec"),
        ("pnpm", ["--package=mcp-remote@0.1.15", "dlx", "mcp-remote@0.1.16"], "before dlx"),
        ("pnpm", ["dlx", "--package", "mcp-remote@0.1.15", "mcp-remote@0.1.16"], "names the"),
        ("yarn", ["dlx", "-p", "mcp-remote@0.1.15", "mcp-remote@0.1.16"], "names the"),
        ("bunx", ["--registry", "x", "mcp-remote@0.1.16"], "another registry"),
        ("uvx", ["--from", "evil-package==1.0", "mcp-server-fetch==2025.2.0"], "plain command"),
        ("uvx", ["--with", "evil==1.0", "mcp-server-fetch==2025.2.0"], "not judged"),
        ("uvx", ["--python", "3.8", "mcp-server-fetch==2025.2.0"], "chooses the interpreter"),
        ("uvx", ["-p", "3.8", "mcp-server-fetch==2025.2.0"], "chooses the interpreter"),
        ("uvx", ["--refresh", "mcp-server-fetch==2025.2.0"], "not understood"),
        ("uvx", ["--index-url", "https://evil.example", "mcp-server-fetch==2025.2.0"], "index"),
        ("uvx", ["mcp-server-fetch[all]==2025.2.0"], "extras or markers"),
        ("uvx", ["git+https://github.com/x/mcp-server-fetch"], "not a registry project"),
        ("uvx", ["./mcp-server-fetch"], "not a registry project"),
        ("uvx", ["python3.12"], "an interpreter"),
        # uv reads a Python request with a build's variant, or any implementation's name
        ("uvx", ["python3.11gil"], "an interpreter"),
        ("uvx", ["python3.13t"], "an interpreter"),
        ("uvx", ["python3.11d"], "an interpreter"),
        ("uvx", ["pypy3.10"], "an interpreter"),
        ("uvx", ["pyodide"], "an interpreter"),
        ("uvx", ["Pyodide3.12"], "an interpreter"),
        ("uvx", ["cp312"], "an interpreter"),
        ("uvx", ["graalpy"], "an interpreter"),
        ("uvx", ["mcp-server-fetch== 2025.2.0"], "white space"),
        ("uvx", ["--from", "a==1", "--from=mcp-server-fetch==2025.2.0", "x"], "--from given twice"),
        ("uvx", ["--", "mcp-server-fetch==2025.2.0"], "'--'"),
        ("uvx", ["--quiet"], "no package to run"),
        ("uv", ["--offline", "tool", "run", "mcp-server-fetch==2025.2.0"], "before tool run"),
        ("pipx", ["run", "--pip-args=--index-url=x", "mcp-server-fetch==2025.2.0"], "not"),
        ("pipx", ["run", "https://evil.example/x.py"], "names a file or URL"),
        ("pipx", ["run", "--spec", "a==1", "--spec", "b==2", "b"], "--spec given twice"),
        ("pipx", ["run", "--", "mcp-server-fetch==2025.2.0"], "'--'"),
        ("pipx", ["run", "-q"], "no package to run"),
    ],
)
def test_hostile_specs_and_options_are_refused_naming_them(
    bins: Path, project: Path, launcher: str, argv: list[str], shown: str
) -> None:
    for policy in ({}, {"FLOORGUARD_UNTRACKED_POLICY": "refuse"}):
        judged = judge(bins / launcher, argv, project, **policy)
        assert judged.verdict == REFUSE, (argv, judged)
        assert shown in judged.reason, judged.reason


def test_an_option_after_the_package_is_the_packages_own_for_npx(bins: Path, project: Path) -> None:
    """npx stops reading its options at the package: ``--package`` after it is
    mcp-remote's argument, and the version judged is still the pinned one."""
    judged = judge(bins / "npx", ["mcp-remote@0.1.16", "--package=mcp-remote@0.1.15"], project)
    assert (judged.verdict, judged.version) == (PERMIT, "0.1.16"), judged


def test_pipx_refuses_a_file_named_like_the_app_and_pypackages(bins: Path, project: Path) -> None:
    (project / "mcp-server-fetch==2025.2.0").write_text("print('not the package')\n")
    judged = judge(bins / "pipx", ["run", "mcp-server-fetch==2025.2.0"], project)
    assert judged.verdict == REFUSE and "runs as a script" in judged.reason, judged
    (project / "mcp-server-fetch==2025.2.0").unlink()
    (project / "__pypackages__").mkdir()
    judged = judge(bins / "pipx", ["run", "mcp-server-fetch==2025.2.0"], project)
    assert judged.verdict == REFUSE and "__pypackages__" in judged.reason, judged


@pytest.mark.parametrize(
    ("launcher", "variable"),
    [
        ("npx", "npm_config_package"),
        ("npx", "NPM_CONFIG_REGISTRY"),
        ("uvx", "UV_INDEX_URL"),
        ("pipx", "PIPX_DEFAULT_PYTHON"),
    ],
)
def test_a_launcher_configuration_variable_is_refused(
    bins: Path, project: Path, launcher: str, variable: str
) -> None:
    argv = {"npx": ["mcp-remote@0.1.16"], "uvx": ["mcp-server-fetch==2025.2.0"]}.get(
        launcher, ["run", "mcp-server-fetch==2025.2.0"]
    )
    judged = judge(bins / launcher, argv, project, **{variable: "x"})
    assert judged.verdict == REFUSE and variable in judged.reason, judged


@pytest.mark.parametrize(
    "variable",
    [
        # bash's own spelling of an exported function, and the one Red Hat's bash uses
        ("BASH_FUNC_mcp-remote%%", "() { node /tmp/old/cli.js; }"),
        ("BASH_FUNC_mcp-remote()", "() { node /tmp/old/cli.js; }"),
        # what a bash from before 2014 imports as a function, whatever the name
        ("mcp_remote", "() { node /tmp/old/cli.js; }"),
    ],
)
def test_an_exported_shell_function_is_refused_whatever_sh_is(
    bins: Path, project: Path, variable: tuple[str, str]
) -> None:
    """npm runs the bin through ``sh -c``: where sh is bash, a function exported under the
    bin's name runs instead of the bin judged."""
    name, value = variable
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project, **{name: value})
    assert judged.verdict == REFUSE, judged
    assert name in judged.reason and "function" in judged.reason, judged
    assert value not in judged.reason  # (a variable's text may be a secret)


def test_harmless_npm_variables_are_allowed(bins: Path, project: Path) -> None:
    judged = judge(bins / "npx", ["mcp-remote@0.1.16"], project, npm_config_yes="true")
    assert judged.verdict == PERMIT, judged


def test_other_npm_and_uv_commands_are_not_launchers() -> None:
    assert launchers.launcher_of(("npm",), ["install"]) is None
    assert launchers.launcher_of(("uv",), ["pip", "install", "x"]) is None
    assert launchers.launcher_of(("/usr/lib/node_modules/npm/bin/npx-cli.js",), []) == ("npx", 0)


NOT_UV = {
    "a shell script": lambda path: write_executable(path, "#!/bin/sh\nexit 0\n"),
    "a copy of python": lambda path: shutil.copy2(os.path.realpath(sys.executable), path),
    "a native program that is not uv": lambda path: native_program(path, stdout=b"10.0.0\n"),
}


@pytest.mark.parametrize("name", ["uvx", "uv"])
@pytest.mark.parametrize("what", sorted(NOT_UV))
def test_a_program_named_as_uv_that_is_not_uv_is_refused(
    tmp_path: Path, project: Path, name: str, what: str
) -> None:
    """uv's launchers are native programs that say they are uv: anything else under their
    name (a script, a copied interpreter, another program) runs what it likes, never the
    package judged."""
    program = tmp_path / "fake" / name
    program.parent.mkdir()
    NOT_UV[what](program)
    argv = (
        ["mcp-server-fetch==2025.2.0"]
        if name == "uvx"
        else ["tool", "run", "mcp-server-fetch==2025.2.0"]
    )
    judged = judge(program, argv, project)
    assert judged.verdict == REFUSE
    assert _refused_as_an_impostor(what, judged.reason, "is named as uvx's"), judged.reason


def _corepack_shim(path: Path) -> None:
    """corepack's pnpm, pnpx and yarn: its own script, which fetches whatever version of
    the package manager a project's packageManager names."""
    package = path.parent.parent / "corepack"
    (package / "dist").mkdir(parents=True, exist_ok=True)
    (package / "package.json").write_text(json.dumps({"name": "corepack", "version": "0.31.0"}))
    write_executable(package / "dist" / path.name, "#!/usr/bin/env node\n")
    path.symlink_to(package / "dist" / path.name)


IMPOSTORS = {
    "a shell script": lambda path: write_executable(path, "#!/bin/sh\nexit 0\n"),
    "a copy of python": lambda path: shutil.copy2(os.path.realpath(sys.executable), path),
    "a node script of corepack": _corepack_shim,
}


@pytest.mark.parametrize(
    ("name", "argv"),
    [("pnpm", ["dlx", "mcp-remote@0.1.16"]), ("pnpx", ["mcp-remote@0.1.16"]),
     ("yarn", ["dlx", "mcp-remote@0.1.16"]), ("bunx", ["mcp-remote@0.1.16"])],
)  # fmt: skip
@pytest.mark.parametrize("what", sorted(IMPOSTORS))
def test_a_program_named_as_a_node_launcher_that_is_not_it_is_refused(
    tmp_path: Path, project: Path, name: str, argv: list[str], what: str
) -> None:
    """pnpm, yarn and bun are their own package's script or a native program that answers
    as they do: a shell script or a copied interpreter under their names runs what it
    likes, and corepack's shims fetch a version nobody judged."""
    program = tmp_path / "fake" / name
    program.parent.mkdir()
    IMPOSTORS[what](program)
    judged = judge(program, argv, project)
    assert judged.verdict == REFUSE
    assert _refused_as_an_impostor(what, judged.reason, "is named as"), judged.reason


@pytest.mark.parametrize(
    "argv",
    [["npx@11.0.0", "mcp-remote@0.1.16"], ["npm", "exec", "--", "mcp-remote"],
     ["pnpm@9.15.0", "dlx", "mcp-remote@0.1.16"]],
)  # fmt: skip
@pytest.mark.parametrize("what", ["corepack's own script", "a shell script"])
def test_corepack_which_runs_the_package_manager_it_is_told_is_refused(
    tmp_path: Path, project: Path, argv: list[str], what: str
) -> None:
    """corepack downloads (or takes from its cache) the package manager and version its
    arguments or a project name, and runs it as a launcher: nothing of that is judged, so
    neither is what it starts."""
    program = tmp_path / "bin" / "corepack"
    program.parent.mkdir()
    if what == "a shell script":
        write_executable(program, "#!/bin/sh\nexit 0\n")
    else:
        _corepack_shim(program)
    for policy in ("refuse", "allow"):
        judged = judge(program, argv, project, FLOORGUARD_UNTRACKED_POLICY=policy)
        assert judged.verdict == REFUSE, judged
        assert "is corepack" in judged.reason, judged.reason


def _refused_as_an_impostor(what: str, reason: str, named: str) -> bool:
    """The reason says the program is not the launcher its name says; a copy of python is
    Python under another name, never judged by its arguments."""
    if what == "a copy of python":
        return "Python under another name" in reason
    return named in reason


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize(
    ("script", "argv"),
    [("yarn.js", ["dlx", "mcp-remote@0.1.16"]), ("pnpm.cjs", ["dlx", "mcp-remote@0.1.16"])],
)
@pytest.mark.parametrize("owner", ["corepack", "the workspace"])
def test_node_running_a_launchers_file_name_that_is_not_its_package_is_refused(
    tmp_path: Path, project: Path, script: str, argv: list[str], owner: str
) -> None:
    """``node .../yarn.js dlx`` is yarn only when yarn.js is the yarn package's: corepack's
    dist/yarn.js, or any script of that name in the workspace, is not."""
    package = project / "tools" if owner == "the workspace" else tmp_path / "corepack"
    (package / "dist").mkdir(parents=True)
    if owner == "corepack":
        (package / "package.json").write_text(json.dumps({"name": "corepack"}))
    file = write_executable(package / "dist" / script, "#!/usr/bin/env node\n")
    node = Path(shutil.which("node") or "node")
    judged = judge(node, [str(file), *argv], project)
    assert judged.verdict == REFUSE
    assert "is named as" in judged.reason, judged.reason


@pytest.mark.parametrize("name", ["yarn", "pnpm"])
@pytest.mark.parametrize("where", ["node_modules", "a folder of the workspace"])
def test_a_launcher_package_of_the_workspaces_own_is_refused(
    tmp_path: Path, project: Path, name: str, where: str
) -> None:
    """A package.json naming itself yarn or pnpm is all it takes: one in the project's
    node_modules, or anywhere below the working directory, is code the workspace wrote."""
    folder = project / ("node_modules" if where == "node_modules" else "vendor") / name
    (folder / "bin").mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": name, "version": "9.0.0"}))
    script = write_executable(
        folder / "bin" / ("yarn.js" if name == "yarn" else "pnpm.cjs"), "#!/usr/bin/env node\n"
    )
    link = project / "bin" / name
    link.parent.mkdir()
    link.symlink_to(script)
    judged = judge(link, ["dlx", "mcp-remote@0.1.16"], project)
    assert judged.verdict == REFUSE
    assert "the project's own" in judged.reason, judged.reason


@pytest.mark.parametrize("what", ["a shell script", "a native program that is not uv"])
def test_a_program_named_pipx_that_is_not_a_python_program_is_refused(
    tmp_path: Path, project: Path, what: str
) -> None:
    program = tmp_path / "fake" / "pipx"
    program.parent.mkdir()
    NOT_UV[what](program)
    judged = judge(program, ["run", "mcp-server-fetch==2025.2.0"], project)
    assert judged.verdict == REFUSE
    assert "named as pipx" in judged.reason, judged.reason


@pytest.mark.parametrize("how", ["a script named pipx", "python -m pipx"])
def test_a_launcher_that_runs_an_adapters_code_itself_is_refused(
    tmp_path: Path, project: Path, how: str
) -> None:
    """A "pipx" whose own code imports aider runs that aider, whatever package and version
    its arguments name: never judged as the package named."""
    marker = tmp_path / "ran"
    aider = pip_install(tmp_path / "old", dist="aider-chat", module="aider", version="0.50.0",
                        marker=marker)  # fmt: skip
    python = aider.parent / "python"
    argv = ["run", "--spec", "aider-chat==0.70.0", "aider"]
    if how == "a script named pipx":
        program = write_executable(
            tmp_path / "fake" / "pipx", f"#!{python}\nimport sys\nfrom aider.main import main\n"
            "sys.exit(main())\n",
        )  # fmt: skip
    else:
        package = tmp_path / "lib" / "pipx"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "__main__.py").write_text("import sys\nfrom aider.main import main\n")
        program, argv = python, ["-P", "-m", "pipx", *argv]
        project = tmp_path / "lib"
    judged = judge(program, argv, project, PYTHONPATH=str(tmp_path / "lib"))
    assert judged.verdict == REFUSE
    assert "aider's code itself" in judged.reason, judged.reason


def test_a_scripts_real_file_decides_and_a_native_launcher_its_name() -> None:
    """npm's npx-cli.js is npx whatever it is asked for as (its code, not its name,
    decides); bun acts as bunx when run by that name, so the name asked for counts."""
    real_npx = "/usr/lib/node_modules/npm/bin/npx-cli.js"
    assert launchers.launcher_of(("npm", "/usr/bin/npm", real_npx), ["exec", "x@1.0.0"]) == (
        "npx", 0,
    )  # fmt: skip
    assert launchers.launcher_of(("bunx", "/usr/bin/bunx", "/opt/bun/bin/bun"), ["x@1"]) == (
        "bunx", 0,
    )  # fmt: skip
    assert launchers.launcher_of(("bun", "/usr/bin/bun", "/opt/bun/bin/bun"), ["x", "y"]) == (
        "bunx", 1,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_any_other_file_of_npms_package_run_by_node_is_npms_command_line(
    tmp_path: Path, project: Path
) -> None:
    """npm's main file (index.js) runs npm's command line as npm-cli.js does: ``node
    .../npm/index.js exec -- PKG@V`` is npm exec, judged as the package it runs."""
    npm = tmp_path / "lib" / "node_modules" / "npm"
    npm.mkdir(parents=True)
    (npm / "package.json").write_text(json.dumps({"name": "npm", "main": "./index.js"}))
    (npm / "index.js").write_text("require('./lib/cli.js')(process)\n")
    node = Path(shutil.which("node") or "node")
    judged = judge(node, [str(npm / "index.js"), "exec", "--", "mcp-remote@0.1.15"], project)
    assert (judged.verdict, judged.adapter, judged.version) == (REFUSE, "mcp-remote", "0.1.15")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("manifest", ["{not json", "[]"], ids=["not-json", "not-an-object"])
def test_a_script_whose_package_json_cannot_be_read_is_not_taken_for_plain_node(
    tmp_path: Path, project: Path, manifest: str
) -> None:
    """Whether a file node runs is npm's command line is told by the nearest package.json:
    one that cannot be read says nothing either way, so what node would run is in doubt
    (node itself stops on such a file before it runs the script)."""
    npm = tmp_path / "lib" / "node_modules" / "npm"
    npm.mkdir(parents=True)
    (npm / "package.json").write_text(manifest)
    (npm / "index.js").write_text("require('./lib/cli.js')(process)\n")
    node = Path(shutil.which("node") or "node")
    judged = judge(node, [str(npm / "index.js"), "exec", "--", "mcp-remote@0.1.15"], project)
    assert judged.verdict == REFUSE
    assert "package.json" in judged.reason


# ---------------------------------------------------------------------------- map-only


def test_a_package_named_only_in_the_map_is_identified_from_its_package_json(
    tmp_path: Path,
) -> None:
    """A global npm install of mcp-remote, run by its bin link: identified as the map's
    entry from the package.json beside its code, with no catalogue entry for it."""
    marker = tmp_path / "ran"
    bin_dir = npm_layout(
        tmp_path / "prefix", package="mcp-remote", bin_name="mcp-remote", version="0.1.15",
        marker=marker, script_output="",
    )  # fmt: skip
    judged = judge(bin_dir / "mcp-remote", [], tmp_path)
    assert (judged.verdict, judged.adapter, judged.version) == (REFUSE, "mcp-remote", "0.1.15")
    assert judged.identified_by == "npm-package" and not marker.exists()


def test_a_pypi_package_named_only_in_the_map_is_identified_from_its_dist_info(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    script = pip_layout(
        tmp_path / "venv", script_name="mcp-server-fetch", dist="mcp-server-fetch",
        version="2024.9.1", marker=marker, script_output="",
    )  # fmt: skip
    with open_target(str(script), path_env=None) as opened:
        found = identify.identify_file(opened, {})
        assert found is None  # the catalogue alone does not know it
        with_map = _identify_with_map(opened)
    assert with_map is not None and with_map.adapter == "mcp-server-fetch"
    assert with_map.version == "2024.9.1"


def _identify_with_map(opened: Any) -> Any:
    from floorguard._identify.identification import packages_in_force
    from floorguard._maps.packages import index_of

    with packages_in_force(index_of(IN_FORCE.floor_map)):
        return identify.identify_file(opened, {})


# ---------------------------------------------------------------------------- end to end

NPX = shutil.which("npx")


def _exec(tmp_path: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    module = tmp_path / "host_map.py"
    if not module.exists():
        module.write_text(extended_module({"mcp-remote": MCP_REMOTE}), encoding="utf-8")
    env = isolated_env(tmp_path / "state", FLOORGUARD_FLOOR_MAP=str(module))
    env["PATH"] = os.path.dirname(NPX or "/usr/bin/npx") + ":/usr/bin:/bin"
    return subprocess.run(
        [sys.executable, "-I", "-m", "floorguard", "exec", *argv],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.skipif(NPX is None, reason="npx is not installed")
def test_floorguard_exec_refuses_npx_mcp_remote_below_the_fix_and_starts_nothing(
    tmp_path: Path, project: Path
) -> None:
    """The real npx, through ``python -m floorguard exec``: refused before npx starts
    (so nothing is fetched), exit 126, the reason naming the package, version and advisory."""
    done = _exec(tmp_path, project, "npx", "--", "-y", "mcp-remote@0.1.15", "https://x.invalid")
    assert done.returncode == 126, done
    assert "mcp-remote (requested as 'npx') 0.1.15 is affected by GHSA-6xpm-ggf7-wc3p" in (
        done.stderr
    ), done.stderr
    unpinned = _exec(tmp_path, project, "npx", "--", "-y", "mcp-remote@latest")
    assert unpinned.returncode == 126 and "pin the version" in unpinned.stderr, unpinned.stderr


# ---------------------------------------------------------------------------- real registry

NPM = shutil.which("npm")


@pytest.mark.real_packages
@pytest.mark.skipif(NPX is None or NPM is None, reason="npm is not installed")
@pytest.mark.parametrize(("version", "verdict"), [("0.1.15", REFUSE), ("0.1.16", PERMIT)])
def test_real_mcp_remote_installed_locally_is_what_bare_npx_is_judged_by(
    tmp_path: Path, version: str, verdict: str
) -> None:
    """``npm install mcp-remote@V`` in a project, then ``npx -y mcp-remote`` there: npx
    runs the local install, and the gate judges that version (from its package.json)."""
    project = tmp_path / "project"
    project.mkdir()
    try:
        done = subprocess.run(
            [str(NPM), "install", "--no-audit", "--no-fund", f"mcp-remote@{version}"],
            capture_output=True, text=True, cwd=project, timeout=300, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("npm install took over 5 minutes")
    if done.returncode != 0:
        pytest.skip(f"npm install mcp-remote@{version} failed (offline?): {done.stderr[-300:]}")
    judged = judge(Path(str(NPX)), ["-y", "mcp-remote"], project)
    assert (judged.verdict, judged.version, judged.detected_by) == (
        verdict, version, "npm-metadata",
    ), judged  # fmt: skip
    pinned = judge(Path(str(NPX)), ["-y", f"mcp-remote@{version}"], project)
    assert (pinned.verdict, pinned.version) == (verdict, version), pinned


@pytest.fixture(scope="module")
def uv_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a real ``uv`` and ``uvx``: the machine's, else installed from PyPI into
    a fresh venv (skipped when that cannot be done)."""
    found = shutil.which("uvx")
    if found is not None:
        return Path(found).parent
    venv = tmp_path_factory.mktemp("uv") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    for command in (
        [base, "-m", "venv", str(venv)],
        [str(venv / "bin" / "pip"), "install", "-q", "uv"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            pytest.skip(f"cannot install uv (offline?): {done.stderr[-300:]}")
    return venv / "bin"


@pytest.mark.real_packages
@pytest.mark.parametrize(("version", "started"), [("0.6.2", False), ("2026.10.24", True)])
def test_real_uvx_runs_a_pypi_mcp_server_only_at_or_above_its_floor(
    uv_folder: Path, tmp_path: Path, project: Path, version: str, started: bool
) -> None:
    """The real uvx, through ``python -m floorguard exec``, with mcp-server-fetch pinned: below
    its floor (2025.1.0) refused before uvx starts; at a release above it, uvx fetches and
    runs the server (its --help)."""
    module = tmp_path / "host_map.py"
    module.write_text(extended_module({"mcp-server-fetch": FETCH_SERVER}), encoding="utf-8")
    env = isolated_env(tmp_path / "state", FLOORGUARD_FLOOR_MAP=str(module))
    env["PATH"] = f"{uv_folder}:/usr/bin:/bin"
    done = subprocess.run(
        [sys.executable, "-I", "-m", "floorguard", "exec", "uvx", f"mcp-server-fetch=={version}",
         "--help"],
        capture_output=True, text=True, cwd=project, env=env, timeout=300, check=False,
    )  # fmt: skip
    if started:
        assert done.returncode == 0, done.stderr
        assert "usage" in done.stdout.lower(), done.stdout
    else:
        assert done.returncode == 126, done
        assert f"mcp-server-fetch (requested as 'uvx') {version} is below" in done.stderr, (
            done.stderr
        )


@pytest.mark.parametrize("package", ["python-dotenv==1.0.1", "python3-openid==3.2.0"])
def test_a_package_whose_name_starts_like_an_interpreter_is_judged_as_a_package(
    bins: Path, project: Path, package: str
) -> None:
    """Only a name uv reads as a Python request is one: a project name with a hyphen after
    the implementation's name is a package like any other."""
    judged = judge(bins / "uvx", [package], project)
    assert judged.verdict == UNTRACKED and "interpreter" not in judged.reason, judged


def test_uvx_from_another_package_is_judged_as_that_package(bins: Path, project: Path) -> None:
    """``--from`` decides what is installed: the command name after it does not, so a
    tracked server's name cannot lend its verdict to another package."""
    judged = judge(bins / "uvx", ["--from", "evil-server==1.0", "evil-server"], project)
    assert judged.verdict == UNTRACKED and judged.adapter != "mcp-server-fetch", judged
    tracked = judge(bins / "uvx", ["--from=mcp-server-fetch==2024.9.1", "mcp-server-fetch"],
                    project)  # fmt: skip
    assert (tracked.verdict, tracked.adapter) == (REFUSE, "mcp-server-fetch"), tracked


@pytest.mark.parametrize(
    ("launcher", "argv"),
    [
        ("uvx", ["--from", "mcp-server-fetch==2025.2.0", "python"]),
        ("uvx", ["--from", "mcp-server-fetch==2025.2.0", "sh"]),
        ("uvx", ["--from", "evil-server==1.0", "mcp-server-fetch"]),
        ("uvx", ["--from", "evil-server==1.0", "claude"]),
        ("pipx", ["run", "--spec", "mcp-server-fetch==2025.2.0", "python"]),
        # uv and pipx run the name as written, and a file system tells letters' cases apart:
        # another case of the package's command is found on PATH, not in its environment.
        ("uvx", ["--from", "mcp-server-fetch==2025.2.0", "Mcp-Server-Fetch"]),
        ("uvx", ["--from", "evil-server==1.0", "EVIL-SERVER"]),
        ("pipx", ["run", "--spec", "mcp-server-fetch==2025.2.0", "MCP-SERVER-FETCH"]),
    ],
)
def test_a_command_that_is_not_the_packages_own_is_refused(
    bins: Path, project: Path, launcher: str, argv: list[str]
) -> None:
    """uv and pipx run the command from the package's environment or from PATH: an
    interpreter, a shell or another agent found there is not the package judged."""
    judged = judge(bins / launcher, argv, project)
    assert judged.verdict == REFUSE and "own command" in judged.reason, judged


@pytest.mark.parametrize(("version", "verdict"), [("2024.9.1", REFUSE), ("2025.2.0", PERMIT)])
def test_a_console_script_of_a_map_only_pypi_server_is_judged_by_what_it_imports(
    tmp_path: Path, version: str, verdict: str
) -> None:
    """pip's wrapper imports the server's module: the import resolves in the venv's
    site-packages, whose dist-info (named only in the map) gives the version."""
    from probes import pip_install

    marker = tmp_path / "ran"
    script = pip_install(
        tmp_path / "venv", dist="mcp-server-fetch", module="mcp_server_fetch", version=version,
        marker=marker, script_name="mcp-server-fetch",
    )  # fmt: skip
    judged = judge(script, ["--stdio"], tmp_path)
    assert (judged.verdict, judged.adapter, judged.version) == (
        verdict, "mcp-server-fetch", version,
    ), judged  # fmt: skip
    assert judged.identified_by == "pip-script" and not marker.exists()
    python = judge(tmp_path / "venv" / "bin" / "python", ["-P", "-m", "mcp_server_fetch"], tmp_path)
    assert (python.verdict, python.version, python.identified_by) == (
        verdict, version, "python -m",
    ), python  # fmt: skip


def _bin_map_install(root: Path, version: str, command: str, *, link: bool) -> None:
    """mcp-remote ``version`` installed in ``root``, its bin map naming ``command``."""
    folder = root / "node_modules" / "mcp-remote"
    folder.mkdir(parents=True)
    manifest = {"name": "mcp-remote", "version": version, "bin": {command: "cli.js"}}
    (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    write_executable(folder / "cli.js", "#!/usr/bin/env node\n")
    if link:
        (root / "node_modules" / ".bin").mkdir(exist_ok=True)
        os.symlink("../mcp-remote/cli.js", root / "node_modules" / ".bin" / command)


@pytest.mark.parametrize("link", [True, False], ids=["other-bin-name", "no-bin-link"])
def test_a_pinned_npx_runs_the_command_its_local_install_names(
    bins: Path, project: Path, link: bool
) -> None:
    """npm runs the command the local install's bin map names; its .bin link, when there
    is one, goes to another copy (here an older one); with none, npm's shell finds the name
    on PATH. Neither is the package judged."""
    _bin_map_install(project, "0.1.16", "zz", link=False)
    if link:
        _local_install(project / "vendored", "0.1.15")
        (project / "node_modules" / ".bin").mkdir()
        os.symlink(project / "vendored" / "node_modules" / "mcp-remote" / "cli.js",
                   project / "node_modules" / ".bin" / "zz")  # fmt: skip
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == REFUSE, judged
    assert "'zz'" in judged.reason, judged.reason


def test_npm_reads_a_path_variable_in_any_case(bins: Path, project: Path) -> None:
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project, Path=str(project))
    assert judged.verdict == REFUSE and "Path" in judged.reason, judged


def _pip_installed_pipx(prefix: Path, *, recorded: bool = True) -> Path:
    """pipx as pip installs it: the ``pipx`` package in a venv's site-packages (its
    dist-info's RECORD listing it, unless not ``recorded``) and the console script pip
    writes, which imports it."""
    python = real_venv(prefix)
    site = next((prefix / "lib").glob("python3*/site-packages"))
    (site / "pipx").mkdir()
    (site / "pipx" / "__init__.py").write_text("")
    (site / "pipx" / "main.py").write_text("def cli():\n    return 0\n")
    info = site / "pipx-1.8.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pipx\nVersion: 1.8.0\n")
    listed = ["pipx/__init__.py,,", "pipx/main.py,,"] if recorded else []
    (info / "RECORD").write_text("\n".join([*listed, "pipx-1.8.0.dist-info/RECORD,,", ""]))
    return write_executable(
        prefix / "bin" / "pipx",
        f"#!{python}\nimport re\nimport sys\nfrom pipx.main import cli\n"
        "if __name__ == '__main__':\n    sys.exit(cli())\n",
    )


def test_pipx_as_pip_installs_it_runs_a_pinned_package_judged(
    tmp_path: Path, project: Path
) -> None:
    """A real pipx is a console script importing the ``pipx`` package its distribution
    installed: that import is the launcher itself, not unjudged code."""
    pipx = _pip_installed_pipx(tmp_path / "pipx-venv")
    argv = ["run", "--spec", "mcp-server-fetch==2025.2.0", "mcp-server-fetch"]
    judged = judge(pipx, argv, project)
    assert judged.verdict == PERMIT, judged.reason
    assert judge(pipx, ["run", "mcp-server-fetch==2024.9.1"], project).verdict == REFUSE


def test_a_pipx_package_no_pipx_distribution_installed_is_not_the_launcher(
    tmp_path: Path, project: Path
) -> None:
    pipx = _pip_installed_pipx(tmp_path / "pipx-venv", recorded=False)
    judged = judge(pipx, ["run", "--spec", "mcp-server-fetch==2025.2.0", "mcp-server-fetch"],
                   project)  # fmt: skip
    assert judged.verdict == REFUSE and "imports pipx" in judged.reason, judged.reason


def test_a_pipx_in_the_working_directory_is_the_workspace_s_code(
    tmp_path: Path, project: Path
) -> None:
    pipx = _pip_installed_pipx(project / "tools")
    judged = judge(pipx, ["run", "--spec", "mcp-server-fetch==2025.2.0", "mcp-server-fetch"],
                   project)  # fmt: skip
    assert judged.verdict == REFUSE, judged.reason


def _stating(folder: Path, name: str, version: str) -> None:
    """A package folder whose package.json states ``name`` and ``version``, its bin a
    command of another name (what npm would run for the spec)."""
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(
        json.dumps({"name": name, "version": version, "bin": {"evil": "x.js"}}), encoding="utf-8"
    )


@pytest.mark.parametrize(
    "where",
    ["node_modules/zz", "node_modules/a/node_modules/mcp-remote", "node_modules/@s/zz"],
)
@pytest.mark.parametrize("launcher", ["npx", "npm"])
def test_a_package_of_the_local_tree_stating_the_pinned_name_and_version_is_refused(
    bins: Path, project: Path, where: str, launcher: str
) -> None:
    # npm's inventory goes by the name and version a package states, at any depth: it takes
    # that package for the spec and runs the bin its manifest names.
    _stating(project / where, "mcp-remote", "0.1.16")
    argv = ["-y", "mcp-remote@0.1.16"] if launcher == "npx" else ["exec", "--", "mcp-remote@0.1.16"]
    judged = judge(bins / launcher, argv, project)
    assert judged.verdict == REFUSE, judged
    assert f"{where}, whose package.json states mcp-remote 0.1.16" in judged.reason, judged


def test_the_hidden_lockfile_recording_another_folder_as_the_pinned_package_is_refused(
    bins: Path, project: Path
) -> None:
    _stating(project / "node_modules" / "zz", "zz", "1.0.0")
    lock = {"packages": {"node_modules/zz": {"name": "mcp-remote", "version": "0.1.16"}}}
    (project / "node_modules" / ".package-lock.json").write_text(json.dumps(lock), "utf-8")
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == REFUSE and "records 'node_modules/zz'" in judged.reason, judged


@pytest.mark.parametrize("spelt", ["0.1.16+evil", "v0.1.16", " 0.1.16", "=0.1.16"])
def test_a_package_of_the_local_tree_spelling_the_pinned_version_otherwise_is_refused(
    bins: Path, project: Path, spelt: str
) -> None:
    # npm reads a package's version as semver's clean does: these are 0.1.16 to it.
    _stating(project / "node_modules" / "zz", "mcp-remote", spelt)
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == REFUSE and "node_modules/zz, whose package.json" in judged.reason, (
        judged.reason
    )


def test_a_package_json_of_the_local_tree_too_large_to_read_here_is_refused(
    bins: Path, project: Path
) -> None:
    # npm reads a manifest of any size; one this gate will not read may be the one taken.
    folder = project / "node_modules" / "zz"
    folder.mkdir(parents=True)
    padding = "x" * (2 << 20)
    manifest = {"name": "mcp-remote", "version": "0.1.16", "bin": {"evil": "x.js"}, "p": padding}
    (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == REFUSE and "cannot be read here" in judged.reason, judged.reason
    # A package.json that is no JSON at all npm skips, and so does the gate.
    (folder / "package.json").write_text("{not json", encoding="utf-8")
    assert judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project).verdict == PERMIT


def test_a_package_of_the_local_tree_stating_another_version_is_not_taken(
    bins: Path, project: Path
) -> None:
    _stating(project / "node_modules" / "a" / "node_modules" / "mcp-remote", "mcp-remote", "0.1.15")
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == PERMIT, judged.reason


def _plant_nested(project: Path) -> None:
    _stating(project / "node_modules" / "a" / "node_modules" / "mcp-remote", "mcp-remote", "0.1.16")


def _plant_scoped(project: Path) -> None:
    _stating(project / "node_modules" / "@s" / "zz", "mcp-remote", "0.1.16")


def _rewrite_in_place(project: Path) -> None:
    # The same size, the same file: only its times say it changed.
    manifest = project / "node_modules" / "b" / "package.json"
    manifest.write_text(manifest.read_text("utf-8").replace("mcp-remotf", "mcp-remote"), "utf-8")


def _rewrite_the_hidden_lockfile(project: Path) -> None:
    lockfile = project / "node_modules" / ".package-lock.json"
    lockfile.write_text(lockfile.read_text("utf-8").replace("mcp-remotf", "mcp-remote"), "utf-8")


def _relink(project: Path) -> None:
    link = project / "node_modules" / "c"
    link.unlink()
    link.symlink_to(project / "elsewhere" / "stating")


def _plant_in_a_parent(project: Path) -> None:
    _stating(project.parent / "node_modules" / "zz", "mcp-remote", "0.1.16")


@pytest.mark.parametrize(
    "plant",
    [_plant_nested, _plant_scoped, _rewrite_in_place, _rewrite_the_hidden_lockfile,
     _relink, _plant_in_a_parent],
)  # fmt: skip
def test_a_package_planted_after_a_judgement_is_found_by_the_next(
    bins: Path, project: Path, plant: Callable[[Path], None]
) -> None:
    # The read of the local trees is reused while every folder and file it read is
    # unchanged: a package stating the pinned name and version, planted after a permit in
    # any of these ways, is read by the next judgement.
    _stating(project / "node_modules" / "a", "a", "1.0.0")
    (project / "node_modules" / "@s").mkdir()
    _stating(project / "node_modules" / "b", "mcp-remotf", "0.1.16")
    _stating(project / "elsewhere" / "other", "other", "1.0.0")
    _stating(project / "elsewhere" / "stating", "mcp-remote", "0.1.16")
    (project / "node_modules" / "c").symlink_to(project / "elsewhere" / "other")
    lock = {"packages": {"node_modules/b": {"name": "mcp-remotf", "version": "0.1.16"}}}
    (project / "node_modules" / ".package-lock.json").write_text(json.dumps(lock), "utf-8")
    spec = ["-y", "mcp-remote@0.1.16"]
    for _ in range(2):  # the second answer is the reused one
        assert judge(bins / "npx", spec, project).verdict == PERMIT
    plant(project)
    judged = judge(bins / "npx", spec, project)
    assert judged.verdict == REFUSE and "mcp-remote 0.1.16" in judged.reason, judged.reason


def test_local_trees_larger_than_the_gate_reads_refuse(
    bins: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the bound the rest is not read, so which package npm takes is not known.
    from floorguard._identify import launchers as launcher_module

    for name in ("a", "b", "c"):
        _stating(project / "node_modules" / name, name, "1.0.0")
    monkeypatch.setattr(launcher_module, "_MAX_LOCAL_PACKAGES", 2)
    judged = judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project)
    assert judged.verdict == REFUSE and "hold more than 2 packages" in judged.reason, judged
    monkeypatch.setattr(launcher_module, "_MAX_LOCAL_PACKAGES", 3)
    assert judge(bins / "npx", ["-y", "mcp-remote@0.1.16"], project).verdict == PERMIT
