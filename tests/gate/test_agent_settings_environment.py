"""The variables an agent gives its own process from its configuration are judged as the
spawn's own environment is.

Claude Code applies its settings files' ``env`` to its own process, Gemini CLI loads its
``.env`` file into its own, codex its ``$CODEX_HOME/.env``: everything each then starts (its
shell tool's commands, its hooks, its servers) inherits them. A variable the gate refuses in
the spawn's environment (``BASH_ENV``, ``LD_PRELOAD``, ...) is refused there too, wherever
the agent reads it from; variables that load nothing still start the agent.

Real files in a temporary home and project, stand-ins that leave a marker when they run
(the lab of tests/helpers/mcp_lab.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, write

REFUSED = {
    "BASH_ENV": "./start.sh", "LD_PRELOAD": "./hook.so", "PERL5OPT": "-Mhook",
    "PYTHONPATH": "./lib", "NODE_OPTIONS": "--require ./hook.js",
}  # fmt: skip


def _claude_settings(lab: Lab, where: str, env: dict[str, str]) -> None:
    folder = {"project": lab.project / ".claude", "home": lab.home / ".claude"}[where]
    write(folder / "settings.json", json.dumps({"env": env}))


def _env_file(path: Path, env: dict[str, str]) -> None:
    write(path, "".join(f'{name}="{value}"\n' for name, value in env.items()))


@pytest.mark.parametrize("where", ["project", "home"])
@pytest.mark.parametrize("variable", sorted(REFUSED))
def test_a_variable_claude_s_settings_give_it_that_loads_code_refuses_claude(
    lab: Lab, where: str, variable: str
) -> None:
    _claude_settings(lab, where, {variable: REFUSED[variable]})
    started, reason = lab.spawn("claude", "-p", "task")
    assert not started, f"claude started with {variable} from its {where} settings"
    assert variable in reason and "settings" in reason, reason


def test_a_variable_claude_s_settings_give_it_that_loads_nothing_starts_it(lab: Lab) -> None:
    _claude_settings(lab, "project", {"ANTHROPIC_MODEL": "m", "DISABLE_TELEMETRY": "1"})
    started, reason = lab.spawn("claude", "-p", "task")
    assert started, reason


# Each agent's .env file and its arguments for a task.
ENV_FILES = {
    "gemini": (lambda lab: lab.project / ".gemini" / ".env", ("-p", "task")),
    "codex": (lambda lab: lab.home / ".codex" / ".env", ("exec", "task")),
}


@pytest.mark.parametrize("agent", sorted(ENV_FILES))
@pytest.mark.parametrize("variable", sorted(REFUSED))
def test_a_variable_an_agent_s_env_file_gives_it_that_loads_code_refuses_it(
    lab: Lab, agent: str, variable: str
) -> None:
    where, argv = ENV_FILES[agent]
    _env_file(where(lab), {variable: REFUSED[variable]})
    started, reason = lab.spawn(agent, *argv)
    assert not started, f"{agent} started with {variable} from its .env"
    assert variable in reason, reason


@pytest.mark.parametrize(
    ("agent", "plain"), [("gemini", {"GEMINI_MODEL": "m"}), ("codex", {"OPENAI_BASE_URL": "x"})]
)
def test_an_env_file_of_variables_that_load_nothing_starts_the_agent(
    lab: Lab, agent: str, plain: dict[str, str]
) -> None:
    where, argv = ENV_FILES[agent]
    _env_file(where(lab), plain)
    started, reason = lab.spawn(agent, *argv)
    assert started, reason


@pytest.mark.parametrize("variable", sorted(REFUSED))
@pytest.mark.parametrize("where", ["config.toml", "-c"])
def test_a_variable_codex_s_shell_policy_gives_its_commands_that_loads_code_refuses_it(
    lab: Lab, variable: str, where: str
) -> None:
    """``[shell_environment_policy] set`` is what codex gives every command of its shell
    tool: judged as codex's own environment is."""
    argv: tuple[str, ...] = ("exec", "task")
    if where == "config.toml":
        given = f'{variable} = "{REFUSED[variable]}"'
        write(lab.home / ".codex" / "config.toml",
              f"[shell_environment_policy]\nset = {{ {given} }}\n")  # fmt: skip
    else:
        argv = ("-c", f'shell_environment_policy.set.{variable}="{REFUSED[variable]}"', *argv)
    started, reason = lab.spawn("codex", *argv)
    assert not started, f"codex started with {variable} in its shell policy ({where})"
    assert variable in reason and "shell_environment_policy" in reason, reason


def test_a_codex_shell_policy_of_plain_variables_or_not_read_exactly(lab: Lab) -> None:
    write(lab.home / ".codex" / "config.toml", '[shell_environment_policy]\nset = { CI = "1" }\n')
    started, reason = lab.spawn("codex", "exec", "task")
    assert started, reason
    write(lab.home / ".codex" / "config.toml", "[shell_environment_policy]\nset = { X = 1 }\n")
    started, reason = lab.spawn("codex", "exec", "task")
    assert not started and "not a table of strings" in reason, reason
