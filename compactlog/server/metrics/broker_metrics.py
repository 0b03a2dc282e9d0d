"""One broker's metrics: its private registry, the hot-path counters handlers call, the collector
that reads the broker's state at scrape time, and the HTTP listener that serves them.

Kafka keeps a process-wide Yammer registry that JMX exposes; several brokers share a process in
the tests here, so each broker has its own ``CollectorRegistry`` (with prometheus_client's process,
platform and GC collectors, and no ``_created`` series, which the JMX exporter never emits). The
broker (``server/app.py``) makes a ``BrokerMetrics`` first thing, starts its listener so that the
probes answer while the logs load, and attaches the parts it starts (``attach``): the
``BrokerState`` (``state.metrics`` is this object: the Produce and Fetch handlers count into
``topic_stats``), the transport (``requests`` is its ``RequestObserver``), the worker pool, the
event loop and the background threads. Everything else is read when Prometheus asks.

With ``metrics.listener`` empty there is no ``BrokerMetrics`` at all: no listener, no counting
(``state.metrics`` None), which is what ``benchmarks/broker.py --metrics off`` measures against.
"""

from __future__ import annotations

import errno
import gzip
import logging
import os
import time

from kio.schema.errors import ErrorCode
from prometheus_client import (CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector,
                               disable_created_metrics)
from prometheus_client.exposition import choose_encoder

from ...errors import CompactlogError
from ...storage import files
from .cleaner import CleanerCollector, CleanerCounters
from .collector import BrokerStateCollector
from .partitions import CleanerView, PartitionScan
from .health import RECOVERY, ROUTES, STARTING, BrokerLifecycle
from .listener import ALLOW_SETTING, SETTING, HttpListener, HttpRequest, HttpResponse, parse_listener
from .remote import RemoteCollector
from .requests import LoopProbe, RequestMetrics
from .topic_stats import BrokerTopicStats

log = logging.getLogger("kafka.server.MetricsListener")

UNKNOWN_TOPIC = int(ErrorCode.unknown_topic_or_partition)

OPENMETRICS_EOF = b"# EOF\n"
GZIP_LEVEL = 1          # a scrape is compressed several times a minute: speed over ratio


class _Scrape:
    """One scrape, as the encoders read a registry (``collect()``): the registry's own metrics
    (counters, histograms, process), the broker's state read now, topic traffic, request
    percentiles and the cleaner. ``scan`` (every partition, read once) gives the counts, the
    topics that exist (the topic-labelled families keep only those) and the per-partition text.
    Between families the scrape lets a waiting event loop take the GIL (``time.sleep(0)``):
    Python hands it over only every 5 ms otherwise."""

    def __init__(self, metrics: "BrokerMetrics"):
        self.metrics = metrics
        state = metrics.state
        manager = metrics.manager
        cleaner = CleanerView(manager) if manager is not None and metrics.partition_level else None
        self.scan = PartitionScan(state.datadir, cleaner, metrics.partition_level) if state is not None else None
        self.live_topics = self.scan.topics if self.scan is not None else None

    def collect(self):
        m = self.metrics
        for families in (m.registry.collect(), m.state_collector.collect(self.scan),
                         m.topic_stats.collect(self.live_topics), m.requests.collect(),
                         m.cleaner_collector.collect(self.live_topics),
                         m.remote_collector.collect(self.live_topics)):
            for family in families:
                yield family
                time.sleep(0)

    def partition_text(self) -> str:
        return self.scan.text() if self.scan is not None else ""


class BrokerMetrics:
    def __init__(self, datadir, *, node_id: int = 0, cluster_id: str = "", listeners=(), advertised=(),
                 http: HttpListener | None = None):
        broker = datadir.broker
        self.datadir = datadir
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.listeners = list(listeners)
        self.advertised = list(advertised) or list(listeners)
        self.partition_level = broker.get("metrics.partition.level")
        disable_created_metrics()
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.lifecycle = BrokerLifecycle()
        self.topic_stats = BrokerTopicStats()
        self.requests = RequestMetrics(self.registry)
        self.requests.listener_of = self.listener_of
        self.loop_probe = LoopProbe(self.registry, self.requests, broker.get("num.io.threads"))
        self.cleaner_counters = CleanerCounters(self.registry)
        self.state_collector = BrokerStateCollector(self)
        self.cleaner_collector = CleanerCollector(self)
        self.remote_collector = RemoteCollector(self)
        self.state = None
        self.server = None
        self.pool = None
        self.loop = None
        self.background = None
        self.stopping = False
        self._port_names: dict[int, str] = {}
        self.http: HttpListener | None = http
        if http is None:
            address = parse_listener(broker.get(SETTING), broker.get(ALLOW_SETTING))
            if address is not None:
                self.http = HttpListener(*address)
        if self.http is not None:
            self.http.context = self
            self.http.register_route("/metrics", metrics_route)
            for path, handler in ROUTES.items():
                self.http.register_route(path, handler)

    @classmethod
    def start(cls, datadir, http: HttpListener | None = None, **kwargs) -> "BrokerMetrics | None":
        """A starting broker's metrics, serving already (BrokerState STARTING, or RECOVERY when the
        data dir was not shut down cleanly) on ``http`` (bound by ``bind_listener`` before the
        data dir was opened; None: bound now); None when ``metrics.listener`` is empty (nothing
        is counted then)."""
        if http is None and parse_listener(datadir.broker.get(SETTING), datadir.broker.get(ALLOW_SETTING)) is None:
            return None
        metrics = cls(datadir, http=http, **kwargs)
        unclean = datadir.topics() and not os.path.exists(os.path.join(datadir.path, files.CLEAN_SHUTDOWN_FILE))
        metrics.lifecycle.set(RECOVERY if unclean else STARTING)
        metrics.start_listener()
        return metrics

    # -- the listener
    def start_listener(self) -> str | None:
        """Bind (unless ``bind_listener`` did) and serve; the URL. An address that cannot be bound,
        the default one included, stops the broker (``bind_listener``'s error)."""
        if self.http is None:
            return None
        _bind(self.http)
        self.http.start()
        log.info(f"Metrics listener on {self.http.url}: /metrics, /v1/status/ready, /v1/broker, "
                 f"/v1/broker-state, /healthz")
        return self.http.url

    def stop(self) -> None:
        self.stopping = True
        self.loop_probe.stop()
        if self.http is not None:
            self.http.stop()

    # -- the parts of the broker, as they start
    def attach(self, *, state=None, server=None, pool=None, loop=None, background=None) -> None:
        if state is not None:
            self.state = state
            state.metrics = self
        if server is not None:
            self.server = server
            self._name_ports(server.bound)
        if pool is not None:
            self.pool = pool
        if loop is not None:
            self.loop = loop
            self.loop_probe.start(loop)
        if background is not None:
            self.background = background
            background.activity.subscribe(self.cleaner_counters.on_cleaning)

    @property
    def manager(self):
        return getattr(self.background, "manager", None)

    def _name_ports(self, bound) -> None:
        fixed = {x.port: x.name for x in self.listeners if x.port}
        anywhere = [x.name for x in self.listeners if not x.port]
        for _, port in bound:
            if port in fixed:
                self._port_names[port] = fixed[port]
            elif anywhere:
                self._port_names[port] = anywhere.pop(0)

    def bound_listeners(self) -> list[str]:
        """``NAME://host:port`` of each bound Kafka listener (the configured ones before they are)."""
        if self.server is None or not self.server.bound:
            return [str(x) for x in self.listeners]
        out = []
        for host, port in self.server.bound:
            name = self._port_names.get(port) or (self.listeners[0].name if self.listeners else "PLAINTEXT")
            out.append(f"{name}://{f'[{host}]' if ':' in host else host}:{port}")
        return out

    def listener_names(self) -> list[str]:
        return [x.name for x in self.listeners]

    def listener_of(self, connection) -> str:
        """The listener a client connection came in on (its own name, else by the local port)."""
        named = getattr(getattr(connection, "security", None), "name", None)
        if named:
            return named
        transport = getattr(connection, "transport", None)
        sockname = transport.get_extra_info("sockname") if transport is not None else None
        port = sockname[1] if sockname else None
        return self._port_names.get(port) or (self.listeners[0].name if self.listeners else "PLAINTEXT")

    # -- what the Fetch handler reports (it frames its own answer)
    def fetch_answered(self, result) -> None:
        """A Fetch answer (``apis.fetch.FetchRead``): bytes out and partitions per topic, and its
        error codes (the partitions' and the top-level one, as Kafka's FetchResponse.errorCounts)."""
        counts = {0: 1}
        stats = self.topic_stats
        for topic, parts in result.topics:
            answered = size = 0
            for p in parts:
                counts[p.error] = counts.get(p.error, 0) + 1
                if p.error == UNKNOWN_TOPIC:        # refused before the log: counted in neither
                    continue
                answered += 1
                size += len(p.records)
            if answered:
                stats.fetched(topic, answered, 0, size)
        self.requests.count_errors("FetchConsumer", counts)

    # -- the scrape
    def exposition(self, accept: str = "", accept_encoding: str = "") -> tuple[bytes, str, list]:
        """The registry in the format ``accept`` asks for (Prometheus text, or OpenMetrics), gzipped
        when the client accepts it: (body, content type, extra headers)."""
        encoder, content_type = choose_encoder(accept)
        scrape = _Scrape(self)
        body = encoder(scrape)
        extra = scrape.partition_text().encode("utf-8")
        if extra:
            if body.endswith(OPENMETRICS_EOF):      # OpenMetrics ends with its EOF line
                body = body[:-len(OPENMETRICS_EOF)] + extra + OPENMETRICS_EOF
            else:
                body += extra
        if "gzip" in accept_encoding:
            return gzip.compress(body, GZIP_LEVEL), content_type, [("Content-Encoding", "gzip")]
        return body, content_type, []


def bind_listener(broker) -> HttpListener | None:
    """The broker's HTTP listener (``metrics.listener``), bound but not serving yet; None when the
    setting is empty. Bound before the data dir is created or locked: an address that cannot be
    bound (another broker on this machine has the default one) refuses the start in one line, as
    a Kafka listener's does, and leaves nothing behind. A broker that served no metrics while
    still reporting ``metrics.listener`` would send ``cleaner status --bootstrap-server`` to
    whichever process holds that address."""
    address = parse_listener(broker.get(SETTING), broker.get(ALLOW_SETTING))
    if address is None:
        return None
    http = HttpListener(*address)
    _bind(http)
    return http


def _bind(http: HttpListener) -> None:
    try:
        http.bind()
    except OSError as e:
        host = f"[{http.host}]" if ":" in http.host else http.host
        hint = (f" (another process, such as a broker on this machine, has it: set {SETTING} to another "
                f"host:port, port 0 for any free one, or to nothing for no listener)"
                if e.errno == errno.EADDRINUSE else "")
        raise CompactlogError(f"cannot listen on {SETTING}={host}:{http.port}: {e.strerror or e}{hint}") from None


def metrics_route(request: HttpRequest) -> HttpResponse:
    body, content_type, headers = request.context.exposition(request.headers.get("accept", ""),
                                                             request.headers.get("accept-encoding", ""))
    return HttpResponse(200, body, content_type, headers)

