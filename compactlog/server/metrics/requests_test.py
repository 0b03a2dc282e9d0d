"""Request metrics (``metrics/requests.py``) and topic traffic (``metrics/topic_stats.py``) kept
without a lock on the request path: the scrape must show exactly what ``prometheus_client``'s own
Counter and Histogram showed for the same requests, and every counting thread's numbers."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest

from compactlog.server.metrics import requests as rm
from compactlog.server.metrics.topic_stats import BrokerTopicStats

FAMILIES = ("kafka_network_requestmetrics_requests", "kafka_network_requestmetrics_errors",
            "compactlog_request_duration_seconds")


class _Only:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return iter(self.families)


def _lines(registry) -> set[str]:
    return {line for line in generate_latest(registry).decode().splitlines()
            if line.split("{")[0].split(" ")[0].rsplit("_", 1)[0] in FAMILIES or line.startswith("# ")
            and any(f in line for f in FAMILIES)}


def test_the_counters_and_the_histogram_export_what_prometheus_client_exported(monkeypatch):
    disable_created_metrics()           # as the broker's metrics do (BrokerMetrics)
    now = [100.0]
    monkeypatch.setattr(rm, "_perf", lambda: now[0])
    metrics = rm.RequestMetrics(CollectorRegistry())
    ref_registry = CollectorRegistry()
    requests = Counter("kafka_network_requestmetrics_requests", "Requests received (RequestsPerSec)",
                       ["request", "version"], registry=ref_registry)
    errors = Counter("kafka_network_requestmetrics_errors", "Error codes in answers, NONE for successes "
                     "(ErrorsPerSec)", ["request", "error"], registry=ref_registry)
    duration = Histogram("compactlog_request_duration_seconds", "Time from a request's arrival to its answer "
                         "written", ["request"], buckets=rm.DURATION_BUCKETS, registry=ref_registry)
    cases = [("Produce", 9, 9, 0.0001, {0: 1}), ("Produce", 9, 9, 0.0005, {0: 2, 6: 1}),
             ("Fetch", 12, 12, 0.02, {0: 1}), ("ApiVersions", 9, 0, 11.0, {35: 1}),
             ("Produce", 7, 7, 0.0025, {})]
    keys = {"Produce": 0, "Fetch": 1, "ApiVersions": 18}
    for name, version, response_version, seconds, codes in cases:
        request = SimpleNamespace(api_key=keys[name], api_name=name, api_version=version,
                                  response_version=response_version)
        timer = metrics.request_started(request)
        begun = now[0]
        now[0] += seconds
        metrics.count_errors(timer.label, codes)
        metrics.request_sent(timer)
        label = rm.request_label(name)
        requests.labels(label, str(version if version == response_version else rm.UNSUPPORTED)).inc()
        for code, n in codes.items():
            errors.labels(label, rm.error_name(code)).inc(n)
        duration.labels(label).observe(now[0] - begun)
    ours = CollectorRegistry()
    ours.register(_Only([f for f in metrics.collect() if f.name in FAMILIES]))
    got, want = _lines(ours), _lines(ref_registry)
    assert got == want and any("le=\"0.0005\"" in line for line in got)


def test_topic_traffic_adds_up_every_threads_counts_and_forgets_deleted_topics():
    stats = BrokerTopicStats()

    def count(n):
        for _ in range(n):
            stats.appended("a", 3, 100, False)
            stats.fetched("b", 2, 0, 50)
        stats.append_failed("a", 10, too_large=True, keyless=2)
    threads = [threading.Thread(target=count, args=(1000,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    count(1)        # and this thread
    families = {f.name: f for f in stats.collect({"a", "b"})}
    values = {(f, tuple(s.labels.values())): s.value for f, fam in families.items() for s in fam.samples}
    P = "kafka_server_brokertopicmetrics_"
    assert values[(P + "messagesin", ())] == values[(P + "messagesin", ("a",))] == 3 * 4001
    assert values[(P + "totalproducerequests", ("a",))] == 4001 + 5
    assert values[(P + "bytesrejected", ())] == 50
    assert values[(P + "bytesout", ("b",))] == 50 * 4001
    assert values[(P + "nokeycompactedtopicrecords", ())] == 10
    # b deleted: its series go, the all-topics counts stay; a re-created b starts from zero
    families = {f.name: f for f in stats.collect({"a"})}
    assert [s.labels for s in families[P + "bytesout"].samples] == [{}, {"topic": "a"}]
    stats.fetched("b", 1, 0, 7)
    families = {f.name: f for f in stats.collect({"a", "b"})}
    assert {tuple(s.labels.values()): s.value for s in families[P + "bytesout"].samples} == {
        (): 50 * 4001 + 7, ("a",): 0, ("b",): 7}


def _reference_error_counts(body, counts=None) -> dict[int, int]:
    """Kafka's errorCounts as a plain recursive walk of every field: what the generated walks
    must count."""
    import dataclasses
    counts = {} if counts is None else counts
    for f in dataclasses.fields(body):
        value = getattr(body, f.name)
        if f.name in ("error_code", "partition_error_code"):
            counts[int(value)] = counts.get(int(value), 0) + 1
        elif dataclasses.is_dataclass(value):
            _reference_error_counts(value, counts)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    _reference_error_counts(item, counts)
    return counts


def test_the_generated_error_walks_count_what_a_walk_of_every_field_counts():
    from kio.schema.api_versions.v3.response import ApiVersionsResponse
    from kio.schema.errors import ErrorCode
    from kio.schema.metadata.v12.response import MetadataResponse
    from kio.schema.produce.v9.response import ProduceResponse

    from compactlog.server.messages import build, nested
    t_cls, p_cls = nested(ProduceResponse, "TopicProduceResponse"), nested(ProduceResponse, "PartitionProduceResponse")
    produce = build(ProduceResponse, throttle_time=0, responses=tuple(
        build(t_cls, name=f"t{t}", partition_responses=tuple(
            build(p_cls, index=p, error_code=ErrorCode(code), base_offset=0, record_errors=())
            for p, code in enumerate(codes))) for t, codes in enumerate(((0, 0, 6), (), (3,)))))
    mt, mp = nested(MetadataResponse, "MetadataResponseTopic"), nested(MetadataResponse, "MetadataResponsePartition")
    metadata = build(MetadataResponse, throttle_time=0, brokers=(), cluster_id=None, controller_id=0, topics=(
        build(mt, error_code=ErrorCode.none, name="a", partitions=tuple(
            build(mp, error_code=ErrorCode(c), partition_index=i, leader_id=0, replica_nodes=(), isr_nodes=())
            for i, c in enumerate((0, 9)))),
        build(mt, error_code=ErrorCode.unknown_topic_or_partition, name="b", partitions=())))
    av = nested(ApiVersionsResponse, "ApiVersion")
    versions = build(ApiVersionsResponse, error_code=ErrorCode.none, throttle_time=0,
                     api_keys=tuple(build(av, api_key=k, min_version=0, max_version=1) for k in range(60)))
    for body, want in ((produce, {0: 2, 6: 1, 3: 1}), (metadata, {0: 2, 9: 1, 3: 1}), (versions, {0: 1})):
        assert rm.error_counts(body) == _reference_error_counts(body) == want
    assert rm.error_counts(None) == {} and rm.error_counts(b"framed by its handler") == {}


def test_add_partitions_to_txn_counts_as_kafka_counts_it():
    """Kafka's AddPartitionsToTxnResponse.errorCounts: up to v3 each partition's code (there is no
    top-level code); from v4 the top-level code and each transaction's partition codes. Its
    partition field is ``partition_error_code``, not ``error_code``: once left uncounted."""
    from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse as V3
    from kio.schema.add_partitions_to_txn.v4.response import AddPartitionsToTxnResponse as V4
    from kio.schema.errors import ErrorCode

    from compactlog.server.messages import build, nested

    def topics(cls, codes):
        t, p = nested(cls, "AddPartitionsToTxnTopicResult"), nested(cls, "AddPartitionsToTxnPartitionResult")
        return tuple(build(t, name=f"t{i}", results_by_partition=tuple(
            build(p, partition_index=k, partition_error_code=ErrorCode(c)) for k, c in enumerate(cs)))
            for i, cs in enumerate(codes))

    v3 = build(V3, throttle_time=0, results_by_topic_v3_and_below=topics(V3, ((0, 53), (53,))))
    assert rm.error_counts(v3) == {0: 1, 53: 2}
    r = nested(V4, "AddPartitionsToTxnResult")
    v4 = build(V4, throttle_time=0, error_code=ErrorCode.none, results_by_transaction=(
        build(r, transactional_id="a", topic_results=topics(V4, ((0, 0),))),
        build(r, transactional_id="b", topic_results=topics(V4, ((48,),)))))
    assert rm.error_counts(v4) == {0: 3, 48: 1}


def test_a_scrape_while_requests_flow_counts_each_request_once(monkeypatch):
    """The loop thread finishes requests (folding every FOLD_AT of them) while another thread
    scrapes: every scrape is consistent (histogram count = timed count = buckets' sum, never
    going back) and the last one holds exactly every request, its time and its reservoir."""
    import sys
    import time

    now = [0.0]
    monkeypatch.setattr(rm, "_perf", lambda: now[0])
    metrics = rm.RequestMetrics(CollectorRegistry())
    n = 3 * rm.FOLD_AT + 17
    durations = [((i * 7919) % 1000) / 40000 for i in range(n)]       # 0 to 25 ms, every bucket edge case
    request = SimpleNamespace(api_key=3, api_name="Metadata", api_version=12, response_version=12)
    scrapes, done, failed = [], threading.Event(), []

    def loop():
        for i, d in enumerate(durations):
            if i % 500 == 0:        # a scrape under way before the next 500: they overlap
                seen = len(scrapes)
                while len(scrapes) == seen and not failed:
                    time.sleep(0.0001)
            timer = metrics.request_started(request)
            now[0] += d / 2
            metrics.request_answered(timer, None)
            now[0] += d / 2
            metrics.request_sent(timer)
        done.set()

    def scrape():
        try:
            while not done.is_set():
                scrapes.append({f.name: f for f in metrics.collect()})
            scrapes.append({f.name: f for f in metrics.collect()})
        except BaseException:
            failed.append(True)
            raise

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)         # threads take turns as often as they can
    try:
        threads = [threading.Thread(target=loop), threading.Thread(target=scrape)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert not failed and len(scrapes) > n // 500
    last_count = 0
    for families in scrapes:
        h = {s.name.rsplit("_", 1)[-1] + str(s.labels.get("le", "")): s.value
             for s in families["compactlog_request_duration_seconds"].samples}
        count = h.get("count", 0)
        timed = [s.value for s in families["kafka_network_requestmetrics_totaltimems_count"].samples]
        assert timed == ([count] if count else [])
        assert h.get("bucket+Inf", 0) == count and last_count <= count <= n
        last_count = count
    families = scrapes[-1]
    requests = {tuple(s.labels.values()): s.value for s in families["kafka_network_requestmetrics_requests"].samples}
    assert requests == {("Metadata", "12"): n}
    buckets = {s.labels["le"]: s.value for s in families["compactlog_request_duration_seconds"].samples
               if s.name.endswith("_bucket")}
    totals, clock = [], 0.0         # each time as the fold sees it: two halves on a running clock
    for d in durations:
        start = clock
        clock += d / 2
        clock += d / 2
        totals.append(clock - start)
    assert list(buckets.values()) == [sum(1 for x in totals if x <= bound)
                                      for bound in (*rm.DURATION_BUCKETS, float("inf"))]
    total_sum = 0.0
    for x in totals:
        total_sum += x
    sums = [s.value for s in families["compactlog_request_duration_seconds"].samples if s.name.endswith("_sum")]
    assert sums == [total_sum]
    last = sorted(x * 1000 for x in totals[-rm.RESERVOIR:])
    p99 = [s.value for s in families["kafka_network_requestmetrics_totaltimems"].samples
           if s.labels["quantile"] == "0.99"]
    assert p99 == [rm.percentile(last, 0.99)]
