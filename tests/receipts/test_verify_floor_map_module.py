"""``verify receipt --floor-map MODULE`` in both CLIs: a module that only looks like the map the
receipt names (tricky spellings of its block), a FIFO or a huge file is refused alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env

pytestmark = pytest.mark.attack

FEED = {
    "schema_version": 1,
    "adapters": {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "Upgrade."}
    },
}


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert "Traceback" not in done.stdout, done.stdout


@pytest.fixture(scope="module")
def receipted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("final") / "p"
    root.mkdir()
    state = root.parent / "s"
    assert floorctl("keygen", "--out", "keys", cwd=root, state=state).returncode == 0
    (root / "floor_map.py").write_text("# floor-map:begin\n# floor-map:end\n")
    (root / "feed.json").write_text(json.dumps(FEED))
    done = floorctl(
        "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write",
        "--receipt-out", "receipt.json", "--signing-key", "keys/signing.key", cwd=root, state=state,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root


def verify_both(
    root: Path, module: str, timeout: float = 30
) -> list[subprocess.CompletedProcess[str]]:
    out = []
    for program in ("floorctl", "floorguard"):
        out.append(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    program,
                    "verify",
                    "receipt",
                    "receipt.json",
                    "--pubkey",
                    "keys/signing.pub",
                    "--floor-map",
                    module,
                ],
                capture_output=True,
                text=True,
                cwd=root,
                env=isolated_env(root.parent / "s"),
                timeout=timeout,
                check=False,
            )
        )
    return out


def tricky_modules(original: str) -> dict[str, str | bytes]:
    lower = original.replace('"0.60.0"', '"0.10.0"')
    head, rest = original.split("FLOOR_MAP_ENTRIES = ", 1)
    lower_rest = lower.split("FLOOR_MAP_ENTRIES = ", 1)[1]
    return {
        "twice-original-first": original.replace("# floor-map:end\n", "")
        + "FLOOR_MAP_ENTRIES = "
        + lower_rest,
        "twice-changed-first": lower + "\nFLOOR_MAP_ENTRIES = " + rest.split("# floor-map:end")[0],
        "annotated": head + "FLOOR_MAP_ENTRIES: dict = " + lower_rest,
        "annotated-after": original
        + "\nFLOOR_MAP_ENTRIES: dict = "
        + lower_rest.split("# floor-map:end")[0],
        "augmented": original + '\nFLOOR_MAP_ENTRIES |= {"aider": {}}\n',
        "non-literal": head
        + "FLOOR_MAP_ENTRIES = dict("
        + lower_rest.split("# floor-map:end")[0]
        + ")\n# floor-map:end\n",
        "after-end": original + "FLOOR_MAP_ENTRIES = " + lower_rest.split("# floor-map:end")[0],
        "tuple-target": original
        + "\nFLOOR_MAP_ENTRIES, X = "
        + lower_rest.split("# floor-map:end")[0].strip()
        + ", 1\n",
        "for-target": original + "for FLOOR_MAP_ENTRIES in [{}]:\n    pass\n",
        "import-as": original + "import json as FLOOR_MAP_ENTRIES\n",
        "star-import": original + "from os.path import *\n",
        "def": original + "def FLOOR_MAP_ENTRIES():\n    pass\n",
        "item-assigned": original + 'FLOOR_MAP_ENTRIES["aider"]["min_safe_version"] = "0.1"\n',
        "item-deleted": original + 'del FLOOR_MAP_ENTRIES["aider"]\n',
        "updated": original + "FLOOR_MAP_ENTRIES.update(aider={})\n",
        "nested-update": original + 'FLOOR_MAP_ENTRIES["aider"].update(note="x")\n',
        "walrus": original
        + "\n(FLOOR_MAP_ENTRIES := "
        + lower_rest.split("# floor-map:end")[0]
        + ")\n",
        # The module's namespace reached without naming the map (each empties it on import).
        "globals-item": original + 'globals()["FLOOR_MAP_ENTRIES"] = {}\n',
        "vars-update": original + "vars().update(FLOOR_MAP_ENTRIES={})\n",
        "exec": original + 'exec("FLOOR_MAP_ENTRIES = {}")\n',
        "sys-modules": original + "import sys\nsys.modules[__name__].FLOOR_MAP_ENTRIES = {}\n",
        "setattr": original + 'setattr(__import__(__name__), "FLOOR_MAP_ENTRIES", {})\n',
        "read-then-cleared": original + "x = FLOOR_MAP_ENTRIES\nx.clear()\n",
        "frame-globals": original
        + 'import inspect\ninspect.currentframe().f_globals["FLOOR_MAP_ENTRIES"] = {}\n',
        "getframe": original + 'import sys\nsys._getframe().f_globals["FLOOR_MAP_ENTRIES"] = {}\n',
        "function-globals": original
        + 'def f():\n    pass\nf.__globals__["FLOOR_MAP_ENTRIES"] = {}\n',
        "null-bytes": original.encode() + b"\x00\n",
        "not-utf8": original.encode() + b"# \xff\n",
        # Imported, a coding cookie other than UTF-8 decodes "\x0a" in a comment as a new
        # line: an assignment the block read as UTF-8 does not show.
        "cookie-unicode-escape": "# coding: unicode_escape\n"
        + original
        + "# \\x0aFLOOR_MAP_ENTRIES = "
        + lower_rest.split("# floor-map:end")[0].strip()
        + "\n",
        "cookie-latin-1": "# -*- coding: latin-1 -*-\n" + original,
        # A module-level annotation is evaluated on import: code, in the block.
        "annotation-calls": head + "FLOOR_MAP_ENTRIES: print('ran') = " + rest,
        "both-layouts": original.replace(
            "# floor-map:end",
            "ADAPTER_MIN_SAFE_VERSIONS: dict = {}\n# floor-map:end",
        ),
    }


def test_verify_receipt_refuses_tricky_modules_in_both_clis(receipted: Path) -> None:
    original = (receipted / "floor_map.py").read_text()
    assert [d.returncode for d in verify_both(receipted, "floor_map.py")] == [0, 0]
    for name, text in tricky_modules(original).items():
        path = receipted / f"{name.replace('-', '_')}.py"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        for done in verify_both(receipted, path.name):
            no_traceback(done)
            assert done.returncode == 1, (name, done.args[2], done.stdout, done.stderr)


def test_verify_receipt_with_a_fifo_or_huge_module(receipted: Path) -> None:
    os.mkfifo(receipted / "fifo_map.py")
    with open(receipted / "huge_map.py", "wb") as handle:
        handle.truncate(300 * 1024 * 1024)
    for name in ("fifo_map.py", "huge_map.py"):
        for done in verify_both(receipted, name):
            no_traceback(done)
            assert done.returncode == 1, (name, done.stderr)
