"""The package's public names: the functions are the gate's own, looked up once; the floor
map's names are the map in force at every access, never kept."""

from __future__ import annotations

import floorguard
from floorguard._gate import decision, gate, launcher


def test_the_public_functions_are_the_gates_own_and_kept_after_the_first_access() -> None:
    assert floorguard.preflight is gate.preflight
    assert floorguard.spawn is launcher.spawn
    assert floorguard.Decision is decision.Decision
    # Kept as the module's names: a host calling floorguard.preflight at every spawn does
    # not pass through the module's __getattr__ each time.
    assert {"preflight", "spawn", "Decision"} <= set(vars(floorguard))


def test_the_floor_map_names_are_read_at_every_access_never_kept() -> None:
    assert floorguard.FLOOR_MAP_HASH.startswith("sha256:")
    assert isinstance(floorguard.FLOOR_MAP_VERSION, int)
    assert len(floorguard.FLOOR_MAP) > 0
    assert not {"FLOOR_MAP", "FLOOR_MAP_HASH", "FLOOR_MAP_VERSION"} & set(vars(floorguard))


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    try:
        floorguard.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("floorguard.not_a_name resolved")
