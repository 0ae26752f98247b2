"""Where an MCP server's repository may have written: the folders a server judged for an
agent is held to as its workspace (metadata there vouches for nothing).

Where a checkout's root lies cannot be told, so the folders above the agent's folder and
above each configuration file its client reads count, but for the folders shared with
other installs; links in them count where they lead. Pure path logic over the filesystem
as it is now (lstat, readlink, realpath); the gate puts the result in force
(identification.workspace_in_force)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from floorguard._identify.launchers import _declares_workspaces, within

# Folders that mark a checkout's root: version control systems' own (a `.git` file too:
# a linked worktree's, a submodule's) and monorepo tools' manifests.
_REPOSITORY_MARKS: Final = (
    ".git", ".hg", ".jj", ".svn", ".bzr", ".pijul", ".fslckout", "_FOSSIL_", "_darcs",
    ".sl", "CVS", ".repo", "pnpm-workspace.yaml", "lerna.json", "nx.json", "rush.json",
    "turbo.json", "go.work", "pyproject.toml",
)  # fmt: skip
# Folders that hold the system's and every user's installs, not one repository's (with the
# user's home and the folders above it): an agent working below one of them makes only
# what a repository there would own the workspace's (its node_modules, all of it when a
# repository marks it as its root). Any other folder above an agent's is taken whole.
_SHARED_FOLDERS: Final = frozenset({
    "/", "/usr", "/usr/local", "/opt", "/opt/homebrew", "/opt/local", "/srv", "/home",
    "/var", "/var/lib", "/mnt", "/media", "/nix", "/nix/store", "/snap", "/Users",
    "/Library", "/Applications", "/private", "/private/tmp", "/private/var",
    "/tmp", "/var/tmp",  # noqa: S108 (folder names compared, no file made there)
})  # fmt: skip


def repository_region(
    own: str | None, anchors: Sequence[str], homes: Sequence[str]
) -> tuple[str, ...]:
    """The folders a repository may have written that holds the agent's folder ``own``
    (None: not counted) or one of ``anchors`` (the folders of the configuration files its
    servers come from): where its root is cannot be told (a checkout needs no marker), so
    every folder above them, and each anchor, is taken whole, but for the folders shared
    with other installs (``homes``, the folders above them, the system's): of these, the
    ``node_modules`` (which node and npx search from below) and, when a repository marks
    one as its root, all of it. (The agent's folder itself is the working directory's.)"""
    # (a home spelled through a link, /home on a system where it leads to /var/home, is
    # shared by both names; a home at or below the agent's folder is the repository's)
    own_spellings = [] if own is None else [os.path.normpath(own), os.path.realpath(own)]
    shared = {
        spelled
        for home in homes
        if home
        for spelled in (os.path.normpath(home), os.path.realpath(home))
        if not any(within(spelled, folder) for folder in own_spellings)
    }
    shared |= {str(above) for home in shared for above in Path(home).parents}
    found: list[str] = []
    for anchor, itself in ((own, False), *((anchor, True) for anchor in anchors)):
        if anchor is None:
            continue
        for spelled in dict.fromkeys((os.path.normpath(anchor), os.path.realpath(anchor))):
            folders = [spelled] if itself else []
            for folder in (*folders, *map(str, Path(spelled).parents)):
                whole = folder not in shared and folder not in _SHARED_FOLDERS
                if whole or _marks_a_root(folder):
                    found.append(folder)
                else:
                    found.append(os.path.join(folder, "node_modules"))
    return tuple(dict.fromkeys(found))


def _marks_a_root(folder: str) -> bool:
    """Whether ``folder`` holds a repository's or a monorepo's root mark (or an npm
    ``workspaces`` package.json, or one that cannot be read)."""
    if any(os.path.lexists(os.path.join(folder, mark)) for mark in _REPOSITORY_MARKS):
        return True
    return _declares_workspaces(Path(folder) / "package.json")


_PROJECT_SETTINGS_FOLDERS: Final = frozenset({".gemini", ".codex", ".claude"})


def project_folders(files: Sequence[str], home: str) -> tuple[str, ...]:
    """The project folders of the configuration files the client reads for a server: the
    folder holding a ``.gemini``, ``.codex`` or ``.claude`` settings folder, else the file's
    own folder (a ``.mcp.json``'s, a ``--mcp-config`` or ``--settings`` file's, a
    ``CLAUDE_CONFIG_DIR`` or ``CODEX_HOME`` a host put in a checkout: what they declare or
    set, a PATH included, may lead into their repository), where the file is named and
    where each link on the way leads; not the user's own: the home, and a folder of the
    home's whose name starts with a dot (``~/.config``, ``~/.claude-work``, a dotfiles
    repository), an extension installed there included."""
    user = os.path.realpath(home)
    folders = []
    for given in files:
        if not os.path.isabs(given):
            continue
        # (a folder on the way that is a link, a CLAUDE_CONFIG_DIR linked elsewhere, counts
        # where each of its links leads too)
        hops = [*_link_hops(given), *_link_hops(os.path.dirname(given))]
        # (a file named outside the user's own counts wherever its links lead: a workspace
        # link into a dot-folder of the home makes that folder the repository's too)
        named_by_the_user = _the_users_own(os.path.dirname(given), user)
        for path in dict.fromkeys((given, *hops, os.path.realpath(given))):
            parent = path if os.path.isdir(path) else os.path.dirname(path)
            if os.path.basename(parent) in _PROJECT_SETTINGS_FOLDERS:
                parent = os.path.dirname(parent)
            if os.path.realpath(parent) == user:
                continue
            if not named_by_the_user or not _the_users_own(os.path.realpath(parent), user):
                folders.append(parent)
    return tuple(dict.fromkeys(folders))


def linked_out_of(folders: Sequence[str], paths: Sequence[str]) -> list[str]:
    """Where each link on the way of ``paths`` that lies in one of ``folders`` (by its
    letters) leads, and every link after it and each folder a ``..`` after it climbs to (the
    kernel takes it from the link's target): the repository's, as the folder holding the
    link is (a link to a file: the folder holding that file)."""
    found: list[str] = []
    for path in paths:
        if not os.path.isabs(path):
            continue
        prefix, through = "", False
        for part in path.split(os.sep)[1:]:
            if not part or part == ".":
                continue
            prefix = f"{prefix}{os.sep}{part}"
            if through:
                if part == ".." or os.path.islink(prefix):
                    found.append(_folder_of(os.path.realpath(prefix)))
                continue
            lexical = os.path.normpath(prefix)
            if os.path.islink(lexical) and any(within(lexical, f) for f in folders):
                found.append(_folder_of(os.path.realpath(lexical)))
                through = True
    return list(dict.fromkeys(found))


def linked_node_modules(folders: Sequence[str]) -> list[str]:
    """Where the ``node_modules`` of each of ``folders`` (or the folder itself, one of the
    shared folders' ``node_modules``) leads when it is a link."""
    found = []
    for folder in folders:
        for candidate in (folder, os.path.join(folder, "node_modules")):
            if os.path.basename(candidate) == "node_modules" and os.path.islink(candidate):
                found.append(os.path.realpath(candidate))
    return list(dict.fromkeys(found))


def _folder_of(path: str) -> str:
    """``path`` when it is a folder (or nothing is there), else the folder holding it."""
    return os.path.dirname(path) if os.path.isfile(path) else path


def _link_hops(path: str) -> list[str]:
    """Where each link ``path`` leads through in turn (its last part's, at most 40, as the
    kernel follows them), as absolute paths; none when it is no link."""
    hops: list[str] = []
    current = path
    for _ in range(40):
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
        hops.append(current)
    return hops


def _the_users_own(folder: str, user: str) -> bool:
    """Whether ``folder`` (a real path) is the home ``user`` or lies in a folder of it whose
    name starts with a dot: the user's own settings, not a repository's."""
    if folder == user:
        return True
    relative = os.path.relpath(folder, user)
    return not relative.startswith("..") and relative.startswith(".")


@functools.cache
def account_home() -> str:
    """The home folder of this process's user account (whatever HOME a child is given)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""
