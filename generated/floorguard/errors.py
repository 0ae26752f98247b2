"""The runtime's one error hierarchy. Every message is meant for a person to act on."""

from __future__ import annotations

TYPE_CHECKING = False  # (not typing's: importing typing costs every host's import)

if TYPE_CHECKING:
    from floorguard._gate.decision import Decision


class FloorguardError(Exception):
    """Base of every error floorguard raises on purpose."""


class UnreadableFileError(FloorguardError):
    """A file to read is missing, unreadable, not a regular file (a FIFO or a device could
    block or never end) or larger than the cap for its kind. ``missing``: nothing is there;
    ``too_large``: over the cap (callers may word that in their own terms)."""

    def __init__(self, message: str, *, missing: bool = False, too_large: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        self.too_large = too_large


class CanonicalizationError(FloorguardError):
    """A value cannot be written as RFC 8785 canonical JSON."""


class FloorMapError(FloorguardError):
    """The floor map is unreadable, malformed, or its data does not match its stated hash."""


class ChainError(FloorguardError):
    """The audit chain cannot be read or written."""


class ChainWriteError(ChainError):
    """An append did not become durable: the decision it carried must not stand."""


class HostViewError(ChainWriteError):
    """This host's own record of the chain (its view, its refusals record, their lock) could
    not be read or written: the append is refused, and the database is not to blame."""


class ChainRollbackError(ChainWriteError):
    """The chain is smaller than, or inconsistent with, the tree this host has seen of it (a
    rollback or a fork): the append is refused, and the refusal recorded on the host."""


class KeyFileError(ChainError):
    """A key the chain is authenticated with is unusable: the HMAC key file is unreadable or
    not exactly a 32-byte key, a host's signing key file is unreadable, too open or not an
    Ed25519 key, or a host-keys document is unreadable or malformed."""


class OutputError(FloorguardError):
    """An output file cannot be written safely; whatever was at its name is unchanged."""


class VerificationError(FloorguardError):
    """A receipt, signature, slice or checkpoint failed verification."""


class InvalidInput(FloorguardError):
    """What the caller asked for cannot be accepted as given, and nothing was done
    (a usage error: command lines exit with status 2)."""


class DetectionError(FloorguardError):
    """An adapter's version could not be established without doubt."""


class BinaryNotFoundError(DetectionError):
    """Nothing is at the binary's name: not on PATH, or a path (or link) leading nowhere.
    (Something there that cannot be run is a plain DetectionError.)"""


class SpawnRefused(FloorguardError):
    """The preflight refused a spawn; ``decision`` is the refusal as recorded in the chain.

    ``decision`` is None only when not even a refusal could be recorded (the chain is
    unwritable); the message then says why.
    """

    def __init__(self, message: str, decision: Decision | None = None) -> None:
        from floorguard._base._text import without_credentials

        # What a receipt's reason hides is hidden in the message too, whatever it quotes:
        # the name asked for, a path, the chain's own words when nothing could be recorded.
        super().__init__(without_credentials(message))
        self.decision = decision


class BinaryNotFound(SpawnRefused):
    """A recorded refusal because the binary is not found (BinaryNotFoundError): nothing was
    there to start. ``python -m floorguard exec`` exits 127 for it, as a shell would."""


def cut_hidden_context(error: BaseException) -> None:
    """Forget every exception that ``raise ... from None`` only hid behind ``error`` (and
    behind its causes): floorguard raises so where a library's exception may quote a
    password, and code that walks ``__context__`` whatever ``__suppress_context__`` says
    would still reach it."""
    seen: set[int] = set()
    held: list[BaseException | None] = [error]
    while held:
        one = held.pop()
        if one is None or id(one) in seen:
            continue
        seen.add(id(one))
        if one.__suppress_context__:
            one.__context__ = None
        held += [one.__cause__, one.__context__]
