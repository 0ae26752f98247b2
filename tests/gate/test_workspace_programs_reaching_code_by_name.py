"""A workspace program that reaches ``exec`` without naming it where the source check looks
for names: through the attribute names of a ``match`` class pattern, or through a private
member of a class an allowed module hands out (``re.RegexFlag``'s ``Enum._convert_``, which
looks a module's globals up by name). Each is refused before anything runs; the code it
hides runs the below-floor aider.

Every program is a script in the workspace, run by an at-floor aider's Python under
deny-by-default."""

from __future__ import annotations

import pytest
from helpers.closed_world import World, old_aider_code

pytestmark = pytest.mark.attack

THROUGH_A_CLASS_PATTERN = """
import sys
from aider.main import main

def helper():
    pass

match helper:
    case object(__globals__=g):
        pass
match g["__builtins__"]:
    case object(exec=run):
        run(HIDDEN)
sys.exit(main())
"""

THROUGH_AN_ENUM = """
import re
import sys
from aider.main import main

for kind in re.RegexFlag.mro():
    if kind.__name__ == "Enum":
        base = kind
E = base._convert_("E", "builtins", lambda name: name == "exec")
E.exec.value(HIDDEN)
sys.exit(main())
"""


# A class pattern's positional parts read what __match_args__ names, bound by a def under
# a decorator; os.PathLike asks the class's __subclasshook__ what is an instance.
THROUGH_MATCH_ARGS = """
import os
import sys
from aider.main import main

class Any(os.PathLike):
    @lambda f: ("__globals__",)
    def __match_args__():
        pass
    def __subclasshook__(other):
        return True

def helper():
    pass

match helper:
    case Any(g):
        pass
match g["__builtins__"]:
    case object(exec=run):
        run(HIDDEN)
sys.exit(main())
"""


@pytest.mark.parametrize(
    ("program", "named"),
    [
        pytest.param(THROUGH_A_CLASS_PATTERN, ".__globals__", id="class-pattern"),
        pytest.param(THROUGH_AN_ENUM, ".mro", id="enum-convert"),
        pytest.param(THROUGH_MATCH_ARGS, "__match_args__", id="match-args"),
    ],
)
def test_a_program_reaching_exec_by_name_is_refused(world: World, program: str, named: str) -> None:
    new, old = world.new_aider(), world.old_aider()
    hidden = program.replace("HIDDEN", repr(old_aider_code(old.site)))
    outcome = world.run_workspace_script(new, hidden)
    world.assert_refused(outcome, old.marker, named)
    assert not new.marker.exists()
