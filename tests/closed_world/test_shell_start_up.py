"""What makes a shell (or a runtime) the child starts run other code than it was given.

An agent runs commands through a shell (its shell tool, ``system()``, npm's ``sh -c``). The
environment a host hands it can make every such shell run a file first (``BASH_ENV``), run
the commands of ``PS4`` at each traced line (``SHELLOPTS=xtrace``), or run a function in
place of a command (``BASH_FUNC_git%%``): an at-floor agent would then run a below-floor one.
Each is refused, whatever the policy, and nothing starts.
"""

from __future__ import annotations

import shutil

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, World

RUNS_A_SHELL = (
    "import pathlib, subprocess, sys\n"
    "def main():\n"
    "    if sys.argv[1:] == ['--version']:\n"
    "        print('aider 0.70.0')\n"
    "        return 0\n"
    "    subprocess.run(['bash', '-c', 'true'], check=False)\n"
    "    subprocess.run(['perl', '-e', 'use strict'], check=False)\n"
    "    pathlib.Path({marker!r}).touch()\n"
    "    return 0\n"
)


@pytest.mark.parametrize("policy", [DEFAULT, DENY_BY_DEFAULT])
@pytest.mark.parametrize("variable", ["BASH_ENV", "SHELLOPTS", "PERL5LIB"])
def test_an_at_floor_agent_whose_shell_would_run_an_old_one_is_refused(
    world: World, policy: str, variable: str
) -> None:
    new, old = world.new_aider(), world.old_aider()
    (new.site / "aider" / "main.py").write_text(
        RUNS_A_SHELL.format(marker=str(new.marker)), encoding="utf-8"
    )
    start_up = world.root / "start-up.sh"
    start_up.write_text(f"{old.script} task\n", encoding="utf-8")
    if variable == "PERL5LIB" and shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    # (perl -e 'use strict' loads strict.pm from the first folder of PERL5LIB)
    perl_lib = world.root / "perl-lib"
    perl_lib.mkdir()
    (perl_lib / "strict.pm").write_text(f"system('{old.script}', 'task'); 1;\n")
    extra = {
        "BASH_ENV": {"BASH_ENV": str(start_up)},
        "SHELLOPTS": {"SHELLOPTS": "xtrace", "PS4": f"$({old.script} task)"},
        "PERL5LIB": {"PERL5LIB": str(perl_lib)},
    }[variable]
    outcome = world.spawn("aider", ["task"], policy=policy,
                          env=world.env(new.prefix / "bin", **extra))  # fmt: skip
    world.assert_refused(outcome, old.marker, variable)
    assert not new.marker.exists(), outcome
