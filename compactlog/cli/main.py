"""``compactlog``: Kafka's log tools and log cleaner in one command.

Global options: ``compactlog --data-dir DIR [--override K=V]... COMMAND ...``; they may also follow
the command (``compactlog consume --data-dir DIR ...``, see ``argv.py``).
Broker-level settings (Kafka names) are read from ``DIR/server.properties`` and ``--override``;
a name that is not a setting is warned about (as Kafka's broker logs it) and ignored.

Every error ends in one line on stderr and a non-zero exit: ``error: <message>`` (exit 1) for
compactlog's own errors and for the operating system's (a full disk, a read-only mount, a name too
long: ``error: <path>: <reason>``); a bug in compactlog is ``error: internal error ...`` naming the
exception and where it happened (exit 70, EX_SOFTWARE). ``COMPACTLOG_DEBUG=1`` adds the traceback.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

import typer

from ..errors import CompactlogError, CorruptRecordError, DataDirLockedError
from .apps import app, cleaner_app, topics_app, transactions_app  # noqa: F401  (the command tree; re-exported)

EXIT_ERROR = 1
EXIT_INTERNAL = 70      # sysexits.h EX_SOFTWARE: a bug, to be reported

# the module (of this package) that adds each top-level command to ``app``: a command line names
# one, and only that module is imported (the others' imports cost ~0.1 CPU-s per process; the test
# suite starts thousands of commands); main_test checks this table against the modules
COMMAND_MODULES = {
    "acls": "acls", "clean": "clean", "cleaner": "clean", "explain": "clean", "configs": "configs",
    "consume": "consume", "consumer-groups": "consumer_groups", "delete-records": "tools",
    "dump-log": "dump_log", "get-offsets": "tools", "log-dirs": "tools", "metadata": "metadata",
    "produce": "produce", "serve": "serve", "snapshot": "snapshot", "topics": "topics",
    "transactions": "transactions", "users": "users", "verify": "verify",
}
# every module, in the order the help lists their commands
_ALL_MODULES = ("clean", "configs", "consume", "dump_log", "metadata", "produce", "snapshot", "tools", "topics",
                "verify", "serve", "users", "consumer_groups", "transactions", "acls")
# the root's own options (apps.py): name -> whether it takes a value
_ROOT_OPTIONS = {"--data-dir": True, "--override": True, "--version": False, "--verbose": False, "-v": False,
                 "--help": False, "-h": False, "--install-completion": False, "--show-completion": False}


def _register(args: list[str] | None = None) -> None:
    """Each command module adds its commands to ``app`` / ``topics_app`` / ``cleaner_app`` as it is
    imported: the one ``args`` names, or every one (no command, an unknown word, shell completion)."""
    import importlib
    word = _command_word(args) if args is not None and "_COMPACTLOG_COMPLETE" not in os.environ else None
    modules = [COMMAND_MODULES[word]] if word in COMMAND_MODULES else _ALL_MODULES
    for module in modules:
        importlib.import_module(f"{__package__}.{module}")


def _command_word(args: list[str]) -> str | None:
    """The subcommand of a command line: its first word after the root's options."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--" or not a.startswith("-") or a == "-":
            return a if a != "--" else None
        name, eq, _ = a.partition("=")
        if name not in _ROOT_OPTIONS:
            return None         # an option click will refuse: with every command, as before
        i += 2 if _ROOT_OPTIONS[name] and not eq else 1
    return None


def main(argv: list[str] | None = None) -> int:
    from .common import OPENED, report_data_events
    OPENED.clear()
    code = _run_command(argv)
    return report_data_events(code, json_output="--json" in (argv if argv is not None else sys.argv[1:]))


def _run_command(argv: list[str] | None) -> int:
    _register(list(sys.argv[1:] if argv is None else argv))
    import typer.main
    # click's command tree, built once: ``app(...)`` would build it again (typer builds it on every
    # call), a third of a small command's start. Calling it directly skips only typer's pretty
    # excepthook, which an exception never reaches here (every one is caught below)
    command = typer.main.get_command(app)
    args = _arguments(argv, command)
    try:
        command(args=args, prog_name="compactlog", standalone_mode=True)
    except CompactlogError as e:
        _debug_traceback()
        hint = ""
        # the repair rewrites local files: no hint for an object (a bucket's, or a remote tier's
        # segment), where `verify --repair` refuses ("a bucket is verified read-only")
        if isinstance(e, CorruptRecordError) and e.file and os.path.exists(str(e.file)):
            hint = ("; records before it were read; `compactlog verify --repair` sets the corrupt batch "
                    "aside (kept in *.quarantined) so that every valid record after it can be read")
        elif isinstance(e, DataDirLockedError) and e.bootstrap:
            hint = _through_broker_hint(args, e.bootstrap)
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


def _through_broker_hint(args: list[str], bootstrap: str) -> str:
    """The refused command as it runs through the broker that holds the data dir, if it can."""
    import typer.main
    from .argv import through_broker
    line = through_broker(typer.main.get_command(app), args, bootstrap)
    return f"; this command through it: {line}" if line else ""


def _arguments(argv: list[str] | None, command) -> list[str]:
    """The command line, global options given after the subcommand moved before it (cli.argv)."""
    from .argv import hoist_global_options
    args = list(sys.argv[1:] if argv is None else argv)
    return hoist_global_options(command, args)


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
    """``<path>: <reason>``; the path from the error, else from where it was raised. Too many open
    files says which limit and how to raise it (``ulimit -n``)."""
    reason = e.strerror or str(e)
    if e.errno in (errno.EMFILE, errno.ENFILE):
        from ..storage.file_handles import too_many_open_files
        return str(too_many_open_files(os.fsdecode(e.filename) if e.filename is not None else
                                       _path_from_traceback(e.__traceback__) or "compactlog", e))
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
