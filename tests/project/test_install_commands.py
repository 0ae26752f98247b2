"""Every install command the repository shows installs what it means to.

The package index's "floorctl" is an unrelated project: a recipe that ran ``pip install
floorctl`` (one did, in a job that could push to the repository) would run someone
else's code. So every ``pip install`` in the README, the docs, the examples, the hooks and
CI installs only: this checkout's folders, our own distributions (``floorguard``,
``floorguard-floorctl``, by name or from our repository by a git URL), or a tool named in
``TOOLS`` with the reason it is installed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"floorguard", "floorguard-floorctl"}
TOOLS = {"pip": "upgrading the installer itself (.ci/run)"}

# The options of pip install that take a value (their value is not a requirement).
_VALUED = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
           "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--python-version",
           "--platform", "--implementation", "--abi", "--src", "--progress-bar"}  # fmt: skip
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9_,.-]+\])?")
_PIP_INSTALL = re.compile(r"\bpip3?\s+install\b")


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def problems_of(command: str) -> list[str]:
    """Why the ``pip install`` command ``command`` installs something that is not ours
    (empty when everything it installs is)."""
    words = shlex.split(command[_PIP_INSTALL.search(command).end() :])  # type: ignore[union-attr]
    found: list[str] = []
    skip = False
    for word in words:
        if word in {"&&", "||", ";", "|"}:
            break  # the next command
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            if word in {"-r", "--requirement"}:
                found.append(f"{word}: a requirements file hides what it installs")
            skip = word in _VALUED
            continue
        found += _requirement_problems(word)
    return found


def _requirement_problems(word: str) -> list[str]:
    if word.startswith((".", "/")):
        return []  # a folder of this checkout
    match = _NAME.match(word)
    if match is None:
        return [f"{word!r}: not a requirement this test understands"]
    name = _normalised(match[1])
    rest = word[match.end() :].strip()
    if rest.startswith("@"):
        url = rest[1:].strip()
        if name not in OURS:
            return [f"{word!r}: {name} is not ours"]
        if not re.fullmatch(r"git\+\S+@(\$\w+|\$\{\w+\}|[0-9a-f]{40})(#subdirectory=\w+)?", url):
            return [f"{word!r}: a git URL must be pinned to a full commit SHA"]
        return []
    if name in OURS or name in TOOLS:
        return []
    return [f"{word!r}: {name} is not ours (the index's copy may be anyone's)"]


def _commands(path: Path) -> list[tuple[int, str]]:
    """The ``pip install`` commands in ``path``, with their line numbers (a command
    continued with a backslash is joined)."""
    found: list[tuple[int, str]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line, start = lines[index], index
        while line.rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            line = line.rstrip()[:-1] + " " + lines[index].strip()
        for match in _PIP_INSTALL.finditer(line):
            # In prose the command is a code span; in scripts, the rest of the line.
            span = re.search(r"`([^`]*" + re.escape(match[0]) + r"[^`]*)`", line)
            text = span[1] if span else line[match.start() :]
            found.append((start + 1, text))
        index += 1
    return found


def _shown_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "generated" / "README.md", ROOT / ".ci" / "run"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "examples").rglob("*.yml")) + sorted((ROOT / "examples").rglob("*.md"))
    files += sorted(ROOT.glob(".pre-commit-hooks.yaml")) + sorted(ROOT.glob(".github/**/*.yml"))
    return [path for path in files if path.is_file()]


def test_every_install_command_shown_installs_only_what_is_ours() -> None:
    shown = [(path, line, command) for path in _shown_files() for line, command in _commands(path)]
    assert len(shown) >= 5  # the README's two, the docs', the recipes': the scan finds them
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {problem}"
        for path, line, command in shown
        for problem in problems_of(command)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("python -m pip install floorctl", "floorctl is not ours"),
        ("pip install floorctl==0.2.0", "floorctl is not ours"),
        ("pip install git+https://example.org/x", "not ours"),
        ("pip install -q requests && floorctl check", "requests is not ours"),
        ("pip install -r requirements.txt", "requirements file"),
        ("pip install 'floorctl @ git+https://example.org/x@0123'", "not ours"),
        ("pip install 'floorguard @ git+https://example.org/x@main'", "full commit SHA"),
    ],
)
def test_an_install_of_a_name_that_is_not_ours_is_caught(command: str, problem: str) -> None:
    assert any(problem in found for found in problems_of(command))


@pytest.mark.parametrize(
    "command",
    [
        "python -m pip install -e ./generated -e '.[test]' && python -m pytest -n auto",
        "pip install 'floorguard[postgres]'",
        "python -m pip install -q --upgrade pip",
        '"floorguard-floorctl @ git+$FLOORGUARD_REPO@$FLOORGUARD_COMMIT"',
    ],
)
def test_an_install_from_the_checkout_or_of_our_own_names_passes(command: str) -> None:
    if "pip install" not in command:
        command = "pip install " + command
    assert problems_of(command) == []
