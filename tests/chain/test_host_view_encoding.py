"""This host's view of each chain is written as the JSON the view file's format states
(``json.dumps(sort_keys=True, separators=(",", ":"))``, ASCII), and read back the same."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from floorguard._base._canonical import compact_sorted_ascii_text
from floorguard._chain.chain_view import TreeView, _body, _parse

_VIEWS = st.dictionaries(
    st.text("0123456789abcdef", min_size=32, max_size=32),
    st.builds(
        TreeView,
        size=st.integers(min_value=1, max_value=2**63),
        root=st.binary(min_size=32, max_size=32),
        location=st.text(max_size=20) | st.sampled_from(["/h/chain.sqlite3", 'a"b\\c', "\udcff"]),
        seen=st.sampled_from(["2026-12-05T00:21:34.015829Z"]) | st.text(max_size=8),
    ),
    max_size=4,
)


@settings(max_examples=300)
@given(_VIEWS)
def test_the_views_are_written_as_the_sorted_compact_json_of_their_documents(
    views: dict[str, TreeView],
) -> None:
    body = _body(views)
    document = {"chains": {cid: view.document() for cid, view in views.items()}}
    assert body == compact_sorted_ascii_text(document).encode()
    assert _parse(body, Path("chain-view")) == views
