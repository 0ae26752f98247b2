"""Nothing in the repository points at a file it does not hold.

Every tracked document, configuration and source file (``.md``, ``.yml``, ``.yaml``,
``.toml``, ``.py``) is read for what a reader would follow: Markdown links
(``[text](path#anchor)``, the anchor checked against the target's headings as the code host
makes them), and paths in code spans (```docs/NAME.md```, ```examples/...```, a bare
``NAME.md``). A reference to a file that is not tracked fails, naming the file and line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED = (".md", ".yml", ".yaml", ".toml", ".py")
# A code span is read as a path into the repository when it starts with one of its
# top-level folders, or is a bare Markdown file name.
TOP = ("docs/", "examples/", "feeds/", "tests/", "schemas/", "templates/", "floorctl/",
       "generated/", ".ci/")  # fmt: skip
# What a path in a code span may not hold to be a reference: placeholders and patterns
# (`maps/sha256-<hex>.json`, `tests/perf/*.py`, `$DIR/...`), and options after it.
_PLACEHOLDER = re.compile(r"[<>*{}$\s|]|\.\.\.|\bDIR\b|\bPATH\b|\bNAME\b|\bFILE\b")
# Paths the documents name as what a user writes, never as files of this repository.
USERS_FILES = {
    "feeds/x.json": "docs/commands.md: how a configured path is read from a subfolder",
}
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_SPAN = re.compile(r"(`+)([^`\n]+?)\1")
_NEEDLE = "CONTRACT" + ".md"  # spelt apart so that this file does not mention it


@cache
def tracked() -> frozenset[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return frozenset(name for name in listed.split("\0") if name)


@cache
def folders() -> frozenset[str]:
    return frozenset(str(parent) for name in tracked() for parent in PurePosixPath(name).parents)


def scanned() -> list[str]:
    return sorted(name for name in tracked() if name.endswith(SCANNED))


def exists(path: str) -> bool:
    return path in tracked() or path.rstrip("/") in folders()


def github_anchors(markdown: str) -> set[str]:
    """The anchors the code host gives a page's headings (lowercase, punctuation but ``-``
    and ``_`` dropped, spaces as ``-``; a repeated heading gets ``-1``, ``-2``...)."""
    anchors: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"#{1,6} (.+)", line)
        if match is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", match[1].strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


def normalised(source: str, target: str) -> str:
    """``target`` (relative to ``source``'s folder) as a path from the repository's root;
    ``..`` past the root is kept, so it names nothing tracked."""
    parts: list[str] = []
    for part in (PurePosixPath(source).parent / target).parts:
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            else:
                parts.append(part)
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def broken_references(name: str) -> list[str]:
    text = (REPO / name).read_text(encoding="utf-8")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}"
        if name.endswith(".md"):
            for target in _LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:
                path, _, anchor = target.partition("#")
                resolved = normalised(name, path) if path else name
                if not exists(resolved):
                    found.append(f"{where}: link to {target}: {resolved} is not in the repository")
                elif anchor and resolved.endswith(".md"):
                    page = (REPO / resolved).read_text(encoding="utf-8")
                    if anchor not in github_anchors(page):
                        found.append(f"{where}: link to {target}: {resolved} has no #{anchor}")
        for _, span in _SPAN.findall(line):
            path = span.strip().split(" ", 1)[0]
            is_path = path.startswith(TOP) or re.fullmatch(r"[\w.-]+\.md", path)
            if not is_path or _PLACEHOLDER.search(path) or path in USERS_FILES:
                continue
            if path.startswith(TOP):
                resolved = path.rstrip("/")
            else:  # a bare NAME.md: beside the file, or at the root
                beside = normalised(name, path)
                resolved = beside if exists(beside) else path
            if not exists(resolved):
                found.append(f"{where}: `{span}`: {resolved} is not in the repository")
    return found


def test_the_scan_reads_the_documents_and_the_code() -> None:
    names = scanned()
    assert "README.md" in names and "docs/commands.md" in names
    assert any(name.startswith("floorctl/") for name in names)
    assert any(name.startswith("tests/") for name in names)


def test_every_link_and_path_names_a_file_the_repository_holds() -> None:
    broken = [problem for name in scanned() for problem in broken_references(name)]
    assert not broken, "\n".join(broken)


def test_nothing_in_the_repository_mentions_a_contract_file_it_does_not_hold() -> None:
    mentions = [
        f"{name}:{number}"
        for name in scanned()
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1)
        if _NEEDLE.lower() in line.lower()
    ]
    assert not mentions, f"{_NEEDLE} is not in the repository, yet named at: {mentions}"


def test_the_user_file_examples_are_still_shown_and_still_not_ours() -> None:
    for path, where in USERS_FILES.items():
        page = where.split(":", 1)[0]
        assert f"`{path}`" in (REPO / page).read_text(encoding="utf-8"), where
        assert not exists(path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("See [the guide](docs/missing.md).", "docs/missing.md is not in the repository"),
        ("See [fleet](docs/fleet.md#no-such-heading).", "has no #no-such-heading"),
        ("Read `" + "docs/gone.md` first.", "docs/gone.md is not in the repository"),
        ("The layout in `" + _NEEDLE + "`.", f"{_NEEDLE} is not in the repository"),
        ("Runs `" + "tests/test_nothing_here.py`.", "tests/test_nothing_here.py is not in"),
        ("[up](../outside.md)", "../outside.md is not in the repository"),
    ],
)
def test_a_reference_to_a_missing_file_is_caught(
    text: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(text + "\n", encoding="utf-8")
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "REPO", tmp_path)
    monkeypatch.setattr(this, "tracked", lambda: frozenset({"page.md", "docs/fleet.md"}))
    monkeypatch.setattr(this, "folders", lambda: frozenset({"docs", "."}))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "fleet.md").write_text("# One chain\n## Setting it up\n")
    assert any(problem in found for found in broken_references("page.md")), problem


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("## python -m floorguard", "python--m-floorguard"),
        ("## Configuration (`[tool.floorctl]` in pyproject.toml)",
         "configuration-toolfloorctl-in-pyprojecttoml"),
        ("## Tests and measurements", "tests-and-measurements"),
    ],
)  # fmt: skip
def test_anchors_are_made_as_the_code_host_makes_them(heading: str, anchor: str) -> None:
    assert anchor in github_anchors(heading + "\n")
