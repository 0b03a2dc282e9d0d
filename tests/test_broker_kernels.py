"""The broker's kernels at start (``server/warm.py``): with the ahead-of-time build, a broker warms
up without numba and serves a real client's produce and consume (past the plain-Python budget)
without ever loading it, its event loop included; without the build it loads numba in the warm-up
as before."""

from __future__ import annotations

import pytest

from broker_support import Broker, wait_until
from compactlog import aot

pytestmark = pytest.mark.broker

RECORDS = 3000          # ~300 KB: past the 256 KiB a process runs in plain Python


def _mapped(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def _produce_and_consume(bootstrap: str) -> int:
    from confluent_kafka import Consumer, Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce("t", key=b"key-%05d" % (i % 500), value=b"v" * 80)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe(["t"])
    got = 0
    try:
        def read_all():
            nonlocal got
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got += 1
            return got >= RECORDS
        wait_until(read_all, timeout=60, interval=0, what=f"{RECORDS} records consumed")
    finally:
        c.close()
    return got


@pytest.mark.parametrize("route", aot.ROUTES)
def test_a_broker_serves_produce_and_consume_on_the_kernels_its_warm_up_loaded(tmp_path, route):
    if route == "ahead-of-time" and aot.unusable_reason():
        pytest.skip(aot.unusable_reason())
    b = Broker(tmp_path / "data", {"num.partitions": "1"}, env=aot.route_environment(route)).start()
    try:
        wanted = ("Loaded the ahead-of-time kernels (numba not loaded)" if route == "ahead-of-time"
                  else "Loaded the numba kernels")
        wait_until(lambda: wanted in b.log_text() or "Loading the numba kernels at start failed" in b.log_text(),
                   timeout=120, what="the broker's kernel warm-up")
        assert wanted in b.log_text(), b.log_text()
        assert _produce_and_consume(b.bootstrap) == RECORDS
        llvm = "libllvmlite" in _mapped(b.pid) or "llvmlite" in _mapped(b.pid)
        assert llvm == (route == "numba"), f"llvmlite mapped: {llvm}"
    finally:
        assert b.stop() == 0
    assert "Traceback" not in b.log_text(), b.log_text()
