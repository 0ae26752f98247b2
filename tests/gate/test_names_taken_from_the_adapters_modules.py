"""A program may take from the judged adapter's modules only what they define: a function
or class of their own (``from aider.main import main``). What such a module imports or
assigns (``aider.main.git``, ``from aider.main import Path``, ``import os as helpers``) is
other code, reached under the adapter's name: taking it is refused, whatever its name.

Every agent is a real virtual environment with an at-floor aider whose ``main.py`` imports
the way the real one does; the program is a script in the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import RUN_AIDER, World

pytestmark = pytest.mark.attack

IMPORTS = (
    "import helperdep\nfrom pathlib import Path\nimport os as helpers\nrunner = helperdep\n"
    "class Coder:\n    shell = helperdep\n"
    "def make():\n    return helperdep\n"
)


def with_imports(site: Path, marker: Path) -> None:
    """aider's main.py importing a dependency installed beside it, pathlib's Path and os
    under another name, as real CLIs do; the dependency writes ``marker`` when asked."""
    main = site / "aider" / "main.py"
    main.write_text(IMPORTS + main.read_text(encoding="utf-8"), encoding="utf-8")
    (site / "helperdep.py").write_text(
        f"import pathlib\ndef run():\n    pathlib.Path({str(marker)!r}).touch()\n",
        encoding="utf-8",
    )


@pytest.mark.parametrize(
    ("program", "taken"),
    [
        pytest.param("import aider.main\naider.main.helperdep.run()\n", "helperdep", id="module"),
        pytest.param("from aider.main import runner\nrunner.run()\n", "runner", id="assigned"),
        pytest.param("from aider.main import Path\nPath(MARK).touch()\n", "Path", id="class"),
        pytest.param(
            "from aider.main import helpers\nhelpers.system('touch ' + MARK)\n",
            "helpers",
            id="aliased-stdlib",
        ),
        pytest.param("import aider.main as m\nm.Path(MARK).touch()\n", "Path", id="alias-attr"),
    ],
)
def test_taking_what_the_adapters_module_imports_is_refused(
    world: World, program: str, taken: str
) -> None:
    new = world.new_aider()
    marker = world.root / "unjudged-ran"
    with_imports(new.site, marker)
    outcome = world.run_workspace_script(new, program.replace("MARK", repr(str(marker))))
    world.assert_refused(outcome, marker, f"takes aider.main.{taken}")


def test_the_console_script_shape_taking_the_adapters_own_function_runs(world: World) -> None:
    new = world.new_aider()
    with_imports(new.site, world.root / "unjudged-ran")
    outcome = world.run_workspace_script(new, RUN_AIDER)
    world.assert_permitted_and_ran(outcome, new.marker)


@pytest.mark.parametrize(
    ("program", "used"),
    [
        pytest.param("import aider.main\nm = aider.main\nm.helperdep.run()\n", "aider.main",
                     id="module-in-a-variable"),
        pytest.param("from aider.main import Coder\nCoder.shell.run()\n", "aider.main.Coder",
                     id="class-attribute"),
        pytest.param("from aider.main import Coder\nCoder().shell.run()\n", "aider.main.Coder",
                     id="instance-attribute"),
        pytest.param("from aider.main import make\nmake().run()\n", "aider.main.make",
                     id="what-a-function-returns"),
        pytest.param("import aider.main\nfor m in [aider.main]:\n    m.helperdep.run()\n",
                     "aider.main", id="in-a-loop"),
        pytest.param("from aider.main import Coder\ndef f():\n    return Coder()\n"
                     "f().shell.run()\n", "aider.main.Coder", id="returned-by-a-function"),
    ],
)  # fmt: skip
def test_what_the_adapters_code_holds_is_not_reached_through_values(
    world: World, program: str, used: str
) -> None:
    new = world.new_aider()
    marker = world.root / "unjudged-ran"
    with_imports(new.site, marker)
    outcome = world.run_workspace_script(new, program)
    world.assert_refused(outcome, marker, used)
