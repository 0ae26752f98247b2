"""A refresh renders the block straight into the module's text and checks it there.

``render_module`` must give exactly ``splice(split, render_floor_map(...))`` and refuse
exactly what that refuses; the read-back it does compares the entries with the map as it
reads them (``read_block_expecting``) instead of keeping a second copy, and must still see
any difference. A merge keeps a feed's entry that merges to itself, rather than a copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from floorctl import merge
from floorctl.errors import RenderError
from floorctl.render import (
    BERNSTEIN,
    FLOORGUARD,
    load_template,
    read_block,
    read_block_expecting,
    render_floor_map,
    render_module,
)
from floorctl.splice import splice, split_module
from floorguard._maps.map_model import FloorMap, floor_map_hash, from_entries, to_entries

FLOORS = from_entries(
    {
        "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "déjà vu"},
        "codex": {"min_safe_version": "1.2.3", "advisory_id": "BSA-0002", "note": 'a "}"'},
    }
)
EXTENDED = from_entries(
    {
        "claude": {
            "ecosystem": "npm",
            "advisories": [
                {
                    "id": "GHSA-exam-ple0-0001",
                    "aliases": ["CVE-2025-1"],
                    "summary": "commands run without asking",
                    "affected": [{"introduced": "0", "fixed": "1.4.7"}],
                    "versions": [],
                    "severity": [],
                    "references": [],
                }
            ],
            "waivers": [],
        }
    }
)
MODULE = '"""Host."""\n\nBEFORE = 1\n# floor-map:begin\nOLD = 1\n# floor-map:end\nAFTER = 2\n'


def both_ways(module: str, floor_map: FloorMap, layout: str = FLOORGUARD) -> tuple[str, str]:
    split = split_module(module, "m.py")
    template = load_template(layout)
    stated = floor_map_hash(floor_map)
    streamed = render_module(template, floor_map, split, map_hash=stated, map_version=4)
    block = render_floor_map(template, floor_map, map_hash=stated, map_version=4)
    return streamed, splice(split, block)


@pytest.mark.parametrize("floor_map", [FLOORS, EXTENDED, from_entries({})])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_the_module_rendered_in_place_is_the_spliced_block(
    floor_map: FloorMap, newline: str
) -> None:
    streamed, spliced = both_ways(MODULE.replace("\n", newline), floor_map)
    assert streamed == spliced
    assert streamed.startswith('"""Host."""' + newline)
    assert streamed.endswith("# floor-map:end" + newline + "AFTER = 2" + newline)


def test_the_bernstein_layout_is_rendered_in_place_too() -> None:
    streamed, spliced = both_ways(MODULE, FLOORS, BERNSTEIN)
    assert streamed == spliced


def test_rendering_in_place_refuses_what_the_block_refuses() -> None:
    with pytest.raises(RenderError, match="holds floors only"):
        both_ways(MODULE, EXTENDED, BERNSTEIN)


def test_a_custom_template_that_changes_a_value_is_refused_in_place(tmp_path: Path) -> None:
    path = tmp_path / "liar.py.j2"
    path.write_text(
        "FLOOR_MAP_HASH = {{ map_hash }}\nFLOOR_MAP_VERSION = {{ map_version }}\n"
        "FLOOR_MAP_ENTRIES = {\n{% for e in entries %}    {{ e.adapter }}: {"
        '"note": "changed", "advisory_id": {{ e.advisory_id }}, '
        '"min_safe_version": {{ e.min_safe_version }}},\n{% endfor %}}\n',
        encoding="utf-8",
    )
    split = split_module(MODULE, "m.py")
    with pytest.raises(RenderError, match="does not read back to its data"):
        render_module(
            load_template(str(path)), FLOORS, split, map_hash=floor_map_hash(FLOORS), map_version=1
        )


def test_a_block_checked_against_its_entries_reads_as_them_only_when_it_states_them() -> None:
    stated = floor_map_hash(FLOORS)
    block = render_floor_map(load_template(FLOORGUARD), FLOORS, map_hash=stated, map_version=2)
    text = "BEFORE = 1\n" + block + "AFTER = 2\n"
    start, stop = len("BEFORE = 1\n"), len("BEFORE = 1\n") + len(block)
    expected = to_entries(FLOORS)
    same = read_block_expecting(text, "m.py", expected, start, stop)
    assert same.entries is expected
    assert (same.stated_hash, same.map_version, same.layout) == (stated, 2, FLOORGUARD)
    # One entry differs, one is missing, one is extra: each is seen, and the block is read
    # for what it states.
    for other in (
        {**expected, "codex": {**expected["codex"], "note": "other"}},
        {"aider": expected["aider"]},
        {**expected, "gemini": expected["aider"]},
    ):
        read = read_block_expecting(text, "m.py", other, start, stop)
        assert read.entries == expected == read_block(block, "m.py").entries


def test_a_merge_keeps_a_feeds_entry_that_merges_to_itself() -> None:
    merged = merge.merge([("feed.json", EXTENDED)]).floor_map
    assert merged == EXTENDED
    assert merged["claude"] is EXTENDED["claude"]
