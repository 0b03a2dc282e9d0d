"""The ``compactlog`` command tree: the typer apps every command module adds itself to, and the
global options (``--data-dir``, ``--override``, ``--version``, ``--verbose``).

Apart from ``main.py`` so that a command module imports the app it joins without importing
``main``, which imports every command module to register it.
"""

from __future__ import annotations

import os

import typer

from ..errors import CompactlogError
from ..storage.config import parse_assignments, read_properties, setting_warnings
from . import plain_params
from .common import CliContext

plain_params.install()     # option values converted without pydantic (plain_params.py)

_HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings=_HELP,
                  help="Kafka's log storage, log compaction and broker: topics, produce, consume, configs, "
                       "serve, metadata, dump-log, clean, verify, transactions. Global options may also "
                       "follow the command.")
topics_app = typer.Typer(no_args_is_help=True, context_settings=_HELP,
                         help="Create, list, describe, alter and delete topics.")
cleaner_app = typer.Typer(no_args_is_help=True, context_settings=_HELP,
                          help="The log cleaner: status and a long-running cleaner.")
transactions_app = typer.Typer(no_args_is_help=True, context_settings=_HELP,
                               help="Transactions: list, describe, describe-producers, abort, find-hanging "
                                    "(kafka-transactions.sh).")
app.add_typer(topics_app, name="topics")
app.add_typer(cleaner_app, name="cleaner")
app.add_typer(transactions_app, name="transactions")


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__
        typer.echo(f"compactlog {__version__}")
        raise typer.Exit(0)


@app.callback()
def _global(ctx: typer.Context,
            data_dir: str = typer.Option(None, "--data-dir", envvar="COMPACTLOG_DATA_DIR",
                                         help="The data directory (a Kafka log dir); for verify, dump-log, "
                                              "consume, explain, snapshot and clean also a bucket holding "
                                              "one: s3://BUCKET/PREFIX or file:///DIR."),
            override: list[str] = typer.Option(None, "--override",
                                               help="A broker setting K=V (Kafka's name), repeatable."),
            version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                         help="Print compactlog's version and exit."),
            verbose: bool = typer.Option(False, "--verbose", "-v",
                                         help="Show what runs underneath (the Spark JVM's log on stderr).")):
    if verbose:
        os.environ["COMPACTLOG_VERBOSE"] = "1"
    # a bucket URL (s3://bucket/prefix, file:///dir: storage.remote.bucket) stays as given
    bucket = bool(data_dir) and data_dir.lower().startswith(("s3://", "file://"))
    ctx.obj = CliContext((data_dir if bucket else os.path.abspath(data_dir)) if data_dir else None,
                         parse_assignments(override, "--override"), _command_words(ctx))
    for line in _setting_warnings(ctx.obj):
        typer.echo(f"warning: {line}", err=True)


def _setting_warnings(c: CliContext) -> list[str]:
    """Names in --override and server.properties that are not settings compactlog uses."""
    from .. import settings  # noqa: F401 - every owner's settings registered before any is read
    lines = setting_warnings(c.overrides, "--override", explicit=True)
    if c.data_dir and "://" not in c.data_dir:
        from ..storage.datadir import SERVER_PROPERTIES
        path = os.path.join(c.data_dir, SERVER_PROPERTIES)
        try:
            props = read_properties(path)
        except (OSError, CompactlogError):
            props = {}      # unreadable: the command that loads it reports that
        lines += setting_warnings(set(props) - set(c.overrides), path, explicit=False)
    return lines


def _command_words(ctx: typer.Context) -> list[str]:
    """``["topics", "create"]``: the subcommand being run (no option values, which may be paths)."""
    words = [ctx.invoked_subcommand] if ctx.invoked_subcommand else []
    rest = list(getattr(ctx, "protected_args", [])) + list(ctx.args)
    if words and words[0] in ("topics", "cleaner", "transactions") and len(rest) > 1 and not rest[1].startswith("-"):
        words.append(rest[1])
    return words
