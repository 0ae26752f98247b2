"""Package launchers: ``npx``, ``npm exec``, ``pnpm dlx``, ``bunx``, ``yarn dlx``, ``uvx`` /
``uv tool run`` and ``pipx run`` fetch a package by name and run it. What runs is that
package, at the version the launcher picks, not the launcher: this module reads the
launcher's own command line as a closed world, names the package, and tells the version
that will run when it can be known here.

- A spec pinned to one exact version (``mcp-remote@0.1.16``, ``pkg==1.2.3``) is that version:
  each launcher here runs exactly the version it was pinned to (from a local install or its
  cache when they hold it, else fetched).
- An unpinned spec is known only from files: ``npx NAME`` runs the first
  ``node_modules/.bin/NAME`` in the working directory or above it, whose package says its
  version. Anything else (a tag, a range, a bare name with no local install) is decided by
  a registry at run time: refused, with the advice to pin the version.
- Everything the launcher would read as its own option, and every spec that is not a plain
  registry name (an alias, a git or URL or path spec, white space, a character that is not
  ASCII, a case variant of a tracked name) is a refusal naming it, never a skip.

Which map entry a package is comes from the package index (``identification.packages``).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floorguard._identify.consulted import _checked_memo, _identity, new_cache
from floorguard._identify.identification import (
    Identification,
    agent_environment,
    current_packages,
    server_workspaces,
)
from floorguard._maps import packages as _packages
from floorguard._maps import versions
from floorguard.errors import DetectionError

PIN_ADVICE: Final = "pin the version"


class LaunchRefused(Exception):
    """The launcher's command line cannot be read as one known package (``str``: why)."""


@dataclass(frozen=True)
class Launch:
    """A launcher's command line, read: it runs ``package`` of ``ecosystem``, pinned to
    ``version`` (None: not pinned; ``unpinned`` says how it was given)."""

    launcher: str
    ecosystem: str
    package: str
    spec: str
    version: str | None
    unpinned: str | None = None


@dataclass(frozen=True)
class NpmRun:
    """The npm a launch runs (``npx``, ``npm exec``): its package folder, whose ``npmrc`` is
    npm's builtin configuration, and the node that runs it, two folders below npm's default
    global prefix (whose ``etc/npmrc`` is the global configuration). None: not seen (a
    launcher that is not npm's own script run by a native node)."""

    package: str | None
    node: str | None


def npm_package_of(script: str) -> str | None:
    """The folder of npm's own package that holds the file ``script`` (a real path): the
    nearest folder above it with a package.json, when that names ``npm``; else None."""
    found = _package_of(script)
    return found[0] if found is not None and found[1] == "npm" else None


def package_of(script: str) -> tuple[str, str | None] | None:
    """(folder, stated name) of the nearest package.json above the file ``script``; None
    when there is none, or it cannot be read."""
    return _package_of(script)


def _package_of(script: str) -> tuple[str, str | None] | None:
    """(folder, stated name) of the nearest package.json above ``script`` (None: none,
    or one that cannot be read)."""
    folder = os.path.dirname(script)
    for _ in range(8):
        manifest = os.path.join(folder, "package.json")
        if os.path.isfile(manifest):
            try:
                data = read_manifest(manifest)
            except ValueError:
                return None
            name = data.get("name") if isinstance(data, dict) else None
            return folder, name if isinstance(name, str) else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return None


# ---------------------------------------------------------------------------- recognising


# (program basename, first arguments) -> launcher. The real file's name counts too: npm
# installs npx as a link to ``npm/bin/npx-cli.js``.
_DIRECT: Final = {
    "npx": "npx",
    "npx-cli.js": "npx",
    "pnpx": "pnpm dlx",
    "pnpx.cjs": "pnpm dlx",
    "pnpx.js": "pnpm dlx",
    "pnx": "pnpm dlx",  # (pnpm's short names: pnx is pnpx, pn is pnpm)
    "pnx.cjs": "pnpm dlx",
    "bunx": "bunx",
    "uvx": "uvx",
}
# npm takes any unambiguous abbreviation of a command (``exe`` is ``exec``; ``e`` and ``ex``
# are ambiguous); uv spells uvx ``uv tool uvx`` as well.
_SUBCOMMANDS: Final = {
    "npm": (("exec",), ("exe",), ("x",)),
    "npm-cli.js": (("exec",), ("exe",), ("x",)),
    "pnpm": (("dlx",),),
    "pnpm.cjs": (("dlx",),),
    "pnpm.js": (("dlx",),),
    "pn": (("dlx",),),
    "pn.cjs": (("dlx",),),
    "yarn": (("dlx",),),
    "yarn.js": (("dlx",),),
    "yarn.cjs": (("dlx",),),
    "bun": (("x",),),
    "uv": (("tool", "run"), ("tool", "uvx")),
    "pipx": (("run",),),
}
_SUBCOMMAND_NAMES: Final = {
    "npm": "npm exec",
    "pnpm": "pnpm dlx",
    "pn": "pnpm dlx",
    "yarn": "yarn dlx",
    "bun": "bunx",
    "uv": "uvx",
    "pipx": "pipx run",
}


def launcher_of(names: Sequence[str], argv: Sequence[str]) -> tuple[str, int] | None:
    """The launcher a program named ``names`` (as asked for, located, and its real file)
    is with ``argv``, and how many arguments name its subcommand; None when it is no
    package launcher (``npm install``, ``uv pip``). Raises LaunchRefused when the
    launcher's own options come before its subcommand (they are not read here).

    A script's real file decides what it does (npm's ``npx-cli.js`` is npx under any
    name); a native launcher may act on the name it is run by (``bunx`` is a link to
    ``bun``), which is the name asked for, so that comes first for the others.
    """
    bases = [os.path.basename(n) for n in names if n]
    real = bases[-1] if bases else ""
    if real.endswith((".js", ".cjs")) and (real in _DIRECT or real in _SUBCOMMANDS):
        bases = [real]
    for base in bases:
        if base in _DIRECT:
            return _DIRECT[base], 0
        subcommands = _SUBCOMMANDS.get(base)
        if subcommands is None:
            continue
        stem = base.split(".", 1)[0].removesuffix("-cli")
        launcher = _SUBCOMMAND_NAMES[stem]
        for words in subcommands:
            if tuple(argv[: len(words)]) == words:
                return launcher, len(words)
            if len(words) > 1 and argv and argv[0] == words[0] and words[-1] in argv[1:]:
                # ``uv tool -q uvx``: the tool takes its own options between the words.
                raise LaunchRefused(
                    f"{stem}: options within {' '.join(words)} are not understood (they may "
                    "choose another package, index or command)"
                )
        if argv and argv[0].startswith("-") and any(w in argv for ws in subcommands for w in ws):
            raise LaunchRefused(
                f"{stem}: options before {' '.join(subcommands[0])} are not understood "
                "(they may choose another package, registry or command)"
            )
        return None
    return None


# ---------------------------------------------------------------------------- specs

_WHITE: Final = re.compile(r"\s")


def _plain(spec: str, launcher: str) -> None:
    if not spec:
        raise LaunchRefused(f"{launcher}: an empty package spec")
    if _WHITE.search(spec):
        raise LaunchRefused(f"{launcher}: the package spec {spec!r} holds white space")
    if not spec.isascii() or not spec.isprintable():
        raise LaunchRefused(
            f"{launcher}: the package spec {spec!r} holds a character that is not printable "
            "ASCII (a look-alike of a package name?)"
        )


def parse_npm_spec(spec: str, launcher: str) -> Launch:
    """``NAME`` or ``NAME@SPEC`` (``@scope/name`` included) as a registry package; an exact
    SemVer version after ``@`` pins it. Raises LaunchRefused for anything else that names
    code: aliases (``npm:``), git, URL, file and path specs, GitHub shorthands."""
    _plain(spec, launcher)
    if spec.startswith((".", "/", "~")) or ":" in spec.split("@", 2 if spec[0] == "@" else 1)[0]:
        raise LaunchRefused(
            f"{launcher}: {spec!r} is not a registry package spec (a path, URL or git spec)"
        )
    scoped = spec.startswith("@")
    body = spec[1:] if scoped else spec
    name, at, wanted = body.partition("@")
    name = "@" + name if scoped else name
    if not scoped and "/" in name:
        raise LaunchRefused(f"{launcher}: {spec!r} is a git host shorthand, not a registry package")
    problem = _packages.npm_name_problem(name)
    if problem is not None:
        raise LaunchRefused(f"{launcher}: {problem}")
    if not at:
        return Launch(launcher, _packages.NPM, name, spec, None, "no version")
    if not wanted:
        raise LaunchRefused(f"{launcher}: {spec!r} ends with an empty version")
    if ":" in wanted or "/" in wanted or "#" in wanted:
        raise LaunchRefused(
            f"{launcher}: {spec!r} is not a registry version (an npm: alias, a URL, git or "
            "file spec)"
        )
    if _exact_semver(wanted):
        return Launch(launcher, _packages.NPM, name, spec, wanted)
    return Launch(launcher, _packages.NPM, name, spec, None, f"{wanted!r} is a tag or a range")


def _exact_semver(text: str) -> bool:
    """One exact SemVer 2.0.0 version, written as npm resolves it to that version alone
    (no ``v`` or ``=`` prefix, no build metadata)."""
    return text[:1].isdigit() and "+" not in text and versions.is_valid(text, versions.NPM)


_PEP508_NAME: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z", re.ASCII)
# (``===``, PEP 440's arbitrary equality, names one version string exactly: pinned too)
_PYPI_EXACT: Final = re.compile(
    r"(?P<name>[^=@<>!~\[;]+)(?:===?(?P<version>[^=].*)|@(?P<at>.+))?\Z"
)


def parse_pypi_spec(spec: str, launcher: str, *, at_form: bool) -> Launch:
    """``NAME``, ``NAME==VERSION`` (and ``NAME@VERSION`` where the launcher reads it,
    ``at_form``) as a registry project; a PEP 440 version with no wildcard pins it. Extras,
    markers, URLs and paths are refusals; other specifiers are ranges (not pinned)."""
    _plain(spec, launcher)
    if "[" in spec or ";" in spec:
        raise LaunchRefused(f"{launcher}: {spec!r} asks for extras or markers (code not judged)")
    if spec.startswith((".", "/", "~")) or "://" in spec or "/" in spec or ":" in spec:
        raise LaunchRefused(f"{launcher}: {spec!r} is not a registry project (a path or URL)")
    match = _PYPI_EXACT.match(spec)
    if match is None:
        name = re.split(r"[=<>!~@]", spec, maxsplit=1)[0]
        _pypi_name(name, spec, launcher)
        return Launch(launcher, _packages.PYPI, name, spec, None, "a range of versions")
    name = match["name"]
    _pypi_name(name, spec, launcher)
    wanted = match["version"] if match["version"] is not None else match["at"]
    if match["at"] is not None and not at_form:
        raise LaunchRefused(f"{launcher}: {spec!r} is not a requirement {launcher} reads")
    if wanted is None:
        return Launch(launcher, _packages.PYPI, name, spec, None, "no version")
    if wanted == "latest" and match["at"] is not None:
        return Launch(launcher, _packages.PYPI, name, spec, None, "@latest")
    if "*" in wanted or not versions.is_valid(wanted, versions.PYPI):
        return Launch(launcher, _packages.PYPI, name, spec, None, f"{wanted!r} is no one version")
    return Launch(launcher, _packages.PYPI, name, spec, wanted)


def _pypi_name(name: str, spec: str, launcher: str) -> None:
    if not _PEP508_NAME.match(name):
        raise LaunchRefused(f"{launcher}: {spec!r} does not start with a PyPI project name")
    if _PYTHON_REQUEST.fullmatch(name):
        raise LaunchRefused(f"{launcher}: {spec!r} asks for an interpreter the launcher picks")


# What uv reads as a Python request, not a package (any case): an implementation's long or
# short name, alone, after "@", or with a version and a build's variant (3.13t, 3.11gil,
# 3.12+debug). A project name has a hyphen or an underscore there (python-dotenv).
_PYTHON_REQUEST: Final = re.compile(
    r"(?:python|cpython|pypy|graalpy|pyodide|cp|pp|gp)(?:@.*|[0-9][0-9a-z.+]*)?", re.IGNORECASE
)


# ---------------------------------------------------------------------------- command lines

# Options that change nothing of what runs: output, prompting. Anything else is refused.
_NPX_FLAGS: Final = frozenset({"-y", "--yes", "-q", "--quiet", "--silent"})
_YARN_FLAGS: Final = frozenset({"-q", "--quiet"})
_BUNX_FLAGS: Final = frozenset({"--bun", "--silent"})
_UVX_FLAGS: Final = frozenset({"-q", "--quiet", "--isolated", "--offline", "--no-progress"})
_PIPX_FLAGS: Final = frozenset({"--no-cache", "-q", "--quiet"})
_WHY: Final = {
    "-p": "names the packages to install (the command is then looked up separately)",
    "--package": "names the packages to install (the command is then looked up separately)",
    "-c": "runs a shell command",
    "--call": "runs a shell command",
    "--with": "adds packages whose code is not judged",
    "--with-editable": "adds packages whose code is not judged",
    "--with-requirements": "adds packages whose code is not judged",
    "--python": "chooses the interpreter",
    "--registry": "chooses another registry",
    "--index": "chooses another index",
    "--index-url": "chooses another index",
    "--default-index": "chooses another index",
    "--extra-index-url": "chooses another index",
    "--spec": "names the package to install",
    "--from": "names the package to install",
}


def _refuse_option(launcher: str, option: str) -> LaunchRefused:
    name = option.split("=", 1)[0]
    if launcher in ("uvx", "pipx run") and name == "-p":
        name = "--python"  # uv's short form; for npx, -p is --package
    why = _WHY.get(name, "is not understood (it may choose another package, registry or command)")
    return LaunchRefused(f"{launcher}: the option {option!r} {why}")


def parse_launch(launcher: str, args: Sequence[str], *, cwd: str) -> Launch:
    """The package ``launcher`` runs given ``args`` (the arguments after the launcher and
    its subcommand). Raises LaunchRefused naming what is not understood."""
    if launcher in ("npx", "npm exec", "pnpm dlx", "yarn dlx", "bunx"):
        return _npm_launch(launcher, list(args))
    if launcher == "uvx":
        return _uvx_launch(list(args))
    if launcher == "pipx run":
        return _pipx_launch(list(args), cwd)
    raise LaunchRefused(f"{launcher} is not a launcher known here")  # pragma: no cover


def _npm_launch(launcher: str, args: list[str]) -> Launch:
    flags = {
        "npx": _NPX_FLAGS,
        "npm exec": _NPX_FLAGS,
        "yarn dlx": _YARN_FLAGS,
        "bunx": _BUNX_FLAGS,
        "pnpm dlx": frozenset(),
    }[launcher]
    index = 0
    while index < len(args) and args[index].startswith("-"):
        if args[index] == "--":
            index += 1
            break
        if args[index] not in flags:
            raise _refuse_option(launcher, args[index])
        index += 1
    if index >= len(args):
        raise LaunchRefused(f"{launcher}: no package to run")
    separated = index > 0 and args[index - 1] == "--"
    rest = args[index + 1 :]
    if launcher == "npm exec" and not separated:
        # npm reads its own options anywhere on its command line unless ``--`` ends them.
        own = [a for a in rest if a.startswith("-")]
        if own:
            raise LaunchRefused(
                f"npm exec reads {own[0]!r} after the package as its own option: put -- "
                "before the package"
            )
    return parse_npm_spec(args[index], launcher)


def _take_value(args: list[str], index: int, launcher: str) -> tuple[str, int]:
    option = args[index]
    if "=" in option:
        return option.split("=", 1)[1], index + 1
    if index + 1 >= len(args):
        raise LaunchRefused(f"{launcher}: {option} without a value")
    return args[index + 1], index + 2


def _options_naming_a_source(
    args: list[str], launcher: str, source_option: str, flags: frozenset[str]
) -> tuple[str | None, int]:
    """The value of ``source_option`` (the package to install, at most once) among the
    options before the first argument, and that argument's index; any other option, ``--``
    too, must be one of ``flags``."""
    source: str | None = None
    index = 0
    while index < len(args) and args[index].startswith("-"):
        option = args[index]
        if option.split("=", 1)[0] == source_option:
            if source is not None:
                raise LaunchRefused(f"{launcher}: {source_option} given twice")
            source, index = _take_value(args, index, launcher)
            continue
        if option not in flags:
            raise _refuse_option(launcher, option)
        index += 1
    return source, index


def _uvx_launch(args: list[str]) -> Launch:
    launcher = "uvx"
    source, index = _options_naming_a_source(args, launcher, "--from", _UVX_FLAGS)
    if index >= len(args):
        raise LaunchRefused("uvx: no package to run")
    target = args[index]
    if source is None:
        return parse_pypi_spec(target, launcher, at_form=True)
    # With --from the package is that one; the first argument only names a command of it.
    if not _PEP508_NAME.match(target):
        raise LaunchRefused(
            f"uvx: with --from, {target!r} must be a plain command name (it names no package)"
        )
    return _own_command(parse_pypi_spec(source, launcher, at_form=True), target)


def _own_command(launch: Launch, command: str) -> Launch:
    """``launch`` when ``command`` is one the package provides by its name: the package's
    own name, or the command the catalogue knows for the adapter it is. uv and pipx run any
    other command from the package's environment or from PATH (``python``, ``sh``, another
    agent), which is not the package judged; refused."""
    from floorguard._maps.catalog import CATALOG, executable_for

    # The command is compared as written: uv and pipx run it by that name, and a file
    # system tells cases apart (``Aider`` is not aider-chat's ``aider``: it is found on
    # PATH). Normal forms are for package names, never for commands.
    owner = current_packages().owner(launch.ecosystem, launch.package)
    if owner is not None:
        # (its package's name is no command of it: aider-chat's is aider)
        own = {executable_for(owner)}
    else:
        # An untracked package's own name (as written, or in its normal form), unless that
        # is a tracked agent's command in any case, which uv would find on PATH when the
        # package has no such command.
        agents = {_packages.pypi_normal_form(entry.executable) for entry in CATALOG.values()}
        named = {launch.package, _packages.pypi_normal_form(launch.package)}
        own = {name for name in named if _packages.pypi_normal_form(name) not in agents}
    if command not in own:
        raise LaunchRefused(
            f"{launch.launcher}: {command!r} is not {launch.package}'s own command: it is run "
            "from the package's environment or from PATH, and is not what is judged"
        )
    return launch


def _pipx_launch(args: list[str], cwd: str) -> Launch:
    launcher = "pipx run"
    source, index = _options_naming_a_source(args, launcher, "--spec", _PIPX_FLAGS)
    if index >= len(args):
        raise LaunchRefused("pipx run: no package to run")
    app = args[index]
    # pipx runs a file of that name (or a URL) as a script before looking at any package,
    # and a ``__pypackages__`` folder's copy of the app whatever its version.
    if app.startswith(("http://", "https://")) or os.path.lexists(os.path.join(cwd, app)):
        raise LaunchRefused(f"pipx run: {app!r} names a file or URL, which pipx runs as a script")
    if os.path.lexists(os.path.join(cwd, "__pypackages__")):
        raise LaunchRefused(
            "pipx run: the working directory has __pypackages__, whose copy pipx runs "
            "whatever its version"
        )
    if source is None:
        return parse_pypi_spec(app, launcher, at_form=False)
    if not _PEP508_NAME.match(app):
        raise LaunchRefused(f"pipx run: with --spec, {app!r} must be a plain command name")
    return _own_command(parse_pypi_spec(source, launcher, at_form=False), app)


# ---------------------------------------------------------------------------- environment

# Variables each launcher reads as its configuration (which package, registry, index,
# interpreter): refused but for a few that only change output or prompting.
_CONFIG_PREFIXES: Final = {
    "npx": ("npm_config_",),
    "npm exec": ("npm_config_",),
    "pnpm dlx": ("npm_config_", "pnpm_config_", "corepack_"),
    "yarn dlx": ("yarn_", "corepack_"),
    "bunx": ("bun_", "npm_config_"),  # (BUN_OPTIONS is bun's own command line)
    "uvx": ("uv_",),
    "pipx run": ("pipx_",),
}
_HARMLESS: Final = frozenset(
    {
        "npm_config_yes",
        "npm_config_update_notifier",
        "npm_config_fund",
        "npm_config_audit",
        "npm_config_loglevel",
        "npm_config_progress",
        "uv_no_progress",
    }
)


def environment_doubts(launcher: str, environ: Mapping[str, str]) -> list[str]:
    prefixes = _CONFIG_PREFIXES[launcher]
    found = sorted(
        name
        for name in environ
        if name.lower().startswith(prefixes) and name.lower() not in _HARMLESS
    )
    return [
        f"{launcher} reads {name} as its configuration (it may choose another package, "
        "registry or index)"
        for name in found
    ]


# Variables (in any case) that choose how a launcher reaches its registry or index (a proxy)
# or which certificates it trusts there (npm, node, bun, uv, pip): whoever runs that proxy,
# or holds a key the trust admits, serves whatever bytes it likes as the pinned version.
_NETWORK_VARIABLES: Final = frozenset(
    {"http_proxy", "https_proxy", "all_proxy", "node_extra_ca_certs",
     "node_tls_reject_unauthorized", "node_use_env_proxy", "ssl_cert_file", "ssl_cert_dir",
     "requests_ca_bundle", "curl_ca_bundle"}
)  # fmt: skip


def network_doubts(launcher: str, environ: Mapping[str, str], own: Mapping[str, str]) -> list[str]:
    """Every proxy or certificate variable of ``environ`` that ``launcher`` would fetch a
    package through, unless it is the host's own (``own``: the gate's environment, which
    the workspace does not write; a company proxy passed on as it is)."""
    return [
        f"{launcher} reads {name} to reach its registry or index, and one of the child's "
        "own (not the host's) may serve other code as the version pinned (name the "
        "user's proxy or certificates in ~/.npmrc, or run with the host's)"
        for name in sorted(environ)
        if (name.lower() in _NETWORK_VARIABLES or name.lower().startswith("global_agent_"))
        and own.get(name) != environ[name]
    ]


# Where bun looks for its temporary folder, in order (node's os.tmpdir() reads the same).
_TEMPORARY_FOLDERS: Final = ("TMPDIR", "TMP", "TEMP")


def bun_temporary_folder(environ: Mapping[str, str]) -> str:
    """The folder bun takes as its temporary one: the first of TMPDIR, TMP and TEMP that
    is set and not empty, else /tmp."""
    return next((environ[n] for n in _TEMPORARY_FOLDERS if environ.get(n)), "/tmp")  # noqa: S108


# The variables naming the folders a launcher takes its user configuration (a registry or
# index the user chose), its caches and its installs from.
_FOLDER_VARIABLES: Final = (
    "HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_CACHE_HOME", "XDG_DATA_HOME",
)  # fmt: skip


# The variables that place a launcher's cache, store or installs, besides HOME: what it
# runs when they hold the version pinned. bun installs and reruns ``bunx NAME@V`` from
# ``<temp>/bunx-<uid>-NAME@V``, its temporary folder the first of TMPDIR, TMP and TEMP set
# (bun's BUN_* variables are refused as its configuration); pnpm's data folder, its store,
# is PNPM_HOME before XDG's; pipx run keeps its environments in XDG's cache (PIPX_* are
# refused as its configuration).
_XDG_CACHES: Final = ("XDG_CACHE_HOME", "XDG_DATA_HOME")
_CACHE_VARIABLES: Final = {
    "npx": _XDG_CACHES,
    "npm exec": _XDG_CACHES,
    "pnpm dlx": (*_XDG_CACHES, "PNPM_HOME"),
    "bunx": (*_XDG_CACHES, *_TEMPORARY_FOLDERS),
    "yarn dlx": _XDG_CACHES,
    "uvx": _XDG_CACHES,
    "pipx run": _XDG_CACHES,
}


def chosen_folder_doubts(launcher: str, environ: Mapping[str, str]) -> list[str]:
    """For a child judged for an agent (an MCP server): each folder variable its
    environment sets to another value than the agent's has. Its declaration (or its
    client's settings) chose that folder, wherever it lies: the files there would be taken
    for the user's own and the caches there would say what a pinned version is, the
    workspace's choice as much as a proxy it names. A relative HOME too, which the
    declaration's ``cwd`` places."""
    agent = agent_environment()
    if agent is None:
        return []
    doubts = [
        f"{launcher} takes its user configuration and caches from {name}, which the "
        "server's declaration sets (not the agent's environment): a registry, index or "
        f"cache there would be the workspace's choice (give the agent that {name} instead)"
        for name in dict.fromkeys((*_FOLDER_VARIABLES, *_CACHE_VARIABLES.get(launcher, ())))
        if name in environ and environ[name] != agent.get(name)
    ]
    home = environ.get("HOME")
    if home and not os.path.isabs(home):
        # (taken from the server's own folder, which its declaration's cwd may choose)
        doubts.append(
            f"HOME={home} is relative: {launcher} takes it from the server's working "
            "folder, which its declaration may choose, and so its user configuration and "
            "caches there (give the agent an absolute HOME)"
        )
    return doubts


# ---------------------------------------------------------------------------- configuration files

# npm's configuration keys that change nothing of what a launch runs (output, prompting,
# what npm writes elsewhere); per-registry credentials (``//host/:_authToken``) too. Any
# other key of an ``.npmrc`` may (``script-shell`` runs the bin through another program,
# ``node-options`` preloads code into it, ``cache`` names an ``_npx`` tree, ...): refused.
_NPMRC_HARMLESS: Final = frozenset(
    {
        "yes", "fund", "audit", "audit-level", "update-notifier", "loglevel", "progress",
        "color", "unicode", "timing", "logs-max", "save-exact", "save-prefix", "package-lock",
        "omit-lockfile-registry-resolved", "engine-strict", "sign-git-tag", "git-tag-version",
        "message", "email", "init-author-name", "init-author-email", "init-author-url",
        "init-license", "init-version", "_auth", "_authToken", "username", "_password",
        "always-auth",
    }
)  # fmt: skip
# Also understood in the user's own ``~/.npmrc`` (not in a project's, which the workspace
# writes): the registry the user chose (a named window: it serves the bytes of a pinned
# version, and how it is reached: certificates, proxies), the node headers native builds
# use, the user's cache and global prefix (whose ``etc/npmrc`` is then read by the same
# rules).
_NPMRC_USER: Final = frozenset(
    {"registry", "nodedir", "cache", "prefix", "cafile", "ca", "strict-ssl", "proxy",
     "https-proxy", "noproxy"}
)  # fmt: skip
# Also understood in npm's builtin npmrc when it is the system's (npm's own package outside
# the workspace): a distribution's npm names its global and user files there (Debian's
# ``globalconfig=/etc/npmrc``), which are then the ones read; ``globalignorefile`` only
# concerns what ``npm publish`` packs.
_NPMRC_SYSTEM: Final = frozenset({"globalconfig", "userconfig", "globalignorefile"})
# The settings that name another of npm's files: followed, never taken as they are.
_NPMRC_FILES: Final = frozenset({"prefix", "globalconfig", "userconfig", "cache"})
# A key a reason quotes may be a credential pasted as a key (an npm token without its
# ``_authToken=``, a base64 ``_auth`` whose padding npm reads as the ``=``): only what reads
# as a setting's name is shown, as the values are hidden.
_SETTING_NAME: Final = re.compile(r"[a-z][a-z0-9._-]{0,63}\Z")


def _key_shown(key: str) -> str:
    """``key`` as a reason quotes it: a setting's name (lower case, at most two digits;
    a registry's or scope's setting by its host or scope and name) repr'd; anything else
    not shown."""
    name = key.rpartition(":")[2] if key.startswith(("//", "@")) else key
    if _SETTING_NAME.match(name) and sum(c.isdigit() for c in name) <= 2 and len(key) <= 256:
        return repr(key)
    return "a key that is no setting's name (not shown: it may be a credential)"


_NPMRC_CREDENTIALS: Final = frozenset(
    {"_authToken", "_auth", "username", "_password", "email", "always-auth", "certfile",
     "keyfile"}
)  # fmt: skip
# uv.toml keys that choose nothing of what runs but the index (uv's tool commands read only
# the user's and the system's uv.toml, never a project's; the index the user chose is the
# named window, as a registry in ``~/.npmrc`` is).
_UV_INDEX: Final = frozenset({"index", "index-url", "extra-index-url"})
_UV_HARMLESS: Final = frozenset(
    {"native-tls", "offline", "concurrent-downloads", "concurrent-builds", "concurrent-installs",
     "index", "index-url", "extra-index-url"}
)  # fmt: skip
# pip's variables that only change output or prompting; in the user's pip.conf also the
# index the user chose (pip has no project configuration file).
_PIP_HARMLESS: Final = frozenset(
    {"disable-pip-version-check", "no-color", "progress-bar", "quiet", "no-input",
     "root-user-action", "verbose"}
)  # fmt: skip
_PIP_CONF_USER: Final = frozenset(
    {"index-url", "extra-index-url", "find-links", "trusted-host", "cert", "client-cert",
     "timeout", "retries", "proxy"}
)  # fmt: skip
_NPM_FAMILY: Final = ("npx", "npm exec", "pnpm dlx", "bunx")


def configuration_doubts(
    launcher: str, environ: Mapping[str, str], cwd: str, npm: NpmRun | None = None
) -> list[str]:
    """The configuration files ``launcher`` reads for a spawn in ``cwd`` with ``environ``
    (its HOME, XDG folders and prefix taken from the child's environment), checked: a file
    that holds a setting not known to leave what runs unchanged, or that cannot be read
    exactly, is a doubt naming the file and the setting. A file that is not there is
    absent. ``npm``: the npm that runs ``npx`` or ``npm exec`` (its own files are read too;
    None or not seen: a doubt, as which files it reads cannot be told)."""
    from floorguard._identify.mcp_config import home_of

    here = os.path.abspath(cwd)
    chain = _chain(here)
    home = home_of(environ, here)
    config_homes = _config_homes(environ.get("XDG_CONFIG_HOME", ""), home, here)
    config_dirs = [
        os.path.join(here, d) for d in environ.get("XDG_CONFIG_DIRS", "").split(":") if d
    ]
    doubts: list[str] = []
    if launcher in _NPM_FAMILY:
        if "PREFIX" in environ:
            doubts.append(
                f"{launcher} reads PREFIX as npm's global prefix (its npmrc and its global "
                "installs)"
            )
        for folder in chain:
            doubts += _npmrc_doubts(os.path.join(folder, ".npmrc"), user=False)
        if launcher in ("npx", "npm exec"):
            doubts += _npm_own_files_doubts(launcher, npm, environ, here, home)
        else:
            doubts += _npmrc_doubts(
                os.path.join(home, ".npmrc"),
                user=_users(os.path.join(home, ".npmrc"), here),
                home=home,
            )
    if launcher == "pnpm dlx":
        for config_home in config_homes:
            rc = os.path.join(config_home, "pnpm", "rc")
            doubts += _npmrc_doubts(rc, user=_users(rc, here), home=home)
        doubts += _present(launcher, [os.path.join(d, "pnpm-workspace.yaml") for d in chain])
        # pnpm 11's own settings file (its cache and store folders among them)
        doubts += _present(launcher, [os.path.join(c, "pnpm", "config.yaml") for c in config_homes])
    if launcher == "yarn dlx":
        # yarn 1 has no dlx: ``yarn dlx`` runs the package.json script of that name, and
        # reads .yarnrc (``yarn-path`` runs another yarn).
        doubts += _present(
            launcher,
            [os.path.join(d, name) for d in (*chain, home) for name in (".yarnrc.yml", ".yarnrc")],
        )
        doubts += _yarn_script_doubts(chain)
    if launcher in ("pnpm dlx", "yarn dlx"):
        doubts += _package_manager_doubts(launcher, chain)
    # A launcher's cache and installs are what it runs when they hold the version pinned:
    # in the working directory, the workspace fills them.
    for name in _CACHE_VARIABLES.get(launcher, ()):
        value = environ.get(name)
        if value and in_the_workspace(os.path.join(here, value), here):
            doubts.append(f"{name}={value} puts {launcher}'s cache or installs in the "
                          "workspace (the working directory, or for a server a folder its "
                          "repository may have written), where it can fill them")  # fmt: skip
    doubts += _xdg_installs_linked_in(launcher, environ, home, here)
    if environ.get("HOME") == "":
        # node's os.homedir() gives an empty HOME as it is, and npm then keeps the `~` of
        # its default cache: `<cwd>/~/.npm`, in the working directory; Rust's and Python's
        # home lookups differ on it (as it is, or the user's entry).
        doubts.append(f"HOME is set but empty: {launcher} may take its cache and installs "
                      "from the working directory (npm's is then ./~/.npm), where the "
                      "workspace can fill them")  # fmt: skip
    elif not _users(home, here):
        # Each launcher's cache and installs default to folders under HOME (npm's
        # ~/.npm/_npx, uv's ~/.cache/uv, pipx's ~/.local/pipx, ...). (A home that is the
        # working directory itself is the user's own: an agent started there.)
        doubts.append(f"HOME={home} puts {launcher}'s cache and installs in the workspace "
                      "(below the working directory, or for a server in a folder its "
                      "repository may have written), where it can fill them")  # fmt: skip
    if launcher == "bunx":
        doubts += _present(
            launcher,
            [os.path.join(d, "bunfig.toml") for d in chain]
            + [os.path.join(c, ".bunfig.toml") for c in config_homes]
            + [os.path.join(home, ".bunfig.toml")],
        )
    if launcher == "uvx":
        for folder in (*config_homes, *config_dirs):
            path = os.path.join(folder, "uv", "uv.toml")
            doubts += _uv_toml_doubts(path, user=_users(path, here))
        # Without a pin, uv takes the first Python on PATH it finds (and asks it what it is):
        # one in the workspace is a Python the workspace wrote, standard library and all.
        doubts += [
            f"uvx may build the tool's environment on {found}, a Python on PATH in the "
            "working directory (the workspace's own, not judged)"
            for found in _pythons_on_path_in_the_workspace(environ.get("PATH", ""), here, environ)
        ]
        # The user's Python pin (``uv python pin --global``): the interpreter uv builds the
        # tool's environment with, a path in it taken against the working directory.
        doubts += [
            f"uvx reads {path}, which chooses the Python it builds the tool's environment "
            "with (a path there may lead into the workspace), not judged here"
            for folder in (*config_homes, *config_dirs)
            for name in (".python-version", ".python-versions")
            if os.path.lexists(path := os.path.join(folder, "uv", name))
        ]
    if launcher == "pipx run":
        doubts += [
            f"pipx run: pip reads {name} as its configuration (it may choose another index, "
            "links or builds)"
            for name in sorted(environ)
            if name.upper().startswith("PIP_")
            and name[4:].lower().replace("_", "-") not in _PIP_HARMLESS
        ]
        for path in (
            *(os.path.join(c, "pip", "pip.conf") for c in config_homes),
            os.path.join(home, ".pip", "pip.conf"),
            *(os.path.join(d, "pip", "pip.conf") for d in config_dirs),
        ):
            doubts += _pip_conf_doubts(path, user=_users(path, here))
    return doubts


# The names uv looks for a Python by (a free-threaded build's ``3.13t`` included), and more.
_PYTHON_NAME: Final = re.compile(r"(?:python|pypy|graalpy)(?:\d+(?:\.\d+)?t?)?\Z")


def _pythons_on_path_in_the_workspace(
    path_env: str, here: str, environ: Mapping[str, str]
) -> list[str]:
    """Each Python uv may take from the workspace: a file named as a Python (``python``,
    ``python3``, ``python3.13t``, ``pypy3``, ...) in a PATH entry that lies in the working
    directory, or that leads there through a link wherever the entry lies; and an active
    conda environment (CONDA_PREFIX) there. (Relative entries are refused elsewhere.)"""
    found: list[str] = []
    for entry in path_env.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        inside = in_the_workspace(entry, here)
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        found += [
            os.path.join(entry, name)
            for name in names
            if _PYTHON_NAME.match(name)
            and (inside or in_the_workspace(os.path.realpath(os.path.join(entry, name)), here))
        ]
    conda = environ.get("CONDA_PREFIX")
    if conda and in_the_workspace(os.path.join(here, conda), here):
        found.append(f"CONDA_PREFIX={conda}")
    return found


def in_the_project(package: str, here: str) -> bool:
    """Whether a launcher's own package folder is the workspace's: below the working
    directory, or in a ``node_modules`` of it or of a folder above (a project's
    dependency). Its code is then what the workspace wrote, a package.json naming it
    ``npm`` or ``yarn`` all it takes."""
    return in_the_workspace(package, here) or any(
        within(package, os.path.join(f, "node_modules")) for f in _chain(here)
    )


def within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it, by its letters (``..`` taken out)."""
    path, folder = os.path.normpath(path), os.path.normpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def read_manifest(path: str | os.PathLike[str]) -> object:
    """The JSON value of the regular file ``path`` (a package.json). Raises ValueError when
    it cannot be read so: not a regular file (a FIFO is refused, never waited on), over
    1 MiB, or not JSON."""
    import json

    from floorguard._base.files import read_regular
    from floorguard._identify.consulted import MAX_MANIFEST_BYTES
    from floorguard.errors import UnreadableFileError

    try:
        data = read_regular(path, max_bytes=MAX_MANIFEST_BYTES, what="package.json")
    except UnreadableFileError as exc:
        raise ValueError(str(exc)) from None
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{path} nests too deep") from None


def _manifests(chain: Sequence[str]) -> Iterator[tuple[str, object | None]]:
    """Each package.json of the folders ``chain`` (nearest first), with its JSON value, or
    None when it cannot be read (a doubt for whoever asks)."""
    for folder in chain:
        manifest = os.path.join(folder, "package.json")
        if not os.path.lexists(manifest):
            continue
        try:
            yield manifest, read_manifest(manifest)
        except ValueError:
            yield manifest, None


def _package_manager_doubts(launcher: str, chain: Sequence[str]) -> list[str]:
    """A ``packageManager`` field in a package.json of the project makes pnpm (and corepack,
    and yarn through it) fetch and run the version it names instead of itself: code no one
    judged."""
    if launcher == "pnpm dlx":
        # pnpm reads its manifest from package.yaml or package.json5 too: not read here.
        other = [os.path.join(f, n) for f in chain for n in ("package.yaml", "package.json5")]
        found = [path for path in other if os.path.lexists(path)]
        if found:
            return [f"{launcher}: {found[0]} is a manifest pnpm reads (a packageManager in it "
                    "is not read here)"]  # fmt: skip
    for manifest, data in _manifests(chain):
        if data is None:
            return [f"{launcher}: {manifest} cannot be read (it may name a packageManager)"]
        engines = data.get("devEngines") if isinstance(data, dict) else None
        if isinstance(data, dict) and (
            "packageManager" in data or (isinstance(engines, dict) and "packageManager" in engines)
        ):
            return [
                f"{launcher}: {manifest} names a packageManager, whose version would run "
                "in its place"
            ]
    return []


def _yarn_script_doubts(chain: Sequence[str]) -> list[str]:
    """yarn 1 reads ``yarn dlx`` as ``yarn run dlx``: a ``dlx`` script in the nearest
    package.json is what it runs."""
    for manifest, data in _manifests(chain):
        if data is None:
            return [f"yarn dlx: {manifest} cannot be read (yarn 1 runs its dlx script)"]
        scripts = data.get("scripts") if isinstance(data, dict) else None
        if isinstance(scripts, dict) and "dlx" in scripts:
            return [f"yarn dlx: {manifest} has a dlx script, which yarn 1 runs instead"]
        return []
    return []


def _config_homes(value: str, home: str, here: str) -> list[str]:
    """The folders a launcher may take as the user's configuration home. The launchers
    disagree on a relative XDG_CONFIG_HOME (uv drops it for ~/.config, pip takes it against
    its working directory): then both are read."""
    default = os.path.join(home, ".config")
    if not value:
        return [default]
    if os.path.isabs(value):
        return [value]
    return [os.path.join(here, value), default]


def _users(path: str, here: str) -> bool:
    """Whether ``path`` (a home, or a file under a configuration folder the child's
    environment names) is the user's own rather than the workspace's: one below the
    working directory (a declaration's ``env`` can point HOME or XDG_CONFIG_HOME there)
    holds what the workspace wrote, held to a project's rules. A home that is the working
    directory itself stays the user's (its ``.npmrc`` is read as the project's anyway).
    Where it lies is asked of its letters and of where its links lead: a user's file that
    is a link into the workspace (a dotfiles checkout the agent works in) holds what the
    workspace wrote, and a file below the working directory that links out of it is one
    the workspace chose."""
    # A file of more than one name (a hard link, which no path shows) may be the
    # workspace's under its other name: held to a project's rules.
    with contextlib.suppress(OSError):
        info = os.stat(path)
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            return False
    places = {os.path.realpath(path), os.path.normpath(os.path.abspath(path))}
    works = {os.path.realpath(here), os.path.normpath(os.path.abspath(here))}
    if any(p.startswith(w.rstrip(os.sep) + os.sep) for p in places for w in works):
        return False
    # For an MCP server: anywhere in the agent's working directory or a declaring project's
    # folder is the workspace's, that folder itself too (the exemption is for an agent the
    # host starts; a repository declaring a server would fill a home that is its own folder).
    for folder in server_workspaces():
        for top in {os.path.realpath(folder), os.path.normpath(os.path.abspath(folder))}:
            if any(p == top or p.startswith(top.rstrip(os.sep) + os.sep) for p in places):
                return False
    return True


def in_the_workspace(path: str, here: str) -> bool:
    """Whether ``path`` (absolute) is in the working directory ``here`` or, for a server
    judged for an agent, in the agent's (by its letters or through links)."""
    folders = [here, *server_workspaces()]
    return any(
        within(path, folder) or within(os.path.realpath(path), os.path.realpath(folder))
        for folder in folders
    )


def _read(path: str, what: str) -> tuple[str | None, str | None]:
    """The text of the file at ``path`` (None: absent), or a doubt naming it."""
    from floorguard._identify.mcp_files import ConfigDoubt, read_config

    try:
        got = read_config(path, within=None, what=what)
    except ConfigDoubt as exc:
        return None, str(exc)
    if got is None:
        return None, None
    try:
        return got[0].decode("utf-8"), None
    except UnicodeDecodeError:
        return None, f"{path}: the {what} is not UTF-8 text"


def _present(launcher: str, paths: Sequence[str]) -> list[str]:
    doubts = []
    for path in paths:
        if os.path.lexists(path):
            doubts.append(
                f"{launcher} reads {path}, whose settings may choose what runs (its own "
                "release, preloaded code, a registry) and are not read here"
            )
    return doubts


def _npmrc_doubts(path: str, *, user: bool, home: str = "") -> list[str]:
    """``path`` read as an ``.npmrc`` by a project's or (``user``) the user's rules; a
    ``prefix`` there is followed to its ``etc/npmrc``, read by the user's rules."""
    files, doubts = _npmrc_settings(path, allowed=_npmrc_allowed(user), home=home)
    if "prefix" in files and not path.endswith(os.sep + "npmrc"):
        doubts += _npmrc_doubts(os.path.join(files["prefix"], "etc", "npmrc"), user=True)
    return doubts


def _npmrc_allowed(user: bool, *, system: bool = False) -> frozenset[str]:
    """The keys an ``.npmrc`` may set: a project's (the workspace writes it), the user's,
    or npm's builtin one when it is the system's."""
    if not user:
        return _NPMRC_HARMLESS
    return _NPMRC_HARMLESS | _NPMRC_USER | (_NPMRC_SYSTEM if system else frozenset())


def _npmrc_settings(
    path: str, *, allowed: frozenset[str], home: str
) -> tuple[dict[str, str], list[str]]:
    """The file settings (``prefix``, ``globalconfig``, ``userconfig``, as absolute paths)
    of the ``.npmrc`` at ``path`` and its doubts: every key not in ``allowed`` (nor a
    per-registry credential, nor a scope's registry where ``registry`` is allowed), a line
    npm would not read plainly, a value leading into /proc, a file setting that is not an
    absolute path npm reads as it is."""
    text, doubt = _read(path, "npm configuration")
    if doubt is not None:
        return {}, [doubt]
    if text is None:
        return {}, []
    files: dict[str, str] = {}
    doubts: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        key, equals, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            doubts.append(f"{path} line {number}: not a key=value setting npm reads plainly")
            continue
        if key.startswith("//"):
            understood = ":" in key and key.rsplit(":", 1)[-1] in _NPMRC_CREDENTIALS
        else:
            scope_registry = key.startswith("@") and key.endswith(":registry")
            understood = key in allowed or ("registry" in allowed and scope_registry)
        if not understood:
            doubts.append(f"{path} sets {_key_shown(key)}, which may change what npm runs")
            continue
        if "/" in value:
            from floorguard._identify.process_paths import reaches_the_process

            if reaches_the_process(home + value[1:] if value.startswith("~/") else value, "/"):
                # npm reads it in the child, where /proc/self is the child's own.
                doubts.append(f"{path} sets {_key_shown(key)} to {value!r}, which leads into /proc")
                continue
        if key in _NPMRC_FILES:
            # npm expands a leading ~ and ${VARIABLES}, and resolves a relative path against
            # its working directory: only an absolute path is read here as npm reads it.
            named = home + value[1:] if value.startswith("~/") else value
            if "$" in named or not os.path.isabs(named):
                doubts.append(f"{path} sets {_key_shown(key)} to {value!r}, which is not read here")
            else:
                files[key] = os.path.normpath(named)
    return files, doubts


def _npm_own_files_doubts(
    launcher: str, npm: NpmRun | None, environ: Mapping[str, str], here: str, home: str
) -> list[str]:
    """npm's builtin, user and global npmrc, found as npm finds them (@npmcli/config): the
    builtin ``npmrc`` in npm's own package; the user's ``~/.npmrc`` unless the builtin
    names another ``userconfig``; the global ``etc/npmrc`` of the prefix the user's file,
    else the builtin, else the node running npm sets (two folders above its real file),
    unless the builtin names another ``globalconfig``. A file of the workspace's (below
    the working directory, a project-local npm's, the global npmrc of a node in the
    working directory) is held to a project's rules."""
    doubts = []
    if environ.get("DESTDIR"):
        doubts.append(f"{launcher} reads DESTDIR as part of npm's global prefix (its npmrc)")
    package = npm.package if npm is not None else None
    node = npm.node if npm is not None else None
    if package is None or not node:
        why = "its file is not npm's own script" if package is None else "no node is seen"
        doubts.append(
            f"{launcher}: which npm runs cannot be told ({why}), so neither the builtin "
            "npmrc in its own package nor the global npmrc of its node's prefix can be read"
        )
        builtin: dict[str, str] = {}
    else:
        local = in_the_project(package, here)
        if local:
            # An npm of the project's own node_modules is code the workspace wrote (a
            # package.json naming itself npm is all it takes): never npm's as installed.
            doubts.append(
                f"{launcher}: the npm that runs is the project's own ({package}), code the "
                "workspace can write"
            )
        system = _users(package, here) and not local
        builtin, more = _npmrc_settings(
            os.path.join(package, "npmrc"), allowed=_npmrc_allowed(system, system=True),
            home=home,
        )  # fmt: skip
        doubts += more
    userconfig = builtin.get("userconfig", os.path.join(home, ".npmrc"))
    users, more = _npmrc_settings(
        userconfig, allowed=_npmrc_allowed(_users(userconfig, here)), home=home
    )
    doubts += more
    # npm's global file: the one the builtin names, else ``etc/npmrc`` of the prefix in
    # force (the user's over the builtin's over the default, node's).
    if "globalconfig" in builtin:
        globalconfig, outside = builtin["globalconfig"], True
    elif "prefix" in users or "prefix" in builtin:
        globalconfig = os.path.join(users.get("prefix") or builtin["prefix"], "etc", "npmrc")
        outside = True
    elif node:
        real = os.path.realpath(node)  # (node's execPath is its real file)
        globalconfig = os.path.join(os.path.dirname(os.path.dirname(real)), "etc", "npmrc")
        # A node in the working directory itself puts its prefix above it.
        outside = not within(real, here)
    else:
        globalconfig = ""
    globals_: dict[str, str] = {}
    if globalconfig:
        globals_, more = _npmrc_settings(
            globalconfig, allowed=_npmrc_allowed(outside and _users(globalconfig, here)), home=home
        )
        doubts += more
    # npm's cache holds the _npx trees it runs a pinned version from.
    cache = users.get("cache") or globals_.get("cache") or builtin.get("cache")
    if cache is not None and in_the_workspace(cache, here):
        doubts.append(f"{launcher}: npm's 'cache' {cache} is in the working directory, where "
                      "the workspace can fill its _npx trees")  # fmt: skip
        return doubts
    # The cache it takes (~/.npm by default), or a folder in it npm reads a package from
    # (its content cache, _cacache, and each folder in it; its _npx, and each tree there),
    # may be a link out of a folder outside the working directory into it: the workspace
    # fills it just the same. (Links deeper in those trees are not looked for.)
    base = cache or os.path.join(home, ".npm")
    folders = [base]
    for inner in ("_npx", "_cacache"):
        folders.append(os.path.join(base, inner))
        with contextlib.suppress(OSError):
            folders += [os.path.join(base, inner, e) for e in sorted(os.listdir(folders[-1]))]
    linked = _linked_into_the_workspace(folders, here)
    if linked is not None:
        doubts.append(f"{launcher}: npm's cache folder {linked} leads into the working "
                      "directory, where the workspace can fill the packages npm runs "
                      "from its cache")  # fmt: skip
    return doubts


def _linked_into_the_workspace(folders: Sequence[str], here: str) -> str | None:
    """The first of ``folders`` that lies outside the workspace by its letters but leads
    into it through a link (one inside it by its letters is the workspace's anyway, and
    refused where it is named), or None."""
    workspaces = [here, *server_workspaces()]
    for folder in folders:
        by_its_letters = any(within(os.path.normpath(folder), w) for w in workspaces)
        if in_the_workspace(folder, here) and not by_its_letters:
            return folder
    return None


# The folders under the user's XDG cache and data folders each launcher runs installs
# from (uv's cache and its installed tools, pipx's environments, pnpm's store and dlx
# cache); npm's are read from its own configuration above.
_XDG_INSTALLS: Final = {"uvx": "uv", "pipx run": "pipx", "pnpm dlx": "pnpm"}


def _xdg_installs_linked_in(
    launcher: str, environ: Mapping[str, str], home: str, here: str
) -> list[str]:
    """A launcher's cache or data folder under the user's home (or the XDG folders the
    child's environment names) that leads into the working directory through a link: the
    workspace fills what it runs from there, as it would through a variable naming it."""
    name = _XDG_INSTALLS.get(launcher)
    if name is None:
        return []
    cache = os.path.join(here, environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"))
    data = os.path.join(here, environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"))
    folders = [cache, os.path.join(cache, name), data, os.path.join(data, name)]
    if launcher == "pipx run":
        folders.append(os.path.join(home, ".local", "pipx"))  # (pipx before 1.3)
    linked = _linked_into_the_workspace(folders, here)
    if linked is None:
        return []
    return [
        f"{launcher}: {linked} leads into the working directory, where the workspace can "
        f"fill the caches and installs {launcher} runs from"
    ]


def _chain(here: str) -> list[str]:
    return [here, *(str(p) for p in Path(here).parents)]


def _uv_toml_doubts(path: str, *, user: bool) -> list[str]:
    from floorguard._identify.mcp_files import ConfigDoubt, parse_toml, read_config

    try:
        got = read_config(path, within=None, what="uv configuration")
        if got is None:
            return []
        document = parse_toml(got[0], path)
    except ConfigDoubt as exc:
        return [str(exc)]
    return [
        f"{path} sets {_key_shown(key)}, which may change what uv runs"
        for key in sorted(document)
        if key not in (_UV_HARMLESS if user else _UV_HARMLESS - _UV_INDEX)
    ]


def _pip_conf_doubts(path: str, *, user: bool) -> list[str]:
    import configparser

    text, doubt = _read(path, "pip configuration")
    if doubt is not None:
        return [doubt]
    if text is None:
        return []
    parser = configparser.RawConfigParser(strict=True)
    try:
        parser.read_string(text, source=path)
    except configparser.Error as exc:
        return [f"{path}: not a configuration pip reads plainly: {exc}"]
    return [
        f"{path} sets [{section}] {_key_shown(option)}, which may change what pip installs"
        for section in parser.sections()
        for option in parser.options(section)
        if option.replace("_", "-")
        not in (_PIP_HARMLESS | _PIP_CONF_USER if user else _PIP_HARMLESS)
    ]


# ---------------------------------------------------------------------------- what runs


@dataclass(frozen=True)
class Judged:
    """What a launch runs: the map entry identified (None: the package has no entry) and
    the inputs not understood."""

    identified: Identification | None
    what: str
    doubts: tuple[str, ...]


def judge_launch(launch: Launch, *, cwd: str) -> Judged:
    """Which map entry ``launch`` runs, and at which version when it can be known."""
    index = current_packages()
    owner = index.owner(launch.ecosystem, launch.package)
    what = f"{launch.launcher} running the {launch.ecosystem} package {launch.package}"
    ran: list[Identification] = []
    if launch.launcher in ("npx", "npm exec") and (owner is None or launch.version is not None):
        shadow = _local_bin_doubt(launch, owner, cwd, ran)
        if shadow is not None:
            return Judged(None, what, (shadow,))
    if owner is None:
        # Names were read in their one spelling (an npm name with capitals or a look-alike
        # letter refused): no other package can pass for a tracked one here.
        return Judged(None, what, ())
    if launch.version is not None:
        # (a local install npm takes for the pinned spec runs: its metadata is what vouches,
        # and for an MCP server one in the workspace vouches for nothing)
        source = ran[0].version_source if ran else None
        vouches = ran[0].vouches if ran else True
        found = Identification(
            owner, launch.launcher, launch.spec, launch.version, source, True, "launcher-spec",
            vouches=vouches,
        )  # fmt: skip
        return Judged(found, what, ())
    if launch.launcher == "npx" and launch.unpinned == "no version":
        local = _npx_local(launch, cwd)
        if local is not None:
            return local
    why = (
        f"{launch.launcher} {launch.spec}: {launch.unpinned}, so the version that runs is "
        f"chosen by a registry at run time; {PIN_ADVICE} ("
        + (
            f"{launch.package}@X.Y.Z"
            if launch.ecosystem == _packages.NPM
            else f"{launch.package}==X.Y.Z"
        )
        + ")"
    )
    return Judged(
        Identification(owner, launch.launcher, launch.spec, None, None, True), what, (why,)
    )


def _npx_local(launch: Launch, cwd: str) -> Judged | None:
    """``npx NAME`` with no version runs the first ``node_modules/.bin/NAME`` in the working
    directory or a folder above it, whatever package and version that is."""

    here = Path(os.path.abspath(cwd))
    own = _project_bin(here, launch.package)
    if own is not None:
        why = f"npx {launch.spec} runs the project's own bin from {own}, which is not judged"
        return Judged(None, f"npx running {own}", (why,))
    for folder in (here, *here.parents):
        manifest = folder / "package.json"
        if os.path.lexists(manifest):
            try:
                other = _own_bin_doubt(manifest, read_manifest(manifest), launch.spec)
            except ValueError as exc:
                other = str(exc)
            if other is not None:
                return Judged(None, f"npx running {manifest}", (f"npx {launch.spec}: {other}",))
    for folder in (here, *here.parents):
        candidate = folder / "node_modules" / ".bin" / launch.package
        if not os.path.lexists(candidate):
            continue
        what = f"npx running {candidate}"
        root = _workspace_root_above(folder)
        if root is not None:
            why = (
                f"npx {launch.spec}: {root} declares workspaces, and npm looks for "
                f"node_modules/.bin from a workspace's root, not from {folder}"
            )
            return Judged(None, what, (why,))
        try:
            hit, unlike = _read_bin(candidate, "npx")
        except DetectionError as exc:
            return Judged(None, what, (f"npx {launch.spec} runs {candidate}: {exc}",))
        if unlike is not None:
            return Judged(None, what, (f"npx {launch.spec} runs {candidate}, which {unlike}",))
        index = current_packages()
        if hit is None or hit.adapter != index.owner(_packages.NPM, launch.package):
            owner = hit.adapter if hit is not None else "no tracked package"
            why = f"npx {launch.spec} runs {candidate}, which is {owner}'s, not {launch.package}'s"
            return Judged(hit, what, (why,))
        found = Identification(
            hit.adapter, "npx", launch.spec, hit.version, hit.version_source, True, "npm-metadata"
        )
        return Judged(found, what, ())
    return None


# The launchers that run a package's bin the way npm does: through ``sh -c`` (``sh`` found
# on PATH), on a PATH with every ``node_modules/.bin`` from the working directory up first.
_NPM_RUNNERS: Final = frozenset({"npx", "npm exec", "pnpm dlx", "bunx", "yarn dlx"})


def npm_path_doubts(
    launcher: str, environ: Mapping[str, str], cwd: str, npm: NpmRun | None = None
) -> list[str]:
    """What npm would run other than the files judged: the ``sh`` it runs the bin through
    and the ``node`` a ``#!/usr/bin/env node`` bin finds, each looked up on the PATH npm
    gives the bin (every ``node_modules/.bin`` from ``cwd`` up, then the child's PATH). The
    shell must be the system's ``/bin/sh`` and node the one the child's own PATH leads to.
    ``npm``: the npm that runs ``npx`` or ``npm exec`` (its folders go on that PATH too)."""
    if launcher not in _NPM_RUNNERS:
        return []
    here = Path(os.path.abspath(cwd))
    other = sorted(n for n in environ if n.lower() == "path" and n != "PATH")
    if other:
        # npm builds the bin's PATH from every variable named so, in any case.
        return [f"{launcher} takes {other[0]} as its PATH too (npm reads the name in any case)"]
    for what, folder in _npm_path_folders(launcher, environ, str(here), npm):
        for spelt in dict.fromkeys([folder, os.path.realpath(folder)]):  # (node's are real)
            if os.pathsep in spelt:
                return [
                    f"{launcher} puts a folder of {what} {spelt} on the PATH it gives the bin, "
                    f"and the {os.pathsep!r} in it splits that entry into others (a relative "
                    "one is searched from the working directory)"
                ]
    bins = [str(folder / "node_modules" / ".bin") for folder in (here, *here.parents)]
    from floorguard._identify.process_paths import Walk

    walk = Walk()
    for folder in bins:
        if walk.reaches(folder, "/"):
            # (here it leads nowhere, or elsewhere: npm's shell finds the child's own)
            return [
                f"{launcher} puts {folder} first on the PATH it gives the bin, and it leads "
                "into /proc or /dev/fd, which lead to each process's own files"
            ]
    child = [e for e in environ.get("PATH", "").split(os.pathsep) if os.path.isabs(e)]
    from floorguard._identify.examine import _is_native

    doubts = []
    for name, expected in (("sh", _first("sh", ["/bin"])), ("node", _first("node", child))):
        found = _first(name, [*bins, *child])
        if found is None:
            continue
        if expected is None or os.path.realpath(found) != os.path.realpath(expected):
            doubts.append(
                f"{launcher} runs the bin with the {name} first on the PATH it gives it, "
                f"{found}, not {expected or 'one found here'}"
            )
        elif not _is_native(found):
            # (a launcher that is itself a native program had its node judged nowhere)
            doubts.append(
                f"{launcher} runs the bin with the {name} first on the PATH it gives it, "
                f"{found}, which is not a native program"
            )
    return doubts


def _npm_path_folders(
    launcher: str, environ: Mapping[str, str], here: str, npm: NpmRun | None
) -> list[tuple[str, str]]:
    """(what, folder) of each folder below which npm puts an entry on the bin's PATH:
    ``node_modules/.bin`` of the working directory and above; the npx cache's
    ``<cache>/_npx/<hash>/node_modules/.bin`` (the cache defaults to ``~/.npm``, and the
    other launchers keep theirs under HOME too); ``<prefix>/bin``; npm's own
    ``node-gyp-bin``."""
    from floorguard._identify.mcp_config import home_of

    home = home_of(environ, here)
    folders = [("the working directory", here), ("HOME", home)]
    if launcher in ("npx", "npm exec") and npm is not None and npm.package is not None:
        folders.append(("npm's own package", npm.package))
        cache = _npm_setting("cache", npm, home)
        if cache is not None:
            folders.append(("npm's 'cache'", cache))
        prefix = _npm_global_prefix(npm, environ, here, home)
        if prefix is not None:
            folders.append(("npm's global 'prefix'", prefix))
    return folders


def _first(name: str, folders: Sequence[str]) -> str | None:
    import shutil

    return shutil.which(name, path=os.pathsep.join(folders)) if folders else None


def _local_bin_doubt(
    launch: Launch, owner: str | None, cwd: str, ran: list[Identification] | None = None
) -> str | None:
    """Why npm may run another file than the package ``launch`` names, or None (``ran``
    hears the local install it runs then, if it runs one). npm runs a
    package's bin by its name on a PATH that puts ``node_modules/.bin`` of the working
    directory and of every folder above it first, so the nearest such bin of that name is
    what runs, whatever the spec pinned. It passes only as the very package and version
    pinned (a tracked package's) or as no tracked adapter's code (an untracked spec)."""
    from floorguard._maps.catalog import executable_for

    names = {launch.package.split("/")[-1]}
    if owner is not None:
        with contextlib.suppress(ValueError, DetectionError):
            names.add(executable_for(owner))
    here = Path(os.path.abspath(cwd))
    for folder in (here, *here.parents):
        # npm takes a spec that names an existing path (./@scope/pkg@1.0.0, or a bin of
        # that name) for that file; and a project whose own package.json names the pinned
        # package for the package itself, running the bin its bin map names.
        spelt = [] if launch.spec in names else [folder / "node_modules" / ".bin" / launch.spec]
        if folder == here and "/" in launch.spec:
            spelt.append(folder / launch.spec)
        for candidate in spelt:
            if os.path.lexists(candidate):
                return f"{launch.launcher} {launch.spec}: {candidate} is a file of that name"
        manifest = folder / "package.json"
        if os.path.lexists(manifest):
            try:
                data = read_manifest(manifest)
            except ValueError as exc:
                return f"{launch.launcher} {launch.spec}: {exc}"
            if isinstance(data, dict) and data.get("name") == launch.package:
                return (
                    f"{launch.launcher} {launch.spec}: the project {manifest} is itself named "
                    f"{launch.package}, and npm runs its own bin"
                )
            own = _own_bin_doubt(manifest, data, launch.spec)
            if own is not None:
                return f"{launch.launcher} {launch.spec}: {own}"
    # A local install npm takes for the spec: the command it runs is the one its own
    # package.json's bin names, whatever that is, and with no .bin link to it npm's
    # ``sh -c`` finds that name further along PATH.
    local = _local_bin_names(launch.package, here)
    if isinstance(local, str):
        return f"{launch.launcher} {launch.spec}: {local}"
    names |= local
    for name in sorted(names):
        if name in local and not any(
            os.path.lexists(f / "node_modules" / ".bin" / name) for f in (here, *here.parents)
        ):
            return (
                f"{launch.launcher} {launch.spec} runs the local install's bin {name!r}, which "
                "no node_modules/.bin holds: its shell finds that name on PATH"
            )
        for folder in (here, *here.parents):
            candidate = folder / "node_modules" / ".bin" / name
            if not os.path.lexists(candidate):
                continue
            why = (
                f"{launch.launcher} {launch.spec} runs its bin {name!r} from the PATH npm gives "
                f"it, which holds {candidate} (first when npm runs a local install)"
            )
            try:
                hit, unlike = _read_bin(candidate, launch.launcher)
            except DetectionError as exc:
                return f"{why}: {exc}"
            if owner is None:
                if hit is not None:
                    return f"{why}, which is {hit.adapter}'s code"
            elif unlike is not None:
                return f"{why}, which {unlike}"
            elif hit is None or hit.adapter != owner or hit.version != launch.version:
                found = "no tracked package" if hit is None else f"{hit.adapter} {hit.version}"
                return f"{why}, which is {found}, not {launch.package}@{launch.version}"
            if ran is not None and hit is not None:
                ran.append(hit)
            break  # (the nearest of this name is the one that runs)
    # (after the bins: what runs by the names read is the more direct reason)
    elsewhere = _stated_in_the_local_trees(launch, here)
    if elsewhere is not None:
        return f"{launch.launcher} {launch.spec}: {elsewhere}"
    return None


def _read_bin(candidate: Path, launcher: str) -> tuple[Identification | None, str | None]:
    """The package the ``node_modules/.bin`` file ``candidate`` is, and why it is not judged
    by that package's metadata (None: it is). npm finds the file with ``stat`` alone, but
    runs it by name through ``sh -c``, whose PATH search passes over a file execve rejects
    (not executable, an interpreter missing) for the next of that name: such a file is not
    what runs. Raises DetectionError when it cannot be opened as an executable file."""
    from floorguard._identify.identify import npm_identification
    from floorguard._identify.kernel_exec import NotStarted, check_kernel_starts
    from floorguard._identify.node_resolution import not_text_on_the_way
    from floorguard._identify.target import open_target

    # (a node bin: node loads the file its own walk of this path reaches, names as UTF-8)
    elsewhere = not_text_on_the_way(os.path.abspath(candidate))
    if elsewhere is not None:
        raise DetectionError(f"node would read another file than the one judged: {elsewhere}")
    with open_target(str(candidate), path_env=None, executable=True) as opened:
        try:
            check_kernel_starts(opened)
        except NotStarted as exc:
            raise DetectionError(str(exc)) from None
        hit = npm_identification(opened.dir_fd, opened.path, launcher)
        return hit, _not_run_by_node(opened.read_head(512))


def global_bin_doubts(
    launch: Launch, environ: Mapping[str, str], cwd: str, npm: NpmRun | None
) -> list[str]:
    """What npm may run from its global prefix instead of what was judged (libnpmexec):
    with no local bin of the name typed, a file ``<prefix>/bin/<spec as typed>`` runs
    first; and when the global tree holds the version pinned, ``<prefix>/bin/<bin>`` runs,
    whatever file that is, with ``<prefix>/bin`` first on its PATH. Such a file must be
    the very package and version pinned (an untracked spec's: no tracked adapter's code)."""
    if launch.launcher not in ("npx", "npm exec"):
        return []
    from floorguard._identify.mcp_config import home_of

    here = os.path.abspath(cwd)
    prefix = _npm_global_prefix(npm, environ, here, home_of(environ, here))
    if prefix is None:
        return []  # (which npm runs cannot be told: a doubt of its own)
    global_bin = os.path.join(prefix, "bin")
    head = f"{launch.launcher} {launch.spec}"
    owner = current_packages().owner(launch.ecosystem, launch.package)
    typed = os.path.join(global_bin, launch.spec)
    local = any(os.path.isfile(os.path.join(f, "node_modules", ".bin", launch.spec))
                for f in _chain(here))  # fmt: skip
    if not local and os.path.isfile(typed):
        if launch.spec != launch.package or owner is not None:
            return [f"{head}: {typed} is a file of that name in npm's global bin, which npm runs"]
        why = _global_bin_doubt(typed, launch, None)
        return [] if why is None else [f"{head} runs {typed}, which {why}"]
    if launch.version is None:
        return []
    held = _global_tree_holds(os.path.join(prefix, "lib", "node_modules"), launch)
    if held is False:
        return []
    if isinstance(held, str):
        return [f"{head}: {held}"]
    names = {launch.package.split("/")[-1]}
    if owner is not None:
        from floorguard._maps.catalog import executable_for

        with contextlib.suppress(ValueError, DetectionError):
            names.add(executable_for(owner))
    doubts = []
    for name in sorted(names):
        candidate = os.path.join(global_bin, name)
        if os.path.isfile(candidate):
            why = _global_bin_doubt(candidate, launch, owner)
            if why is not None:
                doubts.append(f"{head} runs {candidate} from npm's global prefix, which {why}")
    child = [e for e in environ.get("PATH", "").split(os.pathsep) if os.path.isabs(e)]
    for name, expected in (("sh", _first("sh", ["/bin"])), ("node", _first("node", child))):
        # npm puts the global bin first on the bin's PATH: its sh and node come first.
        found = _first(name, [global_bin])
        if found is not None and (
            expected is None or os.path.realpath(found) != os.path.realpath(expected)
        ):
            doubts.append(f"{head} runs its bin with {global_bin} first on PATH, whose {name} "
                          f"is not {expected or 'one found here'}")  # fmt: skip
    return doubts


def _global_bin_doubt(candidate: str, launch: Launch, owner: str | None) -> str | None:
    """Why the global bin ``candidate`` is not the package ``launch`` pins (``owner``
    None: not any tracked adapter's code), or None."""
    try:
        hit, unlike = _read_bin(Path(candidate), launch.launcher)
    except DetectionError as exc:
        return f"cannot be judged: {exc}"
    if owner is None:
        return None if hit is None else f"is {hit.adapter}'s code"
    if unlike is not None:
        return unlike
    if hit is None or hit.adapter != owner or hit.version != launch.version:
        found = "no tracked package" if hit is None else f"{hit.adapter} {hit.version}"
        return f"is {found}, not {launch.package}@{launch.version}"
    return None


def _global_tree_holds(tree: str, launch: Launch) -> bool | str:
    """Whether a top-level package of npm's global ``tree`` states the name and version
    ``launch`` pins (npm's inventory goes by what package.json states, not the folder),
    or why that cannot be told."""
    try:
        entries = sorted(os.listdir(tree))
    except FileNotFoundError:
        return False
    except OSError as exc:
        return f"npm's global tree {tree} cannot be read: {exc.strerror}"
    for folder in _package_folders(Path(tree), entries):
        manifest = os.path.join(folder, "package.json")
        if not os.path.lexists(manifest):
            continue
        try:
            data = read_manifest(manifest)
        except ValueError as exc:
            return f"npm's global tree holds {manifest}, which cannot be read ({exc})"
        if (
            isinstance(data, dict)
            and data.get("name") == launch.package
            and data.get("version") == launch.version
        ):
            return True
    return False


def _bunx_folder_of_another(temporary: str, spec: str) -> str | None:
    """Why bun's install folder for ``spec`` in its temporary folder (``/tmp`` by default,
    which every local user writes) is not this user's own: made by another user, a link,
    or writable by others. bun reruns what it finds there; its own user's cache is the
    named window of every launcher's cache, another user's is that user's choice."""
    folder = temporary
    for part in f"bunx-{os.getuid()}-{spec}".split("/"):
        folder = os.path.join(folder, part)
        try:
            info = os.lstat(folder)
        except OSError:
            return None  # (not there: bun makes it, as this user)
        if (
            not stat.S_ISDIR(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return (
                f"bunx would run what {folder} holds, which is not this user's own folder "
                "(another user's, a link, or writable by others): in a temporary folder "
                "any user writes, someone else can fill it first"
            )
    return None


def launched_tree_doubts(
    launch: Launch, environ: Mapping[str, str], cwd: str, npm: NpmRun | None
) -> list[str]:
    """npx and npm exec run the package from one of three install trees, which one decided
    at run time: the nearest local install (a ``node_modules`` at or above the working
    directory holding it), npm's cache (``<cache>/_npx/<hash>/node_modules``) or its global
    tree (``<prefix>/lib/node_modules``). node's module walk from each goes on through the
    ``node_modules`` of every folder above it (``~/.npm/node_modules``, ``~/node_modules``):
    each one there is a doubt (node_resolution)."""
    from floorguard._identify.mcp_config import home_of
    from floorguard._identify.node_resolution import (
        node_modules_above,
        node_modules_above_the_install,
        present_above,
    )

    if launch.ecosystem != _packages.NPM:
        return []
    here = Path(os.path.abspath(cwd))
    home = home_of(environ, str(here))
    if launch.launcher == "bunx":
        # bun installs into <temp>/bunx-<uid>-<spec>/node_modules (a /tmp any user shares).
        temporary = os.path.join(here, bun_temporary_folder(environ))
        roots = [os.path.join(temporary, "bunx-<uid>-<spec>")]
        planted = _bunx_folder_of_another(temporary, launch.spec)
        if planted is not None:
            return [planted]
    elif launch.launcher == "pnpm dlx":
        # pnpm into <cache>/pnpm/dlx/<hash>/node_modules, the cache XDG's (~/.cache).
        cache = os.path.join(here, environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"))
        roots = [os.path.join(cache, "pnpm", "dlx", "<hash>")]
    elif launch.launcher not in ("npx", "npm exec"):
        return []  # (yarn dlx: named, not modelled)
    else:
        roots = [
            str(folder)
            for folder in (here, *here.parents)
            if os.path.lexists(folder / "node_modules" / launch.package)
        ][:1]
    if launch.launcher in ("npx", "npm exec") and npm is not None and npm.package is not None:
        cache = _npm_setting("cache", npm, home) or os.path.join(home, ".npm")
        roots.append(os.path.join(cache, "_npx", "<hash>"))
        prefix = _npm_global_prefix(npm, environ, str(here), home)
        if prefix is not None:
            roots.append(os.path.join(prefix, "lib"))
    doubts: list[str] = []
    for root in roots:
        # node walks up from the real folders (the hash folder is not there yet).
        real = os.path.join(os.path.realpath(os.path.dirname(root)), os.path.basename(root))
        tree = os.path.join(root, "node_modules")
        above = node_modules_above(real)
        # A cache's tree is one of its hash folders, which one decided at run time: each
        # that holds the package may be the one.
        trees = _cache_trees(root) if os.path.basename(root) == "<hash>" else [tree]
        for installed in (os.path.join(t, launch.package) for t in trees):
            if os.path.lexists(installed):
                # A tree that is a link (a shared store, a volume) or holds one: node walks
                # up from the package's real folder, wherever the links' names lie.
                real_package = os.path.realpath(installed)
                above += node_modules_above_the_install(
                    os.path.join(real_package, "package.json"), real_package
                )
        found = present_above(list(dict.fromkeys(above)), tree)
        doubts += [d for d in found if d not in doubts]
    return doubts


_MAX_CACHE_TREES = 4096


def _cache_trees(root: str) -> list[str]:
    """The ``node_modules`` of each folder beside ``root`` (``<cache>/_npx/<hash>``): the
    trees a launcher's cache holds, at most _MAX_CACHE_TREES of them (none when it is not
    there)."""
    folder = os.path.dirname(root)
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for _, entry in zip(range(_MAX_CACHE_TREES), entries, strict=False)]
    except OSError:
        return []
    return [os.path.join(folder, name, "node_modules") for name in sorted(names)]


def _npm_global_prefix(
    npm: NpmRun | None, environ: Mapping[str, str], here: str, home: str
) -> str | None:
    """npm's global prefix, as @npmcli/config settles it: the user's npmrc ``prefix`` over
    the global npmrc's over the builtin's over the default (two folders above node's real
    file). None when which npm runs is not seen. (PREFIX and npm_config_prefix refuse.)"""
    if npm is None or npm.package is None or not npm.node:
        return None
    default = os.path.dirname(os.path.dirname(os.path.realpath(npm.node)))
    return _npm_setting("prefix", npm, home) or default


def _npm_setting(key: str, npm: NpmRun, home: str) -> str | None:
    """The file setting ``key`` (``prefix``, ``cache``) of npm's own files as
    @npmcli/config settles it: the user's npmrc over the global npmrc's over the builtin's;
    None when none sets it (npm's default then)."""
    if npm.package is None:
        return None
    allowed = _npmrc_allowed(True, system=True)
    builtin = _npmrc_settings(os.path.join(npm.package, "npmrc"), allowed=allowed, home=home)[0]
    userconfig = builtin.get("userconfig", os.path.join(home, ".npmrc"))
    users = _npmrc_settings(userconfig, allowed=allowed, home=home)[0]
    default = os.path.dirname(os.path.dirname(os.path.realpath(npm.node))) if npm.node else None
    globalconfig = builtin.get("globalconfig") or os.path.join(
        users.get("prefix") or builtin.get("prefix") or default or "/nonexistent", "etc", "npmrc"
    )
    globals_ = _npmrc_settings(globalconfig, allowed=allowed, home=home)[0]
    return users.get(key) or globals_.get(key) or builtin.get(key)


def npm_bin_name(key: str) -> str | None:
    """The name npm gives a package's ``bin`` key (npm-normalize-package-bin): ``\\`` and
    ``:`` taken for ``/``, the last part (as node's basename finds it), or None when that
    leaves no name (``..``, ``.``). The file it runs is ``node_modules/.bin/<name>``."""
    import posixpath

    last = posixpath.basename(key.replace("\\", "/").replace(":", "/").rstrip("/"))
    name = posixpath.normpath("/" + last)[1:]
    return name or None


def _local_bin_names(package: str, here: Path) -> set[str] | str:
    """The bin names of the nearest ``node_modules/PACKAGE`` in ``here`` or above (none:
    no local install), as its package.json states them; the reason when it cannot be read
    so."""
    for folder in (here, *here.parents):
        installed = folder / "node_modules" / package
        if not os.path.lexists(installed):
            continue
        manifest = installed / "package.json"
        try:
            data = read_manifest(manifest)
        except ValueError as exc:
            return f"the local install {installed} has no readable package.json ({exc})"
        names = _bin_names(package, data.get("bin") if isinstance(data, dict) else None)
        if names is None:
            return f"the local install {installed} states no bin npm could run by name"
        hidden = _hidden_lockfile_bin_names(folder / "node_modules", package)
        return hidden if isinstance(hidden, str) else names | hidden
    return set()


# How many package folders of the local trees are read for npm's inventory, at most.
_MAX_LOCAL_PACKAGES: Final = 20_000
_local_trees_cache: Final = new_cache()


def _stated_in_the_local_trees(launch: Launch, here: Path) -> str | None:
    """Why npm may take another package of its local tree for the pinned ``launch``, or
    None. npm's inventory of the local tree goes by the name and version a package's
    metadata states, at any depth (nested under another package, a linked workspace's,
    or as the hidden lockfile records it), and npm runs the bin that package's manifest
    names: any package stating the pinned name and version but the nearest local install
    (``node_modules/PKG``, judged by its bin) is refused. Every ``node_modules`` from the
    working directory up is read (npm's local prefix is one of those folders). The answer
    is reused while every folder and file read is unchanged (one stat each, where a read
    parses every package.json)."""
    if launch.version is None:
        return None
    key = (launch.package, launch.version, str(here), _MAX_LOCAL_PACKAGES)
    return _checked_memo(_local_trees_cache, key, lambda: _read_local_trees(launch, here))


def _read_local_trees(launch: Launch, here: Path) -> str | None:
    """:func:`_stated_in_the_local_trees`, read afresh, noting every folder and file it
    looked at: a ``node_modules`` and a scope folder change when an entry is added,
    removed or relinked in them, a package.json when it is rewritten."""
    import json

    for folder in (here, *here.parents):
        _identity(str(folder / "node_modules"))

    nearest = next(
        (f / "node_modules" / launch.package for f in (here, *here.parents)
         if os.path.lexists(f / "node_modules" / launch.package)),
        None,
    )  # fmt: skip
    pending = [f / "node_modules" for f in (here, *here.parents) if (f / "node_modules").is_dir()]
    seen: set[str] = set()
    read = 0
    while pending:
        node_modules = pending.pop()
        real = os.path.realpath(node_modules)
        if real in seen:
            continue
        seen.add(real)
        _identity(str(node_modules / ".package-lock.json"))
        stated = _hidden_lockfile_states(node_modules, launch)
        if stated is not None:
            return stated
        try:
            entries = sorted(os.listdir(node_modules))
        except OSError:
            entries = []
        for entry in entries:
            if entry.startswith("@"):
                _identity(str(node_modules / entry))
        for folder in _package_folders(node_modules, entries):
            _identity(str(folder / "package.json"))
            _identity(str(folder / "node_modules"))
            read += 1
            if read > _MAX_LOCAL_PACKAGES:
                return (
                    f"npm's local trees hold more than {_MAX_LOCAL_PACKAGES} packages: which "
                    f"of them npm takes for {launch.package}@{launch.version} is not read"
                )
            manifest = folder / "package.json"
            if folder != nearest and os.path.lexists(manifest):
                try:
                    data = read_manifest(manifest)
                except json.JSONDecodeError:
                    data = None  # (npm skips a package.json that is no JSON)
                except ValueError as exc:
                    # (too large to read here, not a file, not UTF-8: npm may read it)
                    return (
                        f"npm's local tree holds {manifest}, which cannot be read here ({exc}): "
                        f"whether npm takes it for {launch.package}@{launch.version} is not known"
                    )
                if (
                    isinstance(data, dict)
                    and data.get("name") == launch.package
                    and _npm_clean(data.get("version")) == launch.version
                ):
                    return (
                        f"npm's local tree holds {folder}, whose package.json states "
                        f"{launch.package} {launch.version}: npm takes it for the spec and "
                        "runs the bin its manifest names, which is not judged"
                    )
            if (folder / "node_modules").is_dir():
                pending.append(folder / "node_modules")
    return None


def _npm_clean(version: object) -> object:
    """A stated version as npm reads a package's metadata (semver's clean: white space and
    a leading ``=`` or ``v`` dropped, and the build metadata): ``v0.1.16``, `` 0.1.16`` and
    ``0.1.16+x`` are 0.1.16 to npm's inventory. Anything else as it is."""
    if not isinstance(version, str):
        return version
    cleaned = version.strip().lstrip("=v").strip().partition("+")[0]
    return cleaned if cleaned else version


def _package_folders(node_modules: Path, entries: list[str] | None = None) -> list[Path]:
    """The package folders directly in ``node_modules`` (a scope's too), from ``entries``
    when it was listed already."""
    if entries is None:
        try:
            entries = sorted(os.listdir(node_modules))
        except OSError:
            return []
    folders = []
    for entry in entries:
        if entry.startswith("."):
            continue
        if entry.startswith("@"):
            with contextlib.suppress(OSError):
                folders += [
                    node_modules / entry / e for e in sorted(os.listdir(node_modules / entry))
                ]
        else:
            folders.append(node_modules / entry)
    return folders


def _hidden_lockfile(node_modules: Path) -> tuple[Path, dict[str, object] | str]:
    """npm's hidden lockfile in ``node_modules`` and its ``packages`` records (empty when
    there is no such file or it holds none), or the reason it cannot be read."""
    hidden = node_modules / ".package-lock.json"
    if not os.path.lexists(hidden):
        return hidden, {}
    import json

    from floorguard._base.files import MAX_MAP_BYTES, read_regular
    from floorguard.errors import UnreadableFileError

    try:
        document = json.loads(read_regular(hidden, max_bytes=MAX_MAP_BYTES, what="lockfile"))
    except (UnreadableFileError, ValueError, RecursionError) as exc:
        return hidden, f"npm's hidden lockfile {hidden} cannot be read ({exc})"
    packages = document.get("packages") if isinstance(document, dict) else None
    return hidden, packages if isinstance(packages, dict) else {}


def _hidden_lockfile_states(node_modules: Path, launch: Launch) -> str | None:
    """Why npm's hidden lockfile in ``node_modules`` (whose records npm takes over the
    packages' own files when it is newer) names another package than
    ``node_modules/PKG`` as the pinned name and version, or None."""
    hidden, packages = _hidden_lockfile(node_modules)
    if isinstance(packages, str):
        return packages
    for key, entry in packages.items():
        if not isinstance(entry, dict) or key == f"node_modules/{launch.package}":
            continue
        name = entry.get("name") or key.rpartition("node_modules/")[2]
        if name == launch.package and _npm_clean(entry.get("version")) == launch.version:
            return (
                f"npm's hidden lockfile {hidden} records {key!r} as {launch.package} "
                f"{launch.version}: npm takes it for the spec and runs the bin it names, "
                "which is not judged"
            )
    return None


def _bin_names(package: str, bins: object) -> set[str] | None:
    """The names npm gives a package's ``bin`` (a file: the package's own name); None
    when it states none npm could run by name."""
    if isinstance(bins, str):
        return {package.rsplit("/", maxsplit=1)[-1]}
    if isinstance(bins, dict) and all(isinstance(k, str) for k in bins):
        return {name for key in bins if (name := npm_bin_name(key)) is not None}
    return None


def _hidden_lockfile_bin_names(node_modules: Path, package: str) -> set[str] | str:
    """The bin names npm's hidden lockfile (``node_modules/.package-lock.json``) gives
    ``package``: npm takes a tree's metadata from it, not from the packages' own files,
    when it is newer than they are, so its names run as much as package.json's do. The
    reason when it cannot be read so; none when there is no such file or entry."""
    hidden, packages = _hidden_lockfile(node_modules)
    if isinstance(packages, str):
        return packages
    entry = packages.get(f"node_modules/{package}")
    if entry is None:
        return set()
    bins = entry.get("bin") if isinstance(entry, dict) else None
    names = set() if bins is None else _bin_names(package, bins)
    if names is None:
        return f"npm's hidden lockfile {hidden} gives {package} a bin that is no map of names"
    return names


def _not_run_by_node(head: bytes) -> str | None:
    """Why a bin file starting with ``head`` is not judged by its package's metadata (None:
    a native program, or a script node runs with no options). A ``#!`` line naming anything
    else is a launcher whose target is not seen; a file with neither is run by the shell."""
    from floorguard._identify.examine import _is_node, _parse_shebang

    if head.startswith(b"\x7fELF"):
        return None
    if not head.startswith(b"#!"):
        return "is neither a native program nor a #! script (a shell would run it)"
    shebang = _parse_shebang(head)
    if shebang.doubts:
        return shebang.doubts[0]
    if not _is_node(shebang.interpreter):
        return f"is a script run by {shebang.interpreter or 'nothing named'}, not by node"
    if shebang.arguments:
        return f"passes node the options {' '.join(shebang.arguments)!r}, which are not examined"
    return None


def _workspace_root_above(folder: Path, *, itself: bool = False) -> Path | None:
    """The ``package.json`` of a folder above ``folder`` (``itself``: or of ``folder``) that
    declares ``workspaces`` (or cannot be read): npm takes such a root as its local prefix
    for a spawn in one of its packages, and looks for a bin from there. None when there is
    none."""
    for above in (folder, *folder.parents) if itself else folder.parents:
        manifest = above / "package.json"
        if _declares_workspaces(manifest):
            return manifest
    return None


def _declares_workspaces(manifest: Path) -> bool:
    """Whether the package.json ``manifest`` exists and declares ``workspaces`` (or
    cannot be read)."""
    if not os.path.lexists(manifest):
        return False
    try:
        data = read_manifest(manifest)
    except ValueError:
        return True
    return not isinstance(data, dict) or "workspaces" in data


def _own_bin_doubt(manifest: Path, data: object, command: str) -> str | None:
    """Why the project ``manifest`` (its JSON value ``data``) may provide a bin named
    ``command``, or None. libnpmexec looks for the spec as typed among the bins of the
    project (and of its local prefix) first, reading the manifest as pacote normalises it:
    a ``bin`` map's keys by their base names (``\\`` and ``:`` taken for ``/``), a string
    ``bin`` by the package's name, and every file of a ``directories.bin`` folder (not
    read here: refused) by its own name."""
    if not isinstance(data, dict):
        return f"the project's {manifest} is not a JSON object (its bins cannot be told)"
    directories = data.get("directories")
    if isinstance(directories, dict) and "bin" in directories:
        return (
            f"the project's {manifest} declares directories.bin, whose files npm takes as the "
            "project's own bins and runs first (not read here)"
        )
    bins, name = data.get("bin"), data.get("name")
    if bins is None:
        return None
    if isinstance(bins, str):
        names = {name.split("/")[-1]} if isinstance(name, str) else set()
    elif isinstance(bins, dict):
        names = {name for key in bins if isinstance(key, str) and (name := npm_bin_name(key))}
    else:
        return f"the project's {manifest} has a bin field npm may read otherwise"
    if command in names:
        return f"the project's {manifest} has a bin named {command!r}, which npm runs first"
    return None


def _project_bin(here: Path, command: str) -> Path | None:
    """The ``package.json`` of npm's local project (the nearest folder at or above ``here``
    holding one or a ``node_modules``) when its ``bin`` names ``command``: npx runs the
    project's own bin first. A manifest that cannot be read counts as naming it."""
    for folder in (here, *here.parents):
        manifest = folder / "package.json"
        if manifest.exists():
            try:
                data = read_manifest(manifest)
            except ValueError:
                return manifest
            if not isinstance(data, dict):
                return manifest
            bins = data.get("bin")
            name = data.get("name")
            if isinstance(bins, str):
                return (
                    manifest if isinstance(name, str) and name.split("/")[-1] == command else None
                )
            return (
                manifest
                if isinstance(bins, dict)
                and any(isinstance(key, str) and npm_bin_name(key) == command for key in bins)
                else None
            )
        if (folder / "node_modules").is_dir():
            return None
    return None
