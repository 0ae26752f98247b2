"""The README and the docs, tried as a newcomer tries them: their commands, in a copy of the
repository with fresh state, through the installed console scripts.

The ``sh`` blocks are run as written (only the ``pip install``/``pytest`` halves and the
placeholder ``path/to/`` line are left out). The commands the documentation gives as table
rows with placeholders are run in a concrete form, and each form is first looked up in the
README or a page of ``docs/`` (:func:`documented`), so a renamed flag or a dropped row fails
here, not for users.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from probes import aider_at

REPO = Path(__file__).resolve().parents[2]
PAGES = {
    path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
}
DOCUMENTATION = "\n".join(PAGES.values())
BIN = Path(sys.executable).parent


def documented(*forms: str) -> None:
    """Each form appears in the README or a page of docs/ verbatim."""
    missing = [form for form in forms if form not in DOCUMENTATION]
    assert not missing, f"the documentation no longer shows {missing}"


def fenced(language: str, page: str = "README.md") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGES[page], flags=re.DOTALL)


def page_commands(page: str) -> list[str]:
    """The floorctl commands of a page's ``sh`` blocks, in order."""
    commands = []
    for block in fenced("sh", page):
        for line in block.splitlines():
            for part in line.split(" && "):
                command = part.strip()
                if command.startswith("floorctl ") and "path/to/" not in command:
                    commands.append(command)
    return commands


class Walk:
    """A copy of the repository with its own HOME, XDG_STATE_HOME and FLOORGUARD_HOME."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repo"
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*.lock", ".*.undo")
        for name in ("feeds", "generated", "schemas", "templates"):
            shutil.copytree(REPO / name, self.repo / name, ignore=ignore)
        shutil.copy2(REPO / "pyproject.toml", self.repo / "pyproject.toml")
        shutil.copy2(REPO / ".pre-commit-hooks.yaml", self.repo / ".pre-commit-hooks.yaml")
        (root / "home").mkdir()
        self.bin = root / "bin"  # fake adapters live here, never the machine's own
        self.bin.mkdir()
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("FLOORGUARD_", "FLOORCTL_"))
        }
        self.env.update(
            HOME=str(root / "home"),
            XDG_STATE_HOME=str(root / "state"),
            FLOORGUARD_HOME=str(root / "floorguard"),
            PATH=f"{self.bin}:{BIN}:/usr/bin:/bin",
        )

    def run(self, command: str | list[str], **extra: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(command) if isinstance(command, str) else command
        if argv[0] == "floorctl":
            argv = [str(BIN / "floorctl"), *argv[1:]]
        elif argv[:3] == ["python", "-m", "floorguard"]:
            argv = [sys.executable, *argv[1:]]
        return subprocess.run(
            argv,
            cwd=self.repo,
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def shell(self, command: str) -> subprocess.CompletedProcess[str]:
        """A command line as a user types it, ``&&`` chains included, through bash."""
        return subprocess.run(
            ["bash", "-c", command],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ok(self, command: str | list[str], **extra: str) -> str:
        done = self.run(command, **extra)
        assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    if not (BIN / "floorctl").exists():
        pytest.skip("the floorctl console script is not installed beside this Python")
    yield Walk(tmp_path_factory.mktemp("readme"))


def test_the_documentation_from_quick_start_to_release(walk: Walk) -> None:
    (quick_start,) = fenced("sh")[0].splitlines()
    quick_start = quick_start.split(" && ", 1)[1]  # after the install step
    validate, dry_run = page_commands("docs/feeds.md")

    # Configuration and the pre-commit hook, on the fresh copy: the committed map is current.
    documented("`floorctl refresh --check` at its root checks the committed `floor_map.py`")
    walk.ok("floorctl refresh --check")
    hooks = (walk.repo / ".pre-commit-hooks.yaml").read_text()
    entry = re.search(r"^\s*entry: (.*)$", hooks, flags=re.MULTILINE)
    assert entry is not None
    walk.ok(entry.group(1))
    table = tomllib.loads(fenced("toml", "docs/commands.md")[0])["tool"]["floorctl"]
    for key in table:
        documented(f"| `{key}` |")

    # Quick start: a signed receipt, and the development key says so.
    done = walk.shell(quick_start)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "development signing key" in done.stderr
    receipt = walk.repo / ".floorctl-demo" / "floor_update_receipt.json"
    assert json.loads(receipt.read_text())["payloadType"]

    # Signing the shipped feed with the development key leaves the quick start working.
    documented("`floorctl sign feeds/example.v1.json`")
    assert "development signing key" in walk.ok("floorctl sign feeds/example.v1.json")
    done = walk.shell(quick_start)
    assert done.returncode == 0 and "signature not checked" in done.stderr, done.stderr

    # Real advisories: validate, then a dry run.
    assert "ok  feeds/example-waivers.json" in walk.ok(validate)
    assert "dry run: nothing written" in walk.ok(dry_run)

    documented("`floorctl keygen --out DIR`")
    walk.ok("floorctl keygen --out keys")
    assert (walk.repo / "keys/signing.key").stat().st_mode & 0o777 == 0o600

    documented("`floorctl refresh ... --write --receipt-out R --anchor`")
    out = walk.ok(f"{dry_run} --write --receipt-out R.json --anchor --signing-key keys/signing.key")
    assert "anchored in the audit chain at seq 0" in out

    documented("`floorctl verify receipt FILE [--pubkey P]", "`python -m floorguard -V`")
    both = [
        walk.ok(f"{cli} verify receipt R.json --pubkey keys/signing.pub")
        for cli in ("floorctl", "python -m floorguard")
    ]
    assert both[0].startswith("OK adapter.floor_update_receipt") and both[0] == both[1]
    # Without --pubkey the development key is tried; the error says what to pass instead.
    wrong = walk.run("floorctl verify receipt R.json")
    assert wrong.returncode == 1 and "pass --pubkey" in wrong.stderr

    documented("`floorctl chain checkpoint [--signing-key K] [--out F] [--full] [--json]`")
    walk.ok("floorctl chain checkpoint --signing-key keys/signing.key --out c1.txt")
    documented("`floorctl canary record --adapter A --version V --result pass")
    assert "certify" in walk.ok(
        "floorctl canary record --adapter aider --version 0.86.0 --result pass"
    )
    documented(
        "`floorctl chain export ... --checkpoint-out C [--inclusion-out P] [--signing-key K]`"
    )
    walk.ok(
        "floorctl chain export --out slice.jsonl --checkpoint-out c2.txt"
        " --inclusion-out incl.json --signing-key keys/signing.key"
    )
    documented("`floorctl chain prove (--receipt-id ID \\| --seq N) [--checkpoint C] [--out F]`")
    walk.ok("floorctl chain prove --seq 0 --checkpoint c2.txt --out p0.json")
    documented("`floorctl chain consistency --old C1 [--new C2] [--out F]`")
    walk.ok("floorctl chain consistency --old c1.txt --new c2.txt --out cons.json")

    documented(
        "`floorctl verify chain SLICE [--since TS] [--until TS] [--key-file K]"
        " [--checkpoint C --pubkey P"
    )
    proofs = [
        walk.ok(f"{cli} verify chain slice.jsonl --checkpoint c2.txt --pubkey keys/signing.pub")
        for cli in ("floorctl", "python -m floorguard")
    ]
    assert proofs[0].startswith("PROVEN") and proofs[1].startswith("PROVEN")
    # The README's auditor, as written.
    export, verify = fenced("sh")[2].splitlines()
    walk.ok(export)
    assert walk.ok(verify).startswith("PROVEN")
    documented("`floorctl verify inclusion PROOF --checkpoint C --pubkey P")
    walk.ok("floorctl verify inclusion p0.json --checkpoint c2.txt --pubkey keys/signing.pub")
    documented("`floorctl verify consistency --old C1 --new C2 --proof F --pubkey P")
    walk.ok(
        "floorctl verify consistency --old c1.txt --new c2.txt --proof cons.json"
        " --pubkey keys/signing.pub"
    )
    documented(
        "`floorctl witness cosign --old C1 --new C2 --proof F --key WK --pubkey P --state DIR"
    )
    walk.ok("floorctl keygen --out witness")
    walk.ok(
        "floorctl witness cosign --old c1.txt --new c2.txt --proof cons.json"
        " --key witness/signing.key --pubkey keys/signing.pub --state witness-state --out c2w.txt"
    )
    walk.ok(
        "floorctl verify inclusion p0.json --checkpoint c2w.txt --pubkey keys/signing.pub"
        " --witness-key witness/signing.pub"
    )

    documented("`floorctl doctor [--strict] [--format F]`", "`--format text|json|sarif|markdown`")
    assert walk.ok("floorctl doctor --format text").startswith("adapter ")
    doctor = json.loads(walk.run("floorctl doctor --format json").stdout)
    assert {a["adapter"]: a["last_green"] for a in doctor["adapters"]}["aider"] == "0.86.0"
    assert json.loads(walk.run("floorctl doctor --format sarif").stdout)["version"] == "2.1.0"
    assert walk.ok("floorctl doctor --format markdown").startswith("### floorguard doctor")
    documented("`floorctl canary last-green [--json]`")
    assert walk.ok("floorctl canary last-green").startswith("aider 0.86.0")

    # Publish, and a host that uses the map only with the publisher's key trusted.
    documented(
        "`floorctl publish --out DIR [--module M] [--signing-key P]", "FLOORGUARD_FLOOR_MAP="
    )
    walk.ok("floorctl publish --out published --signing-key keys/signing.key")
    published = str(walk.repo / "published/floor-map.json")
    untrusted = walk.ok("python -m floorguard doctor", FLOORGUARD_FLOOR_MAP=published)
    assert "is not used" in untrusted and "set FLOORGUARD_TRUSTED_KEYS" in untrusted
    trusted = walk.ok(
        "python -m floorguard doctor",
        FLOORGUARD_FLOOR_MAP=published,
        FLOORGUARD_TRUSTED_KEYS=str(walk.repo / "keys/signing.pub"),
    )
    assert "is not used" not in trusted

    documented(
        "`floorctl build --out DIR --receipt R", "`floorctl verify provenance WHEEL --pubkey PUB"
    )
    walk.ok("floorctl build --out dist --receipt R.json --signing-key keys/signing.key")
    (wheel,) = (walk.repo / "dist").glob("floorguard-*.whl")
    assert (walk.repo / "dist" / f"{wheel.name}.provenance.dsse").is_file()
    assert walk.ok(
        ["floorctl", "verify", "provenance", str(wheel), "--pubkey", "keys/signing.pub"]
    ).startswith("provenance OK")


def test_the_readme_shell_completion_lines_produce_scripts(walk: Walk) -> None:
    shells = re.findall(r"_FLOORCTL_COMPLETE=(\w+_source) floorctl", PAGES["docs/commands.md"])
    assert sorted(shells) == ["bash_source", "fish_source", "zsh_source"]
    for shell in shells:
        assert "floorctl" in walk.ok("floorctl", _FLOORCTL_COMPLETE=shell)


def test_the_readme_exec_exit_statuses_127_126_and_the_childs(walk: Walk) -> None:
    documented("`/path/to/python -I -m floorguard exec aider -- --yes ...`")
    assert walk.run("python -I -m floorguard exec aider -- --yes").returncode == 127
    aider = walk.bin / "aider"
    aider_at(aider, "0.50.0")
    refused = walk.run("python -I -m floorguard exec aider -- --yes")
    assert refused.returncode == 126 and "below the floor" in refused.stderr
    # A version at the floor runs, and exec exits with the child's own status.
    aider_at(aider, "0.90.0", says="ran\n", exit_status=3)
    ran = walk.run("python -I -m floorguard exec aider -- --yes")
    assert (ran.returncode, ran.stdout) == (3, "ran\n"), ran.stderr
    # Without -I, python -m starts with the working directory on the gate's own path.
    unguarded = walk.run("python -m floorguard exec aider -- --yes")
    assert unguarded.returncode == 126 and "python -I -m floorguard" in unguarded.stderr
    assert unguarded.stdout == ""


def test_exec_without_an_adapter_does_not_ask_for_arguments_it_does_not_need(walk: Walk) -> None:
    done = walk.run("python -m floorguard exec")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "the following arguments are required: ADAPTER" in line, line


def test_the_version_flags_of_both_clis(walk: Walk) -> None:
    assert re.fullmatch(r"floorctl \S+ \(floorguard \S+\)\n", walk.run("floorctl -V").stdout)
    assert re.fullmatch(r"floorguard \S+\n", walk.run("python -m floorguard -V").stdout)


def test_the_readme_configuration_block_is_a_valid_configuration(walk: Walk) -> None:
    project = walk.root / "configured"
    project.mkdir()
    (project / "pyproject.toml").write_text(fenced("toml", "docs/commands.md")[0])
    done = subprocess.run(
        [str(BIN / "floorctl"), "refresh", "--check"],
        cwd=project,
        env=walk.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Read and accepted (a configuration error is exit 2): what fails is the first file it
    # names that this empty project lacks.
    assert done.returncode == 1, done.stderr
    assert "keys/feed-publishers.pem: cannot read the trusted keys" in done.stderr


def test_a_canary_version_of_the_wrong_form_is_shown_one_of_the_right_form(walk: Walk) -> None:
    documented("exit 2, recording nothing, for an adapter not in the map or a bad version")
    done = walk.run("floorctl canary record --adapter claude --version 1.0 --result pass")
    assert done.returncode == 2
    shown = r"--version '1\.0' is not a SemVer version such as claude's floor \d+\.\d+\.\d+\n"
    assert re.search(shown + r"\Z", done.stderr), done.stderr
