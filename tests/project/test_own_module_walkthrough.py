"""docs/own-module.md, run as written: from an empty host project to a refused spawn.

Every ``sh`` block of the walkthrough is run, in order, with bash in one empty folder (the
real floorctl and floorguard CLIs, the host's real script), and what it prints is compared
with the ``text`` block after it (``...`` matches anything on its line). The ``claude`` on
PATH is a native stand-in that reports 1.5.0: the runtime trusts ``--version`` answers from
native programs only, so a script there would be refused for another reason.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers.cli import isolated_env
from hosts import write_script
from probes.native import require_native

DOC = Path(__file__).resolve().parents[2] / "docs" / "own-module.md"
SECTION = "## From an empty project to a refused spawn"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def steps() -> list[tuple[str, str | None]]:
    """Each ``sh`` block of the walkthrough with the ``text`` block right after it, if any."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    blocks = [
        (m.group(1), m.group(2)) for m in FENCE.finditer(text[start : end if end > 0 else None])
    ]
    found: list[tuple[str, str | None]] = []
    for index, (kind, body) in enumerate(blocks):
        if kind == "sh":
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            found.append((body, after[1] if after and after[0] == "text" else None))
    return found


def matches(expected: str, printed: str) -> list[str]:
    """What does not match: each expected line must match one printed line (``...`` being
    a wildcard), and nothing else may be printed. Processes' stdout and stderr interleave
    as they will, so the order of lines is not compared."""
    left = [line for line in printed.splitlines() if line.strip()]
    problems = []
    for line in (line for line in expected.splitlines() if line.strip()):
        pattern = re.compile(".*".join(map(re.escape, line.split("..."))) + r"\Z")
        hit = next((got for got in left if pattern.match(got)), None)
        if hit is None:
            problems.append(f"expected, not printed: {line}")
        else:
            left.remove(hit)
    return problems + [f"printed, not expected: {line}" for line in left]


def test_the_walkthrough_has_the_steps_it_promises() -> None:
    commands = "\n".join(body for body, _ in steps())
    for step in (
        "floorctl init --module src/host/floor_map.py",
        "floorctl refresh --module src/host/floor_map.py --feed floors.json --write "
        "--receipt-out floor-update.dsse.json",
        "floor_map=floor_map",
        "FLOORGUARD_FLOOR_MAP=",
    ):
        assert step in commands
    assert all(expected is not None for _, expected in steps())


def test_the_walkthrough_runs_from_an_empty_project_to_a_refused_spawn(tmp_path: Path) -> None:
    require_native()
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    write_script(stand_ins / "claude", "echo '1.5.0 (Claude Code)'")
    project = tmp_path / "host"
    project.mkdir()
    env = isolated_env(tmp_path / "state")
    env["PATH"] = f"{stand_ins}:{Path(sys.executable).parent}:/usr/bin:/bin"
    env.pop("PYTHONPATH", None)
    for body, expected in steps():
        done = subprocess.run(
            ["bash", "-c", body],
            capture_output=True,
            text=True,
            cwd=project,
            env=env,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"{body}\n{done.stdout}{done.stderr}"
        problems = matches(expected or "", done.stdout + done.stderr)
        # Anything printed beyond the text block fails too: a refused spawn that still
        # started claude would print its "1.5.0 (Claude Code)".
        assert not problems, f"{body}\n" + "\n".join(problems)
