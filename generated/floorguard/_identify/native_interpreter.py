"""Which interpreter a native program is, told by what the file is rather than by its name.

A copy or hard link of node or CPython under an adapter's name (``codex``) answers
``--version`` with its own version (``v20.20.2``), which an adapter's bare-version pattern
takes for the adapter's, and then runs whatever its arguments name. Its name cannot tell it;
its dynamic linking does: node's ``main`` calls ``node::Start`` and CPython's calls
``Py_BytesMain`` (``Py_Main`` before 3.8). A static build exports the symbol (for native
addons and extension modules), a shared one imports it from libnode or libpython, so the
name stands in the program's dynamic string table either way, wherever the interpreter was
downloaded from (a distribution, nvm, pyenv, uv). A fully static program, with no dynamic
section, is not told (as a program crafted to print an adapter's line is not).

The ELF reading is pure (``read(size, offset)`` is passed in); :func:`interpreter_of` reads
an open descriptor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Final, Literal

Interpreter = Literal["node", "python"]

_ELF_MAGIC: Final = b"\x7fELF"
_PT_LOAD: Final = 1
_PT_DYNAMIC: Final = 2
_DT_NULL: Final = 0
_DT_STRTAB: Final = 5
_DT_STRSZ: Final = 10
_MAX_PROGRAM_HEADERS: Final = 65536
_MAX_DYNAMIC_BYTES: Final = 1 << 20
# node's own table is about 5 MB (every V8 and node symbol it exports for addons).
MAX_DYNAMIC_STRINGS: Final = 64 << 20
# What a program that runs an interpreter names in its dynamic string table, as a whole
# name: the entry point each interpreter's main() calls (node::Start(int, char**),
# Py_BytesMain, Py_Main), and what an embedding calls instead (any function of the node
# namespace, mangled _ZN4node...; CPython's initialisation in every form, a new
# interpreter, Py_RunMain, Py_FrozenMain, and its PyRun_ functions).
_EMBEDDING: Final = re.compile(
    rb"(?:\A|\0)(?:(?P<node>_ZN4node[0-9][^\0]*)|(?P<python>Py_(?:BytesMain|Main|RunMain|FrozenMain"
    rb"|Initialize[A-Za-z]*|NewInterpreter[A-Za-z]*)|_Py_Initialize[A-Za-z]*|PyRun_[A-Za-z]+))\0"
)

Read = Callable[[int, int], bytes]


class NotTold(Exception):
    """The program's dynamic section cannot be read to tell (``str``: why)."""


def interpreter_of(fd: int) -> Interpreter | None:
    """The interpreter the open native program ``fd`` is, by its dynamic symbols (None: none
    of those floorguard knows, or no dynamic section). Raises NotTold when its dynamic
    string table is past the end of the file or larger than floorguard reads."""
    return interpreter_in(lambda size, offset: os.pread(fd, size, offset))


def interpreter_in(read: Read) -> Interpreter | None:
    """:func:`interpreter_of` for the ELF file ``read(size, offset)`` returns bytes of."""
    strings = _dynamic_strings(read)
    if strings is None:
        return None
    # Every name in the table stands between two NULs, or starts it.
    # (node's own table names thousands of node:: functions: the first found tells it.)
    found = _EMBEDDING.search(strings)
    if found is None:
        return None
    return "node" if found.group("node") is not None else "python"


def _dynamic_strings(read: Read) -> bytes | None:
    """The dynamic string table (DT_STRTAB, DT_STRSZ) of the ELF file, None without one."""
    head = read(64, 0)
    if len(head) < 52 or not head.startswith(_ELF_MAGIC) or head[4] not in (1, 2):
        return None
    wide = head[4] == 2
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"

    def number(data: bytes, at: int, size: int) -> int:
        return int.from_bytes(data[at : at + size], order)

    word = 8 if wide else 4
    phoff = number(head, 32, 8) if wide else number(head, 28, 4)
    phentsize = number(head, 54, 2) if wide else number(head, 42, 2)
    phnum = number(head, 56, 2) if wide else number(head, 44, 2)
    if phentsize != (56 if wide else 32) or phentsize * phnum > _MAX_PROGRAM_HEADERS:
        return None
    table = read(phentsize * phnum, phoff)
    loads: list[tuple[int, int, int]] = []  # (vaddr, filesz, offset)
    dynamic: tuple[int, int] | None = None  # (offset, filesz)
    for at in range(0, len(table) - phentsize + 1, phentsize):
        kind = number(table, at, 4)
        if wide:
            offset, vaddr, filesz = (number(table, at + n, 8) for n in (8, 16, 32))
        else:
            offset, vaddr, filesz = (number(table, at + n, 4) for n in (4, 8, 16))
        if kind == _PT_LOAD:
            loads.append((vaddr, filesz, offset))
        elif kind == _PT_DYNAMIC:
            dynamic = (offset, filesz)
    if dynamic is None:
        return None
    entries = read(min(dynamic[1], _MAX_DYNAMIC_BYTES), dynamic[0])
    strtab = strsz = None
    for at in range(0, len(entries) - 2 * word + 1, 2 * word):
        tag, value = number(entries, at, word), number(entries, at + word, word)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = value
        elif tag == _DT_STRSZ:
            strsz = value
    if strtab is None:
        return None
    # The dynamic loader reads a symbol's name wherever the symbol points in the table, and
    # never looks at DT_STRSZ (set to 0, or left out, the program runs the same): the table
    # read is everything its segment holds from DT_STRTAB on, however large it says it is.
    stated = strsz or 0
    if stated > MAX_DYNAMIC_STRINGS:
        raise NotTold(f"its dynamic string table ({stated} bytes) is larger than floorguard reads")
    # DT_STRTAB is an address: the loaded segment that holds it says where it is in the file.
    for vaddr, filesz, offset in loads:
        if vaddr <= strtab and strtab + stated <= vaddr + filesz:
            size = vaddr + filesz - strtab
            if size > MAX_DYNAMIC_STRINGS:
                raise NotTold(
                    f"the segment of its dynamic string table ({size} bytes from the table's "
                    "start) is larger than floorguard reads"
                )
            strings = read(size, offset + strtab - vaddr)
            if len(strings) == size:
                return strings
    raise NotTold("its dynamic string table is not in the file")
