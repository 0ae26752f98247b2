"""A ``.env`` file read as the Rust dotenvy crate (0.15.7) reads it: the vectors of
dotenvy's own tests (``dotenv/src/parse.rs``), how a load treats existing variables and
rejected lines, and what is refused as a doubt rather than guessed."""

from __future__ import annotations

import pytest

from floorguard._identify.dotenvy_file import DotenvDoubt, load


def current(text: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """As codex's ``set_filtered`` loads the iterator: override, skip rejected lines."""
    return load(text, environ or {}, override=True, stop_at_error=False, strip_bom=False)


def test_dotenvys_own_line_vectors() -> None:
    text = (
        "\nKEY=1\nKEY2=\"2\"\nKEY3='3'\nKEY4='fo ur'\nKEY5=\"fi ve\"\nKEY6=s\\ ix\nKEY7=\n"
        'KEY8=     \nKEY9=   # foo\nKEY10  ="whitespace before ="\n'
        'KEY11=    "whitespace after ="\nexport="export as key"\nexport   SHELL_LOVER=1\n'
    )
    assert current(text) == {
        "KEY": "1", "KEY2": "2", "KEY3": "3", "KEY4": "fo ur", "KEY5": "fi ve",
        "KEY6": "s ix", "KEY7": "", "KEY8": "", "KEY9": "",
        "KEY10": "whitespace before =", "KEY11": "whitespace after =",
        "export": "export as key", "SHELL_LOVER": "1",
    }  # fmt: skip


def test_dotenvys_own_escape_vectors() -> None:
    text = (
        'KEY=my\\ cool\\ value\nKEY2=\\$sweet\nKEY3="awesome stuff \\"mang\\""\n'
        "KEY4='sweet $\\fgs'\\''fds'\nKEY5=\"'\\\"yay\\\\\"\\ \"stuff\"\n"
        'KEY6="lol" #well you see\nKEY7="line 1\\nline 2"\n'
    )
    assert current(text) == {
        "KEY": "my cool value", "KEY2": "$sweet", "KEY3": 'awesome stuff "mang"',
        "KEY4": "sweet $\\fgs'fds", "KEY5": "'\"yay\\ stuff", "KEY6": "lol",
        "KEY7": "line 1\nline 2",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "environ", "expected"),
    [
        ('KEY=">$KEY1<>${KEY2}<"', {}, "><><"),
        ("KEY=>\\$KEY1<>\\${KEY2}<", {}, ">$KEY1<>${KEY2}<"),
        ("KEY='>${KEY1}<>$KEY2<'", {}, ">${KEY1}<>$KEY2<"),
        ("K1=u\nKEY=>$K1_1<>$K1}<", {}, ">u_1<>u}<"),
        ('KEY=">${KEY11}<"', {"KEY11": "from-env"}, ">from-env<"),
        ('KEY="$KEY1"', {}, None),  # the closing quote is taken as text: the line is rejected
    ],
)
def test_dotenvys_own_substitution_vectors(
    text: str, environ: dict[str, str], expected: str | None
) -> None:
    assert current(text, environ).get("KEY") == expected


def test_rejected_lines_are_skipped_by_codex_and_end_the_load_for_dotenvys_load() -> None:
    text = "A=1\nvery bacon = yes\nB=2\n"
    assert current(text) == {"A": "1", "B": "2"}
    first = load(text, {}, override=False, stop_at_error=True, strip_bom=True)
    assert first == {"A": "1"}


def test_a_quote_open_to_the_end_swallows_the_rest() -> None:
    assert current('A=1\nB="open\nC=3\n') == {"A": "1"}


def test_override_against_keeping_what_the_environment_has() -> None:
    assert current("PATH=/new", {"PATH": "/old"}) == {"PATH": "/new"}
    kept = load("PATH=/new", {"PATH": "/old"}, override=False, stop_at_error=True, strip_bom=True)
    assert kept == {"PATH": "/old"}


def test_a_byte_order_mark_is_removed_only_by_dotenvys_load() -> None:
    text = "\ufeffPATH=/new\n"
    assert current(text) == {}  # the key starts with the mark: a rejected line
    assert load(text, {}, override=False, stop_at_error=True, strip_bom=True) == {"PATH": "/new"}


@pytest.mark.parametrize("text", ["A=a\x00b", "A=$NAMÉ", "A=${B=C}"])
def test_what_could_be_read_two_ways_is_a_doubt_naming_the_line(text: str) -> None:
    with pytest.raises(DotenvDoubt, match=r"line 1|NUL"):
        current(text)
