"""Advisory feeds, schema version 1: what is accepted, and every attack that is refused.

Each refusal names the file and the JSON path of the problem; a feed with several problems
reports all of them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorctl import feeds
from floorctl.errors import FeedError
from floorctl.feeds import MAX_ADAPTERS, MAX_FEED_BYTES, load_feed, parse_feed, validate_paths

SOURCE = "feeds/x.json"
REPO = Path(__file__).resolve().parents[2]

# The reference schema-1 feed (docs/feeds.md), byte for byte.
REFERENCE = b"""{"schema_version": 1,
 "adapters": {"aider": {"min_safe_version": "0.60.0", "advisory_id": "BSA-0001",
                        "note": "aider below 0.60.0 is known-unsafe for spawned use; upgrade recommended."}}}"""  # noqa: E501


def entry(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "min_safe_version": "1.2.3",
        "advisory_id": "BSA-0001",
        "note": "below 1.2.3 is known-unsafe; upgrade.",
    }
    base.update(fields)
    return base


def feed(adapters: Any = None, **top: Any) -> bytes:
    document: dict[str, Any] = {
        "schema_version": 1,
        "adapters": {"aider": entry()} if adapters is None else adapters,
    }
    document.update(top)
    return json.dumps(document).encode()


def with_note(note: str) -> bytes:
    return feed({"aider": entry(note=note)})


def problems(data: bytes) -> list[tuple[str, str, str]]:
    with pytest.raises(FeedError) as refused:
        parse_feed(data, SOURCE)
    assert refused.value.problems, "a refusal must say why"
    return refused.value.problems


def assert_refused(data: bytes, path: str, fragment: str = "") -> None:
    found = problems(data)
    assert any(
        file == SOURCE and where == path and fragment in message for file, where, message in found
    ), f"expected {path!r} ({fragment!r}) among {found!r}"


# --- accepted ---


def test_accepts_the_contract_reference_feed_exactly_as_written() -> None:
    result = parse_feed(REFERENCE, SOURCE)
    assert result.source == SOURCE
    assert result.schema_version == 1
    assert result.digest == "sha256:" + hashlib.sha256(REFERENCE).hexdigest()
    advisory = result.floor_map["aider"]
    assert (advisory.min_safe_version, advisory.advisory_id) == ("0.60.0", "BSA-0001")
    assert advisory.note.startswith("aider below 0.60.0")


def test_accepts_the_shipped_example_feed() -> None:
    result = load_feed(REPO / "feeds" / "example.v1.json")
    assert set(result.floor_map) == {"aider", "claude", "codex", "gemini", "goose", "gptme"}


def test_floor_map_is_read_only() -> None:
    result = parse_feed(REFERENCE, SOURCE)
    with pytest.raises(TypeError):
        result.floor_map["aider"] = result.floor_map["aider"]  # type: ignore[index]


@pytest.mark.parametrize(
    "advisory_id",
    ["BSA-0001", "GHSA-jfh8-c2jp-5v3q", "CVE-2024-1234", "PYSEC-2024-12", "OSV-2024-1"],
)
def test_accepts_advisory_ids_of_known_databases(advisory_id: str) -> None:
    assert parse_feed(feed({"a": entry(advisory_id=advisory_id)}), SOURCE).floor_map["a"]


@pytest.mark.parametrize("version", ["0.60.0", "1!2.0", "1.0rc1", "1.0.post2.dev3"])
def test_accepts_pep440_versions(version: str) -> None:
    result = parse_feed(feed({"a": entry(min_safe_version=version)}), SOURCE)
    assert result.floor_map["a"].min_safe_version == version


def test_refuses_a_floor_with_a_local_label() -> None:
    # (the gate compares releases: a floor of 1.0+local.7 would let 1.0 run, which PEP 440
    # puts below it)
    assert_refused(
        feed({"a": entry(min_safe_version="1.0+local.7")}),
        "$.adapters.a.min_safe_version",
        "local version label",
    )


@pytest.mark.parametrize("name", ["aider", "0x", "gpt.me", "my_tool-2", "a" * 64])
def test_accepts_adapter_names_in_the_pattern(name: str) -> None:
    assert name in parse_feed(feed({name: entry()}), SOURCE).floor_map


def test_accepts_a_note_with_apostrophes_and_non_ascii_letters() -> None:
    note = "aider's spawn mode is unsafe (Zürich report); upgrade."
    assert parse_feed(with_note(note), SOURCE).floor_map["aider"].note == note


def test_accepts_a_note_of_exactly_1000_characters() -> None:
    assert parse_feed(with_note("n" * 1000), SOURCE)


def test_accepts_a_feed_with_no_adapters() -> None:
    assert len(parse_feed(feed({}), SOURCE).floor_map) == 0


@pytest.mark.slow
def test_accepts_100000_adapters() -> None:
    adapters = {f"a{i}": entry() for i in range(MAX_ADAPTERS)}
    assert len(parse_feed(feed(adapters), SOURCE).floor_map) == MAX_ADAPTERS


def test_accepts_a_file_of_exactly_16_mib(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(REFERENCE + b" " * (MAX_FEED_BYTES - len(REFERENCE)))
    assert path.stat().st_size == MAX_FEED_BYTES
    assert "aider" in load_feed(path).floor_map


# --- refused: not JSON, or not the right JSON ---


@pytest.mark.parametrize(
    "data",
    [
        b'{"schema_version": 1,',
        b"{'schema_version': 1}",
        b'{"schema_version": 1} x',
        b"[" * 100_000,
    ],
)
def test_refuses_malformed_json(data: bytes) -> None:
    assert_refused(data, "$", "malformed JSON")


@pytest.mark.parametrize("digits", ["9" * 5000, "-" + "9" * 5000])
def test_refuses_an_integer_past_the_digit_limit_naming_its_path(digits: str) -> None:
    # (Python reads at most 4,300 digits of an integer: its own error names no field)
    data = b'{"schema_version": 1, "adapters": {"a": {"x": ' + digits.encode() + b"}}}"
    found = problems(data)
    assert "$.adapters.a.x" in [where for _, where, _ in found], found
    assert all("set_int_max_str_digits" not in message for _, _, message in found), found
    assert any("5,000 digits" in message for _, _, message in found), found


def test_refuses_an_empty_file() -> None:
    assert_refused(b"", "$", "empty")
    assert_refused(b" \n\t", "$", "empty")


def test_refuses_a_byte_order_mark() -> None:
    assert_refused(b"\xef\xbb\xbf" + REFERENCE, "$", "byte order mark")


@pytest.mark.parametrize(
    "data", [b'{"a": "\xff"}', b"\xfe\xff\x00{", REFERENCE.replace(b"a", b"\xc3", 1)]
)
def test_refuses_invalid_utf8(data: bytes) -> None:
    assert_refused(data, "$", "not valid UTF-8")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_refuses_nan_and_infinity(constant: str) -> None:
    assert_refused(f'{{"schema_version": {constant}, "adapters": {{}}}}'.encode(), "$", constant)


@pytest.mark.parametrize(
    ("data", "kind"),
    [(b"[]", "array"), (b'"feed"', "string"), (b"null", "null"), (b"1", "integer")],
)
def test_refuses_a_top_level_that_is_not_an_object(data: bytes, kind: str) -> None:
    assert_refused(data, "$", f"must be a JSON object, not {kind}")


def test_refuses_feed_with_duplicate_keys_at_the_top_level() -> None:
    data = b'{"schema_version": 1, "adapters": {}, "adapters": {}}'
    assert_refused(data, "$.adapters", "duplicate key")


def test_refuses_feed_with_duplicate_keys_inside_an_entry() -> None:
    data = (
        b'{"schema_version": 1, "adapters": {"aider": {"min_safe_version": "9.0",'
        b' "min_safe_version": "0.1", "advisory_id": "A", "note": "n"}}}'
    )
    assert_refused(data, "$.adapters.aider.min_safe_version", "duplicate key")


def test_refuses_feed_with_the_same_adapter_twice() -> None:
    # The second entry would silently replace the first (a quiet downgrade).
    data = (
        b'{"schema_version": 1, "adapters": {'
        b'"aider": {"min_safe_version": "9.0", "advisory_id": "A", "note": "n"},'
        b'"aider": {"min_safe_version": "0.1", "advisory_id": "A", "note": "n"}}}'
    )
    assert_refused(data, "$.adapters.aider", "duplicate key")


# --- refused: schema version ---


@pytest.mark.parametrize("version", [0, 4, -1, 10**30])
def test_refuses_unsupported_schema_versions(version: int) -> None:
    assert_refused(
        feed(schema_version=version),
        "$.schema_version",
        f"unsupported schema_version {version} (this floorctl reads 1, 2, 3)",
    )


@pytest.mark.parametrize(
    ("version", "shown"), [("1", "'1'"), (True, "true"), (1.0, "1.0"), (None, "null")]
)
def test_refuses_a_schema_version_that_is_not_the_integer_1(version: Any, shown: str) -> None:
    assert_refused(feed(schema_version=version), "$.schema_version", shown)


def test_refuses_a_missing_schema_version() -> None:
    assert_refused(b'{"adapters": {}}', "$.schema_version", "required field missing")


# --- refused: structure ---


def test_refuses_a_missing_adapters_object() -> None:
    assert_refused(b'{"schema_version": 1}', "$.adapters", "required field missing")


def test_refuses_adapters_as_a_list() -> None:
    assert_refused(feed([entry()]), "$.adapters", "must be an object, not array")


def test_refuses_an_entry_that_is_not_an_object() -> None:
    assert_refused(feed({"aider": "0.60.0"}), "$.adapters.aider", "must be an object, not string")


def test_refuses_a_version_given_as_a_number() -> None:
    assert_refused(
        feed({"aider": entry(min_safe_version=0.6)}),
        "$.adapters.aider.min_safe_version",
        "must be a string, not number",
    )


def test_refuses_a_note_given_as_a_list() -> None:
    assert_refused(
        feed({"aider": entry(note=["a"])}), "$.adapters.aider.note", "must be a string, not array"
    )


def test_refuses_an_advisory_id_given_as_null() -> None:
    assert_refused(
        feed({"aider": entry(advisory_id=None)}), "$.adapters.aider.advisory_id", "not null"
    )


@pytest.mark.parametrize("field", ["min_safe_version", "advisory_id", "note"])
def test_refuses_an_entry_missing_a_field(field: str) -> None:
    incomplete = entry()
    del incomplete[field]
    assert_refused(
        feed({"aider": incomplete}), f"$.adapters.aider.{field}", "required field missing"
    )


def test_refuses_unknown_fields_at_the_top_level() -> None:
    assert_refused(feed(signature="x"), "$.signature", "unknown field")


def test_refuses_unknown_fields_in_an_entry() -> None:
    assert_refused(
        feed({"aider": entry(severity="high")}), "$.adapters.aider.severity", "unknown field"
    )


def test_refuses_too_many_adapters() -> None:
    adapters = {f"a{i}": entry() for i in range(MAX_ADAPTERS + 1)}
    assert_refused(feed(adapters), "$.adapters", "too many adapters: 100,001")


def test_refuses_bytes_over_16_mib_even_when_given_directly() -> None:
    assert_refused(REFERENCE + b" " * MAX_FEED_BYTES, "$", "larger than")


# --- refused: adapter names ---


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("../x", '$.adapters["../x"]'),
        ("a/b", '$.adapters["a/b"]'),
        ("Aider", "$.adapters.Aider"),
        (".aider", '$.adapters[".aider"]'),
        ("-aider", '$.adapters["-aider"]'),
        ("_aider", "$.adapters._aider"),
        ("a" * 65, "$.adapters." + "a" * 65),
        ("", '$.adapters[""]'),
        ("ai der", '$.adapters["ai der"]'),
        ("aider\n", '$.adapters["aider\\x0a"]'),
        ("aider\x00", '$.adapters["aider\\x00"]'),
    ],
)
def test_refuses_adapter_names_outside_the_pattern(name: str, path: str) -> None:
    assert_refused(feed({name: entry()}), path, "not a valid adapter name")


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("\u0430ider", '$.adapters["\\u0430ider"]'),  # Cyrillic a
        ("\uff41ider", '$.adapters["\\uff41ider"]'),  # fullwidth a
        ("a\u200bider", '$.adapters["a\\u200bider"]'),  # zero-width space
        ("aider\u212a", '$.adapters["aider\\u212a"]'),  # Kelvin sign, folds to k
    ],
)
def test_refuses_unicode_look_alike_adapter_names(name: str, path: str) -> None:
    assert_refused(feed({name: entry()}), path, "ASCII only")


def test_escapes_terminal_control_sequences_in_reported_names() -> None:
    found = problems(feed({"\x1b[2J\x1b]0;pwned\x07": entry()}))
    text = "\n".join(": ".join(problem) for problem in found)
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in text


# --- refused: min_safe_version ---


@pytest.mark.parametrize(
    "version", ["1.0 beta", "latest", "1.0-", "1..0", "v", "1.0.x", "\u0661.0"]
)
def test_refuses_a_version_that_is_not_pep440(version: str) -> None:
    assert_refused(
        feed({"aider": entry(min_safe_version=version)}),
        "$.adapters.aider.min_safe_version",
        "is not a valid PEP 440 version",
    )


def test_reports_the_version_in_the_contract_message_form() -> None:
    assert (
        SOURCE,
        "$.adapters.aider.min_safe_version",
        "'1.0 beta' is not a valid PEP 440 version",
    ) in problems(feed({"aider": entry(min_safe_version="1.0 beta")}))


def test_refuses_an_empty_version() -> None:
    assert_refused(
        feed({"aider": entry(min_safe_version="")}), "$.adapters.aider.min_safe_version", "empty"
    )


@pytest.mark.parametrize("version", [" 1.0", "1.0 ", "1.0\n", "\t1.0", "1.0\u00a0"])
def test_refuses_a_version_with_surrounding_whitespace(version: str) -> None:
    assert_refused(
        feed({"aider": entry(min_safe_version=version)}),
        "$.adapters.aider.min_safe_version",
        "surrounding whitespace",
    )


def test_refuses_a_version_with_a_look_alike_letter() -> None:
    # packaging matches case-insensitively; the Kelvin sign must not pass as "k".
    assert_refused(
        feed({"aider": entry(min_safe_version="1.0+\u212a")}),
        "$.adapters.aider.min_safe_version",
        "PEP 440",
    )


def test_refuses_an_absurdly_long_version_without_crashing() -> None:
    assert_refused(
        feed({"aider": entry(min_safe_version="1" * 5000)}),
        "$.adapters.aider.min_safe_version",
        "too long",
    )


# --- refused: advisory_id ---


@pytest.mark.parametrize(
    ("advisory_id", "fragment"),
    [
        ("BSA 0001", "not an advisory id"),
        ("BSA--0001", "not an advisory id"),
        ("-BSA", "not an advisory id"),
        ("BSA-", "not an advisory id"),
        ("BSA-0001\n", "not an advisory id"),
        ("BSA_0001", "not an advisory id"),
        ("B\u0405A-1", "not an advisory id"),  # Cyrillic S
        ("A" * 65, "too long"),
        ("", "empty"),
    ],
)
def test_refuses_malformed_advisory_ids(advisory_id: str, fragment: str) -> None:
    assert_refused(
        feed({"aider": entry(advisory_id=advisory_id)}), "$.adapters.aider.advisory_id", fragment
    )


# --- refused: notes ---


@pytest.mark.parametrize(
    ("note", "fragment"),
    [
        ("line one\nline two", "U+000A"),
        ("carriage\rreturn", "U+000D"),
        ("line\u2028separator", "U+2028"),
        ("paragraph\u2029separator", "U+2029"),
        ("nul\x00byte", "U+0000"),
        ("escape \x1b[31mred", "U+001B"),
        ("bidi \u202eoverride", "U+202E"),
        ("tab\there", "U+0009"),
        ("del\x7f", "U+007F"),
        ("lone \ud800 surrogate", "U+D800"),
        ('say "hi"', "double quote"),
        ('end """ of docstring', "double quote"),
        ("back\\slash", "backslash"),
        ("{{ x }}", "template syntax"),
        ("{% x %}", "template syntax"),
        ("{# x #}", "template syntax"),
        ("closing }} only", "template syntax"),
        ("n" * 1001, "too long"),
        ("", "empty"),
    ],
)
def test_refuses_unsafe_notes(note: str, fragment: str) -> None:
    assert_refused(with_note(note), "$.adapters.aider.note", fragment)


# --- every problem, not only the first ---


def test_reports_every_problem_not_only_the_first() -> None:
    data = feed(
        {
            "aider": entry(min_safe_version="1.0 beta"),
            "Codex": entry(),
            "goose": entry(note="two\nlines"),
        }
    )
    assert [path for _, path, _ in problems(data)] == [
        "$.adapters.Codex",
        "$.adapters.aider.min_safe_version",
        "$.adapters.goose.note",
    ]


def test_reports_problems_at_every_level_together() -> None:
    data = feed({"aider": entry(extra=1, note=["x"]), "ok": entry()}, extra=True)
    found = {path for _, path, _ in problems(data)}
    assert found == {"$.extra", "$.adapters.aider.extra", "$.adapters.aider.note"}


def test_reports_each_problem_once() -> None:
    found = problems(feed({"aider": entry(min_safe_version="")}))
    assert len(found) == len(set(found)) == 1


# --- files ---


def test_refuses_a_file_over_16_mib_without_parsing_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    path.write_bytes(REFERENCE + b" " * (MAX_FEED_BYTES - len(REFERENCE) + 1))
    with pytest.raises(FeedError) as refused:
        load_feed(path)
    ((file, where, message),) = refused.value.problems
    assert (file, where) == (str(path), "$")
    assert "larger than 16,777,216 bytes" in message


def test_refuses_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(FeedError) as refused:
        load_feed(path)
    assert refused.value.problems == [
        (str(path), "$", "cannot read the feed: No such file or directory")
    ]


def test_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(FeedError) as refused:
        load_feed(tmp_path)
    assert "not a regular file (the feed is a folder)" in refused.value.problems[0][2]


def test_validate_paths_lists_the_problems_of_every_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_bytes(REFERENCE)
    bad_one = tmp_path / "bad1.json"
    bad_one.write_bytes(b"[]")
    bad_two = tmp_path / "bad2.json"
    bad_two.write_bytes(with_note("x\ny"))
    assert validate_paths([good]) == []
    found = validate_paths([bad_one, good, bad_two])
    assert [(file, path) for file, path, _ in found] == [
        (str(bad_one), "$"),
        (str(bad_two), "$.adapters.aider.note"),
    ]


# --- properties ---

TEMPLATE_SYNTAX = ("{{", "}}", "{%", "%}", "{#", "#}")


@settings(max_examples=300)
@given(st.text(max_size=1200))
def test_any_note_is_either_safe_or_refused(note: str) -> None:
    try:
        result = parse_feed(with_note(note), SOURCE)
    except FeedError:
        return
    accepted = result.floor_map["aider"].note
    assert accepted == note
    assert 0 < len(accepted) <= 1000
    assert accepted.isprintable()
    assert '"' not in accepted and "\\" not in accepted
    assert not any(token in accepted for token in TEMPLATE_SYNTAX)


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_feed_error(data: bytes) -> None:
    try:
        parse_feed(data, SOURCE)
    except FeedError as refused:
        assert refused.problems


# Values near the edges of every rule, to hold the fast path (schema skipped for entries that
# pass the semantic checks) in step with running the schema on every entry.
_edgy_text = st.one_of(
    st.text(max_size=70),
    st.sampled_from(
        ["1.0", "1.0\n", "BSA-0001", "", " ", "1.0 beta", "A--B", "a.b", "{{"]
        + [c * n for c in "1aA" for n in (63, 64, 65, 127, 128, 129)]
        + ["x" * n for n in (999, 1000, 1001)]
    ),
    st.text(alphabet="aZ09.-_!+ \n", max_size=70),
)
_edgy_value = st.one_of(_edgy_text, st.integers(), st.none(), st.lists(st.integers(), max_size=2))


def _mostly(valid: str) -> st.SearchStrategy[Any]:
    # Half valid, so that entries with exactly one doubtful field are common.
    return st.one_of(st.just(valid), _edgy_value)


_entries = st.fixed_dictionaries(
    {
        "min_safe_version": _mostly("1.0"),
        "advisory_id": _mostly("BSA-0001"),
        "note": _mostly("upgrade."),
    },
    optional={"extra": _edgy_value},
)


@settings(max_examples=500)
@given(
    st.dictionaries(
        st.one_of(st.just("aider"), _edgy_text), st.one_of(_entries, _edgy_value), max_size=3
    )
)
def test_skipping_the_schema_for_clean_entries_changes_no_verdict(adapters: dict[str, Any]) -> None:
    document = {"schema_version": 1, "adapters": adapters}
    assert sorted(feeds._check(document, 1)) == sorted(feeds._check(document, 1, whole=True))


_BOUNDARY_VALUES = (
    [
        ("min_safe_version", value)
        for value in ["1" * n for n in (1, 127, 128, 129)] + ["1.0\n", " 1.0", "1.0 beta", "v1", ""]
    ]
    + [
        ("advisory_id", value)
        for value in ["A" * n for n in (1, 63, 64, 65)] + ["A-", "A--B", "A\n", ""]
    ]
    + [
        ("note", value)
        for value in ["n" * n for n in (1, 999, 1000, 1001)] + ["", "a\nb", '"', "{{"]
    ]
)


@pytest.mark.parametrize(("field", "value"), _BOUNDARY_VALUES)
def test_fast_path_agrees_with_the_schema_at_each_field_boundary(field: str, value: str) -> None:
    document = {"schema_version": 1, "adapters": {"aider": entry(**{field: value})}}
    assert sorted(feeds._check(document, 1)) == sorted(feeds._check(document, 1, whole=True))


@pytest.mark.parametrize(
    "name", ["a" * n for n in (1, 63, 64, 65)] + ["aider\n", "Aider", ".a", "-a", "\u0430", ""]
)
def test_fast_path_agrees_with_the_schema_on_adapter_names(name: str) -> None:
    document = {"schema_version": 1, "adapters": {name: entry()}}
    assert sorted(feeds._check(document, 1)) == sorted(feeds._check(document, 1, whole=True))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300)
@given(
    st.fixed_dictionaries(
        {"schema_version": st.one_of(st.just(1), _json_values), "adapters": _json_values},
        optional={"extra": _json_values},
    )
    | _json_values
)
def test_arbitrary_json_documents_raise_only_feed_error(document: Any) -> None:
    try:
        result = parse_feed(json.dumps(document).encode(), SOURCE)
    except FeedError as refused:
        assert all(file == SOURCE and path.startswith("$") for file, path, _ in refused.problems)
    else:
        # Version 3 needs no identity fields: {"schema_version": 3, "adapters": {}} is valid.
        assert result.schema_version in (1, 3)


def test_shortens_a_huge_key_in_the_reported_path() -> None:
    found = problems(feed(**{"k" * 1_000_000: 1}))
    ((_, path, _),) = found
    assert path == '$["' + "k" * 100 + '..."]'
