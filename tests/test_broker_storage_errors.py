"""A full disk on the wire and at start, on a small tmpfs (skipped where mount is not allowed; the
same failures are injected in-process by compactlog/server/wire_errors_test.py and
compactlog/storage/loader_test.py). The reproductions: FindCoordinator answered
UNKNOWN_SERVER_ERROR with the server's file path in its message, and a failed start left an
empty ``*.log.discarded``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest
from kio.schema.errors import ErrorCode

from broker_support import Broker
from compactlog.server.messages import build
from compactlog.server.transport_test import frame, metadata_body
from compactlog.server.versions import request_schema, response_schema
from kio.serial import entity_reader
from test_broker_shutdown import produce_frame, read_frame

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def broker_on(data: str, overrides: dict | None = None) -> Broker:
    """A broker of ``data`` (on the small tmpfs) whose own log is written outside it: on a full
    tmpfs its "started" line could not be written, and the test would wait for it in vain."""
    broker = Broker(data, overrides) if overrides else Broker(data)
    broker.log_path = os.path.join(os.path.dirname(os.path.dirname(data)), "broker-logs", "stderr.log")
    return broker


def fill(mnt) -> str:
    path = os.path.join(mnt, "fill")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 16, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return path


def call(port: int, api_key: int, version: int, body):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(frame(api_key, version, 7, body))
        data = read_frame(s)
    cls = response_schema(api_key, version)
    header, n = entity_reader(cls.__header_schema__)(data, 0)
    return entity_reader(cls)(data, n)[0]


def test_full_disk_answers_and_start(tmpfs):
    data = os.path.join(tmpfs, "data")
    broker = broker_on(data, {"auto.create.topics.enable": "true", "num.partitions": "1",
                           "offsets.topic.num.partitions": "3"}).start()
    try:
        call(broker.port, 3, 9, metadata_body(9, ["t"]))               # creates t
        with socket.create_connection(("127.0.0.1", broker.port)) as s:
            s.sendall(produce_frame("t", 1, 10))
            read_frame(s)
        filler = fill(tmpfs)
        try:
            check_answers_on_a_full_disk(broker, data)
        finally:
            os.remove(filler)
    finally:
        assert broker.stop() == 0
    check_a_failed_start_keeps_nothing_empty(tmpfs, data)


def check_answers_on_a_full_disk(broker, data: str) -> None:
    if True:
        # FindCoordinator: __consumer_offsets cannot be created
        fc = call(broker.port, 10, 3, build(request_schema(10, 3), key="g", key_type=0))
        assert fc.error_code == ErrorCode.coordinator_not_available, fc
        assert data not in (fc.error_message or "") and "/" not in (fc.error_message or "")
        # Produce: the partition's storage error, no path
        with socket.create_connection(("127.0.0.1", broker.port)) as s:
            s.sendall(produce_frame("t", 2, 2000))
            cls = response_schema(0, 9)
            raw = read_frame(s)
            header, n = entity_reader(cls.__header_schema__)(raw, 0)
            answer = entity_reader(cls)(raw, n)[0]
        [part] = answer.responses[0].partition_responses
        assert part.error_code == ErrorCode.kafka_storage_error, part
        # names the partition's file at most, never where the data dir is
        assert data not in (part.error_message or "") and not part.error_message.startswith("/")


def check_a_failed_start_keeps_nothing_empty(tmpfs, data: str) -> None:
    # a torn tail to recover, then a start on a full disk: it fails, leaving no empty copy of the
    # bytes recovery would set aside; with room again it starts and keeps them
    os.remove(os.path.join(data, ".kafka_cleanshutdown"))
    seg = os.path.join(data, "t-0", "00000000000000000000.log")
    with open(seg, "ab") as f:
        f.write(b"\0" * 8 + b"\0\0\x01\0" + b"x" * 100)
    filler = fill(tmpfs)
    try:
        broker = broker_on(data)
        try:
            broker.start()
            broker.stop()           # it found room for what it set aside (tmpfs frees pages as it goes)
        except RuntimeError as e:
            # refused: one line naming the full disk
            assert "No space left on device" in str(e)
            errors = [ln for ln in broker.log_text().splitlines() if ln.startswith("error:")]
            assert len(errors) == 1, broker.log_text()[-2000:]
        finally:
            broker.kill()
        kept = [n for n in os.listdir(os.path.join(data, "t-0")) if n.endswith(".discarded")]
        assert all(os.path.getsize(os.path.join(data, "t-0", n)) > 0 for n in kept), kept
    finally:
        os.remove(filler)
    broker = broker_on(data).start()
    try:
        kept = [n for n in os.listdir(os.path.join(data, "t-0")) if n.endswith(".discarded")]
        assert kept and all(os.path.getsize(os.path.join(data, "t-0", n)) == 112 for n in kept)
    finally:
        assert broker.stop() == 0


def test_disk_full_then_freed_loses_no_acknowledged_record(tmpfs):
    """The reproduction: a large batch is refused by a full disk (a short write), space is freed,
    100 records are produced (acks=all, idempotent) and acknowledged, the broker restarts (SIGTERM):
    all 100 are served at their acknowledged offsets, the refused batch never, and the broker's
    log has no traceback. Before, the torn bytes stayed in the segment behind the acknowledged
    records and recovery quarantined all of them at the restart."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    data = os.path.join(tmpfs, "data")
    broker = broker_on(data, {"auto.create.topics.enable": "true", "num.partitions": "1",
                              "message.max.bytes": "2000000"}).start()
    conf = {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": 3000, "linger.ms": 0, "message.max.bytes": 2_000_000}
    acked: dict[bytes, int] = {}
    failed: list = []

    def delivered(err, msg):
        if err is None:
            acked[msg.value()] = msg.offset()
        else:
            failed.append(err)

    try:
        p = Producer(conf)
        p.produce("t", key=b"first", value=b"first", on_delivery=delivered)
        p.flush(10)
        filler = fill(tmpfs)
        # room for part of it only: free 600 KB of the filler, then send 1 MB incompressible
        os.truncate(filler, max(0, os.path.getsize(filler) - 600_000))
        p.produce("t", key=b"big", value=os.urandom(1_000_000), on_delivery=delivered)
        p.flush(15)
        assert failed, "the large batch should not fit"
        os.remove(filler)
        for i in range(100):
            p.produce("t", key=b"k%d" % i, value=b"after-%d" % i, on_delivery=delivered)
        p.flush(15)
        del p
        assert len(acked) == 101, (len(acked), failed[-3:])
        assert all(len(v) < 100 for v in acked)
    finally:
        assert broker.stop() == 0
    text = broker.log_text()
    assert "Traceback" not in text, text[-3000:]
    broker = broker_on(data).start()
    try:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.partition.eof": True})
        c.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
        served = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == -191, m.error()     # end of partition
                break
            served[m.value()] = m.offset()
        c.close()
    finally:
        assert broker.stop() == 0
    assert served == acked
