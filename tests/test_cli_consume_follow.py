"""consume as Kafka's console consumer: read_uncommitted by default, --follow and --timeout-ms wait
for new records, 'Processed a total of N messages' on stderr, a note when nothing new is there."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from cli_support import run_in_process

EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMMAND = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "compactlog.cli.main"]


def run(data, *args, stdin=None):
    # in this process (the followers under test run in their own): a fresh interpreter per command
    # cost ~0.6 CPU-s
    return run_in_process(["--data-dir", str(data), *args], stdin=stdin, text=True)


def test_follow_waits_for_records_produced_later(tmp_path):
    data = tmp_path / "d"
    assert run(data, "topics", "create", "--topic", "t", "--partitions", "2").returncode == 0
    assert run(data, "produce", "--topic", "t", stdin="a\n").returncode == 0
    consumer = subprocess.Popen(COMMAND + ["--data-dir", str(data), "consume", "--topic", "t", "--from-beginning",
                                           "--timeout-ms", "3000"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert run(data, "produce", "--topic", "t", stdin="b\nc\n").returncode == 0
        out, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert sorted(out.split()) == ["a", "b", "c"]
    assert "Processed a total of 3 messages" in err


def test_nothing_new_says_so(tmp_path):
    data = tmp_path / "d"
    assert run(data, "topics", "create", "--topic", "t").returncode == 0
    assert run(data, "produce", "--topic", "t", stdin="a\n").returncode == 0
    r = run(data, "consume", "--topic", "t")
    assert r.returncode == 0 and r.stdout == ""
    assert "Processed a total of 0 messages" in r.stderr and "--from-beginning" in r.stderr
    r = run(data, "consume", "--topic", "t", "--from-beginning")
    assert r.stdout.split() == ["a"] and "Processed a total of 1 messages" in r.stderr
    assert "nothing new" not in r.stderr


def test_one_interrupt_ends_follow_with_the_total(tmp_path):
    """^C once, as a user's terminal sends it: the follower ends with its total (not only when the
    interrupt happens to land outside a finalizer: common_test.py)."""
    import signal
    data = tmp_path / "d"
    assert run(data, "topics", "create", "--topic", "t", "--partitions", "2").returncode == 0
    assert run(data, "produce", "--topic", "t", stdin="a\nb\n").returncode == 0
    consumer = subprocess.Popen(COMMAND + ["--data-dir", str(data), "consume", "--topic", "t", "--from-beginning",
                                           "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    try:
        first = [consumer.stdout.readline(), consumer.stdout.readline()]     # it is in its follow loop
        assert sorted(x.strip() for x in first) == ["a", "b"]
        os.killpg(consumer.pid, signal.SIGINT)
        out, err = consumer.communicate(timeout=60)
    finally:
        consumer.kill()
    assert consumer.returncode == 0, err
    assert out == "" and "Processed a total of 2 messages" in err and "Traceback" not in err
