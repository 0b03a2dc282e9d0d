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


def run_in_process(args, *, stdin: bytes | str | None = None, text: bool = False, env: dict | None = None,
                   cwd: str | None = None) -> subprocess.CompletedProcess:
    """``main(args)`` with stdin from ``stdin`` and stdout/stderr captured (bytes, or str with
    ``text``); ``env`` replaces the environment for the command's duration (as subprocess's does)."""
    from compactlog.cli.main import main
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
        code = main(args)
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
