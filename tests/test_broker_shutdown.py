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
from compactlog.server.conftest import fetch_body
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


def pending_bytes(sock) -> int:
    """Bytes waiting in the socket's receive queue, unread (FIONREAD)."""
    import array
    import fcntl
    import termios
    n = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, n)
    return n[0]


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


def test_sigterm_with_tls_clients_in_the_handshake_or_not_reading(tmp_path):
    """A TLS listener (the reproduction: SIGTERM always waited the whole 5 s grace period, for a
    client still in the TLS handshake): a client that connected and sent nothing, one that sent
    its ClientHello and never read the answer, and two that asked for the whole partition again
    and again without reading (as above). Each is closed at once; nothing waits for the grace
    period, and the data dir is left clean."""
    import ssl

    from security_support import SecureBroker, make_pki, security_overrides

    from compactlog.server.app import SHUTDOWN_GRACE_S
    from compactlog.server.transport_test import metadata_body

    pki = make_pki(tmp_path / "pki")
    broker = SecureBroker(tmp_path / "data", security_overrides(
        pki, "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **{"auto.create.topics.enable": "true", "num.partitions": "1"})).start()
    ctx = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.pem"))
    stalled = []
    try:
        writer = socket.create_connection(("127.0.0.1", broker.ports["PLAINTEXT"]))
        writer.sendall(frame(3, 9, 1, metadata_body(9, ["big"])))
        read_frame(writer)
        for i in range(16):
            writer.sendall(produce_frame("big", 10 + i, 1000))
            read_frame(writer)
        writer.close()

        def small_socket():
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", broker.ports["SSL"]))
            stalled.append(s)
            return s

        small_socket()                                  # connected, sends nothing
        outgoing = ssl.MemoryBIO()
        hello = ctx.wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname="127.0.0.1")
        with pytest.raises(ssl.SSLWantReadError):
            hello.do_handshake()
        small_socket().sendall(outgoing.read())         # a ClientHello, then never a read
        for part_max in (60_000, 1 << 22):
            s = ctx.wrap_socket(small_socket(), server_hostname="127.0.0.1")
            s.sendall(b"".join(frame(1, 12, i, fetch_body("big", 0, 0, max_bytes=part_max, part_max=part_max))
                               for i in range(100)))
            stalled[-1] = s
        # the broker answered the ClientHello (it accepted both handshake clients: they came
        # first) and began answering the fetches
        deadline = time.monotonic() + 30
        while not all(pending_bytes(s) for s in stalled[1:]):
            assert time.monotonic() < deadline, "the broker never answered"
            time.sleep(0.05)
        started = time.monotonic()
        broker.proc.send_signal(signal.SIGTERM)
        broker.proc.wait(60)
        took = time.monotonic() - started
    finally:
        for s in stalled:
            s.close()
        broker.kill()
    log = broker.log_text()
    assert broker.proc.returncode == 0, log[-3000:]
    assert "still in flight" not in log, log[-3000:]
    assert "a TLS handshake in progress is dropped" in log, log[-3000:]
    assert took < SHUTDOWN_GRACE_S, f"SIGTERM took {took:.1f} s with TLS clients that do not read"
    assert "shut down completed" in log
    assert os.path.exists(tmp_path / "data" / ".kafka_cleanshutdown")
