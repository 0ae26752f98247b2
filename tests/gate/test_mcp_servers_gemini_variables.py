"""The variables Gemini CLI gives its MCP servers from its ``.env`` files, each spawned for
real: the value Gemini CLI would use is the one judged, so a server it would start below
its floor (an aider 0.50.0) refuses gemini, whatever the agent's environment says.

- An extension's ``gemini-extension.json`` is expanded from the extension's variables
  first (``~/.gemini/extensions/<its name>/.env``, then the workspace's ``.env``), before
  the environment; its ``settings`` give their variables to its servers over it.
- ``--ignore-env`` and ``advanced.ignoreLocalEnv`` make Gemini CLI pass a plain ``.env``
  by and load a farther ``.gemini/.env``.
- A ``.env`` that chooses Gemini CLI's sandbox (what it re-runs itself and its servers in)
  or loads code into the node it relaunches is refused, as one that moves its home is.

Real files in the lab's home and project (tests/helpers/mcp_lab.py): its ``bin`` holds
gemini and the old aider; ``good`` holds an aider above the floor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.mcp_lab import OLD_AIDER, Lab, servers, write
from probes import pip_install


def _good(lab: Lab) -> Path:
    """A folder holding an aider above its floor (0.70.0)."""
    folder = lab.root / "good"
    folder.mkdir(exist_ok=True)
    lab.aider(folder, "0.70.0")
    return folder


def _good_first(lab: Lab) -> dict[str, str]:
    """The lab's environment with the good aider first on PATH (the old one after it)."""
    return lab.env(PATH=f"{_good(lab)}:{lab.bin}:/usr/bin:/bin")


def _extension(lab: Lab, declared: dict, *, folder: str = "ext", **more: object) -> None:
    document = {"name": folder, "version": "1.0.0", "mcpServers": {"s": declared}, **more}
    write(lab.home / ".gemini" / "extensions" / folder / "gemini-extension.json",
          json.dumps(document))  # fmt: skip


_PATH_SETTING = [{"name": "Search path", "description": "where tools are", "envVar": "PATH"}]


# ---------------------------------------------------------------- an extension's variables


@pytest.mark.parametrize("where", ["workspace", "extension"])
def test_an_extension_variable_a_env_file_sets_is_expanded_from_it_first(
    lab: Lab, where: str
) -> None:
    """``$XP`` in an extension's declaration is the ``.env``'s value, not the agent's:
    Gemini CLI's resolver looks in the extension's variables before its environment."""
    _extension(lab, {"command": "aider", "env": {"PATH": "$XP"}})
    env_file = lab.project / ".env" if where == "workspace" else (
        lab.home / ".gemini" / "extensions" / "ext" / ".env")  # fmt: skip
    write(env_file, f"XP={lab.bin}\n")
    started, reason = lab.spawn("gemini", env=lab.env(XP=str(_good(lab))))
    assert not started, "gemini started an extension server the .env points at an old aider"
    assert "aider 0.50.0" in reason, reason


def test_an_extension_variable_the_env_files_leave_alone_is_the_agents(lab: Lab) -> None:
    """The positive control: no ``.env`` sets XP, so the agent's value is used."""
    _extension(lab, {"command": "aider", "env": {"PATH": "$XP"}})
    write(lab.project / ".env", "GEMINI_API_KEY=k\n")
    started, reason = lab.spawn("gemini", env=lab.env(XP=str(_good(lab))))
    assert started, reason


@pytest.mark.parametrize("where", ["workspace", "extension", "extension named otherwise"])
def test_an_extension_setting_a_env_file_gives_reaches_its_servers(lab: Lab, where: str) -> None:
    """A declared setting (``envVar: PATH``) gives its ``.env`` value to the extension's
    servers over the agent's environment; the extension's ``.env`` is found by the
    extension's name (``extensions/<name>/.env``), not by the folder it sits in."""
    folder = "a" if where == "extension named otherwise" else "ext"
    _extension(lab, OLD_AIDER, folder=folder, settings=_PATH_SETTING)
    if folder == "a":  # (named "ext" in folder "a")
        document = json.loads((lab.home / ".gemini/extensions/a/gemini-extension.json").read_text())
        document["name"] = "ext"
        write(lab.home / ".gemini/extensions/a/gemini-extension.json", json.dumps(document))
    env_file = lab.project / ".env" if where == "workspace" else (
        lab.home / ".gemini" / "extensions" / "ext" / ".env")  # fmt: skip
    write(env_file, f"PATH={lab.bin}:/usr/bin:/bin\n")
    started, reason = lab.spawn("gemini", env=_good_first(lab))
    assert not started, "gemini started an extension server its setting's PATH makes old"
    assert "aider 0.50.0" in reason, reason


def test_an_extension_setting_no_env_file_gives_leaves_the_agents_value(lab: Lab) -> None:
    """The positive control: the setting is declared, no ``.env`` gives it."""
    _extension(lab, OLD_AIDER, settings=_PATH_SETTING)
    started, reason = lab.spawn("gemini", env=_good_first(lab))
    assert started, reason


@pytest.mark.parametrize("where", ["workspace", "extension"])
def test_an_extension_url_a_env_file_empties_is_no_url(lab: Lab, where: str) -> None:
    """``url: "$U"`` with U set in the agent's environment but emptied by a ``.env``:
    Gemini CLI expands it to nothing and starts the command, which must be judged."""
    _extension(lab, {"command": "aider", "url": "$U"})
    env_file = lab.project / ".env" if where == "workspace" else (
        lab.home / ".gemini" / "extensions" / "ext" / ".env")  # fmt: skip
    write(env_file, "U=\n")
    started, reason = lab.spawn("gemini", env=lab.env(U="https://mcp.example.com/sse"))
    assert not started, "gemini started a command its emptied URL let through"
    assert "aider 0.50.0" in reason, reason


def test_an_extension_setting_kept_in_the_keychain_that_decides_what_runs_refuses(
    lab: Lab,
) -> None:
    """A sensitive setting's value comes from the system keychain, which the gate does not
    read: for a variable that decides what a server loads, that is a doubt."""
    setting = [{**_PATH_SETTING[0], "sensitive": True}]
    _extension(lab, {"command": "aider"}, settings=setting)
    started, reason = lab.spawn("gemini", env=_good_first(lab))
    assert not started, "gemini started with a keychain setting choosing PATH"
    assert "PATH" in reason and "keychain" in reason, reason


def test_an_extension_with_an_api_key_setting_in_its_env_file_starts(lab: Lab) -> None:
    """The usual extension: an API key setting kept in its ``.env`` or the keychain and
    passed on in its server's ``env``; nothing there decides what runs."""
    settings = [
        {"name": "Key", "description": "d", "envVar": "API_KEY"},
        {"name": "Token", "description": "d", "envVar": "TOKEN", "sensitive": True},
    ]
    declared = {"command": "aider", "env": {"API_KEY": "$API_KEY", "TOKEN": "${TOKEN}"}}
    _extension(lab, declared, settings=settings)
    write(lab.home / ".gemini" / "extensions" / "ext" / ".env", "API_KEY=k\nTOKEN=t\n")
    started, reason = lab.spawn("gemini", env=_good_first(lab))
    assert started, reason


# ---------------------------------------------------------------- which .env gemini loads


@pytest.mark.parametrize("how", ["--ignore-env", "advanced.ignoreLocalEnv"])
def test_gemini_ignoring_the_local_env_file_loads_a_farther_one(lab: Lab, how: str) -> None:
    """With ``--ignore-env`` (sniffed from the raw arguments) or ``advanced.ignoreLocalEnv``,
    Gemini CLI passes a plain ``.env`` outside the home by and takes a parent folder's
    ``.gemini/.env``: the gate must read that one (or doubt)."""
    project = lab.root / "outer" / "project"
    settings: dict = {"mcpServers": {"s": {"command": "aider", "env": {"PATH": "$XP"}}}}
    if how != "--ignore-env":
        settings["advanced"] = {"ignoreLocalEnv": True}
    write(project / ".gemini" / "settings.json", json.dumps(settings))
    write(project / ".env", f"XP={_good(lab)}\n")
    write(lab.root / "outer" / ".gemini" / ".env", f"XP={lab.bin}\n")
    argv = ("--ignore-env", "-p", "t") if how == "--ignore-env" else ("-p", "t")
    started, reason = lab.spawn("gemini", *argv, cwd=project)
    assert not started, f"gemini started with {how} and a parent's .gemini/.env"
    assert "aider 0.50.0" in reason or "ignoreLocalEnv" in reason, reason


def test_gemini_with_ignore_env_after_a_double_dash_loads_the_nearest(lab: Lab) -> None:
    """The positive control: after ``--`` the flag is no option (Gemini CLI's sniffing
    stops there), so the nearest ``.env`` is the one loaded and judged."""
    project = lab.root / "outer" / "project"
    settings = {"mcpServers": {"s": {"command": "aider", "env": {"PATH": "$XP"}}}}
    write(project / ".gemini" / "settings.json", json.dumps(settings))
    write(project / ".env", f"XP={_good(lab)}\n")
    write(lab.root / "outer" / ".gemini" / ".env", f"XP={lab.bin}\n")
    started, reason = lab.spawn("gemini", "-p", "t", "--", "--ignore-env", cwd=project)
    assert started, reason


def test_gemini_ignoring_the_local_env_file_still_loads_the_homes(lab: Lab) -> None:
    """Gemini CLI keeps a plain ``.env`` in the home when it ignores the local one: a
    below-floor PATH there is still judged."""
    project = lab.home / "project"
    settings = {"advanced": {"ignoreLocalEnv": True},
                "mcpServers": {"s": {"command": "aider", "env": {"PATH": "$XP"}}}}  # fmt: skip
    write(project / ".gemini" / "settings.json", json.dumps(settings))
    write(project / ".env", f"XP={_good(lab)}\n")
    write(lab.home / ".env", f"XP={lab.bin}\n")
    started, reason = lab.spawn("gemini", "-p", "t", cwd=project)
    assert not started and "aider 0.50.0" in reason, reason


def test_settings_files_that_disagree_on_ignoring_the_local_env_file_refuse(lab: Lab) -> None:
    """The home's settings say true, the workspace's false: which wins is not modelled, and
    the two ``.env`` files differ, so it is a doubt naming the setting."""
    project = lab.root / "outer" / "project"
    write(
        lab.home / ".gemini" / "settings.json", json.dumps({"advanced": {"ignoreLocalEnv": True}})
    )
    settings = {"advanced": {"ignoreLocalEnv": False},
                "mcpServers": {"s": {"command": "aider", "env": {"PATH": "$XP"}}}}  # fmt: skip
    write(project / ".gemini" / "settings.json", json.dumps(settings))
    write(project / ".env", f"XP={_good(lab)}\n")
    started, reason = lab.spawn("gemini", "-p", "t", cwd=project)
    assert not started and "advanced.ignoreLocalEnv" in reason, reason


# ---------------------------------------------------------------- what a .env may not set


@pytest.mark.parametrize(
    "line",
    ["GEMINI_SANDBOX=docker\nGEMINI_SANDBOX_IMAGE=ghcr.io/attacker/old-agent:latest",
     "GEMINI_SANDBOX_PROXY_COMMAND=./proxy", "SANDBOX_FLAGS=--privileged",
     "SEATBELT_PROFILE=open", "BUILD_SANDBOX=1", "TMPDIR=./t",
     "NODE_OPTIONS=--require ./x.js", "LD_PRELOAD=./x.so"],
    ids=["sandbox-image", "sandbox-proxy", "sandbox-flags", "seatbelt", "build", "tmpdir",
         "node-options", "ld-preload"],
)  # fmt: skip
def test_a_gemini_env_file_that_decides_what_gemini_runs_refuses_gemini(
    lab: Lab, line: str
) -> None:
    """Gemini CLI loads its ``.env`` before it decides whether (and in what image, with
    what proxy command and flags) it re-runs itself and its servers in a sandbox, and
    (releases before April 2026) before it relaunches its node with that environment: the
    agent and servers the gate judged on the host would not be what runs."""
    write(lab.project / ".gemini" / "settings.json", servers(s={"command": "aider"}))
    write(lab.project / ".env", line + "\n")
    started, reason = lab.spawn("gemini", "-p", "t", env=_good_first(lab))
    variable = line.partition("=")[0]
    assert not started, f"gemini started with a .env setting {variable}"
    assert variable in reason and ".env" in reason, reason


def test_a_gemini_env_file_of_credentials_and_certificates_lets_gemini_start(lab: Lab) -> None:
    """The positive control: the usual workspace ``.env`` (a key, a project, a company's
    certificate authority for node) decides nothing of what runs."""
    write(lab.project / ".gemini" / "settings.json", servers(s={"command": "aider"}))
    lines = ["GEMINI_API_KEY=k", "GOOGLE_CLOUD_PROJECT=p", "NODE_EXTRA_CA_CERTS=/etc/ca.pem"]
    write(lab.project / ".env", "\n".join(lines) + "\n")
    started, reason = lab.spawn("gemini", "-p", "t", env=_good_first(lab))
    assert started, reason


# ---------------------------------------------------------------- a settings file's variables

_ENV_FILES = ["workspace", "workspace .gemini", "home"]


def _env_file(lab: Lab, where: str) -> Path:
    folder = {"workspace": lab.project, "workspace .gemini": lab.project / ".gemini",
              "home": lab.home / ".gemini"}[where]  # fmt: skip
    return folder / ".env"


@pytest.mark.parametrize("key", ["url", "httpUrl"])
@pytest.mark.parametrize("where", _ENV_FILES)
def test_a_settings_url_defaulting_to_nothing_before_the_env_file_is_loaded_is_no_url(
    lab: Lab, key: str, where: str
) -> None:
    """Gemini CLI expands its settings files from its own environment, then loads its
    ``.env``: ``"${U:-}"`` with U only in the ``.env`` is empty, and the command starts."""
    write(lab.project / ".gemini" / "settings.json",
          servers(s={"command": "aider", key: "${U:-}"}))  # fmt: skip
    write(_env_file(lab, where), "U=https://mcp.example.com/sse\n")
    started, reason = lab.spawn("gemini", "-p", "t")
    assert not started, "gemini started a command its settings URL left empty"
    assert "aider 0.50.0" in reason, reason


@pytest.mark.parametrize("where", _ENV_FILES)
def test_a_settings_env_default_taken_before_the_env_file_is_loaded_refuses(
    lab: Lab, where: str
) -> None:
    """``"PATH": "${P:-<old>}"`` with P only in the ``.env``: Gemini CLI takes the default
    (the old aider's folder) before the ``.env`` gives P; earlier releases took P."""
    write(lab.project / ".gemini" / "settings.json",
          servers(s={"command": "aider", "env": {"PATH": f"${{P:-{lab.bin}}}"}}))  # fmt: skip
    write(_env_file(lab, where), f"P={_good(lab)}\n")
    started, reason = lab.spawn("gemini", "-p", "t")
    assert not started, "gemini started a server whose PATH default the gate took for P"
    assert "env.PATH" in reason and ".env" in reason, reason


def test_a_settings_reference_to_a_variable_the_agent_has_starts(lab: Lab) -> None:
    """The positive controls: a reference to the agent's own variable, and one to a
    ``.env`` variable without a default (Gemini CLI expands it again when it starts the
    server, from the environment the ``.env`` has joined by then)."""
    write(lab.project / ".gemini" / "settings.json",
          servers(s={"command": "aider", "env": {"PATH": "${P:-/nowhere}", "K": "$KEY"}},
                  r={"url": "${U:-}", "command": "aider"}))  # fmt: skip
    write(lab.project / ".env", "KEY=k\nGEMINI_API_KEY=k\n")
    env = lab.env(P=f"{_good(lab)}:/usr/bin:/bin", U="https://mcp.example.com/sse")
    started, reason = lab.spawn("gemini", "-p", "t", env=env)
    assert started, reason


# ---------------------------------------------------------------- GitHub Actions

_A_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def python_aider(lab: Lab) -> Path:
    """A venv's python with aider 0.70.0 (at its floor) installed, for ``python -m aider``,
    and the workspace's own ``aider`` package, which ``-m`` runs without PYTHONSAFEPATH."""
    prefix = lab.root / "venv"
    pip_install(prefix, dist="aider-chat", module="aider", version="0.70.0",
                marker=lab.root / "aider-ran")  # fmt: skip
    write(lab.project / "aider" / "__main__.py", "print('the workspace runs')\n")
    declared = {"command": str(prefix / "bin" / "python"), "args": ["-m", "aider"]}
    write(lab.project / ".gemini" / "settings.json", servers(s=declared))
    return prefix / "bin" / "python"


@pytest.mark.parametrize(
    "given",
    [{"GITHUB_SHA": _A_COMMIT}, {"SURFACE": "Github"}, {"env file": f"GITHUB_SHA={_A_COMMIT}"}],
    ids=["github-sha", "surface", "github-sha-in-env-file"],
)  # fmt: skip
def test_gemini_in_github_actions_does_not_give_a_server_the_agents_pythonsafepath(
    lab: Lab, python_aider: Path, given: dict[str, str]
) -> None:
    """Under GITHUB_SHA (any GitHub Actions job) or SURFACE=Github, from its environment or
    its ``.env``, Gemini CLI gives a stdio server only a short list of its variables
    (``sanitizeEnvironment``, strict): the agent's PYTHONSAFEPATH=1 does not reach
    ``python -m aider``, which would then run the workspace's ``./aider``."""
    if "env file" in given:
        write(lab.project / ".env", given.pop("env file") + "\n")
    started, reason = lab.spawn("gemini", "-p", "t", env=lab.env(PYTHONSAFEPATH="1", **given))
    assert not started, "gemini started python -m aider without the PYTHONSAFEPATH judged"
    assert "working directory" in reason, reason


def test_gemini_outside_github_actions_gives_a_server_the_agents_pythonsafepath(
    lab: Lab, python_aider: Path
) -> None:
    """The positive controls: outside GitHub Actions the agent's PYTHONSAFEPATH reaches
    the server; inside, a server given it in its own ``env`` keeps it."""
    started, reason = lab.spawn("gemini", "-p", "t", env=lab.env(PYTHONSAFEPATH="1"))
    assert started, reason
    declared = {"command": str(python_aider), "args": ["-m", "aider"],
                "env": {"PYTHONSAFEPATH": "1"}}  # fmt: skip
    write(lab.project / ".gemini" / "settings.json", servers(s=declared))
    started, reason = lab.spawn("gemini", "-p", "t", env=lab.env(GITHUB_SHA=_A_COMMIT))
    assert started, reason
    verdicts = {s["verdict"] for s in lab.last_receipt()["mcp_servers"]}
    assert verdicts == {"permit"}


@pytest.mark.parametrize("layer", ["workspace", "user", "not-an-object"])
def test_gemini_settings_that_redact_a_servers_environment_do_not_give_it_the_agents(
    lab: Lab, python_aider: Path, layer: str
) -> None:
    """A settings layer's ``security.environmentVariableRedaction`` (enabled, with a
    ``blocked`` list) may take any variable from a server, PYTHONSAFEPATH included: which
    ones reach it is not modelled, so the server is judged with the fewest as well; so it
    is when ``security`` is not an object (how Gemini CLI reads that is not known)."""
    declared = {"command": str(python_aider), "args": ["-m", "aider"]}
    redaction: object = {
        "environmentVariableRedaction": {"enabled": True, "blocked": ["PYTHONSAFEPATH"]}
    }
    if layer == "not-an-object":
        layer, redaction = "workspace", ["environmentVariableRedaction"]
    if layer == "workspace":
        document = {"mcpServers": {"s": declared}, "security": redaction}
        write(lab.project / ".gemini" / "settings.json", json.dumps(document))
    else:
        write(lab.home / ".gemini" / "settings.json", json.dumps({"security": redaction}))
    started, reason = lab.spawn("gemini", "-p", "t", env=lab.env(PYTHONSAFEPATH="1"))
    assert not started, "gemini started python -m aider with PYTHONSAFEPATH blocked"
    assert "working directory" in reason, reason


@pytest.mark.parametrize("kind", ["fifo", "link to a fifo", "link to /dev/zero"])
def test_an_extension_env_file_that_is_no_regular_file_refuses(lab: Lab, kind: str) -> None:
    """Gemini CLI reads an extension's ``.env`` when something is there (a FIFO gives what a
    writer sends then): what cannot be read exactly is a doubt, never an absent file."""
    import os

    _extension(lab, OLD_AIDER, settings=_PATH_SETTING)
    env_file = lab.home / ".gemini" / "extensions" / "ext" / ".env"
    if kind == "link to /dev/zero":
        env_file.symlink_to("/dev/zero")
    else:
        fifo = lab.root / "fifo" if kind == "link to a fifo" else env_file
        os.mkfifo(fifo)
        if fifo != env_file:
            env_file.symlink_to(fifo)
    started, reason = lab.spawn("gemini", env=_good_first(lab))
    assert not started, "gemini started with an extension .env the gate could not read"
    assert ".env" in reason and "regular file" in reason, reason


def test_an_extension_env_folder_is_no_variables(lab: Lab) -> None:
    """A folder called ``.env`` (a virtual environment) gives Gemini CLI no variables."""
    _extension(lab, OLD_AIDER, settings=_PATH_SETTING)
    (lab.home / ".gemini" / "extensions" / "ext" / ".env").mkdir()
    started, reason = lab.spawn("gemini", env=_good_first(lab))
    assert started, reason


@pytest.mark.parametrize("setting", ["advanced.excludedEnvVars", "excludedProjectEnvVars"])
def test_a_project_env_variable_gemini_s_settings_exclude_refuses(lab: Lab, setting: str) -> None:
    """Gemini CLI leaves the names a settings file excludes out of a project ``.env``: a
    value the gate would take from the file is then the environment's, or none."""
    good = _good(lab)
    _extension(lab, {"command": "aider", "env": {"PATH": f"${{GP:-{lab.bin}}}"}})
    write(lab.project / ".env", f"GP={good}\n")
    document = (
        {"advanced": {"excludedEnvVars": ["GP"]}} if setting.startswith("advanced")
        else {"excludedProjectEnvVars": ["GP"]}
    )  # fmt: skip
    write(lab.home / ".gemini" / "settings.json", json.dumps(document))
    started, reason = lab.spawn("gemini")
    assert not started, "gemini started although its settings exclude the .env's GP"
    assert setting.rsplit(".", maxsplit=1)[-1] in reason, reason


def test_an_exclusion_list_gemini_s_settings_give_that_is_not_of_names_refuses(lab: Lab) -> None:
    _extension(lab, {"command": "aider"})
    write(lab.project / ".env", "GP=1\n")
    write(lab.home / ".gemini" / "settings.json",
          json.dumps({"advanced": {"excludedEnvVars": [["GP"], {"a": 1}]}}))  # fmt: skip
    started, reason = lab.spawn("gemini")
    assert not started
    assert "advanced.excludedEnvVars" in reason and "TypeError" not in reason, reason
