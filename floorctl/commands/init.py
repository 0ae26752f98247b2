"""``floorctl init``: start a host's own floor-map module, for refresh to fill."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from floorctl import new_module, render
from floorctl.commands._output import emit_json, json_option, report
from floorctl.commands._values import GivenPath


def _template(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    # A name that is neither built in nor a path is a mistake on the command line (exit 2),
    # named with the choices; a template file that fails is the file's (exit 1).
    if value in render.TEMPLATE_NAMES or render.is_template_path(value):
        return value
    raise click.BadParameter(
        f"unknown template {value!r}: use {' or '.join(render.TEMPLATE_NAMES)}, "
        "or a path to a .j2 file"
    )


@click.command("init", short_help="Start a new floor-map module holding an empty map.")
@click.option(
    "--module",
    type=GivenPath(path_type=Path, dir_okay=False),
    metavar="PATH",
    help="The module to create. Must not exist; missing parent folders are created.",
)
@click.option(
    "--template",
    default=render.FLOORGUARD,
    show_default=True,
    metavar="NAME|PATH",
    callback=_template,
    help="Block layout: floorguard, bernstein (Bernstein's AdapterAdvisory layout), or a "
    "template file, as for refresh.",
)
@json_option
def command(module: Path | None, template: str, as_json: bool) -> None:
    """Create a floor-map module for refresh to fill.

    The new module holds a docstring, the floor-map markers and, between them, the block
    of an empty map (no adapters, map version 0, the empty map's hash); nothing in it is
    code. floorguard reads it as a valid empty map (floorguard layout), and the first
    `floorctl refresh --write --module PATH` fills it. Refuses (exit 1) if anything exists
    at PATH, and leaves it as it is.

    --module and --template default to module and template in [tool.floorctl] of the
    nearest pyproject.toml from the current folder upward (or floorctl --config PATH).
    """
    if module is None:
        raise click.UsageError(
            "no module: pass --module PATH, or set module in [tool.floorctl] of the nearest "
            "pyproject.toml (or floorctl --config PATH)"
        )
    made = new_module.create(module, template)
    if as_json:
        emit_json(
            {
                "module": str(made.path),
                "template": made.template,
                "layout": made.layout,
                "floor_map_hash": made.floor_map_hash,
                "map_version": made.map_version,
                "written": True,
            }
        )
        return
    report(
        f"wrote {made.path}: an empty floor map ({made.layout} layout, map version "
        f"{made.map_version}, hash {made.floor_map_hash})"
    )
    module_arg = shlex.quote(str(made.path))
    report(f"fill it with: floorctl refresh --write --module {module_arg} --feed SRC")
