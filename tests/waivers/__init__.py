"""Waivers: the waivers document, refresh --waivers, and a waiver's expiry as the gate judges
it."""
