"""floorctl init and refresh: the floor-map block a host's module holds (render, splice), and
what a refresh refuses (downgrades, hand edits, narrowed advisories) or survives (races,
feeds of every size)."""
