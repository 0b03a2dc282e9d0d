"""The status page of a live broker, in a real browser, and ``cleaner status`` against that broker.

One broker (its HTTP listener on a free loopback port, an eager cleaner) holding a compacted topic
whose segments ``min.compaction.lag.ms`` keeps from the cleaner, and a group with a committed
offset. Headless Chromium (Debian's package, driven through the DevTools protocol by
``browser_support``) opens the page once: the partition's log is drawn segment by segment (dirty
head, active segment, no checkpoint yet), the dirty ratio against the threshold, why the partition
is not eligible, the group's lag. Then the lag is lifted (IncrementalAlterConfigs) and the same
page, without a reload, redraws itself as the cleaner runs: a cleaned tail, the checkpoint marker
where the broker's ``cleaner-offset-checkpoint`` file says, a row in the last cleanings with the
records removed. Screenshots of both states are kept (``build/test-artifacts/``, git-ignored, or
``$COMPACTLOG_TEST_ARTIFACTS``).

``cleaner status --bootstrap-server`` (the listener found through the broker's ``metrics.listener``)
and ``--metrics-url`` print the rows the offline command prints for the broker's data dir.
"""

from __future__ import annotations

import json
import os
import struct
import urllib.request

import pytest

from broker_support import Broker, free_port
from browser_support import CHROMIUM, SKIP_REASON, Browser, parse
from compactlog.cli.main import main

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACTS = os.environ.get("COMPACTLOG_TEST_ARTIFACTS") or os.path.join(ROOT, "build", "test-artifacts")
KEYS, ROUNDS = 10, 30
COMMITTED = 100
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("status-page") / "data"
    port = free_port()          # a fixed port: --bootstrap-server reads it back from metrics.listener
    with Broker(data, {"metrics.listener": f"127.0.0.1:{port}", "log.cleaner.backoff.ms": "100"},
                extra_args=["--engine", "local"]) as b:
        b.http = f"http://127.0.0.1:{port}"
        assert f"Status page on {b.http}/ " in b.log_text()
        conf = {"bootstrap.servers": b.bootstrap}
        b.admin = AdminClient(conf)       # kept: a dropped client cancels its futures
        b.admin.create_topics([NewTopic("prices", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": str(HOUR_MS)})])["prices"].result(30)
        producer = Producer(conf)
        for r in range(ROUNDS):           # a batch of KEYS records per round: segments end on round edges
            for k in range(KEYS):
                producer.produce("prices", key=b"k%d" % k, value=b"value-%03d-" % r * 4)
            producer.flush(30)
        del producer
        group = Consumer({**conf, "group.id": "billing", "enable.auto.commit": False})
        group.commit(offsets=[TopicPartition("prices", 0, COMMITTED)], asynchronous=False)
        group.close()
        b.data = str(data)
        yield b


def status_doc(b) -> dict:
    with urllib.request.urlopen(f"{b.http}/v1/status.json", timeout=10) as r:
        assert r.headers["Content-Type"] == "application/json"
        return json.load(r)


def prices_0(doc) -> dict:
    (topic,) = [t for t in doc["topics"] if t["name"] == "prices"]
    return topic["partitions"][0]


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


CLEANED_JS = ("document.querySelector('[data-partition=\"prices-0\"] li.seg[data-section=\"cleaned\"]')"
              " && document.querySelector('tr[data-cleaning=\"prices-0\"][data-result=\"ok\"]') && true")


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_the_page_draws_the_log_and_redraws_it_as_the_cleaner_runs(broker):
    assert not prices_0(status_doc(broker))["cleanerCheckpoint"], "cleaned before the page was opened"
    with Browser() as browser:
        page = browser.open(f"{broker.http}/?refresh=0.5")
        page.wait_for("document.querySelector('[data-partition=\"prices-0\"] li.seg') && true",
                      what="the partition drawn")
        page.evaluate("window.openedOnce = true")          # gone if the page reloaded
        dom = parse(page.html())
        doc = status_doc(broker)
        want = prices_0(doc)

        topic = dom.find("section", cls="topic", data_topic="prices")
        assert "cleanup.policy=compact" in topic.text() and "min.cleanable.dirty.ratio 0.01" in topic.text()
        part = topic.find(cls="partition", data_partition="prices-0")
        segs = part.find_all("li", cls="seg")
        assert len(segs) == len(want["segments"]) >= 3
        assert [(int(s.attrs["data-base-offset"]), int(s.attrs["data-size"])) for s in segs] == \
            [(s["baseOffset"], s["size"]) for s in want["segments"]]
        # the dirty head: every segment before the active one is dirty but not cleanable (the lag)
        assert [s.attrs["data-section"] for s in segs] == ["dirty"] * (len(segs) - 1) + ["active"]
        assert "seg-active" in segs[-1].classes
        assert all(f"flex-grow:{s.attrs['data-size']}" in s.attrs["style"].replace(" ", "") for s in segs)
        marker = part.find(cls="checkpoint")
        assert marker.attrs["data-checkpoint"] == "none" and marker.attrs["data-offset"] == "0"
        assert segs[0].parent.children.index(marker) == 0          # drawn before the first segment
        meter = part.find(role="meter")
        assert meter.attrs["aria-valuetext"].endswith("threshold 0.01, not above")
        assert "not eligible" in part.text() and "min.compaction.lag.ms" in part.text()
        assert "Cleaned tail: none yet" in part.text() and "no cleaner checkpoint yet" in part.text()
        assert "No cleaning since the broker started." in dom.find(id="cleanings").text()
        billing = dom.find("tr", data_group="billing")
        lag = ROUNDS * KEYS - COMMITTED
        assert f"prices-0: {COMMITTED} / {ROUNDS * KEYS}, lag {lag}" in billing.text()
        thread = dom.find("tr", data_thread="kafka-log-cleaner-thread-0")
        assert thread.find(cls="badge").text() in ("idle", "cleaning")
        before = page.screenshot(os.path.join(ARTIFACTS, "status-page-before-cleaning.png"))
        updates = int(page.evaluate("document.body.dataset.updates"))

        # lift the lag: the cleaner takes the dirty head, and the page shows it by itself
        lift = ConfigResource("topic", "prices", incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
        broker.admin.incremental_alter_configs([lift])[lift].result(30)
        page.wait_for(CLEANED_JS, timeout=20, what="the cleaned tail and the cleaning drawn")
        assert page.evaluate("window.openedOnce === true")
        assert int(page.evaluate("document.body.dataset.updates")) > updates
        dom = parse(page.html())
        after_shot = page.screenshot(os.path.join(ARTIFACTS, "status-page-after-cleaning.png"))
        assert page.errors() == []

    with open(os.path.join(broker.data, "cleaner-offset-checkpoint")) as f:
        on_disk = {tuple(line.split()[:2]): int(line.split()[2]) for line in f.read().splitlines()[2:]}
    checkpoint = on_disk[("prices", "0")]
    assert checkpoint % KEYS == 0 and 0 < checkpoint < ROUNDS * KEYS
    part = dom.find(cls="partition", data_partition="prices-0")
    segs = part.find_all("li", cls="seg")
    sections = [s.attrs["data-section"] for s in segs]
    assert sections[-1] == "active" and set(sections[:-1]) == {"cleaned"}
    assert int(segs[-1].attrs["data-base-offset"]) == checkpoint
    marker = part.find(cls="checkpoint")
    assert marker.attrs["data-checkpoint"] == str(checkpoint) == marker.attrs["data-offset"]
    assert segs[0].parent.children.index(marker) == len(segs) - 1   # between the cleaned tail and the head
    assert f"cleaner checkpoint {checkpoint:,}" in marker.text()
    size_after = sum(int(s.attrs["data-size"]) for s in segs)
    assert size_after < sum(s["size"] for s in want["segments"])
    # the cleaning: every superseded value of the cleaned range removed, the latest of each key kept
    row = dom.find("tr", data_cleaning="prices-0", data_result="ok")
    removed = checkpoint - KEYS
    assert f"{removed:,} of {checkpoint:,}" in row.text() and f"superseded {removed:,}" in row.text()
    assert "in-process" in row.text() and "kafka-log-cleaner-thread-0" in row.text()
    assert "Cleaned tail: " in part.text() and f"cleaner checkpoint at offset {checkpoint:,}" in part.text()
    assert "Last successful cleaning" in dom.find(id="cards").text()

    for shot in (before, after_shot):
        width, height = png_size(shot)
        assert width == 1280 and height >= 700


def test_cleaner_status_reads_the_live_broker(broker, capsys):
    def rows(*args):
        assert main(["cleaner", "status", *args, "--topic", "prices", "--json"]) == 0, capsys.readouterr().err
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    through_kafka = rows("--bootstrap-server", broker.bootstrap)
    through_http = rows("--metrics-url", broker.http)
    offline = rows("--data-dir", broker.data)
    (row, summary) = through_kafka
    untimed = {k: v for k, v in summary.items() if k != "nowMs"}
    for other in (through_http, offline):         # the same rows; the summaries differ in their time
        assert other[:-1] == [row]
        assert {k: v for k, v in other[-1].items() if k != "nowMs"} == untimed
    assert (row["topic"], row["partition"]) == ("prices", 0)
    live = {(s["topic"], s["partition"]): s for s in status_doc(broker)["cleaner"]["statuses"]}
    assert live[("prices", 0)] == row
    assert "maxDirtyPercent" in summary

    assert main(["cleaner", "status", "--bootstrap-server", broker.bootstrap, "--topic", "prices"]) == 0
    table = capsys.readouterr().out
    assert main(["--data-dir", broker.data, "cleaner", "status", "--topic", "prices"]) == 0
    assert table == capsys.readouterr().out and "prices-0" in table
