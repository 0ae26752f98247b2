"""The canary: below-floor versions are never certified, last-green never moves backwards,
and last-green is rebuilt from the chain (run as the real ``floorctl canary``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from helpers.cli import copy_host, floorctl

from floorguard._chain.chain import ChainRecord
from floorguard._maps.map_model import Advisory
from floorguard._proofs import canary

AIDER = Advisory("aider", "0.60.0", "BSA-0001", "below 0.60.0 is unsafe")


def run(tmp_path: Path, *args: str) -> Any:
    return floorctl("canary", *args, cwd=tmp_path, state=tmp_path / "state")


def records(tmp_path: Path) -> list[dict[str, Any]]:
    done = floorctl("chain", "export", cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def last_green(tmp_path: Path) -> dict[str, Any]:
    done = run(tmp_path, "last-green", "--json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


# --- the rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize("result", ["pass", "fail"])
def test_judge_refuses_a_below_floor_version_whatever_the_result(result: str) -> None:
    judged = canary.judge("aider", "0.59.9", result, AIDER, None)
    assert (judged.verdict, judged.certified, judged.floor) == ("refuse", False, "0.60.0")


@pytest.mark.parametrize("version", ["", "latest", " 0.61.0", "0.61.0\n"])
def test_judge_refuses_a_version_that_is_not_pep_440(version: str) -> None:
    assert canary.judge("aider", version, "pass", AIDER, None).verdict == "refuse"


def test_judge_certifies_a_pass_at_the_floor() -> None:
    judged = canary.judge("aider", "0.60.0", "pass", AIDER, None)
    assert (judged.verdict, judged.certified) == ("certify", True)


def test_judge_records_a_fail_and_an_older_pass_without_certifying_progress() -> None:
    green = canary.LastGreen("0.62.0", "sha256:" + "1" * 64, "2026-01-01T00:00:00.000000Z")
    assert canary.judge("aider", "0.63.0", "fail", AIDER, green).verdict == "record"
    older = canary.judge("aider", "0.61.0", "pass", AIDER, green)
    assert (older.verdict, older.certified) == ("record", True)
    assert canary.judge("aider", "0.62.0", "pass", AIDER, green).verdict == "record"
    assert canary.judge("aider", "0.62.1", "pass", AIDER, green).verdict == "certify"


def test_an_adapter_without_a_floor_can_be_certified() -> None:
    judged = canary.judge("goose", "1.0.0", "pass", None, None)
    assert (judged.verdict, judged.floor) == ("certify", None)


def _record(seq: int, **receipt: Any) -> ChainRecord:
    body = {"kind": canary.CANARY, "schema_version": 1, "ts": "2026-01-01T00:00:00Z", **receipt}
    return ChainRecord(seq, f"2026-01-01T00:00:0{seq}.000000Z", "0" * 32, canary.CANARY,
                       f"sha256:{seq:064d}", body, "", "")  # fmt: skip


def test_projection_ignores_records_that_claim_more_than_the_rules_allow() -> None:
    certify = {"adapter": "aider", "result": "pass", "certified": True, "verdict": "certify"}
    projection = canary.project(
        [
            _record(0, **certify, version="0.61.0", floor="0.60.0"),
            _record(1, **certify, version="0.59.0", floor="0.60.0"),  # below its floor
            _record(2, **certify, version="0.60.5", floor="0.60.0"),  # backwards
            _record(3, **{**certify, "result": "fail"}, version="0.70.0", floor="0.60.0"),
            _record(4, **certify, version="bogus", floor="0.60.0"),
        ]
    )
    assert projection == {
        "aider": canary.LastGreen("0.61.0", "sha256:" + "0" * 64, "2026-01-01T00:00:00.000000Z")
    }


# --- the real command ---------------------------------------------------------------------------


def test_a_canary_pass_below_the_floor_is_refused_certification(tmp_path: Path) -> None:
    done = run(tmp_path, "record", "--adapter", "aider", "--version", "0.59.0", "--result", "pass")
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("refuse: aider 0.59.0 is below the floor 0.60.0")
    (record,) = records(tmp_path)
    receipt = record["receipt"]
    assert record["event"] == "adapter.canary_receipt"
    assert (receipt["verdict"], receipt["certified"], receipt["floor"]) == (
        "refuse",
        False,
        "0.60.0",
    )
    assert receipt["floor_map_hash"].startswith("sha256:")
    assert last_green(tmp_path) == {}


def test_a_canary_pass_for_an_older_version_after_a_newer_one_moves_nothing(
    tmp_path: Path,
) -> None:
    newer = run(tmp_path, "record", "--adapter", "aider", "--version", "0.62.0", "--result", "pass")
    assert newer.returncode == 0 and newer.stdout.startswith("certify:")
    older = run(tmp_path, "record", "--adapter", "aider", "--version", "0.61.0", "--result", "pass")
    assert older.returncode == 0, older.stderr
    assert older.stdout.startswith("record: aider 0.61.0 passed but is not newer")
    chain = records(tmp_path)
    assert chain[1]["receipt"]["previous_last_green"]["version"] == "0.62.0"
    assert last_green(tmp_path) == {
        "aider": {"version": "0.62.0", "receipt_id": chain[0]["receipt_id"], "ts": chain[0]["ts"]}
    }


def test_a_failed_canary_is_recorded_and_moves_nothing(tmp_path: Path) -> None:
    done = run(tmp_path, "record", "--adapter", "claude", "--version", "9.0.0", "--result", "fail")
    assert done.returncode == 0
    assert records(tmp_path)[0]["receipt"]["verdict"] == "record"
    assert last_green(tmp_path) == {}


def test_last_green_refuses_a_tampered_chain(tmp_path: Path) -> None:
    run(tmp_path, "record", "--adapter", "aider", "--version", "0.62.0", "--result", "pass")
    db = tmp_path / "state" / "floorguard" / "chain.sqlite3"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE records SET receipt = replace(receipt, '0.62.0', '0.99.0')")
    conn.close()
    done = run(tmp_path, "last-green", "--json")
    assert done.returncode == 1
    assert "does not verify" in done.stderr
    # With --json the refusal is one JSON document too, never a partial answer.
    assert json.loads(done.stdout)["error"]["exit_status"] == 1


def test_canary_rejects_a_bad_result_as_a_usage_error(tmp_path: Path) -> None:
    done = run(tmp_path, "record", "--adapter", "aider", "--version", "1.0", "--result", "maybe")
    assert done.returncode == 2


def test_the_window_proof_accepts_real_canary_records(tmp_path: Path) -> None:
    for version, result in (("0.61.0", "pass"), ("0.59.0", "pass"), ("0.62.0", "fail")):
        run(tmp_path, "record", "--adapter", "aider", "--version", version, "--result", result)
    exported = floorctl(
        "chain", "export", "--out", "slice.jsonl", cwd=tmp_path, state=tmp_path / "state"
    )
    assert exported.returncode == 0
    key = tmp_path / "state" / "floorguard" / "chain.key"
    done = floorctl(
        "verify", "chain", "slice.jsonl", "--key-file", str(key), "--json",
        cwd=tmp_path, state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["proven"] is True


# --- bad input is refused before anything is recorded -------------------------------------------


def chain_state(tmp_path: Path) -> tuple[str, int]:
    """The chain as exported (its exact bytes) and its record count."""
    done = floorctl("chain", "export", cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    return done.stdout, len(done.stdout.splitlines())


class OneCertified(NamedTuple):
    """A host whose chain holds one certified canary run: its files, the chain as exported
    and last-green as the CLI states them."""

    files: Path
    chain: tuple[str, int]
    green: dict[str, Any]


@pytest.fixture(scope="module")
def one_certified(tmp_path_factory: pytest.TempPathFactory) -> OneCertified:
    made = tmp_path_factory.mktemp("one-certified")
    first = run(made, "record", "--adapter", "aider", "--version", "0.62.0", "--result", "pass")
    assert first.returncode == 0, first.stderr
    return OneCertified(made, chain_state(made), last_green(made))


def refused_before_recording(
    host: OneCertified, tmp_path: Path, adapter: str, version: str, message: str
) -> None:
    copy_host(host.files, tmp_path)
    before, green = host.chain, host.green
    done = run(tmp_path, "record", "--adapter", adapter, "--version", version, "--result", "pass")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("floorctl: error: ") and done.stderr.count("\n") == 1
    assert message in done.stderr
    assert chain_state(tmp_path) == before  # byte-identical: nothing was appended
    assert before[1] == 1
    assert last_green(tmp_path) == green


@pytest.mark.parametrize("adapter", ["codey", "aider-fork"])
def test_refuses_an_adapter_not_in_the_map_before_recording(
    one_certified: OneCertified, tmp_path: Path, adapter: str
) -> None:
    refused_before_recording(one_certified, tmp_path, adapter, "1.0.0", "not in the floor map")


@pytest.mark.parametrize("adapter", ["AIDER", "aider\n", " aider", "../aider", "-aider", ""])
def test_refuses_an_invalid_adapter_name_before_recording(
    one_certified: OneCertified, tmp_path: Path, adapter: str
) -> None:
    message = f"invalid adapter name {adapter!r} ([a-z0-9][a-z0-9._-]{{0,63}})"
    refused_before_recording(one_certified, tmp_path, adapter, "1.0.0", message)


@pytest.mark.parametrize("version", ["latest", "0.61.0 ", "0.70.0\n", "", "v", "1.0-", "0.7.0..1"])
def test_refuses_a_version_that_is_not_pep_440_before_recording(
    one_certified: OneCertified, tmp_path: Path, version: str
) -> None:
    refused_before_recording(one_certified, tmp_path, "aider", version, "not a PEP 440 version")


@pytest.mark.parametrize(
    ("version", "message"),
    [("1!0.1", "has an epoch"), ("0.70.0+local", "has a local segment"),
     ("2!0.70.0+x", "has an epoch")],
)  # fmt: skip
def test_refuses_an_epoch_or_local_version_that_would_freeze_last_green(
    one_certified: OneCertified, tmp_path: Path, version: str, message: str
) -> None:
    refused_before_recording(one_certified, tmp_path, "aider", version, message)
    # And a real release after it still certifies: last-green was not frozen above it.
    done = run(tmp_path, "record", "--adapter", "aider", "--version", "0.63.0", "--result", "pass")
    assert done.returncode == 0 and done.stdout.startswith("certify:")


def test_a_refused_canary_on_a_fresh_host_creates_no_chain(tmp_path: Path) -> None:
    done = run(tmp_path, "record", "--adapter", "codey", "--version", "1.0", "--result", "pass")
    assert done.returncode == 2
    assert not (tmp_path / "state" / "floorguard" / "chain.sqlite3").exists()


@pytest.mark.parametrize(
    ("version", "floor", "allowed"),
    [
        ("1!0.1", "0.60.0", False),
        ("0.70.0+local", "0.60.0", False),
        ("1!2.1", "1!2.0", True),
        ("1!1.0", "1!2.0", True),  # refused later as below the floor, not as input
        ("2.0+build.7", "2.0+build.1", True),
        ("1!2.1+x", "1!2.0", False),
        ("0!0.70.0", "0.60.0", True),  # an explicit zero epoch orders as none
    ],
)
def test_an_epoch_or_local_segment_is_input_only_when_the_floor_has_one(
    version: str, floor: str, allowed: bool
) -> None:
    advisory = Advisory("aider", floor, "BSA-0001", "note")
    assert (canary.input_problem("aider", version, advisory) is None) is allowed


def test_an_old_epoch_certification_in_the_chain_does_not_freeze_last_green() -> None:
    certify = {"adapter": "aider", "result": "pass", "certified": True, "verdict": "certify"}
    projection = canary.project(
        [
            _record(0, **certify, version="0.61.0", floor="0.60.0"),
            _record(1, **certify, version="1!0.1", floor="0.60.0"),  # an old epoch certification
            _record(2, **certify, version="0.70.0+local", floor="0.60.0"),
            _record(3, **certify, version="0.62.0", floor="0.60.0"),
        ]
    )
    assert projection["aider"].version == "0.62.0"
