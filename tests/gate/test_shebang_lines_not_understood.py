"""A ``#!`` line floorguard does not read is a refusal under either untracked policy.

identification.md: a ``#!`` line longer than the kernel reads, holding a carriage return,
setting variables or options through ``env`` (``env -S FOO=1 python``, ``env -i python``)
or an ``env -S`` string with a quote, backslash or ``$`` is refused. Such a line still runs
an interpreter (GNU env applies the options and runs the rest), so a below-floor agent's
own console script under a name with no floor must not pass as an untracked "script with
no interpreter": what it runs cannot be told, and a spawn whose program cannot be told is
no untracked one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, RUN_AIDER, World
from probes import write_executable

pytestmark = pytest.mark.attack

# Each makes GNU env 9 run the venv's python on the script (the rest of the line: one
# argument the kernel passes, which -S splits into words).
LINES_ENV_RUNS = {
    "a variable set by -S": "#!/usr/bin/env -S FOO=1 python -I",
    "an option of env in -S": "#!/usr/bin/env -S -u HOME python -I",
    "-- in -S": "#!/usr/bin/env -S -- python -I",
    "-S spelt long": "#!/usr/bin/env --split-string=python -I",
    "a working directory for env": "#!/usr/bin/env -S -C / python -I",
    "a PATH set by -S": "#!/usr/bin/env -S PATH={bin} python -I",
    "a variable set without -S": "#!/usr/bin/env FOO=1",
    "env's -i": "#!/usr/bin/env -i",
}


@pytest.mark.parametrize("policy", [DEFAULT, DENY_BY_DEFAULT])
@pytest.mark.parametrize("what", sorted(LINES_ENV_RUNS))
def test_an_agent_script_under_another_name_whose_env_line_is_not_read_is_refused(
    world: World, what: str, policy: str
) -> None:
    old = world.old_aider()
    bin_folder = old.prefix / "bin"
    line = LINES_ENV_RUNS[what].format(bin=bin_folder)
    script = write_executable(world.root / "tools" / "codey", f"{line}\n{RUN_AIDER}")
    outcome = world.spawn("codey", ["task"], policy=policy, binary=script,
                          env=world.env(bin_folder))  # fmt: skip
    world.assert_refused(outcome, old.marker, "#! line")


def test_a_line_longer_than_the_kernel_reads_is_refused_under_the_default_policy(
    world: World,
) -> None:
    old = world.old_aider()
    bin_folder = old.prefix / "bin"
    padding = "/." * 140  # the kernel cuts the line at 255 bytes, inside the path
    script = write_executable(
        world.root / "tools" / "codey", f"#!{bin_folder}{padding}/python3 -I\n{RUN_AIDER}"
    )
    outcome = world.spawn("codey", ["task"], policy=DEFAULT, binary=script,
                          env=world.env(bin_folder))  # fmt: skip
    world.assert_refused(outcome, old.marker, "#! line")


def test_a_line_holding_a_nul_byte_is_refused_under_the_default_policy(world: World) -> None:
    """The kernel ends the interpreter's name at a NUL (``#!PYTHON\\0x`` runs PYTHON); read
    by its letters, the line names no interpreter floorguard knows."""
    old = world.old_aider()
    bin_folder = old.prefix / "bin"
    script = world.root / "tools" / "codey"
    script.parent.mkdir(parents=True)
    script.write_bytes(f"#!{bin_folder}/python3".encode() + b"\0x\n" + RUN_AIDER.encode())
    script.chmod(0o755)
    outcome = world.spawn("codey", ["task"], policy=DEFAULT, binary=script,
                          env=world.env(bin_folder))  # fmt: skip
    world.assert_refused(outcome, old.marker, "#! line")


def test_a_script_whose_understood_line_runs_no_agent_code_stays_untracked(
    world: World, tmp_path: Path
) -> None:
    """The refusal is for lines not read, not for every script under a name with no floor."""
    script = write_executable(tmp_path / "codey", "#!/usr/bin/env -S python3 -I\nprint('ok')\n")
    outcome = world.spawn("codey", [], policy=DEFAULT, binary=script, env=world.env())
    assert outcome["outcome"] == "started" and outcome["stdout"] == "ok\n", outcome
    assert [r["verdict"] for r in world.recorded()] == ["untracked"], world.recorded()
