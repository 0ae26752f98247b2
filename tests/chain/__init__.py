"""The audit chain on SQLite: its records and canonical JSON, the Merkle tree and the
transparency log, signed checkpoints, witnesses, host signatures of records."""
