"""floorguard's README is its page on the package index, where a relative link resolves
against the index and breaks: every link in it must be absolute (or an anchor in the page)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE_README = Path(__file__).resolve().parents[2] / "generated" / "README.md"
# Inline links and images, reference definitions, and HTML href/src attributes.
TARGETS = re.compile(
    r"\]\(\s*<?([^)\s>]+)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)|(?:href|src)=[\"']([^\"']+)",
    re.MULTILINE,
)


def test_every_link_in_the_package_readme_stays_valid_on_the_package_index() -> None:
    text = PACKAGE_README.read_text(encoding="utf-8")
    targets = [next(group for group in found if group) for found in TARGETS.findall(text)]
    leaving = [t for t in targets if not re.match(r"(https://|#)", t)]
    assert not leaving, f"{PACKAGE_README.name}: relative links break on the index: {leaving}"
