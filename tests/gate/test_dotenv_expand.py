"""dotenv-expand's reading of a value (Gemini CLI's second expansion of an MCP server's env),
against what dotenv-expand 12.0.3 itself gave for each (run under node, its
``expand({parsed: {__GCLI_EXPAND_TARGET__: value}, processEnv})`` as Gemini CLI calls it).
None: a reading not modelled (what is put in place holds a '$'), which the gate refuses."""

from __future__ import annotations

import pytest

from floorguard._identify.dotenv_expand import dotenv_expand

ENVIRON = {"SET": "/s", "EMPTY": "", "HOME": "/h", "REF": "x${SET}", "SELF": "$SELF"}


@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("plain", "plain"),
        ("$SET/x", "/s/x"),
        ("${SET}/x", "/s/x"),
        ("$UNSET", ""),
        ("a${UNSET}b", "ab"),
        ("${UNSET-/d}", "/d"),
        ("${UNSET:-/d}", "/d"),
        ("${SET-/d}", "/s"),
        ("${SET:+/a}", "/a"),
        ("${SET+/a}", "/a"),
        ("${UNSET:+/a}", ""),
        ("${EMPTY-/d}", "/d"),
        ("${EMPTY:+/a}", ""),
        ("${EMPTY+/a}", ""),
        ("${UNSETnull/d}", "/d"),
        ("$SETnull", "/s"),
        ("\\$SET", "$SET"),
        ("a\\$b", "a$b"),
        ("\\${SET}${SET}", "\\/s/s"),
        ("5$", "5$"),
        ("$$", "$$"),
        ("$1", "$1"),
        ("a$ b", "a$ b"),
        ("${A B}", ""),
        ("${SET-a-b}", "/s"),
        ("${SET:-a:-b}", "/s"),
        ("${UNSET-a-b}", "a-b"),
        ("${UNSET-$SET}", None),
        ("$SELF", ""),
        ("x${SET}y${UNSET-z}", "x/syz"),
        ("${-x}", "x"),
        ("${:+x}", ""),
        ("${SETnull}", "/s"),
        ("$SET_X", ""),
        ("${SET}${SET}", "/s/s"),
        ("${REF}", None),  # (what is put in place holds a '$')
        ("${constructor}", None),  # (JavaScript finds Object's own there)
        ("", ""),
    ],
)
def test_dotenv_expand_reads_a_value_as_dotenv_expand_does(
    value: str, expanded: str | None
) -> None:
    assert dotenv_expand(value, ENVIRON) == expanded
