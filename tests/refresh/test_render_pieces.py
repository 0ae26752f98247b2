"""A large block is read in pieces (bounded memory), and reads exactly as one ast.parse does.

``read_block`` and ``read_module`` parse the entries of a block in floorctl's shape piece by
piece; whatever the pieces cannot read for certain is read the plain way, whose answer (or
refusal, with its message) decides. These tests hold the two readings equal on rendered
blocks and on every edit around the places the pieces are cut.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorctl import render
from floorctl.errors import ModuleError
from floorctl.render import BERNSTEIN, FLOORGUARD, load_template, read_block, read_module
from floorctl.splice import BEGIN, END, split_lines
from floorguard._maps.map_model import ADAPTER_NAME_FORM, entries_hash

pytestmark = pytest.mark.slow  # (not in CI: run before a release)

NOTES = [
    "Upgrade: below the floor is unsafe.",
    "it's a note with an apostrophe, {braces} and a } alone",
    "    }, looks like a line of the block",
    "non-ASCII: déjà vu, 日本語, emoji 🙂",
    "a # that is no comment",
]


def entries(count: int) -> dict[str, dict[str, str]]:
    return {
        f"adapter-{n:05d}": {
            "min_safe_version": f"{n % 7}.{n % 11}.{n % 13}",
            "advisory_id": f"BSA-{n:05d}",
            "note": NOTES[n % len(NOTES)],
        }
        for n in range(count)
    }


def block_of(count: int, layout: str = FLOORGUARD) -> str:
    data = entries(count)
    return render.render_block(
        load_template(layout), data, map_hash=entries_hash(data), map_version=3
    )


def plain(block: str) -> Any:
    """What one ast.parse of the whole block reads: the data, or the refusal's message."""
    try:
        return render._read_block_plain(block, "b")
    except ModuleError as exc:
        return str(exc)


def read(block: str) -> Any:
    try:
        return read_block(block, "b")
    except ModuleError as exc:
        return str(exc)


def pieces_of(block: str) -> int:
    cut = render._cut(block, 0, len(block))
    return 0 if cut is None else len(cut.pieces)


@pytest.mark.parametrize("layout", [FLOORGUARD, BERNSTEIN])
def test_a_large_block_is_read_in_pieces_as_one_parse_reads_it(layout: str) -> None:
    block = block_of(8000, layout)
    assert pieces_of(block) >= 3
    in_pieces = render._read_block_in_pieces(block)
    assert in_pieces is not None
    assert in_pieces == render._read_block_plain(block, "b")
    assert in_pieces.entries == entries(8000)


def test_a_large_module_is_read_in_pieces_as_one_parse_reads_it() -> None:
    block = block_of(8000)
    text = f'"""Host."""\n\nA = 1\n{BEGIN}\n{block}{END}\n\n\ndef f() -> int:\n    return A\n'
    split, data = read_module(text, "m.py")
    first = split.block_line - 1
    last = first + len(split_lines(split.block)) + 1
    assert render._read_module_in_pieces(text, split, first, last) == data
    assert render._read_module_plain(text, split, "m.py", first, last) == data
    assert data.entries == entries(8000)


# Edits made around each place a piece ends (and the dict's first and last lines).
EDITS = [
    lambda line: '"""' + line,
    lambda line: line + '"""\n',
    lambda line: line[:-1] + "'''\n",
    lambda line: line.replace("},", "}").replace("),", ")"),
    lambda line: line.replace(",\n", ",  # a comment\n"),
    lambda line: line.replace(",\n", ", \\\n"),
    lambda line: line[:-1] + " \\\n",
    lambda line: line + "}\n",
    lambda line: line + "    **OTHER,\n",
    lambda line: line + "    # }\n",
    lambda line: line + "\n",
    lambda line: (
        line + '    "adapter-00001": {"advisory_id": "A", "min_safe_version": "1", "note": "n"},\n'
    ),
    lambda line: line.replace("{", "("),
    lambda line: line.replace("{", "{{"),
    lambda line: line.replace('"', "f'", 1),
    lambda line: "",
]


@pytest.mark.parametrize("layout", [FLOORGUARD, BERNSTEIN])
def test_no_edit_at_a_cut_makes_the_pieces_read_other_than_one_parse(
    layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pieces of a few entries, so that a small block has many cuts to edit around.
    monkeypatch.setattr(render, "_CHUNK_CHARS", 400)
    block = block_of(40, layout)
    lines = split_lines(block)
    cut = render._cut(block, 0, len(block))
    assert cut is not None and len(cut.pieces) > 10
    ends, at = [cut.open_line - 1, cut.close_line - 1], cut.open_line
    for piece in cut.pieces:
        at += piece.lines
        ends += [at - 2, at - 1, at]  # a piece's last lines, and the next one's first
    read_in_pieces = refused = 0
    for index in sorted(set(ends)):
        for edit in EDITS:
            mutant = "".join([*lines[:index], edit(lines[index]), *lines[index + 1 :]])
            expected = plain(mutant)
            got = render._read_block_in_pieces(mutant)
            if got is not None:
                assert got == expected, (index, mutant.splitlines()[index - 1 : index + 2])
                read_in_pieces += 1
            assert read(mutant) == expected
            refused += isinstance(expected, str)
    # Both kinds of edit were made: ones the pieces read, and refusals.
    assert read_in_pieces > 20
    assert refused > 20


def test_a_key_given_twice_across_pieces_is_refused_as_one_parse_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(render, "_CHUNK_CHARS", 400)
    block = block_of(40)
    twice = block.replace('"adapter-00039"', '"adapter-00002"')
    assert render._read_block_in_pieces(twice) is None
    with pytest.raises(ModuleError, match="has the key 'adapter-00002' twice"):
        read_block(twice, "b")


def test_a_string_spanning_a_cut_is_read_as_one_parse_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A triple-quoted note holding what looks like the end of the dict and more entries.
    monkeypatch.setattr(render, "_CHUNK_CHARS", 400)
    block = block_of(40)
    hidden = block.replace(
        '"note": "Upgrade: below the floor is unsafe.",',
        '"note": """x\n}\n    "adapter-99999": {\n""",',
        1,
    )
    data = render._read_block_plain(hidden, "b")
    assert data.entries["adapter-00000"]["note"] == 'x\n}\n    "adapter-99999": {\n'
    assert "adapter-99999" not in data.entries
    assert read_block(hidden, "b") == data


# Any text as fields: quotes, escapes, template syntax, marker-like lines too. (Entry keys
# are adapter names: a map under any other key is refused before it is read.)
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30) | st.sampled_from(
    ['"""', "'''", "}", "    },", '    "x": {', "\\", "{{ x }}", "\n}\n", "# }", "\u2028"]
)
# (a floor with a local label, "+", is refused by every map: the gate compares releases)
floor = st.fixed_dictionaries(
    {"min_safe_version": text.filter(lambda t: "+" not in t), "advisory_id": text, "note": text}
)
names = st.from_regex(ADAPTER_NAME_FORM, fullmatch=True)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(names, floor, min_size=1, max_size=30), chunk=st.integers(1, 300))
def test_any_rendered_block_reads_in_pieces_as_one_parse_reads_it(
    data: dict[str, dict[str, str]], chunk: int
) -> None:
    saved = render._CHUNK_CHARS
    render._CHUNK_CHARS = chunk  # small pieces, many cuts (hypothesis: no monkeypatch)
    try:
        for layout in (FLOORGUARD, BERNSTEIN):
            block = render.render_block(load_template(layout), data, map_version=1)
            in_pieces = render._read_block_in_pieces(block)
            assert in_pieces is not None
            assert in_pieces == render._read_block_plain(block, "b")
            assert in_pieces.entries == data
    finally:
        render._CHUNK_CHARS = saved
