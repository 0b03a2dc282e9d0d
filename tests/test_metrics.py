"""The broker's /metrics and health endpoints, scraped as Prometheus scrapes them (metrics.md §9).

One ``compactlog serve`` for the module, with ``metrics.listener=127.0.0.1:0`` (the port is read
from its log); each test scrapes with urllib before and after what it does and checks the
deltas against what happened (bytes produced, records fetched, a clean's removed records), never
absolute counter values. Both exposition formats are parsed with prometheus_client's own parsers.
Readiness during loading and after SIGTERM uses a broker of its own.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import signal
import socket
import struct
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from broker_support import Broker, wait_until
from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.server.metrics.partitions import FAMILY_NAMES as PARTITION_FAMILIES
from compactlog.storage.files import CLEAN_SHUTDOWN_FILE
from txn_support import E, Raw

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
CRASH_ENV = "COMPACTLOG_TEST_CLEANER_CRASH_FILE"
HOLD_ENV = "COMPACTLOG_TEST_SHUTDOWN_HOLD_FILE"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESTART_BACKOFF_MS = 3000      # a dead cleaner thread's first restart (a minute by default; 1 s let a
# restart come before the readiness probe was read, at load 15)
DASHBOARD = os.path.join(REPO, "docs", "grafana", "compactlog-broker.json")
RULES = os.path.join(REPO, "docs", "prometheus", "compactlog-rules.yml")

# metrics.md §9 item 7: what the Strimzi dashboard and alert rules query
STRIMZI_NAMES = [
    *(f"kafka_server_brokertopicmetrics_{x}_total" for x in (
        "bytesin", "bytesout", "messagesin", "totalproducerequests", "totalfetchrequests",
        "failedproducerequests", "failedfetchrequests")),
    "kafka_log_log_size",
    *(f"kafka_server_replicamanager_{x}" for x in ("leadercount", "partitioncount", "underreplicatedpartitions",
                                                   "underminisrpartitioncount")),
    "kafka_controller_kafkacontroller_activecontrollercount", "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_cluster_partition_atminisr", "kafka_cluster_partition_underminisr", "kafka_cluster_partition_replicascount",
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
    "kafka_network_socketserver_networkprocessoravgidle_percent",
    "kafka_log_logmanager_offlinelogdirectorycount", "kafka_server_socket_server_metrics_connection_count",
    "process_open_fds",
]

# family -> type, as the text parser names families (counters without _total)
TYPES = {
    **{f"kafka_server_brokertopicmetrics_{x}": "counter" for x in (
        "messagesin", "bytesin", "bytesout", "totalproducerequests", "totalfetchrequests", "failedproducerequests",
        "failedfetchrequests", "bytesrejected", "nokeycompactedtopicrecords", "invalidmagicnumberrecords",
        "invalidmessagecrcrecords", "invalidoffsetorsequencerecords")},
    "kafka_network_requestmetrics_requests": "counter", "kafka_network_requestmetrics_errors": "counter",
    **{f"kafka_network_requestmetrics_{t}": "gauge" for t in ("totaltimems", "requestqueuetimems", "localtimems",
                                                               "remotetimems", "responsesendtimems")},
    **{f"kafka_network_requestmetrics_{t}_count": "gauge" for t in ("totaltimems", "localtimems")},
    "compactlog_request_duration_seconds": "histogram",
    "kafka_network_requestchannel_requestqueuesize": "gauge",
    "compactlog_event_loop_lag_seconds": "histogram",
    **{f"kafka_log_logcleaner_{x}": "gauge" for x in ("cleaner_recopy_percent", "max_clean_time_secs",
                                                       "max_compaction_delay_secs", "max_buffer_utilization_percent",
                                                       "deadthreadcount")},
    **{f"kafka_log_logcleanermanager_{x}": "gauge" for x in ("max_dirty_percent", "time_since_last_run_ms",
                                                              "uncleanable_partitions_count", "uncleanable_bytes")},
    **{f"kafka_log_log_{x}": "gauge" for x in ("size", "numlogsegments", "logstartoffset", "logendoffset")},
    "kafka_cluster_partition_laststableoffsetlag": "gauge",
    "kafka_server_replicamanager_produceridcount": "gauge",
    "kafka_server_replicamanager_isrshrinks": "counter",
    "kafka_server_kafkaserver_brokerstate": "gauge",
    **{f"kafka_coordinator_group_groupmetadatamanager_{x}": "gauge" for x in (
        "numgroups", "numoffsets", "numgroupspreparingrebalance", "numgroupscompletingrebalance", "numgroupsstable",
        "numgroupsempty", "numgroupsdead")},
    "compactlog_group_offset_commits": "counter", "compactlog_group_completed_rebalances": "counter",
    "compactlog_group_offset_expirations": "counter",
    "compactlog_cleaner_rounds": "counter", "compactlog_cleaner_round_duration_seconds": "histogram",
    "compactlog_cleaner_read_bytes": "counter", "compactlog_cleaner_written_bytes": "counter",
    "compactlog_cleaner_read_records": "counter", "compactlog_cleaner_written_records": "counter",
    "compactlog_cleaner_removed_records": "counter", "compactlog_cleaner_reclaimed_bytes": "counter",
    "compactlog_cleaner_partitions": "gauge", "compactlog_log_cleanable_ratio": "gauge",
    "compactlog_log_first_dirty_offset": "gauge", "compactlog_cleaner_thread_deaths": "counter",
    "compactlog_log_data_events": "counter", "compactlog_transactions_ongoing": "gauge",
    "kafka_server_socket_server_metrics_connection_creation": "counter",
    "compactlog_storage_disk_free_bytes": "gauge", "compactlog_storage_disk_total_bytes": "gauge",
    "compactlog_build_info": "gauge", "process_cpu_seconds": "counter", "python_info": "gauge",
}


class Scrape:
    """One scrape: {(sample name, labels): value} and {family: type}."""

    def __init__(self, families):
        self.types = {}
        self.samples = {}
        for f in families:
            self.types[f.name] = f.type
            for s in f.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def get(self, name: str, **labels) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str, **labels) -> bool:
        return (name, frozenset(labels.items())) in self.samples

    def with_label(self, key: str, value: str) -> list[str]:
        return sorted(n for n, labels in self.samples if (key, value) in labels)

    def names(self) -> set[str]:
        """Every sample name a query could use, samples or not: each family's, with the suffixes
        its type gives."""
        out = {n for n, _ in self.samples}
        for name, kind in self.types.items():
            out |= {name + suffix for suffix in {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                                                  "summary": ("_sum", "_count")}.get(kind, ("",))}
        return out


def get(url: str, accept: str | None = None, timeout: float = 10) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def scrape(broker, openmetrics: bool = False) -> Scrape:
    status, body, headers = get(broker.metrics_url + "/metrics", OPENMETRICS if openmetrics else None)
    assert status == 200
    text = body.decode("utf-8")
    return Scrape(parse_openmetrics(text) if openmetrics else parse_text(text))


def delta(before: Scrape, after: Scrape, name: str, **labels) -> float:
    return after.get(name, **labels) - before.get(name, **labels)


def batch(n: int, *, keys=True, first: int = 0, value_size: int = 40) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch(BatchSpec(), [(i, now, (b"k%05d" % ((first + i) % 1000)) if keys else None,
                                       b"v" * value_size) for i in range(n)])


def create(bootstrap: str, topic: str, partitions: int = 1, **configs) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1, config={k.replace("_", "."): str(v)
                                                                          for k, v in configs.items()})]).values():
        f.result(30)


def log_files_size(data_dir: str, topic: str, partition: int) -> int:
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(data_dir, f"{topic}-{partition}", "*.log")))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    work = tmp_path_factory.mktemp("metrics")
    crash = str(work / "kill-a-cleaner-thread")
    old = os.environ.get(CRASH_ENV)
    os.environ[CRASH_ENV] = crash
    b = Broker(work / "data", {"log.cleaner.backoff.ms": "100", "auto.create.topics.enable": "false",
                               "group.initial.rebalance.delay.ms": "0",
                               "compactlog.cleaner.thread.restart.backoff.ms": str(RESTART_BACKOFF_MS)})
    try:
        b.start()
    finally:
        if old is None:
            os.environ.pop(CRASH_ENV, None)
        else:
            os.environ[CRASH_ENV] = old
    b.crash_file = crash
    assert b.metrics_url and b.metrics_url.startswith("http://127.0.0.1:")
    yield b
    assert b.stop() == 0


@pytest.fixture
def raw(broker):
    with Raw(broker.port) as r:
        yield r


# -- the exposition ------------------------------------------------------------------------------

def test_both_formats_parse_with_every_family_typed_and_no_created_series(broker):
    text = scrape(broker)
    om = scrape(broker, openmetrics=True)
    for name, kind in TYPES.items():
        assert text.types.get(name) == kind, (name, text.types.get(name))
        assert om.types.get(name.removesuffix("_total")) is not None, name
    assert not [n for n in text.types if n.endswith("_created")]
    assert not [n for n, _ in text.samples if n.endswith("_created")]
    # the all-topics series shares the family with the per-topic ones, without a topic label
    assert text.has("kafka_server_brokertopicmetrics_bytesin_total")
    assert text.get("kafka_server_kafkaserver_brokerstate") == 3
    # Prometheus asks for gzip
    req = urllib.request.Request(broker.metrics_url + "/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Encoding"] == "gzip"
        families = list(parse_text(gzip.decompress(r.read()).decode()))
    assert {f.name for f in families} >= set(TYPES)


def test_the_names_dashboards_and_alerts_query_are_served(broker):
    """Naming guard (metrics.md §9.7): a rename that breaks Strimzi's panels or alerts fails here."""
    create(broker.bootstrap, "guard")
    names = scrape(broker).names()
    assert [n for n in STRIMZI_NAMES if n not in names] == []


def test_health_endpoints(broker):
    status, body, _ = get(broker.metrics_url + "/v1/status/ready")
    assert status == 200 and json.loads(body)["status"] == "ready"
    status, body, _ = get(broker.metrics_url + "/v1/broker-state")
    assert status == 200 and json.loads(body) == {"brokerState": 3}
    status, body, _ = get(broker.metrics_url + "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, body, _ = get(broker.metrics_url + "/v1/broker")
    info = json.loads(body)
    assert status == 200 and info["state"] == "RUNNING" and info["nodeId"] == 0 and info["clusterId"]
    assert info["dataDir"] == broker.data_dir and info["listeners"] == [f"PLAINTEXT://{broker.bootstrap}"]
    assert info["uptimeSeconds"] > 0 and info["version"]
    assert get(broker.metrics_url + "/nothing-here")[0] == 404


# -- traffic -------------------------------------------------------------------------------------

def test_produce_and_fetch_traffic_per_topic_and_all_topics(broker, raw):
    create(broker.bootstrap, "traffic", 2)
    b0, b1 = batch(10), batch(5, first=10)
    before = scrape(broker)
    assert raw.produce(None, [("traffic", 0, b0), ("traffic", 1, b1)]) == {("traffic", 0): E.none,
                                                                           ("traffic", 1): E.none}
    after = scrape(broker)
    for labels in ({"topic": "traffic"}, {}):
        assert delta(before, after, "kafka_server_brokertopicmetrics_messagesin_total", **labels) == 15
        assert delta(before, after, "kafka_server_brokertopicmetrics_bytesin_total", **labels) == len(b0) + len(b1)
        assert delta(before, after, "kafka_server_brokertopicmetrics_totalproducerequests_total", **labels) == 2
        assert delta(before, after, "kafka_server_brokertopicmetrics_failedproducerequests_total", **labels) == 0
    assert delta(before, after, "kafka_network_requestmetrics_requests_total", request="Produce", version="9") == 1
    assert delta(before, after, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == 2
    # the log gauges are the files on disk
    assert after.get("kafka_log_log_size", topic="traffic", partition="0") == \
        log_files_size(broker.data_dir, "traffic", 0) == len(b0)
    assert after.get("kafka_log_log_logendoffset", topic="traffic", partition="0") == 10
    assert after.get("kafka_log_log_numlogsegments", topic="traffic", partition="1") == 1

    before = after
    for p in (0, 1):
        raw.fetch("traffic", p, 0, read_committed=False)
    after = scrape(broker)
    assert delta(before, after, "kafka_server_brokertopicmetrics_bytesout_total", topic="traffic") == len(b0) + len(b1)
    assert delta(before, after, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="traffic") == 2
    assert delta(before, after, "kafka_network_requestmetrics_requests_total", request="FetchConsumer",
                 version="11") == 2
    assert delta(before, after, "kafka_network_requestmetrics_errors_total", request="FetchConsumer",
                 error="NONE") == 4          # each answer's top-level code and its partition's
    assert after.get("kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") >= 2
    assert after.has("kafka_network_requestmetrics_totaltimems", request="FetchConsumer", quantile="0.99")


def test_a_keyless_record_on_a_compacted_topic_is_a_failed_produce(broker, raw):
    create(broker.bootstrap, "keyed", cleanup_policy="compact")
    before = scrape(broker)
    assert raw.produce(None, [("keyed", 0, batch(3, keys=False))]) == {("keyed", 0): E.invalid_record}
    after = scrape(broker)
    assert delta(before, after, "kafka_server_brokertopicmetrics_nokeycompactedtopicrecords_total") == 3
    assert delta(before, after, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="keyed") == 1
    assert delta(before, after, "kafka_server_brokertopicmetrics_failedproducerequests_total") == 1
    assert delta(before, after, "kafka_server_brokertopicmetrics_messagesin_total", topic="keyed") == 0
    assert delta(before, after, "kafka_network_requestmetrics_errors_total", request="Produce",
                 error="INVALID_RECORD") == 1


def test_a_batch_failing_its_crc_is_counted(broker, raw):
    create(broker.bootstrap, "damaged")
    b = bytearray(batch(3))
    b[-1] ^= 0xFF                           # a value byte: the CRC no longer matches
    before = scrape(broker)
    assert raw.produce(None, [("damaged", 0, bytes(b))]) == {("damaged", 0): E.corrupt_message}
    after = scrape(broker)
    assert delta(before, after, "kafka_server_brokertopicmetrics_invalidmessagecrcrecords_total") == 1
    assert delta(before, after, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="damaged") == 1
    assert delta(before, after, "kafka_server_brokertopicmetrics_bytesin_total", topic="damaged") == 0
    assert after.get("kafka_log_log_logendoffset", topic="damaged", partition="0") == 0


def test_unsupported_api_versions_requests_share_one_version_label(broker):
    """A client's unknown ApiVersions version is any int16: one series for all of them."""
    before = scrape(broker)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        for version, correlation in ((999, 1), (31000, 2)):
            # size, api key 18, version, correlation id, no client id, no tagged fields
            s.sendall(struct.pack(">ihhihb", 11, 18, version, correlation, -1, 0))
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            answer = s.recv(size, socket.MSG_WAITALL)
            assert struct.unpack_from(">ih", answer) == (correlation, E.unsupported_version)
    after = scrape(broker)
    assert delta(before, after, "kafka_network_requestmetrics_requests_total", request="ApiVersions",
                 version="unsupported") == 2
    assert not [labels for n, labels in after.samples if n == "kafka_network_requestmetrics_requests_total"
                and ("version", "999") in labels]


def test_requests_are_counted_per_api_and_version(broker, raw):
    before = scrape(broker)
    for _ in range(10):
        raw.call(3, 4, topics=None, allow_auto_topic_creation=False)
    after = scrape(broker)
    assert delta(before, after, "kafka_network_requestmetrics_requests_total", request="Metadata", version="4") == 10
    assert delta(before, after, "compactlog_request_duration_seconds_count", request="Metadata") == 10
    assert after.get("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                     networkProcessor="0") >= 1


def test_a_group_and_its_commits(broker):
    from confluent_kafka import Consumer
    create(broker.bootstrap, "grouped")
    with Raw(broker.port) as raw:
        raw.produce(None, [("grouped", 0, batch(4))])
    before = scrape(broker)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metrics-group", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe(["grouped"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        assert len(got) == 4
        c.commit(asynchronous=False)
        during = scrape(broker)
    finally:
        c.close()
    after = wait_until(lambda: (lambda s: s if s.get("kafka_coordinator_group_groupmetadatamanager_numgroupsempty")
                                > before.get("kafka_coordinator_group_groupmetadatamanager_numgroupsempty")
                                else None)(scrape(broker)), what="the group to become empty")
    assert delta(before, during, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert delta(before, during, "compactlog_group_completed_rebalances_total") == 1
    assert delta(before, during, "compactlog_group_offset_commits_total") == 1
    assert delta(before, during, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 1
    assert after.get("kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


# -- the cleaner ---------------------------------------------------------------------------------

def checkpoint(data_dir: str, topic: str, partition: int) -> int | None:
    path = os.path.join(data_dir, "cleaner-offset-checkpoint")
    if not os.path.exists(path):
        return None
    for line in open(path).read().splitlines()[2:]:
        t, p, offset = line.split()
        if (t, int(p)) == (topic, partition):
            return int(offset)
    return None


def test_a_clean_as_the_metrics_show_it(broker, raw):
    keys, versions = 20, 5
    create(broker.bootstrap, "compacted", cleanup_policy="compact", segment_bytes=1500,
           min_cleanable_dirty_ratio="0.01")
    before = scrape(broker)
    batches = [batch(keys, value_size=40) for _ in range(versions)]
    assert len(batches[0]) < 1500 < 2 * len(batches[0])      # one batch per segment
    for b in batches:
        assert raw.produce(None, [("compacted", 0, b)]) == {("compacted", 0): E.none}
    active = keys * (versions - 1)          # the last batch stays in the active segment
    t = {"topic": "compacted"}
    # the checkpoint moves before the cleaning is counted: wait for both
    after = wait_until(lambda: (lambda s: s if s.get("compactlog_log_first_dirty_offset", topic="compacted",
                                                     partition="0") == active
                                and delta(before, s, "compactlog_cleaner_removed_records_total", reason="superseded",
                                          **t) >= keys * (versions - 2) else None)(scrape(broker)),
                       what="the cleaner to clean up to the active segment")
    # every record of the cleaned section but each key's last is gone, however many rounds it took
    assert delta(before, after, "compactlog_cleaner_removed_records_total", reason="superseded", **t) == \
        keys * (versions - 2)
    removed = sum(v for (n, labels), v in after.samples.items()
                  if n == "compactlog_cleaner_removed_records_total" and ("topic", "compacted") in labels)
    assert delta(before, after, "compactlog_cleaner_read_records_total", **t) - \
        delta(before, after, "compactlog_cleaner_written_records_total", **t) == removed
    assert 0 < delta(before, after, "compactlog_cleaner_written_bytes_total", **t) <= \
        delta(before, after, "compactlog_cleaner_read_bytes_total", **t)
    size = after.get("kafka_log_log_size", topic="compacted", partition="0")
    assert size == log_files_size(broker.data_dir, "compacted", 0)
    assert delta(before, after, "compactlog_cleaner_reclaimed_bytes_total", **t) == sum(map(len, batches)) - size
    ok = sum(v for (n, labels), v in after.samples.items() if n == "compactlog_cleaner_rounds_total"
             and ("result", "ok") in labels) - sum(v for (n, labels), v in before.samples.items()
                                                    if n == "compactlog_cleaner_rounds_total" and ("result", "ok") in labels)
    assert ok >= 1
    assert delta(before, after, "compactlog_cleaner_round_duration_seconds_count", engine="local", phase="total") == ok
    # Kafka's gauges: a thread looked for work a moment ago; its last round copied part of what it read
    assert after.get("kafka_log_logcleanermanager_time_since_last_run_ms") < 5000
    assert 0 < after.get("kafka_log_logcleaner_cleaner_recopy_percent") < 100
    assert after.get("kafka_log_logcleaner_deadthreadcount") == 0
    assert after.get("compactlog_log_first_dirty_offset", topic="compacted", partition="0") == \
        checkpoint(broker.data_dir, "compacted", 0) == active
    assert after.get("compactlog_log_cleanable_ratio", topic="compacted", partition="0") == 0
    assert after.get("compactlog_cleaner_last_success_timestamp_seconds") > time.time() - 120


def test_a_deleted_topics_series_are_gone_from_the_next_scrape(broker, raw):
    create(broker.bootstrap, "doomed", cleanup_policy="compact")
    raw.produce(None, [("doomed", 0, batch(2))])
    assert "kafka_log_log_size" in scrape(broker).with_label("topic", "doomed")
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.delete_topics(["doomed"]).values():
        f.result(30)
    assert scrape(broker).with_label("topic", "doomed") == []


def logged_at(broker, text: str) -> float:
    """The time (seconds) of the broker log's first line holding ``text`` (its ``[%(asctime)s]``)."""
    import datetime
    line = next(x for x in broker.log_text().splitlines() if text in x)
    stamp = datetime.datetime.strptime(line[1:line.index("]")], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def test_a_dead_cleaner_thread_is_counted_restarted_and_reported_by_readiness(broker):
    before = scrape(broker)
    open(broker.crash_file, "w").close()
    dead = wait_until(lambda: (lambda s: s if s.get("kafka_log_logcleaner_deadthreadcount") == 1 else None)(
        scrape(broker)), timeout=10, interval=0.05, what="DeadThreadCount 1")
    assert delta(before, dead, "compactlog_cleaner_thread_deaths_total") == 1
    status, body, _ = get(broker.metrics_url + "/v1/status/ready")
    ready = json.loads(body)
    # clients are still served: ready, but degraded
    assert status == 200 and ready["status"] == "ready"
    assert "kafka-log-cleaner-thread-0 died" in ready["degraded"][0]
    restarted = wait_until(lambda: (lambda s: s if s.get("kafka_log_logcleaner_deadthreadcount") == 0 else None)(
        scrape(broker)), timeout=15, what="the cleaner thread restarted")
    # dead for the restart backoff (a minute by default: longer than a scrape interval), not less:
    # measured between the broker's own log lines (a scrape answered late under load says nothing)
    assert logged_at(broker, "restarting the cleaner thread") - logged_at(broker, "the cleaner thread died") >= \
        RESTART_BACKOFF_MS / 1000
    assert delta(before, restarted, "compactlog_cleaner_thread_deaths_total") == 1
    assert "degraded" not in json.loads(get(broker.metrics_url + "/v1/status/ready")[1])
    assert "the cleaner thread died" in broker.log_text() and "restarting the cleaner thread" in broker.log_text()


# -- never blocking the Kafka listener ------------------------------------------------------------

def timed_scrape(broker) -> tuple[float, Scrape]:
    begun = time.monotonic()
    s = scrape(broker)
    return time.monotonic() - begun, s


def test_a_scrape_answers_while_a_fetch_long_polls(broker):
    create(broker.bootstrap, "quiet")
    waited = {}

    def long_poll():
        with Raw(broker.port) as r:
            begun = time.monotonic()
            r.call(1, 11, replica_id=-1, max_wait=__import__("datetime").timedelta(seconds=3), min_bytes=1 << 20,
                   max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                   topics=[{"topic": "quiet", "partitions": [{"partition": 0, "fetch_offset": 0, "log_start_offset": -1,
                                                              "partition_max_bytes": 1 << 20,
                                                              "current_leader_epoch": -1}]}],
                   forgotten_topics_data=[], rack_id="")
            waited["s"] = time.monotonic() - begun

    t = threading.Thread(target=long_poll)
    t.start()
    time.sleep(0.3)
    took, _ = timed_scrape(broker)
    assert took < 2.5       # not held behind the 3 s long poll (quiet: ~0.01 s; a loaded machine is slower)
    assert get(broker.metrics_url + "/healthz")[0] == 200
    t.join(10)
    assert waited["s"] >= 2.5
    s = scrape(broker)
    assert s.get("kafka_network_requestmetrics_remotetimems", request="FetchConsumer", quantile="0.999") >= 2500


def test_scrapes_answer_within_a_second_while_a_clean_runs(broker, raw):
    create(broker.bootstrap, "bulky", cleanup_policy="compact", segment_bytes=400_000,
           min_cleanable_dirty_ratio="0.01")
    rounds = lambda s: sum(v for (n, labels), v in s.samples.items()  # noqa: E731
                           if n == "compactlog_cleaner_rounds_total")
    start = rounds(scrape(broker))
    # the same scrape with nothing running, as a baseline under this machine's load
    quiet = sorted(timed_scrape(broker)[0] for _ in range(5))[2]
    for i in range(12):
        raw.produce(None, [("bulky", 0, batch(5000, first=i * 5000, value_size=60))])
    times, seen = [], []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        took, s = timed_scrape(broker)
        times.append(took)
        seen.append(s.get("compactlog_log_first_dirty_offset", topic="bulky", partition="0"))
        if seen[-1] > 0 and rounds(s) > start:
            break
        time.sleep(0.05)
    assert seen[-1] > 0, "the bulky topic was not cleaned"
    # never held behind the clean: within a second, or (on a loaded machine) 20 quiet scrapes
    assert max(times) < max(1.0, 20 * quiet), (quiet, times)


# -- readiness while loading and after SIGTERM ---------------------------------------------------

def test_readiness_is_503_until_the_offsets_are_loaded_and_after_sigterm(tmp_path):
    """A broker of its own: recovering a torn write (BrokerState 2, the cut counted), loading a large
    __consumer_offsets (503), ready, metrics.partition.level=false, then SIGTERM (503)."""
    from compactlog.record import consumer_offsets as R
    from compactlog.coordinator.group.service import offsets_topic_configs
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir

    data = tmp_path / "data"
    broker_config = BrokerConfig({"offsets.topic.num.partitions": "1"})
    dd = DataDir(str(data), broker=broker_config, create=True, writable=True, command="test")
    dd.create_topic(R.OFFSETS_TOPIC, 1, offsets_topic_configs(broker_config))
    rec = R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(1, -1, "", 0, -1))
    log = dd.open_log(R.OFFSETS_TOPIC, 0)
    for _ in range(30):         # a __consumer_offsets that takes a while to replay
        log.append_records([rec.key_bytes()] * 10_000, [rec.value_bytes()] * 10_000)
    dd.create_topic("torn", 1, {})
    dd.open_log("torn", 0).append_records([b"k"], [b"v"])
    dd.close()
    # a torn write at the end of a segment, and no clean-shutdown marker: recovery cuts it
    with open(glob.glob(str(data / "torn-0" / "*.log"))[0], "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"torn")
    os.remove(data / CLEAN_SHUTDOWN_FILE)

    hold = str(tmp_path / "hold-shutdown")
    os.environ[HOLD_ENV] = hold
    b = Broker(data, {"offsets.topic.num.partitions": "1", "metrics.partition.level": "false"})
    try:
        b.log_path = str(tmp_path / "broker.log")
        statuses = []
        proc_started = threading.Thread(target=b.start)
        proc_started.start()
        url = wait_until(lambda: (re.search(r"Metrics listener on (http://[0-9.]+:[0-9]+)", b.log_text()) or [None,
                                                                                                           None])[1],
                         interval=0.01, what="the metrics listener")
        states = []
        deadline = time.monotonic() + 180       # replaying 300,000 offset records: >60 s at load 15-20
        while time.monotonic() < deadline:
            states.append(json.loads(get(url + "/v1/broker-state")[1])["brokerState"])
            status, body, _ = get(url + "/v1/status/ready")
            statuses.append((status, json.loads(body)["status"]))
            if status == 200:
                break
            time.sleep(0.02)
        proc_started.join(180)
        assert (503, "booting") in statuses and statuses[-1] == (200, "ready")
        assert "Finished loading offsets" in b.log_text()
        assert states[0] == 2 and states == sorted(states) and states[-1] in (2, 3)       # RECOVERY, RUNNING

        # metrics.partition.level=false: no per-partition series, however many partitions
        b.metrics_url = url
        counted = lambda n: wait_until(lambda: (lambda s: s if s.get(  # noqa: E731
            "kafka_server_replicamanager_partitioncount") == n else None)(scrape(b)), what=f"{n} partitions")
        create(f"127.0.0.1:{b.port}", "narrow", 1, cleanup_policy="compact")       # the same requests as below
        first = counted(3)
        assert [n for n, labels in first.samples if any(k == "partition" for k, _ in labels)] == []
        create(f"127.0.0.1:{b.port}", "wide", 200, cleanup_policy="compact")
        second = counted(203)
        # what recovery did is counted (the drain runs every second)
        wait_until(lambda: scrape(b).get("compactlog_log_data_events_total", kind="recovery-cut") == 1,
                   what="the recovery's cut counted")
        assert len(second.samples) - len(first.samples) < 20, sorted(
            set(second.samples) - set(first.samples))
        assert not set(PARTITION_FAMILIES) & set(second.types)

        open(hold, "w").close()
        b.proc.send_signal(signal.SIGTERM)
        down = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(get(url + "/v1/status/ready")),
                          interval=0.02, what="readiness 503 after SIGTERM")
        assert json.loads(down[1]) == {"status": "shutting_down"}
        assert json.loads(get(url + "/v1/broker-state")[1]) == {"brokerState": 7}
        assert get(url + "/healthz")[0] == 200
    finally:
        os.environ.pop(HOLD_ENV, None)
        if os.path.exists(hold):
            os.remove(hold)
        assert b.stop() == 0


# -- the Grafana dashboard -----------------------------------------------------------------------

def dashboard_metric_names(doc) -> set[str]:
    """Every metric name in the dashboard's PromQL (panel targets and template variables)."""
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "query") and isinstance(v, str):
                    exprs.append(v)
                elif k == "query" and isinstance(v, dict) and isinstance(v.get("query"), str):
                    exprs.append(v["query"])
                else:
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)
    walk(doc)
    return promql_names(exprs)


def promql_names(exprs) -> set[str]:
    names = set()
    for e in exprs:
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}") and e.count("[") == e.count("]"), e
        e = re.sub(r'"[^"]*"', '""', e)                 # label values
        e = re.sub(r"\{[^}]*\}", "", e)                 # label matchers
        e = re.sub(r"\[[^\]]*\]", "", e)                # ranges
        for tok in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
            if tok.startswith(("kafka_", "compactlog_", "process_", "python_")):
                names.add(tok)
    return names


def test_the_grafana_dashboard_queries_only_served_names(broker):
    with open(DASHBOARD) as f:
        doc = json.load(f)
    names = dashboard_metric_names(doc)
    assert len(names) >= 40
    assert {"kafka_log_logcleaner_deadthreadcount", "kafka_log_logcleanermanager_max_dirty_percent",
            "kafka_log_logcleanermanager_time_since_last_run_ms",
            "kafka_log_logcleanermanager_uncleanable_partitions_count", "compactlog_log_cleanable_ratio"} <= names
    served = scrape(broker).names()
    assert sorted(names - served) == []


def test_the_alert_rules_query_only_served_names(broker):
    text = open(RULES).read()
    exprs = re.findall(r"^\s+expr: (.+)$", text, re.M)
    assert len(exprs) == text.count("- alert: ") >= 8
    names = promql_names(exprs)
    assert {"kafka_log_logcleaner_deadthreadcount", "compactlog_cleaner_thread_deaths_total",
            "kafka_log_logcleanermanager_max_dirty_percent", "kafka_log_logcleanermanager_time_since_last_run_ms",
            "kafka_log_logcleanermanager_uncleanable_partitions_count"} <= names
    assert sorted(names - scrape(broker).names()) == []
