"""Nothing is deleted by guess or in silence: topics whose configs are unknown are left alone, and
every retention deletion and recovery cut is reported, with its own exit code for data set aside."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from cli_support import run_in_process
from storage_support import tree_state
from compactlog.cleaner.service import CleanerService
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cleaner.log_format import CleanerLog
from compactlog.storage.datadir import DataDir
from compactlog.storage.events import EXIT_DATA_SET_ASIDE

HERE = os.path.dirname(os.path.abspath(__file__))
CONNECT = os.path.join(HERE, "data", "kafka-vectors", "mscaldas2012+kafka-connect-spooldir", "kafka-data")
YEAR_3000 = 32503680000000


def run(data, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    # in this process: a fresh interpreter per command cost ~0.6 CPU-s
    return run_in_process(["--data-dir", str(data), *args], stdin=stdin, text=True)


@pytest.fixture
def kafka_copy(tmp_path):
    d = str(tmp_path / "kafka-data")
    shutil.copytree(CONNECT, d)
    return d


def test_cleaner_run_leaves_a_copied_kafka_topic_alone(kafka_copy):
    """The Kafka Connect config topic has no entry here: treating it as cleanup.policy=delete with
    7-day retention deleted all of its records."""
    before = tree_state(kafka_copy)
    with DataDir(kafka_copy, writable=True, clock=lambda: YEAR_3000) as dd:
        service = CleanerService(dd, InProcessExecutor(), clock=lambda: YEAR_3000)
        assert not service.run_once(CleanerLog(kafka_copy))
        for t, p in dd.all_partitions():
            assert dd.open_log(t, p).delete_old_segments() == 0
    after = tree_state(kafka_copy)
    for name, state in before.items():
        if name.endswith(".log"):
            assert after[name][:2] == state[:2], name      # every segment, byte for byte


def test_status_and_explain_say_why_and_how(kafka_copy):
    r = run(kafka_copy, "cleaner", "status", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if '"topic"' in line]
    assert {row["topic"] for row in rows} == {"docker-connect-configs", "docker-connect-status"}
    for row in rows:
        assert row["unknown_configs"] and not row["eligible"]
        assert "configs unknown" in row["reason"] and "topics alter" in row["reason"]
    r = run(kafka_copy, "explain", "--topic", "docker-connect-configs", "--partition", "0")
    assert r.returncode == 0, r.stderr
    assert "configs unknown" in r.stdout


def test_configured_topic_is_cleaned_and_internal_topics_are_known(kafka_copy):
    r = run(kafka_copy, "topics", "alter", "--topic", "docker-connect-configs", "--config", "cleanup.policy=compact")
    assert r.returncode == 0, r.stderr
    with DataDir(kafka_copy) as dd:
        assert dd.is_configured("docker-connect-configs")
        assert not dd.is_configured("docker-connect-status")
        cfg = dd.topic_config("__consumer_offsets")
        assert cfg.known and cfg.compact


def test_retention_deletions_are_reported(tmp_path):
    d = str(tmp_path / "d")
    with DataDir(d, create=True, writable=True, clock=lambda: 1_000_000) as dd:
        dd.create_topic("r", 1, {"segment.bytes": "500", "retention.ms": "1000"})
        log = dd.open_log("r", 0)
        for i in range(20):
            log.append_records([b"k"], [b"v" * 80], timestamps=[1_000_000 + i])
    with DataDir(d, writable=True, clock=lambda: 5_000_000) as dd:
        log = dd.open_log("r", 0)
        n = log.delete_old_segments()
        assert n > 0
        events = dd.data_events()
        assert len(events) == n
        assert all(e.kind == "retention" and not e.sets_data_aside for e in events)
        assert "retention.ms=1000" in events[0].reason and events[0].first_offset == 0


def test_recovery_cut_is_reported_with_its_own_exit_code(tmp_path):
    d = tmp_path / "d"
    assert run(d, "topics", "create", "--topic", "t").returncode == 0
    r = run(d, "produce", "--topic", "t", stdin="a\nb\nc\n")
    assert r.returncode == 0, r.stderr
    os.remove(d / ".kafka_cleanshutdown")                 # as after a crash
    seg = d / "t-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00\x00")   # a torn batch
    before = tree_state(d)
    r = run(d, "consume", "--topic", "t", "--from-beginning")     # readers change nothing
    assert r.returncode == 0 and r.stdout.split() == ["a", "b", "c"], r.stderr
    assert tree_state(d) == before
    r = run(d, "produce", "--topic", "t", stdin="d\n")
    assert r.returncode == EXIT_DATA_SET_ASIDE, r.stderr
    assert "warning: t-0: cut by recovery" in r.stderr and "13 bytes" in r.stderr
    assert os.path.exists(str(seg) + ".discarded")
    r = run(d, "consume", "--topic", "t", "--from-beginning")
    assert r.stdout.split() == ["a", "b", "c", "d"]


def test_a_deletion_interrupted_by_a_crash_is_finished_and_reported(tmp_path):
    d = str(tmp_path / "d")
    with DataDir(d, create=True, writable=True) as dd:
        dd.create_topic("gone", 1)
        dd.open_log("gone", 0).append_records([b"k"], [b"v"])
    os.rename(os.path.join(d, "gone-0"), os.path.join(d, "gone-0.0123456789abcdef0123456789abcdef-delete"))
    with DataDir(d) as ro:                      # a reader leaves it alone
        assert "gone" not in ro.partition_dirs()
    assert os.path.exists(os.path.join(d, "gone-0.0123456789abcdef0123456789abcdef-delete"))
    with DataDir(d, writable=True) as dd:
        events = dd.data_events()
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    assert [e.kind for e in events] == ["deleted"] and events[0].partition == "gone-0"
