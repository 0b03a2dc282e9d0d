"""One retention rule (storage/log_manager.py, Kafka's LogManager.cleanupLogs with
LogCleanerManager.deletableLogs): the broker's scheduler and an offline ``cleaner run`` delete the
same segments from the same data dir. Before the log manager they did not: the broker skipped
a partition not opened since start unless its topic deleted by time or size (a compacted
partition whose log start DeleteRecords had moved kept its segments below the start), and it
deleted from a partition backing off as uncleanable, which the offline loop skipped."""

from __future__ import annotations

import json
import os
import shutil
import time

from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cleaner.service import CleanerService
from compactlog.server.background import Background
from compactlog.server.state import BrokerState, Listener
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import TOPICS_FILE, DataDir

PROPS = {"log.retention.check.interval.ms": "1", "log.cleaner.enable": "false"}
NOW = int(time.time() * 1000)
OLD = NOW - 3_600_000


def _fill(log, n, ts):
    for i in range(n):
        log.append_records([b"k%d" % i], [b"v" * 60], timestamps=[ts])


def _make(root: str) -> None:
    with DataDir(root, broker=BrokerConfig(PROPS), writable=True, create=True) as dd:
        dd.create_topic("del", 1, {"segment.bytes": "300", "retention.ms": "1000"})
        dd.create_topic("cmp", 1, {"cleanup.policy": "compact", "segment.bytes": "300"})
        dd.create_topic("cd", 1, {"cleanup.policy": "compact,delete", "segment.bytes": "300",
                                  "retention.ms": "1000"})
        dd.create_topic("unk", 1, {"segment.bytes": "300", "retention.ms": "1000"})
        for t in ("del", "cd", "unk"):
            _fill(dd.open_log(t, 0), 12, OLD)
        cmp = dd.open_log("cmp", 0)
        _fill(cmp, 12, NOW)
        cmp.delete_records_before(cmp.segment_bases()[2])     # start moved; segments kept
        dd.checkpoint_logs()
    # "unk" becomes a copied Kafka dir's topic: directories only, its configs unknown here
    path = os.path.join(root, TOPICS_FILE)
    meta = json.load(open(path))
    del meta["topics"]["unk"]
    json.dump(meta, open(path, "w"))


def _segments(root: str) -> dict[str, list[str]]:
    return {t: sorted(f for f in os.listdir(os.path.join(root, f"{t}-0")) if f.endswith(".log"))
            for t in ("del", "cmp", "cd", "unk")}


def _by_the_broker(root: str) -> None:
    dd = DataDir(root, broker=BrokerConfig(PROPS), writable=True, command="test")
    bg = Background(BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1)), InProcessExecutor(), clock=lambda: NOW)
    bg.manager.mark_uncleanable("cd", 0, "a failed clean", NOW)
    far = NOW + 3_600_000
    bg.run_scheduled_once({"retention": 0, "producer-expiration": far, "checkpoint": far, "events": far})
    dd.close()


def _offline(root: str) -> None:
    with DataDir(root, broker=BrokerConfig(PROPS), writable=True, command="test") as dd:
        service = CleanerService(dd, InProcessExecutor(), clock=lambda: NOW, log_dir=root + ".logs")
        service.manager.mark_uncleanable("cd", 0, "a failed clean", NOW)
        service.run_once(service.run_log)


def test_broker_and_offline_retention_agree(tmp_path):
    base = str(tmp_path / "base")
    _make(base)
    before = _segments(base)
    broker, offline = str(tmp_path / "broker"), str(tmp_path / "offline")
    shutil.copytree(base, broker)
    shutil.copytree(base, offline)
    _by_the_broker(broker)
    _offline(offline)
    after = _segments(broker)
    assert after == _segments(offline)
    assert len(after["del"]) == 1 < len(before["del"])          # time retention: all but the active
    assert after["cmp"] == before["cmp"][2:]                    # below the log start DeleteRecords set
    assert after["cd"] == before["cd"]                          # backing off as uncleanable: skipped
    assert after["unk"] == before["unk"]                        # configs unknown: never guessed
