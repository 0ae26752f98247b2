"""A feed's signature is judged whenever keys are configured: trusted keys that are a broken
link or an empty file are an error, never "no trust"; keys installed by ``trust rotate``
still judge; a feed once accepted signed cannot come back unsigned through the state file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from feedserver import v2_feed
from helpers.cli import floorctl

pytestmark = pytest.mark.attack

REPO = Path(__file__).resolve().parents[2]


def ctl(cwd: Path, state: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=cwd, state=state)


@pytest.fixture
def signed_feed(tmp_path: Path) -> Path:
    """The shipped feed signed by a key that nothing trusts yet (keys in tmp_path/a)."""
    state = tmp_path / "state"
    assert ctl(tmp_path, state, "keygen", "--out", "a").returncode == 0
    feed = tmp_path / "feed.json"
    feed.write_bytes((REPO / "feeds" / "example.v1.json").read_bytes())
    done = ctl(tmp_path, state, "sign", feed, "--signing-key", "a/signing.key")
    assert done.returncode == 0, done.stderr
    return feed


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_installed_trusted_keys_left_as_a_broken_link_are_an_error_not_no_trust(
    link: str, tmp_path: Path, signed_feed: Path
) -> None:
    # Path.exists() says False for a broken link where `trust rotate` keeps the keys: read
    # as "nothing trusted", the signed feed would be used unchecked (exit 0).
    state = tmp_path / "state"
    installed = state / "floorctl" / "trusted-keys.json"
    installed.parent.mkdir(parents=True, exist_ok=True)
    installed.symlink_to(tmp_path / "gone.json" if link == "dangling" else installed.name)
    done = ctl(tmp_path, state, "refresh", "--feed", signed_feed, "--json")
    assert done.returncode == 1, done.stdout
    assert "trusted-keys.json" in done.stderr
    assert "signature not checked" not in done.stderr
    assert json.loads(done.stdout)["error"]["exit_status"] == 1


def test_keys_installed_by_trust_rotate_still_judge_a_present_signature(
    tmp_path: Path, signed_feed: Path
) -> None:
    state = tmp_path / "state"
    assert ctl(tmp_path, state, "keygen", "--out", "b").returncode == 0
    # Rotate from a to b: b's key is installed, a's no longer trusted.
    done = ctl(tmp_path, state, "sign", "b/signing.pub", "--kind", "trusted-keys",
               "--signing-key", "a/signing.key")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = ctl(tmp_path, state, "trust", "rotate", "--current", "a/signing.pub",
               "--new", "b/signing.pub")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = ctl(tmp_path, state, "refresh", "--feed", signed_feed)
    assert done.returncode == 1
    assert "bad signature" in done.stderr
    assert "signature not checked" not in done.stderr


@pytest.mark.parametrize("content", ["", '{"threshold": 1, "keys": []}'], ids=["empty", "no-keys"])
def test_a_configured_but_empty_trusted_keys_file_is_an_error_not_no_trust(
    content: str, tmp_path: Path, signed_feed: Path
) -> None:
    (tmp_path / "trusted.json").write_text(content)
    (tmp_path / "pyproject.toml").write_text('[tool.floorctl]\ntrusted-keys = "trusted.json"\n')
    done = ctl(tmp_path, tmp_path / "state", "refresh", "--feed", signed_feed)
    assert done.returncode == 1
    assert "trusted.json" in done.stderr
    assert "signature not checked" not in done.stderr


# --- a state file that remembers a signed feed ------------------------------------------------


@pytest.mark.parametrize("stripped", ["no-trusted-keys", "signature-deleted"])
def test_a_feed_accepted_signed_cannot_come_back_unsigned_through_the_state_file(
    stripped: str, tmp_path: Path
) -> None:
    # With no key trusted a present signature is ignored, so a run without --trusted-keys
    # (or a copy whose .dsse was deleted) must not take the next version unchecked and
    # advance the committed state of a feed_id that was only ever signed.
    state, feed, module = tmp_path / "state", tmp_path / "feed.json", tmp_path / "floor_map.py"
    module.write_bytes((REPO / "generated" / "floorguard" / "floor_map.py").read_bytes())
    assert ctl(tmp_path, state, "keygen", "--out", "a").returncode == 0

    def refresh(version: int, *trust: str) -> subprocess.CompletedProcess[str]:
        feed.write_bytes(v2_feed(version))
        done = ctl(tmp_path, state, "sign", feed, "--signing-key", "a/signing.key")
        assert done.returncode == 0, done.stderr
        if stripped == "signature-deleted" and not trust:
            Path(f"{feed}.dsse").unlink()
            trust = ("--trusted-keys", "a/signing.pub")
        return ctl(tmp_path, state, "refresh", "--feed", feed, "--module", module, "--write",
                   "--allow-downgrade", "--state-file", "feeds-state.json", *trust)  # fmt: skip

    done = refresh(1, "--trusted-keys", "a/signing.pub")
    assert done.returncode == 0, done.stderr
    remembered = json.loads((tmp_path / "feeds-state.json").read_text())["feeds"]
    assert remembered["example-feed"]["signed"] is True
    # The very bytes verified before need no key again (nothing was stripped from them).
    if stripped == "no-trusted-keys":
        assert refresh(1).returncode == 0
    before = (tmp_path / "feeds-state.json").read_bytes()
    assert json.loads(before)["feeds"]["example-feed"]["signed"] is True
    done = refresh(2)
    assert done.returncode == 1, done.stdout
    assert "signature stripping" in done.stderr
    assert (tmp_path / "feeds-state.json").read_bytes() == before
    # Signed again and checked, the next version is taken.
    assert refresh(3, "--trusted-keys", "a/signing.pub").returncode == 0
