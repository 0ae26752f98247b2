"""Check and spawn as one step, bound to the exact file that was checked.

The binary is located and opened once, before the preflight. Everything after works on that
open file: it is identified and probed through its descriptor, and the child is executed
through the same descriptor (``/proc/self/fd/N``), so a file swapped in under the same path,
or a directory on the path swapped, is never what runs. The child still sees the program
name it was asked for as ``argv[0]`` (a virtual environment's ``python3`` finds its
environment through it). Right before the exec the name is located again and compared with
the open file, so a swap is refused and recorded rather than silently bypassed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from floorguard._base._text import is_text, own_characters
from floorguard._gate.decision import Decision
from floorguard._gate.gate import (
    decide,
    fspath_text,
    plain_environ,
    refuse_after,
    refuse_unopened,
    text_mapping,
)
from floorguard._gate.popen_options import checked_popen_options
from floorguard._identify.target import Target, open_target
from floorguard._maps.catalog import executable_for
from floorguard.errors import DetectionError

RECEIPT_ID_VARIABLE = "FLOORGUARD_RECEIPT_ID"
# Called right after the binary is opened, and between the check and the exec; tests use
# them to swap files and directories in those windows.
_after_open_hook: Callable[[], None] | None = None
_race_window_hook: Callable[[], None] | None = None
# Called right before the child is started: exec's signal handling (from then on a signal
# is the child's, not a reason to stop before starting it).
_starting_hook: Callable[[], None] | None = None


def spawn(
    adapter: str,
    argv: Sequence[str],
    *,
    binary: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    floor_map: object = None,
    **popen_kwargs: Any,
) -> subprocess.Popen[Any]:
    """Preflight ``adapter`` and start exactly the binary that was checked.

    ``floor_map``: the host's own generated floor-map module, as for ``preflight``.

    ``argv`` holds the arguments after the program. The child's environment is ``env`` (or
    this process's) plus ``FLOORGUARD_RECEIPT_ID``. Raises SpawnRefused, having started
    nothing, when the preflight refuses or the binary changed between check and exec (its
    subclass BinaryNotFound when nothing is at the binary's name); TypeError for a shell
    string or arguments that would bypass the check; TypeError, ValueError, LookupError or
    OSError, before anything is judged, for other Popen options the child could not be
    started with (popen_options). OSError when the exec itself fails
    (a file the kernel cannot run, or a missing ``#!`` interpreter: then its ``filename`` is
    the checked binary's path, not the descriptor it was run through).
    """
    adapter, argv, binary, env, cwd = _spawn_arguments(adapter, argv, binary, env, cwd)
    popen_kwargs = checked_popen_options(popen_kwargs)
    child_env = dict(plain_environ(os.environ) if env is None else env)
    path_env = child_env.get("PATH")
    try:
        # An invalid adapter name is refused (and recorded) like any other unusable binary.
        name = executable_for(adapter) if binary is None else os.fspath(binary)
        if binary is not None and cwd is not None and os.sep in name:
            # As Popen finds a relative program: from the child's working directory.
            name = os.path.join(os.fspath(cwd), name)
        target = open_target(name, path_env=path_env)
    except (DetectionError, OSError, ValueError) as exc:
        raise refuse_unopened(adapter, exc, floor_map=floor_map) from None
    with target, _Workdir(cwd) as workdir:
        if _after_open_hook is not None:
            _after_open_hook()
        judged_dir = workdir.real if workdir.fd is not None else cwd
        command = _EnvCommand.of(target, list(argv), child_env, judged_dir)
        interpreters = _Interpreters.of(target, child_env, judged_dir)
        try:
            decision = decide(
                adapter,
                environ=os.environ,
                run_environ=child_env,
                target=target,
                argv=list(argv),
                # Judged where it really is; the child is started in the folder opened here.
                cwd=judged_dir,
                floor_map=floor_map,
            )
            if _race_window_hook is not None:
                _race_window_hook()
            _recheck(name, path_env, target, decision)
            workdir.recheck(decision)
            if command is not None:
                command.recheck(decision)
            interpreters.recheck(decision)
        finally:
            if command is not None:
                command.close()
            interpreters.close()
        child_env[RECEIPT_ID_VARIABLE] = decision.receipt_id
        with _descriptor_for_the_child(target.fd) as fd:
            exec_path = f"/proc/self/fd/{fd}"
            if _starting_hook is not None:
                _starting_hook()
            try:
                return subprocess.Popen(
                    [target.argv0, *argv],
                    executable=exec_path,
                    pass_fds=(fd,),
                    env=child_env,
                    cwd=workdir.exec_path,
                    shell=False,
                    **popen_kwargs,
                )
            except OSError as exc:
                if exc.filename != exec_path:
                    raise  # not about the program (a cwd that is missing, say)
                # Name the file that was checked, not the descriptor it was run through.
                raise OSError(exc.errno, exc.strerror, str(target.path)) from exc


# The child is run through /proc/self/fd/N, which a script then has for its own name; a CLI
# that starts itself again by that name (gemini does, with more memory) needs N open in its
# own child too. node marks the descriptors it inherits close-on-exec as it starts, from 0
# up to the first one above 15 that is not open (libuv's uv_disable_stdio_inheritance): N
# at 64 or above, with nothing open at 16 in the child, is left to its children.
_CHILD_DESCRIPTOR_FLOOR = 64


@contextlib.contextmanager
def _descriptor_for_the_child(fd: int) -> Iterator[int]:
    """The open file judged, at a descriptor of ``_CHILD_DESCRIPTOR_FLOOR`` or above (a
    duplicate, closed here afterwards); ``fd`` itself when none is free there (a soft
    RLIMIT_NOFILE below it)."""
    import fcntl

    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _CHILD_DESCRIPTOR_FLOOR)
    except OSError:
        yield fd
        return
    try:
        yield high
    finally:
        os.close(high)


def _spawn_arguments(
    adapter: object, argv: object, binary: object, env: object, cwd: object
) -> tuple[str, list[str], str | None, dict[str, str] | None, str | None]:
    """The arguments as judged and run: read once, text of its own characters (a str
    subclass's copied). Popen takes bytes and path objects where the judgement reads text:
    anything but text is a TypeError naming the argument, before anything is judged or
    recorded."""
    if not is_text(adapter):
        raise TypeError(f"adapter must be a string, not {type(adapter).__name__}")
    arguments = None
    # (by its type: isinstance believes what an object says its __class__ is)
    if not issubclass(type(argv), (str, bytes)) and issubclass(type(argv), Sequence):
        arguments = list(argv)  # type: ignore[call-overload]
    if arguments is None or not all(is_text(a) for a in arguments):
        raise TypeError("argv must be a list of strings (never a shell command line)")
    paths = []
    for name, value in (("binary", binary), ("cwd", cwd)):
        path = None if value is None else fspath_text(value)
        if value is not None and path is None:
            raise TypeError(f"{name} must be a string or a path of one, not {value!r}")
        paths.append(path)
    environment = None if env is None else text_mapping(env)
    if env is not None and environment is None:
        raise TypeError("env must map strings to strings (as os.environ does)")
    return (
        own_characters(adapter), [own_characters(a) for a in arguments], paths[0],
        environment, paths[1],
    )  # fmt: skip


def _recheck(name: str, path_env: str | None, target: Target, decision: Decision) -> None:
    """Refuse if the name now leads elsewhere or the open file is not the one checked.

    What runs is the open file either way; a name that now leads to another file means the
    install changed under the check, and the host should know rather than run stale work.
    """
    try:
        again = open_target(name, path_env=path_env)
    except DetectionError as exc:
        raise refuse_after(decision, f"binary vanished between check and exec: {exc}") from None
    with again:
        if again.path != target.path:
            raise refuse_after(
                decision, f"{name} now resolves to {again.path}, not the checked {target.path}"
            )
        if again.identity != target.identity or target.current_identity() != target.identity:
            raise refuse_after(decision, f"{target.path} changed between check and exec")


class _EnvCommand:
    """The file env will run (``env NAME=VALUE... COMMAND``), opened before the check. env
    finds it by name when it runs, so right before env is started the name must still lead
    to the file judged, unchanged; a name that could not be opened first is refused then
    (it was judged by name alone)."""

    def __init__(self, name: str, path_env: str | None, opened: Target | None) -> None:
        self.name, self.path_env, self.opened = name, path_env, opened

    @classmethod
    def of(
        cls,
        target: Target,
        argv: Sequence[str],
        environ: Mapping[str, str],
        cwd: str | os.PathLike[str] | None,
    ) -> _EnvCommand | None:
        """For env running a command, that command; None for any other program, for env
        running nothing, and for what the judgement refuses anyway (not understood)."""
        from floorguard._identify import env_command

        try:
            if not env_command.is_env(target):
                return None
            parsed = env_command.parse_env_argv(argv)
            if parsed.command is None:
                return None
            here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
            name, path_env = env_command.command_path(
                parsed.command, parsed.environment(environ), here
            )
        except env_command.EnvRefused:
            return None
        try:
            return cls(name, path_env, open_target(name, path_env=path_env))
        except (DetectionError, OSError, ValueError):
            return cls(name, path_env, None)

    def recheck(self, decision: Decision) -> None:
        """Refuse if env's command now leads elsewhere than the file judged, or changed."""
        held = self.opened
        if held is None:
            raise refuse_after(decision, f"env's command {self.name} could not be opened")
        try:
            again = open_target(self.name, path_env=self.path_env)
        except DetectionError as exc:
            raise refuse_after(
                decision, f"env's command vanished between check and exec: {exc}"
            ) from None
        with again:
            if again.path != held.path or decision.binary not in (None, str(held.path)):
                raise refuse_after(
                    decision,
                    f"env's command {self.name} now resolves to {again.path}, not the "
                    f"checked {decision.binary or held.path}",
                )
            if again.identity != held.identity or held.current_identity() != held.identity:
                raise refuse_after(decision, f"{held.path} changed between check and exec")

    def close(self) -> None:
        if self.opened is not None:
            self.opened.close()


class _Interpreters:
    """The files the kernel opens by name to run a ``#!`` script, opened before the check:
    the program its line names (an interpreter, or env) and, for ``#!/usr/bin/env NAME``,
    the file env finds on the child's PATH. Right before the exec each name must still lead
    to the file judged, unchanged: the judgement may wait seconds for the chain, and a file
    swapped in then would be what runs. (What the judgement refuses anyway, a line not
    understood or a search not followed, is left to it.)"""

    def __init__(self, held: list[tuple[str, str | None, Target]]) -> None:
        self.held = held

    @classmethod
    def of(
        cls, target: Target, environ: Mapping[str, str], cwd: str | os.PathLike[str] | None
    ) -> _Interpreters:
        from floorguard._identify import env_command, examine

        held: list[tuple[str, str | None, Target]] = []
        try:
            head = target.read_head(examine._SHEBANG_LIMIT)
        except OSError:
            return cls(held)
        if not head.startswith(b"#!"):
            return cls(held)
        line = examine._parse_shebang(head)
        if line.doubts or not line.interpreter:
            return cls(held)
        # (the kernel's first word of the line, as _parse_shebang takes it: env, or the
        # interpreter itself)
        first = os.fsdecode(head.split(b"\n", 1)[0][2:]).strip(" \t")
        program = first.replace("\t", " ").partition(" ")[0]
        names: list[tuple[str, str | None]] = [(program, None)]
        if line.through_env:
            here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
            with contextlib.suppress(env_command.EnvRefused):  # (the judgement refuses it)
                names.append(env_command.command_path(line.interpreter, environ, here))
        for name, path_env in names:
            if path_env is None and not os.path.isabs(name):
                continue  # (a relative interpreter: refused by the judgement)
            try:
                held.append((name, path_env, open_target(name, path_env=path_env)))
            except (DetectionError, OSError, ValueError):
                continue  # (not there: the judgement says so, or the exec fails)
        return cls(held)

    def recheck(self, decision: Decision) -> None:
        """Refuse if a name now leads elsewhere than the file judged, or that file changed."""
        for name, path_env, opened in self.held:
            try:
                again = open_target(name, path_env=path_env)
            except DetectionError as exc:
                raise refuse_after(
                    decision, f"the #! interpreter {name} vanished between check and exec: {exc}"
                ) from None
            with again:
                if again.path != opened.path:
                    raise refuse_after(
                        decision,
                        f"the #! interpreter {name} now resolves to {again.path}, not the "
                        f"checked {opened.path}",
                    )
                if (
                    again.identity != opened.identity
                    or opened.current_identity() != opened.identity
                ):
                    raise refuse_after(decision, f"{opened.path} changed between check and exec")

    def close(self) -> None:
        for _, _, opened in self.held:
            opened.close()


class _Workdir:
    """The child's working directory, opened once: judged by its real path and entered
    through its descriptor (``/proc/self/fd/N``: the child's ``chdir`` happens before its
    descriptors are closed), so a folder swapped in under the name is never where it runs.
    A name that cannot be opened is left to the judgement, which refuses it. Without a
    name, the host's own working directory is opened: another thread of the host may change
    it between the check and the exec, and the child is started in the folder judged."""

    def __init__(self, cwd: str | os.PathLike[str] | None) -> None:
        self.given = None if cwd is None else os.fspath(cwd)
        self.fd: int | None = None
        self.real: str | None = None

    def __enter__(self) -> _Workdir:
        if self.given is None or "\x00" not in self.given:
            try:
                self.fd = os.open(
                    "." if self.given is None else self.given,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC,
                )
            except (OSError, UnicodeError):  # (a name no bytes stand for: judged, refused)
                return self
            self.real = os.readlink(f"/proc/self/fd/{self.fd}")
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

    @property
    def exec_path(self) -> str | None:
        return self.given if self.fd is None else f"/proc/self/fd/{self.fd}"

    def recheck(self, decision: Decision) -> None:
        """Refuse if the folder judged is not the one the name leads to now, or if it was
        judged by name because it could not be opened (it became a folder meanwhile)."""
        if self.given is None:
            return
        if self.fd is None:
            raise refuse_after(decision, f"working directory {self.given} cannot be opened")
        try:
            now = os.stat(self.given)
        except OSError:
            now = None
        held = os.fstat(self.fd)
        if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            raise refuse_after(
                decision, f"working directory {self.given} changed between check and exec"
            )
