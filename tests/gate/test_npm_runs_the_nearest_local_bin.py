"""npm runs a package's bin by name on a PATH that puts ``node_modules/.bin`` of the working
directory and of every folder above it first: ``npx -y @anthropic-ai/claude-code@1.0.30``
runs the nearest ``node_modules/.bin/claude``, whatever it is, and ``npx claude`` (an
untracked package named claude) runs claude-code's bin when one is there. The spec alone
is no judgement then: a local bin that is not the very package and version pinned refuses
the launch, as an agent and as an MCP server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, servers, write

import floorguard

PACKAGE = "@anthropic-ai/claude-code"


def _local_claude(folder: Path, version: str) -> Path:
    """claude-code ``version`` installed in ``folder``'s node_modules with its .bin link."""
    package = folder / "node_modules" / PACKAGE
    manifest = {"name": PACKAGE, "version": version, "bin": {"claude": "cli.js"}}
    write(package / "package.json", json.dumps(manifest))
    write(package / "cli.js", "#!/usr/bin/env node\nconsole.log('ran');\n").chmod(0o755)
    link = folder / "node_modules" / ".bin" / "claude"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("..") / PACKAGE / "cli.js")
    return link


@pytest.mark.parametrize("where", ["project", "a folder above"])
def test_a_pinned_npx_with_an_older_local_bin_is_refused(lab: Lab, where: str) -> None:
    folder = lab.project if where == "project" else lab.root
    _local_claude(folder, "1.0.0")
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started
    assert "node_modules/.bin/claude (first when npm runs a local install)" in reason, reason


@pytest.mark.parametrize("linked", ["node_modules", "node_modules/.bin"])
def test_a_local_bin_folder_linked_into_the_process_refuses_the_launch(
    lab: Lab, linked: str
) -> None:
    """``node_modules`` (or its ``.bin``) as a link into /proc/self/cwd leads nowhere when
    the gate looks and to the project's older claude when npm's shell does."""
    _local_claude(lab.project / "zzold", "1.0.0")
    (lab.project / linked).parent.mkdir(parents=True, exist_ok=True)
    (lab.project / linked).symlink_to(f"/proc/self/cwd/zzold/{linked}")
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started, "npx started with a local bin folder the gate read elsewhere"
    assert "/proc or /dev/fd" in reason, reason


def test_an_untracked_name_whose_local_bin_is_a_tracked_agent_is_refused(lab: Lab) -> None:
    _local_claude(lab.project, "1.0.0")
    started, reason = lab.spawn("npx", "claude")
    assert not started
    assert "claude's code" in reason, reason


def test_an_mcp_server_pinned_with_an_older_local_bin_refuses_the_agent(lab: Lab) -> None:
    _local_claude(lab.project, "1.0.0")
    server = {"command": "npx", "args": ["-y", f"{PACKAGE}@1.0.30", "mcp", "serve"]}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "which holds" in reason, reason


@pytest.mark.parametrize("name", ["sh", "node"])
def test_a_shell_or_node_in_a_local_bin_folder_refuses_a_pinned_npx(lab: Lab, name: str) -> None:
    # npm runs the bin through `sh -c`, and a `#!/usr/bin/env node` bin finds node, on the
    # PATH it gives the bin: a workspace's node_modules/.bin comes first there.
    write(lab.project / "node_modules" / ".bin" / name, "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started
    assert f"the {name} first on the PATH it gives it" in reason, reason


def test_a_shell_first_on_the_childs_path_refuses_a_pinned_npx(lab: Lab) -> None:
    shells = lab.root / "shells"
    write(shells / "sh", "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn(
        "npx", "-y", f"{PACKAGE}@1.0.30", env=lab.env(PATH=f"{shells}:{lab.bin}:/usr/bin:/bin")
    )
    assert not started
    assert "the sh first on the PATH it gives it" in reason, reason


@pytest.mark.parametrize("launch", [("bunx",), ("pnpm", "dlx"), ("yarn", "dlx")])
def test_a_node_first_on_the_childs_path_refuses_the_other_launchers(
    lab: Lab, launch: tuple[str, ...]
) -> None:
    # bun, pnpm and yarn run a `#!/usr/bin/env node` bin with the node their PATH finds.
    nodes = lab.root / "nodes"
    write(nodes / "node", "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn(
        *launch, f"{PACKAGE}@1.0.30", env=lab.env(PATH=f"{nodes}:{lab.bin}:/usr/bin:/bin")
    )
    assert not started
    assert "the node first on the PATH it gives it" in reason, reason


@pytest.mark.parametrize("where", ["a bin named as the spec", "a file named as the spec"])
def test_a_workspace_file_named_as_the_pinned_spec_is_refused(lab: Lab, where: str) -> None:
    """npm takes a spec that names an existing file for that file: the workspace's
    ``node_modules/.bin/@anthropic-ai/claude-code@1.0.30`` or ``./@anthropic-ai/...``."""
    spec = f"{PACKAGE}@1.0.30"
    folder = lab.project / "node_modules" / ".bin" if where.startswith("a bin") else lab.project
    write(folder / spec, "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn("npx", "-y", spec)
    assert not started
    assert "is a file of that name" in reason, reason


def test_a_project_named_as_the_pinned_package_is_refused(lab: Lab) -> None:
    """A project whose own package.json names the pinned package (and its version) is, to
    npm, that package installed: npm runs the bin its bin map names, the workspace's."""
    manifest = {"name": PACKAGE, "version": "1.0.30", "bin": {"zz": "evil.js"}}
    write(lab.project / "package.json", json.dumps(manifest))
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started
    assert "is itself named" in reason, reason


def _local_mcp_remote(folder: Path, version: str, *, head: str = "#!/usr/bin/env node") -> Path:
    """mcp-remote ``version`` installed in ``folder``'s node_modules, its .bin link to a
    ``cli.js`` starting with ``head``; returns that cli.js."""
    package = folder / "node_modules" / "mcp-remote"
    manifest = {"name": "mcp-remote", "version": version, "bin": {"mcp-remote": "cli.js"}}
    write(package / "package.json", json.dumps(manifest))
    cli = write(package / "cli.js", f"{head}\nconsole.log('ran');\n")
    cli.chmod(0o755)
    link = folder / "node_modules" / ".bin" / "mcp-remote"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("..") / "mcp-remote" / "cli.js")
    return cli


@pytest.mark.parametrize("spec", ["mcp-remote@0.1.16", "mcp-remote"])
@pytest.mark.parametrize("defect", ["not executable", "a missing interpreter"])
def test_a_nearest_bin_the_shell_passes_over_is_refused(lab: Lab, spec: str, defect: str) -> None:
    """npm finds the nearest ``.bin/mcp-remote`` by ``stat`` alone and runs ``sh -c
    mcp-remote``; sh's PATH search passes over a file execve rejects (EACCES, ENOENT) to
    the next of that name on PATH: a folder above's older mcp-remote, not the one judged."""
    _local_mcp_remote(lab.root, "0.1.15")
    if defect == "not executable":
        _local_mcp_remote(lab.project, "0.1.16").chmod(0o644)
    else:
        _local_mcp_remote(lab.project, "0.1.16", head="#!/nonexistent/node")
    started, reason = lab.spawn("npx", "-y", spec)
    assert not started
    assert "node_modules/.bin/mcp-remote" in reason, reason
    assert "the kernel would not run" in reason or "not executable" in reason, reason


def test_a_nearest_bin_the_shell_passes_over_refuses_an_mcp_server(lab: Lab) -> None:
    _local_mcp_remote(lab.root, "0.1.15")
    _local_mcp_remote(lab.project, "0.1.16").chmod(0o644)
    server = {"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}
    write(lab.project / ".mcp.json", servers(s=server))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "not executable" in reason, reason


@pytest.mark.parametrize("spec", ["mcp-remote@0.1.16", "mcp-remote"])
def test_a_nearest_bin_the_kernel_runs_is_permitted(lab: Lab, spec: str) -> None:
    # (With an older install in a folder above too, node's module walk from this one would
    # pass that folder's node_modules: refused, test_node_modules_above_the_install_tree.)
    _local_mcp_remote(lab.project, "0.1.16")
    child = floorguard.spawn("npx", ["-y", spec], env=lab.env(), cwd=str(lab.project))
    child.wait(timeout=30)
    receipt = lab.last_receipt()
    assert (receipt["verdict"], receipt["version"]) == ("permit", "0.1.16"), receipt


def test_a_working_directory_with_a_colon_refuses_npx(lab: Lab) -> None:
    """npm puts ``<cwd>/node_modules/.bin`` on the bin's PATH as it is: a working
    directory ``a:b`` splits into the entries ``.../a`` and ``b/node_modules/.bin``, where
    a file of the bin's name runs instead of the local install judged."""
    project = lab.root / "a:b"
    _local_mcp_remote(project, "0.1.16")
    write(lab.root / "a" / "mcp-remote", "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn("npx", "-y", "mcp-remote@0.1.16", cwd=project)
    assert not started
    assert "':'" in reason and str(project) in reason, reason


def test_a_gemini_server_run_in_a_folder_with_a_colon_refuses_the_agent(lab: Lab) -> None:
    _local_mcp_remote(lab.project / "a:b", "0.1.16")
    write(lab.project / "a" / "mcp-remote", "#!/bin/sh\nexit 0\n").chmod(0o755)
    server = {"command": "npx", "args": ["-y", "mcp-remote@0.1.16"], "cwd": "a:b"}
    write(lab.project / ".gemini" / "settings.json", servers(s=server))
    started, reason = lab.spawn("gemini", "-p", "t")
    assert not started
    assert "':'" in reason, reason


_SPEC = "mcp-remote@0.1.16"


@pytest.mark.parametrize(
    "manifest",
    [
        {"name": "proj", "version": "1.0.0", "bin": {_SPEC: "tool.js"}},
        {"name": "proj", "version": "1.0.0", "bin": {f"sub/{_SPEC}": "tool.js"}},
        {"name": "proj", "version": "1.0.0", "directories": {"bin": "b"}},
    ],
    ids=["bin map", "bin map key with a folder", "directories.bin"],
)
@pytest.mark.parametrize("where", ["project", "a folder above"])
@pytest.mark.parametrize("launcher", [("npx", "-y"), ("npm", "exec", "--")])
def test_a_project_bin_named_as_the_pinned_spec_is_refused(
    lab: Lab, manifest: dict, where: str, launcher: tuple[str, ...]
) -> None:
    """npm looks for the spec among the project's own bins first (its ``bin`` map, or the
    files of its ``directories.bin``, by their base names): the project's file runs."""
    cwd = lab.project if where == "project" else lab.project / "sub"
    cwd.mkdir(exist_ok=True)
    write(lab.project / "package.json", json.dumps(manifest))
    write(lab.project / "tool.js", "#!/bin/sh\nexit 0\n").chmod(0o755)
    write(lab.project / "b" / _SPEC, "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn(launcher[0], *launcher[1:], _SPEC, cwd=cwd)
    assert not started
    assert "package.json" in reason and "bin" in reason, reason


def test_a_project_bin_named_as_the_pinned_spec_refuses_an_mcp_server(lab: Lab) -> None:
    manifest = {"name": "proj", "version": "1.0.0", "bin": {_SPEC: "tool.js"}}
    write(lab.project / "package.json", json.dumps(manifest))
    write(lab.project / ".mcp.json", servers(s={"command": "npx", "args": ["-y", _SPEC]}))
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started
    assert "package.json" in reason, reason


def test_a_project_directories_bin_refuses_an_unpinned_npx(lab: Lab) -> None:
    """``npx mcp-remote`` beside a genuine local install: the project's
    ``directories.bin`` file of that name is the project's own bin, which npm runs first."""
    _local_mcp_remote(lab.project, "0.1.16")
    manifest = {"name": "proj", "version": "1.0.0", "directories": {"bin": "b"}}
    write(lab.project / "package.json", json.dumps(manifest))
    write(lab.project / "b" / "mcp-remote", "#!/bin/sh\nexit 0\n").chmod(0o755)
    started, reason = lab.spawn("npx", "-y", "mcp-remote")
    assert not started
    assert "directories" in reason, reason


def test_a_project_with_its_own_bins_still_runs_a_pinned_npx(lab: Lab) -> None:
    _local_mcp_remote(lab.project, "0.1.16")
    manifest = {"name": "proj", "version": "1.0.0", "bin": {"proj": "tool.js"}}
    write(lab.project / "package.json", json.dumps(manifest))
    child = floorguard.spawn("npx", ["-y", _SPEC], env=lab.env(), cwd=str(lab.project))
    child.wait(timeout=30)
    receipt = lab.last_receipt()
    assert (receipt["verdict"], receipt["version"]) == ("permit", "0.1.16"), receipt


@pytest.mark.parametrize("key", ["a:evil", "sub/evil", "x\\evil", "../evil"])
def test_a_local_install_s_bin_keys_are_read_as_npm_names_them(lab: Lab, key: str) -> None:
    # npm takes a bin key's last part (``\`` and ``:`` as ``/``) for its name: the local
    # install pinned below adds .bin/evil, a shell script here, not .bin/<key as written>.
    package = lab.project / "node_modules" / PACKAGE
    manifest = {"name": PACKAGE, "version": "1.0.30", "bin": {key: "cli.js"}}
    write(package / "package.json", json.dumps(manifest))
    write(package / "cli.js", "#!/usr/bin/env node\nconsole.log('ran');\n").chmod(0o755)
    bins = lab.project / "node_modules" / ".bin"
    write(bins / "evil", "#!/bin/sh\nexit 0\n").chmod(0o755)
    # (and where the key as written leads, the package's own file: what was looked at)
    literal = Path(os.path.normpath(bins / key))
    literal.parent.mkdir(parents=True, exist_ok=True)
    literal.symlink_to(package / "cli.js")
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started
    assert "evil" in reason, reason


def _hidden_lockfile(folder: Path, bins: dict[str, str] | None) -> Path:
    """npm's hidden lockfile of ``folder``'s node_modules, giving claude-code ``bins``."""
    entry: dict[str, object] = {"version": "1.0.30"}
    if bins is not None:
        entry["bin"] = bins
    document = {"name": "p", "lockfileVersion": 3, "requires": True,
                "packages": {f"node_modules/{PACKAGE}": entry}}  # fmt: skip
    return write(folder / "node_modules" / ".package-lock.json", json.dumps(document))


def _local_claude_named(folder: Path, bin_name: str) -> None:
    """claude-code 1.0.30 installed with its bin under ``bin_name`` (and that .bin link)."""
    package = folder / "node_modules" / PACKAGE
    manifest = {"name": PACKAGE, "version": "1.0.30", "bin": {bin_name: "cli.js"}}
    write(package / "package.json", json.dumps(manifest))
    write(package / "cli.js", "#!/usr/bin/env node\nconsole.log('ran');\n").chmod(0o755)
    link = folder / "node_modules" / ".bin" / bin_name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("..") / PACKAGE / "cli.js")


def test_the_bin_names_npm_s_hidden_lockfile_gives_a_local_install_are_judged(lab: Lab) -> None:
    """npm takes a local install's bin map from ``node_modules/.package-lock.json`` when
    it trusts that file over the folders: a name only the lockfile gives, which no .bin
    holds, is found by npm's shell on PATH (an older claude there would run)."""
    _local_claude_named(lab.project, "claude-code")
    _hidden_lockfile(lab.project, {"claude": "cli.js"})
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started, "npx started a bin name only npm's hidden lockfile gives"
    assert "'claude'" in reason and "no node_modules/.bin holds" in reason, reason


@pytest.mark.parametrize("bins", [{"claude-code": "cli.js"}, None])
def test_a_hidden_lockfile_that_agrees_with_the_install_lets_npx_start(
    lab: Lab, bins: dict[str, str] | None
) -> None:
    _local_claude_named(lab.project, "claude-code")
    _hidden_lockfile(lab.project, bins)
    spec = f"{PACKAGE}@1.0.30"
    child = floorguard.spawn("npx", ["-y", spec], env=lab.env(), cwd=str(lab.project))
    child.wait(timeout=30)
    receipt = lab.last_receipt()
    assert (receipt["verdict"], receipt["version"]) == ("permit", "1.0.30"), receipt


@pytest.mark.parametrize("kind", ["not json", "bin not an object", "a folder"])
def test_a_hidden_lockfile_that_cannot_be_read_refuses_npx(lab: Lab, kind: str) -> None:
    _local_claude_named(lab.project, "claude-code")
    hidden = lab.project / "node_modules" / ".package-lock.json"
    if kind == "not json":
        write(hidden, "{")
    elif kind == "bin not an object":
        _hidden_lockfile(lab.project, ["claude"])  # type: ignore[arg-type]
    else:
        hidden.mkdir()
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started, f"npx started beside a hidden lockfile that is {kind}"
    assert ".package-lock.json" in reason, reason


def test_a_pinned_local_bin_linked_through_a_name_that_is_not_utf8_is_refused(lab: Lab) -> None:
    # npm's tree holds the very version pinned, and .bin/claude links into a copy of it
    # under claude-code\xff; node resolves that link as UTF-8, \xff as U+FFFD, and loads
    # claude-code\xef\xbf\xbd: another package (an older claude) than the one judged.
    _local_claude(lab.project, "1.0.30")
    scope = os.fsencode(lab.project / "node_modules" / "@anthropic-ai")
    for suffix, version in ((b"\xff", "1.0.30"), (b"\xef\xbf\xbd", "1.0.0")):
        package = scope + b"/claude-code" + suffix
        os.makedirs(package)
        manifest = {"name": PACKAGE, "version": version, "bin": {"claude": "cli.js"}}
        with open(package + b"/package.json", "w", encoding="utf-8") as out:
            json.dump(manifest, out)
        with open(package + b"/cli.js", "w", encoding="utf-8") as out:
            out.write("#!/usr/bin/env node\nconsole.log('ran');\n")
        os.chmod(package + b"/cli.js", 0o755)  # noqa: S103 (a program)
    link = os.fsencode(lab.project / "node_modules" / ".bin" / "claude")
    os.unlink(link)
    os.symlink(b"../@anthropic-ai/claude-code\xff/cli.js", link)
    started, reason = lab.spawn("npx", "-y", f"{PACKAGE}@1.0.30")
    assert not started
    assert "not UTF-8" in reason, reason
