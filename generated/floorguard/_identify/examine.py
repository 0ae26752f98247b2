"""What a child will run, examined as a closed world.

The floor applies to the code the child actually loads, and that is decided by more than
the program file: by the interpreter that runs a ``#!`` script and its options, by the
interpreter's command line (``python -m``, ``node --import``), by the environment
(PYTHONPATH, NODE_OPTIONS, LD_PRELOAD), by the files an interpreter runs at start-up
(``.pth`` files, ``sitecustomize``) and by the working directory. :func:`examine` looks at
all of them and returns what it recognised (the catalogued adapter, if any) together with
every input it did not fully understand, each named ("doubts"). The gate refuses a tracked
spawn, and any spawn under deny-by-default, that has a doubt: what is not understood is
never skipped.

What runs is classified first, from the opened file's first bytes:

- ``native``: an ELF program. Named ``python*`` or ``node``, or one of them by its dynamic
  symbols whatever its name (``native_interpreter``: a copy or hard link), it is an
  interpreter and is judged by what its arguments ask it to run; otherwise it is judged as
  itself (package metadata around it, else its ``--version`` answer);
- ``python`` / ``node``: a ``#!`` script whose interpreter is a native Python or node,
  judged as that interpreter running the script with the ``#!`` line's options;
- ``launcher``: a ``#!`` script run by anything else (a shell, a version manager's shim):
  what it starts cannot be seen, and its ``--version`` answer is never taken for it;
- ``unknown``: neither (the kernel might still run it through binfmt_misc).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from floorguard._identify import child_inputs, identify
from floorguard._identify.identification import packages_in_force
from floorguard._identify.identify import Identification, as_interpreted
from floorguard._identify.python_self_search import self_search_doubt
from floorguard._identify.target import Target, open_target
from floorguard.errors import BinaryNotFoundError, DetectionError

if TYPE_CHECKING:
    from floorguard._identify.node_command import NodeCommand
    from floorguard._identify.python_source import PythonSource
    from floorguard._maps.packages import PackageIndex

_PYTHON_NAME: Final = re.compile(r"python(?:\d+(?:\.\d+)?)?\Z")
_NODE_NAME: Final = re.compile(r"node(?:js)?\Z")
_ELF_MAGIC: Final = b"\x7fELF"
_HEAD_BYTES: Final = 512
# Linux reads a #! line from the first 256 bytes of the file (BINPRM_BUF_SIZE).
_SHEBANG_LIMIT: Final = 256
# What ``runs`` says of a package launcher (npx, uvx, ...): it runs the package it names.
LAUNCHER: Final = "package-launcher"


@dataclass(frozen=True)
class Examination:
    """What examining a spawn found. ``identified``: the catalogued adapter recognised in
    what runs (None: none); ``runs``: ``native``, ``python``, ``node``, ``launcher``,
    ``unknown`` or ``package-launcher`` (npx, uvx: ``identified`` is the package it runs);
    ``what``: that, in words, for messages; ``doubts``: each input that decides what the
    child loads and was not understood, named; ``interpreter``: the node or Python program
    that runs it, when one does (a package launcher's configuration depends on it)."""

    identified: Identification | None
    runs: str
    what: str
    doubts: tuple[str, ...] = ()
    interpreter: str | None = None
    # Why an identification was set aside (metadata that vouches for nothing there), for
    # the reason: the gate's words, None when none was.
    set_aside: str | None = None


@dataclass(frozen=True)
class _Shebang:
    """A ``#!`` line as the kernel (and ``env``) will act on it."""

    interpreter: str  # a path, or (``through_env``) a name ``env`` looks up on PATH
    arguments: tuple[str, ...]
    doubts: tuple[str, ...] = ()
    through_env: bool = False


def examine(
    opened: Target,
    argv: Sequence[str] | None,
    *,
    environ: Mapping[str, str],
    cwd: str | None = None,
    packages: PackageIndex | None = None,
) -> Examination:
    """Examine running ``opened`` with ``argv`` in ``environ`` and ``cwd``.

    ``argv`` None judges the file alone (a preflight without a command line): only what the
    file is counts, and no input of a command line or environment is examined. ``packages``
    is the index of the packages to recognise (the map in force's; None: the catalogue's).
    Raises DetectionError when the answer itself is in doubt (code of two adapters, a
    program that cannot be read).
    """
    with packages_in_force(packages), identify.one_judgement():
        found = _examine(opened, argv, environ=environ, cwd=cwd)
        if argv is None:
            return found
        if found.runs in ("native", "python", "node"):
            # What the child's commands start: a Python's or node's variables that the
            # child, another program, is not judged with.
            judged = None if found.runs == "native" else found.runs
            more = child_inputs.interpreter_start_up(environ, judged)
            found = dataclasses.replace(found, doubts=(*found.doubts, *more)) if more else found
        return _launched(found, opened, argv, environ=environ, here=cwd or os.getcwd())


def _launched(
    found: Examination,
    opened: Target,
    argv: Sequence[str],
    *,
    environ: Mapping[str, str],
    here: str,
) -> Examination:
    """A package launcher (``npx``, ``uvx``, ...) runs the package it names, not itself:
    judged as that package, with the launcher's own inputs (its interpreter's, its
    options, its configuration variables) part of the closed world."""
    from floorguard._identify import launchers

    names: tuple[str, ...] = (opened.requested, opened.located, str(opened.path))
    interpreted = None
    if found.what in ("node", "the Python interpreter"):
        # The interpreter itself, running a launcher's own script or module (``node
        # .../npx-cli.js``, ``python -m pipx run``): that launcher, with its arguments.
        interpreted = _interpreted_launcher(found.what, argv, here)
        names, argv = interpreted or (names, argv)
    try:
        which = launchers.launcher_of(names, argv)
        if which is None:
            _refuse_corepack(names, found, here)
            return found
        launcher, skip = which
        if found.identified is not None:
            # A "launcher" that runs an adapter's code itself would run that, whatever the
            # package its arguments name.
            raise launchers.LaunchRefused(
                f"{opened.path} runs {found.identified.adapter}'s code itself: it is no {launcher}"
            )
        # The real file of the program node runs (yarn.js, npx-cli.js): its own package's,
        # whether node is run by it or given it.
        script = os.path.realpath(os.path.join(here, names[2])) if len(names) > 2 else ""
        if interpreted is None or found.runs == "node":
            # (Python's -m pipx and -m uv: the module's code is judged as a program's.)
            _check_launcher_is_what_it_is_named(
                launcher, found, opened, script=script, environ=environ, here=here
            )
        if launcher == "pipx run":
            found = _as_pipx(found, here)
        npm = None
        if found.runs == "node" and found.interpreter:
            npm = launchers.NpmRun(launchers.npm_package_of(script), found.interpreter)
        doubts = [
            *found.doubts,
            *launchers.environment_doubts(launcher, environ),
            *launchers.network_doubts(launcher, environ, os.environ),
            *launchers.chosen_folder_doubts(launcher, environ),
            *launchers.configuration_doubts(launcher, environ, here, npm),
            *launchers.npm_path_doubts(launcher, environ, here, npm),
        ]
        launch = launchers.parse_launch(launcher, argv[skip:], cwd=here)
        judged = launchers.judge_launch(launch, cwd=here)
        doubts += launchers.global_bin_doubts(launch, environ, here, npm)
        if judged.identified is not None:
            # (An untracked package's own code is not judged: what it requires does not matter.)
            doubts += launchers.launched_tree_doubts(launch, environ, here, npm)
    except launchers.LaunchRefused as refused:
        return Examination(None, LAUNCHER, "a package launcher", (*found.doubts, str(refused)))
    if judged.identified is None and not judged.doubts:
        # An untracked package: what version runs does not matter, its inputs still do.
        return Examination(None, LAUNCHER, judged.what, tuple(doubts))
    return Examination(judged.identified, LAUNCHER, judged.what, (*doubts, *judged.doubts))


def _refuse_corepack(names: Sequence[str], found: Examination, here: str) -> None:
    """corepack (node's own, ``corepack npm@11 exec -- claude``) downloads the package
    manager and version its arguments or a project's ``packageManager`` name, or takes one
    from its cache, and runs it as a launcher: none of that is judged. Raises
    LaunchRefused for its script, by its name or its npm package."""
    from floorguard._identify import launchers

    named = os.path.basename(names[0]) == "corepack"
    if found.runs != "node" and not named:
        return
    script = os.path.realpath(os.path.join(here, names[2])) if len(names) > 2 else ""
    package = launchers.package_of(script) if script else None
    if named or (package is not None and package[1] == "corepack"):
        raise launchers.LaunchRefused(
            f"{names[0]} is corepack, which runs the package manager and version its "
            "arguments or a project's packageManager name, fetched or cached, not judged: "
            "run the package manager itself"
        )


def _as_pipx(found: Examination, here: str) -> Examination:
    """A Python program run as pipx, its import of the ``pipx`` package taken for the
    launcher itself where a pipx distribution installed that package (its RECORD lists
    ``pipx/__init__.py``) in a folder outside the working directory: pip's console script
    of pipx is nothing but that import. Any other import stays a doubt, and so does a
    ``pipx`` no pipx distribution installed, or the workspace's."""
    from floorguard._identify import launchers
    from floorguard._identify.pip_metadata import distribution_installed

    def own(doubt: str) -> bool:
        matched = _PIPX_OWN_IMPORT.match(doubt)
        if matched is None:
            return False
        where = matched["where"]
        return not launchers.in_the_workspace(where, here) and distribution_installed(
            where, "pipx", os.path.join("pipx", "__init__.py")
        )

    kept = tuple(doubt for doubt in found.doubts if not own(doubt))
    return found if kept == found.doubts else dataclasses.replace(found, doubts=kept)


# What each launcher's own program answers to --version when it is native.
_NATIVE_VERSION: Final = {
    "uvx": re.compile(r"uvx? \d+\.\d+\.\d+(?:[ \n]|\Z)"),  # uv 0.9.4, uvx 0.9.4 (...)
    "bunx": re.compile(r"\d+\.\d+\.\d+\n?\Z"),  # bun: 1.1.38
    "pnpm dlx": re.compile(r"\d+\.\d+\.\d+\n?\Z"),  # pnpm's standalone build: 9.12.0
}
# The npm package whose script a node-run launcher must be (corepack's shims are not).
_NODE_PACKAGE: Final = {"pnpm dlx": "pnpm", "yarn dlx": "yarn"}


def _check_launcher_is_what_it_is_named(
    launcher: str,
    found: Examination,
    opened: Target,
    *,
    script: str,
    environ: Mapping[str, str],
    here: str,
) -> None:
    """A launcher recognised by its name must be that launcher: a native one answers
    ``--version`` as it does (``uv 0.9.4``, bun's and pnpm's bare version), a node-run one
    is the script of its own npm package (``pnpm``, ``yarn``: not corepack's shim, which
    fetches whatever version a project names), pipx a Python program (its code judged as
    any other). A shell script, or another program, under such a name could run anything
    at all. ``script``: the real file node runs, for a node-run one. npx and npm are told
    apart by their npm package (``configuration_doubts``). Raises LaunchRefused."""
    from floorguard._identify import detect, launchers

    if launcher == "pipx run":
        if found.runs != "python":
            raise launchers.LaunchRefused(f"{opened.path} is named as pipx but is {found.what}")
        return
    if launcher in ("npx", "npm exec"):
        return
    if found.runs == "node" and launcher in _NODE_PACKAGE:
        package = launchers.package_of(script)
        owner = None if package is None else package[1]
        if package is None or owner != _NODE_PACKAGE[launcher]:
            raise launchers.LaunchRefused(
                f"{script} is named as {launcher}'s but is a script of "
                f"{owner or 'no npm package'}, not of {_NODE_PACKAGE[launcher]}"
            )
        if launchers.in_the_project(package[0], here):
            raise launchers.LaunchRefused(
                f"{script} is the project's own {owner} ({package[0]}), code the workspace "
                "can write"
            )
        return
    expected = _NATIVE_VERSION.get(launcher)
    if found.runs != "native" or expected is None:
        raise launchers.LaunchRefused(f"{opened.path} is named as {launcher}'s but is {found.what}")
    try:
        answer = detect.run_probe(
            opened, ("--version",), detect.ProbeSettings.from_environ(environ),
            detect.probe_environment(environ.get("PATH"), environ),
        )  # fmt: skip
    except DetectionError as exc:
        raise launchers.LaunchRefused(f"{opened.path} is named as {launcher}'s: {exc}") from None
    if expected.match(answer) is None:
        raise launchers.LaunchRefused(
            f"{opened.path} is named as {launcher}'s, but its --version does not say it is"
        )


def _interpreted_launcher(
    what: str, argv: Sequence[str], here: str
) -> tuple[tuple[str, ...], Sequence[str]] | None:
    """The names and arguments of the program an interpreter runs, to be told as a launcher
    by them: node's main script (as given, against the working directory, and its real
    file) or Python's ``-m`` module; None when it runs neither."""
    if what == "node":
        from floorguard._identify.node_command import parse_node_argv

        node = parse_node_argv(list(argv))
        if node.runs != "script" or not node.script:
            return None
        script = os.path.join(here, node.script)
        # The file node loads, as its loader resolves the name (``.../npx-cli`` is
        # npx-cli.js, a folder its main): that file's name says which launcher it is.
        with contextlib.suppress(DetectionError):
            script = str(node_main_path(node.script, here) or script)
        real = os.path.realpath(script)
        names: tuple[str, ...] = (node.script, script, real)
        if _npm_own_file(real):
            # Any other file of npm's own package run by node (its main index.js, say) is
            # npm's command line, as npm-cli.js is.
            names = (*names, "npm-cli.js")
        return names, node.script_args
    from floorguard._identify.python_command import parse_python_argv

    python = parse_python_argv(list(argv))
    if python.runs != "module" or python.value not in ("pipx", "uv"):
        return None
    return (python.value,), python.args


def _npm_own_file(path: str) -> bool:
    """Whether ``path`` lies in npm's own package (the nearest package.json above it names
    ``npm``) and is not npx's entry (npx-cli.js, told by its name)."""
    from floorguard._identify.launchers import npm_package_of

    return os.path.basename(path) != "npx-cli.js" and npm_package_of(path) is not None


def _examine(
    opened: Target,
    argv: Sequence[str] | None,
    *,
    environ: Mapping[str, str],
    cwd: str | None = None,
) -> Examination:
    here = cwd or os.getcwd()
    doubts = list(child_inputs.loader_doubts(environ)) if argv is not None else []
    installed = identify.identify_file(opened, environ)
    head = opened.read_head(_HEAD_BYTES)
    if head.startswith(b"#!"):
        return _script(
            opened, head, argv=argv, environ=environ, here=here, installed=installed,
            doubts=doubts,
        )  # fmt: skip
    if not head.startswith(_ELF_MAGIC):
        doubts.append(f"{opened.path} is neither a native program nor a #! script")
        return Examination(installed, "unknown", "a file of unknown format", tuple(doubts))
    names = (opened.requested, opened.located, str(opened.path))
    said = "python" if any(map(_is_python, names)) else "node" if any(map(_is_node, names)) else ""
    # A program carrying an interpreter's entry point under another name (a copy or hard
    # link of node or CPython, a copy with a single-executable app injected, a program of
    # anyone's that exports the symbol) is told by what it is, not its name, and is never
    # judged by its arguments or its --version answer: what it runs need not be either.
    told = "" if said or installed is not None else _interpreter_kind(opened, doubts)
    if told:
        doubts.append(
            f"{opened.path} is {_INTERPRETER_NAMES[told]} under another name (its dynamic "
            f"symbols name {_INTERPRETER_NAMES[told]}'s entry point, or what an embedding "
            f"of {_INTERPRETER_NAMES[told]} calls): such a program may run code of its "
            f"own ({_OWN_CODE[told]}) rather than what its arguments name, so it is not "
            "judged by them"
        )
        # (refused as a launcher whose package cannot be named is, whatever the untracked
        # policy: it may run a tracked adapter)
        what = f"{_INTERPRETER_NAMES[told]} under another name"
        return Examination(None, LAUNCHER, what, tuple(doubts))
    if installed is None and argv is not None and said == "python":
        found, more = _python_run(opened.located, list(argv), environ, here)
        if os.sep not in opened.requested and "PATH" not in environ:
            # CPython finds its installation (a virtual environment's pyvenv.cfg) from
            # argv[0], searching the child's PATH for a bare name: with none, it starts as
            # another installation than the one judged here (found on this process's PATH).
            more.append(
                f"the child's environment has no PATH: the interpreter cannot find itself by "
                f"the name {opened.requested!r}, so it would not start as {opened.located}"
            )
        elif os.sep not in opened.requested:
            # Started by name (an MCP server): CPython searches PATH for itself again.
            found_itself = self_search_doubt(opened.requested, environ["PATH"], opened.located)
            more.extend(() if found_itself is None else (found_itself,))
        return Examination(found, "python", "the Python interpreter", (*doubts, *more))
    if installed is None and argv is not None and said == "node":
        found, more = _node_run(list(argv), environ, here, node=str(opened.path))
        return Examination(found, "node", "node", (*doubts, *more), str(opened.path))
    if installed is not None and installed.version_known:
        # A native build a package carries is asked its version (its package may state a
        # platform build's, codex's "0.171.0-linux-x64"); the gate holds the answer to the
        # package's version.
        installed = dataclasses.replace(installed, version_known=False)
    return Examination(installed, "native", "a native program", tuple(doubts))


def _execvp_stop(name: str, path_env: str) -> str | None:
    """Where and why env's execvp, looking for ``name`` on ``path_env``, would give up and
    start nothing, or None."""
    from floorguard._identify.target import execvp_gives_up_at

    for directory in path_env.split(os.pathsep):
        candidate = os.path.join(directory, name)
        if directory and os.path.isabs(directory):
            why = execvp_gives_up_at(candidate)
            if why is not None:
                return f"gives up at {candidate} ({why}) and starts nothing"
    return None


def _script(
    opened: Target,
    head: bytes,
    *,
    argv: Sequence[str] | None,
    environ: Mapping[str, str],
    here: str,
    installed: Identification | None,
    doubts: list[str],
) -> Examination:
    """A ``#!`` script: judged as its interpreter running it, when that is Python or node."""
    shebang = _parse_shebang(head)
    own = len(doubts)  # (the line's own doubts follow the file's)
    doubts += shebang.doubts
    interpreter = shebang.interpreter
    if interpreter and shebang.through_env:
        # ``#!/usr/bin/env node``: whichever env's execvp finds on the child's PATH; with
        # no PATH, or a relative entry, that search is not followed here (refused).
        from floorguard._identify import env_command

        try:
            name, path_env = env_command.command_path(interpreter, environ, here)
        except env_command.EnvRefused as exc:
            raise DetectionError(f"{opened.path}: the env of its #! line: {exc}") from None
        if path_env is None and os.path.isabs(interpreter):  # (env runs a path as given)
            interpreter = name
        elif path_env is None:  # (a relative name with a slash: from the working directory)
            doubts.append(f"{opened.path}: its #! line names a relative interpreter {name}")
            interpreter = name
        else:
            interpreter = identify.locate_noted(name, path_env) or ""
            stop = None if interpreter else _execvp_stop(name, path_env)
            if stop is not None:
                doubts.append(f"{opened.path}: the env of its #! line {stop}")
            if interpreter and _is_python(interpreter):
                # env passes a bare argv[0]: CPython searches PATH for itself again.
                found_itself = self_search_doubt(name, path_env, interpreter)
                doubts.extend(() if found_itself is None else (f"{opened.path}: {found_itself}",))
    elif interpreter and not os.path.isabs(interpreter):
        # The kernel looks a relative interpreter up from the child's working directory.
        doubts.append(f"{opened.path}: its #! line names a relative interpreter {interpreter}")
        interpreter = os.path.join(here, interpreter)
    if not interpreter:
        # A line not read (env told to set variables or options, a line the kernel cuts)
        # still runs an interpreter, maybe on an agent's code; one whose interpreter is not
        # found starts nothing. Neither is an untracked program, under either policy.
        why = "; ".join(dict.fromkeys(doubts[own:]))
        why = why or "the interpreter of its #! line is not found"
        raise DetectionError(why if why.startswith(str(opened.path)) else f"{opened.path}: {why}")
    from floorguard._identify.process_paths import Walk

    walk = Walk()  # (one judgement: the folders both paths share are looked at once)
    if walk.reaches(shebang.interpreter, here) or walk.reaches(interpreter, here):
        # The kernel looks it up in the child, where /proc/self is the child's own.
        doubts.append(f"{opened.path}: its #! line's interpreter leads into /proc or /dev/fd")
    kind = "python" if _is_python(interpreter) else "node" if _is_node(interpreter) else ""
    if not kind:
        what = f"a script run by {interpreter}"
        if installed is not None:
            doubts.append(f"{opened.path} is a launcher ({what}): what it starts is not seen")
        return Examination(installed, "launcher", what, tuple(doubts))
    if not _is_native(interpreter):
        doubts.append(
            f"the interpreter {interpreter} of {opened.path} is not a native program "
            "(a launcher choosing what runs)"
        )
    script_argv = [*shebang.arguments, str(opened.path), *(argv or ())]
    runs_itself = _runs_itself(kind, script_argv, str(opened.path))
    if runs_itself is not None:
        doubts.append(f"{opened.path}: {runs_itself}")
    if kind == "node":
        ran, more = _node_run(script_argv, environ, here, script=opened, node=interpreter)
        what = f"a node script run by {interpreter}"
        # (what a preload runs counts as much as the script: the #! line's, NODE_OPTIONS')
        found = _one_adapter(installed, ran)
        return Examination(found, "node", what, (*doubts, *more), interpreter)
    code, more = _python_run(interpreter, script_argv, environ, here, script=opened)
    if code is not None and installed is not None and code.adapter != installed.adapter:
        raise DetectionError(f"{opened.path} is {installed.adapter}'s but imports {code.adapter}")
    what = f"a Python script run by {interpreter}"
    found = code if code is not None else installed
    if code is None and installed is not None:
        from floorguard._identify.python_command import parse_python_argv

        flags = parse_python_argv(script_argv).flags
        paths = identify.python_path(
            interpreter, environ, str(opened.path.parent), flags, here, program=str(opened.path)
        )
        if not _imported_through(installed, paths):
            # (its version is that metadata's, which no site folder's lookup would find)
            claimed = as_interpreted(installed, "pip-script", str(opened.path))
            found = dataclasses.replace(claimed, vouches=False)
    if code is not None and code.via == "python-script":
        found = as_interpreted(code, "pip-script", str(opened.path))
    return Examination(found, "python", what, (*doubts, *more))


# ---------------------------------------------------------------------------- #! lines


def _runs_itself(kind: str, argv: list[str], script: str) -> str | None:
    """Why the interpreter of a ``#!`` line would not run the script itself, or None: the
    line's own arguments may name another program (``env -S node OTHER.js``, ``python -m``),
    and the script is then only an argument of that program."""
    if kind == "node":
        from floorguard._identify.node_command import parse_node_argv

        node = parse_node_argv(argv)
        program = node.script if node.runs == "script" else None
    else:
        from floorguard._identify.python_command import parse_python_argv

        python = parse_python_argv(argv)
        program = python.value if python.runs == "script" else None
    if program == script:
        return None
    return "its #! line makes the interpreter run something else than the script"


def _parse_shebang(head: bytes) -> _Shebang:
    """The interpreter and arguments of a ``#!`` line, as the kernel passes them: the rest
    of the line after the interpreter is *one* argument; ``env -S`` splits it into words
    (``env_command.split_string``: at its own blanks, up to a comment).
    What ``env`` is asked to do besides naming a program (set variables, clear the
    environment, quoting) is a doubt, and so is a line the kernel reads otherwise than its
    letters say: longer than the kernel reads (it cuts it), holding a carriage return
    (which the kernel keeps, as part of a name) or a NUL (where the kernel ends a name)."""
    first = head.split(b"\n", 1)[0]
    if len(first) >= _SHEBANG_LIMIT or b"\r" in first or b"\0" in first:
        why = "is longer than the kernel reads (it cuts the line)"
        if b"\r" in first:
            why = "holds a CR (the kernel keeps it, as part of the interpreter's name or an option)"
        elif b"\0" in first:
            why = "holds a NUL byte (the kernel ends the interpreter's name or its option there)"
        return _Shebang("", (), (f"the #! line {why}: it is not run as it reads",))
    line = os.fsdecode(first[2:]).strip(" \t")
    program, _, rest = line.replace("\t", " ").partition(" ")
    rest = rest.strip(" \t")
    if os.path.basename(program) != "env":
        return _Shebang(program, (rest,) if rest else ())
    if not rest.startswith("-S"):
        if not rest or rest.startswith("-") or " " in rest or "=" in rest:
            return _Shebang("", (), (f"the #! line {line!r} is not understood",))
        return _Shebang(rest, (), through_env=True)
    from floorguard._identify import env_command

    try:
        words = env_command.split_string(rest[2:])
    except env_command.EnvRefused as exc:
        return _Shebang("", (), (f"the #! line {line!r} is not understood: {exc}",))
    if not words:
        # env would go on to run the script itself, named as its command.
        return _Shebang("", (), (f"the #! line {line!r} names no program for env",))
    if words[0].startswith("-") or "=" in words[0]:
        # env's own options and NAME=VALUE words change the interpreter's environment.
        return _Shebang("", (), (f"the #! line {line!r} sets env options or variables",))
    return _Shebang(words[0], tuple(words[1:]), through_env=True)


def _is_python(name: str) -> bool:
    return bool(_PYTHON_NAME.match(os.path.basename(name)))


def _is_node(name: str) -> bool:
    return bool(_NODE_NAME.match(os.path.basename(name)))


_INTERPRETER_NAMES: Final = {"node": "node", "python": "Python"}
# How a program carrying an interpreter's entry point runs code its arguments do not name.
_OWN_CODE: Final = {
    "node": "a single-executable app injected into a copy of node, or a program that "
    "exports the symbol and does as it likes",
    "python": "a program that embeds CPython, or exports the symbol, and does as it likes",
}
_native_cache = identify.new_cache()
_interpreter_cache = identify.new_cache()


def _interpreter_kind(opened: Target, doubts: list[str]) -> str:
    """``python`` or ``node`` when the native program ``opened`` is that interpreter by its
    dynamic symbols (``native_interpreter``), else empty; cached per file identity."""
    from floorguard._identify.native_interpreter import NotTold, interpreter_of

    def tell() -> tuple[str, str | None]:
        try:
            return interpreter_of(opened.fd) or "", None
        except NotTold as exc:
            return "", str(exc)

    key = (str(opened.path), opened.identity)
    kind, not_told = identify.memo(_interpreter_cache, key, tell)
    if not_told is not None:
        doubts.append(f"{opened.path}: whether it is node or Python cannot be told ({not_told})")
    return kind


def _is_native(path: str) -> bool:
    """Whether ``path`` is an ELF program (not a script that picks an interpreter); cached
    per file identity."""
    try:
        with open_target(path, path_env=None) as interpreter:
            return identify.memo(
                _native_cache,
                (str(interpreter.path), interpreter.identity),
                lambda: interpreter.read_head(4) == _ELF_MAGIC,
            )
    except DetectionError:
        return False


# ---------------------------------------------------------------------------- Python


def _older_than_modelled(version: str) -> bool:
    major, _, minor = version.partition(".")
    return not (major.isdigit() and minor.isdigit()) or (int(major), int(minor)) < (3, 11)


def _python_run(
    interpreter: str,
    argv: list[str],
    environ: Mapping[str, str],
    here: str,
    *,
    script: Target | None = None,
) -> tuple[Identification | None, list[str]]:
    """What ``interpreter ARGV`` runs (``script``: the opened file when it is the program)
    and the inputs not understood."""
    from floorguard._identify.python_command import (
        build_variable_doubts,
        parse_python_argv,
        python_environment_doubts,
    )
    from floorguard._identify.python_source import read_code_string

    command = parse_python_argv(argv)
    doubts = [*command.doubts, *build_variable_doubts(environ)]
    if not {"E", "I"} & command.flags:
        doubts += python_environment_doubts(environ, command)
    version = identify.python_version(interpreter)
    if version is None:
        # Neither its real file's name (python3.11) nor a pyvenv.cfg says: a copy of another
        # Python under a plain name would be read by 3.11's rules.
        doubts.append(
            f"{interpreter}: which Python it is cannot be told (its real file is not named "
            "pythonX.Y, and no pyvenv.cfg states a version)"
        )
    elif _older_than_modelled(version):
        # Its command line and start-up differ (no -P, no PYTHONSAFEPATH): the reading of
        # both here is CPython 3.11's and later.
        doubts.append(
            f"{interpreter} is Python {version}, older than the 3.11 whose command line and "
            "start-up floorguard reads"
        )
    flags = command.flags
    if command.runs == "module" and command.value is not None:
        top = command.value.split(".", 1)[0]
        paths = identify.python_path(interpreter, environ, here, flags, here, module=top)
        if not _safe_path(flags, environ):
            # The working directory is the agent's workspace: what it holds when a module is
            # first imported (an optional one nothing installed provides, or one written
            # while the agent runs) is not what could be judged now.
            doubts.append(
                f"python -m puts the working directory {here} first on its path, where any "
                "module the program imports later is looked for before the installed ones: "
                "give -P (or -I), or run the installed console script"
            )
        doubts += paths.doubts
        hit = identify.resolve_import(top, paths.entries, version)
        if hit is not None:
            doubts += _outside_sites(top, paths, version)
            doubts += _installed_copy_doubts(top, paths, version)
            return as_interpreted(hit, "python -m", command.value), doubts
        if command.value in _RUNNERS:

            def judged_file(path: str) -> Identification | None:
                with _open_program(path) as opened:
                    return _script_code(
                        opened, interpreter=interpreter, environ=environ, here=here,
                        flags=flags, version=version, doubts=[],
                    )[0]  # fmt: skip

            def judged_code(code: str) -> Identification | None:
                from floorguard._identify.python_source import SourceError

                try:
                    source = read_code_string(code)
                except SourceError:
                    return None  # (no Python: it names nothing)
                return _judge_source(
                    source, paths, version=version, via="python -c", subject=runner, doubts=[]
                )[0]

            runner = command.value
            ran = _run_by_runner(
                command.args, paths, version, here, judged_file=judged_file, judged_code=judged_code
            )
            if ran is not None:
                return ran, [
                    *doubts,
                    f"python -m {command.value} runs {ran.subject} under its own code (a "
                    "profiler, debugger, tracer or test runner), which is not judged",
                ]
        return _module_code(command.value, paths, version, doubts)
    if command.runs == "code" and command.value is not None:
        paths = identify.python_path(interpreter, environ, here, flags, here)
        if not _safe_path(flags, environ):
            # -c puts '' first on the path: the directory the process is in at each import,
            # wherever the program has moved by then, not the one judged here.
            doubts.append(
                "python -c imports from whatever directory the program is in at the time "
                "('' first on its path), not only the one judged: give -P"
            )
        source = read_code_string(command.value)
        return _judge_source(
            source, paths, version=version, via="python -c", subject="-c",
            doubts=[*doubts, *paths.doubts],
        )  # fmt: skip
    if command.runs != "script" or command.value is None:
        return None, doubts  # nothing, or code from stdin (a doubt already)
    if script is not None and command.value == str(script.path):
        return _script_code(
            script, interpreter=interpreter, environ=environ, here=here, flags=flags,
            version=version, doubts=doubts,
        )  # fmt: skip
    where = command.value if os.path.isabs(command.value) else os.path.join(here, command.value)
    main = where
    if os.path.isdir(where):
        # The folder is first on the path, and its __main__ is what the path finder takes
        # there (an extension module before source): only a __main__.py is judged.
        main = os.path.join(where, "__main__.py")
        located = identify.locate_module("__main__", [where], version)
        if located is None or located.file != main:
            raise DetectionError(_no_main_source(where, located))
        # A folder's __main__ is imported, so its cached bytecode may run instead.
        doubts = [*doubts, *_cached_bytecode(main)]
    opened = _open_program(main)
    with opened:
        first = where if os.path.isdir(where) else None
        return _script_code(
            opened, interpreter=interpreter, environ=environ, here=here, flags=flags,
            version=version, doubts=doubts, first=first,
        )  # fmt: skip


# Standard-library modules that run, import or evaluate the module, file or code their
# arguments name.
_RUNNERS: Final = frozenset(
    {"cProfile", "profile", "pdb", "trace", "runpy", "pydoc", "unittest", "doctest", "timeit",
     "inspect"}
)  # fmt: skip
_MODULE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def _run_by_runner(
    args: Sequence[str],
    paths: identify.PythonPath,
    version: str | None,
    here: str,
    *,
    judged_file: Callable[[str], Identification | None],
    judged_code: Callable[[str], Identification | None],
) -> Identification | None:
    """The tracked package a standard-library runner is given to run, by its arguments
    ``args``: any that names one of its modules (``aider``, ``aider.main``) as the path finds
    it; any that is a file, judged as ``python FILE`` judges it (a file of the package, or a
    program importing it); any other read as Python code, as ``-c`` is (timeit's statements,
    pdb's ``-c !...`` commands). Every argument is looked at, whatever option it belongs to
    (no runner's own reading is modelled): more is never less."""
    found: list[Identification | None] = []
    for word in (text for arg in args for text in _option_values(arg)):
        module = word.partition(":")[0]  # (inspect's MODULE:QUALNAME)
        if _MODULE_NAME.match(module):
            top = module.split(".", 1)[0]
            hit = identify.resolve_import(top, paths.entries, version)
            if hit is not None and (unordered := _installed_copy_doubts(top, paths, version)):
                raise DetectionError(unordered[0])
            found.append(None if hit is None else as_interpreted(hit, "python -m", module))
        where = os.path.join(here, word)
        if os.path.isfile(where):
            with contextlib.suppress(DetectionError):
                found.append(judged_file(where))
        elif not _MODULE_NAME.match(module):
            found.append(judged_code(word.lstrip("!")))
    return _one_adapter(*found)


def _option_values(arg: str) -> tuple[str, ...]:
    """An argument, and the value it may carry joined to an option as a runner's parser
    reads it: ``--setup=CODE`` (any abbreviation), ``-sCODE``."""
    if arg.startswith("--") and "=" in arg:
        return arg, arg.partition("=")[2]
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
        return arg, arg[2:]
    return (arg,)


def _safe_path(flags: frozenset[str], environ: Mapping[str, str]) -> bool:
    """Whether the interpreter leaves the working directory off its path (``-P``, ``-I``,
    or PYTHONSAFEPATH when it reads its environment)."""
    read_env = not {"E", "I"} & flags
    return bool({"I", "P"} & flags) or bool(read_env and environ.get("PYTHONSAFEPATH"))


def _script_code(
    script: Target,
    *,
    interpreter: str,
    environ: Mapping[str, str],
    here: str,
    flags: frozenset[str],
    version: str | None,
    doubts: list[str],
    first: str | None = None,
) -> tuple[Identification | None, list[str]]:
    """A Python program file: a file of a catalogued distribution is that distribution's
    (its own code is trusted as installed); anything else is judged by its source."""

    folder = first if first is not None else str(script.path.parent)
    paths = identify.python_path(
        interpreter, environ, folder, flags, here, program=str(script.path),
        folder_program=first is not None,
    )  # fmt: skip
    installed = identify.identify_file(script, environ)
    if installed is not None and not _is_wrapper(script) and _imported_through(installed, paths):
        return as_interpreted(installed, "python-script", str(script.path)), [
            *doubts,
            *paths.doubts,
        ]
    source = _program_source(script)
    code, doubts = _judge_source(
        source, paths, version=version, via="python-script", subject=str(script.path),
        doubts=[*doubts, *paths.doubts],
    )  # fmt: skip
    if installed is None or _is_wrapper(script):
        return code, doubts
    # Metadata beside the program that Python does not import through: read, the program
    # is what it imports; the metadata may only refuse it (gate: at a version the map lets
    # run, it is judged as what its source is).
    if code is not None:
        if code.adapter != installed.adapter:
            raise DetectionError(
                f"{script.path} is {installed.adapter}'s but imports {code.adapter}"
            )
        return code, doubts
    claimed = as_interpreted(installed, "python-script", str(script.path))
    return dataclasses.replace(claimed, vouches=False), doubts


def _imported_through(installed: Identification, paths: identify.PythonPath) -> bool:
    """Whether the distribution that claims a file lies in a site folder the interpreter
    imports through (a folder merely named site-packages, or any folder above the file, is
    not one: anyone who can write a file beside a program can write metadata there). A
    claim whose version is unknown refuses wherever it lies."""
    source = installed.version_source
    if installed.version is None or source is None:
        return True
    if installed.via != "pip-record":
        return False  # (an npm package's metadata: no Python site folder holds it)
    # (a dist-info's METADATA, an egg-info folder's PKG-INFO, or an egg-info file itself)
    holder = os.path.dirname(source if source.endswith(".egg-info") else os.path.dirname(source))
    real = os.path.realpath(holder)
    return any(os.path.realpath(site) == real for site in paths.sites)


def _is_wrapper(script: Target) -> bool:
    """A ``#!`` file (a console script) is judged by its imports even when a distribution's
    RECORD lists it: a copy of the wrapper may import another copy of the package."""
    return script.read_head(2) == b"#!"


def _module_code(
    module: str, paths: identify.PythonPath, version: str | None, doubts: list[str]
) -> tuple[Identification | None, list[str]]:
    """``python -m module`` for a module that is not catalogued (a copied wrapper renamed
    ``codey.py`` on PYTHONPATH): what runpy runs, judged by its source together with the
    ``__init__`` of every package it imports first. Each part of the name is found as the
    path finder finds it (identify.locate_module: a package before a module of its name,
    an extension module before source), and so is a package's ``__main__``, a namespace
    package's among all its portions; a file it runs that is not source (an extension
    module, bytecode) is a doubt naming it."""
    parts = module.split(".")
    doubts = list(doubts)
    inits: list[str] = []  # each package's __init__, in the order runpy imports them
    program: str | None = None
    search: Sequence[str] = paths.entries
    for depth, part in enumerate(parts):
        located = identify.locate_module(part, search, version)
        if located is None:
            break  # python fails here, once the packages above have run
        if located.kind == "module":
            program = located.file
            if depth < len(parts) - 1:
                doubts.append(
                    f"python -m {module}: {program} is a module, not a package: it runs, "
                    "then python fails"
                )
            break
        if located.file is not None:
            inits.append(located.file)
        search = located.search
    else:
        # A package (regular or namespace): runpy runs its __main__, found as any submodule.
        main = identify.locate_module("__main__", search, version)
        if main is not None and main.kind == "module":
            program = main.file
        elif main is not None:
            doubts.append(
                f"python -m {module}: its __main__ is a package "
                f"({os.path.join(main.directory, '__main__')}), which python does not run"
            )
    if program is None and not inits:
        return None, doubts  # nothing runs (ImportError)
    sources = []
    for file in [*inits, *([program] if program is not None else [])]:
        if not file.endswith(".py"):
            first = "first runs" if file != program else "runs"
            doubts.append(f"python -m {module} {first} {file}, which is not source")
            continue
        doubts += _cached_bytecode(file)
        with _open_program(file) as opened:
            source = _program_source(opened)
        if file != program:  # (a package's __init__: its doubts name it)
            source = dataclasses.replace(source, doubts=tuple(f"{file} {d}" for d in source.doubts))
        sources.append(source)
    return _judge_source(
        _together(sources), paths, version=version, via="python -m", subject=module,
        doubts=doubts,
    )  # fmt: skip


def _together(sources: list[PythonSource]) -> PythonSource:
    """What several files run one after the other import, and doubt, as one program."""
    from floorguard._identify.python_source import PythonSource

    imports = dict.fromkeys(module for source in sources for module in source.imports)
    references = dict.fromkeys(name for source in sources for name in source.references)
    return PythonSource(
        tuple(imports),
        tuple(d for source in sources for d in source.doubts),
        tuple(references),
    )


_UNJUDGED_IMPORT: Final = "{subject} imports {top} from {where}, code that is not judged"
# pipx's console script importing the pipx package (the launcher itself), as that doubt says.
_PIPX_OWN_IMPORT: Final = re.compile(
    r".+ imports pipx from (?P<where>.+), code that is not judged\Z", re.DOTALL
)


def _judge_source(
    source: PythonSource,
    paths: identify.PythonPath,
    *,
    version: str | None,
    via: str,
    subject: str,
    doubts: list[str],
) -> tuple[Identification | None, list[str]]:
    """The catalogued adapter whose modules ``source`` imports, with the version of the
    copy the interpreter will load. Any other module it imports, but the standard library's
    (``python_source`` allows only a few of those), is code that runs with the program and
    is not judged: a doubt, wherever it is installed."""
    import sys

    doubts = [*doubts, *source.doubts]
    hits = []
    for module in source.imports:
        top = module.split(".", 1)[0]
        hit = identify.resolve_import(top, paths.entries, version)
        if hit is not None:
            hits.append(hit)
            doubts += _outside_sites(top, paths, version)
            doubts += _installed_copy_doubts(top, paths, version)
            continue
        # The standard library comes after the program's folder and PYTHONPATH only (whose
        # shadows are doubts already); anything else imported is code nobody judged.
        where = paths.before_site if top in sys.stdlib_module_names else paths.entries
        found = identify.find_module(top, where, version)
        if found is not None and found[1] != "namespace":
            doubts.append(_UNJUDGED_IMPORT.format(subject=subject, top=top, where=found[0]))
        elif top not in sys.stdlib_module_names:
            doubts.append(f"{subject} imports {top}, which is not found where it is looked for")
    adapters = {hit.adapter for hit in hits}
    if not adapters:
        return None, doubts
    tops = {hit.subject.split(".", 1)[0] for hit in hits}
    for reference in source.references:
        if reference.split(".", 1)[0] in tops:
            doubts += _not_its_own_code(reference, paths, version, subject)
    if len(adapters) > 1:
        raise DetectionError(f"{subject} imports several adapters at once: {sorted(adapters)}")
    versions = {(hit.version, hit.version_source) for hit in hits}
    found_version, source_path = versions.pop() if len(versions) == 1 else (None, None)
    identified = Identification(hits[0].adapter, via, subject, found_version, source_path, True)
    return identified, doubts


def _not_its_own_code(
    reference: str, paths: identify.PythonPath, version: str | None, subject: str
) -> list[str]:
    """A doubt when the dotted ``reference`` the program takes from the adapter's package
    names something one of its modules does not define by ``def`` or ``class``: a module
    or object that module imports (``aider.main.git``, ``from aider.main import Path``) is
    code the check did not judge, reached under the adapter's name."""
    parts = reference.split(".")
    found = identify.find_module(parts[0], paths.entries, version)
    if found is None:
        return [
            f"{subject} takes {reference}, but {parts[0]} is not found where the interpreter "
            "looks for it"
        ]
    if found[1] == "namespace":
        return [f"{subject} takes {reference}, whose package has no code of its own to judge"]
    if found[1] == "module":
        # (a single module file, source or not, where the package was expected)
        return [
            f"{subject} takes {reference}, but {parts[0]} in {found[0]} is a single module, "
            "not the package whose code was judged"
        ]
    folder = os.path.join(found[0], parts[0])
    for index, part in enumerate(parts[1:], start=1):
        package = os.path.join(folder, part)
        if os.path.isfile(os.path.join(package, "__init__.py")):
            folder = package  # a subpackage
            continue
        if os.path.isfile(package + ".py"):
            folder = package + ".py"  # a submodule; the next part is a name in it
            continue
        module = folder if folder.endswith(".py") else os.path.join(folder, "__init__.py")
        taken = ".".join(parts[: index + 1])
        if not os.path.isfile(module):
            return [
                f"{subject} takes {taken}, from {folder}, which has no {os.path.basename(module)} "
                "source (bytecode or a native module in its place is code that is not judged)"
            ]
        if part not in _definitions(module):
            return [
                f"{subject} takes {taken}, which {module} does not define by def or class "
                "(what a module imports or assigns is code that is not judged)"
            ]
        if index + 1 < len(parts):
            # (a class's or a function's attributes are set by assignments too)
            return [
                f"{subject} takes {reference}, an attribute of {taken} (what it holds is "
                "not judged)"
            ]
        return []
    return []


_definitions_cache = identify.new_cache()


def _definitions(module: str) -> frozenset[str]:
    """The names ``module`` (a source file) defines by ``def`` or ``class``; none when it
    cannot be read as source."""
    from floorguard._identify.python_source import MAX_SOURCE_BYTES, SourceError, defined_names

    try:
        opened = _open_program(module)
    except DetectionError:
        return frozenset()
    with opened:

        def read() -> frozenset[str]:
            data = opened.read_all(MAX_SOURCE_BYTES)
            if data is None:
                return frozenset()
            try:
                return defined_names(data, name=module)
            except SourceError:
                return frozenset()

        return identify.memo(_definitions_cache, (module, opened.identity), read)


def _outside_sites(top: str, paths: identify.PythonPath, version: str | None) -> list[str]:
    """A catalogued package imported from ahead of the site folders (the program's folder,
    PYTHONPATH) is a copy in a folder the child's inputs chose, whose bytecode caches and
    files nothing vouches for: a doubt. Installed copies are judged by their metadata."""
    found = identify.find_module(top, paths.entries, version)
    if found is None or found[0] not in paths.before_site:
        return []
    return [f"{top} is imported from {found[0]}, outside every site folder"]


def _installed_copy_doubts(top: str, paths: identify.PythonPath, version: str | None) -> list[str]:
    """Doubts about the site folder copy of ``top`` the import finds: one that is not the
    copy its metadata describes (links, an editable install), and one whose folder only
    some builds of CPython read, or read in another order (Debian's dist-packages, a base
    installation's folders), while another site folder holds it too: which copy runs then
    depends on the build."""
    holding = [
        folder
        for folder in paths.sites
        if (found := identify.find_module(top, [folder], version)) is not None
        and found[1] != "namespace"
    ]
    if not holding:
        return []
    doubts = []
    if (linked := identify.not_a_copy(holding[0], top, version)) is not None:
        doubts.append(linked)
    if len(holding) > 1 and holding[0] in paths.build_ordered:
        doubts.append(
            f"{top} is installed in two site folders, {holding[0]} and {holding[1]}, whose "
            "order (or whether it reads them at all) depends on how this Python was built "
            "(Debian's, Fedora's and upstream CPython's differ): which copy runs cannot be "
            "told"
        )
    return doubts


def _open_program(path: str) -> Target:
    """The file an interpreter is asked to run, opened; raises DetectionError when it cannot
    be (the interpreter would fail, or read something else than was judged)."""
    try:
        return open_target(path, path_env=None, executable=False)
    except BinaryNotFoundError as exc:
        # (the program was found: what is missing is the file it is told to run)
        raise DetectionError(str(exc).replace("binary not found", "script not found", 1)) from None


def _no_main_source(folder: str, located: identify.LocatedModule | None) -> str:
    """Why ``python FOLDER`` is not judged when the path finder takes no ``__main__.py``
    there: the ``__main__`` it takes instead (an extension module, bytecode, a package),
    or none at all."""
    if located is None:
        return f"{folder} holds no __main__.py: python would find no __main__ to run"
    if located.kind != "module":
        return (
            f"{folder} holds the package {os.path.join(folder, '__main__')}, which python does "
            "not run as its __main__"
        )
    return f"{folder}: python would run {located.file}, which is not source the gate can read"


def _cached_bytecode(source: str) -> list[str]:
    """A module the import system loads may run from ``__pycache__`` instead of its source
    (a timestamp ``.pyc`` is trusted on its recorded mtime and size, an unchecked hash one
    unconditionally): any cached bytecode beside judged source is a doubt."""
    folder, name = os.path.split(source)
    cache = os.path.join(folder, "__pycache__")
    stem = name.removesuffix(".py") + "."
    found = sorted(
        entry
        for entry in identify.listing(cache)
        if entry.startswith(stem) and entry.endswith(".pyc")
    )
    return [f"{os.path.join(cache, entry)} may run instead of the source judged" for entry in found]


_source_cache = identify.new_cache()


def _program_source(opened: Target) -> PythonSource:
    """The opened program's source as CPython reads it (cached per file identity). Raises
    DetectionError for a program over the size limit, or not readable as Python."""
    from floorguard._identify.python_source import MAX_SOURCE_BYTES, read_source

    def read() -> PythonSource:
        data = opened.read_all(MAX_SOURCE_BYTES)
        if data is None:
            raise DetectionError(
                f"{opened.path} is larger than {MAX_SOURCE_BYTES} bytes: its code cannot be judged"
            )
        return read_source(data, name=str(opened.path))

    return identify.memo(_source_cache, (str(opened.path), opened.identity), read)


# ---------------------------------------------------------------------------- node


def _node_run(
    argv: list[str],
    environ: Mapping[str, str],
    here: str,
    *,
    script: Target | None = None,
    node: str,
) -> tuple[Identification | None, list[str]]:
    """What ``node ARGV`` runs (``script``: the opened file when it is the main script) and
    the inputs not understood."""
    from floorguard._identify.node_command import node_environment_doubts, parse_node_argv
    from floorguard._identify.node_resolution import node_search_doubts, not_text_on_the_way

    command = parse_node_argv(argv)
    doubts = [*command.doubts, *node_environment_doubts(environ)]
    if command.runs in ("stdin", "repl"):
        doubts.append("node reads its program from standard input")
    preloaded = None
    if command.runs != "nothing":
        preloaded = _preloaded_adapter(command, environ, here, node)
    if command.runs != "script" or command.script is None:
        doubts += node_search_doubts(environ, here, node=node, program=None, package=None)
        return preloaded, doubts
    # (node loads the file its own walk of this path reaches, every name read as UTF-8)
    elsewhere = not_text_on_the_way(os.path.join(here, command.script))
    if elsewhere is not None:
        doubts.append(f"node would read another file than the one judged: {elsewhere}")
    if script is not None and command.script == str(script.path):
        found = identify.npm_identification(script.dir_fd, script.path, "node-script")
        program = str(script.path)
    else:
        main = _node_main(command.script, here)
        if main is None:
            # (node runs the preloads before it finds the main script missing)
            doubts.append(f"node's main script {command.script} is not found")
            doubts += node_search_doubts(environ, here, node=node, program=None, package=None)
            return preloaded, doubts
        with main:
            found = identify.npm_identification(main.dir_fd, main.path, "node-script")
            program = str(main.path)
    # The walk up for modules starts from the real file node loads, as its loaders resolve it.
    package = os.path.dirname(found.version_source) if found and found.version_source else None
    doubts += node_search_doubts(environ, here, node=node, program=program, package=package)
    return _one_adapter(found, preloaded), doubts


def _one_adapter(*found: Identification | None) -> Identification | None:
    """The adapter whose code an interpreter runs, the first found (a main script's before
    a preload's); raises DetectionError when it runs code of two."""
    named = [each for each in found if each is not None]
    for other in named[1:]:
        if other.adapter != named[0].adapter:
            raise DetectionError(
                f"it runs code of two adapters: {named[0].subject} ({named[0].adapter}) "
                f"and {other.subject} ({other.adapter})"
            )
    return named[0] if named else None


def _preloaded_adapter(
    command: NodeCommand, environ: Mapping[str, str], here: str, node: str
) -> Identification | None:
    """The adapter whose code a preload names (``-r``, ``--import``, a loader, on the
    command line, in NODE_OPTIONS or an env file's), found as node finds it
    (node_preloads), or None. Such a spawn runs that adapter's code, whatever the main
    script is: it is judged as the adapter, in the closed world (where the preload itself
    refuses it), under any untracked policy. A preload of no adapter's file leaves node
    what it is (as ``node -e`` is)."""
    from floorguard._identify.node_command import node_options_preloads
    from floorguard._identify.node_preloads import (
        IMPORT,
        REQUIRE,
        env_file_preloads,
        preload_files,
    )

    specifiers = [*command.preloads, *node_options_preloads(environ)]
    for env_file in command.env_files:
        specifiers += env_file_preloads(env_file, here)
    found: list[Identification | None] = []
    for option, specifier in specifiers:
        kind = REQUIRE if option == "--require" else IMPORT
        for file in preload_files(specifier, here, environ, node, kind):
            with _open_program(str(file)) as opened:
                found.append(
                    identify.npm_identification(opened.dir_fd, opened.path, "node-preload")
                )
    return _one_adapter(*found)


_NODE_EXTENSIONS: Final = ("", ".js", ".json", ".node")


def _node_main(script: str, here: str) -> Target | None:
    """The file ``node SCRIPT`` loads, opened (None: there is none)."""
    found = node_main_path(script, here)
    return None if found is None else _open_program(str(found))


def node_main_path(script: str, here: str) -> Path | None:
    """The file ``node SCRIPT`` loads, as its CommonJS loader finds a main entry: the path
    against the working directory, as given or with ``.js``, ``.json`` or ``.node``; for a
    folder, its ``package.json`` ``main`` or its ``index`` file. None: there is none.
    Raises DetectionError when the folder's package.json cannot be read plainly."""
    # node resolves its main script's path by the letters (``link/..`` is the folder that
    # holds the link), and opens what that names.
    where = Path(os.path.normpath(os.path.join(here, script)))
    for extension in _NODE_EXTENSIONS:
        candidate = Path(str(where) + extension)
        if candidate.is_file():
            return candidate
    if not where.is_dir():
        return None
    entries = []
    manifest = where / "package.json"
    if manifest.is_file():
        from floorguard._identify.launchers import read_manifest

        try:
            fields = read_manifest(manifest)
        except ValueError:
            fields = None
        if not isinstance(fields, dict):
            raise DetectionError(f"{manifest} is not a JSON object")
        main = fields.get("main")
        if isinstance(main, str) and main:
            from floorguard._identify.process_paths import reaches_the_process

            base = where / main
            if reaches_the_process(str(base), str(where)):
                # node reads it in the child, where /proc/self is the child's own.
                raise DetectionError(f"{manifest}: its main {main!r} leads into /proc")
            # (as given, with each extension, then its own index with each, in that order)
            entries += [Path(str(base) + e) for e in _NODE_EXTENSIONS]
            entries += [base / f"index{e}" for e in _NODE_EXTENSIONS[1:]]
    entries += [where / f"index{e}" for e in _NODE_EXTENSIONS[1:]]
    for candidate in entries:
        if candidate.is_file():
            return candidate
    return None
