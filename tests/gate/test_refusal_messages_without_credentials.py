"""A refusal raised, and printed by exec, hides what may be a credential as the receipt's
reason does: in the name asked for, a binary's path, and the words of a decision that could
not be recorded; the receipt keeps no credential in the name asked for either."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import isolated_env

import floorguard
from floorguard._chain.chain import AuditChain

SECRET = "SECRETxyz"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    environ = isolated_env(tmp_path / "state")
    for name in [name for name in list(__import__("os").environ) if name.startswith("FLOORGUARD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("FLOORGUARD_HOME", environ["FLOORGUARD_HOME"])
    return environ


def _refusal(adapter: str, **kwargs: object) -> floorguard.SpawnRefused:
    with pytest.raises(floorguard.SpawnRefused) as raised:
        floorguard.preflight(adapter, **kwargs)  # type: ignore[arg-type]
    return raised.value


def test_a_credential_in_the_name_asked_for_is_hidden_in_the_message_and_the_receipt(
    env: dict[str, str],
) -> None:
    refused = _refusal(f"password={SECRET}")
    assert SECRET not in str(refused) and "<hidden>" in str(refused), str(refused)
    [record] = AuditChain.shared(env).records()
    assert SECRET not in str(record.receipt), record.receipt


def test_a_credential_in_a_binarys_path_is_hidden_in_the_message(
    env: dict[str, str], tmp_path: Path
) -> None:
    refused = _refusal("aider", binary=str(tmp_path / f"token={SECRET}"))
    assert SECRET not in str(refused), str(refused)
    assert refused.decision is not None and SECRET not in refused.decision.reason
    with pytest.raises(floorguard.SpawnRefused) as spawned:  # the same through spawn
        floorguard.spawn("aider", [], binary=str(tmp_path / f"token={SECRET}"))
    assert SECRET not in str(spawned.value), str(spawned.value)


def test_a_decision_that_cannot_be_recorded_hides_a_credential_in_its_words(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / f"token={SECRET}"
    home.write_text("a file, not a folder")
    monkeypatch.setenv("FLOORGUARD_HOME", str(home))
    refused = _refusal("aider", version="0.61.0")
    assert refused.decision is None
    assert SECRET not in str(refused) and "could not be recorded" in str(refused), str(refused)


def test_exec_prints_the_refusal_without_the_credential(env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-m", "floorguard", "exec", f"https://user:{SECRET}@host", "--"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "refusing to spawn" in done.stderr and SECRET not in done.stderr, done.stderr
