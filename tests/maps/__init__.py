"""The floor map in force at run time: the built-in map, a published map, a host's own
module; how the runtime reads one and the map model's hash."""
