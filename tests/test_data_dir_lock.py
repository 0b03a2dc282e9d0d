"""One writer per data dir: the ``.lock``, writers refused while another holds it, readers that
keep working beside a writer and never change a file, and a crash that releases the lock."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from cli_support import run_in_process
from storage_support import tree_state
from compactlog.errors import DataDirLockedError, ReadOnlyError
from compactlog.storage.datadir import DataDir
from compactlog.storage.lock import DataDirLock, describe_holder

EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMMAND = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "compactlog.cli.main"]
TIMEOUT = 60


def run(data, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    # in this process: the writers it meets hold the lock in processes of their own (POSIX locks are
    # per process), and a fresh interpreter per command cost ~0.6 CPU-s
    return run_in_process(["--data-dir", str(data), *args], stdin=stdin)


def jsonl(start: int, n: int, key_space: int = 50, partition: int | None = None) -> bytes:
    extra = {} if partition is None else {"partition": partition}
    return b"".join(json.dumps({"key": f"k{i % key_space}", "value": f"v{i}", **extra}).encode() + b"\n"
                    for i in range(start, start + n))


def consumed(data, topic="t") -> list[dict]:
    r = run(data, "consume", "--topic", topic, "--from-beginning", "--output-format", "jsonl",
            "--isolation-level", "read_uncommitted")
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


class SlowProducer:
    """``compactlog produce`` reading from a pipe the test feeds: it holds the lock while it waits."""

    def __init__(self, data, topic="t"):
        self.proc = subprocess.Popen(COMMAND + ["--data-dir", str(data), "produce", "--topic", topic,
                                                "--input-format", "jsonl"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.data = data
        self.wait_for_lock()

    def wait_for_lock(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        while describe_holder(str(self.data)) is None:
            if self.proc.poll() is not None:
                raise AssertionError(self.proc.stderr.read().decode())
            if time.monotonic() > deadline:
                raise AssertionError("the producer never took the lock")
            time.sleep(0.02)

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def finish(self) -> subprocess.CompletedProcess:
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        out = self.proc.stdout.read()
        err = self.proc.stderr.read()
        self.proc.wait(timeout=TIMEOUT)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    r = run(d, "topics", "create", "--topic", "t", "--partitions", "2", "--config", "cleanup.policy=compact",
            "--config", "segment.bytes=4000", "--config", "min.cleanable.dirty.ratio=0.01")
    assert r.returncode == 0, r.stderr.decode()
    return d


def one_error_line(r) -> str:
    assert r.returncode != 0
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr.decode()
    return lines[0]


# --- the lock itself ------------------------------------------------------------------------------

def test_lock_file_is_kafkas_and_names_its_holder(tmp_path):
    lock = DataDirLock(str(tmp_path), "compactlog test")
    assert os.path.exists(tmp_path / ".lock")
    assert describe_holder(str(tmp_path)) == f"pid {os.getpid()} (compactlog test, this process)"
    with pytest.raises(DataDirLockedError) as e:
        DataDirLock(str(tmp_path), "second")
    assert "compactlog test, this process" in str(e.value)
    lock.release()
    assert describe_holder(str(tmp_path)) is None
    DataDirLock(str(tmp_path), "third").release()


def test_other_process_holding_the_lock_is_named(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time\n"
                               "from compactlog.storage.lock import DataDirLock\n"
                               f"l = DataDirLock({str(tmp_path)!r}, 'compactlog serve')\n"
                               "print('locked', flush=True)\n"
                               "time.sleep(60)\n"], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        with pytest.raises(DataDirLockedError) as e:
            DataDir(str(tmp_path), writable=True)
        assert e.value.pid == holder.pid
        assert f"pid {holder.pid} (compactlog serve)" in str(e.value)
        holder.kill()                          # the kernel releases the lock of a killed holder
        holder.wait(timeout=TIMEOUT)
        DataDir(str(tmp_path), writable=True).close()
    finally:
        holder.kill()
        holder.wait(timeout=TIMEOUT)


def test_read_only_datadir_refuses_writes_and_writes_nothing(data):
    before = tree_state(data)
    dd = DataDir(str(data))
    log = dd.open_log("t", 0)
    with pytest.raises(ReadOnlyError):
        log.append_records([b"k"], [b"v"])
    with pytest.raises(ReadOnlyError):
        dd.create_topic("other")
    with pytest.raises(ReadOnlyError):
        dd.delete_topic("t")
    dd.close()
    assert tree_state(data) == before


# --- concurrent writers ------------------------------------------------------------------------------

def test_second_producer_is_refused_and_nothing_is_lost(data):
    first = SlowProducer(data)
    try:
        first.send(jsonl(0, 500))
        r = run(data, "produce", "--topic", "t", "--input-format", "jsonl", stdin=jsonl(500, 500))
        line = one_error_line(r)
        assert str(data) in line and f"pid {first.proc.pid}" in line and "compactlog produce" in line
        first.send(jsonl(1000, 500))
    finally:
        first.proc.stdin.close()
    assert first.finish().returncode == 0
    values = sorted(int(r["value"][1:]) for r in consumed(data))
    assert values == list(range(500)) + list(range(1000, 1500))   # the refused one wrote nothing


@pytest.mark.parametrize("command", [
    ["clean", "--force", "--engine", "local"],
    ["topics", "create", "--topic", "u"],
    ["topics", "alter", "--topic", "t", "--config", "retention.ms=1000"],
    ["topics", "delete", "--topic", "t"],
])
def test_writers_are_refused_while_a_producer_runs(data, command):
    first = SlowProducer(data)
    try:
        first.send(jsonl(0, 200))
        before = {k: v for k, v in tree_state(data).items() if not k.startswith("t-")}
        line = one_error_line(run(data, *command))
        assert "locked by another writer" in line and f"pid {first.proc.pid}" in line
        assert {k: v for k, v in tree_state(data).items() if not k.startswith("t-")} == before
    finally:
        first.proc.stdin.close()
    assert first.finish().returncode == 0
    assert len(consumed(data)) == 200


def test_readers_work_beside_a_producer_and_never_cut_its_records(data):
    """cleaner status, explain and topics describe used to trim the active segment to the size they
    saw at open when they exited: every record appended meanwhile was cut."""
    first = SlowProducer(data)
    try:
        first.send(jsonl(0, 3000))
        deadline = time.monotonic() + TIMEOUT
        while len(consumed(data)) < 3000:               # the producer has appended (and is waiting)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        quiet = tree_state(data)
        for command in (["cleaner", "status"], ["explain", "--topic", "t", "--partition", "0"],
                        ["topics", "describe", "--topic", "t"], ["topics", "list"], ["verify"],
                        ["consume", "--topic", "t", "--from-beginning"]):
            r = run(data, *command)
            assert r.returncode == 0, (command, r.stderr.decode())
            assert tree_state(data) == quiet, command   # readers change nothing, not even mtimes
        first.send(jsonl(3000, 1000))
    finally:
        first.proc.stdin.close()
    assert first.finish().returncode == 0
    values = sorted(int(r["value"][1:]) for r in consumed(data))
    assert values == list(range(4000))


def test_kill_9_of_the_lock_holder_releases_the_lock_and_loses_nothing_acknowledged(data):
    """Trials (6 in the suite, COMPACTLOG_STRESS_TRIALS for more: 20 passed when this was written):
    two producers race for the lock (one refused at once), the holder is killed at a random moment,
    the next writer gets the lock, and the log holds a prefix of each run's input."""
    rng = random.Random(7)
    expected: list[int] = []
    for trial in range(int(os.environ.get("COMPACTLOG_STRESS_TRIALS", "6"))):
        base = trial * 1000
        producer = COMMAND + ["--data-dir", str(data), "produce", "--topic", "t", "--input-format", "jsonl",
                              "--batch-size", "20"]
        a = subprocess.Popen(producer, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        b = subprocess.Popen(producer, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        payload = jsonl(base, 1000, partition=0)
        procs = [a, b]
        deadline = time.monotonic() + TIMEOUT
        loser = None
        while loser is None:
            assert time.monotonic() < deadline, "neither producer was refused"
            for p in procs:
                if p.poll() is not None:
                    loser = p
            time.sleep(0.01)
        winner = b if loser is a else a
        _, err = loser.communicate(timeout=TIMEOUT)
        assert loser.returncode != 0 and b"locked by another writer" in err, err
        assert f"pid {winner.pid}".encode() in err
        try:
            winner.stdin.write(payload)
            winner.stdin.flush()
        except BrokenPipeError:
            pass
        time.sleep(rng.uniform(0.0, 0.6))
        winner.kill()
        winner.wait(timeout=TIMEOUT)
        for p in procs:
            p.stdin.close()
        # the kernel released the lock: the next writer opens (and recovers) the dir
        got = sorted(int(r["value"][1:]) for r in consumed(data))
        mine = [v for v in got if base <= v < base + 1000]
        assert mine == list(range(base, base + len(mine))), f"trial {trial}: not a prefix of the input"
        assert [v for v in got if not base <= v < base + 1000] == expected, \
            f"trial {trial}: earlier records changed"
        expected = sorted(expected + mine)
        r = run(data, "produce", "--topic", "t", "--input-format", "jsonl",
                stdin=jsonl(10**6 + trial, 1, partition=1))
        assert r.returncode == 0, r.stderr.decode()
        expected = sorted(expected + [10**6 + trial])
    r = run(data, "verify")
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


# --- the clean-shutdown marker describes only what the writer closed --------------------------------

def test_a_writer_that_opened_some_partitions_does_not_mark_a_torn_one_clean(tmp_path):
    root = str(tmp_path / "d")
    with DataDir(root, create=True, writable=True) as dd:
        dd.create_topic("t", 2)
    dd = DataDir(root, writable=True)
    for p in (0, 1):
        for i in range(20):
            dd.open_log("t", p).append_records([b"k%d" % i], [b"v" * 50])
    dd.abandon()                                          # kill -9: no marker, nothing flushed
    p1 = os.path.join(root, "t-1", "00000000000000000000.log")
    size = os.path.getsize(p1)
    with open(p1, "r+b") as f:                            # the last batch of t-1 is torn
        f.truncate(size - 7)
    dd = DataDir(root, writable=True)
    dd.open_log("t", 0).append_records([b"k"], [b"after"])
    dd.close()                                            # only t-0 was opened (and recovered)
    assert not os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))
    dd = DataDir(root, writable=True)
    log = dd.open_log("t", 1)                             # so t-1 is recovered now
    info = log.append_records([b"k"], [b"after"])
    assert info.first_offset == 19                        # the torn batch was cut, the new one follows
    assert [r.offset for r in log.records()] == list(range(20))
    dd.close()
    assert not os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))  # t-0 was not opened here
    dd = DataDir(root, writable=True)
    assert [dd.open_log("t", p).log_end_offset for p in (0, 1)] == [21, 20]
    dd.close()
    assert os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))      # every partition opened


def test_read_only_open_of_a_crashed_dir_recovers_in_memory_only(tmp_path):
    root = str(tmp_path / "d")
    with DataDir(root, create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"segment.bytes": "2000"})
    dd = DataDir(root, writable=True)
    log = dd.open_log("t", 0)
    for i in range(40):
        log.append_records([b"k%d" % i], [b"v" * 60])
    dd.abandon()
    seg = sorted(n for n in os.listdir(os.path.join(root, "t-0")) if n.endswith(".log"))[-1]
    path = os.path.join(root, "t-0", seg)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)           # a torn tail
    before = tree_state(root)
    ro = DataDir(root)
    log = ro.open_log("t", 0)
    assert log.log_end_offset == 39                      # what a writer's recovery would keep
    assert [r.offset for r in log.records()] == list(range(39))
    ro.close()
    assert tree_state(root) == before
