"""A ``compactlog serve`` subprocess for the conformance tests: started on a free loopback port
(the broker binds port 0 and logs the port it got), stopped by its pid with a bounded wait."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMMAND = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "compactlog.cli.main"]
START_TIMEOUT = 60
STOP_TIMEOUT = 60
KCAT = shutil.which("kcat")

_LISTENING = re.compile(r"Awaiting socket connections on ([0-9.]+):([0-9]+)\.")
_METRICS = re.compile(r"Metrics listener on (http://[0-9.]+:[0-9]+)")


def run_cli(data_dir, *args, stdin: bytes | None = None, timeout: float = 60,
            process: bool = False) -> subprocess.CompletedProcess:
    """``compactlog --data-dir D ARGS`` (stdout and stderr as bytes): in this process (a fresh
    interpreter costs ~0.6 CPU-s a command), or in a process of its own with ``process`` (a test of
    a separate reader) and always for ``serve`` (a server that did not fail would never return)."""
    argv = ["--data-dir", str(data_dir), *map(str, args)]
    if process or "serve" in argv:
        return subprocess.run(COMMAND + argv, input=stdin, capture_output=True, timeout=timeout)
    from cli_support import run_in_process
    return run_in_process(argv, stdin=stdin)


class Broker:
    """``compactlog --data-dir D --override K=V ... serve`` on 127.0.0.1, port chosen by the system."""

    # every broker started and not yet stopped or killed: one a failed test left running is
    # killed at the test's end (tests/conftest.py), not left serving after the suite
    running: set = set()

    def __init__(self, data_dir, overrides: dict | None = None, *, port: int = 0, extra_args=(),
                 env: dict | None = None, python: str | None = None):
        self.data_dir = str(data_dir)
        self.env = env          # extra environment variables (LD_PRELOAD of the fault injector)
        # another interpreter's ``-m compactlog.cli.main`` (a benchmark comparing builds), else COMMAND
        self.command = [python, "-m", "compactlog.cli.main"] if python else None
        # the metrics listener on a free port too (its default, 9644, is one per machine)
        self.overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "metrics.listener": "127.0.0.1:0",
                          **(overrides or {})}
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.metrics_url: str | None = None     # http://127.0.0.1:PORT, from the broker's log
        self.log_path = os.path.join(self.data_dir + ".broker-logs", "stderr.log")
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Broker":
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        args = list(self.command or COMMAND) + ["--data-dir", self.data_dir]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        args += ["serve", *self.extra_args]
        self._log = open(self.log_path, "ab")
        start_at = self._log.tell()
        env = {**os.environ, **self.env} if self.env else None
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL, env=env)
        Broker.running.add(self)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = self.log_text(start_at)
            m = _LISTENING.search(text)
            if m and "] started" in text:
                self.port = int(m.group(2))
                found = _METRICS.search(text)
                self.metrics_url = found.group(1) if found else None
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"compactlog serve exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"compactlog serve did not start within {START_TIMEOUT} s:\n"
                           f"{self.log_text(start_at)}")

    def log_text(self, start: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int:
        """SIGTERM, then a bounded wait (SIGKILL after it); the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise RuntimeError(f"compactlog serve did not stop within {STOP_TIMEOUT} s")
        self._close_log()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close_log()

    def _close_log(self) -> None:
        Broker.running.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.kill()


def kcat(*args, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([KCAT, *map(str, args)], input=stdin, capture_output=True, timeout=timeout)


def wait_until(predicate, timeout: float = 30, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A loopback port free at this moment, for a setting that must name its port (the broker
    binds port 0 where it may: see ``Broker``)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
