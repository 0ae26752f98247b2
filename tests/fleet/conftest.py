"""Every test here runs against a real PostgreSQL server (a database each, made by
``chain init``): all of them carry the ``fleet`` marker, so the README's quick test command
stays within its time and ``.ci/run`` runs them with the other long suites."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "fleet" and item.get_closest_marker("fleet") is None:
            item.add_marker(pytest.mark.fleet)
