"""Fixtures shared by the runtime's identification tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from probes import pip_install


@pytest.fixture
def old_aider(tmp_path: Path) -> tuple[Path, Path]:
    """aider-chat 0.50.0 (below its 0.60.0 floor) in a real venv; its console script, marker."""
    marker = tmp_path / "aider-ran"
    script = pip_install(
        tmp_path / "venv", dist="aider-chat", module="aider", version="0.50.0", marker=marker
    )
    return script, marker
