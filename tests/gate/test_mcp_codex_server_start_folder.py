"""Where codex starts a stdio server declared without a ``cwd`` when it is told another
folder (``-C``/``--cd`` in every spelling, before or after its subcommand): current
releases start it in that folder (the session's cwd), earlier ones in codex's own working
directory. A relative command (``./tools/aider``) or anything the server finds from its
folder is then that folder's: the server is judged in both, and the receipt names the file
judged in each.

Real files in a temporary home and project, native stand-in agents and aiders (0.70.0
above aider's floor, 0.50.0 below it), a chain of the test's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, write

RELATIVE = '[mcp_servers.s]\ncommand = "./tools/aider"\n'


def judged_file(folder: Path) -> str:
    """The file the gate judges for ``folder``'s tools/aider: pip's script it links to."""
    return os.path.realpath(folder / "tools" / "aider")


def _aiders(lab: Lab, *, other: str) -> Path:
    """An aider 0.70.0 in the project's tools/, and one of version ``other`` in a sibling
    folder's (the folder codex is told with -C)."""
    folder = lab.root / "other"
    lab.aider(lab.project / "tools", "0.70.0")
    lab.aider(folder / "tools", other)
    return folder


@pytest.mark.parametrize(
    "argv",
    [("-C", "../other", "exec", "t"), ("--cd", "../other", "exec", "t"),
     ("--cd=../other", "exec", "t"), ("-C../other", "exec", "t"),
     ("exec", "-C", "../other", "t")],
    ids=["-C", "--cd", "--cd=", "-CDIR", "after-exec"],
)  # fmt: skip
def test_a_relative_server_command_is_judged_in_the_folder_codex_is_told(
    lab: Lab, argv: tuple[str, ...]
) -> None:
    _aiders(lab, other="0.50.0")
    write(lab.home / ".codex" / "config.toml", RELATIVE)
    started, reason = lab.spawn("codex", *argv)
    assert not started, "codex -C started a server whose command is the -C folder's old aider"
    assert "aider 0.50.0" in reason, reason


def test_a_server_of_the_cd_folders_own_layer_is_judged_there_too(lab: Lab) -> None:
    other = _aiders(lab, other="0.50.0")
    write(other / ".codex" / "config.toml", RELATIVE)
    started, reason = lab.spawn("codex", "-C", "../other", "exec", "t")
    assert not started
    assert "aider 0.50.0" in reason, reason


def test_the_receipt_names_the_file_judged_in_each_folder(lab: Lab) -> None:
    """Both aiders above the floor: codex starts, and the receipt lists the server once for
    each folder it may start in, each naming the file judged there."""
    other = _aiders(lab, other="0.71.0")
    write(lab.home / ".codex" / "config.toml", RELATIVE)
    started, reason = lab.spawn("codex", "-C", "../other", "exec", "t")
    assert started, reason
    judged = {(s["binary"], s["version"]) for s in lab.last_receipt()["mcp_servers"]}
    assert judged == {
        (judged_file(lab.project), "0.70.0"),
        (judged_file(other), "0.71.0"),
    }


def test_a_server_with_an_absolute_cwd_is_judged_only_there(lab: Lab) -> None:
    """A declaration's own absolute ``cwd`` is where every release starts it."""
    _aiders(lab, other="0.50.0")
    write(lab.home / ".codex" / "config.toml",
          RELATIVE + f'cwd = "{lab.project}"\n')  # fmt: skip
    started, reason = lab.spawn("codex", "-C", "../other", "exec", "t")
    assert started, reason
    [server] = lab.last_receipt()["mcp_servers"]
    assert server["binary"] == judged_file(lab.project)


def test_without_cd_the_server_is_judged_in_the_agents_folder_alone(lab: Lab) -> None:
    _aiders(lab, other="0.50.0")
    write(lab.home / ".codex" / "config.toml", RELATIVE)
    started, reason = lab.spawn("codex", "exec", "t")
    assert started, reason
    [server] = lab.last_receipt()["mcp_servers"]
    assert server["binary"] == judged_file(lab.project)


# ---------------------------------------------------------------- a -C folder from the home


@pytest.mark.parametrize(
    "argv",
    [("-C", "~/other", "exec", "t"), ("--cd=~/other", "exec", "t"), ("-C~/other", "exec", "t")],
    ids=["-C", "--cd=", "-CDIR"],
)  # fmt: skip
def test_a_cd_folder_from_the_home_is_judged_where_codex_expands_it(
    lab: Lab, argv: tuple[str, ...]
) -> None:
    """A host that starts codex without a shell passes ``~/other`` as written; current
    codex expands a leading ``~`` of ``-C`` to the home (``AbsolutePathBuf``), so the
    server's relative command is the home's ``other/tools/aider``, not ``./~/other``'s."""
    lab.aider(lab.project / "tools", "0.70.0")
    lab.aider(lab.project / "~" / "other" / "tools", "0.70.0")
    lab.aider(lab.home / "other" / "tools", "0.50.0")
    write(lab.home / ".codex" / "config.toml", RELATIVE)
    started, reason = lab.spawn("codex", *argv)
    assert not started, "codex -C ~/other started a server whose command is the home's old aider"
    assert "aider 0.50.0" in reason, reason


def test_the_project_layer_of_a_cd_folder_from_the_home_is_read(lab: Lab) -> None:
    write(lab.home / "other" / ".codex" / "config.toml", '[mcp_servers.s]\ncommand = "aider"\n')
    started, reason = lab.spawn("codex", "-C", "~", "exec", "t")
    assert started, reason  # (~ alone is the home, whose .codex is the user's layer)
    started, reason = lab.spawn("codex", "-C", "~/other", "exec", "t")
    assert not started, "codex -C ~/other started with that folder's old aider"
    assert "aider 0.50.0" in reason and str(lab.home / "other") in reason, reason


def test_a_cd_folder_from_the_home_with_good_servers_starts(lab: Lab) -> None:
    """The positive control: the home's and a literal ``./~/other`` folder's aiders are
    above the floor (older releases took ``~`` as a folder's name): both are judged."""
    lab.aider(lab.project / "~" / "other" / "tools", "0.71.0")
    lab.aider(lab.home / "other" / "tools", "0.72.0")
    lab.aider(lab.project / "tools", "0.70.0")
    write(lab.home / ".codex" / "config.toml", RELATIVE)
    started, reason = lab.spawn("codex", "-C", "~/other", "exec", "t")
    assert started, reason
    judged = {s["version"] for s in lab.last_receipt()["mcp_servers"]}
    assert judged == {"0.70.0", "0.71.0", "0.72.0"}
