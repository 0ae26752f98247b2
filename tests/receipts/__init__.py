"""Signed floor-update receipts: DSSE envelopes, keygen, verify receipt and what it refuses."""
