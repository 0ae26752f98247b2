"""Proofs over an exported chain: the slice verifier, the window proof, and forged trees,
proofs, checkpoints and evidence."""
