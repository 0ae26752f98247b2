"""The environment Gemini CLI (0.31 and later) gives a stdio MCP server, as the gate judges it.

Gemini CLI expands each value of a server's ``env`` twice: from its settings, as releases
before did, and again as it starts the server with dotenv-expand, whose rules differ (an
unset variable gives nothing, ``${A-b}``, ``${A:+b}`` and ``${A+b}`` are operators, an
empty variable counts as unset, ``\\$`` is a dollar). It does that second pass through a
variable of its own, ``__GCLI_EXPAND_TARGET__``: set in its environment, its value becomes
every declared value. And it always strips from the inherited environment the variables
whose name or value looks like a secret, whatever its settings say.

So a value whose meaning is left to that second pass refuses, the internal variable
refuses, and a server is judged with the stripped environment too. A server that is
itself an agent (codex, claude) shows why it matters: the variable that moves its
configuration decides which servers it starts.

In process, against the shipped floor map, with the native stand-ins of
tests/gate/test_mcp_servers.py (aider 0.50.0 is below its floor, codex 0.5.0 and claude
1.0.30 above theirs), real configuration files and a real chain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import floorguard
from floorguard._gate.decision import Decision
from floorguard._gate.gate import decide
from gate.test_mcp_servers import Agents, agents

__all__ = ["agents"]  # the fixture, shared


def _gemini_servers(agents: Agents, **servers: dict[str, Any]) -> None:
    path = agents.project / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")


def _decide(agents: Agents, **run_env: str) -> Decision:
    try:
        return decide(
            "gemini",
            binary=str(agents.bin / "gemini"),
            environ=agents.host_env(),
            run_environ=agents.run_env(**run_env),
            argv=["-p", "task"],
            cwd=str(agents.project),
        )
    except floorguard.SpawnRefused as refused:
        assert refused.decision is not None, refused
        return refused.decision


def _claude_config_with_the_old_aider(agents: Agents) -> Path:
    """A claude configuration folder whose ``.claude.json`` declares the old aider."""
    folder = agents.root / "claude-config"
    folder.mkdir()
    (folder / ".claude.json").write_text(json.dumps({"mcpServers": {"old": {"command": "aider"}}}))
    return folder


# ------------------------------------------------------- the second expansion: dotenv-expand


@pytest.mark.parametrize(
    "spelling",
    [
        "${UNSET_G-{old}}",  # unset: the default after '-'
        "${HOME:+{old}}",  # set: the value after ':+'
        "${HOME+{old}}",
        "{old}$UNSET_G",  # unset gives nothing
        "{old}${UNSET_G}",
        "${EMPTY_G-{old}}",  # empty counts as unset
    ],
)
def test_a_server_env_value_gemini_expands_again_refuses(agents: Agents, spelling: str) -> None:
    """dotenv-expand reads each of these as the folder holding the old aider, where the
    gate's reading (and releases before 0.31) keep the text: the nested claude would read
    a configuration the gate did not."""
    old = _claude_config_with_the_old_aider(agents)
    value = spelling.replace("{old}", str(old))
    _gemini_servers(
        agents, inner={"command": "claude", "args": ["mcp", "serve"],
                       "env": {"CLAUDE_CONFIG_DIR": value}}
    )  # fmt: skip
    decision = _decide(agents, EMPTY_G="")
    assert decision.verdict == "refuse", decision.reason
    assert "aider 0.50.0" in decision.reason, decision.reason
    assert "<env CLAUDE_CONFIG_DIR>/.claude.json" in decision.reason, decision.reason


def test_a_folder_only_the_first_expansion_names_is_judged_too(agents: Agents) -> None:
    """The same value read as releases before 0.31 read it: the folder the text names."""
    old = _claude_config_with_the_old_aider(agents)
    _gemini_servers(
        agents, inner={"command": "claude", "args": ["mcp", "serve"],
                       "env": {"CLAUDE_CONFIG_DIR": f"{old}${{UNSET_G:+/elsewhere}}"}}
    )  # fmt: skip
    decision = _decide(agents)
    assert decision.verdict == "refuse", decision.reason
    assert "aider 0.50.0" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "spelling", ["\\$UNSET_G/x", "a\\$b", "${UNSET_G-$HOME}", "${HOME:+$SET_G}"]
)
def test_a_value_the_second_expansion_leaves_unknown_refuses(agents: Agents, spelling: str) -> None:
    """What dotenv-expand leaves naming a variable, or puts in place holding a '$' (which
    JavaScript's replace reads), is not read here."""
    _gemini_servers(agents, s={"command": str(agents.bin / "fixed" / "aider"),
                               "env": {"X": spelling}})  # fmt: skip
    decision = _decide(agents, SET_G="/s")
    assert decision.verdict == "refuse"
    assert "dotenv-expand" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "spelling",
    [
        "plain",
        "$SET_G/x",
        "${SET_G}/x",
        "${UNSET_G:-/d}",
        "5$",
        "a$ b",
        "$$",
        "$1",
        "\\$HOME",
        "$UNSET_G",
        "${UNSET_G-/d}",
    ],
)
def test_values_both_expansions_read_alike_let_the_server_be_judged(
    agents: Agents, spelling: str
) -> None:
    """The positive controls: a variable that is set, a default the first pass takes, a
    '$' that names nothing, and values the two readings differ on where neither decides
    what runs (both readings are judged)."""
    _gemini_servers(agents, s={"command": str(agents.bin / "fixed" / "aider"),
                               "env": {"X": spelling}})  # fmt: skip
    decision = _decide(agents, SET_G="/somewhere")
    assert decision.verdict == "permit", decision.reason


def test_a_set_variable_whose_value_names_another_refuses(agents: Agents) -> None:
    """dotenv-expand expands what it put in place again."""
    _gemini_servers(agents, s={"command": str(agents.bin / "fixed" / "aider"),
                               "env": {"X": "$SET_G"}})  # fmt: skip
    decision = _decide(agents, SET_G="$HOME/x")
    assert decision.verdict == "refuse"
    assert "expands again" in decision.reason, decision.reason


@pytest.mark.parametrize("where", ["the agent's environment", "the workspace .env"])
def test_gemini_s_own_expansion_variable_refuses(agents: Agents, where: str) -> None:
    """Set, ``__GCLI_EXPAND_TARGET__`` replaces every value a server's ``env`` declares:
    a PATH judged good would be whatever it says."""
    good = f"{agents.bin / 'fixed'}:/usr/bin:/bin"
    _gemini_servers(agents, s={"command": "aider", "env": {"PATH": good}})
    target = f"{agents.bin}:/usr/bin:/bin"
    if where == "the workspace .env":
        (agents.project / ".env").write_text(f"__GCLI_EXPAND_TARGET__={target}\n")
        decision = _decide(agents)
    else:
        decision = _decide(agents, __GCLI_EXPAND_TARGET__=target)
    assert decision.verdict == "refuse"
    assert "__GCLI_EXPAND_TARGET__" in decision.reason, decision.reason


def test_without_gemini_s_expansion_variable_the_declared_path_is_judged(agents: Agents) -> None:
    good = f"{agents.bin / 'fixed'}:/usr/bin:/bin"
    _gemini_servers(agents, s={"command": "aider", "env": {"PATH": good}})
    decision = _decide(agents)
    assert decision.verdict == "permit", decision.reason


# ------------------------------------------------- the inherited environment, always stripped


def _codex_homes(agents: Agents, named: str) -> dict[str, str]:
    """A codex home of no servers at ``named`` under the root; the user's ``~/.codex``
    declares the old aider."""
    clean = agents.root / named / "codex"
    clean.mkdir(parents=True)
    (clean / "config.toml").write_text("")
    user = agents.home / ".codex"
    user.mkdir()
    (user / "config.toml").write_text('[mcp_servers.old]\ncommand = "aider"\n')
    return {"CODEX_HOME": str(clean)}


@pytest.mark.parametrize(
    ("named", "extra"),
    [
        ("eyJhb.cd.ef", {}),  # a value that looks like a JWT
        ("plain", {"GEMINI_TOKEN_DIR": "x"}),  # the control: only a name stripped
    ],
    ids=["value-like-a-token", "control-name"],
)
def test_a_variable_gemini_strips_from_a_server_is_judged_absent_too(
    agents: Agents, named: str, extra: dict[str, str]
) -> None:
    """Gemini CLI drops CODEX_HOME when its value looks like a token: the nested codex
    then reads ``~/.codex``, which declares the old aider."""
    _gemini_servers(agents, inner={"command": "codex", "args": ["mcp-server"]})
    decision = _decide(agents, **_codex_homes(agents, named), **extra)
    if named == "plain":
        assert decision.verdict == "permit", decision.reason
    else:
        assert decision.verdict == "refuse"
        assert "aider 0.50.0" in decision.reason, decision.reason


@pytest.mark.parametrize(
    ("name", "value", "stripped"),
    [
        ("PATH", "/x/eyJa.b.c/bin", False),  # always kept, whatever its value
        ("HOME", "https://u:p@h", False),
        ("GEMINI_CLI_HOME", "eyJa.b.c", False),
        ("MY_API_KEY", "k", True),  # by name, in any case
        ("github_token", "x", True),
        ("Auth_Url", "x", True),
        ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem", True),
        ("DATABASE_URL", "x", True),  # listed by name
        ("CODEX_HOME", "/srv/eyJa.b.c/h", True),  # by value
        ("X", "-----begin certificate-----", True),
        ("X", "see ftp://me:pw@host/", True),
        ("X", "ghp_" + "a" * 36, True),
        ("X", "AKIA" + "B" * 16, True),
        ("X", "xoxb-1", True),
        ("X", "sk_live_" + "0" * 24, True),
        ("CODEX_HOME", "/srv/codex", False),
        ("X", "eyJ..", True),  # (the token's parts may be empty)
        ("X", "eyJ", False),
    ],
)
def test_which_variables_gemini_strips_from_a_server(name: str, value: str, stripped: bool) -> None:
    from floorguard._identify.mcp_config import gemini_strips

    assert gemini_strips(name, value) is stripped


def test_a_server_every_reading_judges_alike_is_listed_once(agents: Agents) -> None:
    """GEMINI_API_KEY is stripped from a server by its name: the server is judged with and
    without it, and the receipt lists it once."""
    _gemini_servers(agents, s={"command": str(agents.bin / "fixed" / "aider")})
    decision = _decide(agents, GEMINI_API_KEY="k")
    assert decision.verdict == "permit", decision.reason
    listed = [(s["name"], s["verdict"]) for s in agents.receipt(decision)["mcp_servers"]]
    assert listed == [("s", "permit")]


# ------------------------------------------------------- the .env as node's dotenv reads it


def _old_codex_home(agents: Agents) -> Path:
    home = agents.root / "old-codex"
    home.mkdir()
    (home / "config.toml").write_text('[mcp_servers.old]\ncommand = "aider"\n')
    return home


def test_a_env_value_ends_at_its_first_hash_as_dotenv_reads_it(agents: Agents) -> None:
    """dotenv ends an unquoted value at any '#': ``CODEX_HOME=<old>#x`` is ``<old>``, whose
    config.toml declares the old aider, to the nested codex."""
    old = _old_codex_home(agents)
    (agents.project / ".env").write_text(f"CODEX_HOME={old}#x\n")
    _gemini_servers(agents, inner={"command": "codex", "args": ["mcp-server"]})
    decision = _decide(agents)
    assert decision.verdict == "refuse", decision.reason
    assert "aider 0.50.0" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "separator", ["\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
)
def test_a_env_file_holding_a_break_dotenv_does_not_take_for_one_refuses(
    agents: Agents, separator: str
) -> None:
    """dotenv breaks lines at a line feed alone: ``FOO=bar<sep>CODEX_HOME=<clean>`` sets
    FOO alone, and the nested codex, without CODEX_HOME, reads ``~/.codex`` (the old
    aider). Python's line splitting sees a second line there."""
    clean = _codex_homes(agents, "clean")["CODEX_HOME"]
    (agents.project / ".env").write_text(f"FOO=bar{separator}CODEX_HOME={clean}\n")
    _gemini_servers(agents, inner={"command": "codex", "args": ["mcp-server"]})
    decision = _decide(agents)
    assert decision.verdict == "refuse", decision.reason
    assert ".env" in decision.reason, decision.reason


def test_a_env_value_with_a_comment_after_it_is_read(agents: Agents) -> None:
    """The positive control: a codex home of no servers named by the .env, a comment after."""
    clean = _codex_homes(agents, "clean")["CODEX_HOME"]
    (agents.project / ".env").write_text(f"# codex\nCODEX_HOME={clean} # the clean one\r\n")
    _gemini_servers(agents, inner={"command": "codex", "args": ["mcp-server"]})
    decision = _decide(agents)
    assert decision.verdict == "permit", decision.reason
