"""Internal: the spawn gate: the decision and its record, the target opened once, and the
launcher that checks and spawns in one step. Public through ``floorguard.preflight``
and ``floorguard.spawn``."""
