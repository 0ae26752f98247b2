"""A recorded reason hides what may be a credential, whichever patterns are skipped as unable
to match (a pattern runs only on text holding the character it needs)."""

from __future__ import annotations

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
