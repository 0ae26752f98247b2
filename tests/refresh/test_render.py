"""Rendering the floor-map block, and the ast gate that keeps it data only."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorctl.errors import ModuleError, RenderError
from floorctl.render import (
    BERNSTEIN,
    FLOORGUARD,
    Template,
    detect_layout,
    load_template,
    py_literal,
    read_block,
    read_module,
    render_block,
)
from floorctl.splice import BEGIN, END, splice, split_module
from floorguard._base.atomic import write_atomic
from floorguard._maps.map_model import ADAPTER_NAME, ADAPTER_NAME_FORM, entries_hash

ASSETS = Path(__file__).parents[1] / "assets"
NOTE = "aider below 0.60.0 is known-unsafe for spawned use; upgrade recommended."
REFERENCE = {"aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001", "note": NOTE}}
TWO = {
    **REFERENCE,
    "codex": {"min_safe_version": "1.2.3", "advisory_id": "GHSA-jfh8-c2jp-5v3q", "note": "n"},
}
HASH = entries_hash(REFERENCE)

# Every node type a data-only block may hold, whatever the layout.
DATA_NODES = (
    ast.Module,
    ast.Assign,
    ast.AnnAssign,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Constant,
    ast.Dict,
    ast.Call,
    ast.keyword,
    ast.Subscript,
    ast.Tuple,
)


def custom(tmp_path: Path, source: str) -> Template:
    path = tmp_path / "custom.py.j2"
    path.write_text(source, encoding="utf-8")
    return load_template(str(path))


# --- the default layout -----------------------------------------------------------------------


def test_renders_the_contract_example_exactly() -> None:
    block = render_block(load_template(FLOORGUARD), REFERENCE, map_version=3)
    assert block == (
        "FLOOR_MAP_VERSION = 3\n"
        f'FLOOR_MAP_HASH = "{HASH}"\n'
        "FLOOR_MAP_ENTRIES = {\n"
        '    "aider": {\n'
        '        "advisory_id": "BSA-0001",\n'
        '        "min_safe_version": "0.60.0",\n'
        f'        "note": "{NOTE}",\n'
        "    },\n"
        "}\n"
    )


def test_floorguard_block_reads_back_to_its_data() -> None:
    block = render_block(load_template(FLOORGUARD), TWO, map_version=7)
    data = read_block(block, "m.py")
    assert data.entries == TWO
    assert data.stated_hash == entries_hash(TWO)
    assert data.map_version == 7
    assert data.layout == FLOORGUARD
    assert list(data.entries) == ["aider", "codex"]


def test_adapters_are_rendered_sorted() -> None:
    unsorted = {"zeta": TWO["codex"], "alpha": TWO["codex"]}
    block = render_block(load_template(FLOORGUARD), unsorted, map_version=1)
    assert block.index('"alpha"') < block.index('"zeta"')


def test_empty_map_renders_and_reads_back() -> None:
    for name in (FLOORGUARD, BERNSTEIN):
        block = render_block(load_template(name), {}, map_version=0)
        data = read_block(block, "m.py")
        assert (data.entries, data.stated_hash, data.map_version) == ({}, entries_hash({}), 0)


def test_same_data_renders_identical_text() -> None:
    first = render_block(load_template(FLOORGUARD), TWO, map_version=2)
    assert render_block(load_template(FLOORGUARD), dict(reversed(TWO.items())), map_version=2) == (
        first
    )


# --- the bernstein layout ---------------------------------------------------------------------


def test_bernstein_block_reads_back_to_its_data() -> None:
    block = render_block(load_template(BERNSTEIN), TWO, map_version=4)
    assert block.startswith("ADAPTER_MIN_SAFE_VERSIONS: dict[str, AdapterAdvisory] = {\n")
    assert '        adapter="aider",\n        min_safe_version="0.60.0",\n' in block
    data = read_block(block, "advisories.py")
    assert (data.entries, data.stated_hash, data.map_version) == (TWO, entries_hash(TWO), 4)
    assert data.layout == BERNSTEIN


def test_bernstein_host_file_without_hash_reads_as_unstated() -> None:
    text = (ASSETS / "bernstein_advisories.py").read_text(encoding="utf-8")
    _, data = read_module(text, "advisories.py")
    assert data.layout == BERNSTEIN
    assert data.stated_hash is None
    assert data.map_version == 0
    assert sorted(data.entries) == ["aider", "goose"]
    assert data.entries["aider"]["min_safe_version"] == "0.60.0"


def test_first_render_into_bernstein_host_keeps_its_code_and_runs(tmp_path: Path) -> None:
    original = (ASSETS / "bernstein_advisories.py").read_text(encoding="utf-8")
    split, _ = read_module(original, "advisories.py")
    block = render_block(load_template(BERNSTEIN), TWO, map_version=1)
    new_text = splice(split, block)
    host = tmp_path / "advisories.py"
    host.write_bytes(original.encode("utf-8"))
    write_atomic(host, new_text.encode("utf-8"))

    written = host.read_text(encoding="utf-8")
    assert written.startswith(split.before + split.begin_line)
    assert written.endswith(split.end_line + split.after)
    _, data = read_module(written, str(host))
    assert (data.entries, data.stated_hash, data.map_version) == (TWO, entries_hash(TWO), 1)
    # The host module still works as Python: its own helper sees the new floors.
    probe = (
        "import runpy, sys; ns = runpy.run_path(sys.argv[1]); a = ns['advisory_for']('codex');"
        " print(a.min_safe_version, ns['ADAPTER_FLOOR_MAP_VERSION'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(host)], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["1.2.3", "1"]


def test_detect_layout_by_assigned_names() -> None:
    assert detect_layout(render_block(load_template(FLOORGUARD), TWO, map_version=1)) == FLOORGUARD
    assert detect_layout(render_block(load_template(BERNSTEIN), TWO, map_version=1)) == BERNSTEIN
    assert detect_layout("# nothing yet\n") is None


# --- templates --------------------------------------------------------------------------------


def test_loads_built_in_templates_by_name() -> None:
    for name in (FLOORGUARD, BERNSTEIN):
        template = load_template(name)
        assert template.layout == name
        assert "{{ map_hash }}" in template.source


def test_refuses_unknown_template_name() -> None:
    with pytest.raises(RenderError, match="unknown template 'jinja'"):
        load_template("jinja")


def test_refuses_missing_template_path(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"absent\.j2: cannot read the template"):
        load_template(str(tmp_path / "absent.j2"))


def test_a_faithful_custom_template_renders(tmp_path: Path) -> None:
    template = custom(
        tmp_path,
        "FLOOR_MAP_HASH = {{ map_hash }}\nFLOOR_MAP_VERSION = {{ map_version }}\n"
        "FLOOR_MAP_ENTRIES = {\n{% for e in entries %}    {{ e.adapter }}: {"
        '"note": {{ e.note }}, "advisory_id": {{ e.advisory_id }}, '
        '"min_safe_version": {{ e.min_safe_version }}},\n{% endfor %}}\n',
    )
    data = read_block(render_block(template, TWO, map_version=5), "m.py")
    assert (data.entries, data.map_version, data.layout) == (TWO, 5, FLOORGUARD)


def test_built_in_template_must_produce_its_own_layout() -> None:
    impostor = Template(FLOORGUARD, load_template(BERNSTEIN).source, FLOORGUARD)
    with pytest.raises(RenderError, match="produced the bernstein layout, not floorguard"):
        render_block(impostor, TWO, map_version=1)


def test_refuses_stated_hash_that_is_not_the_data_hash() -> None:
    with pytest.raises(RenderError, match="is not the floor-map hash"):
        render_block(load_template(FLOORGUARD), TWO, map_version=1, map_hash=HASH)


@pytest.mark.parametrize("version", [-1, True, "3", 2.0])
def test_refuses_map_version_that_is_not_a_natural_number(version: object) -> None:
    with pytest.raises(RenderError, match="map version must be a non-negative integer"):
        render_block(load_template(FLOORGUARD), TWO, map_version=version)  # type: ignore[arg-type]


def test_refuses_entries_of_the_wrong_shape() -> None:
    with pytest.raises(RenderError, match="cannot render the floor map"):
        render_block(load_template(FLOORGUARD), {"aider": {"note": "x"}}, map_version=1)


# --- malicious custom templates are refused, and nothing is written ---------------------------

VALID_HEAD = "FLOOR_MAP_VERSION = {{ map_version }}\nFLOOR_MAP_HASH = {{ map_hash }}\n"
VALID_ENTRIES = (
    "FLOOR_MAP_ENTRIES = {\n{% for e in entries %}    {{ e.adapter }}: {"
    '"advisory_id": {{ e.advisory_id }}, "min_safe_version": {{ e.min_safe_version }}, '
    '"note": {{ e.note }}},\n{% endfor %}}\n'
)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import os\n" + VALID_HEAD + VALID_ENTRIES, id="import_os"),
        pytest.param(
            VALID_HEAD + VALID_ENTRIES + "__import__('os').system('touch {sentinel}')\n",
            id="dunder_import_system_call",
        ),
        pytest.param(
            VALID_HEAD.replace("{{ map_version }}", "__import__('os').system('touch {sentinel}')")
            + VALID_ENTRIES,
            id="code_as_a_value",
        ),
        pytest.param(VALID_HEAD + VALID_ENTRIES + "EXTRA = 1\n", id="extra_assignment"),
        pytest.param(VALID_HEAD + VALID_ENTRIES + "FLOOR_MAP_HASH = 'x'\n", id="reassignment"),
        pytest.param(
            VALID_HEAD + VALID_ENTRIES.replace("{{ e.note }}", "{{ e.note[1:-1] }}"),
            id="unquoted_feed_text",
        ),
        pytest.param(
            VALID_HEAD + VALID_ENTRIES.replace("{{ e.note }}", 'f"{{ e.note[1:-1] }}"'),
            id="f_string",
        ),
        pytest.param(VALID_HEAD + VALID_ENTRIES + f"{END}\nimport os\n", id="emits_end_marker"),
        pytest.param("# -*- coding: utf-7 -*-\n" + VALID_HEAD + VALID_ENTRIES, id="coding_cookie"),
        pytest.param(VALID_HEAD + "FLOOR_MAP_ENTRIES = {}\n", id="drops_the_data"),
        pytest.param("{{ entries.__class__.__mro__ }}\n", id="sandbox_escape"),
        pytest.param("{{ undefined_name }}\n", id="undefined_variable"),
        pytest.param("{% for %}\n", id="template_syntax_error"),
        pytest.param("# only a comment\n", id="no_floor_map"),
        pytest.param(VALID_HEAD + VALID_ENTRIES + "\rimport os\n", id="carriage_return"),
    ],
)
def test_refuses_malicious_custom_template_with_nothing_written(
    tmp_path: Path, source: str
) -> None:
    sentinel = tmp_path / "pwned"
    template = custom(tmp_path, source.replace("{sentinel}", str(sentinel)))
    module = tmp_path / "floor_map.py"
    original = f"# host\n{BEGIN}\n{END}\n".encode()
    module.write_bytes(original)

    def refresh() -> None:
        split, _ = read_module(module.read_text(encoding="utf-8"), str(module))
        write_atomic(module, splice(split, render_block(template, TWO, map_version=1)).encode())

    with pytest.raises(RenderError):
        refresh()
    assert module.read_bytes() == original
    assert not sentinel.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom.py.j2", "floor_map.py"]


# --- hand-edited blocks are refused by read_block ---------------------------------------------

GOOD = render_block(load_template(FLOORGUARD), REFERENCE, map_version=3)
GOOD_B = render_block(load_template(BERNSTEIN), REFERENCE, map_version=3)


@pytest.mark.parametrize(
    ("block", "line"),
    [
        pytest.param("import os\n" + GOOD, 1, id="import_os"),
        pytest.param(GOOD + "os.system('id')\n", 10, id="function_call_statement"),
        pytest.param(GOOD.replace("= 3", '= int("3")'), 1, id="function_call_value"),
        pytest.param(GOOD.replace('"BSA-0001"', 'f"BSA-{1}"'), 5, id="f_string"),
        pytest.param(GOOD.replace('"BSA-0001"', "os.environ"), 5, id="attribute_access"),
        pytest.param(GOOD.replace('"BSA-0001"', '("a" if x else "b")'), 5, id="conditional"),
        pytest.param(GOOD.replace('"BSA-0001"', '(x := "a")'), 5, id="walrus"),
        pytest.param(GOOD.replace('"BSA-0001"', 'b"BSA"'), 5, id="bytes_literal"),
        pytest.param(GOOD.replace("= 3", "= -3"), 1, id="negative_version"),
        pytest.param(GOOD.replace("= 3", "= True"), 1, id="bool_version"),
        pytest.param(GOOD.replace("= 3", "= 3.0"), 1, id="float_version"),
        pytest.param(GOOD + "EXTRA = 1\n", 10, id="extra_assignment"),
        pytest.param(GOOD + "FLOOR_MAP_VERSION = 4\n", 10, id="assigned_twice"),
        pytest.param(GOOD.replace("FLOOR_MAP_VERSION = 3\n", ""), 2, id="missing_version"),
        pytest.param(GOOD.replace("FLOOR_MAP_VERSION =", "A = FLOOR_MAP_VERSION ="), 1, id="chain"),
        pytest.param(GOOD.replace("FLOOR_MAP_VERSION = 3", "FLOOR_MAP_VERSION += 3"), 1, id="aug"),
        pytest.param(
            GOOD.replace("FLOOR_MAP_VERSION =", "FLOOR_MAP_VERSION: __import__('os').getpid() ="),
            1,
            id="annotation_with_code",
        ),
        pytest.param(GOOD.replace("FLOOR_MAP_VERSION =", "FLOOR_MAP_VERSION: int ="), 0, id="ok"),
        pytest.param(GOOD.replace("    },\n}", "    },\n    **{},\n}"), 9, id="dict_unpacking"),
        pytest.param(
            GOOD.replace("    },\n}", '    },\n    "aider": {},\n}'), 9, id="duplicate_adapter"
        ),
        pytest.param(GOOD.replace('"note": ', '"notes": '), 4, id="unknown_field"),
        pytest.param("# coding: utf-7\n" + GOOD, 1, id="coding_cookie"),
        pytest.param(GOOD.replace("= {", "= dict(") + ")", 9, id="not_python"),
        pytest.param("def f():\n    pass\n", 1, id="function_definition"),
        pytest.param("X = 1\n", 1, id="unknown_layout"),
    ],
)
def test_read_block_refuses_anything_but_data(block: str, line: int) -> None:
    if line == 0:  # the control case: a harmless annotation is still data
        assert read_block(block, "m.py").entries == REFERENCE
        return
    with pytest.raises(ModuleError, match=rf"^m\.py: .*other than data: line {line}\b"):
        read_block(block, "m.py")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param("AdapterAdvisory(", "eval(", id="other_callee"),
        pytest.param("AdapterAdvisory(", "x.AdapterAdvisory(", id="attribute_callee"),
        pytest.param('adapter="aider",', '"aider",', id="positional_argument"),
        pytest.param('adapter="aider",', 'adapter="aider", adapter="aider",', id="repeated_kw"),
        pytest.param('adapter="aider",', '**{"adapter": "aider"},', id="kwargs_unpacking"),
        pytest.param('adapter="aider",', 'adapter="claude",', id="adapter_mismatch"),
        pytest.param('note="', 'note=str(1) + "', id="call_in_value"),
        pytest.param(
            '        note="aider', '        extra="x",\n        note="aider', id="extra_kw"
        ),
        pytest.param("dict[str, AdapterAdvisory]", "print('x')", id="annotation_with_code"),
        pytest.param("ADAPTER_FLOOR_MAP_VERSION = 3\n", "", id="hash_without_version"),
    ],
)
def test_read_block_refuses_bernstein_block_that_is_not_data(old: str, new: str) -> None:
    block = GOOD_B.replace(old, new)
    assert block != GOOD_B
    with pytest.raises(ModuleError, match="other than data"):
        read_block(block, "advisories.py")


def test_read_block_reports_module_line_numbers() -> None:
    with pytest.raises(ModuleError, match=r"other than data: line 12\b"):
        read_block(GOOD + "import os\n", "m.py", first_line=3)


def test_read_block_never_executes_the_block(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    block = f"open({str(sentinel)!r}, 'w').close()\n" + GOOD
    with pytest.raises(ModuleError):
        read_block(block, "m.py")
    assert not sentinel.exists()


def test_empty_block_states_nothing() -> None:
    data = read_block("\n# generated by floorctl\n", "m.py")
    assert (data.entries, data.stated_hash, data.map_version, data.layout) == ({}, None, 0, None)


def test_hand_edited_hash_is_read_back_as_stated() -> None:
    # Drift is the caller's check (and --force its override); the block is still data.
    data = read_block(GOOD.replace(HASH, "sha256:bogus"), "m.py")
    assert data.stated_hash == "sha256:bogus"


# --- the block must be where Python sees it ---------------------------------------------------


def test_refuses_block_wrapped_in_a_call_by_the_surrounding_text() -> None:
    block = "ADAPTER_MIN_SAFE_VERSIONS = {}\n"
    assert read_block(block, "m.py").layout == BERNSTEIN  # fine on its own...
    text = f"x = dict(\n{BEGIN}\n{block}{END}\n)\n"  # ...but here only a keyword argument
    with pytest.raises(ModuleError, match="not at module level"):
        read_module(text, "m.py")


def test_refuses_block_hidden_in_a_string_by_the_surrounding_text() -> None:
    text = f'DOC = """\n{BEGIN}\n{GOOD}{END}\n"""\nFLOOR_MAP_VERSION = 99\n'
    with pytest.raises(ModuleError, match="not at module level"):
        read_module(text, "m.py")


def test_read_module_refuses_code_in_block_naming_the_module_line() -> None:
    text = f"# host\n\n{BEGIN}\n{GOOD}import os\n{END}\n"
    with pytest.raises(ModuleError, match=r"^m\.py: .*other than data: line 13\b"):
        read_module(text, "m.py")


def test_read_module_blames_a_block_that_does_not_parse() -> None:
    text = f"# host\n{BEGIN}\n{GOOD}FLOOR_MAP_HASH = (\n{END}\n"
    with pytest.raises(ModuleError, match=r"other than data: line 12: not valid Python"):
        read_module(text, "m.py")


def test_read_module_refuses_coding_cookie_on_the_line_after_begin() -> None:
    # Line 2 of a file whose line 1 is a comment: Python would decode the module as UTF-7.
    text = f"{BEGIN}\n# vim: set fileencoding=utf-7 :\n{GOOD}{END}\n"
    with pytest.raises(ModuleError, match="declares encoding utf-7; it must be UTF-8"):
        read_module(text, "m.py")


def test_read_module_refuses_coding_cookie_anywhere_in_block() -> None:
    text = f"{BEGIN}\n{GOOD}# -*- coding: utf-7 -*-\n{END}\n"
    with pytest.raises(ModuleError, match=r"line 11: a source-encoding declaration"):
        read_module(text, "m.py")


def test_refuses_module_declaring_another_source_encoding() -> None:
    text = f"# -*- coding: latin-1 -*-\n{BEGIN}\n{GOOD}{END}\n"
    with pytest.raises(ModuleError, match="declares encoding iso-8859-1; it must be UTF-8"):
        read_module(text, "m.py")


@pytest.mark.parametrize("name", ["utf-8", "utf8", "UTF8", "UTF_8", "u8"])
def test_reads_a_module_declaring_utf8_under_any_of_its_names(name: str) -> None:
    # (Python decodes each as UTF-8: the strings read here are the ones it would load)
    text = f"# -*- coding: {name} -*-\n{BEGIN}\n{GOOD}{END}\n"
    assert read_module(text, "m.py")[1].entries == REFERENCE


def test_refuses_module_starting_with_a_byte_order_mark_saying_so() -> None:
    with pytest.raises(ModuleError, match="starts with a byte order mark"):
        read_module(f"\ufeff# host\n{BEGIN}\n{GOOD}{END}\n", "m.py")


def test_accepts_module_declaring_utf8() -> None:
    _, data = read_module(f"# coding: utf-8\n{BEGIN}\n{GOOD}{END}\n", "m.py")
    assert data.entries == REFERENCE


def test_refuses_module_that_is_not_python_around_the_block() -> None:
    with pytest.raises(
        ModuleError, match=r"m\.py: floor-map module is not valid Python \(line 1\)"
    ):
        read_module(f"def (:\n{BEGIN}\n{GOOD}{END}\n", "m.py")


def test_read_module_reads_the_shipped_module_and_its_hash_matches() -> None:
    shipped = Path(__file__).parents[2] / "generated" / "floorguard" / "floor_map.py"
    _, data = read_module(shipped.read_text(encoding="utf-8"), str(shipped))
    assert "aider" in data.entries
    assert data.stated_hash == entries_hash(data.entries)
    assert data.map_version >= 1


# --- properties: arbitrary text in every field, both templates ---------------------------------

# Surrogates are excluded (UTF-8 cannot carry them; see the test below); the nastiest
# characters are made frequent.
nasty = st.text(
    alphabet=st.one_of(
        st.sampled_from(['"', "'", "\\", "\n", "\r", "\x00", "{", "}", "%", "#", "\u2028", "\x85"]),
        st.characters(exclude_categories=("Cs",)),
    )
) | st.sampled_from(['"""', "{{ map_hash }}", "{% if %}", "\\x00", '"); import os; ("', "\\"])
# (a floor with a local label, "+", is refused by every map: the gate compares releases)
floors = nasty.filter(lambda text: "+" not in text)
entry = st.fixed_dictionaries({"min_safe_version": floors, "advisory_id": nasty, "note": nasty})
# An entry's key is an adapter name (a map with any other key is refused: below), its
# fields any text.
adapter_names = st.from_regex(ADAPTER_NAME_FORM, fullmatch=True)
entries_st = st.dictionaries(adapter_names, entry, max_size=4)


@settings(max_examples=150)
@given(
    entries=entries_st,
    version=st.integers(min_value=0, max_value=2**70),
    name=st.sampled_from([FLOORGUARD, BERNSTEIN]),
)
def test_any_text_renders_to_data_that_reads_back_exactly(
    entries: dict[str, dict[str, str]], version: int, name: str
) -> None:
    # Refusing would be safe, but every text has a literal, so rendering must succeed.
    block = render_block(load_template(name), entries, map_version=version)
    tree = ast.parse(block)
    assert all(isinstance(node, DATA_NODES) for node in ast.walk(tree))
    data = read_block(block, "m.py")
    assert (data.entries, data.stated_hash, data.map_version) == (
        entries,
        entries_hash(entries),
        version,
    )
    assert data.layout == name


@settings(max_examples=100)
@given(
    entries=entries_st,
    before=st.text().filter(lambda t: all(ln.strip() not in (BEGIN, END) for ln in t.split("\n"))),
    after=st.text().filter(lambda t: all(ln.strip() not in (BEGIN, END) for ln in t.split("\n"))),
    newline=st.sampled_from(["\n", "\r\n"]),
)
def test_spliced_render_keeps_surroundings_and_is_idempotent(
    entries: dict[str, dict[str, str]], before: str, after: str, newline: str
) -> None:
    text = f"{before}{newline}{BEGIN}{newline}{END}{newline}{after}"
    block = render_block(load_template(FLOORGUARD), entries, map_version=1)
    once = splice(split_module(text, "m.py"), block)
    assert once.startswith(f"{before}{newline}{BEGIN}{newline}")
    assert once.endswith(f"{END}{newline}{after}")
    again = splice(split_module(once, "m.py"), block)
    assert again == once
    assert read_block(split_module(once, "m.py").block, "m.py").entries == entries


@settings(max_examples=100)
@given(name=nasty.filter(lambda text: not ADAPTER_NAME.match(text)), fields=entry)
def test_an_entry_under_any_other_key_is_refused_never_rendered(
    name: str, fields: dict[str, str]
) -> None:
    for template in (FLOORGUARD, BERNSTEIN):
        with pytest.raises(RenderError, match="not a valid adapter name"):
            render_block(load_template(template), {name: fields}, map_version=1)


@given(value=nasty)
def test_py_literal_is_one_line_and_evaluates_to_the_value(value: str) -> None:
    literal = py_literal(value)
    assert "\n" not in literal
    assert "\r" not in literal
    assert ast.literal_eval(literal) == value
    parsed = ast.parse(literal, mode="eval").body
    assert isinstance(parsed, ast.Constant)


def test_refuses_text_that_utf8_cannot_carry() -> None:
    entries = {"aider": {**REFERENCE["aider"], "note": "\ud800"}}
    with pytest.raises(RenderError, match="cannot hash the floor map"):
        render_block(load_template(FLOORGUARD), entries, map_version=1)


def test_py_literal_refuses_other_types() -> None:
    for value in (True, -1, 1.5, None, b"x"):
        with pytest.raises(RenderError):
            py_literal(value)  # type: ignore[arg-type]


def test_a_rendered_module_imports_without_running_anything_else(tmp_path: Path) -> None:
    # The real interpreter agrees with the ast gate: importing the module defines data only.
    entries = {
        "evil": {"min_safe_version": '"); import os; ("', "advisory_id": "\\", "note": "\u2028"}
    }
    block = render_block(load_template(FLOORGUARD), entries, map_version=1)
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
    result = subprocess.run(
        [sys.executable, "-c", probe, str(module)], capture_output=True, text=True, check=True
    )
    names, loaded = json.loads(result.stdout)
    assert names == ["FLOOR_MAP_ENTRIES", "FLOOR_MAP_HASH", "FLOOR_MAP_VERSION"]
    assert loaded == entries
