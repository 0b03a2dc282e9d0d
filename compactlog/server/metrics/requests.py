"""Request metrics at the transport's one seam: Kafka's ``RequestMetrics`` (per API: requests,
errors by code, the time histograms), the request handler pool's and the network threads' idle
ratios, and the event loop's lateness.

The transport (``transport.py``) calls a ``RequestObserver`` at a request's start
(``request_started`` -> a ``RequestTimer``), runs the handler's worker-thread part through the
timer (``timer.in_worker`` / ``timer.run``, which split the time as Kafka does: queue = waiting
for a worker thread, local = the handler, remote = the rest of an asynchronous handler, i.e. a
Fetch long poll or a parked JoinGroup), gives it the answer (``request_answered``: the error
codes are counted from the response body, Kafka's ``AbstractResponse.errorCounts``) and calls it
once the answer is written (``request_sent``: send and total time). An answer the handler framed
itself (Fetch's ``EncodedResponse``) is counted by that handler (``count_errors``). Everything
but the worker-thread part runs on the event loop, so the reservoirs need no lock.

Percentiles are Kafka's gauges (``kafka_network_requestmetrics_totaltimems{request,quantile}``)
over the last ``RESERVOIR`` samples of each API (Yammer's reservoir keeps about the last five
minutes), with a ``_count`` gauge beside them; ``compactlog_request_duration_seconds`` is the
same total time as a Prometheus histogram, which can be aggregated. Fetch is reported as
``FetchConsumer`` (Kafka's name for a consumer's fetch).

The per-request counters and the duration histogram are plain numbers that only the event loop's
thread changes (one writer, so no lock): a ``prometheus_client`` child takes a mutex on each
``inc``/``observe``, 10% of a consume's broker samples (issue 28). The scrape copies them (one C
call each, as the reservoirs) and yields the families the ``Counter``/``Histogram`` objects
yielded before: the same names, help, labels and values.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import time
from collections import deque

from kio.schema.errors import ErrorCode
from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

RESERVOIR = 1024
COUNTED_KEPT = 256
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
             ("0.999", 0.999))      # the JMX exporter's labels for Yammer's percentiles
TIMERS = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems", "totaltimems")
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNSUPPORTED = "unsupported"     # the version label of a request of a version the broker does not know
LOOP_PROBE_INTERVAL_S = 0.5
IDLE_WINDOW_S = 60.0
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

_perf = time.perf_counter


def request_label(api_name: str) -> str:
    return "FetchConsumer" if api_name == "Fetch" else api_name


def error_name(code: int) -> str:
    """Kafka's ``Errors`` name of a code: NONE, UNKNOWN_TOPIC_OR_PARTITION, ..."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


# -- error codes of a response body -------------------------------------------------------------

_PLANS: dict[type, tuple] = {}


def _plan(cls) -> tuple:
    """The fields of a response entity that hold error codes, entities or tuples of entities."""
    plan = _PLANS.get(cls)
    if plan is None:
        steps = []
        for f in dataclasses.fields(cls):
            t = f.type
            if f.name == "error_code":
                steps.append((f.name, 0))
            elif dataclasses.is_dataclass(t):
                steps.append((f.name, 1))
            elif getattr(t, "__origin__", None) is tuple and t.__args__ and dataclasses.is_dataclass(t.__args__[0]):
                steps.append((f.name, 2))
        plan = _PLANS[cls] = tuple(steps)
    return plan


def error_counts(body, counts: dict | None = None) -> dict[int, int]:
    """Every ``error_code`` in a kio response body, counted (Kafka's ``errorCounts``)."""
    counts = {} if counts is None else counts
    for name, kind in _plan(type(body)):
        value = getattr(body, name)
        if kind == 0:
            code = int(value)
            counts[code] = counts.get(code, 0) + 1
        elif kind == 1:
            if value is not None:
                error_counts(value, counts)
        elif value:
            for item in value:
                error_counts(item, counts)
    return counts


# -- one request's times ------------------------------------------------------------------------

class RequestTimer:
    """The times of one request, filled in as it goes through the transport."""

    __slots__ = ("label", "start", "answered", "queue", "local", "counted")

    def __init__(self, label: str):
        self.label = label
        self.start = _perf()
        self.answered = 0.0
        self.queue = 0.0
        self.local = 0.0
        self.counted = False

    def in_worker(self, fn, *args):
        """Run ``fn(*args)`` in a worker thread, as submitted at the request's start (a THREAD
        handler), timing the wait for the thread and the work."""
        return self._timed(self.start, fn, args)

    def _timed(self, submitted: float, fn, args):
        begun = _perf()
        try:
            return fn(*args)
        finally:
            self.queue += begun - submitted
            self.local += _perf() - begun

    def run(self, run):
        """``run`` (the transport's worker-thread runner) timing each call, for ASYNC handlers."""
        def timed_run(fn, *args):
            return run(self._timed, _perf(), fn, args)
        return timed_run


class RequestMetrics:
    """The ``RequestObserver`` of one broker."""

    def __init__(self, registry):
        self.connections_opened = Counter("kafka_server_socket_server_metrics_connection_creation",
                                          "Connections accepted", ["listener"], registry=registry)
        self.connections_closed = Counter("kafka_server_socket_server_metrics_connection_close",
                                          "Connections closed", ["listener"], registry=registry)
        # (request label, version) -> count; (label, error code) -> count; label -> the counts of
        # DURATION_BUCKETS then +Inf (not cumulative) and the sum in the last slot
        self._requests: dict[tuple[str, int | str], int] = {}
        self._errors: dict[tuple[str, int], int] = {}
        self._durations: dict[str, list] = {}
        self._samples: dict[str, tuple[deque, ...]] = {}
        self._counts: dict[str, int] = {}
        self.worker_busy_s = 0.0        # seconds the worker threads spent in handlers (loop thread adds)
        self.listener_of = lambda connection: "PLAINTEXT"     # connection -> listener name
        self.loop_probe: LoopProbe | None = None
        # id(body) -> (body, its error counts): a handler that answers with the same (immutable)
        # body object again (a transactional producer's AddPartitionsToTxn and EndTxn) is not
        # walked again; the entry holds the body, so its id is not reused meanwhile
        self._counted: dict[int, tuple] = {}

    # -- the RequestObserver
    def request_started(self, request) -> RequestTimer:
        label = request_label(request.api_name)
        # an ApiVersions request of a version this broker does not know is answered as v0; its
        # version is any int16 a client sends, so it is labelled "unsupported" (bounded series)
        version = request.api_version if request.response_version == request.api_version else UNSUPPORTED
        key = (label, version)
        requests = self._requests
        requests[key] = requests.get(key, 0) + 1
        return RequestTimer(label)

    def request_answered(self, timer: RequestTimer, body) -> None:
        timer.answered = _perf()
        if body is not None and dataclasses.is_dataclass(body):
            same = self._counted.get(id(body))
            if same is not None and same[0] is body:
                counts = same[1]
            else:
                counts = error_counts(body)
                if len(self._counted) >= COUNTED_KEPT:
                    self._counted.clear()
                self._counted[id(body)] = (body, counts)
            self.count_errors(timer.label, counts)
            timer.counted = True

    def request_sent(self, timer: RequestTimer) -> None:
        end = _perf()
        answered = timer.answered or end
        total = end - timer.start
        remote = max(answered - timer.start - timer.queue - timer.local, 0.0)
        self.worker_busy_s += timer.local
        samples = self._samples.get(timer.label)
        if samples is None:
            samples = self._samples[timer.label] = tuple(deque(maxlen=RESERVOIR) for _ in TIMERS)
            self._counts[timer.label] = 0
        self._counts[timer.label] += 1
        q, lo, re, se, to = samples
        q.append(timer.queue * 1000)
        lo.append(timer.local * 1000)
        re.append(remote * 1000)
        se.append((end - answered) * 1000)
        to.append(total * 1000)
        histogram = self._durations.get(timer.label)
        if histogram is None:
            histogram = self._durations[timer.label] = [0] * (len(DURATION_BUCKETS) + 1) + [0.0]
        histogram[bisect.bisect_left(DURATION_BUCKETS, total)] += 1       # le: the first bound >= total
        histogram[-1] += total

    def count_errors(self, label: str, counts: dict[int, int]) -> None:
        errors = self._errors
        for code, n in counts.items():
            key = (label, code)
            errors[key] = errors.get(key, 0) + n

    def connection_opened(self, connection) -> None:
        self.connections_opened.labels(self.listener_of(connection)).inc()

    def connection_closed(self, connection) -> None:
        self.connections_closed.labels(self.listener_of(connection)).inc()

    # -- the scrape
    def collect(self):
        """The counters, the duration histogram, the percentile gauges and their counts, per API
        with samples. This runs in the HTTP listener's thread while the event loop appends:
        ``sorted`` of a dict or a deque of floats (and ``list`` of a list) copies it in one C
        call, which no other Python thread interleaves with."""
        family = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests received (RequestsPerSec)",
                                     labels=["request", "version"])
        for (label, version), n in sorted(self._requests.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            family.add_metric([label, str(version)], n)
        yield family
        family = CounterMetricFamily("kafka_network_requestmetrics_errors", "Error codes in answers, NONE for "
                                     "successes (ErrorsPerSec)", labels=["request", "error"])
        for (label, code), n in sorted(self._errors.items()):
            family.add_metric([label, error_name(code)], n)
        yield family
        family = HistogramMetricFamily("compactlog_request_duration_seconds", "Time from a request's arrival "
                                       "to its answer written", labels=["request"])
        for label, histogram in sorted(self._durations.items()):
            counts = list(histogram)
            cumulative, buckets = 0, []
            for bound, n in zip((*DURATION_BUCKETS, float("inf")), counts):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric([label], buckets, counts[-1])
        yield family
        labels = sorted(self._samples)
        snapshot = {label: [sorted(d) for d in self._samples[label]] for label in labels}
        for i, timer in enumerate(TIMERS):
            name = f"kafka_network_requestmetrics_{timer}"
            g = GaugeMetricFamily(name, f"{timer[:-2]} of requests in ms, percentiles of the last "
                                        f"{RESERVOIR} (Kafka's {timer[:-2]}Ms histogram)",
                                  labels=["request", "quantile"])
            c = GaugeMetricFamily(name + "_count", f"Requests timed in {name}", labels=["request"])
            for label in labels:
                values = snapshot[label][i]
                for text, q in QUANTILES:
                    g.add_metric([label, text], percentile(values, q))
                c.add_metric([label], self._counts.get(label, 0))
            yield g
            yield c


def percentile(sorted_values: list[float], q: float) -> float:
    """Yammer's Snapshot.getValue: linear interpolation at q × (n + 1)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return sorted_values[0]
    if pos >= n:
        return sorted_values[-1]
    lower = sorted_values[int(pos) - 1]
    upper = sorted_values[int(pos)]
    return lower + (pos - int(pos)) * (upper - lower)


# -- the event loop -----------------------------------------------------------------------------

class LoopProbe:
    """The event loop's lateness (a callback due every ``LOOP_PROBE_INTERVAL_S``) and the idle
    fraction of the loop (time in ``select``) and of the worker threads over the last minute."""

    def __init__(self, registry, metrics: RequestMetrics, workers: int):
        self.lag = Histogram("compactlog_event_loop_lag_seconds", "Lateness of a callback due every "
                             f"{LOOP_PROBE_INTERVAL_S} s on the broker's event loop", buckets=LAG_BUCKETS,
                             registry=registry)
        self.metrics = metrics
        self.workers = max(workers, 1)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.idle_s = 0.0           # seconds the loop spent waiting in select
        self.last_lag_s = 0.0
        self._history: deque = deque(maxlen=int(IDLE_WINDOW_S / LOOP_PROBE_INTERVAL_S) + 1)
        self._handle = None
        self._due = 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._wrap_select(loop)
        self._due = loop.time() + LOOP_PROBE_INTERVAL_S
        self._handle = loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _wrap_select(self, loop) -> None:
        """Time spent in the selector's ``select`` is the loop's idle time (asyncio keeps no such
        count); without a selector (another loop) the loop is reported fully idle."""
        selector = getattr(loop, "_selector", None)
        if selector is None or not hasattr(selector, "select"):
            return
        inner = selector.select

        def select(timeout=None):
            begun = _perf()
            try:
                return inner(timeout)
            finally:
                self.idle_s += _perf() - begun
        selector.select = select
        self._measured = True

    _measured = False

    def _tick(self) -> None:
        now = self.loop.time()
        late = max(now - self._due, 0.0)
        self.last_lag_s = late
        self.lag.observe(late)
        self._history.append((_perf(), self.idle_s, self.metrics.worker_busy_s))
        self._due = now + LOOP_PROBE_INTERVAL_S
        self._handle = self.loop.call_at(self._due, self._tick)

    def idle_ratios(self) -> tuple[float, float]:
        """(network loop idle, request handler idle), fractions over the last minute."""
        h = list(self._history)
        if len(h) < 2:
            return 1.0, 1.0
        (t0, idle0, busy0), (t1, idle1, busy1) = h[0], h[-1]
        span = t1 - t0
        if span <= 0:
            return 1.0, 1.0
        loop_idle = min(max((idle1 - idle0) / span, 0.0), 1.0) if self._measured else 1.0
        handler_idle = min(max(1.0 - (busy1 - busy0) / (span * self.workers), 0.0), 1.0)
        return loop_idle, handler_idle
