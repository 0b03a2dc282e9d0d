"""Shared CLI plumbing: the global options, opening the data dir, errors as one clear line."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import typer

from ..errors import CompactlogError, ConfigError
from ..storage.config import parse_assignments
from ..storage.events import EXIT_DATA_SET_ASIDE

if TYPE_CHECKING:
    from ..storage.datadir import DataDir


@dataclass
class CliContext:
    data_dir: str | None
    overrides: dict = field(default_factory=dict)
    command: list = field(default_factory=list)   # the subcommand's words, for the lock holder's note
    # log -> the segment source a clean or explain plans over (a bucket's shadow: cli/bucket_dir.py)
    segment_sources: object = None

    def require_data_dir(self) -> str:
        if not self.data_dir:
            raise ConfigError("--data-dir is required (or set COMPACTLOG_DATA_DIR)")
        return self.data_dir

    def require_local(self) -> str:
        """The data dir, refusing a bucket URL for a command that opens a directory."""
        path = self.require_data_dir()
        if "://" in path:
            raise ConfigError(f"{path}: this command needs a local data dir; a bucket is read by verify, dump-log, "
                              f"consume, explain and snapshot, and compacted by clean")
        return path

    def broker(self):
        from ..storage.datadir import load_broker_config
        path = self.require_local()
        if os.path.exists(path) and not os.path.isdir(path):
            raise CompactlogError(f"{path}: not a directory (--data-dir must name a directory)")
        return load_broker_config(path, self.overrides)

    def open(self, *, write: bool, create: bool = False, now_ms: int | None = None,
             session_configs: dict[str, str] | None = None) -> DataDir:
        """The data dir for one command: ``write`` takes the data-dir lock (a second writer is
        refused at once, naming the holder); otherwise it is opened read-only and nothing in it
        changes. ``session_configs``: topic configs for this command only (``clean --config``)."""
        from ..storage.datadir import DataDir
        path = self.require_local()
        if os.path.exists(path) and not os.path.isdir(path):
            raise CompactlogError(f"{path}: not a directory (--data-dir must name a directory)")
        if not os.path.isdir(path):
            if not create:
                raise CompactlogError(f"{path}: data directory does not exist")
            os.makedirs(path)
        clock = (lambda: now_ms) if now_ms is not None else (lambda: int(time.time() * 1000))
        command = _command_path(self.command)
        dd = DataDir(path, broker=self.broker(), clock=clock, writable=write, command=command,
                     session_configs=session_configs)
        OPENED.append(dd)
        return dd


def _command_path(words: list) -> str:
    """``compactlog topics create``: the command being run, for the lock holder's note."""
    try:
        from typer._click.globals import get_current_context   # typer >= 0.29 vendors click
    except ImportError:
        from click import get_current_context
    ctx = get_current_context(silent=True)
    if ctx is not None:
        return ctx.command_path
    return "compactlog " + " ".join(words) if words else "compactlog"   # not inside a command


# the data dirs this command opened: what recovery or retention did in them is reported at exit
OPENED: list = []          # of storage.datadir.DataDir


def report_data_events(code: int, *, json_output: bool) -> int:
    """Print every cut, quarantine and retention deletion of this command (stderr, or JSON lines
    on stdout with --json); data cut or quarantined turns a success into EXIT_DATA_SET_ASIDE."""
    events = [e for dd in OPENED for e in dd.data_events()]
    OPENED.clear()
    for e in events:
        if json_output:
            typer.echo(json.dumps(e.to_dict()))
        else:
            label = "warning" if e.sets_data_aside else "note"
            typer.echo(f"{label}: {e}", err=True)
    if code == 0 and any(e.sets_data_aside for e in events):
        return EXIT_DATA_SET_ASIDE
    return code


def context(ctx: typer.Context) -> CliContext:
    obj = ctx.find_root().obj
    if obj is None:
        obj = CliContext(None)
    return obj


def parse_configs(items: list[str] | None, what: str = "--config") -> dict[str, str]:
    return parse_assignments(items, what)


def fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def put_bytes(d: dict, name: str, data: bytes | None) -> None:
    """``d[name]`` = the UTF-8 text, or ``d[name + "_b64"]`` when the bytes are not UTF-8; None stays null.

    The convention of the cleaner corpus dumps, shared by ``consume``, ``produce`` and ``dump-log``
    so that one command's JSON lines are the next one's input.
    """
    if data is None:
        d[name] = None
        return
    try:
        d[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        d[name + "_b64"] = base64.b64encode(data).decode("ascii")


def headers_json(headers) -> list[dict]:
    out = []
    for h in headers:
        d = {"key": h[0]}
        put_bytes(d, "value", h[1])
        out.append(d)
    return out


@contextmanager
def closed_pipe_is_success():
    """End quietly when the reader of stdout goes away (``| head``), as cat does."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        # later flushes (at exit) must not fail again on the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0)


def dump_stacks_on_sigquit() -> None:
    """``kill -QUIT <pid>`` (or ^\\) prints every thread's Python stack to stderr and the command
    goes on, as a JVM prints its thread dump: for the long-running commands (``serve``, ``cleaner
    run``), so that one that does not stop can be asked where it is."""
    import faulthandler
    import signal
    import sys
    if not hasattr(signal, "SIGQUIT"):
        return
    try:
        sys.stderr.fileno()         # faulthandler writes to a file descriptor, not a Python stream
    except (AttributeError, OSError, ValueError):
        return                      # stderr captured in-process (a test, an embedding): no dump
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)


class InterruptToStop:
    """A long-running command's ^C (``cleaner run``, ``consume --follow``): the first SIGINT sets
    ``stop`` (and says ``message`` on stderr), the command's loop sees it at its next check and ends
    as it would at its end; a second SIGINT raises KeyboardInterrupt at once. SIGTERM sets ``stop``.

    Why not Python's default KeyboardInterrupt: raised wherever the main thread happens to be, it is
    swallowed when that is a finalizer (``__del__``, a generator closed by the collector: "Exception
    ignored in ...") and the command then runs on as if ^C had never come. Setting an event cannot
    be lost that way. The previous handlers are put back on exit (an in-process run: a test, an
    embedding); ``keep()`` puts this one back after a library replaced it (PySpark's SparkContext)."""

    def __init__(self, message: str | None = None):
        import threading
        self.stop = threading.Event()
        self._message = message.encode() if message else None
        self._before: dict = {}

    def _on_interrupt(self, *_):
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.stop.set()
        if self._message:
            # a raw write: the handler may run while this thread is inside a write to stderr
            os.write(2, self._message)

    def keep(self) -> None:
        import signal
        if signal.getsignal(signal.SIGINT) is not self._on_interrupt:
            signal.signal(signal.SIGINT, self._on_interrupt)

    def __enter__(self) -> "InterruptToStop":
        import signal
        import threading
        if threading.current_thread() is not threading.main_thread():
            return self             # signals go to the main thread's handlers only: nothing to install
        self._before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        self.keep()
        return self

    def __exit__(self, *exc) -> None:
        import signal
        for sig, handler in self._before.items():
            signal.signal(sig, handler)
        self._before = {}
