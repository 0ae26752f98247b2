"""Internal: the audit chain itself (the linked, authenticated log every decision is sealed
into), its key, its state folder, host signatures, and what this host has seen of it.
Its storage is ``floorguard.chainstore``."""
