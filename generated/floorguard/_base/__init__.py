"""Internal: what every other part of the runtime uses (canonical bytes, RFC 3339 time,
terminal text, reading given files without blocking, writing output files atomically)."""
