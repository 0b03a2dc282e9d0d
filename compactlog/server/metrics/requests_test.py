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
    for name, version, response_version, seconds, codes in cases:
        request = SimpleNamespace(api_name=name, api_version=version, response_version=response_version)
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
