"""``clean`` and ``cleaner run`` on a terminal: a progress display on stderr (bytes read, partitions
done, the round's state) that goes away when the command ends, and a summary line on stdout; with
stderr not a terminal, no display at all. Run as a user runs them: a subprocess whose stderr is a
pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

from broker_support import COMMAND
from compactlog.storage.datadir import DataDir

PARTITIONS, KEYS, VERSIONS = 2, 50, 20
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
TIMEOUT_S = 60


def make_dir(path) -> str:
    with DataDir(str(path), create=True, writable=True) as dd:
        dd.create_topic("t", PARTITIONS, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(PARTITIONS):
            log = dd.open_log("t", p)
            for v in range(VERSIONS):
                log.append_records([b"k%d" % k for k in range(KEYS)], [b"version-%d" % v * 8] * KEYS)
            log.roll()
            log.append_records([b"last"], [b"1"])
    return str(path)


def on_a_terminal(*args) -> tuple[int, str, str, bytes]:
    """Exit code, stdout, the terminal's text (escapes removed) and its raw bytes."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(COMMAND + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    raw = b""
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:         # the other end closed: the command ended
                break
            if not chunk:
                break
            raw += chunk
        out = proc.communicate(timeout=max(deadline - time.monotonic(), 1))[0]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return proc.returncode, out.decode(), ANSI.sub(b"", raw).decode("utf-8", "replace"), raw


def test_clean_draws_progress_on_a_terminal_and_ends_with_a_summary(tmp_path):
    data = make_dir(tmp_path / "d")
    code, out, screen, raw = on_a_terminal("--data-dir", data, "clean", "--engine", "local")
    assert code == 0, screen
    removed = PARTITIONS * (KEYS * VERSIONS - KEYS)
    summary = out.splitlines()[-1]
    assert re.fullmatch(rf"cleaned {PARTITIONS} partition\(s\) in [0-9.]+ s \(in-process\): [0-9.]+ KiB read, "
                        rf"{removed:,} of {PARTITIONS * KEYS * VERSIONS:,} records removed, "
                        rf"[0-9.]+ KiB -> [0-9.]+ KiB", summary), summary
    # the display: drawn from the start, then the round's end with what it cleaned and read
    assert "starting" in screen
    assert "round 1: done" in screen and f"{PARTITIONS} cleaned, 0 failed so far" in screen
    assert re.search(r"[0-9.]+ KiB", screen)
    # ...and erased when the command ends: the cursor comes back, the last lines are cleared
    assert raw.endswith(b"\x1b[?25h") or b"\x1b[?25h" in raw[-64:]
    assert "Traceback" not in screen


def test_cleaner_run_draws_progress_and_ends_with_a_summary(tmp_path):
    data = make_dir(tmp_path / "d")
    code, out, screen, _ = on_a_terminal("--data-dir", data, "--override", "log.cleaner.backoff.ms=10",
                                         "cleaner", "run", "--engine", "local", "--iterations", "2")
    assert code == 0, screen
    (summary,) = [line for line in out.splitlines() if line.startswith("cleaner run: ")]
    assert summary.startswith(f"cleaner run: 2 round(s), cleaned {PARTITIONS} partition(s) in ")
    assert f"{PARTITIONS * (KEYS * VERSIONS - KEYS):,} of {PARTITIONS * KEYS * VERSIONS:,} records removed" in summary
    assert "waiting for dirty partitions" in screen and f"{PARTITIONS} cleaned, 0 failed so far" in screen


def test_no_display_when_stderr_is_not_a_terminal(tmp_path):
    data = make_dir(tmp_path / "d")
    r = subprocess.run(COMMAND + ["--data-dir", data, "clean", "--engine", "local"], capture_output=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr.decode()
    assert b"\x1b[" not in r.stderr and b"partitions" not in r.stderr and b"starting" not in r.stderr
    assert r.stdout.decode().splitlines()[-1].startswith(f"cleaned {PARTITIONS} partition(s) in ")
