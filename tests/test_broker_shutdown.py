"""SIGTERM ends the broker within seconds even when clients stopped reading (the reproduction:
it waited the full 30 s grace period): their unread answers are dropped, their connections closed,
and the data dir is left clean (the clean-shutdown marker written, the next start recovers
nothing)."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time

import pytest

from broker_support import Broker
from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.server.handlers_test import fetch_body
from compactlog.server.messages import build, nested
from compactlog.server.transport_test import frame
from compactlog.server.versions import request_schema

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def produce_frame(topic: str, correlation_id: int, n: int) -> bytes:
    cls = request_schema(0, 9)
    now = int(time.time() * 1000)
    records = encode_batch(BatchSpec(base_offset=0), [(i, now, b"k%d" % i, b"v" * 500) for i in range(n)])
    import datetime
    body = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                 topic_data=(build(nested(cls, "TopicProduceData"), name=topic, partition_data=(
                     build(nested(cls, "PartitionProduceData"), index=0, records=records),)),))
    return frame(0, 9, correlation_id, body)


def read_frame(sock) -> bytes:
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_sigterm_with_clients_that_stopped_reading(tmp_path):
    broker = Broker(tmp_path / "data", {"auto.create.topics.enable": "true", "num.partitions": "1"}).start()
    stalled = []
    try:
        writer = socket.create_connection(("127.0.0.1", broker.port))
        # Metadata auto-creates the topic, then 8 MB of records in 1,000-record batches
        from compactlog.server.transport_test import metadata_body
        writer.sendall(frame(3, 9, 1, metadata_body(9, ["big"])))
        read_frame(writer)
        for i in range(16):
            writer.sendall(produce_frame("big", 10 + i, 1000))
            read_frame(writer)
        writer.close()
        # clients that ask for the whole partition again and again and never read an answer: one
        # under the zero-copy size (written: asyncio's flow control), one above it (sendfile)
        for part_max in (60_000, 1 << 22):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", broker.port))
            s.sendall(b"".join(frame(1, 12, i, fetch_body("big", 0, 0, max_bytes=part_max, part_max=part_max))
                               for i in range(100)))
            stalled.append(s)
        time.sleep(2)                       # the broker fills their socket buffers and waits
        started = time.monotonic()
        broker.proc.send_signal(signal.SIGTERM)
        broker.proc.wait(60)
        took = time.monotonic() - started
    finally:
        for s in stalled:
            s.close()
        broker.kill()
    assert broker.proc.returncode == 0, broker.log_text()[-3000:]
    assert took < 8, f"SIGTERM took {took:.1f} s with clients that do not read"
    log = broker.log_text()
    assert "does not read its answers" in log or "unread answers dropped" in log or \
        "an answer being sent is dropped" in log, log[-3000:]
    assert "shut down completed" in log
    assert os.path.exists(tmp_path / "data" / ".kafka_cleanshutdown")
