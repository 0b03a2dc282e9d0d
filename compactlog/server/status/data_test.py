"""``status_data``: a broker's logs, cleaner and groups as the status page draws them, from memory."""

from __future__ import annotations

import json
import threading

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cleaner.manager import CleanerManager
from compactlog.server.state import BrokerState, Listener
from compactlog.server.status import status_data
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000


def make_state(tmp_path, props=None):
    dd = DataDir(str(tmp_path), broker=BrokerConfig(props or {}), writable=True, command="test",
                 clock=lambda: T0)
    return BrokerState(dd, 0, "cluster", Listener("PLAINTEXT", "h", 1))


def fill(log, n, key_space=3):
    for i in range(n):
        log.append_records([b"k%d" % (i % key_space)], [b"v%d" % i + b"." * 50], timestamps=[T0])


def partition(doc, topic, p=0):
    t = next(t for t in doc["topics"] if t["name"] == topic)
    return t, next(x for x in t["partitions"] if x["partition"] == p)


def test_segments_sections_and_checkpoint_before_and_after_a_clean(tmp_path):
    st = make_state(tmp_path)
    dd = st.datadir
    dd.create_topic("prices", 1, {"cleanup.policy": "compact", "segment.bytes": "400",
                                  "min.cleanable.dirty.ratio": "0.01"})
    dd.create_topic("events", 2, {})
    fill(st.log("prices", 0), 30)
    fill(st.log("events", 1), 3)
    manager = CleanerManager.for_datadir(dd)

    before = status_data(st, T0)
    json.dumps(before)          # JSON-able as it is
    topic, p = partition(before, "prices")
    assert topic["compacted"] and topic["cleanupPolicy"] == "compact" and topic["minCleanableDirtyRatio"] == 0.01
    assert p["cleanerCheckpoint"] is None and p["firstDirtyOffset"] == 0
    segs = p["segments"]
    assert len(segs) == p["segmentCount"] > 2 and sum(s["size"] for s in segs) == p["size"]
    assert [s["active"] for s in segs] == [False] * (len(segs) - 1) + [True]
    assert not any(s["cleaned"] for s in segs)
    assert all(s["cleanable"] for s in segs[:-1])
    assert segs[-1]["endOffset"] == p["logEndOffset"] == 30
    assert p["eligible"] and p["dirtyRatio"] == 1.0 and p["cleaningOrder"] == 0
    assert before["cleaner"]["maxDirtyPercent"] == 100
    assert [s["topic"] for s in before["cleaner"]["statuses"]] == ["prices"]
    _, e = partition(before, "events", 1)
    assert not e["compacted"] and e["dirtyRatio"] is None and e["logEndOffset"] == 3
    assert before["cleaner"]["recentCleanings"] == []

    outcomes = Cleaner(dd, InProcessExecutor(), manager).clean_filthiest(T0)
    assert outcomes and outcomes[0].cleaned
    after = status_data(st, T0 + 1)
    _, p = partition(after, "prices")
    assert p["cleanerCheckpoint"] == outcomes[0].end_offset == p["firstDirtyOffset"]
    cleaned = [s for s in p["segments"] if s["cleaned"]]
    assert cleaned and all(s["endOffset"] <= p["cleanerCheckpoint"] for s in cleaned)
    assert not p["segments"][-1]["cleaned"] and p["segments"][-1]["section"] == "active"
    assert p["dirtyRatio"] == 0.0 and not p["eligible"]
    (c,) = after["cleaner"]["recentCleanings"]
    assert (c["topic"], c["partition"], c["result"], c["engine"]) == ("prices", 0, "cleaned", "in-process")
    assert c["recordsRemoved"] > 0 and c["removed"] == {"superseded": c["recordsRemoved"]}
    assert c["bytesAfter"] < c["bytesBefore"]
    assert c["endOffset"] == p["cleanerCheckpoint"] and c["startedMs"] == T0
    (thread,) = after["cleaner"]["threads"]
    assert thread["name"] == threading.current_thread().name and thread["state"] == "idle"
    assert thread["cleanings"] == 1
    dd.close()


def test_threads_registered_dead_and_cleaning(tmp_path):
    st = make_state(tmp_path)
    manager = CleanerManager.for_datadir(st.datadir)
    manager.activity.register_thread("kafka-log-cleaner-thread-0")      # no such thread runs
    manager.activity.register_thread(threading.current_thread().name)
    manager.activity.started(threading.current_thread().name, [("t", 3)], T0)
    rows = {r["name"]: r for r in status_data(st, T0)["cleaner"]["threads"]}
    assert rows["kafka-log-cleaner-thread-0"]["state"] == "dead"
    me = rows[threading.current_thread().name]
    assert me["state"] == "cleaning" and me["partitions"] == ["t-3"] and me["sinceMs"] == T0
    st.datadir.close()


def test_groups_with_lag(tmp_path):
    from compactlog.server.groups.service import for_broker
    from compactlog.server.groups.api_data import CommitPartition
    st = make_state(tmp_path)
    st.datadir.create_topic("orders", 1, {})
    fill(st.log("orders", 0), 10)
    service = for_broker(st)
    service.load_now()
    service.commit_offsets("billing", -1, "", None, [CommitPartition("orders", 0, 4)])
    groups = status_data(st, T0)["groups"]
    assert not groups["loading"]
    (g,) = groups["groups"]
    assert g["groupId"] == "billing" and g["lag"] == 6
    assert g["partitions"] == [{"topic": "orders", "partition": 0, "committedOffset": 4,
                                "logEndOffset": 10, "lag": 6}]
    st.datadir.close()
