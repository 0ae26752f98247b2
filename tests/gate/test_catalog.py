"""Parsing ``--version`` output: whole-line patterns per adapter, a generic fallback that
refuses to guess, and PEP 440 validation of everything accepted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from floorguard._maps import versions
from floorguard._maps.catalog import (
    CATALOG,
    entry_for,
    executable_for,
    parse_generic,
    parse_version_output,
    validate_version,
)
from floorguard.errors import DetectionError

# What the real CLIs print for --version (as reported in their issue trackers and release
# notes), and the version floorguard must read from it.
REAL_OUTPUTS = [
    ("aider", "aider 0.86.1\n", "0.86.1"),
    ("amp", "0.0.1755000000-g1234abc\n", "0.0.1755000000-g1234abc"),
    ("claude", "1.0.51 (Claude Code)\n", "1.0.51"),
    ("codex", "codex-cli 0.5.0\n", "0.5.0"),
    ("gemini", "0.1.12\n", "0.1.12"),
    ("goose", " 1.0.29\n", "1.0.29"),
    ("goose", "goose-cli 1.0.4\n", "1.0.4"),
    ("gptme", "gptme v0.27.0\n", "0.27.0"),
    ("gptme", "gptme, version 0.27.0\n", "0.27.0"),
    (
        "gptme",
        "gptme v0.32.1+unknown\nPython 3.14.6 on Darwin [uv]\nTools: 30 available\n",
        "0.32.1+unknown",
    ),
    ("gptme", "0.32.2\n", "0.32.2"),
    ("opencode", "0.3.58\n", "0.3.58"),
    ("opencode", "v0.3.58\n", "0.3.58"),
    ("qwen", "0.0.9\n", "0.0.9"),
]


@pytest.mark.parametrize(("adapter", "output", "expected"), REAL_OUTPUTS)
def test_reads_each_real_version_format(adapter: str, output: str, expected: str) -> None:
    assert parse_version_output(adapter, output) == expected


def test_every_catalogued_adapter_has_a_real_format_test() -> None:
    assert {adapter for adapter, _, _ in REAL_OUTPUTS} == set(CATALOG)


def test_ignores_warning_lines_around_the_version_line() -> None:
    output = "(node:42) Warning: something is deprecated in 18.0.0\n1.0.51 (Claude Code)\n"
    assert parse_version_output("claude", output) == "1.0.51"


def test_repeated_identical_version_is_not_ambiguous() -> None:
    assert parse_version_output("gemini", "0.1.12\n0.1.12\n") == "0.1.12"


def test_refuses_two_different_version_lines() -> None:
    with pytest.raises(DetectionError, match=r"ambiguous version output: found 0\.1\.12, 0\.1\.13"):
        parse_version_output("gemini", "0.1.12\n0.1.13\n")


def test_a_bare_version_is_not_codex_s_answer() -> None:
    # Only the TypeScript codex printed one, and it is a script, never asked: a native
    # program answering so under codex's name (ninja's 1.11.1) is another program.
    with pytest.raises(DetectionError, match="version format expected for codex"):
        parse_version_output("codex", "1.11.1\n")


def test_refuses_output_not_in_the_adapters_format() -> None:
    # A bare number is not what claude prints: a different program may be answering.
    with pytest.raises(DetectionError, match="version format expected for claude"):
        parse_version_output("claude", "1.0.51\n")


@pytest.mark.parametrize("adapter", ["amp", "codex", "gemini", "goose", "gptme", "qwen"])
def test_refuses_nodes_own_version_line_for_adapters_that_print_no_v(adapter: str) -> None:
    # ``v20.20.2`` is what node itself answers: none of these CLIs prints a bare version
    # with a leading v, so a copy of node under their name is not taken for them.
    with pytest.raises(DetectionError):
        parse_version_output(adapter, "v20.20.2\n")


def test_refuses_first_number_like_token_inside_prose() -> None:
    # The reference implementation would have taken 18.0.0 here.
    with pytest.raises(DetectionError):
        parse_version_output("aider", "Node 18.0.0 is required; found 16.0.0\n")


def test_refuses_version_embedded_mid_line_for_catalogued_adapter() -> None:
    with pytest.raises(DetectionError):
        parse_version_output("gemini", "gemini 0.1.12 but really 9.9.9\n")


def test_refuses_a_version_that_is_neither_pep_440_nor_semver() -> None:
    with pytest.raises(DetectionError, match="not a valid PEP 440 or SemVer version"):
        parse_version_output("gemini", "0.1.12-nightly.2025-01-01_x\n")
    with pytest.raises(DetectionError, match="not a valid PEP 440 or SemVer version"):
        parse_version_output("gemini", "0.1.012-nightly\n")  # SemVer: no leading zeros


@pytest.mark.parametrize(
    "printed", ["0.5.0-nightly.20250911.a1b2c3", "0.6.0-preview.1", "0.1.12-nightly.20250101"]
)
def test_an_npm_version_reaches_judging_exactly_as_printed(printed: str) -> None:
    # Neither refused as not PEP 440 (nightly) nor read as 0.6.0rc1 (preview): kept as
    # written, for the map entry's ecosystem to judge.
    assert parse_version_output("gemini", printed + "\n") == printed
    assert validate_version(printed) == printed


def test_accepts_semver_prerelease_that_pep_440_understands() -> None:
    assert parse_version_output("gemini", "0.2.0-preview.1\n") == "0.2.0-preview.1"
    assert Version("0.2.0-preview.1") < Version("0.2.0")


def test_git_suffix_stays_a_semver_prerelease_for_every_adapter() -> None:
    # amp is an npm CLI: "-g<hex>" is a SemVer pre-release, below the release. Rewriting it
    # as "+g<hex>" build metadata would make SemVer order it equal to the release.
    for adapter in ("amp", "gemini"):
        printed = parse_version_output(adapter, "0.0.1755000000-g1234abc\n")
        assert printed == "0.0.1755000000-g1234abc"
        assert versions.compare(printed, "0.0.1755000000", versions.NPM) < 0


def test_generic_parser_takes_the_single_token() -> None:
    assert parse_generic("mytool version v2.3.4 (built by ci)\n") == "2.3.4"


def test_generic_parser_refuses_several_different_tokens() -> None:
    with pytest.raises(DetectionError, match=r"ambiguous version output: found 1\.2\.3, 4\.5\.6"):
        parse_generic("mytool 1.2.3 (runtime 4.5.6)\n")


def test_generic_parser_refuses_output_without_a_version() -> None:
    with pytest.raises(DetectionError, match="no version found"):
        parse_generic("usage: mytool [options]\n")


def test_generic_parser_does_not_split_words_with_digits() -> None:
    with pytest.raises(DetectionError, match="no version found"):
        parse_generic("built with python3.11 and gcc-13.2\n")


def test_refuses_absurdly_long_version_token_without_crashing() -> None:
    with pytest.raises(DetectionError, match="longer than"):
        parse_generic("1." + "9" * 5000 + "\n")


def test_pathological_output_is_parsed_in_linear_time() -> None:
    # Alternating separators and letters that would make a backtracking pattern explode.
    hostile = "1.2" + "a-" * 20000 + "+"
    with pytest.raises(DetectionError):
        parse_generic(hostile)
    with pytest.raises(DetectionError):
        parse_version_output("gemini", hostile)


def test_unknown_adapters_use_the_generic_parser() -> None:
    assert parse_version_output("mytool", "mytool 3.1.4\n") == "3.1.4"


def test_refuses_invalid_adapter_names() -> None:
    for name in ("", "../claude", "Claude", "a" * 65, "claude\n"):
        with pytest.raises(DetectionError, match="invalid adapter name"):
            entry_for(name)


def test_executable_names() -> None:
    assert executable_for("claude") == "claude"
    assert executable_for("codex") == "codex"
    assert executable_for("not-catalogued") == "not-catalogued"


def test_validate_version_keeps_the_string_as_written() -> None:
    assert validate_version("1.0.0-beta.1") == "1.0.0-beta.1"
    with pytest.raises(DetectionError):
        validate_version("latest")


# -------------------------------------------------------------------------- properties


@given(st.text(max_size=400))
def test_generic_parser_never_invents_a_version(text: str) -> None:
    try:
        found = parse_generic(text)
    except DetectionError:
        return
    assert found in text
    assert versions.is_valid(found, versions.PYPI) or versions.is_valid(found, versions.NPM)


version_strings = st.builds(
    lambda parts, pre: ".".join(str(p) for p in parts) + pre,
    st.lists(st.integers(min_value=0, max_value=10**6), min_size=2, max_size=5),
    st.sampled_from(["", "rc1", "-beta.2", ".post1", ".dev3", "+local.7"]),
)


@given(
    version_strings,
    st.sampled_from(["", "tool ", "version: ", "mytool v"]),
    st.sampled_from(["", "\n", " (stable)\n"]),
)
def test_generic_parser_finds_a_lone_version_wherever_it_is(
    version: str, prefix: str, suffix: str
) -> None:
    assert parse_generic(prefix + version + suffix) == version


@given(version_strings, version_strings)
def test_generic_parser_refuses_two_distinct_versions(first: str, second: str) -> None:
    text = f"tool {first}\nlibrary {second}\n"
    if first == second:
        assert parse_generic(text) == first
    else:
        with pytest.raises(DetectionError, match="ambiguous"):
            parse_generic(text)


@given(st.sampled_from(sorted(CATALOG)), st.text(max_size=300))
def test_catalog_parsers_only_ever_raise_detection_error(adapter: str, text: str) -> None:
    try:
        found = parse_version_output(adapter, text)
    except DetectionError:
        return
    Version(found)
