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
but the worker-thread part runs on the event loop.

Percentiles are Kafka's gauges (``kafka_network_requestmetrics_totaltimems{request,quantile}``)
over the last ``RESERVOIR`` samples of each API (Yammer's reservoir keeps about the last five
minutes), with a ``_count`` gauge beside them; ``compactlog_request_duration_seconds`` is the
same total time as a Prometheus histogram, which can be aggregated. Fetch is reported as
``FetchConsumer`` (Kafka's name for a consumer's fetch).

Per request the event loop does little (issue 28: the request metrics were ~8% of a single-record
transaction's broker CPU): it counts the request and its answer's error codes (ints in dicts only
its thread changes; the walk of a body is generated per response class, down to the fields that
hold codes) and appends the request's five times to its API's list. Those are folded in batches
(``_fold``, numpy over the batch) into the duration histogram, the counts and the reservoirs:
by the loop once an API has ``FOLD_AT`` of them, and by every scrape first, under one lock, so a
scrape sees every request answered before it, once. The scrape yields the families the
prometheus_client ``Counter``/``Histogram`` objects yielded before: the same names, help, labels
and values.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import deque

import numpy as np

from kio.schema.errors import ErrorCode
from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

RESERVOIR = 1024
TIMES = 5               # the times kept of a finished request (_Api.done)
FOLD_AT = 2048          # an API's finished requests kept before the event loop folds them (_fold)
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
             ("0.999", 0.999))      # the JMX exporter's labels for Yammer's percentiles
TIMERS = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems", "totaltimems")
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNSUPPORTED = "unsupported"     # the version label of a request of a version the broker does not know
LOOP_PROBE_INTERVAL_S = 0.5
IDLE_WINDOW_S = 60.0
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

_perf = time.perf_counter
_new = object.__new__


def request_label(api_name: str) -> str:
    return "FetchConsumer" if api_name == "Fetch" else api_name


def error_name(code: int) -> str:
    """Kafka's ``Errors`` name of a code: NONE, UNKNOWN_TOPIC_OR_PARTITION, ..."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


# -- error codes of a response body -------------------------------------------------------------

def _is_code(field) -> bool:
    """An error code: ``error_code``, or a field typed ErrorCode under another name (kio's
    AddPartitionsToTxn ``partition_error_code``, which Kafka's ``errorCounts`` counts: v0-v3's
    partition codes, v4+'s top-level code and partition codes, as the fields say)."""
    return field.name == "error_code" or field.type is ErrorCode


def _holds_codes(cls, seen=()) -> bool:
    """Whether entities of ``cls`` (or entities nested in them) have an error code field."""
    if cls in seen:
        return False
    for f in dataclasses.fields(cls):
        if _is_code(f):
            return True
        inner = _entity_type(f.type)
        if inner is not None and _holds_codes(inner, (*seen, cls)):
            return True
    return False


def _entity_type(t):
    """The entity class of a field holding an entity or a tuple of entities, else None."""
    if dataclasses.is_dataclass(t):
        return t
    if getattr(t, "__origin__", None) is tuple and t.__args__ and dataclasses.is_dataclass(t.__args__[0]):
        return t.__args__[0]
    return None


def _walk_source(cls, var: str, depth: int, lines: list[str], seen=()) -> None:
    pad = "    " * depth
    for f in dataclasses.fields(cls):
        if _is_code(f):
            lines.append(f"{pad}x = {var}.{f.name}")     # an ErrorCode (IntEnum): the same key as its int
            lines.append(f"{pad}c[x] = c.get(x, 0) + 1")
            continue
        inner = _entity_type(f.type)
        if inner is None or inner in seen or not _holds_codes(inner, (*seen, cls)):
            continue        # nothing below holds a code: not walked (ApiVersions' 60 API entries)
        item = f"e{depth}"
        if inner is f.type:
            lines.append(f"{pad}{item} = {var}.{f.name}")
            lines.append(f"{pad}if {item} is not None:")
        else:
            lines.append(f"{pad}for {item} in {var}.{f.name}:")
        _walk_source(inner, item, depth + 1, lines, (*seen, cls))


_WALKERS: dict[type, object] = {}


def _walker(cls):
    """``walk(body, counts)`` adding every ``error_code`` of a body of class ``cls`` into
    ``counts``, or False for a body that is not a kio entity (Fetch's ``EncodedResponse``, which
    its handler counts). The walk is generated once per class as nested loops over only the
    fields that lead to an error code: the generic walk (a Python call per entity, every
    tuple of entities iterated) cost more than the rest of the request's metrics together."""
    walk = _WALKERS.get(cls)
    if walk is None:
        if not dataclasses.is_dataclass(cls):
            walk = False
        else:
            lines = ["def walk(b, c):", "    pass"]
            _walk_source(cls, "b", 1, lines)
            namespace: dict = {}
            exec(compile("\n".join(lines), f"<error walk of {cls.__qualname__}>", "exec"), namespace)
            walk = namespace["walk"]
        _WALKERS[cls] = walk
    return walk


def error_counts(body, counts: dict | None = None) -> dict[int, int]:
    """Every ``error_code`` in a kio response body, counted (Kafka's ``errorCounts``)."""
    counts = {} if counts is None else counts
    walk = _walker(type(body))
    if walk:
        walk(body, counts)
    return counts


# -- one request's times ------------------------------------------------------------------------

class _Api:
    """One API's (one request label's) numbers. ``versions`` and ``errors`` are counted by the event
    loop's thread alone (one writer, no lock; a scrape copies them in one C call); ``done`` holds
    the finished requests' timers, appended by the loop and taken out by a fold (under the fold
    lock) into the reservoirs, the histogram and the count, which only a fold changes."""

    __slots__ = ("label", "versions", "errors", "done", "samples", "histogram", "count")

    def __init__(self, label: str):
        self.label = label
        self.versions: dict[int | str, int] = {}        # version -> requests received
        self.errors: dict[int, int] = {}                # error code -> count
        self.done: list[float] = []     # per finished request: start, answered, end, queue, local
        self.samples = np.empty((len(TIMERS), 0))      # the reservoirs: TIMERS' rows, the last RESERVOIR each
        self.histogram = [0] * (len(DURATION_BUCKETS) + 1) + [0.0]     # per bucket then +Inf; the sum
        self.count = 0                                  # requests timed


class RequestTimer:
    """The times of one request, filled in as it goes through the transport. Made by
    ``RequestMetrics.request_started`` alone, which sets every slot (without an ``__init__``
    frame: one per request): its API's numbers, its start, and zero answered, queue and local
    times."""

    __slots__ = ("api", "start", "answered", "queue", "local")

    @property
    def label(self) -> str:
        return self.api.label

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


_BOUNDS = np.array(DURATION_BUCKETS)


def _fold(api: _Api) -> None:
    """The finished requests of ``api`` into its reservoirs, histogram and count (the fold lock
    held). Vectorized over the batch: the same floats as one request at a time (the same IEEE
    operations in the same order; the sum accumulated in order, as ``cumsum`` does)."""
    done = api.done
    n = len(done) // TIMES          # the loop adds a request's times in one C call (extend)
    if not n:
        return
    times = np.fromiter(done[:n * TIMES], np.float64, n * TIMES).reshape(n, TIMES).T
    del done[:n * TIMES]            # the loop only appends: the first n are this fold's
    start, answered, end, queue, local = times
    answered = np.where(answered == 0.0, end, answered)         # never answered: as at its end
    total = end - start
    remote = answered - start - queue - local
    remote = np.where(0.0 > remote, 0.0, remote)                 # max(remote, 0.0)
    # the reservoirs keep the last RESERVOIR samples of each time, in ms (rows in TIMERS' order)
    fresh = np.stack((queue, local, remote, end - answered, total))[:, -RESERVOIR:] * 1000
    api.samples = np.concatenate((api.samples, fresh), axis=1)[:, -RESERVOIR:]
    histogram = api.histogram
    for i, k in enumerate(np.bincount(np.searchsorted(_BOUNDS, total, side="left"),
                                      minlength=len(DURATION_BUCKETS) + 1).tolist()):
        histogram[i] += k           # bucket i: the first bound >= total (le), as bisect_left
    histogram[-1] = float(np.cumsum(np.concatenate(((histogram[-1],), total)))[-1])
    api.count += n


class RequestMetrics:
    """The ``RequestObserver`` of one broker.

    Per request the event loop counts the request and its answer's error codes and appends its
    times to its API's ``done``; the times reach the percentile reservoirs, the duration histogram
    and the counts in batches (``_fold``): when an API has ``FOLD_AT`` finished requests waiting
    (on the loop, unless a scrape is folding: then the scrape takes them), and at every scrape
    (in the listener's thread). Before, prometheus_client's children (a mutex and a bucket search
    per observe), then five reservoir appends and a bisect per request, and a generic walk of
    every answer, cost ~8% of a single-record transaction's broker CPU."""

    def __init__(self, registry):
        self.connections_opened = Counter("kafka_server_socket_server_metrics_connection_creation",
                                          "Connections accepted", ["listener"], registry=registry)
        self.connections_closed = Counter("kafka_server_socket_server_metrics_connection_close",
                                          "Connections closed", ["listener"], registry=registry)
        self._by_key: dict[int, _Api] = {}          # API key -> its numbers
        self._by_label: dict[str, _Api] = {}        # request label -> the same
        self._fold_lock = threading.Lock()
        self.worker_busy_s = 0.0        # seconds the worker threads spent in handlers (loop thread adds)
        self.listener_of = lambda connection: "PLAINTEXT"     # connection -> listener name
        self.loop_probe: LoopProbe | None = None

    def _api(self, label: str) -> _Api:
        api = self._by_label.get(label)
        if api is None:
            api = self._by_label[label] = _Api(label)
        return api

    # -- the RequestObserver
    def request_started(self, request) -> RequestTimer:
        api = self._by_key.get(request.api_key)
        if api is None:
            api = self._by_key[request.api_key] = self._api(request_label(request.api_name))
        # an ApiVersions request of a version this broker does not know is answered as v0; its
        # version is any int16 a client sends, so it is labelled "unsupported" (bounded series)
        version = request.api_version
        if request.response_version != version:
            version = UNSUPPORTED
        versions = api.versions
        versions[version] = versions.get(version, 0) + 1
        timer = _new(RequestTimer)
        timer.api = api
        timer.start = _perf()
        timer.answered = timer.queue = timer.local = 0.0
        return timer

    def request_answered(self, timer: RequestTimer, body) -> None:
        timer.answered = _perf()
        walk = _WALKERS.get(body.__class__)
        if walk is None:
            walk = _walker(body.__class__)
        if walk:
            walk(body, timer.api.errors)

    def request_sent(self, timer: RequestTimer) -> None:
        end = _perf()
        local = timer.local
        if local:
            self.worker_busy_s += local
        done = timer.api.done
        done += (timer.start, timer.answered, end, timer.queue, local)
        if len(done) >= FOLD_AT * TIMES and self._fold_lock.acquire(False):     # a scrape folding: it takes them
            try:
                _fold(timer.api)
            finally:
                self._fold_lock.release()

    def count_errors(self, label: str, counts: dict[int, int]) -> None:
        errors = self._api(label).errors
        for code, n in counts.items():
            errors[code] = errors.get(code, 0) + n

    def connection_opened(self, connection) -> None:
        self.connections_opened.labels(self.listener_of(connection)).inc()

    def connection_closed(self, connection) -> None:
        self.connections_closed.labels(self.listener_of(connection)).inc()

    # -- the scrape
    def collect(self):
        """The counters, the duration histogram, the percentile gauges and their counts, per API
        with samples. This runs in the HTTP listener's thread while the event loop counts:
        ``sorted`` of a dict's items copies it in one C call, which no other Python thread
        interleaves with; the finished requests are folded and the folded numbers copied under
        the fold lock, so the histogram, the counts and the reservoirs agree with each other."""
        apis = sorted(self._by_label.values(), key=lambda a: a.label)
        requests = sorted((api.label, str(version), n) for api in apis for version, n in sorted(
            api.versions.items(), key=lambda kv: str(kv[0])))
        errors = [(api.label, code, n) for api in apis for code, n in sorted(api.errors.items())]
        with self._fold_lock:
            for api in apis:
                _fold(api)
            timed = [(api.label, list(api.histogram), api.count, np.sort(api.samples).tolist())
                     for api in apis if api.count]
        family = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests received (RequestsPerSec)",
                                     labels=["request", "version"])
        for label, version, n in requests:
            family.add_metric([label, version], n)
        yield family
        family = CounterMetricFamily("kafka_network_requestmetrics_errors", "Error codes in answers, NONE for "
                                     "successes (ErrorsPerSec)", labels=["request", "error"])
        for label, code, n in errors:
            family.add_metric([label, error_name(code)], n)
        yield family
        family = HistogramMetricFamily("compactlog_request_duration_seconds", "Time from a request's arrival "
                                       "to its answer written", labels=["request"])
        for label, counts, _, _ in timed:
            cumulative, buckets = 0, []
            for bound, n in zip((*DURATION_BUCKETS, float("inf")), counts):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric([label], buckets, counts[-1])
        yield family
        for i, timer in enumerate(TIMERS):
            name = f"kafka_network_requestmetrics_{timer}"
            g = GaugeMetricFamily(name, f"{timer[:-2]} of requests in ms, percentiles of the last "
                                        f"{RESERVOIR} (Kafka's {timer[:-2]}Ms histogram)",
                                  labels=["request", "quantile"])
            c = GaugeMetricFamily(name + "_count", f"Requests timed in {name}", labels=["request"])
            for label, _, count, samples in timed:
                values = samples[i]
                for text, q in QUANTILES:
                    g.add_metric([label, text], percentile(values, q))
                c.add_metric([label], count)
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
