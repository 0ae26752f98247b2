"""Internal: what proves what the chain holds, to someone else: receipts, DSSE envelopes and
trusted keys, Merkle trees, proof documents, checkpoints, witnesses, slice and window proofs."""
