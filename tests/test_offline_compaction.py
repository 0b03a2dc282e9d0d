"""Offline compaction of a copied Kafka data dir, and the long-running cleaner."""

from __future__ import annotations

import json
import os
import shutil

from compactlog.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))
CONNECT = os.path.join(HERE, "data", "kafka-vectors", "mscaldas2012+kafka-connect-spooldir", "kafka-data")
NOW = 1_900_000_000_000


def test_clean_force_with_configs_on_a_kafka_written_dir(tmp_path, capsys):
    d = str(tmp_path / "d")
    shutil.copytree(CONNECT, d)
    code = main(["--data-dir", d, "clean", "--force", "--roll", "--engine", "local", "--now-ms", str(NOW),
                 "--config", "cleanup.policy=compact", "--all-topics", "--json"])
    assert code == 0
    out = {o["topic"]: o for o in map(json.loads, capsys.readouterr().out.splitlines())}
    # the README of the fixture: 39 distinct keys in the configs topic, 20 in the status topic
    assert out["docker-connect-configs"]["messagesWritten"] == 39
    assert out["docker-connect-status"]["messagesWritten"] == 20
    assert not os.path.exists(os.path.join(d, "compactlog.topics.json")), "session configs must not persist"
    assert main(["--data-dir", d, "verify"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", d, "consume", "--topic", "docker-connect-configs", "--from-beginning",
                 "--output-format", "jsonl"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    keys = [r.get("key") or r.get("key_b64") for r in records]
    assert len(keys) == len(set(keys)) == 39


def test_clean_without_policy_does_nothing_and_bad_config_is_refused(tmp_path, capsys):
    d = str(tmp_path / "d")
    shutil.copytree(CONNECT, d)
    before = {n: os.path.getsize(os.path.join(d, "docker-connect-configs-0", n))
              for n in os.listdir(os.path.join(d, "docker-connect-configs-0"))}
    assert main(["--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW),
                 "--config", "min.cleanable.dirty.ratio=2"]) != 0
    assert "min.cleanable.dirty.ratio" in capsys.readouterr().err
    after = {n: os.path.getsize(os.path.join(d, "docker-connect-configs-0", n))
             for n in os.listdir(os.path.join(d, "docker-connect-configs-0"))}
    assert after == before


def test_cleaner_run_cleans_and_logs_in_kafka_format(tmp_path, capsys):
    from compactlog.storage.datadir import DataDir
    d = str(tmp_path / "d")
    with DataDir(d, create=True, writable=True) as dd:
        dd.create_topic("t", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(2):
            log = dd.open_log("t", p)
            log.append_records([b"a", b"a", b"b"], [b"1", b"2", b"3"])
            log.roll()
            log.append_records([b"c"], [b"4"])
    assert main(["--data-dir", d, "--override", "log.cleaner.backoff.ms=10", "cleaner", "run",
                 "--engine", "local", "--iterations", "2"]) == 0
    with open(os.path.join(d + ".logs", "log-cleaner.log")) as f:
        text = f.read()
    assert "Log cleaner thread 0 cleaned log t-0 (dirty section = [0, 3])" in text
    assert "Log cleaner thread 0 cleaned log t-1 (dirty section = [0, 3])" in text
    assert "(kafka.log.LogCleaner)" in text
    with DataDir(d, writable=True) as dd:
        assert dd.cleaner_checkpoint.read() == {("t", 0): 3, ("t", 1): 3}
