"""Output helpers shared by the commands: ``--format`` (with ``--json`` as its alias), one
JSON document on stdout for json, and notices on stderr, each one line whatever the paths
and names it quotes hold.

The format chosen is also remembered for ``floorctl.cli.main``: with json, an error that
ends the command still prints exactly one JSON document (the error's, unless the command
already printed its own).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from floorguard._base._text import one_line, terminal_json

F = TypeVar("F", bound=Callable[..., Any])


class OutputState:
    """The format of this invocation, and whether a JSON document was printed already."""

    format: str | None = None
    emitted: bool = False

    @classmethod
    def reset(cls) -> None:
        cls.format, cls.emitted = None, False


def emit_json(document: Any) -> None:
    """Print one JSON document (sorted keys, UTF-8) on stdout."""
    click.echo(terminal_json(document))
    OutputState.emitted = True


def emit_result(result: Any, as_json: bool) -> None:
    """A verifier's result: its JSON document with --json, else its text as it is."""
    if as_json:
        emit_json(result.document())
    else:
        click.echo(result.text(), nl=False)


def emit_rendered(text: str) -> None:
    """Print a rendering (SARIF or Markdown from floorguard._commands.report_formats) as it is."""
    click.echo(text, nl=False)
    OutputState.emitted = True


def format_option(*choices: str, param: str = "output_format") -> Callable[[F], F]:
    """``--format CHOICE`` (default text) and ``--json`` (= ``--format json``) on a command,
    passed to it as ``param``: the format's name, or for ``param="as_json"`` a bool. A choice
    outside ``choices`` is a usage error (exit 2) naming the choices."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            chosen, alias = kwargs.pop("_format"), kwargs.pop("_json")
            if alias and chosen not in (None, "json"):
                raise click.UsageError(f"--json conflicts with --format {chosen}")
            output_format = "json" if alias else (chosen or "text")
            OutputState.format = output_format
            kwargs[param] = output_format == "json" if param == "as_json" else output_format
            return command(*args, **kwargs)

        wrapper = click.option(
            "--json",
            "_json",
            is_flag=True,
            help="Print one JSON document on stdout (the same as --format json).",
        )(wrapper)
        wrapper = click.option(
            "--format",
            "_format",
            type=click.Choice(choices),
            default=None,
            help="Output format (default text).",
        )(wrapper)
        return wrapper  # type: ignore[return-value]

    return decorate


# --json and --format text|json, for the commands that print text or one JSON document.
json_option = format_option("text", "json", param="as_json")


def report(line: str) -> None:
    """One line of a command's report on stdout, control characters escaped as in notice:
    a file name the caller gave cannot forge a line, nor reach a terminal as an escape."""
    click.echo(one_line(line))


def notice(message: str) -> None:
    """One line on stderr (control characters escaped: a file name cannot add a line)."""
    click.echo(one_line(message), err=True)
