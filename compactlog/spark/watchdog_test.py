"""The watchdog ends every process carrying its owner's token once the owner is gone (no Spark here:
plain processes stand in for the JVM and its workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from compactlog.spark import watchdog

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the watchdog reads /proc (Linux)")

# a stand-in for the JVM: optionally deaf to SIGTERM, as a JVM stuck in its shutdown hooks is
SLEEPER = ("import signal, sys, time\nif sys.argv[1] == 'deaf': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
           "print('ready', flush=True)\ntime.sleep(120)")


def start_owned(token: str, mode: str = "plain") -> subprocess.Popen:
    """A sleeper owned by ``token``, returned once it is ready: a deaf one has its SIGTERM
    ignored by then (under load, a SIGTERM sent while Python was still starting killed the
    "deaf" sleeper before it could ignore it, and the test saw SIGTERM where it wanted SIGKILL)."""
    env = dict(os.environ, **{watchdog.OWNER_ENV: token})
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, mode], env=env, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"       # bounded by the sleeper's own start
    return proc


def gone_within(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_owned_and_reap():
    token = uuid.uuid4().hex
    plain, deaf, other = start_owned(token), start_owned(token, "deaf"), start_owned(uuid.uuid4().hex)
    try:
        deadline = time.monotonic() + 10
        while len(watchdog.owned(token)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(watchdog.owned(token)) == sorted([plain.pid, deaf.pid])
        watchdog.reap(token, grace=0.2, term_wait=0.5)
        assert gone_within(plain, 5) and plain.returncode == -signal.SIGTERM
        assert gone_within(deaf, 5) and deaf.returncode == -signal.SIGKILL
        assert other.poll() is None                      # another owner's process is left alone
    finally:
        for p in (plain, deaf, other):
            p.kill()
            p.wait()


def test_the_watchdog_acts_when_its_owner_is_killed():
    token = uuid.uuid4().hex
    # the owner: starts the watchdog (its stdin a pipe from the owner) and a "JVM", then waits
    owner_code = (f"import subprocess, sys, os, time\n"
                  f"w = subprocess.Popen([sys.executable, '-S', '-I', {watchdog.__file__!r}, {token!r}], "
                  f"stdin=subprocess.PIPE, start_new_session=True)\n"
                  f"env = dict(os.environ, {watchdog.OWNER_ENV}={token!r})\n"
                  f"j = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, 'plain'], env=env)\n"
                  f"print(w.pid, j.pid, flush=True)\n"
                  f"time.sleep(120)\n")
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    watchdog_pid, jvm_pid = map(int, owner.stdout.readline().split())
    # both are alive until the owner dies (the watchdog reads its stdin, the sleeper sleeps)
    watchdog_start, jvm_start = started_at(watchdog_pid), started_at(jvm_pid)
    try:
        owner.kill()                                     # SIGKILL: no atexit, no cleanup of its own
        owner.wait()
        # the watchdog's own waits, and room for a loaded machine: its scans read every process's
        # environment, and a loaded run (load ~10) once found the sleeper still there after 5 s
        # more (the loop ends as soon as both are gone)
        deadline = time.monotonic() + watchdog.GRACE_S + watchdog.TERM_WAIT_S + 30
        while time.monotonic() < deadline and (alive(jvm_pid, jvm_start) or alive(watchdog_pid, watchdog_start)):
            time.sleep(0.1)
        assert not alive(jvm_pid, jvm_start), (
            f"the owner's process outlived it (watchdog alive: {alive(watchdog_pid, watchdog_start)}, "
            f"its state: {_stat_state(watchdog_pid)}; the process's state: {_stat_state(jvm_pid)})")
        assert not alive(watchdog_pid, watchdog_start), "the watchdog did not exit after its work"
    finally:
        for pid, start in ((jvm_pid, jvm_start), (watchdog_pid, watchdog_start)):
            if alive(pid, start):                    # never a stranger that took the pid since
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def _stat_state(pid: int) -> str:
    """The state and parent of ``pid`` (for a failure's message)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return f"{fields[0]}, parent {fields[1]}"
    except OSError:
        return "gone"


def started_at(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc's field 22), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return None


def alive(pid: int, start: int | None = None) -> bool:
    """``pid`` is running, not a zombie, and (given ``start``) still the process that started then
    (a pid alone may name another program once Linux's 32,768 wrap around: minutes in this suite)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and (start is None or int(fields[19]) == start)
