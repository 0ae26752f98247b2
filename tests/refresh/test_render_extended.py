"""Rendering extended entries (advisories, waivers, an ecosystem) as nested literals, and the
ast gate reading them back: data only, exactly the data, whatever the strings hold."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from floorctl.errors import ModuleError, RenderError
from floorctl.render import (
    BERNSTEIN,
    FLOORGUARD,
    load_template,
    py_data,
    read_block,
    read_module,
    render_block,
)
from floorctl.splice import BEGIN, END, splice, split_module
from floorguard._maps.active_map import parse_map_module
from floorguard._maps.map_model import ADAPTER_NAME_FORM, entries_hash, from_entries
from floorguard.errors import FloorMapError

FLOOR = {"min_safe_version": "1.0.20", "advisory_id": "BSA-0002", "note": "Upgrade."}
ADVISORY = {
    "id": "GHSA-aaaa-bbbb-cccc",
    "aliases": ["CVE-2025-1234"],
    "summary": "Prompt injection runs shell commands.",
    "affected": [{"introduced": "0", "fixed": "1.4.7"}, {"introduced": "2.0.0"}],
    "versions": ["3.0.0"],
    "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
    "references": ["https://github.com/advisories/GHSA-aaaa-bbbb-cccc"],
}
WAIVER = {
    "id": "WVR-0001",
    "version": "2.0.10",
    "advisories": ["GHSA-aaaa-bbbb-cccc"],
    "reason": "Reviewed: the shell tool is disabled in our hosts.",
    "approved_by": "security team",
    "expires": "2026-12-31T00:00:00Z",
}
EXTENDED = {
    "aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": "n"},
    "claude": {**FLOOR, "ecosystem": "npm", "advisories": [ADVISORY], "waivers": [WAIVER]},
    "gemini": {"ecosystem": "npm", "advisories": [], "waivers": []},
}


def test_extended_block_reads_back_to_exactly_its_data() -> None:
    block = render_block(load_template(FLOORGUARD), EXTENDED, map_version=7)
    data = read_block(block, "m.py")
    assert data.entries == EXTENDED
    assert data.stated_hash == entries_hash(EXTENDED)
    assert ast.literal_eval(block.split("FLOOR_MAP_ENTRIES = ", 1)[1]) == EXTENDED


def test_a_floor_only_entry_beside_extended_ones_keeps_its_three_lines() -> None:
    block = render_block(load_template(FLOORGUARD), EXTENDED, map_version=1)
    assert (
        '    "aider": {\n'
        '        "advisory_id": "BSA-0001",\n'
        '        "min_safe_version": "0.60.0",\n'
        '        "note": "n",\n'
        "    },\n"
    ) in block


def test_the_runtime_reads_the_extended_block(tmp_path: Path) -> None:
    block = render_block(load_template(FLOORGUARD), EXTENDED, map_version=3)
    text = splice(split_module(f'"""m"""\n{BEGIN}\n{END}\n', "m.py"), block)
    active = parse_map_module(text, "m.py")
    assert active.map_version == 3
    claude = active.floor_map["claude"]
    assert claude.ecosystem == "npm" and claude.advisories[0].id == ADVISORY["id"]
    assert claude.waivers[0].id == "WVR-0001"
    _, data = read_module(text, "m.py")
    assert data.entries == EXTENDED


def test_bernstein_template_refuses_an_extended_map_naming_the_adapter() -> None:
    with pytest.raises(RenderError, match=r"'claude' carries advisories or waivers \(and 1 more"):
        render_block(load_template(BERNSTEIN), EXTENDED, map_version=1)


def test_bernstein_template_still_renders_floors() -> None:
    floors = {"aider": EXTENDED["aider"]}
    assert read_block(
        render_block(load_template(BERNSTEIN), floors, map_version=1), "m"
    ).entries == (floors)


def test_a_custom_template_that_ignores_the_nested_fields_is_refused(tmp_path: Path) -> None:
    # Written for floor-only entries: it would drop the advisories; the read-back catches it.
    path = tmp_path / "old.py.j2"
    path.write_text(
        "FLOOR_MAP_VERSION = {{ map_version }}\nFLOOR_MAP_HASH = {{ map_hash }}\n"
        "FLOOR_MAP_ENTRIES = {\n{% for e in entries %}    {{ e.adapter }}: {\n"
        '        "advisory_id": {{ e.advisory_id }},\n'
        '        "min_safe_version": {{ e.min_safe_version }},\n'
        '        "note": {{ e.note }},\n    },\n{% endfor %}}\n'
    )
    with pytest.raises(RenderError):
        render_block(load_template(str(path)), EXTENDED, map_version=1)


def _block_with(claude: str) -> str:
    return (
        "FLOOR_MAP_VERSION = 1\n"
        'FLOOR_MAP_HASH = "sha256:00"\n'
        "FLOOR_MAP_ENTRIES = {\n"
        f'    "claude": {claude},\n'
        "}\n"
    )


_GOOD = '{"ecosystem": "npm", "advisories": [], "waivers": []}'


@pytest.mark.parametrize(
    "claude",
    [
        '{"ecosystem": "npm", "advisories": [__import__("os").system("id")], "waivers": []}',
        '{"ecosystem": "npm", "advisories": ["a" + "b"], "waivers": []}',
        '{"ecosystem": "npm", "advisories": ("x",), "waivers": []}',
        '{"ecosystem": "npm", "advisories": {"x"}, "waivers": []}',
        '{"ecosystem": "npm", "advisories": [f"{1}"], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [1], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [None], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [*x], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [], "waivers": [], **extra}',
        '{"ecosystem": npm, "advisories": [], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [[[[[[["deep"]]]]]]], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [], "waivers": [], "code": "x"}',
        '{"ecosystem": "npm", "advisories": [], "waivers": [], "ecosystem": "PyPI"}',
    ],
)
def test_read_block_refuses_anything_but_the_data_of_an_extended_entry(claude: str) -> None:
    read_block(_block_with(_GOOD), "m.py")  # the frame itself is data
    with pytest.raises(ModuleError, match="floor-map block holds something other than data"):
        read_block(_block_with(claude), "m.py")


@pytest.mark.parametrize(
    "claude",
    [
        '{"ecosystem": "cargo", "advisories": [], "waivers": []}',
        '{"ecosystem": "npm", "advisories": [{"id": "A"}], "waivers": []}',
        '{"ecosystem": "npm", "advisories": []}',
        '{"min_safe_version": "1.0.0", "advisories": [], "waivers": []}',
    ],
)
def test_literal_data_of_the_wrong_shape_is_refused_before_use(claude: str) -> None:
    # Data only, so the gate lets it through; the model refuses it before anything uses
    # or hashes it (refresh, verify and the runtime all build the map first).
    entries = read_block(_block_with(claude), "m.py").entries
    with pytest.raises(FloorMapError):
        from_entries(entries)
    text = splice(split_module(f"{BEGIN}\n{END}\n", "m.py"), _block_with(claude))
    with pytest.raises(FloorMapError):
        parse_map_module(text, "m.py")


# --- injection: every new string field, rendered as an inert literal ---------------------------

HOSTILE = [
    '"""; import os; os.system("id"); """',
    "'); __import__('os').system('id') #",
    "\\",
    "{{ map_hash }}",
    "{% for x in y %}",
    "\n]\nimport os\n[",
    "\u2028\u202e\x00",
    "# floor-map:end",
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize(
    "where",
    [
        "summary", "id", "aliases", "versions", "fixed", "score", "references", "waiver",
        "ecosystem", "package", "kind",
    ],
)  # fmt: skip
def test_hostile_text_in_any_nested_field_is_an_inert_literal(
    text: str, where: str, tmp_path: Path
) -> None:
    advisory: dict[str, Any] = json.loads(json.dumps(ADVISORY))
    waiver = dict(WAIVER)
    claude: dict[str, Any] = {"ecosystem": "npm", "advisories": [advisory], "waivers": [waiver]}
    if where in ("summary", "id"):
        advisory[where] = text
    elif where in ("aliases", "versions", "references"):
        advisory[where] = [text]
    elif where == "fixed":
        advisory["affected"] = [{"introduced": "0", "fixed": text}]
    elif where == "score":
        advisory["severity"] = [{"type": "CVSS_V3", "score": text}]
    elif where == "waiver":
        waiver["reason"] = text
    entries = {"claude": claude}
    if where in ("ecosystem", "package", "kind"):
        # The ecosystem, package name and kind are checked by the model: a hostile one never
        # reaches a template, and a block holding one is refused where it is read.
        claude.update(package="@anthropic-ai/claude-code", kind="agent")
        claude[where] = text
        with pytest.raises(RenderError):
            render_block(load_template(FLOORGUARD), entries, map_version=1)
        with pytest.raises(FloorMapError):
            from_entries(entries)
        return
    block = render_block(load_template(FLOORGUARD), entries, map_version=1)
    assert all(line.strip() not in (BEGIN, END) for line in block.splitlines())
    assert read_block(block, "m.py").entries == entries
    # The real interpreter agrees: the module defines the data and nothing else.
    module = tmp_path / "floor_map.py"
    module.write_text(splice(split_module(f"{BEGIN}\n{END}\n", "m"), block), encoding="utf-8")
    probe = textwrap.dedent(
        """
        import runpy, sys, json
        ns = runpy.run_path(sys.argv[1])
        names = sorted(k for k in ns if not k.startswith("__"))
        print(json.dumps([names, ns["FLOOR_MAP_ENTRIES"]]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(module)], capture_output=True, text=True, check=True
    )
    names, loaded = json.loads(done.stdout)
    assert names == ["FLOOR_MAP_ENTRIES", "FLOOR_MAP_HASH", "FLOOR_MAP_VERSION"]
    assert loaded == entries
    assert done.stderr == ""


_text = st.text(max_size=12, alphabet=st.characters(exclude_categories=("Cs",))) | st.sampled_from(
    HOSTILE
)
_nested = st.recursive(
    _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300)
@given(_nested, st.integers(min_value=0, max_value=16))
def test_py_data_evaluates_back_to_exactly_the_value(value: Any, indent: int) -> None:
    source = py_data(value, indent)
    assert ast.literal_eval(source) == value
    allowed = (ast.Expression, ast.Dict, ast.List, ast.Constant, ast.Load)
    assert all(isinstance(node, allowed) for node in ast.walk(ast.parse(source, mode="eval")))


# (a version with a local label, "+", is refused by every map of a PEP 440 order: the gate
# compares releases; and a range whose end is not above its start holds no version)
_bound = _text.filter(lambda text: "+" not in text)

_advisory_st = st.fixed_dictionaries(
    {
        "id": _text,
        "aliases": st.lists(_text, max_size=2),
        "summary": _text,
        "affected": st.lists(
            st.fixed_dictionaries({"introduced": _bound}, optional={"fixed": _bound}), max_size=2
        ),
        "versions": st.lists(_bound, max_size=2),
        "severity": st.lists(st.fixed_dictionaries({"type": _text, "score": _text}), max_size=2),
        "references": st.lists(_text, max_size=2),
    }
)


@settings(max_examples=150)
@given(
    st.dictionaries(
        st.from_regex(ADAPTER_NAME_FORM, fullmatch=True),
        st.lists(_advisory_st, max_size=2),
        max_size=3,
    )
)
def test_any_extended_map_renders_to_data_that_reads_back_exactly(
    adapters: dict[str, list[dict[str, Any]]],
) -> None:
    entries = {
        name: {"ecosystem": "PyPI", "advisories": found, "waivers": []}
        for name, found in adapters.items()
    }
    try:
        from_entries(entries)
    except FloorMapError as exc:  # (rare: two valid versions drawn the wrong way round)
        assume("holds no version" not in str(exc))
        raise
    block = render_block(load_template(FLOORGUARD), entries, map_version=1)
    data = read_block(block, "m.py")
    assert data.entries == entries and data.stated_hash == entries_hash(entries)
