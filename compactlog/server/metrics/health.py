"""The broker's life and health as HTTP probes and ``BrokerState`` report them.

``BrokerLifecycle`` holds Kafka's ``BrokerState`` (``metadata/.../BrokerState.java``: 0
NOT_RUNNING, 1 STARTING, 2 RECOVERY, 3 RUNNING, 6 PENDING_CONTROLLED_SHUTDOWN, 7 SHUTTING_DOWN)
as ``compactlog serve`` goes through it: STARTING while the logs load after a clean shutdown,
RECOVERY while they load after an unclean one, RUNNING once the listeners are bound and the
background threads run, SHUTTING_DOWN from SIGTERM on.

The endpoints (metrics.md §8):
- ``/v1/status/ready`` (Redpanda's path and body): 200 ``{"status": "ready"}`` once the broker is
  RUNNING and the group and transaction coordinators have loaded their topics, else 503
  ``{"status": "booting"}`` (``waiting`` says for what) or, after SIGTERM, 503
  ``{"status": "shutting_down"}``. Redpanda answers 200 in every case; 503 is what Kubernetes'
  ``httpGet`` probes need. A broker whose cleaner threads died stays ready (clients are served)
  but says so: ``"degraded"`` lists the dead threads (and the metrics count them).
- ``/v1/broker-state`` (Strimzi's KafkaAgent): ``{"brokerState": N}``, always 200.
- ``/healthz`` (liveness): 200 ``{"status": "ok"}`` when the event loop runs a callback within
  1 s, else 503 ``{"status": "stalled"}``. It does not look at the cleaner or Spark: a long
  round is not a dead broker.
- ``/v1/broker``: who this broker is (node and cluster id, listeners, version, uptime, data dir,
  state).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

from ... import __version__
from .listener import HttpRequest, HttpResponse, json_response

NOT_RUNNING, STARTING, RECOVERY, RUNNING, PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN = 0, 1, 2, 3, 6, 7
STATE_NAMES = {NOT_RUNNING: "NOT_RUNNING", STARTING: "STARTING", RECOVERY: "RECOVERY", RUNNING: "RUNNING",
               PENDING_CONTROLLED_SHUTDOWN: "PENDING_CONTROLLED_SHUTDOWN", SHUTTING_DOWN: "SHUTTING_DOWN"}
LIVENESS_TIMEOUT_S = 1.0


class BrokerLifecycle:
    def __init__(self):
        self.state = NOT_RUNNING
        self.started_at = time.time()
        self._started_mono = time.monotonic()

    def set(self, state: int) -> None:
        self.state = state

    @property
    def name(self) -> str:
        return STATE_NAMES.get(self.state, str(self.state))

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self._started_mono


SHUTDOWN_HOLD_ENV = "COMPACTLOG_TEST_SHUTDOWN_HOLD_FILE"
SHUTDOWN_HOLD_MAX_S = 30.0


async def shutdown_hold() -> None:
    """Test hook: with ``COMPACTLOG_TEST_SHUTDOWN_HOLD_FILE=path``, a stopping broker waits (at
    most 30 s) while that file exists, after it said it is shutting down and before it stops its
    listeners, so that a test can probe it then."""
    path = os.environ.get(SHUTDOWN_HOLD_ENV)
    if not path:
        return
    deadline = time.monotonic() + SHUTDOWN_HOLD_MAX_S
    while os.path.exists(path) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def readiness(metrics) -> tuple[int, dict]:
    """(HTTP status, body) of ``/v1/status/ready`` for a ``BrokerMetrics``."""
    lifecycle = metrics.lifecycle
    if lifecycle.state in (SHUTTING_DOWN, PENDING_CONTROLLED_SHUTDOWN) or metrics.stopping:
        return 503, {"status": "shutting_down"}
    waiting = []
    if lifecycle.state != RUNNING:
        waiting.append(f"broker {lifecycle.name.lower()}")
    state = metrics.state
    for what, service in (("group coordinator loading __consumer_offsets", getattr(state, "groups", None)),
                          ("transaction coordinator loading __transaction_state",
                           getattr(state, "transactions", None))):
        loaded = getattr(service, "loaded", None)
        if service is None or (loaded is not None and not loaded.is_set()):
            waiting.append(what)
    if waiting:
        return 503, {"status": "booting", "waiting": waiting}
    body: dict = {"status": "ready"}
    degraded = degradations(metrics)
    if degraded:
        body["degraded"] = degraded
    return 200, body


def degradations(metrics) -> list[str]:
    """What works less than it should while clients are served: dead cleaner threads."""
    background = metrics.background
    if background is None:
        return []
    out = []
    now_ms = int(time.time() * 1000)
    for name, h in sorted(background.activity.threads().items()):
        if h.dead_since_ms is not None:
            restart = max((h.restart_at_ms or now_ms) - now_ms, 0) / 1000
            out.append(f"{name} died ({h.last_error}); {h.deaths} death(s), restarted in {restart:.1f} s")
    return out


def liveness(metrics) -> tuple[int, dict]:
    """Whether the event loop runs a callback scheduled from this thread within 1 s."""
    loop = metrics.loop
    if loop is None or loop.is_closed():
        # before the loop runs (loading logs) or after it stopped: the process is alive
        return 200, {"status": "ok", "loop_lag_seconds": 0.0}
    ran = threading.Event()
    begun = time.monotonic()
    try:
        loop.call_soon_threadsafe(ran.set)
    except RuntimeError:        # closed meanwhile
        return 200, {"status": "ok", "loop_lag_seconds": 0.0}
    ok = ran.wait(LIVENESS_TIMEOUT_S)
    lag = round(time.monotonic() - begun, 6)
    return (200, {"status": "ok", "loop_lag_seconds": lag}) if ok else (503, {"status": "stalled",
                                                                              "loop_lag_seconds": lag})


def broker_info(metrics) -> dict:
    state = metrics.state
    lifecycle = metrics.lifecycle
    return {"nodeId": metrics.node_id, "clusterId": metrics.cluster_id,
            "listeners": metrics.bound_listeners(),
            "advertisedListeners": [str(x) for x in metrics.advertised],
            "metricsListener": metrics.http.url if metrics.http is not None else None,
            "version": __version__, "startTimeMs": int(lifecycle.started_at * 1000),
            "uptimeSeconds": round(lifecycle.uptime_s, 3),
            "dataDir": metrics.datadir.path if metrics.datadir is not None else None,
            "brokerState": lifecycle.state, "state": lifecycle.name,
            "apis": [a.name for a in getattr(state, "apis", None) or ()]}


# -- the routes ---------------------------------------------------------------------------------

def ready_route(request: HttpRequest) -> HttpResponse:
    return json_response(*readiness(request.context))


def broker_state_route(request: HttpRequest) -> HttpResponse:
    return json_response(200, {"brokerState": request.context.lifecycle.state})


def liveness_route(request: HttpRequest) -> HttpResponse:
    return json_response(*liveness(request.context))


def broker_route(request: HttpRequest) -> HttpResponse:
    return json_response(200, broker_info(request.context))


ROUTES = {"/v1/status/ready": ready_route, "/v1/broker-state": broker_state_route,
          "/healthz": liveness_route, "/v1/broker": broker_route}
