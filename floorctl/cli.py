"""floorctl's command line: a thin layer over the library.

Every error the library raises on purpose is mapped to an exit status here and nowhere else:
0 success, 1 a check failed or input was rejected, 2 usage error.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from floorctl.errors import FeedError, FloorctlError
from floorguard._text import one_line
from floorguard.errors import FloorguardError, InvalidInput

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


# Each command's module, loaded only when that command runs: a command imports only what it
# needs (verify chain never loads jinja2, httpx or the OSV importer), which keeps every call,
# and so every hook or CI step that runs floorctl, short.
_COMMANDS = {
    "validate": ("floorctl.commands.validate", "command"),
    "refresh": ("floorctl.commands.refresh", "command"),
    "import": ("floorctl.commands.import_osv", "group"),
    "keygen": ("floorctl.commands.keygen", "command"),
    "doctor": ("floorctl.commands.doctor", "command"),
    "fetch": ("floorctl.commands.fetch", "command"),
    "sign": ("floorctl.commands.sign", "command"),
    "publish": ("floorctl.commands.publish", "command"),
    "trust": ("floorctl.commands.trust", "group"),
    "chain": ("floorctl.commands.chain", "chain"),
    "verify": ("floorctl.commands.verify", "verify"),
    "canary": ("floorctl.commands.canary", "canary"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attribute = _COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``floorctl X (floorguard Y)``: the runtime floorctl builds maps for is part of the answer."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import version  # noqa: PLC0415  (only for -V)

    from floorguard._version import __version__ as floorguard_version  # noqa: PLC0415

    click.echo(f"floorctl {version('floorctl')} (floorguard {floorguard_version})")
    ctx.exit(EXIT_OK)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Print floorctl's version and the floorguard version it runs with, and exit.",
)
def cli() -> None:
    """Maintain, sign and verify adapter security floors.

    A floor is the minimum safe version of an agent CLI (aider, claude, codex, ...).
    floorctl turns advisory feeds into the floor map that floorguard enforces at spawn
    time, and signs a receipt for every change so that it can be checked offline.
    """


def _report(error: Exception) -> None:
    if isinstance(error, FeedError) and len(error.problems) > 1:
        for file, path, message in error.problems:
            click.echo(one_line(f"floorctl: error: {file}: {path}: {message}"), err=True)
        return
    click.echo(one_line(f"floorctl: error: {error}"), err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script; never lets a traceback reach the user."""
    try:
        # Without standalone mode click returns ctx.exit()'s status instead of exiting.
        status = cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.Abort:
        click.echo("floorctl: aborted", err=True)
        sys.exit(EXIT_FAILED)
    except click.ClickException as usage:
        usage.show()
        sys.exit(EXIT_USAGE if isinstance(usage, click.UsageError) else EXIT_FAILED)
    except InvalidInput as error:
        _report(error)
        sys.exit(EXIT_USAGE)
    except (FloorctlError, FloorguardError) as error:
        _report(error)
        sys.exit(EXIT_FAILED)
    except OSError as error:
        # Files we were told to read or write: say which, never a traceback.
        where = f"{error.filename}: " if error.filename else ""
        click.echo(one_line(f"floorctl: error: {where}{error.strerror or error}"), err=True)
        sys.exit(EXIT_FAILED)
    sys.exit(status if isinstance(status, int) else EXIT_OK)
