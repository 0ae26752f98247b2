"""The environment codex gives the MCP servers it starts, and the gate judging each codex
server with exactly that environment:

- Codex loads ``$CODEX_HOME/.env`` into its own environment when it starts (every key but
  ``CODEX_*``; releases have loaded the nearest ``.env`` from the working directory up too):
  a ``PATH`` there decides which program a bare ``command`` runs, and a variable there
  reaches a server through ``env_vars``. The file is read as the dotenvy crate reads it
  (quotes, escapes, ``export``, comments, ``$VAR`` substitution).
- Codex starts a stdio server with a cleared environment: its default variables (HOME,
  LOGNAME, PATH, SHELL, USER, LANG, LC_ALL, TERM, TMPDIR, TZ), the names in ``env_vars`` and
  the server's ``env``. A variable of the agent's environment outside these, such as the
  PYTHONSAFEPATH that makes ``python -m`` safe to judge, never reaches the server.
- A ``.env`` codex would load that cannot be read exactly, or that moves where codex reads
  its configuration, refuses the agent, naming the file and never quoting a value.

Real files in a temporary home and project, the lab's native stand-in agents
(tests/helpers/mcp_lab.py) and, for ``python -m``, a real venv with an at-floor aider.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.mcp_lab import SECRET, Lab, write
from probes import pip_install


def safe_aider(lab: Lab) -> Path:
    """A folder holding aider 0.70.0 (at its floor), apart from the lab's aider 0.50.0."""
    safe = lab.root / "safe"
    safe.mkdir()
    lab.aider(safe, "0.70.0")
    return safe


def codex_config(lab: Lab, text: str) -> None:
    write(lab.home / ".codex" / "config.toml", text)


# ------------------------------------------------------------------ what codex loads: .env


def test_a_path_in_codex_home_dotenv_decides_which_aider_a_bare_command_runs(lab: Lab) -> None:
    """The agent's PATH finds aider 0.70.0; ``~/.codex/.env`` puts the folder of aider
    0.50.0 first, and codex, which loads that file into its own environment, starts the
    below-floor aider."""
    safe = safe_aider(lab)
    codex_config(lab, '[mcp_servers.o]\ncommand = "aider"\n')
    env = lab.env(PATH=f"{safe}:{lab.bin}:/usr/bin:/bin")
    assert lab.spawn("codex", env=env)[0]  # the at-floor aider: codex allowed, rightly
    write(lab.home / ".codex" / ".env", f"PATH={lab.bin}:/usr/bin:/bin\n")
    started, reason = lab.spawn("codex", env=env)
    assert not started, "codex started aider 0.50.0, found on the PATH its .env gives"
    assert "aider 0.50.0" in reason, reason


def test_a_relative_codex_home_dotenv_is_found_from_the_working_directory(lab: Lab) -> None:
    safe = safe_aider(lab)
    write(lab.project / "ch" / "config.toml", '[mcp_servers.o]\ncommand = "aider"\n')
    write(lab.project / "ch" / ".env", f"PATH={lab.bin}:/usr/bin:/bin\n")
    env = lab.env(PATH=f"{safe}:{lab.bin}:/usr/bin:/bin", CODEX_HOME="ch")
    started, reason = lab.spawn("codex", env=env)
    assert not started and "aider 0.50.0" in reason, reason


def test_a_workspace_dotenv_that_codex_releases_have_loaded_moves_the_server_path(
    lab: Lab,
) -> None:
    """Releases of codex loaded the nearest ``.env`` from the working directory up as well
    (``dotenvy::dotenv``): a project's ``.env`` above the working directory is read too."""
    safe = safe_aider(lab)
    codex_config(lab, '[mcp_servers.o]\ncommand = "aider"\n')
    write(lab.project / ".env", f"PATH={lab.bin}:/usr/bin:/bin\n")
    below = lab.project / "src"
    below.mkdir()
    started, reason = lab.spawn("codex", cwd=below, env=lab.env(PATH=f"{safe}:{lab.bin}:/bin"))
    assert not started, "codex started aider 0.50.0, found on the PATH a workspace .env gives"
    assert "aider 0.50.0" in reason, reason


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "LD_AUDIT"])
def test_a_variable_of_codex_home_dotenv_reaches_a_server_through_env_vars(
    lab: Lab, variable: str
) -> None:
    """``env_vars = [NAME]`` gives the server codex's own value of NAME, which
    ``~/.codex/.env`` set: the server is judged with it, and the value is never quoted."""
    safe = safe_aider(lab)
    codex_config(lab, f'[mcp_servers.o]\ncommand = "{safe}/aider"\nenv_vars = ["{variable}"]\n')
    assert lab.spawn("codex")[0]  # the at-floor aider with nothing preloaded: allowed
    value = f"/tmp/{SECRET}.so"
    write(lab.home / ".codex" / ".env", f"{variable}={value}\n")
    started, reason = lab.spawn("codex")
    assert not started, f"codex started a server with {variable} from its .env unjudged"
    assert variable in reason and SECRET not in reason, reason


@pytest.mark.parametrize(
    "text",
    [
        'export PATH="{bin}:/usr/bin:/bin"  # the old one first\n',
        "PATH='{bin}':/usr/bin:/bin\n",
        "FIRST={bin}\nPATH=${{FIRST}}:$SAFE\n",
        "# a comment\n\n  PATH = {bin}:/usr/bin  # trailing\n",
        "not a line dotenvy reads\nPATH={bin}:/usr/bin:/bin\r\n",
        'MULTI="two\nlines"\nPATH={bin}:/usr/bin:/bin\n',
    ],
    ids=[
        "export-double-quoted",
        "single-quoted-part",
        "substituted",
        "spaced",
        "after-a-bad-line",
        "after-a-multi-line-value",
    ],
)
def test_codex_home_dotenv_is_read_as_dotenvy_reads_it(lab: Lab, text: str) -> None:
    safe = safe_aider(lab)
    codex_config(lab, '[mcp_servers.o]\ncommand = "aider"\n')
    write(lab.home / ".codex" / ".env", text.format(bin=lab.bin))
    env = lab.env(PATH=f"{safe}:{lab.bin}:/usr/bin:/bin", SAFE=f"{safe}")
    started, reason = lab.spawn("codex", env=env)
    assert not started and "aider 0.50.0" in reason, reason


def test_a_line_dotenvy_rejects_sets_nothing_in_any_release(lab: Lab) -> None:
    """An unquoted value with a space in it is a line dotenvy rejects: current codex skips
    it, the first releases stop there; either way the variable is not set, and the server
    is judged, and allowed, on the agent's PATH."""
    safe = safe_aider(lab)
    codex_config(lab, '[mcp_servers.o]\ncommand = "aider"\n')
    write(lab.home / ".codex" / ".env", f"PATH={lab.bin}:/usr/bin /bin\n")
    assert lab.spawn("codex", env=lab.env(PATH=f"{safe}:{lab.bin}:/usr/bin:/bin"))[0]


def test_codex_prefixed_keys_of_the_dotenv_are_not_taken(lab: Lab) -> None:
    """Codex keeps ``CODEX_*`` keys out of its environment; a file holding only such a key
    and harmless variables changes nothing a server gets."""
    codex_config(lab, '[mcp_servers.o]\ncommand = "aider"\n')
    safe = safe_aider(lab)
    write(lab.home / ".codex" / ".env", "codex_api_flag=1\nGREETING=hello\n")
    assert lab.spawn("codex", env=lab.env(PATH=f"{safe}:{lab.bin}:/usr/bin:/bin"))[0]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (b"PATH=/x\nTOKEN=" + SECRET.encode() + b"\xff\n", "not UTF-8"),
        (b"HOME=/elsewhere/" + SECRET.encode() + b"\n", "HOME"),
        (b"CODEX_HOME=/elsewhere/" + SECRET.encode() + b"\n", "CODEX_HOME"),
        (b"TOKEN=a\x00" + SECRET.encode() + b"\n", "NUL"),
    ],
    ids=["not-utf-8", "moves-home", "moves-codex-home-in-older-releases", "nul"],
)
def test_a_codex_dotenv_that_cannot_be_read_exactly_refuses_naming_the_file(
    lab: Lab, text: bytes, named: str
) -> None:
    codex_config(lab, '[mcp_servers.o]\ncommand = "helper"\n')
    dotenv = write(lab.home / ".codex" / ".env", text)
    started, reason = lab.spawn("codex")
    assert not started, "codex started with a .env the gate did not read exactly"
    assert str(dotenv) in reason and named in reason and SECRET not in reason, reason


# ------------------------------------------------------------------ what codex passes on


@pytest.fixture
def python_aider(lab: Lab) -> Path:
    """A venv's python with aider 0.70.0 (at its floor) installed, for ``python -m aider``."""
    prefix = lab.root / "venv"
    pip_install(prefix, dist="aider-chat", module="aider", version="0.70.0",
                marker=lab.root / "aider-ran")  # fmt: skip
    return prefix / "bin" / "python"


def test_codex_does_not_give_a_server_the_agents_pythonsafepath(
    lab: Lab, python_aider: Path
) -> None:
    """``python -m aider`` is judged only with the working directory off the path
    (PYTHONSAFEPATH). The agent's PYTHONSAFEPATH=1 is not one of codex's default
    variables: codex starts the server without it, so the workspace's ``./aider`` would
    run. Judged with codex's environment, the server is refused."""
    codex_config(lab, f'[mcp_servers.o]\ncommand = "{python_aider}"\nargs = ["-m", "aider"]\n')
    write(lab.project / "aider" / "__main__.py", "print('the workspace runs')\n")
    started, reason = lab.spawn("codex", env=lab.env(PYTHONSAFEPATH="1"))
    assert not started, "codex started python -m aider without the PYTHONSAFEPATH judged"
    assert "working directory" in reason, reason


def test_a_codex_server_given_pythonsafepath_in_its_own_env_is_judged_and_permitted(
    lab: Lab, python_aider: Path
) -> None:
    codex_config(
        lab,
        f'[mcp_servers.o]\ncommand = "{python_aider}"\nargs = ["-m", "aider"]\n'
        'env = { PYTHONSAFEPATH = "1" }\n',
    )
    assert lab.spawn("codex")[0]
    [server] = lab.last_receipt()["mcp_servers"]
    assert server["verdict"] == "permit" and server["version"] == "0.70.0", server


def test_env_vars_forwarding_pythonsafepath_is_judged_also_as_releases_without_env_vars(
    lab: Lab, python_aider: Path
) -> None:
    """``env_vars = ["PYTHONSAFEPATH"]`` forwards the agent's value in releases that know
    ``env_vars``; releases before them start the server without it: judged both ways."""
    codex_config(
        lab,
        f'[mcp_servers.o]\ncommand = "{python_aider}"\nargs = ["-m", "aider"]\n'
        'env_vars = ["PYTHONSAFEPATH"]\n',
    )
    started, reason = lab.spawn("codex", env=lab.env(PYTHONSAFEPATH="1"))
    assert not started and "working directory" in reason, reason


def test_a_codex_env_vars_entry_that_is_not_a_name_refuses(lab: Lab) -> None:
    codex_config(lab, '[mcp_servers.o]\ncommand = "helper"\nenv_vars = [7]\n')
    started, reason = lab.spawn("codex")
    assert not started and "mcp_servers.o.env_vars" in reason, reason


def test_a_legitimate_codex_server_with_env_vars_and_a_dotenv_is_judged_and_permitted(
    lab: Lab,
) -> None:
    """The positive control: an at-floor server, a harmless name forwarded by ``env_vars``
    and a ``.env`` setting harmless variables; every reading judged, every one permitted."""
    safe = safe_aider(lab)
    codex_config(lab, f'[mcp_servers.o]\ncommand = "{safe}/aider"\nenv_vars = ["GREETING"]\n')
    write(lab.home / ".codex" / ".env", "GREETING='hello there'\nLANG=C.UTF-8\n")
    assert lab.spawn("codex", env=lab.env(GREETING="hi"))[0]
    listed = lab.last_receipt()["mcp_servers"]
    assert listed and all(s["name"] == "o" and s["verdict"] == "permit" for s in listed), listed
    assert {s["version"] for s in listed} == {"0.70.0"}
