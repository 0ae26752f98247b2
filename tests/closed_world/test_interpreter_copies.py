"""A program that carries node's or CPython's entry point under another name is refused.

Asked ``--version``, stock node answers ``v20.20.2``, which codex's, gemini's, goose's and
gptme's bare-version patterns would take for their own; and what it runs need not be its
argument at all: a copy of node with a single-executable app injected runs the app, and a
program of anyone's own may export ``node::Start`` and do as it likes. The gate tells such
a program by what the file is (its dynamic symbols), never by its name or its answer, and
refuses it whatever its arguments name.
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, NODE, World, needs_node
from hosts import Host, floor
from probes.native import Run, native_agent, require_native

from floorguard._identify.native_interpreter import (
    MAX_DYNAMIC_STRINGS,
    NotTold,
    interpreter_in,
    interpreter_of,
)

FLOORS = {"aider": "0.60.0", "claude": "1.0.100", "codex": "0.2.0", "gemini": "0.1.0"}


@pytest.fixture
def floored(world: World) -> World:
    """The world with floors for codex and gemini too: a version believed for them would be
    a permit, not an untracked spawn."""
    world.host = Host(world.root / "floored-host", {k: floor(v) for k, v in FLOORS.items()})
    return world


def node_under(name: str, folder: Path, *, link: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    real = os.path.realpath(NODE)
    if link:
        # A hard link of a private copy: one of the machine's node would change its file
        # (links count, change time) under every other test judging it meanwhile.
        own = folder / ".node"
        shutil.copy2(real, own)
        try:
            os.link(own, target)
        except OSError as exc:  # (hard links not allowed here)
            pytest.skip(f"cannot hard-link {own}: {exc.strerror}")
    else:
        shutil.copy2(real, target)
    return target


@needs_node
@pytest.mark.parametrize("name", ["codex", "gemini"])
def test_a_copy_of_node_named_like_an_adapter_running_an_old_script_is_refused(
    floored: World, untracked_policy: str, tmp_path: Path, name: str
) -> None:
    old = floored.old_claude()
    copy = node_under(name, tmp_path / "bin")
    outcome = floored.spawn(name, [str(old.cli), "task"], policy=untracked_policy,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_refused(outcome, old.marker, "node under another name")
    assert "20." not in str(outcome["version"] or ""), outcome
    assert copy.exists()


@needs_node
@pytest.mark.parametrize("name", ["claude", "codex", "my-tool"])
def test_a_copy_of_node_under_another_name_is_refused_whatever_script_it_is_given(
    floored: World, untracked_policy: str, tmp_path: Path, name: str
) -> None:
    """Its argument is an at-floor claude's cli.js: a copy carrying a single-executable app
    would run the app, not the script judged."""
    new = floored.new_claude()
    node_under(name, tmp_path / "bin")
    outcome = floored.spawn(name, [str(new.cli), "task"], policy=untracked_policy,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_refused(outcome, new.marker, "node under another name")
    assert "single-executable" in outcome["message"], outcome


@needs_node
def test_a_hard_link_of_node_named_like_an_adapter_is_refused(
    floored: World, untracked_policy: str, tmp_path: Path
) -> None:
    old = floored.old_claude()
    node_under("codex", tmp_path / "bin", link=True)
    outcome = floored.spawn("codex", [str(old.cli), "task"], policy=untracked_policy,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_refused(outcome, old.marker, "node under another name")


@needs_node
def test_a_copy_of_node_without_arguments_to_judge_is_not_taken_for_the_adapter(
    floored: World, untracked_policy: str, tmp_path: Path
) -> None:
    # Its REPL (or whatever its arguments would name) is node's, never codex 20.x.
    node_under("codex", tmp_path / "bin")
    outcome = floored.spawn("codex", [], policy=untracked_policy,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    assert outcome["outcome"] == "refused", outcome
    assert "20." not in str(outcome["version"] or ""), outcome


def test_a_copy_of_python_named_like_an_adapter_is_refused_as_python(
    floored: World, untracked_policy: str
) -> None:
    """Refused as Python under another name, not because its ``Python 3.x`` answer happens
    to match no adapter's pattern."""
    old = floored.old_aider()
    copy = old.prefix / "bin" / "codex"
    shutil.copy2(os.path.realpath(old.python), copy)
    outcome = floored.spawn("codex", ["-I", "-m", "aider", "task"], binary=copy,
                            policy=untracked_policy, env=floored.env())  # fmt: skip
    floored.assert_refused(outcome, old.marker, "Python under another name")


@pytest.mark.parametrize("name", ["aider", "codex"])
def test_a_copy_of_python_under_another_name_is_refused_whatever_it_is_asked_to_run(
    floored: World, untracked_policy: str, name: str
) -> None:
    new = floored.new_aider()
    copy = new.prefix / "bin" / f"{name}-copy"
    shutil.copy2(os.path.realpath(new.python), copy)
    outcome = floored.spawn(name, ["-I", "-m", "aider", "task"], binary=copy,
                            policy=untracked_policy, env=floored.env())  # fmt: skip
    floored.assert_refused(outcome, new.marker, "Python under another name")


@pytest.mark.parametrize("policy", [DEFAULT, DENY_BY_DEFAULT])
def test_a_copy_of_python_under_an_untracked_name_is_no_untracked_native_program(
    floored: World, policy: str
) -> None:
    """``py``, a copy of the venv's python, is refused under either policy: never allowed
    as an untracked native program."""
    old = floored.old_aider()
    copy = old.prefix / "bin" / "py"
    shutil.copy2(os.path.realpath(old.python), copy)
    outcome = floored.spawn("py", ["-I", "-m", "aider", "task"], binary=copy, policy=policy,
                            env=floored.env())  # fmt: skip
    floored.assert_refused(outcome, old.marker, "Python under another name")


def test_a_copy_of_python_outside_any_environment_is_refused_as_python_too(
    floored: World, tmp_path: Path
) -> None:
    old = floored.old_aider()
    (tmp_path / "bin").mkdir()
    copy = tmp_path / "bin" / "gptme"
    shutil.copy2(os.path.realpath(old.python), copy)
    code = f"import sys; sys.path[:0] = [{str(old.site)!r}]; from aider.main import main; main()"
    outcome = floored.spawn("gptme", ["-I", "-c", code], binary=copy,
                            policy=DENY_BY_DEFAULT, env=floored.env())  # fmt: skip
    floored.assert_refused(outcome, old.marker, "Python under another name")


def test_a_native_codex_that_says_so_is_still_permitted(floored: World, tmp_path: Path) -> None:
    require_native()
    marker = tmp_path / "codex-ran"
    native_agent(tmp_path / "bin" / "codex", version=b"codex-cli 0.5.0\n", run=Run(marker=marker))
    outcome = floored.spawn("codex", ["task"], policy=DENY_BY_DEFAULT,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    assert outcome["outcome"] == "started", outcome
    (recorded,) = floored.recorded()
    assert (recorded["verdict"], recorded["version"]) == ("permit", "0.5.0"), recorded
    assert marker.exists()


# --- what the file is --------------------------------------------------------------------


def told(path: str) -> str | None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return interpreter_of(fd)
    finally:
        os.close(fd)


@needs_node
def test_node_is_told_by_its_dynamic_symbols() -> None:
    assert told(os.path.realpath(NODE)) == "node"


def test_cpython_is_told_by_its_dynamic_symbols() -> None:
    # (a shared build imports Py_BytesMain from libpython, a static one exports it)
    assert told(os.path.realpath(sys.executable)) == "python"


def test_other_native_programs_are_no_interpreter(tmp_path: Path) -> None:
    assert told(os.path.realpath("/bin/sh")) is None
    require_native()
    native_agent(tmp_path / "codex", version=b"codex-cli 0.5.0\n", run=Run())
    assert told(str(tmp_path / "codex")) is None


def dynamic_elf(strings: bytes, *, stated_size: int | None = None, sized: bool = True) -> bytes:
    """A 64-bit little-endian ELF file with one PT_LOAD over the whole file (loaded at 0)
    and a PT_DYNAMIC whose DT_STRTAB/DT_STRSZ name ``strings`` (``stated_size``: another
    DT_STRSZ; not ``sized``: a DT_DEBUG in its place)."""
    phoff, phnum = 64, 2
    dynamic_at = phoff + 56 * phnum
    size_entry = (10, len(strings) if stated_size is None else stated_size) if sized else (21, 0)
    entries = [(5, dynamic_at + 48), size_entry]
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in [*entries, (0, 0)])
    size = dynamic_at + len(dynamic) + len(strings)
    header = (
        b"\x7fELF\x02\x01\x01"
        + bytes(9)
        + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, 56, phnum, 64, 0, 0)
    )
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, size, size, 4096)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic_at, dynamic_at, dynamic_at, 48, 48, 8)
    return header + load + dyn + dynamic + strings


def read_from(data: bytes) -> Callable[[int, int], bytes]:
    return lambda size, offset: data[offset : offset + size]


def test_the_entry_point_named_in_the_dynamic_strings_tells_the_interpreter() -> None:
    assert interpreter_in(read_from(dynamic_elf(b"\0libc.so.6\0Py_BytesMain\0"))) == "python"
    assert interpreter_in(read_from(dynamic_elf(b"\0_ZN4node5StartEiPPc\0"))) == "node"
    # (a name that only contains it is another symbol)
    assert interpreter_in(read_from(dynamic_elf(b"\0my_Py_BytesMain\0libc.so.6\0"))) is None


@pytest.mark.parametrize(
    ("symbol", "interpreter"),
    [
        # an embedding of CPython that does not go through its main()
        (b"Py_Initialize", "python"),
        (b"Py_InitializeFromConfig", "python"),
        (b"Py_RunMain", "python"),
        (b"PyRun_SimpleString", "python"),
        # a frozen __main__ run by CPython's own entry point for frozen programs
        (b"Py_FrozenMain", "python"),
        (b"_Py_InitializeMain", "python"),
        (b"Py_NewInterpreterFromConfig", "python"),
        # node::CreateEnvironment(...), node::LoadEnvironment(...): an embedding of node
        (b"_ZN4node17CreateEnvironmentEPNS_11IsolateDataEN2v85LocalINS2_7ContextEEE", "node"),
        (b"_ZN4node15LoadEnvironmentEPNS_11EnvironmentEPKc", "node"),
    ],
)
def test_a_program_that_embeds_an_interpreter_otherwise_than_by_its_main_is_told(
    symbol: bytes, interpreter: str
) -> None:
    assert interpreter_in(read_from(dynamic_elf(b"\0libc.so.6\0" + symbol + b"\0"))) == interpreter


@pytest.mark.parametrize("symbol", [b"PyObject_Free_", b"my_Py_Initialize", b"_ZN2v86Object3NewEv"])
def test_names_that_only_resemble_an_embedding_tell_no_interpreter(symbol: bytes) -> None:
    assert interpreter_in(read_from(dynamic_elf(b"\0" + symbol + b"\0"))) is None


@pytest.mark.parametrize(("stated_size", "sized"), [(0, True), (3, True), (None, False)])
def test_a_table_that_understates_its_size_is_read_as_the_loader_reads_it(
    stated_size: int | None, sized: bool
) -> None:
    """The loader reads names where symbols point and never looks at DT_STRSZ: a program
    whose DT_STRSZ says 0, or too little, or is left out, runs the same."""
    elf = dynamic_elf(b"\0libc.so.6\0Py_BytesMain\0", stated_size=stated_size, sized=sized)
    assert interpreter_in(read_from(elf)) == "python"


def test_a_name_at_the_very_start_of_the_table_tells_it_too() -> None:
    assert interpreter_in(read_from(dynamic_elf(b"_ZN4node5StartEiPPc\0"))) == "node"


def test_a_dynamic_string_table_that_cannot_be_read_is_not_taken_for_none() -> None:
    with pytest.raises(NotTold, match="larger than floorguard reads"):
        interpreter_in(read_from(dynamic_elf(b"\0x\0", stated_size=MAX_DYNAMIC_STRINGS + 1)))
    with pytest.raises(NotTold, match="not in the file"):
        interpreter_in(read_from(dynamic_elf(b"\0x\0", stated_size=4096)))
