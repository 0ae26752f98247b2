"""Where node looks for a module beyond the program's own install tree.

A ``require`` or ``import`` of a bare name that nothing installed beside the program
provides (an optional dependency: ``try { require("sharp") } catch {}``) is looked for in
folders nobody installed the program into: the ``node_modules`` of every folder above its
install tree (both of node's loaders walk up to ``/node_modules``), and CommonJS's global
folders (``$HOME/.node_modules``, ``$HOME/.node_libraries``, ``lib/node`` of node's own
prefix). A module in any of them runs code that was not judged, so any of them being there is
a doubt. (``NODE_PATH``, the other such folder list, is refused with node's environment.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import PurePosixPath

__all__ = [
    "global_folders",
    "node_modules_above",
    "node_modules_above_the_install",
    "node_search_doubts",
    "not_text_on_the_way",
    "present_above",
]

_NOT_INSTALLED = "where node's require looks for any module not installed beside the program"


def node_modules_above_the_install(program: str, package: str | None) -> list[str]:
    """The ``node_modules`` folders node's walk up from ``program`` (its real path) reaches
    above its install tree, nearest first. The install tree is the outermost ``node_modules``
    above the program (a global prefix's ``lib/node_modules``, a project's, pnpm's store
    inside it); for a program in none, the folder of its ``package`` (a checkout with its
    own ``node_modules``), else the program's own folder."""
    folder = PurePosixPath(program).parent
    trees = [p for p in (folder, *folder.parents) if p.name == "node_modules"]
    if trees:
        root = trees[-1].parent
    elif package is not None and folder.is_relative_to(package):
        root = PurePosixPath(package)
    else:
        root = folder
    return node_modules_above(str(root))


def node_modules_above(root: str) -> list[str]:
    """The ``node_modules`` of every folder above ``root``, the folder holding an install
    tree (its ``node_modules``), nearest first, ``/node_modules`` last."""
    # No folder above the outermost tree is named node_modules, so CommonJS (which skips
    # ``node_modules/node_modules``) and ESM walk the same ones.
    return [str(above / "node_modules") for above in PurePosixPath(root).parents]


def present_above(folders: list[str], tree: str) -> list[str]:
    """A doubt for each of ``folders`` (above the install tree ``tree``) that is there."""
    return [
        f"{folder} is there, above the install tree of {tree}, {_NOT_INSTALLED}"
        for folder in folders
        if os.path.lexists(folder)
    ]


def global_folders(environ: Mapping[str, str], here: str, node: str) -> list[str]:
    """CommonJS's last resort: ``$HOME/.node_modules`` and ``$HOME/.node_libraries`` (HOME
    against the working directory when relative), and ``lib/node`` of node's own prefix
    (two folders above its real file)."""
    folders = [
        os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(node))), "lib", "node")
    ]
    home = environ.get("HOME")
    if home:
        # node joins them with path.resolve, which takes `link/..` out of the text; the
        # kernel, opening the folder, would go up from the link's target: both are looked at.
        base = os.path.join(here, home)
        for spelled in dict.fromkeys((base, resolved_as_node_does(base))):
            folders += [
                os.path.join(spelled, ".node_modules"), os.path.join(spelled, ".node_libraries")
            ]  # fmt: skip
    return folders


_MAX_LINKS = 40  # (the kernel's: past it no file is found, by node either)


def not_text_on_the_way(path: str) -> str | None:
    """Why node would load another file than ``path`` (absolute) names: a name on the way,
    or the target of a link met resolving it, holding bytes that are not UTF-8. Node takes
    its main script's real path by its own walk (``fs.realpathSync``), each name and each
    link's target decoded as UTF-8, so such a byte becomes U+FFFD and is looked up spelled
    so: another folder or file. None when every name on the way is text."""
    pending = [part for part in reversed(path.split("/")) if part]
    resolved, links = "/", 0
    while pending:
        part = pending.pop()
        if not _is_text(part):
            return f"{path}: the name {part!r} on the way to it holds bytes that are not UTF-8"
        if part in (".", ".."):
            resolved = resolved if part == "." else os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, part)
        try:
            if not stat.S_ISLNK(os.lstat(candidate).st_mode):
                resolved = candidate
                continue
            target = os.readlink(candidate)
        except (OSError, ValueError):
            return None  # (nothing there: node finds nothing either)
        links += 1
        if links > _MAX_LINKS:
            return None
        if not _is_text(target):
            return f"{path}: {candidate} links to {target!r}, which holds bytes that are not UTF-8"
        pending += [each for each in reversed(target.split("/")) if each]
        if target.startswith("/"):
            resolved = "/"
    return None


def _is_text(name: str) -> bool:
    return name.isascii() or not any("\udc80" <= c <= "\udcff" for c in name)


def resolved_as_node_does(path: str) -> str:
    """An absolute ``path`` as node's ``path.resolve`` leaves it: ``.``, ``..`` and repeated
    slashes taken out of the text (a leading ``//`` too, which POSIX normpath keeps)."""
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def node_search_doubts(
    environ: Mapping[str, str],
    here: str,
    *,
    node: str,
    program: str | None,
    package: str | None,
) -> list[str]:
    """Each folder outside the install tree of ``program`` (its real path; None: node runs
    no file) that node searches for a module and that is there, named. Being there is
    enough, empty or not: whoever made it can fill it after the check, and which names the
    program asks for (any of its dependencies' optional requires) is decided at run time."""
    doubts = [
        f"{folder} is there, {_NOT_INSTALLED}"
        for folder in global_folders(environ, here, node)
        if os.path.lexists(folder)
    ]
    if program is not None:
        doubts += present_above(node_modules_above_the_install(program, package), program)
    return doubts
