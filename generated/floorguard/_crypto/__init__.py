"""Internal: the primitives signatures and proofs are made of: DSSE envelopes, trusted keys
and detached signatures over exact bytes, RFC 6962 Merkle trees."""
