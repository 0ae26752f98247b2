"""Folders for state and keys, made private whatever the umask."""

from __future__ import annotations

import os
from pathlib import Path


def make_private_folder(path: Path) -> None:
    """``path.mkdir(parents=True, exist_ok=True)``, but every folder it makes is 0700
    (less what the umask takes away), those above ``path`` too: under a umask of 000 a
    folder made the default way is 0777, and anyone could rename a chain or a key out of
    it and put their own in its place. Folders that exist are left as they are. Raises
    OSError (FileExistsError: something other than a folder at one of the names)."""
    missing = []
    folder = Path(path)
    while not folder.is_dir() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            if not made.is_dir():  # (another process may have made it meanwhile)
                raise
