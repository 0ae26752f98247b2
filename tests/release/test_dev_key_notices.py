"""Signing with the local development key: the README's quick start survives a shipped feed
signed with it, and every command that signs with it says so on stderr, every time."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from helpers.cli import floorctl
from helpers.quickstart import clean_copy, quick_start_commands

from floorguard._crypto import dsse

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

REPO = Path(__file__).resolve().parents[2]
MODULE = Path("generated/floorguard/floor_map.py")
FEED = "feeds/example.v1.json"
NOTICE = "floorctl: signing with "
DEV = "development signing key"


def dev_key_notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(NOTICE) and DEV in line]


def predicate(receipt: Path) -> dict[str, object]:
    statement = json.loads(dsse.parse_envelope(receipt.read_bytes()).payload)
    found: dict[str, object] = statement["predicate"]
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The shipped feed and floor-map module, in a folder of their own."""
    root = tmp_path / "project"
    for name in (FEED, str(MODULE)):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes((REPO / name).read_bytes())
    return root


def test_quick_start_works_after_signing_the_shipped_feed_with_the_dev_key(
    tmp_path: Path,
) -> None:
    clone, state = clean_copy(tmp_path / "clone"), tmp_path / "state"
    signed = floorctl("sign", FEED, cwd=clone, state=state)
    assert signed.returncode == 0, signed.stderr
    assert (clone / f"{FEED}.dsse").is_file()
    assert len(dev_key_notices(signed.stderr)) == 1

    # The main job's steps after the install: its scratch folder removed, init, refresh...
    steps = [shlex.split(step) for step in quick_start_commands()[0].split(" && ")[1:]]
    assert steps[0][:2] == ["rm", "-rf"]
    refresh = next(step for step in steps if step[:2] == ["floorctl", "refresh"])
    for step in steps[1:]:
        done = floorctl(*step[1:], cwd=clone, state=state)
        assert done.returncode == 0, done.stderr
        if step is refresh:
            said = done.stderr
    # Nothing is trusted here, so the signature vouches for nothing, and that is said.
    assert f"{FEED}.dsse: signature not checked: no trusted keys are configured" in said
    assert len(dev_key_notices(said)) == 1  # the receipt is signed with it
    receipt = clone / refresh[refresh.index("--receipt-out") + 1]
    (feed,) = [f for f in predicate(receipt)["feeds"] if f["source"] == FEED]  # type: ignore[union-attr]
    assert "signed_by" not in feed


def test_a_dev_key_signature_is_refused_where_other_keys_are_trusted(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    assert floorctl("sign", FEED, cwd=project, state=state).returncode == 0
    other = floorctl("keygen", "--out", "release", cwd=project, state=state)
    assert other.returncode == 0, other.stderr
    refused = floorctl(
        "refresh", "--feed", FEED, "--trusted-keys", "release/signing.pub", cwd=project, state=state
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"floorctl: error: {FEED}.dsse: bad signature")
    # --require-signed refuses it too (before it even looks at the schema version).
    required = floorctl(
        "refresh", "--feed", FEED, "--trusted-keys", "release/signing.pub", "--require-signed",
        cwd=project, state=state,
    )  # fmt: skip
    assert required.returncode == 1
    assert "bad signature" in required.stderr
    # Trusting the development key's public half makes the same signature count.
    dev_public = state / "floorctl" / "dev-key" / "signing.pub"
    trusted = floorctl(
        "refresh", "--feed", FEED, "--trusted-keys", dev_public, "--write", "--receipt-out",
        "r.json", cwd=project, state=state,
    )  # fmt: skip
    assert trusted.returncode == 0, trusted.stderr
    assert "signature not checked" not in trusted.stderr
    (feed,) = predicate(project / "r.json")["feeds"]  # type: ignore[misc]
    assert len(feed["signed_by"]) == 1


def test_refuses_a_broken_signature_beside_a_local_feed_without_trusted_keys(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    signature = project / f"{FEED}.dsse"
    assert floorctl("sign", FEED, cwd=project, state=state).returncode == 0
    feed = project / FEED
    feed.write_bytes(feed.read_bytes().replace(b"\n", b"\n ", 1))  # signed bytes changed
    stale = floorctl("refresh", "--feed", FEED, cwd=project, state=state)
    assert stale.returncode == 1
    assert "covers different bytes" in stale.stderr
    signature.write_text("{}")
    broken = floorctl("refresh", "--feed", FEED, cwd=project, state=state)
    assert broken.returncode == 1
    assert broken.stderr.startswith(f"floorctl: error: {FEED}.dsse: bad signature")


def _chain_with_a_record(project: Path, state: Path) -> None:
    done = floorctl("refresh", "--feed", FEED, "--write", "--anchor", cwd=project, state=state)
    assert done.returncode == 0, done.stderr
    assert not dev_key_notices(done.stderr)  # anchoring alone signs nothing


SIGNING_COMMANDS = {
    "sign": ("sign", FEED),
    "publish": ("publish", "--out", "published", "--module", str(MODULE)),
    "refresh --receipt-out": (
        "refresh",
        "--feed",
        FEED,
        "--write",
        "--receipt-out",
        "receipt.json",
    ),
    "chain checkpoint": ("chain", "checkpoint", "--out", "checkpoint.txt"),
    "chain export --checkpoint-out": (
        "chain",
        "export",
        "--out",
        "slice.jsonl",
        "--checkpoint-out",
        "checkpoint.txt",
    ),
}
# build's notice is specified with the rest of build (it needs a whole floorguard project and
# an update receipt): tests/release/test_build.py::test_building_with_the_development_key_says_so.


@pytest.mark.parametrize("name", list(SIGNING_COMMANDS))
def test_every_command_signing_with_the_dev_key_says_so_every_time(
    name: str, project: Path, tmp_path: Path
) -> None:
    args = SIGNING_COMMANDS[name]
    state = tmp_path / "state"
    if args[0] == "chain":
        _chain_with_a_record(project, state)
    first = floorctl(*args, cwd=project, state=state)
    assert first.returncode == 0, first.stderr
    (created,) = dev_key_notices(first.stderr)
    assert "created now" in created
    dev_key = state / "floorctl" / "dev-key" / "signing.key"
    assert str(dev_key) in created and "--signing-key for releases" in created
    # Not only when it is made: each later use says so again.
    again = floorctl(*args, cwd=project, state=state)
    assert again.returncode == 0, again.stderr
    (used,) = dev_key_notices(again.stderr)
    assert "created" not in used and str(dev_key) in used
    # A key of one's own is not announced, whether given by flag or by the environment.
    assert floorctl("keygen", "--out", "keys", cwd=project, state=state).returncode == 0
    own = floorctl(*args, "--signing-key", "keys/signing.key", cwd=project, state=state)
    assert own.returncode == 0, own.stderr
    assert not dev_key_notices(own.stderr)
    by_env = floorctl(
        *args, cwd=project, state=state, FLOORCTL_SIGNING_KEY=str(project / "keys/signing.key")
    )
    assert by_env.returncode == 0, by_env.stderr
    assert not dev_key_notices(by_env.stderr)


def test_a_publish_or_sign_that_refuses_makes_and_announces_no_key(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    dev_key = state / "floorctl" / "dev-key" / "signing.key"
    (project / "broken.py").write_text("this is not a floor-map module\n", encoding="utf-8")
    cases = {
        "an unreadable module": ("publish", "--out", "published", "--module", "broken.py"),
        "a missing module": ("publish", "--out", "published", "--module", "absent.py"),
        "a missing file to sign": ("sign", "absent.json"),
    }
    for what, args in cases.items():
        refused = floorctl(*args, cwd=project, state=state)
        assert refused.returncode != 0, what
        assert not dev_key_notices(refused.stderr), (what, refused.stderr)
        assert not dev_key.exists(), what
    # A publish refused as a rollback signs nothing either (the key exists by then): an
    # empty map, version 0, over the shipped map's version 1.
    first = floorctl(*SIGNING_COMMANDS["publish"], cwd=project, state=state)
    assert first.returncode == 0, first.stderr
    assert floorctl("init", "--module", "empty.py", cwd=project, state=state).returncode == 0
    refused = floorctl("publish", "--out", "published", "--module", "empty.py",
                       cwd=project, state=state)  # fmt: skip
    assert refused.returncode != 0, refused.stderr
    assert "would roll hosts back" in refused.stderr
    assert not dev_key_notices(refused.stderr), refused.stderr
