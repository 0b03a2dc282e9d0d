"""``compactlog``: Kafka's log tools and log cleaner in one command.

Global options come first: ``compactlog --data-dir DIR [--override K=V]... COMMAND ...``.
Broker-level settings (Kafka names) are read from ``DIR/server.properties`` and ``--override``.
"""

from __future__ import annotations

import os
import sys

import typer

from ..errors import CompactlogError
from ..storage.config import parse_assignments
from .common import CliContext

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Kafka log storage and log compaction: topics, produce, consume, dump-log, clean.")
topics_app = typer.Typer(no_args_is_help=True, help="Create, list, describe, alter and delete topics.")
cleaner_app = typer.Typer(no_args_is_help=True, help="The log cleaner: status and a long-running cleaner.")
app.add_typer(topics_app, name="topics")
app.add_typer(cleaner_app, name="cleaner")


@app.callback()
def _global(ctx: typer.Context,
            data_dir: str = typer.Option(None, "--data-dir", envvar="COMPACTLOG_DATA_DIR",
                                         help="The data directory (a Kafka log dir)."),
            override: list[str] = typer.Option(None, "--override",
                                               help="A broker setting K=V (Kafka's name), repeatable.")):
    ctx.obj = CliContext(os.path.abspath(data_dir) if data_dir else None,
                         parse_assignments(override, "--override"), _command_words(ctx))


def _command_words(ctx: typer.Context) -> list[str]:
    """``["topics", "create"]``: the subcommand being run (no option values, which may be paths)."""
    words = [ctx.invoked_subcommand] if ctx.invoked_subcommand else []
    rest = list(getattr(ctx, "protected_args", [])) + list(ctx.args)
    if words and words[0] in ("topics", "cleaner") and len(rest) > 1 and not rest[1].startswith("-"):
        words.append(rest[1])
    return words


def _register() -> None:
    # each module adds its commands to ``app`` / ``topics_app`` / ``cleaner_app``
    from . import clean, consume, dump_log, produce, snapshot, topics, verify  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    _register()
    try:
        app(args=argv, prog_name="compactlog", standalone_mode=True)
    except CompactlogError as e:
        typer.echo(f"error: {e}", err=True)
        return 1
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
