"""The audit chain store: record format, appends, the key file, slices, and refusals."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from helpers.chain_support import (
    CANARY,
    SPAWN,
    execute,
    export_lines,
    filled_chain,
    receipt,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from floorguard._base._canonical import ZERO_DIGEST, content_address
from floorguard._base._time import format_ts, is_chain_ts
from floorguard._base.state import state_home, state_paths
from floorguard._chain.chain import EVENTS, AuditChain, ChainRecord, canonical_json
from floorguard._proofs.slice_verify import verify_slice
from floorguard.errors import CanonicalizationError, ChainError, ChainWriteError, KeyFileError


def _key(folder: Path) -> bytes:
    return bytes.fromhex((folder / "chain.key").read_text().strip())


def _count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()


# --- record format ---------------------------------------------------------------------------


def test_record_digest_and_mac_follow_the_documented_definition(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 3)
    key = _key(tmp_path)
    lines = [json.loads(line) for line in export_lines(chain)]
    previous = ZERO_DIGEST
    for line in lines:
        body = {name: line[name] for name in ("seq", "ts", "chain_id", "event", "receipt_id")}
        body |= {"receipt": line["receipt"], "prev": line["prev"]}
        canonical = rfc8785.dumps(body)
        assert line["prev"] == previous
        assert (
            line["receipt_id"]
            == "sha256:" + hashlib.sha256(rfc8785.dumps(line["receipt"])).hexdigest()
        )
        assert line["mac"] == hmac.new(key, canonical, hashlib.sha256).hexdigest()
        previous = "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert chain.head() is not None
    assert chain.head().digest() == previous  # type: ignore[union-attr]


def test_export_lines_are_the_canonical_json_of_each_record(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 4)
    lines = list(chain.export_lines())
    assert lines == [record.to_json_line() for record in chain.records()]
    assert lines == [rfc8785.dumps(json.loads(line)).decode() for line in lines]
    assert all(list(json.loads(line)) == sorted(ChainRecord.__dataclass_fields__) for line in lines)


def test_records_are_contiguous_from_genesis_in_one_chain(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 5)
    records = list(chain.records())
    assert [r.seq for r in records] == [0, 1, 2, 3, 4]
    assert records[0].prev == ZERO_DIGEST
    assert all(b.prev == a.digest() for a, b in itertools.pairwise(records))
    assert len({r.chain_id for r in records}) == 1
    assert len(records[0].chain_id) == 32
    conn = sqlite3.connect(tmp_path / "chain.sqlite3")
    stored = conn.execute("SELECT value FROM meta WHERE key = 'chain_id'").fetchone()[0]
    conn.close()
    assert stored == records[0].chain_id


def test_append_returns_the_record_it_made_durable(tmp_path: Path) -> None:
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    made = chain.append(SPAWN, receipt(SPAWN, adapter="aider", verdict="refuse"))
    chain.close()
    reopened = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    assert reopened.head() == made
    assert made.receipt_id == content_address(made.receipt)
    assert made.mac_matches(_key(tmp_path))


def test_timestamps_never_go_backwards_when_the_clock_does(tmp_path: Path) -> None:
    stamps = iter(["2026-01-01T00:00:05.000000Z", "2026-01-01T00:00:01.000000Z"])
    chain = AuditChain(
        tmp_path / "chain.sqlite3", tmp_path / "chain.key", clock=lambda: next(stamps)
    )
    chain.append(CANARY, receipt())
    second = chain.append(CANARY, receipt())
    assert second.ts == "2026-01-01T00:00:05.000000Z"


offsets = st.timedeltas(min_value=-timedelta(hours=23, minutes=59),
                        max_value=timedelta(hours=23, minutes=59)).map(timezone)  # fmt: skip


@settings(max_examples=300)
@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets)
)
def test_timestamps_are_written_in_utc_in_one_fixed_form(moment: datetime) -> None:
    utc = moment.astimezone(UTC)
    written = format_ts(moment)
    assert written == (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond:06d}Z"
    )
    assert is_chain_ts(written)


# --- what append refuses ----------------------------------------------------------------------


def _lists_in_lists(depth: int) -> list[object]:
    """``depth`` lists, each inside the next (built without recursion)."""
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("event", "bad_receipt", "why"),
    [
        ("adapter.shell_command", {"kind": "adapter.shell_command"}, "unknown event"),
        (CANARY, {"kind": SPAWN, "schema_version": 1, "ts": "2026-01-01T00:00:00Z"}, "kind"),
        (CANARY, {"kind": CANARY, "ts": "2026-01-01T00:00:00Z"}, "schema_version"),
        (CANARY, {"kind": CANARY, "schema_version": True, "ts": "2026-01-01T00:00:00Z"}, "schema"),
        (CANARY, {"kind": CANARY, "schema_version": 1}, "ts"),
        (CANARY, {"kind": CANARY, "schema_version": 1, "ts": "yesterday"}, "ts"),
        (
            CANARY,
            {
                "kind": CANARY,
                "schema_version": 1,
                "ts": "2026-01-01T00:00:00Z",
                "score": float("nan"),
            },
            "canonical",
        ),
        (
            CANARY,
            {"kind": CANARY, "schema_version": 1, "ts": "2026-01-01T00:00:00Z", "big": 2**60},
            "exceeds",
        ),
        (  # under 2^20 characters, over 2^20 bytes: the cap counts bytes
            CANARY,
            {
                "kind": CANARY,
                "schema_version": 1,
                "ts": "2026-01-01T00:00:00Z",
                "text": "\U0001f600" * 262200,
            },
            "exceeds 1048576 bytes",
        ),
        (  # its record line would nest 201 levels: more than verify chain reads
            CANARY,
            {
                "kind": CANARY,
                "schema_version": 1,
                "ts": "2026-01-01T00:00:00Z",
                "z": _lists_in_lists(199),
            },
            "nests deeper than 199 levels",
        ),
        (  # deeper than Python's recursion reaches: refused, not a RecursionError
            CANARY,
            {
                "kind": CANARY,
                "schema_version": 1,
                "ts": "2026-01-01T00:00:00Z",
                "z": _lists_in_lists(990),
            },
            "nests deeper than 199 levels",
        ),
    ],
)
def test_refuses_malformed_receipts_and_unknown_events(
    tmp_path: Path, event: str, bad_receipt: dict[str, Any], why: str
) -> None:
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(ChainWriteError, match="refusing to append") as caught:
        chain.append(event, bad_receipt)
    assert why in str(caught.value) or why == "canonical"
    assert not (tmp_path / "chain.key").exists()
    assert not (tmp_path / "chain.sqlite3").exists()


def test_refuses_a_receipt_that_is_not_an_object(tmp_path: Path) -> None:
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(ChainWriteError, match="not a JSON object"):
        chain.append(CANARY, ["kind", CANARY])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("changed", 0, "receipt changed is not a JSON boolean (0)"),
        ("new_map_version", True, "update receipt new_map_version is not a map version"),
        ("feeds", [{"schema_version": "1"}], "receipt feeds[0].schema_version is not a JSON "
                                             'integer ("1")'),
    ],
)  # fmt: skip
def test_a_receipt_verify_chain_would_refuse_is_never_appended(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    from helpers.proof_support import MAP_V1, update_receipt

    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    chain.append("adapter.floor_update_receipt", update_receipt(MAP_V1))
    with pytest.raises(ChainWriteError, match=rf"refusing to append: {re.escape(problem)}"):
        chain.append("adapter.floor_update_receipt", {**update_receipt(MAP_V1), field: value})
    assert len(list(chain.records())) == 1


def test_events_are_exactly_the_four_receipt_kinds() -> None:
    assert (
        frozenset(
            {
                "adapter.spawn_preflight_receipt",
                "adapter.version_posture",
                "adapter.floor_update_receipt",
                "adapter.canary_receipt",
            }
        )
        == EVENTS
    )


# --- the key file ------------------------------------------------------------------------------


def test_key_is_created_with_mode_0600_on_the_first_append_only(tmp_path: Path) -> None:
    home = tmp_path / "state"
    chain = AuditChain.from_env({"FLOORGUARD_HOME": str(home)})
    assert chain.head() is None
    assert list(chain.records()) == []
    assert not home.exists()
    chain.append(CANARY, receipt())
    key_file = home / "chain.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    text = key_file.read_text()
    assert len(text) == 65 and text.endswith("\n")
    assert int(text, 16) >= 0
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "chain.sqlite3").stat().st_mode) == 0o600


def test_reading_commands_never_create_a_key(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 2)
    (tmp_path / "chain.key").unlink()
    list(chain.export_lines())
    chain.head()
    assert not (tmp_path / "chain.key").exists()


def test_honours_floorguard_chain_key_file(tmp_path: Path) -> None:
    elsewhere = tmp_path / "secrets" / "my.key"
    elsewhere.parent.mkdir()
    env = {"FLOORGUARD_HOME": str(tmp_path / "home"), "FLOORGUARD_CHAIN_KEY_FILE": str(elsewhere)}
    chain = AuditChain.from_env(env)
    record = chain.append(CANARY, receipt())
    assert elsewhere.exists()
    assert not (tmp_path / "home" / "chain.key").exists()
    assert record.mac_matches(bytes.fromhex(elsewhere.read_text().strip()))


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n",
        b"ab" * 31 + b"\n",
        b"ab" * 33,
        b"zz" * 32,
        b"AB" * 32,
        b"ab" * 32 + b"\n\n",
        b" " + b"ab" * 32,
    ],
    ids=["empty", "newline", "short", "long", "non-hex", "uppercase", "two-newlines", "space"],
)
def test_refuses_a_key_file_that_is_not_exactly_a_32_byte_key(
    tmp_path: Path, content: bytes
) -> None:
    key_file = tmp_path / "chain.key"
    key_file.write_bytes(content)
    key_file.chmod(0o600)
    chain = AuditChain(tmp_path / "chain.sqlite3", key_file)
    with pytest.raises(KeyFileError, match="chain key file"):
        chain.append(CANARY, receipt())
    assert _count(tmp_path / "chain.sqlite3") == 0


def test_refuses_a_key_file_readable_by_group_or_others(tmp_path: Path) -> None:
    key_file = tmp_path / "chain.key"
    key_file.write_text("ab" * 32 + "\n")
    key_file.chmod(0o640)
    chain = AuditChain(tmp_path / "chain.sqlite3", key_file)
    with pytest.raises(KeyFileError, match="chmod 600"):
        chain.append(CANARY, receipt())


def test_refuses_a_key_path_that_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "chain.key").mkdir()
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(KeyFileError):
        chain.append(CANARY, receipt())


def test_refuses_to_mint_a_new_key_for_a_chain_that_has_records(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 2)
    (tmp_path / "chain.key").unlink()
    with pytest.raises(KeyFileError, match="restore the key"):
        chain.append(CANARY, receipt())
    assert not (tmp_path / "chain.key").exists()
    assert _count(tmp_path / "chain.sqlite3") == 2


def test_refuses_to_append_with_a_replaced_key(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 2)
    (tmp_path / "chain.key").write_text("cd" * 32 + "\n")
    with pytest.raises(ChainWriteError, match="does not verify with the key"):
        chain.append(CANARY, receipt())
    assert _count(tmp_path / "chain.sqlite3") == 2


def test_a_chain_started_afresh_with_a_new_key_is_maced_with_it_by_the_same_object(
    tmp_path: Path,
) -> None:
    # The object that MACed with the old key keeps nothing of it for the new chain.
    chain = filled_chain(tmp_path, 2)
    for name in ("chain.sqlite3", "chain.sqlite3-wal", "chain.sqlite3-shm", "chain.key"):
        (tmp_path / name).unlink(missing_ok=True)
    chain.append(CANARY, receipt())
    chain.append(CANARY, receipt())
    report = verify_slice(export_lines(chain), key=_key(tmp_path))
    assert report.intact, report.integrity_errors


def test_notices_a_key_file_opened_up_after_records_were_written(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 2)
    (tmp_path / "chain.key").chmod(0o644)
    with pytest.raises(KeyFileError, match="accessible by group or others"):
        chain.append(CANARY, receipt())
    assert _count(tmp_path / "chain.sqlite3") == 2


def test_refuses_to_extend_a_head_record_that_was_altered(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 3)
    execute(tmp_path / "chain.sqlite3", "UPDATE records SET event = ? WHERE seq = 2", SPAWN)
    with pytest.raises(ChainWriteError, match="was altered"):
        chain.append(CANARY, receipt())


# --- state folder ------------------------------------------------------------------------------


def test_state_home_prefers_floorguard_home_then_xdg_then_home(tmp_path: Path) -> None:
    assert state_home({"FLOORGUARD_HOME": str(tmp_path / "a"), "XDG_STATE_HOME": "/x"}) == (
        tmp_path / "a"
    )
    assert state_home({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "floorguard"
    assert state_home({"XDG_STATE_HOME": "relative", "HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "state" / "floorguard"
    )
    assert state_home({"FLOORGUARD_HOME": "", "HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "state" / "floorguard"
    )
    paths = state_paths({"FLOORGUARD_HOME": str(tmp_path)})
    assert (paths.chain_db, paths.chain_key) == (
        tmp_path / "chain.sqlite3",
        tmp_path / "chain.key",
    )


# --- an unwritable chain ---------------------------------------------------------------------


def test_refuses_when_floorguard_home_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    chain = AuditChain.from_env({"FLOORGUARD_HOME": str(home)})
    with pytest.raises(ChainWriteError, match="not a folder"):
        chain.append(CANARY, receipt())
    assert home.read_text() == "not a folder"


def test_refuses_when_the_database_path_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "chain.sqlite3").mkdir()
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(ChainWriteError, match="is a folder"):
        chain.append(CANARY, receipt())
    assert not (tmp_path / "chain.key").exists()


def test_does_not_replace_a_corrupt_database_with_a_new_chain(tmp_path: Path) -> None:
    db = tmp_path / "chain.sqlite3"
    garbage = b"this is not an SQLite database, but it was once a chain" * 100
    db.write_bytes(garbage)
    chain = AuditChain(db, tmp_path / "chain.key")
    with pytest.raises(ChainWriteError, match="not a database"):
        chain.append(CANARY, receipt())
    assert db.read_bytes() == garbage


def test_refuses_a_database_of_an_unknown_format(tmp_path: Path) -> None:
    filled_chain(tmp_path, 1)
    execute(tmp_path / "chain.sqlite3", "UPDATE meta SET value = '99' WHERE key = 'format'")
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(ChainWriteError, match="unknown format"):
        chain.append(CANARY, receipt())


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE meta SET value = '99' WHERE key = 'format'",
        "DELETE FROM meta WHERE key = 'format'",
        "DROP TABLE meta",
        (
            "CREATE TABLE loose (key, value); INSERT INTO loose SELECT * FROM meta; "
            "INSERT INTO loose VALUES ('format', '2'); DROP TABLE meta; "
            "ALTER TABLE loose RENAME TO meta"
        ),
    ],
    ids=["another-format", "format-row-deleted", "meta-dropped", "a-second-format-row"],
)
def test_reading_a_database_of_an_unknown_format_is_refused_too(tmp_path: Path, edit: str) -> None:
    # Export, proofs and checkpoints read the records as this format lays them out: a file
    # that does not say it is in it is not read as if it were.
    filled_chain(tmp_path, 2).close()
    for statement in edit.split("; "):
        execute(tmp_path / "chain.sqlite3", statement)
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(ChainError, match="unknown format"):
        list(chain.export_lines())
    with pytest.raises(ChainError, match="unknown format"):
        chain.head()
    # and not given this format back by a write: refused, the file as it was
    before = _schema_and_meta(tmp_path / "chain.sqlite3")
    with pytest.raises(ChainWriteError, match=r"unknown format|chain id"):
        chain.append(CANARY, receipt())
    assert _schema_and_meta(tmp_path / "chain.sqlite3") == before


def _schema_and_meta(db: Path) -> tuple[list[Any], list[Any], int]:
    conn = sqlite3.connect(db)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        names = {row[1] for row in schema}
        meta = conn.execute("SELECT * FROM meta").fetchall() if "meta" in names else []
        return schema, meta, conn.execute("SELECT count(*) FROM records").fetchone()[0]
    finally:
        conn.close()


def test_refuses_when_the_disk_is_full_and_leaves_no_record(tmp_path: Path) -> None:
    # No tiny filesystem without privileges: a file size limit makes every write fail the
    # way a full disk does (EFBIG), in a child so the limit does not touch the test run.
    chain = filled_chain(tmp_path, 3)
    chain.close()
    script = textwrap.dedent(
        """
        import resource, signal, sys
        from pathlib import Path
        from floorguard._chain.chain import AuditChain
        from floorguard.errors import ChainWriteError

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN
        folder = Path(sys.argv[1])
        chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key")
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))
        receipt = {"kind": "adapter.canary_receipt", "schema_version": 1,
                   "ts": "2026-01-01T00:00:00Z", "pad": "x" * 20000}
        try:
            chain.append("adapter.canary_receipt", receipt)
        except ChainWriteError as error:
            print("refused:", error)
            sys.exit(3)
        print("appended")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "refused: cannot" in done.stdout
    assert _count(tmp_path / "chain.sqlite3") == 3
    report = verify_slice(export_lines(chain), key=_key(tmp_path))
    assert report.intact and report.records == 3


def test_appends_go_to_the_database_file_that_is_there_now(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 2)
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("chain.sqlite3", "chain.sqlite3-wal", "chain.sqlite3-shm"):
        if (tmp_path / name).exists():
            (tmp_path / name).rename(moved / name)
    record = chain.append(CANARY, receipt())
    assert record.seq == 0  # a fresh file, not the unlinked one the cached connection held
    assert _count(tmp_path / "chain.sqlite3") == 1


# --- slices --------------------------------------------------------------------------------------


def _at(second: int) -> datetime:
    return datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)


def test_slice_reaches_one_record_before_and_after_the_window(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 10)  # record n stamped at second n
    assert [r.seq for r in chain.records(_at(3), _at(5))] == [2, 3, 4, 5, 6]
    assert [r.seq for r in chain.records(_at(3), None)] == list(range(2, 10))
    assert [r.seq for r in chain.records(None, _at(2))] == [0, 1, 2, 3]


def test_slice_starts_at_genesis_and_ends_at_the_head_without_outer_records(
    tmp_path: Path,
) -> None:
    chain = filled_chain(tmp_path, 4)
    assert [r.seq for r in chain.records(_at(0), _at(30))] == [0, 1, 2, 3]


def test_window_between_records_still_yields_the_records_around_it(tmp_path: Path) -> None:
    chain = filled_chain(
        tmp_path, 4, clock=(f"2026-01-01T00:00:{s:02d}.000000Z" for s in (0, 10, 20, 30))
    )
    assert [r.seq for r in chain.records(_at(12), _at(15))] == [1, 2]


def test_reading_an_absent_chain_yields_nothing_and_creates_nothing(tmp_path: Path) -> None:
    chain = AuditChain(tmp_path / "none" / "chain.sqlite3", tmp_path / "none" / "chain.key")
    assert chain.head() is None
    assert list(chain.export_lines()) == []
    assert not chain.exists()
    assert not (tmp_path / "none").exists()


# --- tampering with the stored rows is reported at the right seq -------------------------------

TAMPERS = {
    "receipt-content": (
        "UPDATE records SET receipt = replace(receipt, '\"n\":4', '\"n\":40') WHERE seq = 4",
        4,
        "receipt_id is not the content address",
    ),
    "event": (
        "UPDATE records SET event = 'adapter.version_posture' WHERE seq = 4",
        4,
        "does not match event",
    ),
    "ts": (
        "UPDATE records SET ts = '2026-01-01T00:00:04.500000Z' WHERE seq = 4",
        4,
        "MAC does not verify",
    ),
    "deleted-row": ("DELETE FROM records WHERE seq = 4", 5, "expected seq 4"),
    # Done in the test body: rows 4 and 5 exchange contents but keep their seq.
    "swapped-rows": ("", 4, "prev does not match"),
    "foreign-chain-id": (
        "UPDATE records SET chain_id = 'ffffffffffffffffffffffffffffffff' WHERE seq = 4",
        4,
        "differs from the slice's chain",
    ),
}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_detects_tampered_rows_at_their_seq(tmp_path: Path, name: str) -> None:
    chain = filled_chain(tmp_path, 8)
    sql, seq, reason = TAMPERS[name]
    if name == "swapped-rows":
        # Swap the contents of rows 4 and 5 but keep their seq: the order of events changes.
        conn = sqlite3.connect(tmp_path / "chain.sqlite3", isolation_level=None)
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT seq, ts, event, receipt_id, receipt, prev, mac FROM records "
                "WHERE seq IN (4, 5)"
            )
        }
        for target, source in ((4, 5), (5, 4)):
            conn.execute(
                "UPDATE records SET ts=?, event=?, receipt_id=?, receipt=?, prev=?, mac=? "
                "WHERE seq = ?",
                (*rows[source], target),
            )
        conn.close()
    else:
        execute(tmp_path / "chain.sqlite3", sql)
    report = verify_slice(export_lines(chain), key=_key(tmp_path))
    assert not report.intact
    assert any(e.seq == seq and reason in e.reason for e in report.integrity_errors), (
        report.integrity_errors
    )


def test_detects_a_row_from_another_chain(tmp_path: Path) -> None:
    ours = filled_chain(tmp_path / "ours", 6)
    theirs = filled_chain(tmp_path / "theirs", 6)
    foreign = next(r for r in theirs.records() if r.seq == 3)
    execute(
        tmp_path / "ours" / "chain.sqlite3",
        "UPDATE records SET ts=?, chain_id=?, event=?, receipt_id=?, receipt=?, prev=?, mac=? "
        "WHERE seq = 3",
        foreign.ts,
        foreign.chain_id,
        foreign.event,
        foreign.receipt_id,
        canonical_json(foreign.receipt),
        foreign.prev,
        foreign.mac,
    )
    report = verify_slice(export_lines(ours), key=_key(tmp_path / "ours"))
    reasons = {e.reason for e in report.integrity_errors if e.seq == 3}
    assert any("differs from the slice's chain" in r for r in reasons)
    assert any("MAC does not verify" in r for r in reasons)
    assert any("prev does not match" in r for r in reasons)


def test_a_wrong_key_fails_every_mac(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 3)
    report = verify_slice(export_lines(chain), key=b"\x01" * 32)
    assert [e.seq for e in report.integrity_errors] == [0, 1, 2]
    assert all("MAC does not verify" in e.reason for e in report.integrity_errors)


def test_the_untampered_chain_verifies_with_its_key(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path, 8)
    report = verify_slice(export_lines(chain), key=_key(tmp_path))
    assert report.intact, report.integrity_errors
    assert (report.records, report.first_seq, report.last_seq) == (8, 0, 7)
    assert report.head == chain.head().digest()  # type: ignore[union-attr]


# --- the fast canonical form is RFC 8785 ----------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_canonical_json_is_rfc8785_or_refuses_like_it(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value).decode("utf-8")
        # What cannot be read back and canonicalised the same is refused too.
        assert rfc8785.dumps(json.loads(expected)).decode("utf-8") == expected
    except (rfc8785.CanonicalizationError, UnicodeEncodeError, ValueError, AssertionError):
        with pytest.raises(CanonicalizationError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


def test_refuses_a_float_that_reads_back_as_an_unsafe_integer(tmp_path: Path) -> None:
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    with pytest.raises(ChainWriteError, match="round trip"):
        chain.append(CANARY, receipt(size=2.0**53))


def test_canonical_json_orders_keys_by_utf16_code_units() -> None:
    value = {"\U0001f600": 1, "\ufb01": 2, "a": 3}
    assert canonical_json(value) == rfc8785.dumps(value).decode("utf-8")
    assert canonical_json(value).index("\U0001f600") < canonical_json(value).index("\ufb01")


def test_canonical_json_refuses_non_string_keys() -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json({1: "a"})


def test_no_record_is_left_half_written_when_a_receipt_is_refused_mid_chain(
    tmp_path: Path,
) -> None:
    chain = filled_chain(tmp_path, 2)
    with pytest.raises(ChainWriteError):
        chain.append(CANARY, {"kind": CANARY, "schema_version": 1})
    chain.append(CANARY, receipt())
    assert [r.seq for r in chain.records()] == [0, 1, 2]


def test_importing_the_chain_does_not_import_sqlite3() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, floorguard._chain.chain, floorguard._proofs.slice_verify; "
            "print('sqlite3' in sys.modules)",
        ],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "False", done.stderr
