"""The files one command names: none of its outputs may be another of them.

An output that is also an input, or another output, of the same command is overwritten by
it or overwrites it (``--receipt-out`` naming the ``--state-file``: the receipt is reported
written, then replaced by the feed state). Refused as a usage error before anything runs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

import click


def _identities(path: Path) -> set[object]:
    """What writing or reading ``path`` touches: the name in its real folder, the file a
    link there leads to, and that file's device and inode (so a hard link is the same file).
    A terminal, a pipe or another stream is written to, never replaced: it has none."""
    try:
        info = os.stat(path)
    except OSError:
        info = None
    except ValueError:  # a NUL in the name: the file cannot be opened, by any name
        return set()
    if info is not None and not stat.S_ISREG(info.st_mode):
        return set()
    found: set[object] = {
        os.path.join(os.path.realpath(path.parent), path.name),
        os.path.realpath(path),
    }
    if info is not None:
        found.add((info.st_dev, info.st_ino))
    # The entry in its folder, by the folder's identity: another path to that folder (a bind
    # mount) names the same entry even while no file is there yet.
    found |= {(*folder, path.name) for folder in _folder_identity(path.parent)}
    return found


def refuse_shared_files(
    outputs: Iterable[tuple[str, Path | None]], inputs: Iterable[tuple[str, Path | None]]
) -> None:
    """Raise click.UsageError when an output (option, path) is the same file as another
    output or an input of the command. None entries (an option not given) are skipped."""
    named = [(option, Path(path), True) for option, path in outputs if path is not None]
    named += [(option, Path(path), False) for option, path in inputs if path is not None]
    seen = [(option, path, is_output, _identities(path)) for option, path, is_output in named]
    for index, (option, path, is_output, mine) in enumerate(seen):
        for other_option, other, other_is_output, theirs in seen[index + 1 :]:
            if (is_output or other_is_output) and mine & theirs:
                raise click.UsageError(
                    f"{option} {path} is the same file as {other_option} {other}: one would "
                    "overwrite the other; name distinct files"
                )


def refuse_outputs_in(outputs: Iterable[tuple[str, Path | None]], folder: Path, holds: str) -> None:
    """Raise click.UsageError when an output (option, path) would be written in ``folder``
    (by name, through a link that leads there, or another path to it such as a bind
    mount), which ``holds`` what the command keeps by its own names (a map archive's name
    is its hash, known only once planned)."""
    kept: set[object] = {os.path.realpath(folder), *_folder_identity(folder)}
    for option, given in outputs:
        if given is None:
            continue
        path = Path(given)
        places: set[object] = {
            os.path.realpath(path.parent),
            os.path.dirname(os.path.realpath(path)),
        }
        places |= _folder_identity(path.parent) | _folder_identity(
            Path(os.path.realpath(path)).parent
        )
        inside = os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)
        if inside or kept & places:
            raise click.UsageError(
                f"{option} {path} is in {folder}, which holds {holds}: name a file elsewhere"
            )


def refuse_hard_linked(option: str, path: Path) -> None:
    """Raise click.UsageError when ``path`` is a file with other hard links: the atomic
    write would leave them holding the old bytes (and one may be an input of the command,
    found in a folder it reads)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise click.UsageError(
            f"{option} {path} has {info.st_nlink - 1} other hard link(s): writing it would "
            "detach them; name a file of its own"
        )


def _folder_identity(folder: Path) -> set[tuple[int, int]]:
    """A folder's device and inode, when it exists: a bind mount shows it under two paths."""
    try:
        info = os.stat(folder)
    except (OSError, ValueError):
        return set()
    return {(info.st_dev, info.st_ino)}
