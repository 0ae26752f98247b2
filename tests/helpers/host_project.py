"""A host project for floorctl runs: its folder with an empty floor-map module at the
runtime's own path, its state folder, and its feeds and update receipt."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from helpers.cli import floorctl

MODULE = Path("generated/floorguard/floor_map.py")
EMPTY_MODULE = '"""Host module."""\n\n# floor-map:begin\n# floor-map:end\n'


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "project"
        self.state = root / "state"
        (self.dir / MODULE.parent).mkdir(parents=True)
        (self.dir / MODULE).write_text(EMPTY_MODULE)

    def put(self, name: str, document: Any) -> str:
        (self.dir / name).write_text(json.dumps(document))
        return name

    def run(self, *args: str | Path) -> Any:
        return floorctl(*args, cwd=self.dir, state=self.state)

    @property
    def module(self) -> Path:
        return self.dir / MODULE

    def refresh(self, feed: str, *extra: str) -> Any:
        """refresh --write from ``feed``, its receipt in receipt.json, anchored."""
        return self.run(
            "refresh", "--feed", feed, "--write", "--receipt-out", "receipt.json", "--anchor",
            *extra,
        )  # fmt: skip

    def receipt(self) -> dict[str, Any]:
        envelope = json.loads((self.dir / "receipt.json").read_text())
        predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        return predicate
