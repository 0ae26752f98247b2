"""What a receipt records of a decision's text: a reason hides what may be a credential,
whichever patterns are skipped as unable to match (a pattern runs only on text holding the
character it needs), and every string of a recorded value is made recordable."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorguard._base import _text


def _every_pattern(text: str) -> str:
    """What the hiding did before any pattern was skipped: all three, always."""
    text = _text._USERINFO.sub(r"\1<hidden>@", text)
    text = _text._SECRET_VALUE.sub(r"\1<hidden>", text)
    return _text._ASSIGNED.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}=<hidden>", text)


_PIECES = st.sampled_from(
    ["https://", "git+https:", "u", ":", "p", "@", "h", "=", "'", '"', " ", "token", "KEY",
     "api_key", "Bearer", "/", "\\", ",", "NAME", "x", "0.61.0", "\n"]
)  # fmt: skip


@settings(max_examples=500)
@given(st.lists(_PIECES, max_size=12).map("".join) | st.text(max_size=40))
def test_hides_exactly_what_every_pattern_hides(text: str) -> None:
    assert _text.without_credentials(text) == _every_pattern(text)


def test_hides_user_information_and_secret_values() -> None:
    hidden = _text.without_credentials("npx 'https://u:p@h/x' --token=abc 'A=B'")
    assert hidden == "npx 'https://<hidden>@h/x' --token=<hidden> 'A=<hidden>'"


def test_keeps_a_reason_without_any_of_their_characters() -> None:
    reason = "aider 0.61.0 meets the floor 0.59.0"
    assert _text.without_credentials(reason) is reason


def _recordable_everywhere(value: object) -> object:
    """What recordable_value did before its shortcut for text values: a call for each."""
    if isinstance(value, str):
        return _text.recordable(value)
    if isinstance(value, dict):
        return {_text.recordable(str(k)): _recordable_everywhere(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_recordable_everywhere(v) for v in value]
    return value


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.sampled_from(["\udcff", "caf\xe9", "\U0001f600"]),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=3),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=300)
@given(_VALUES)
def test_a_recorded_value_has_every_string_made_recordable(value: object) -> None:
    assert _text.recordable_value(value) == _recordable_everywhere(value)


@pytest.mark.parametrize(
    "text",
    [
        'GITHUB_TOKEN="SECRET"',  # a quoted value
        "token='SECRET'",
        'password="a b SECRET"',  # spaces inside the quotes
        'password="SECRET',  # a quote never closed
        '"token": "SECRET"',  # a JSON member
        "[token]=SECRET",
        "token[0]=SECRET",
        "token\t=\tSECRET",
        "authorization: Bearer SECRET",  # a scheme, then the credential
        "Authorization=Basic SECRET",
        '/x/token="SECRET".py',
        "npx: \"token='SECRET'\" is not an npm package name",
    ],
)
def test_hides_a_value_given_to_a_secret_name_in_any_spelling(text: str) -> None:
    hidden = _text.without_credentials(text)
    assert "SECRET" not in hidden and "<hidden>" in hidden, hidden
