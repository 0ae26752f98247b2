"""What judging reads of the environment: the run environment whole, floorguard's own
policies from the host only; a preflight's own environment is that view as it is."""

from __future__ import annotations

import os
from types import MappingProxyType

import pytest

from floorguard._gate import gate


def _built(host: dict[str, str], run: dict[str, str]) -> dict[str, str]:
    """The view as built key by key (what the shortcut must equal)."""
    view = {k: v for k, v in run.items() if k not in gate._HOST_KEYS}
    view.update((k, host[k]) for k in gate._HOST_KEYS if k in host)
    return view


def test_a_preflights_own_environment_is_its_view_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in gate._HOST_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("FG_TEST_VIEW", "one")
    environ = gate.plain_environ(os.environ)
    view = gate._judging_view(environ, environ)
    assert view is environ
    assert list(view.items()) == list(_built(dict(environ), dict(environ)).items())
    # The environment changed: the next preflight reads a new copy, and judges by it.
    monkeypatch.setenv("FG_TEST_VIEW", "two")
    again = gate.plain_environ(os.environ)
    assert again is not environ
    assert gate._judging_view(again, again)["FG_TEST_VIEW"] == "two"
    assert environ["FG_TEST_VIEW"] == "one"  # (what the first judged stays as it was)


def test_a_host_policy_is_taken_from_the_host_and_the_view_is_copied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(gate.POLICY_VARIABLE, "warn")
    environ = gate.plain_environ(os.environ)
    view = gate._judging_view(environ, environ)
    assert view is not environ
    assert list(view.items()) == list(_built(dict(environ), dict(environ)).items())


def test_any_other_mapping_is_copied_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    mine = {"PATH": "/usr/bin", "FG_TEST_VIEW": "one"}
    for environ in (mine, MappingProxyType(mine)):
        view = gate._judging_view(environ, environ)
        assert view is not environ and dict(view) == mine
        mine["FG_TEST_VIEW"] = "changed"  # (the caller's own mapping, changed after)
        assert view["FG_TEST_VIEW"] == "one"
        mine["FG_TEST_VIEW"] = "one"
