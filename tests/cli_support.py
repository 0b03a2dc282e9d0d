"""``compactlog ARGS`` run in the test's own process, answered as ``subprocess.run(...,
capture_output=True)`` answers: for the tests where the process boundary is not what they test.

A command in a fresh process costs 0.45-0.8 CPU-s (Python, numpy and numba imported again); the
suite started ~630 of them. In-process, the imports are paid once per worker. What a command may
leave behind in the process is put back after it: stdin/stdout/stderr, the environment
(``--verbose`` sets ``COMPACTLOG_VERBOSE``), the working directory, the signal handlers
(``cleaner run`` sets SIGTERM's) and the loggers' handlers and levels.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# typer builds click's command tree from the functions' signatures on every call of the app, twice
# a command line (main.py's option hoisting, then the call): in one process that is once per
# command, but in this process every command module is registered after a few commands, and the
# whole tree was ~40% of an in-process command's CPU (test_read_only's 1,200 commands). The tree
# is built once per shape of the app (the commands registered so far) and reused, as click's own
# CliRunner reuses a command
_COMMANDS: dict = {}


def _shape(t) -> tuple:
    return (id(t), len(t.registered_commands), bool(t.registered_callback),
            tuple(_shape(g.typer_instance) for g in t.registered_groups))


def _memoized(build):
    def get_command(typer_instance):
        key = _shape(typer_instance)
        command = _COMMANDS.get(key)
        if command is None:
            command = _COMMANDS[key] = build(typer_instance)
        return command
    get_command.memoized = True
    return get_command


def call_main(args: list[str]) -> int:
    """``compactlog.cli.main.main(args)`` with click's command tree built once per shape."""
    import typer.main
    from compactlog.cli.main import main
    build = typer.main.get_command
    if getattr(build, "memoized", False):       # a call inside a call
        return main(args)
    saved_hook = sys.excepthook                 # typer's app sets its own
    typer.main.get_command = _memoized(build)
    try:
        return main(args)
    finally:
        typer.main.get_command = build
        sys.excepthook = saved_hook


def run_in_process(args, *, stdin: bytes | str | None = None, text: bool = False, env: dict | None = None,
                   cwd: str | None = None) -> subprocess.CompletedProcess:
    """``main(args)`` with stdin from ``stdin`` and stdout/stderr captured (bytes, or str with
    ``text``); ``env`` replaces the environment for the command's duration (as subprocess's does)."""
    args = [str(a) for a in args]
    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    out, err = io.BytesIO(), io.BytesIO()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    saved_logging = [(lg, list(lg.handlers), lg.level) for lg in loggers]
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    # write_through: text and bytes written to .buffer land in the order they were written
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        code = call_main(args)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        if os.environ != saved_env:
            os.environ.clear()
            os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for s, handler in saved_signals.items():
            if signal.getsignal(s) is not handler and handler is not None:
                signal.signal(s, handler)
        for lg, handlers, level in saved_logging:
            lg.handlers[:] = handlers
            lg.setLevel(level)
    if text:
        stdout, stderr = stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")
    return subprocess.CompletedProcess(["compactlog", *args], code, stdout, stderr)
