"""``status_data``: a broker's logs, cleaner and groups as the status page draws them, from memory."""

from __future__ import annotations

import json
from types import SimpleNamespace

from compactlog.cleaner.activity import CleanerActivity
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


class FakeBackground:
    """What the status page reads of ``server.background.Background``: its ``activity``."""

    def __init__(self):
        self.activity = CleanerActivity()


def test_segments_sections_and_checkpoint_before_and_after_a_clean(tmp_path):
    st = make_state(tmp_path)
    dd = st.datadir
    dd.create_topic("prices", 1, {"cleanup.policy": "compact", "segment.bytes": "400",
                                  "min.cleanable.dirty.ratio": "0.01"})
    dd.create_topic("events", 2, {})
    fill(st.log("prices", 0), 30)
    fill(st.log("events", 1), 3)
    manager = CleanerManager.for_datadir(dd)

    before = status_data(st, None, T0)
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
    assert before["cleaner"]["recentCleanings"] == [] and before["cleaner"]["threads"] == []

    (outcome,) = Cleaner(dd, InProcessExecutor(), manager).clean_filthiest(T0)
    assert outcome.cleaned
    after = status_data(st, None, T0 + 1)
    _, p = partition(after, "prices")
    assert p["cleanerCheckpoint"] == outcome.end_offset == p["firstDirtyOffset"]
    cleaned = [s for s in p["segments"] if s["cleaned"]]
    assert cleaned and all(s["endOffset"] <= p["cleanerCheckpoint"] for s in cleaned)
    assert [s["section"] for s in p["segments"][len(cleaned):]] == ["active"]
    assert p["dirtyRatio"] == 0.0 and not p["eligible"]
    dd.close()


def test_threads_and_recent_cleanings(tmp_path):
    from compactlog.cleaner.stats import CleanerStats
    st = make_state(tmp_path)
    st.datadir.create_topic("t", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    bg = FakeBackground()
    name = "kafka-log-cleaner-thread-0"
    bg.activity.thread_started(name)
    stats = CleanerStats(messages_read=10, messages_written=4, start_s=1.0, end_s=1.25, removed={"superseded": 6})
    ok = SimpleNamespace(topic="t", partition=0, cleaned=True, aborted=False, error=None, stats=stats,
                         start_size=900, end_size=300)
    failed = SimpleNamespace(topic="t", partition=0, cleaned=False, aborted=False, error="boom", stats=None,
                             start_size=0, end_size=0)
    bg.activity.record(name, [ok], "local", T0 - 10)
    bg.activity.record(name, [failed], "spark", T0 - 5)
    doc = status_data(st, bg, T0)["cleaner"]
    (thread,) = doc["threads"]
    assert (thread["name"], thread["state"], thread["alive"], thread["partitions"]) == (name, "idle", True, [])
    newest, oldest = doc["recentCleanings"]
    assert (newest["result"], newest["error"], newest["durationSeconds"], newest["recordsRemoved"]) == \
        ("failed", "boom", None, None)
    assert oldest == {"topic": "t", "partition": 0, "endedMs": T0 - 10, "result": "ok", "engine": "local",
                      "thread": name, "durationSeconds": 0.25, "recordsRead": 10, "recordsRemoved": 6,
                      "removed": {"superseded": 6}, "bytesBefore": 900, "bytesAfter": 300, "error": None}
    # a partition being cleaned is the one thread's; a dead thread says since when and why
    manager = CleanerManager.for_datadir(st.datadir)
    fill(st.log("t", 0), 4)
    st.log("t", 0).roll()
    (grabbed,) = manager.grab_filthiest_compacted_logs(T0)      # marked in progress, as a cleaner thread's
    doc = status_data(st, bg, T0)["cleaner"]
    assert doc["inProgress"] == ["t-0"] and doc["threads"][0]["state"] == "cleaning"
    assert doc["threads"][0]["partitions"] == ["t-0"]
    bg.activity.thread_died(name, "RuntimeError: x", T0 - 1000, lambda deaths: 2000)
    (thread,) = status_data(st, bg, T0)["cleaner"]["threads"]
    assert (thread["state"], thread["alive"], thread["deadSinceMs"], thread["lastError"], thread["deaths"],
            thread["restartAtMs"], thread["partitions"]) == ("dead", False, T0 - 1000, "RuntimeError: x", 1,
                                                             T0 + 1000, [])
    manager.done_cleaning(*grabbed.key)
    st.datadir.close()


def test_groups_with_lag(tmp_path):
    from compactlog.coordinator.group.service import for_broker
    from compactlog.coordinator.group.api_data import CommitPartition
    st = make_state(tmp_path)
    st.datadir.create_topic("orders", 1, {})
    fill(st.log("orders", 0), 10)
    service = for_broker(st)
    service.load_now()
    service.commit_offsets("billing", -1, "", None, [CommitPartition("orders", 0, 4)])
    groups = status_data(st, None, T0)["groups"]
    assert not groups["loading"]
    (g,) = groups["groups"]
    assert g["groupId"] == "billing" and g["lag"] == 6
    assert g["partitions"] == [{"topic": "orders", "partition": 0, "committedOffset": 4,
                                "logEndOffset": 10, "lag": 6}]
    st.datadir.close()


def test_routes_on_the_http_listener(tmp_path):
    import urllib.error
    import urllib.request
    from compactlog.server.metrics.listener import HttpListener
    from compactlog.server.status.routes import register_status_page
    st = make_state(tmp_path)
    st.create_topic("t", 1, {"cleanup.policy": "compact"})
    context = SimpleNamespace(state=None, background=None)       # the broker is loading its logs
    http = HttpListener("127.0.0.1", 0, context=context)
    register_status_page(http)
    http.start()
    try:
        with urllib.request.urlopen(http.url + "/") as r:
            assert r.headers["Content-Type"] == "text/html; charset=utf-8"
            page = r.read().decode()
        assert page.startswith("<!doctype html>") and 'const JSON_URL = "v1/status.json"' in page
        assert "http://" not in page.replace(".org/2000/svg", "") and "https://" not in page   # nothing external
        try:
            urllib.request.urlopen(http.url + "/v1/status.json")
            raise AssertionError("no 503 while loading")
        except urllib.error.HTTPError as e:
            assert e.code == 503 and json.loads(e.read())["status"] == "booting"
        context.state = st
        with urllib.request.urlopen(http.url + "/v1/status.json") as r:
            doc = json.loads(r.read())
        assert [t["name"] for t in doc["topics"]] == ["t"] and doc["broker"]["clusterId"] == "cluster"
    finally:
        http.stop()
        st.datadir.close()
