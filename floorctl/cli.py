"""floorctl's command line: a thin layer over the library.

Every error the library raises on purpose is mapped to an exit status here and nowhere else:
0 success, 1 a check failed or input was rejected, 2 usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from floorctl.commands import canary as canary_commands
from floorctl.commands import chain as chain_commands
from floorctl.commands import doctor, import_osv, keygen, refresh, validate, verify_receipt
from floorctl.commands import fetch as fetch_command
from floorctl.commands import publish as publish_command
from floorctl.commands import sign as sign_command
from floorctl.commands import trust as trust_command
from floorctl.commands import verify as verify_commands
from floorctl.errors import FeedError, FloorctlError
from floorguard._text import one_line
from floorguard.errors import FloorguardError, InvalidInput

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="floorctl", prog_name="floorctl")
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


cli.add_command(validate.command)
cli.add_command(refresh.command)
cli.add_command(keygen.command)
cli.add_command(doctor.command)
cli.add_command(fetch_command.command)
cli.add_command(sign_command.command)
cli.add_command(publish_command.command)
cli.add_command(trust_command.group)
cli.add_command(chain_commands.chain)
verify_commands.verify.add_command(verify_receipt.command)
cli.add_command(verify_commands.verify)
cli.add_command(canary_commands.canary)
cli.add_command(import_osv.group)
