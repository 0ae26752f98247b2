"""Option types that read a value as strictly as ``python -m floorguard`` reads it: a whole
number is ASCII digits, a path is not empty, and a folder option names a folder (click's
own types take ``int()``'s spellings, ``''`` for the working directory, and a FIFO or a
device for a folder)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from floorguard._base._text import whole_number


class WholeNumber(click.IntRange):
    """click.IntRange over ASCII digits only."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                value = whole_number(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        return super().convert(value, param, ctx)


class GivenPath(click.Path):
    """click.Path that takes no empty value: ``''`` names no file, yet the OS calls behind
    click's checks and the commands read it as the working directory (``keygen --out ''``
    wrote its keys there)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str | bytes) and not value:
            self.fail("an empty path names no file", param, ctx)
        return super().convert(value, param, ctx)


class GivenSource(click.types.StringParamType):
    """A feed's path or URL, as text: not empty (``''`` would be read as the working
    directory), as ``[tool.floorctl] feeds`` refuses one."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = super().convert(value, param, ctx)
        if not text:
            self.fail("an empty value names no feed", param, ctx)
        return text


class ExistingFolder(GivenPath):
    """An existing folder (followed through links), as a path."""

    def __init__(self) -> None:
        super().__init__(exists=True, file_okay=False, dir_okay=True, path_type=None)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if not os.path.isdir(path):
            self.fail(f"directory {os.fsdecode(path)!r} is not a folder", param, ctx)
        return Path(os.fsdecode(path))
