"""A release project in a temporary folder: a floor-map module, its signed update receipt,
a release key, and `floorctl build` run on them through the real CLI."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.cli import floorctl as run_floorctl

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "generated"
SHIPPED_MODULE = SOURCE / "floorguard" / "floor_map.py"


SHIPPED_FEED = REPO / "feeds" / "example.v1.json"


def raised_feed(path: Path, adapter: str, version: str) -> Path:
    """The shipped example feed with one adapter's floor raised to ``version``."""
    document = json.loads(SHIPPED_FEED.read_text(encoding="utf-8"))
    document["adapters"][adapter]["min_safe_version"] = version
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


class Project:
    """``root/mod/floor_map.py`` (a copy of the shipped module), a key, floorctl's state."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.module = root / "mod" / "floor_map.py"
        self.module.parent.mkdir(parents=True)
        shutil.copyfile(SHIPPED_MODULE, self.module)
        done = self.floorctl("keygen", "--out", root / "key")
        assert done.returncode == 0, done.stderr
        self.key = root / "key" / "signing.key"
        self.pub = root / "key" / "signing.pub"

    def floorctl(self, *args: str | Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return run_floorctl(*args, cwd=self.root, state=self.state, **kwargs)

    def refresh(self, source: Path, receipt: str) -> Path:
        """Refresh the module from the feed ``source``; the signed receipt's path."""
        out = self.root / f"{receipt}.receipt.json"
        done = self.floorctl(
            "refresh", "--module", "mod/floor_map.py", "--feed", source, "--write",
            "--receipt-out", out, "--signing-key", self.key,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return out

    def build(
        self, out: str, receipt: Path, *extra: str | Path, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        return self.floorctl(
            "build", "--source", SOURCE, "--module", "mod/floor_map.py", "--receipt", receipt,
            "--signing-key", self.key, "--out", out, *extra, **kwargs,
        )  # fmt: skip


def payload(envelope: Path) -> dict[str, Any]:
    """The statement inside a DSSE envelope file (not verified: for reading only)."""
    document = json.loads(envelope.read_text(encoding="utf-8"))
    statement: dict[str, Any] = json.loads(base64.b64decode(document["payload"]))
    return statement


def only(folder: Path, pattern: str) -> Path:
    (found,) = sorted(folder.glob(pattern))
    return found


@dataclass(frozen=True)
class Built:
    project: Project
    receipt: Path
    dist: Path  # built from the project root with relative paths, umask 022


def build_shipped(root: Path) -> Built:
    """A project in ``root`` refreshed from the shipped feed and built into dist/."""
    project = Project(root)
    receipt = project.refresh(SHIPPED_FEED, "v1")
    done = project.build("dist", receipt)
    assert done.returncode == 0, done.stderr
    return Built(project, receipt, project.root / "dist")
