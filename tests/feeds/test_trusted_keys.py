"""Trusted keys, detached signatures and key rotation: what is trusted, and every way a
signature or a trusted-keys file is refused."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedserver import envelope, floorctl_here, new_key, trusted_file, v2_feed

from floorctl import keys, trust
from floorctl.errors import TrustError
from floorguard._crypto import dsse
from floorguard._crypto.trust import parse_trusted_keys, verify_detached
from floorguard.errors import VerificationError

FEED_TYPE = trust.FEED_PAYLOAD_TYPE


@pytest.fixture
def three(tmp_path: Path) -> list[tuple[keys.Ed25519PrivateKey, Path, Path]]:
    return [new_key(tmp_path / name) for name in ("a", "b", "c")]


def test_a_pem_public_key_is_trusted_with_threshold_one(three: list) -> None:
    _, _, public = three[0]
    trusted = parse_trusted_keys(public.read_bytes(), str(public))
    assert trusted.threshold == 1
    assert trusted.key_ids == {dsse.key_id(keys.load_public(public))}


def test_a_json_document_names_keys_and_threshold(three: list, tmp_path: Path) -> None:
    path = trusted_file(tmp_path / "t.json", 2, *(p for _, _, p in three))
    trusted = trust.load_trusted_keys(path)
    assert (trusted.threshold, len(trusted.keys)) == (2, 3)


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"threshold": 1, "keys": []}, "trusts no key"),
        ({"threshold": 0, "keys": ["A"]}, "at least 1"),
        ({"threshold": True, "keys": ["A"]}, "at least 1"),
        ({"threshold": 3, "keys": ["A", "B"]}, "more than the 2 keys"),
        ({"threshold": 1, "keys": ["A", "A"]}, "listed twice"),
        ({"threshold": 1, "keys": ["A"], "extra": 1}, "exactly"),
        ({"keys": ["A"]}, "exactly"),
        ({"threshold": 1, "keys": "A"}, "list of PEM strings"),
    ],
)
def test_refuses_malformed_trusted_keys(three: list, document: dict, fragment: str) -> None:
    pems = {"A": three[0][2].read_text(), "B": three[1][2].read_text()}
    if isinstance(document.get("keys"), list):
        document = {**document, "keys": [pems[k] for k in document["keys"]]}
    elif isinstance(document.get("keys"), str):
        document = {**document, "keys": pems["A"]}
    with pytest.raises(VerificationError, match=fragment):
        parse_trusted_keys(json.dumps(document).encode(), "t.json")


def test_refuses_a_trusted_key_holding_more_than_one_key_or_text_after_it(three: list) -> None:
    # PEM loading reads the first block alone: two keys in a PEM file would trust one.
    a, b = three[0][2].read_text(), three[1][2].read_text()
    with pytest.raises(VerificationError, match=r"^t\.pem: holds more than one key"):
        parse_trusted_keys((a + b).encode(), "t.pem")
    with pytest.raises(VerificationError, match=r"^t\.pem: holds text after its key"):
        parse_trusted_keys((a + "junk\n").encode(), "t.pem")
    document = {"threshold": 1, "keys": [a, b + "junk"]}
    with pytest.raises(VerificationError, match=r"^t.json: keys\[1\]: holds text after its key"):
        parse_trusted_keys(json.dumps(document).encode(), "t.json")
    document = {"threshold": 2, "keys": [a + b]}
    with pytest.raises(VerificationError, match=r"^t.json: keys\[0\]: holds more than one key"):
        parse_trusted_keys(json.dumps(document).encode(), "t.json")
    trusted = parse_trusted_keys(json.dumps({"threshold": 2, "keys": [a, b]}).encode(), "t.json")
    assert (trusted.threshold, len(trusted.keys)) == (2, 2)


def test_refuses_duplicate_json_keys_in_a_trusted_keys_file(three: list) -> None:
    pem = json.dumps(three[0][2].read_text())
    data = f'{{"threshold": 1, "threshold": 1, "keys": [{pem}]}}'.encode()
    with pytest.raises(VerificationError, match="duplicate"):
        parse_trusted_keys(data, "t.json")


def test_the_same_key_in_two_encodings_counts_once(three: list) -> None:
    pem = three[0][2].read_text()
    with pytest.raises(VerificationError, match="listed twice"):
        parse_trusted_keys(json.dumps({"threshold": 2, "keys": [pem, pem + "\n"]}).encode(), "t")


def test_refuses_duplicate_signatures_padding_the_threshold(three: list, tmp_path: Path) -> None:
    (a, _, pa), (_, _, pb) = three[0], three[1]
    trusted = trust.load_trusted_keys(trusted_file(tmp_path / "t.json", 2, pa, pb))
    data = v2_feed(1)
    with pytest.raises(VerificationError, match="only 1 of the required 2"):
        verify_detached(data, envelope(data, a, a, a), trusted, payload_type=FEED_TYPE)


def test_a_threshold_of_distinct_keys_verifies(three: list, tmp_path: Path) -> None:
    (a, _, pa), (b, _, pb), (_, _, pc) = three
    trusted = trust.load_trusted_keys(trusted_file(tmp_path / "t.json", 2, pa, pb, pc))
    data = v2_feed(1)
    signers = verify_detached(data, envelope(data, a, b), trusted, payload_type=FEED_TYPE)
    assert len(signers) == 2


def test_refuses_a_signature_over_other_bytes(three: list) -> None:
    a, _, pa = three[0]
    trusted = trust.load_trusted_keys(pa)
    with pytest.raises(VerificationError, match="covers different bytes"):
        verify_detached(v2_feed(2), envelope(v2_feed(1), a), trusted, payload_type=FEED_TYPE)


def test_check_signature_never_ignores_a_present_signature(three: list) -> None:
    a, _, pa = three[0]
    stranger = three[1][0]
    data = v2_feed(1)
    # With trusted keys (and so under --require-signed) a signature must verify.
    trusted = trust.load_trusted_keys(pa)
    for required in (False, True):
        with pytest.raises(TrustError, match="bad signature"):
            trust.check_signature(
                data, envelope(data, stranger), trusted, require_signed=required, source="f"
            )
    # Without them what needs no key is still checked: the envelope, its type, its bytes.
    for bad in (b"{}", envelope(v2_feed(2), a), envelope(data, a, payload_type="text/plain")):
        with pytest.raises(TrustError, match="bad signature"):
            trust.check_signature(data, bad, None, require_signed=False, source="f")
    # A well-formed signature of these bytes vouches for nothing then: unsigned, unchecked.
    unjudged = trust.check_signature(
        data, envelope(data, a), None, require_signed=False, source="f"
    )
    assert not unjudged.signed and unjudged.unchecked
    with pytest.raises(TrustError):
        trust.check_signature(data, envelope(data, a), None, require_signed=True, source="f")
    with pytest.raises(TrustError, match="unsigned"):
        trust.check_signature(data, None, None, require_signed=True, source="f")
    assert not trust.check_signature(data, None, None, require_signed=False, source="f").signed


def test_sign_adds_signatures_until_a_threshold_is_reached(three: list, tmp_path: Path) -> None:
    (_, ka, pa), (_, kb, pb) = three[0], three[1]
    feed = tmp_path / "feed.json"
    feed.write_bytes(v2_feed(1))
    for key in (ka, kb, kb):
        done = floorctl_here("sign", str(feed), "--signing-key", str(key), home=tmp_path / "h")
        assert done.returncode == 0, done.stderr
    signed = Path(str(feed) + ".dsse").read_bytes()
    assert len(dsse.parse_envelope(signed).signatures) == 2  # kb signed twice, counted once
    trusted = trust.load_trusted_keys(trusted_file(tmp_path / "t.json", 2, pa, pb))
    assert len(verify_detached(feed.read_bytes(), signed, trusted, payload_type=FEED_TYPE)) == 2


def test_sign_replaces_a_signature_of_older_bytes(three: list, tmp_path: Path) -> None:
    (_, ka, _) = three[0]
    feed = tmp_path / "feed.json"
    Path(str(feed) + ".dsse").write_bytes(envelope(v2_feed(1), three[1][0]))
    feed.write_bytes(v2_feed(2))
    assert (
        floorctl_here("sign", str(feed), "--signing-key", str(ka), home=tmp_path / "h").returncode
        == 0
    )
    signed = dsse.parse_envelope(Path(str(feed) + ".dsse").read_bytes())
    assert signed.payload == v2_feed(2) and len(signed.signatures) == 1


# --- rotation ------------------------------------------------------------------------------------


def _sign_rotation(new: Path, key: keys.Ed25519PrivateKey) -> None:
    """NEW.dsse: ``new`` signed by ``key`` as a trusted-keys rotation."""
    Path(str(new) + ".dsse").write_bytes(
        trust.sign_file(new.read_bytes(), None, key, trust.TRUSTED_KEYS_PAYLOAD_TYPE)
    )


def _installed(home: Path, public: Path) -> Path:
    """The trusted keys installed in ``home``, holding the one key ``public``."""
    installed = trust.installed_path({"FLOORCTL_HOME": str(home)})
    installed.parent.mkdir(parents=True)
    installed.write_bytes(public.read_bytes())
    return installed


def test_rotation_installs_new_keys_signed_by_the_old_ones(three: list, tmp_path: Path) -> None:
    (_, old_key, old_pub), (_, _, new_pub) = three[0], three[1]
    home = tmp_path / "home"
    new = trusted_file(tmp_path / "new.json", 1, new_pub)
    assert (
        floorctl_here(
            "sign", str(new), "--kind", "trusted-keys", "--signing-key", str(old_key), home=home
        ).returncode
        == 0
    )
    done = floorctl_here("trust", "rotate", "--current", str(old_pub), "--new", str(new), home=home)
    assert done.returncode == 0, done.stderr
    installed = trust.resolve_trusted_keys(None, {"FLOORCTL_HOME": str(home)})
    assert installed is not None
    assert installed.key_ids == {dsse.key_id(keys.load_public(new_pub))}


def test_refuses_rotation_signed_only_by_the_new_keys(three: list, tmp_path: Path) -> None:
    (_, _, old_pub), (_, new_key_path, new_pub) = three[0], three[1]
    home = tmp_path / "home"
    new = trusted_file(tmp_path / "new.json", 1, new_pub)
    floorctl_here(
        "sign", str(new), "--kind", "trusted-keys", "--signing-key", str(new_key_path), home=home
    )
    done = floorctl_here("trust", "rotate", "--current", str(old_pub), "--new", str(new), home=home)
    assert done.returncode == 1
    assert "rotation refused" in done.stderr
    assert not trust.installed_path({"FLOORCTL_HOME": str(home)}).exists()


def test_refuses_rotation_without_a_signature(three: list, tmp_path: Path) -> None:
    new = trusted_file(tmp_path / "new.json", 1, three[1][2])
    with pytest.raises(TrustError, match="must be signed by the current ones"):
        trust.rotate(trust.load_trusted_keys(three[0][2]), new, {"FLOORCTL_HOME": str(tmp_path)})


def test_refuses_a_feed_signature_used_as_a_rotation(three: list, tmp_path: Path) -> None:
    # The payload type binds what a signature is for: a feed signature cannot authorise keys.
    old_key, _, old_pub = three[0]
    new = trusted_file(tmp_path / "new.json", 1, three[1][2])
    Path(str(new) + ".dsse").write_bytes(envelope(new.read_bytes(), old_key))
    with pytest.raises(TrustError, match="payloadType"):
        trust.rotate(trust.load_trusted_keys(old_pub), new, {"FLOORCTL_HOME": str(tmp_path)})


def test_refuses_rotation_whose_current_keys_are_not_the_installed_ones(
    three: list, tmp_path: Path
) -> None:
    # With keys installed, a caller-chosen CURRENT (an attacker's own key, which signed the
    # attacker's NEW) must not stand in for them: the keys in force authorise a rotation.
    (_, _, a_pub), (m_key, _, m_pub), (_, _, x_pub) = three
    home = tmp_path / "home"
    installed = _installed(home, a_pub)
    mallory_next = trusted_file(tmp_path / "mallory-next.json", 1, m_pub, x_pub)
    _sign_rotation(mallory_next, m_key)
    done = floorctl_here(
        "trust", "rotate", "--current", str(m_pub), "--new", str(mallory_next), home=home
    )
    assert done.returncode == 1
    assert "not the trusted keys in force" in done.stderr
    assert str(installed) in done.stderr
    assert installed.read_bytes() == a_pub.read_bytes()


def test_refuses_rotation_naming_the_installed_keys_with_a_lower_threshold(
    three: list, tmp_path: Path
) -> None:
    # Same keys, threshold 1 instead of the installed 2: one key alone must not rotate.
    (a_key, _, a_pub), (_, _, b_pub), (_, _, c_pub) = three
    home = tmp_path / "home"
    installed = trust.installed_path({"FLOORCTL_HOME": str(home)})
    installed.parent.mkdir(parents=True)
    trusted_file(installed, 2, a_pub, b_pub)
    before = installed.read_bytes()
    lowered = trusted_file(tmp_path / "lowered.json", 1, a_pub, b_pub)
    new = trusted_file(tmp_path / "new.json", 1, c_pub)
    _sign_rotation(new, a_key)
    with pytest.raises(TrustError, match="not the trusted keys in force"):
        trust.rotate(trust.load_trusted_keys(lowered), new, {"FLOORCTL_HOME": str(home)})
    assert installed.read_bytes() == before


def test_rotation_from_the_installed_keys_in_another_spelling_is_accepted(
    three: list, tmp_path: Path
) -> None:
    # CURRENT is judged by its keys and threshold, not its bytes: with b installed as a JSON
    # document, b's PEM file names it, and a second rotation after a first goes through.
    (a_key, _, a_pub), (b_key, _, b_pub), (_, _, c_pub) = three
    home = tmp_path / "home"
    environ = {"FLOORCTL_HOME": str(home)}
    for old_key, new_pub in ((a_key, b_pub), (b_key, c_pub)):
        new = trusted_file(tmp_path / f"{new_pub.parent.name}.json", 1, new_pub)
        _sign_rotation(new, old_key)
        current = a_pub if old_key is a_key else b_pub
        trust.rotate(trust.load_trusted_keys(current), new, environ)
    installed = trust.resolve_trusted_keys(None, environ)
    assert installed is not None
    assert installed.key_ids == {dsse.key_id(keys.load_public(c_pub))}


def test_a_rotation_waits_for_another_and_is_judged_against_what_it_installed(
    three: list, tmp_path: Path
) -> None:
    # Two rotations from the same installed keys (a -> b, a -> c), each signed by a: the
    # one that runs second must be judged against c, the keys the first installed, not
    # against a, read before the first had finished. Here the first holds the lock while
    # the second starts, and installs c before letting it go.
    (a_key, _, a_pub), (_, _, b_pub), (_, _, c_pub) = three
    home = tmp_path / "home"
    installed = _installed(home, a_pub)
    to_b = trusted_file(tmp_path / "to-b.json", 1, b_pub)
    _sign_rotation(to_b, a_key)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOORGUARD_", "FLOORCTL_"))}
    env["FLOORCTL_HOME"] = str(home)
    lock = installed.parent / f".{installed.name}.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        second = subprocess.Popen(
            [sys.executable, "-m", "floorctl", "trust", "rotate", "--current", str(a_pub),
             "--new", str(to_b)],
            env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert second.stderr is not None
        assert "waiting for another trust rotate" in second.stderr.readline()
        installed.write_bytes(c_pub.read_bytes())  # what the first rotation installed
    assert second.wait(timeout=60) == 1
    assert "not the trusted keys in force" in second.stderr.read()
    assert installed.read_bytes() == c_pub.read_bytes()


def test_refuses_rotation_while_the_installed_keys_are_a_dangling_link(
    three: list, tmp_path: Path
) -> None:
    # Unreadable keys in force are not "none installed": nothing can say CURRENT is them.
    (a_key, _, a_pub), (_, _, b_pub) = three[0], three[1]
    home = tmp_path / "home"
    installed = trust.installed_path({"FLOORCTL_HOME": str(home)})
    installed.parent.mkdir(parents=True)
    installed.symlink_to(tmp_path / "gone.json")
    new = trusted_file(tmp_path / "new.json", 1, b_pub)
    _sign_rotation(new, a_key)
    done = floorctl_here("trust", "rotate", "--current", str(a_pub), "--new", str(new), home=home)
    assert done.returncode == 1
    assert "trusted-keys.json" in done.stderr
    assert installed.is_symlink() and not installed.exists()


@pytest.mark.parametrize("kind", ["feed", "trusted-keys"])
def test_sign_refuses_to_replace_a_signature_of_the_same_bytes_as_something_else(
    three: list, tmp_path: Path, kind: str
) -> None:
    """A published map's ``floor-map.json.dsse`` signs its bytes as a floor map: signing them
    again as a feed replaced the publisher's envelope, and every host stopped taking the map.
    Refused, the envelope left as it was."""
    (_, ka, _), (other, _, _) = three[0], three[1]
    target = tmp_path / "floor-map.json"
    target.write_bytes(b'{"map": 1}\n')
    signature = Path(str(target) + ".dsse")
    published = dsse.sign("application/vnd.floorguard.floor-map+json", target.read_bytes(), other)
    signature.write_bytes(published.to_bytes())
    before = signature.read_bytes()
    done = floorctl_here(
        "sign", str(target), "--kind", kind, "--signing-key", str(ka), home=tmp_path / "h"
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "floor-map+json" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert signature.read_bytes() == before
