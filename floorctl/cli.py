"""floorctl's command line: a thin layer over the library.

Every error the library raises on purpose is mapped to an exit status here and nowhere else:
0 success, 1 a check failed or input was rejected, 2 usage error.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from gettext import gettext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from floorctl.commands._output import OutputState, emit_json
from floorctl.commands._values import GivenPath
from floorctl.errors import ConfigError, FeedError, FloorctlError
from floorguard._base._text import one_line
from floorguard._commands._cli_io import requested_format, stdout_failed
from floorguard.errors import FloorguardError, InvalidInput

if TYPE_CHECKING:
    from floorctl.config import Config

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


# Each command's module, loaded only when that command runs: a command imports only what it
# needs (verify chain never loads jinja2, httpx or the OSV importer), which keeps every call,
# and so every hook or CI step that runs floorctl, short. Each command's one-line help is
# copied here so that `floorctl --help` lists the commands without importing any of them
# (a test checks each line equals the command's own short_help).
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "validate": ("floorctl.commands.validate", "command", "Check feeds and waivers documents."),
    "refresh": (
        "floorctl.commands.refresh",
        "command",
        "Regenerate the floor map from advisory feeds.",
    ),
    "init": (
        "floorctl.commands.init",
        "command",
        "Start a new floor-map module holding an empty map.",
    ),
    "import": ("floorctl.commands.import_osv", "group", "Turn OSV advisories into a feed."),
    "keygen": ("floorctl.commands.keygen", "command", "Create an Ed25519 signing key pair."),
    "doctor": (
        "floorctl.commands.doctor",
        "command",
        "Judge every tracked adapter on PATH by the map.",
    ),
    "fetch": ("floorctl.commands.fetch", "command", "Download a feed, verify it, then write it."),
    "sign": (
        "floorctl.commands.sign",
        "command",
        "Write FILE.dsse, a signature over FILE's bytes.",
    ),
    "publish": (
        "floorctl.commands.publish",
        "command",
        "Publish the floor map, signed, for hosts.",
    ),
    "build": (
        "floorctl.commands.build",
        "command",
        "Build the floorguard wheel, sdist and provenance.",
    ),
    "trust": ("floorctl.commands.trust", "group", "Manage the keys trusted to sign feeds."),
    "chain": (
        "floorctl.commands.chain",
        "chain",
        "Export chain slices; sign checkpoints; prove records.",
    ),
    "verify": (
        "floorctl.commands.verify",
        "verify",
        "Verify receipts and audit-chain slices offline.",
    ),
    "canary": (
        "floorctl.commands.canary",
        "canary",
        "Record canary runs; show last-green versions.",
    ),
    "witness": (
        "floorctl.commands.witness",
        "witness",
        "Cosign checkpoints as a witness of the log.",
    ),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attribute, _short_help = _COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own table, laid out from stand-ins that carry only the short help: the
        # top-level help then costs no command's import.
        stand_ins = [
            (name, click.Command(name, short_help=_COMMANDS[name][2]))
            for name in self.list_commands(ctx)
        ]
        limit = formatter.width - 6 - max(len(name) for name, _ in stand_ins)
        rows = [(name, command.get_short_help_str(limit)) for name, command in stand_ins]
        with formatter.section(gettext("Commands")):
            formatter.write_dl(rows)


# Which option of which command each [tool.floorctl] key gives a default for (click's
# parameter names). A flag on the command line overrides the configuration; a repeatable
# flag (--feed) replaces the configured list. Commands not named here never read it.
_CONFIG_OPTIONS: dict[str, dict[str, str]] = {
    "refresh": {
        "feeds": "sources",
        "module": "module",
        "template": "template",
        "trusted-keys": "trusted_keys",
        "waivers": "waivers_file",
        "signing-key": "signing_key",
    },
    "init": {"module": "module", "template": "template"},
    "fetch": {"trusted-keys": "trusted_keys"},
    "publish": {"module": "module", "signing-key": "signing_key"},
    "sign": {"signing-key": "signing_key"},
    "build": {"module": "module", "signing-key": "signing_key"},
    "chain checkpoint": {"signing-key": "signing_key"},
    "chain export": {"signing-key": "signing_key"},
}


def _default_map(config: Config, environ: Mapping[str, str]) -> dict[str, Any]:
    """click's default_map for every command that reads the configuration."""
    values = config.values()
    if environ.get("FLOORCTL_SIGNING_KEY"):
        # The variable, set for this run (a CI secret), wins over the file's signing-key.
        values.pop("signing-key", None)
    defaults: dict[str, Any] = {}
    for command, options in _CONFIG_OPTIONS.items():
        table = defaults
        *groups, name = command.split()
        for group in groups:
            table = table.setdefault(group, {})
        table[name] = {options[key]: value for key, value in values.items() if key in options}
    # validate without FILE checks the configured feed files and waivers document (URL
    # feeds are checked where they are fetched: fetch and refresh).
    files = [Path(feed) for feed in config.feeds or () if not feed.startswith(("https:", "http:"))]
    if config.waivers is not None:
        files.append(config.waivers)
    if files:
        defaults["validate"] = {"feeds": files}
    return defaults


@dataclass(frozen=True)
class Invocation:
    """What main() knew of the command line before click parsed it (click hands the group
    none of the subcommand's arguments)."""

    wants_help: bool

    @classmethod
    def of(cls, args: Sequence[str]) -> Invocation:
        before = args[: args.index("--")] if "--" in args else args
        return cls(wants_help=not {"-h", "--help"}.isdisjoint(before))


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``floorctl X (floorguard Y)``; floorctl.launch answers a lone -V without click."""
    if not value or ctx.resilient_parsing:
        return
    from floorctl import version_line  # noqa: PLC0415

    click.echo(version_line())
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
@click.option(
    "--config",
    "config_path",
    type=GivenPath(path_type=Path),
    metavar="PATH",
    help="Read [tool.floorctl] from PATH instead of the nearest pyproject.toml.",
)
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Maintain, sign and verify adapter security floors.

    A floor is the minimum safe version of an agent CLI (aider, claude, codex, ...).
    floorctl turns advisory feeds into the floor map that floorguard enforces at spawn
    time, and signs a receipt for every change so that it can be checked offline.

    Defaults for init, refresh, fetch, validate, publish, sign, build and chain come from
    [tool.floorctl] of the nearest pyproject.toml from the current folder upward (the
    nearest one, with or without that table), or of --config PATH; its paths are relative
    to that file's folder; flags override it.
    """
    # Only commands that use the configuration read it (a broken pyproject.toml does not
    # stop `floorctl doctor`); a file named with --config is always read and checked.
    if config_path is None and ctx.invoked_subcommand not in {
        command.split()[0] for command in _CONFIG_OPTIONS
    } | {"validate"}:
        return
    from floorctl import config  # noqa: PLC0415  (tomllib only for the commands that need it)

    try:
        loaded = config.load(config_path, Path.cwd())
    except ConfigError:
        # A broken configuration must not hide the help that explains it, nor break shell
        # completion: both go on without its defaults.
        if ctx.resilient_parsing or (isinstance(ctx.obj, Invocation) and ctx.obj.wants_help):
            return
        raise
    if loaded is not None:
        ctx.default_map = _default_map(loaded, os.environ)


def _report(error: Exception, status: int) -> None:
    """The error's line(s) on stderr; with json, also its one JSON document on stdout."""
    if isinstance(error, FeedError) and len(error.problems) > 1:
        for file, path, message in error.problems:
            click.echo(one_line(f"floorctl: error: {file}: {path}: {message}"), err=True)
    else:
        click.echo(one_line(f"floorctl: error: {error}"), err=True)
    _error_document(str(error), status)


def _error_document(message: str, status: int) -> None:
    # One document per run: a command that printed its own (doctor, verify chain) has said
    # what failed in it already. Its message is the stderr line's (escaped as it is there),
    # as python -m floorguard's.
    if OutputState.format == "json" and not OutputState.emitted:
        try:
            emit_json({"error": {"message": one_line(message), "exit_status": status}})
        except OSError:
            stdout_failed()  # the stderr line has said what failed


def _usage_message(usage: click.UsageError) -> str:
    """click's message on one line, naming the command whose --help explains it."""
    message = " ".join(usage.format_message().split()).rstrip(".")
    names, ctx = [], usage.ctx
    while ctx is not None:
        names.append(ctx.info_name if ctx.parent is not None else "floorctl")
        ctx = ctx.parent
    command = " ".join(reversed([n for n in names if n]))
    return f"{message} (see '{command or 'floorctl'} --help')"


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script; never lets a traceback reach the user."""
    args = list(argv) if argv is not None else sys.argv[1:]
    OutputState.reset()
    # Until the command's --format is processed (a usage error may come first), the format
    # is the one the command line names.
    OutputState.format = requested_format(args)
    try:
        # Without standalone mode click returns ctx.exit()'s status instead of exiting.
        status = cli.main(
            args=args, prog_name="floorctl", standalone_mode=False, obj=Invocation.of(args)
        )
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.Abort:
        click.echo("floorctl: aborted", err=True)
        _error_document("aborted", EXIT_FAILED)
        sys.exit(EXIT_FAILED)
    except click.exceptions.NoArgsIsHelpError as bare:
        bare.show()  # `floorctl` or a group alone: its help, as click shows it
        sys.exit(EXIT_USAGE)
    except click.UsageError as usage:
        message = _usage_message(usage)
        click.echo(one_line(f"floorctl: error: {message}"), err=True)
        _error_document(message, EXIT_USAGE)
        sys.exit(EXIT_USAGE)
    except click.ClickException as failed:
        _report(Exception(failed.format_message()), EXIT_FAILED)
        sys.exit(EXIT_FAILED)
    except (InvalidInput, ConfigError) as error:
        _report(error, EXIT_USAGE)
        sys.exit(EXIT_USAGE)
    except (FloorctlError, FloorguardError) as error:
        _report(error, EXIT_FAILED)
        sys.exit(EXIT_FAILED)
    except OSError as error:
        # Files we were told to read or write: say which, never a traceback.
        if error.filename:
            where = f"{error.filename}: "
        else:
            where = "standard output: " if stdout_failed() else ""
        _report(Exception(f"{where}{error.strerror or error}"), EXIT_FAILED)
        sys.exit(EXIT_FAILED)
    sys.exit(status if isinstance(status, int) else EXIT_OK)
