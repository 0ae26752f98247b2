"""A standard-library runner given a tracked package to run runs that package.

``python -m cProfile -m aider`` (or pdb, profile, trace, runpy, pydoc, unittest, doctest,
timeit, inspect, given the package's module, one of its files, a program importing it or
code importing it) runs aider under the runner's own code.
It is judged as aider, in the closed world (where the runner itself refuses it), under the
default untracked policy too; the runner given code of no tracked package stays untracked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, World

FORMS = {
    "cProfile -m": ["-m", "cProfile", "-m", "aider"],
    "profile -o -m": ["-m", "profile", "-o", "out.prof", "-m", "aider.main"],
    "pdb -m": ["-m", "pdb", "-m", "aider"],
    "trace --module": ["-m", "trace", "--count", "--module", "aider"],
    "runpy": ["-m", "runpy", "aider"],
    "pydoc": ["-m", "pydoc", "aider"],
    "unittest": ["-m", "unittest", "aider.main"],
    "cProfile script": ["-m", "cProfile", "{script}"],
    "cProfile wrapper": ["-m", "cProfile", "{wrapper}"],
    "timeit statement": ["-m", "timeit", "-n", "1", "import aider.main; aider.main.main()"],
    "pdb command": ["-m", "pdb", "-c", "!import aider.main; aider.main.main()", "{ok}"],
    "inspect": ["-m", "inspect", "aider.main"],
    "inspect qualname": ["-m", "inspect", "aider.__main__:main"],
    "timeit joined setup": ["-m", "timeit", "-n", "1", "-simport aider.main as m", "m.main()"],
    "timeit long setup": ["-m", "timeit", "-n", "1", "--se=import aider.main as m", "m.main()"],
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_runner_given_old_aider_is_refused_as_aider(
    world: World, untracked_policy: str, form: str
) -> None:
    old = world.old_aider()
    wrapper, ok = world.root / "wrap.py", world.root / "ok.py"
    wrapper.write_text("import sys\nfrom aider.main import main\nsys.exit(main())\n")
    ok.write_text("pass\n")
    args = [word.format(script=old.script, wrapper=wrapper, ok=ok) for word in FORMS[form]]
    outcome = world.spawn(
        "python", ["-I", *args], binary=old.python, policy=untracked_policy, env=world.env(),
        cwd=world.root,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "aider")
    assert world.recorded()[-1]["adapter"] == "aider"


def test_a_runner_given_a_script_of_no_tracked_package_stays_untracked(
    world: World, tmp_path: Path
) -> None:
    new = world.new_aider()
    script = tmp_path / "job.py"
    marker = tmp_path / "job-ran"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    outcome = world.spawn(
        "python", ["-I", "-m", "cProfile", str(script)], binary=new.python, policy=DEFAULT,
        env=world.env(), cwd=tmp_path,
    )  # fmt: skip
    assert outcome["outcome"] == "started", outcome
    assert marker.exists()
    assert world.recorded()[-1]["verdict"] == "untracked"
