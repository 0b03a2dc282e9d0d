"""Ends the Spark JVM and its Python workers when the compactlog process that started them ends.

PySpark's JVM exits when its stdin reaches end of file, but only once its gateway is up: a process
killed while the JVM starts (or a JVM stuck in its shutdown) leaves it running, and with it the
Python workers it forked. ``PR_SET_PDEATHSIG`` does not help: it fires when the *thread* that
started the JVM ends, and the session may be created on a worker thread.

So each process that starts a Spark session also starts this watchdog (``session._watch``), in its
own session so that a terminal's ^C or a group kill does not reach it. It waits for end of file on
its stdin, a pipe from its owner, which comes when the owner exits or is killed (even by SIGKILL).
It then ends every process whose environment carries the owner's token
(``COMPACTLOG_SPARK_OWNER=<token>``, given to the JVM at launch and inherited by everything the
JVM starts): after a grace period in which a JVM that saw its own stdin close can exit by itself,
with SIGTERM, then SIGKILL.

Run as a script (``python watchdog.py TOKEN``); it imports nothing from compactlog so that it
starts in a few milliseconds. Linux only (it reads /proc); elsewhere it exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
import time

OWNER_ENV = "COMPACTLOG_SPARK_OWNER"
GRACE_S = 2.0       # for the JVM to exit by itself after its stdin closed
TERM_WAIT_S = 3.0   # for SIGTERM (the JVM's shutdown hooks) before SIGKILL


def owned(token: str) -> list[int]:
    """Pids of the live processes started with ``OWNER_ENV=token`` in their environment."""
    marker = f"{OWNER_ENV}={token}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue        # gone, or another user's
        if marker in env.split(b"\0"):
            found.append(int(name))
    return found


def _wait_gone(token: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        left = owned(token)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def reap(token: str, grace: float = GRACE_S, term_wait: float = TERM_WAIT_S) -> None:
    if not _wait_gone(token, grace):
        return
    for sig, wait in ((signal.SIGTERM, term_wait), (signal.SIGKILL, 1.0)):
        for pid in owned(token):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if not _wait_gone(token, wait):
            return


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not os.path.isdir("/proc"):
        return 0
    token = argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    reap(token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
