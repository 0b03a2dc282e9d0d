"""Helpers of the transaction conformance suite (tests/test_txn_conformance_*.py, transactions.md
§6.3): one transactional producer interface over confluent-kafka, kafka-python and aiokafka, each
client's own consumer reading a topic to its end (the last stable offset for read_committed),
a blocking raw-kio connection for the requests no client sends as the test needs them, and
readers of what the broker wrote (segment batches, ``.txnindex`` entries, ``__transaction_state``
records) straight from the data dir's files, in this process (no dump-log subprocess per look).

Every wait is bounded; nothing here starts a broker (broker_support.Broker does)."""

from __future__ import annotations

import asyncio
import datetime
import glob
import io
import os
import socket
import struct
import threading
import time
import typing
import uuid
from dataclasses import fields

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from compactlog.record import transaction_log as TL
from compactlog.record.batch import BatchSpec, encode_batch, iter_batches
from compactlog.record.consumer_offsets import partition_for
from compactlog.server.messages import build
from compactlog.server.versions import request_schema, response_schema
from compactlog.storage.txn_index import TransactionIndex

E = ErrorCode
CLIENTS = ("confluent", "kafka-python", "aiokafka")
STATE_NAMES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"]
WAIT_S = 60             # a bound on each wait for the broker or a group (30 s was short for a rebalance at load 15-20)
# the brokers of the suite: the coordinator's timers fast, a group joins at once, members of a
# killed application leave the group after a short session timeout
BROKER_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
                 "group.initial.rebalance.delay.ms": "0",
                 "group.min.session.timeout.ms": "500"}


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def client_param(client: str):
    """A pytest param for ``client`` (skipped when the client library is missing)."""
    module = {"confluent": "confluent_kafka", "kafka-python": "kafka", "aiokafka": "aiokafka"}[client]
    return pytest.param(client, id=client, marks=pytest.mark.skipif(
        not _importable(module), reason=f"{module} is not installed"))


def _importable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


ALL_CLIENTS = [client_param(c) for c in CLIENTS]
INSTALLED = [c for c in CLIENTS if _importable({"confluent": "confluent_kafka", "kafka-python": "kafka",
                                                "aiokafka": "aiokafka"}[c])]


# -- topics -------------------------------------------------------------------------------------------

def create_topics(bootstrap: str, plain: str | None = None, compacted: str | None = None,
                  partitions: int = 2, **compacted_configs) -> None:
    """The suite's pair: ``plain`` (delete) and ``compacted`` (cleanup.policy=compact), 2 partitions."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})     # held: a dropped handle cancels its futures
    new = []
    if plain:
        new.append(NewTopic(plain, partitions, 1))
    if compacted:
        new.append(NewTopic(compacted, partitions, 1,
                            config={"cleanup.policy": "compact", **{k.replace("_", "."): str(v)
                                                                   for k, v in compacted_configs.items()}}))
    for f in admin.create_topics(new).values():
        f.result(WAIT_S)


# -- aiokafka: one event loop in a thread for the blocking tests ------------------------------------------

class _LoopThread:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        t = threading.Thread(target=self.loop.run_forever, daemon=True, name="aiokafka-loop")
        t.start()

    def run(self, coro, timeout: float = WAIT_S):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


_loop_thread: _LoopThread | None = None


def aio(coro, timeout: float = WAIT_S):
    global _loop_thread
    if _loop_thread is None:
        _loop_thread = _LoopThread()
    return _loop_thread.run(coro, timeout)


# -- one transactional producer, three clients ----------------------------------------------------------

class TxnProducer:
    """``init / begin / send / flush / send_offsets / commit / abort / close`` for one client.

    ``fenced(exc)`` says whether ``exc`` is that client's "this producer is fenced" error:
    librdkafka a fatal KafkaException (_FENCED, PRODUCER_FENCED or INVALID_PRODUCER_EPOCH),
    kafka-python ``ProducerFencedError`` (it maps 47 and 90 onto it), aiokafka ``ProducerFenced``."""

    def __init__(self, client: str, bootstrap: str, transactional_id: str, *, timeout_ms: int | None = None,
                 **extra):
        self.client, self.tid = client, transactional_id
        if client == "confluent":
            from confluent_kafka import Producer
            conf = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                    "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20,
                    "retry.backoff.max.ms": 100, **extra}
            if timeout_ms is not None:
                conf["transaction.timeout.ms"] = timeout_ms
            self.p = Producer(conf)
        elif client == "kafka-python":
            import kafka
            kw = dict(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5,
                      reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, retry_backoff_ms=20, **extra)
            if timeout_ms is not None:
                kw["transaction_timeout_ms"] = timeout_ms
            self.p = kafka.KafkaProducer(**kw)
        elif client == "aiokafka":
            import aiokafka

            async def make():
                kw = dict(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5,
                          retry_backoff_ms=20, **extra)
                if timeout_ms is not None:
                    kw["transaction_timeout_ms"] = timeout_ms
                return aiokafka.AIOKafkaProducer(**kw)
            self.p = aio(make())
        else:
            raise ValueError(client)
        self._pending = []

    def init(self) -> "TxnProducer":
        if self.client == "confluent":
            self.p.init_transactions(WAIT_S)
        elif self.client == "kafka-python":
            self.p.init_transactions()
        else:
            aio(self.p.start())            # FindCoordinator + InitProducerId
            aio(self.p._txn_manager.wait_for_pid())
        return self

    def begin(self) -> None:
        if self.client == "aiokafka":
            aio(self.p.begin_transaction())
        else:
            self.p.begin_transaction()

    def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int = 0) -> None:
        if self.client == "confluent":
            self.p.produce(topic, value=value, key=key, partition=partition)
        elif self.client == "kafka-python":
            self._pending.append(self.p.send(topic, value=value, key=key, partition=partition))
        else:
            self._pending.append(aio(self.p.send(topic, value=value, key=key, partition=partition)))

    def flush(self) -> None:
        """Every send delivered (or failed: the failure is raised)."""
        pending, self._pending = self._pending, []
        if self.client == "confluent":
            self.p.flush(WAIT_S)
        elif self.client == "kafka-python":
            self.p.flush(WAIT_S)
            for f in pending:
                f.get(WAIT_S)
        else:
            async def wait():
                for f in pending:
                    await f
            aio(wait())

    def send_offsets(self, offsets: dict[tuple[str, int], int], group) -> None:
        """``offsets``: (topic, partition) -> next offset to read; ``group``: the consumer's group
        metadata (confluent, kafka-python) or the group id."""
        if self.client == "confluent":
            from confluent_kafka import TopicPartition
            self.p.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                               group, WAIT_S)
        elif self.client == "kafka-python":
            from kafka import OffsetAndMetadata, TopicPartition
            self.p.send_offsets_to_transaction(
                {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}, group)
        else:
            from aiokafka import TopicPartition
            aio(self.p.send_offsets_to_transaction({TopicPartition(t, p): o for (t, p), o in offsets.items()},
                                                   group))

    def commit(self) -> None:
        if self.client == "confluent":
            self.p.commit_transaction(WAIT_S)
        elif self.client == "kafka-python":
            self.p.commit_transaction()
        else:
            aio(self.p.commit_transaction())
        self._pending = []

    def abort(self) -> None:
        if self.client == "confluent":
            self.p.abort_transaction(WAIT_S)
        elif self.client == "kafka-python":
            self.p.abort_transaction()
        else:
            aio(self.p.abort_transaction())
        self._pending = []

    def producer_id_and_epoch(self) -> tuple[int, int]:
        if self.client == "kafka-python":
            pe = self.p._transaction_manager.producer_id_and_epoch
            return pe.producer_id, pe.epoch
        if self.client == "aiokafka":
            return self.p._txn_manager.producer_id, self.p._txn_manager.producer_epoch
        raise NotImplementedError("librdkafka does not expose its producer id")

    def close(self) -> None:
        try:
            if self.client == "confluent":
                self.p.flush(0)
            elif self.client == "kafka-python":
                self.p.close(timeout=2)
            else:
                aio(self.p.stop(), 10)
        except Exception:
            pass                            # a fenced or failed producer may refuse to close cleanly

    def fenced(self, exc: BaseException) -> bool:
        if self.client == "confluent":
            from confluent_kafka import KafkaError, KafkaException
            if not isinstance(exc, KafkaException):
                return False
            err = exc.args[0]
            return err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                                  KafkaError.INVALID_PRODUCER_EPOCH)
        if self.client == "kafka-python":
            import kafka.errors as KE
            return isinstance(exc, (KE.ProducerFencedError, KE.InvalidProducerEpochError))
        import aiokafka.errors as AE
        return isinstance(exc, AE.ProducerFenced)

    def expect_fenced(self, action) -> BaseException:
        """Run ``action`` (a callable); it must fail with this client's fenced error."""
        try:
            action()
        except Exception as e:                              # noqa: BLE001 (classified below)
            assert self.fenced(e), f"{self.client}: not a fenced error: {e!r}"
            return e
        raise AssertionError(f"{self.client}: no error, the producer was not fenced")


# -- each client's consumer, to the end of the partitions --------------------------------------------------

def read(client: str, bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[tuple]:
    """(partition, offset, key, value) of every record the client delivers from offset 0 up to the
    end (the last stable offset for read_committed), in each partition's order."""
    return {"confluent": _read_confluent, "kafka-python": _read_kafka_python,
            "aiokafka": _read_aiokafka}[client](bootstrap, topic, isolation, partitions)


def values(records) -> list[bytes]:
    return [r[3] for r in records]


def _read_confluent(bootstrap, topic, isolation, partitions):
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("reader"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation, "fetch.wait.max.ms": 50})
    try:
        # the leader known before the assignment: else librdkafka waits 500 ms to look up BEGINNING
        c.list_topics(topic, WAIT_S)
        c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        out, eof = [], set()
        deadline = time.monotonic() + WAIT_S
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out.append((m.partition(), m.offset(), m.key(), m.value()))
        assert len(eof) == partitions, f"no end of partition within {WAIT_S} s"
        return sorted(out)
    finally:
        c.close()


def _read_kafka_python(bootstrap, topic, isolation, partitions):
    import kafka
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                            group_id=None, fetch_max_wait_ms=50)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)            # the consumer's isolation level: the LSO for read_committed
        out = []
        deadline = time.monotonic() + WAIT_S
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"kafka-python did not reach {end} within {WAIT_S} s"
            for tp, recs in c.poll(timeout_ms=100).items():
                out.extend((tp.partition, r.offset, r.key, r.value) for r in recs)
        return sorted(out)
    finally:
        c.close()


def _read_aiokafka(bootstrap, topic, isolation, partitions):
    import aiokafka

    async def run():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                      enable_auto_commit=False, fetch_max_wait_ms=50)
        await c.start()
        try:
            tps = [aiokafka.TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            end = await c.end_offsets(tps)
            out = []
            deadline = time.monotonic() + WAIT_S
            while True:
                positions = {tp: await c.position(tp) for tp in tps}
                if all(positions[tp] >= end[tp] for tp in tps):
                    return sorted(out)
                assert time.monotonic() < deadline, f"aiokafka did not reach {end} within {WAIT_S} s"
                for tp, recs in (await c.getmany(timeout_ms=100)).items():
                    out.extend((tp.partition, r.offset, r.key, r.value) for r in recs)
        finally:
            await c.stop()
    return aio(run(), WAIT_S + 10)


# -- raw kio requests through a socket -----------------------------------------------------------------

def make(cls, spec: dict):
    """A kio entity of class ``cls`` from a dict; nested entities and arrays of them from dicts and
    lists of dicts (their classes read from ``cls``'s annotations), the rest filled by ``build``;
    names the version lacks are left out, as ``build`` does."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):
        if f.name not in spec:
            continue
        v = spec[f.name]
        nested_cls = _entity_of(hints[f.name])
        if nested_cls is not None and v is not None:
            v = tuple(make(nested_cls, x) for x in v) if isinstance(v, (list, tuple)) else make(nested_cls, v)
        values[f.name] = v
    return build(cls, **values)


def _entity_of(hint):
    for t in (hint, *typing.get_args(hint)):
        for u in (t, *typing.get_args(t)):
            if isinstance(u, type) and hasattr(u, "__dataclass_fields__"):
                return u
    return None


class Raw:
    """A blocking connection sending kio requests of any version: ``call(api_key, version, **body)``."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, **body):
        payload = self.call_bytes(api_key, version, **body)
        rcls = response_schema(api_key, version)
        header, n = entity_reader(rcls.__header_schema__)(payload, 0)
        assert header.correlation_id == self.correlation_id
        return entity_reader(rcls)(payload, n)[0]

    def call_bytes(self, api_key: int, version: int, **body) -> bytes:
        """The response's bytes (header included)."""
        cls = request_schema(api_key, version)
        hdr = cls.__header_schema__
        self.correlation_id += 1
        buf = io.BytesIO()
        entity_writer(hdr)(buf, hdr(request_api_key=api_key, request_api_version=version,
                                    correlation_id=self.correlation_id, client_id="conformance"))
        entity_writer(cls)(buf, make(cls, body))
        data = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the transactional requests --
    def init_producer_id(self, tid: str | None, *, timeout_ms: int = 60000, version: int = 4,
                         expected: tuple[int, int] = (-1, -1)):
        r = self.call(22, version, transactional_id=tid,
                      transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                      producer_id=expected[0], producer_epoch=expected[1])
        return r.error_code, r.producer_id, r.producer_epoch

    def add_partitions(self, tid: str, pid: int, epoch: int, partitions: dict[str, list[int]],
                       version: int = 3) -> dict[tuple[str, int], ErrorCode]:
        r = self.call(24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                      v3_and_below_producer_epoch=epoch,
                      v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in partitions.items()])
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> ErrorCode:
        return self.call(25, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                         group_id=group).error_code

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> ErrorCode:
        return self.call(26, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                         committed=commit).error_code

    def produce(self, tid: str | None, parts: list[tuple[str, int, bytes]], version: int = 9) -> dict:
        """``parts``: (topic, partition, encoded batch); {(topic, partition): error code}."""
        by_topic: dict[str, list] = {}
        for t, p, records in parts:
            by_topic.setdefault(t, []).append({"index": p, "records": records})
        r = self.call(0, version, transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=10),
                      topic_data=[{"name": t, "partition_data": ps} for t, ps in by_topic.items()])
        return {(t.name, p.index): p.error_code for t in r.responses for p in t.partition_responses}

    def txn_offset_commit(self, tid: str, group: str, pid: int, epoch: int, offsets: dict[tuple[str, int], int],
                          version: int = 3, generation: int = -1, member: str = "") -> dict:
        topics: dict[str, list] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
        r = self.call(28, version, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                      generation_id=generation, member_id=member, group_instance_id=None,
                      topics=[{"name": t, "partitions": ps} for t, ps in topics.items()])
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    def offset_fetch(self, group: str, topic: str, partitions: list[int], require_stable: bool,
                     version: int = 7) -> dict[int, tuple[ErrorCode, int]]:
        r = self.call(9, version, group_id=group, require_stable=require_stable,
                      topics=[{"name": topic, "partition_indexes": partitions}])
        return {p.partition_index: (p.error_code, p.committed_offset) for t in r.topics for p in t.partitions}

    def list_offset(self, topic: str, partition: int, read_committed: bool, timestamp: int = -1) -> int:
        r = self.call(2, 5, replica_id=-1, isolation_level=1 if read_committed else 0,
                      topics=[{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                                              "current_leader_epoch": -1}]}])
        p = r.topics[0].partitions[0]
        assert p.error_code == E.none, p
        return p.offset

    def fetch(self, topic: str, partition: int, offset: int = 0, read_committed: bool = True):
        """The partition's fetch response (v11): high watermark, last stable offset,
        aborted_transactions, records."""
        r = self.call(1, 11, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                      isolation_level=1 if read_committed else 0, session_id=0, session_epoch=-1,
                      topics=[{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                               "log_start_offset": -1, "partition_max_bytes": 1 << 20,
                                                               "current_leader_epoch": -1}]}],
                      forgotten_topics_data=[], rack_id="")
        p = r.responses[0].partitions[0]
        assert p.error_code == E.none, p
        return p

    def describe_producers(self, topic: str, partition: int) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, coordinator epoch, current transaction start offset)
        of each active producer of the partition (DescribeProducers v0)."""
        r = self.call(61, 0, topics=[{"name": topic, "partition_indexes": [partition]}])
        [p] = r.topics[0].partitions
        assert p.error_code == E.none, p
        return sorted((a.producer_id, a.producer_epoch, a.last_sequence, a.coordinator_epoch,
                       a.current_txn_start_offset) for a in p.active_producers)

    def describe_transaction(self, tid: str) -> "Described":
        """DescribeTransactions v0 for one id, read here: kio cannot read the -1 start time of a
        transaction that has not started (its timestamp reader refuses negative values)."""
        r = _Reader(self.call_bytes(65, 0, transactional_ids=[tid]))
        assert r.i32() == self.correlation_id
        r.tags()
        r.i32()                                     # throttle time
        assert r.uvarint() == 2, "one transaction state"
        d = Described(E(r.i16()), r.string(), r.string(), r.i32(), r.i64(), r.i64(), r.i16(),
                      tuple((r.string(), tuple(r.i32() for _ in range(r.uvarint() - 1)), r.tags())[:2]
                            for _ in range(r.uvarint() - 1)))
        return d


class Described(typing.NamedTuple):
    error_code: ErrorCode
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: tuple


class _Reader:
    """Just enough of the flexible encoding for DescribeTransactions v0."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _unpack(self, fmt: str):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self):
        return self._unpack(">h")

    def i32(self):
        return self._unpack(">i")

    def i64(self):
        return self._unpack(">q")

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes], *, transactional: bool = True,
              keys: list[bytes] | None = None) -> bytes:
    spec = BatchSpec(base_offset=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=transactional)
    now = int(time.time() * 1000)
    keys = keys or [None] * len(values)
    return encode_batch(spec, [(i, now, k, v) for i, (k, v) in enumerate(zip(keys, values))])


# -- what the broker wrote, from its files -----------------------------------------------------------------

def _segments(data_dir: str, topic: str, partition: int, ext: str) -> list[str]:
    d = os.path.join(str(data_dir), f"{topic}-{partition}")
    return sorted(glob.glob(os.path.join(d, f"*.{ext}")))


def batches(data_dir: str, topic: str, partition: int) -> list:
    """Every batch of the partition, from its segment files in offset order (headers and records
    read now: the files may change after). The broker's cleaner may be swapping segments while
    this reads (``.cleaned`` -> ``.swap``, the old ``.log`` files -> ``.deleted``, ``.swap`` ->
    ``.log``): a view is taken only when no ``.swap`` file was there and the ``.log`` files were
    the same before and after the read, else it is read again."""
    d = os.path.join(str(data_dir), f"{topic}-{partition}")
    deadline = time.monotonic() + WAIT_S
    while True:
        before = sorted(os.listdir(d))
        logs = [n for n in before if n.endswith(".log")]
        out = []
        try:
            if not any(n.endswith(".swap") for n in before):
                for name in logs:
                    with open(os.path.join(d, name), "rb") as f:
                        buf = f.read()
                    out.extend(BatchView(b) for b in iter_batches(buf))
                after = sorted(os.listdir(d))
                if [n for n in after if n.endswith(".log")] == logs and not any(n.endswith(".swap") for n in after):
                    return out
        except FileNotFoundError:
            pass
        assert time.monotonic() < deadline, f"{d}: no stable view of the segments within {WAIT_S} s"
        time.sleep(0.01)


class BatchView:
    """What the tests ask of a stored batch."""

    def __init__(self, b):
        h = b.header
        self.base_offset, self.last_offset = h.base_offset, h.last_offset
        self.producer_id, self.producer_epoch = h.producer_id, h.producer_epoch
        self.is_control, self.is_transactional = h.is_control, h.is_transactional
        self.delete_horizon_ms = h.delete_horizon_ms
        recs = b.records()
        self.records = [(r.offset, r.key, r.value) for r in recs]
        self.control = b.control_type() if h.is_control and recs else None     # 0 ABORT, 1 COMMIT

    def __repr__(self) -> str:
        kind = {None: "data", 0: "ABORT", 1: "COMMIT"}[self.control] if self.is_control or self.control is None \
            else "?"
        return f"<{kind} {self.base_offset}-{self.last_offset} pid {self.producer_id} epoch {self.producer_epoch}>"


def markers(data_dir: str, topic: str, partition: int) -> list[tuple[str, int, int, int]]:
    """(COMMIT|ABORT, offset, producer id, epoch) of each control batch."""
    return [("COMMIT" if b.control == 1 else "ABORT", b.base_offset, b.producer_id, b.producer_epoch)
            for b in batches(data_dir, topic, partition) if b.is_control]


def txn_index(data_dir: str, topic: str, partition: int) -> list:
    out = []
    for path in _segments(data_dir, topic, partition, "txnindex"):
        out.extend(TransactionIndex(path, int(os.path.basename(path).split(".")[0]), read_only=True).entries())
    return out


def state_records(data_dir: str, tid: str, partitions: int = 50,
                  value_version: int = 1) -> list[tuple[str, int, int]]:
    """(state name or "<tombstone>", producer id, epoch) of each ``__transaction_state`` record of
    ``tid``, in log order (every value must be of ``value_version``: v1 at transaction.version 2)."""
    out = []
    p = partition_for(tid, partitions)
    for b in batches(data_dir, "__transaction_state", p):
        for _, key, value in b.records:
            if key is None or TL.read_key(key) != tid:
                continue
            if value is None:
                out.append(("<tombstone>", -1, -1))
                continue
            version = struct.unpack(">h", value[:2])[0]
            assert version == value_version, f"a v{version} __transaction_state value, not v{value_version}"
            v = TL.read_value(value)
            out.append((STATE_NAMES[v.transaction_status], v.producer_id, v.producer_epoch))
    return out


def states(data_dir: str, tid: str) -> list[str]:
    """The states written for ``tid``, repeats of one state folded (kafka-python may add a
    transaction's partitions in two requests: Ongoing twice)."""
    out = []
    for s, _, _ in state_records(data_dir, tid):
        if not out or out[-1] != s:
            out.append(s)
    return out


def wait_until(predicate, timeout: float = WAIT_S, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
