"""Finding the floor-map block between its markers and splicing a new one in.

Only the lines strictly between ``# floor-map:begin`` and ``# floor-map:end`` are ever
replaced; every other byte of the module (line endings, a missing final newline, a BOM,
text in any script) is kept exactly as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from floorctl.errors import ModuleError
from floorguard._base.files import MAX_MAP_BYTES, read_regular
from floorguard.errors import UnreadableFileError

BEGIN = "# floor-map:begin"
END = "# floor-map:end"

# Lines end at "\n" only: Python's own tokenizer does not break lines at form feeds or
# U+2028, so neither may we, or a marker could be "seen" where Python sees none.
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


@dataclass(frozen=True)
class SplitModule:
    """A module cut at its markers: ``before + begin_line + block + end_line + after``.

    ``begin_line`` and ``end_line`` keep their own line endings; ``block_line`` is the
    1-based line number of the block's first line in the module (for error messages).
    """

    before: str
    begin_line: str
    block: str
    end_line: str
    after: str
    block_line: int

    @property
    def newline(self) -> str:
        """The line ending the module uses at its begin marker (``\\r\\n`` or ``\\n``)."""
        return "\r\n" if self.begin_line.endswith("\r\n") else "\n"

    def text(self) -> str:
        """The module text, exactly as it was split."""
        return self.before + self.begin_line + self.block + self.end_line + self.after


def split_lines(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` (each line keeps its ending); ``"".join`` restores it."""
    return _LINE.findall(text)


def _is_marker(line: str, marker: str) -> bool:
    return line.strip() == marker


def split_module(text: str, source: str) -> SplitModule:
    """Cut ``text`` at its one begin and one end marker line.

    Raises ModuleError, naming ``source`` and the line numbers, when a marker is missing
    or duplicated, or when the end marker comes before the begin marker.
    """
    lines = split_lines(text)
    begins = [i for i, line in enumerate(lines) if _is_marker(line, BEGIN)]
    ends = [i for i, line in enumerate(lines) if _is_marker(line, END)]

    def numbers(indexes: list[int]) -> str:
        return ", ".join(str(i + 1) for i in indexes)

    if len(begins) > 1:
        raise ModuleError(
            f"{source}: marker {BEGIN!r} appears more than once (lines {numbers(begins)})"
        )
    if len(ends) > 1:
        raise ModuleError(
            f"{source}: marker {END!r} appears more than once (lines {numbers(ends)})"
        )
    if not begins and not ends:
        raise ModuleError(f"{source}: no floor-map markers: add the lines {BEGIN!r} and {END!r}")
    if not begins:
        raise ModuleError(
            f"{source}: marker {END!r} at line {ends[0] + 1} has no {BEGIN!r} before it"
        )
    if not ends:
        raise ModuleError(
            f"{source}: marker {BEGIN!r} at line {begins[0] + 1} has no {END!r} after it"
        )
    b, e = begins[0], ends[0]
    if e < b:
        raise ModuleError(
            f"{source}: marker {END!r} (line {e + 1}) comes before {BEGIN!r} (line {b + 1})"
        )
    return SplitModule(
        before="".join(lines[:b]),
        begin_line=lines[b],
        block="".join(lines[b + 1 : e]),
        end_line=lines[e],
        after="".join(lines[e + 1 :]),
        block_line=b + 2,
    )


def splice(split: SplitModule, new_block: str) -> str:
    """The module with its block replaced by ``new_block``; nothing else changes.

    ``new_block`` is written with ``\\n`` line endings and converted to the module's own
    (a CRLF module stays CRLF). A non-empty block gets a final newline so that the end
    marker stays a line of its own. Raises ModuleError if ``new_block`` holds a marker line
    or a carriage return (either would change where the block ends).
    """
    if "\r" in new_block:
        raise ModuleError("the new floor-map block contains a carriage return")
    if BEGIN in new_block or END in new_block:  # else no line can be a marker
        for number, line in enumerate(split_lines(new_block), start=1):
            if _is_marker(line, BEGIN) or _is_marker(line, END):
                raise ModuleError(f"the new floor-map block contains a marker line (line {number})")
    if new_block and not new_block.endswith("\n"):
        new_block += "\n"
    if split.newline != "\n":
        new_block = new_block.replace("\n", split.newline)
    # One join: one copy of a large module, not one per piece.
    return "".join((split.before, split.begin_line, new_block, split.end_line, split.after))


def missing_module(path: Path) -> ModuleError:
    """The error for a module that does not exist: ``floorctl init`` starts one."""
    return ModuleError(
        f"{path}: floor-map module does not exist; create it with floorctl init --module {path}"
    )


def read_module_text(path: Path) -> str:
    """The module's text, decoded as strict UTF-8 with line endings untouched.

    Raises ModuleError when the file cannot be read or is not valid UTF-8.
    """
    try:
        data = read_regular(path, max_bytes=MAX_MAP_BYTES, what="floor-map module")
    except UnreadableFileError as exc:
        if exc.missing:
            raise missing_module(path) from None
        raise ModuleError(str(exc)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModuleError(
            f"{path}: floor-map module is not valid UTF-8 (byte offset {exc.start})"
        ) from None
