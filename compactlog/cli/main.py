"""``compactlog``: Kafka's log tools and log cleaner in one command.

Global options come first: ``compactlog --data-dir DIR [--override K=V]... COMMAND ...``.
Broker-level settings (Kafka names) are read from ``DIR/server.properties`` and ``--override``;
a name that is not a setting is warned about (as Kafka's broker logs it) and ignored.

Every error ends in one line on stderr and a non-zero exit: ``error: <message>`` (exit 1) for
compactlog's own errors and for the operating system's (a full disk, a read-only mount, a name too
long: ``error: <path>: <reason>``); a bug in compactlog is ``error: internal error ...`` naming the
exception and where it happened (exit 70, EX_SOFTWARE). ``COMPACTLOG_DEBUG=1`` adds the traceback.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

from ..errors import CompactlogError, CorruptRecordError
from ..storage.config import parse_assignments, read_properties, setting_warnings
from .common import CliContext

EXIT_ERROR = 1
EXIT_INTERNAL = 70      # sysexits.h EX_SOFTWARE: a bug, to be reported

_HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings=_HELP,
                  help="Kafka's log storage, log compaction and broker: topics, produce, consume, serve, "
                       "dump-log, clean, verify.")
topics_app = typer.Typer(no_args_is_help=True, context_settings=_HELP,
                         help="Create, list, describe, alter and delete topics.")
cleaner_app = typer.Typer(no_args_is_help=True, context_settings=_HELP,
                          help="The log cleaner: status and a long-running cleaner.")
app.add_typer(topics_app, name="topics")
app.add_typer(cleaner_app, name="cleaner")


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__
        typer.echo(f"compactlog {__version__}")
        raise typer.Exit(0)


@app.callback()
def _global(ctx: typer.Context,
            data_dir: str = typer.Option(None, "--data-dir", envvar="COMPACTLOG_DATA_DIR",
                                         help="The data directory (a Kafka log dir)."),
            override: list[str] = typer.Option(None, "--override",
                                               help="A broker setting K=V (Kafka's name), repeatable."),
            version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                         help="Print compactlog's version and exit."),
            verbose: bool = typer.Option(False, "--verbose", "-v",
                                         help="Show what runs underneath (the Spark JVM's log on stderr).")):
    if verbose:
        os.environ["COMPACTLOG_VERBOSE"] = "1"
    ctx.obj = CliContext(os.path.abspath(data_dir) if data_dir else None,
                         parse_assignments(override, "--override"), _command_words(ctx))
    for line in _setting_warnings(ctx.obj):
        typer.echo(f"warning: {line}", err=True)


def _setting_warnings(c: CliContext) -> list[str]:
    """Names in --override and server.properties that are not settings compactlog uses."""
    lines = setting_warnings(c.overrides, "--override", explicit=True)
    if c.data_dir:
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
    if words and words[0] in ("topics", "cleaner") and len(rest) > 1 and not rest[1].startswith("-"):
        words.append(rest[1])
    return words


def _register() -> None:
    # each module adds its commands to ``app`` / ``topics_app`` / ``cleaner_app``
    from . import clean, consume, dump_log, produce, snapshot, tools, topics, verify  # noqa: F401
    from . import serve  # noqa: F401
    from . import consumer_groups  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    from .common import OPENED, report_data_events
    OPENED.clear()
    code = _run_command(argv)
    return report_data_events(code, json_output="--json" in (argv if argv is not None else sys.argv[1:]))


def _run_command(argv: list[str] | None) -> int:
    _register()
    try:
        app(args=argv, prog_name="compactlog", standalone_mode=True)
    except CompactlogError as e:
        _debug_traceback()
        hint = ""
        if isinstance(e, CorruptRecordError) and e.file:
            hint = ("; records before it were read; `compactlog verify --repair` sets the corrupt batch "
                    "aside (kept in *.quarantined) so that every valid record after it can be read")
        typer.echo(f"error: {e}{hint}", err=True)
        return EXIT_ERROR
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BrokenPipeError as e:
        if _stdout_closed():
            return 0        # the reader of stdout went away (``| head``): as cat, not an error
        _debug_traceback()
        typer.echo(f"error: {_os_error_text(e)}", err=True)
        return EXIT_ERROR
    except OSError as e:
        _debug_traceback()
        typer.echo(f"error: {_os_error_text(e)}", err=True)
        return EXIT_ERROR
    except MemoryError:
        _debug_traceback()
        typer.echo("error: out of memory", err=True)
        return EXIT_ERROR
    except Exception as e:          # a bug: one line that names it, the traceback on demand
        _debug_traceback()
        typer.echo(f"error: internal error: {type(e).__name__}: {e} (at {_where(e)}); please report it "
                   f"with the traceback that COMPACTLOG_DEBUG=1 prints", err=True)
        return EXIT_INTERNAL
    return 0


def _debug_traceback() -> None:
    if os.environ.get("COMPACTLOG_DEBUG", "") not in ("", "0"):
        traceback.print_exc()


def _stdout_closed() -> bool:
    try:
        sys.stdout.flush()
        return False
    except BrokenPipeError:
        # later flushes (at exit) must not fail again on the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return True
    except (OSError, ValueError):
        return False


def _os_error_text(e: OSError) -> str:
    """``<path>: <reason>``; the path from the error, else from where it was raised."""
    reason = e.strerror or str(e)
    if e.filename is not None:
        where = os.fsdecode(e.filename)
        if e.filename2 is not None:
            where += f" -> {os.fsdecode(e.filename2)}"
        return f"{where}: {reason}"
    path = _path_from_traceback(e.__traceback__)
    return f"{path}: {reason}" if path else reason


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PATH_NAMES = ("path", "tmp", "file_path", "filename", "dst", "dest")


def _path_from_traceback(tb) -> str | None:
    # an OSError from a write on an open file (os.write, f.write) carries no file name: the
    # innermost compactlog frame working on a path names it
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        if not frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            continue
        for name in _PATH_NAMES:
            value = frame.f_locals.get(name)
            if isinstance(value, str) and os.sep in value:
                return value
        value = getattr(frame.f_locals.get("self"), "path", None)
        if isinstance(value, str) and os.sep in value:
            return value
    return None


def _where(e: BaseException) -> str:
    """``file.py:line in function`` of the innermost compactlog frame (else the innermost frame)."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return "unknown place"
    ours = [f for f in frames if f.filename.startswith(_PACKAGE_DIR)]
    f = (ours or frames)[-1]
    name = os.path.relpath(f.filename, os.path.dirname(_PACKAGE_DIR)) if ours else f.filename
    return f"{name}:{f.lineno} in {f.name}"


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
