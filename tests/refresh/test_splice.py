"""Splicing the floor-map block: only the lines between the markers ever change."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floorctl.errors import ModuleError
from floorctl.splice import (
    BEGIN,
    END,
    read_module_text,
    splice,
    split_module,
)

HOST = f'"""A host module."""\nimport sys\n\n{BEGIN}\nOLD = 1\n{END}\n\nprint("tail")\n'
NEW_BLOCK = 'FLOOR_MAP_VERSION = 2\nFLOOR_MAP_HASH = "x"\n'


def marker_free(text: str) -> bool:
    """True when no line of ``text`` would be taken for a marker."""
    return all(line.strip() not in (BEGIN, END) for line in text.split("\n"))


# --- splitting ----------------------------------------------------------------------------


def test_split_finds_block_between_markers() -> None:
    split = split_module(HOST, "host.py")
    assert split.before == '"""A host module."""\nimport sys\n\n'
    assert split.begin_line == BEGIN + "\n"
    assert split.block == "OLD = 1\n"
    assert split.end_line == END + "\n"
    assert split.after == '\nprint("tail")\n'
    assert split.block_line == 5
    assert split.text() == HOST


def test_empty_block_between_adjacent_markers() -> None:
    split = split_module(f"{BEGIN}\n{END}\n", "m.py")
    assert split.block == ""
    assert splice(split, "") == f"{BEGIN}\n{END}\n"


def test_indented_marker_lines_are_markers() -> None:
    split = split_module(f"  {BEGIN}  \nA = 1\n\t{END}\n", "m.py")
    assert split.block == "A = 1\n"
    assert split.begin_line == f"  {BEGIN}  \n"


def test_marker_text_inside_a_longer_line_is_not_a_marker() -> None:
    text = f"x = 1  {BEGIN}\n{BEGIN}\nA = 1\n{END}\ny = '{END}'\n"
    split = split_module(text, "m.py")
    assert split.block == "A = 1\n"
    assert split.before == f"x = 1  {BEGIN}\n"


def test_refuses_module_without_begin_marker() -> None:
    with pytest.raises(ModuleError, match=r"host\.py: marker '# floor-map:end' at line 2 has no"):
        split_module(f"A = 1\n{END}\n", "host.py")


def test_refuses_module_without_end_marker() -> None:
    with pytest.raises(ModuleError, match=r"host\.py: marker '# floor-map:begin' at line 1 has no"):
        split_module(f"{BEGIN}\nA = 1\n", "host.py")


def test_refuses_module_without_any_marker() -> None:
    with pytest.raises(ModuleError, match=r"host\.py: no floor-map markers"):
        split_module("A = 1\n", "host.py")


def test_refuses_duplicated_begin_marker() -> None:
    with pytest.raises(
        ModuleError, match=r"host\.py: .*begin' appears more than once \(lines 1, 3\)"
    ):
        split_module(f"{BEGIN}\nA = 1\n{BEGIN}\n{END}\n", "host.py")


def test_refuses_duplicated_end_marker() -> None:
    with pytest.raises(
        ModuleError, match=r"host\.py: .*end' appears more than once \(lines 3, 4\)"
    ):
        split_module(f"{BEGIN}\nA = 1\n{END}\n{END}\n", "host.py")


def test_refuses_reversed_markers() -> None:
    with pytest.raises(
        ModuleError, match=r"host\.py: .*end' \(line 1\) comes before .* \(line 3\)"
    ):
        split_module(f"{END}\nA = 1\n{BEGIN}\n", "host.py")


# --- splicing keeps every byte outside the markers -------------------------------------------


def test_splice_replaces_only_the_block() -> None:
    out = splice(split_module(HOST, "host.py"), NEW_BLOCK)
    assert out == HOST.replace("OLD = 1\n", NEW_BLOCK)


def test_splice_keeps_crlf_module_crlf() -> None:
    host = HOST.replace("\n", "\r\n")
    out = splice(split_module(host, "host.py"), NEW_BLOCK)
    assert out == host.replace("OLD = 1\r\n", NEW_BLOCK.replace("\n", "\r\n"))
    assert "\n" not in out.replace("\r\n", "")


def test_splice_keeps_missing_final_newline_after_end_marker() -> None:
    host = f"A = 1\n{BEGIN}\nOLD = 1\n{END}"
    out = splice(split_module(host, "host.py"), NEW_BLOCK)
    assert out == f"A = 1\n{BEGIN}\n{NEW_BLOCK}{END}"


def test_splice_keeps_unicode_bom_and_odd_line_breaks_outside_block() -> None:
    before = "\ufeff# Größe: 見る \u2028 form\x0cfeed\r\nx = 'é'\n"
    after = "# ✓ done \x85 trailing\r\n\tz = 3"
    host = f"{before}{BEGIN}\nOLD = 1\n{END}\n{after}"
    out = splice(split_module(host, "host.py"), NEW_BLOCK)
    assert out == f"{before}{BEGIN}\n{NEW_BLOCK}{END}\n{after}"
    assert out.encode("utf-8").startswith(before.encode("utf-8"))


def test_splice_adds_final_newline_so_end_marker_keeps_its_line() -> None:
    out = splice(split_module(HOST, "host.py"), "A = 1")
    assert f"A = 1\n{END}\n" in out


def test_splice_is_idempotent() -> None:
    once = splice(split_module(HOST, "host.py"), NEW_BLOCK)
    twice = splice(split_module(once, "host.py"), NEW_BLOCK)
    assert once == twice


def test_splice_refuses_block_holding_a_marker_line() -> None:
    split = split_module(HOST, "host.py")
    with pytest.raises(ModuleError, match="marker line"):
        splice(split, f"A = 1\n{END}\nimport os\n")


def test_splice_refuses_block_holding_a_carriage_return() -> None:
    with pytest.raises(ModuleError, match="carriage return"):
        splice(split_module(HOST, "host.py"), "A = 1\rimport os\n")


surrounding = st.text().filter(marker_free)
block_text = st.text().map(lambda s: s.replace("\r", "")).filter(marker_free)


@given(before=surrounding, after=surrounding, old=block_text, new=block_text)
def test_bytes_outside_markers_survive_any_surrounding_text(
    before: str, after: str, old: str, new: str
) -> None:
    old_block = old + "\n" if old else ""
    text = f"{before}\n{BEGIN}\n{old_block}{END}\n{after}"
    split = split_module(text, "m.py")
    assert split.before == before + "\n"
    assert split.after == after
    out = splice(split, new)
    expected_block = new if not new or new.endswith("\n") else new + "\n"
    assert out == f"{before}\n{BEGIN}\n{expected_block}{END}\n{after}"
    # Idempotence: splicing the same block again changes nothing.
    assert splice(split_module(out, "m.py"), new) == out


@given(before=surrounding, after=surrounding, new=block_text)
def test_crlf_modules_stay_byte_identical_outside_markers(
    before: str, after: str, new: str
) -> None:
    text = f"{before}\r\n{BEGIN}\r\nOLD = 1\r\n{END}\r\n{after}"
    out = splice(split_module(text, "m.py"), new)
    assert out.startswith(f"{before}\r\n{BEGIN}\r\n")
    assert out.endswith(f"{END}\r\n{after}")
    # The new block took the module's line ending too.
    between = out[len(before) + len(BEGIN) + 4 : -len(f"{END}\r\n{after}")]
    assert "\n" not in between.replace("\r\n", "")


# --- reading the module -----------------------------------------------------------------------


def test_reads_module_text_with_crlf_untouched(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"a\r\nb\n")
    assert read_module_text(path) == "a\r\nb\n"


def test_refuses_module_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.py"
    path.write_bytes(f"{BEGIN}\n# caf\xe9\n{END}\n".encode("latin-1"))
    with pytest.raises(ModuleError, match=r"latin1\.py: .*not valid UTF-8 \(byte offset 23\)"):
        read_module_text(path)


def test_refuses_missing_module(tmp_path: Path) -> None:
    with pytest.raises(ModuleError, match=r"nope\.py: floor-map module does not exist; create it"):
        read_module_text(tmp_path / "nope.py")
