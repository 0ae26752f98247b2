"""Internal: the floor map as values, the rule that judges a version against it, and
which map is in force (built in, the host's own, published and accepted)."""
