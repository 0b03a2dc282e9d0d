"""A single-record transaction in-process, without sockets (a script, not a test): the Python
calls and the thread CPU the broker's request path spends on one (issue 28).

A data dir opened as ``compactlog serve`` opens it, with both coordinators (the transaction
coordinator's unit-test ``Broker``), the numba kernels warmed as the broker warms them; then
confluent-kafka's requests of a transaction (AddPartitionsToTxn v0, Produce v10 with one
16-byte key and 100-byte value, EndTxn v1 committing), each framed as the client frames it and
taken through what the transport does with it: ``protocol.Connection`` decodes it, the API's
quick handler answers it (the event loop's path), the request metrics time it and count its
errors, the connection encodes the answer. The count of Python calls (cProfile) does not depend
on the machine's load; the CPU seconds do (the thread's CPU in the requests alone).

``--pollute BYTES`` reads a buffer of that size between requests, outside the time taken: what a
client running on the same cores does to the caches between a broker's requests (the broker of
``benchmarks/transactions.py`` shares this machine's two cores with librdkafka). Each size is
measured in turn, in the same run, e.g. ``--pollute 0,1000000,4000000``.

``--gap US`` sleeps that many microseconds before each request, outside the time taken: the
broker's thread idle between requests as it is between a client's (``benchmarks/transactions.py``:
a request every ~0.7 ms). On this VM the same requests then cost up to twice their CPU back to
back, with nothing else running: the caches (and whatever the host ran on the core meanwhile)
are cold when the thread wakes. Each gap is measured in turn after the ``--pollute`` sizes, e.g.
``--gap 300,2000``.

    PYTHONPATH=CHECKOUT .venv/bin/python benchmarks/txn_calls.py [--transactions N] [--no-metrics]
        [--pollute BYTES,...] [--gap US,...]
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import pstats
import shutil
import struct
import tempfile
import time

import numpy as np
from kio.serial import entity_writer
from prometheus_client import CollectorRegistry

from compactlog.coordinator.conftest import Clock
from compactlog.coordinator.txn.conftest import Broker
from compactlog.record import jit
from compactlog.record.batch import BatchSpec, encode_small_batch
from compactlog.server.dispatch import advertised_apis, dispatch_table
from compactlog.server.messages import build, nested
from compactlog.server.metrics.requests import RequestMetrics
from compactlog.server.protocol import Connection
from compactlog.server.versions import request_schema
from compactlog.server.warm import warm_kernels

MS = datetime.timedelta(milliseconds=1)
WARM_TRANSACTIONS = 200


def frame(api_key: int, version: int, correlation_id: int, body) -> bytes:
    cls = request_schema(api_key, version)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(out, build(header_cls, request_api_key=api_key, request_api_version=version,
                                         correlation_id=correlation_id, client_id="rdkafka"))
    entity_writer(cls)(out, body)
    data = out.getvalue()
    return struct.pack(">i", len(data)) + data


class Path:
    """One connection's requests through the protocol, the dispatch table and the metrics."""

    def __init__(self, state, metrics: bool = True):
        self.state = state
        self.table = dispatch_table()
        state.apis = advertised_apis(self.table)
        self.conn = Connection(state.apis, 100 << 20)
        self.metrics = RequestMetrics(CollectorRegistry()) if metrics else None

    def serve(self, data: bytes):
        view = self.conn.get_buffer(len(data))
        view[:len(data)] = data
        self.conn.buffer_updated(len(data))
        request = self.conn.next_event()
        api = self.table[request.api_key]
        if self.metrics is None:        # the transport without an observer (metrics.listener empty)
            body = api.quick(self.state, request) if api.quick is not None else None
            if body is None:
                body = api.handler(self.state, request)
            self.conn.send(request, body)
            return body
        timer = self.metrics.request_started(request)
        begun = time.perf_counter()
        body = api.quick(self.state, request) if api.quick is not None else None
        if body is None:
            body = api.handler(self.state, request)
        timer.local += time.perf_counter() - begun
        self.metrics.request_answered(timer, body)
        self.conn.send(request, body)
        self.metrics.request_sent(timer)
        return body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=2000)
    ap.add_argument("--no-metrics", action="store_true", help="no request metrics (metrics.listener empty)")
    ap.add_argument("--pollute", type=lambda s: [int(x) for x in s.split(",")], default=[0],
                    help="bytes read between requests, outside the time taken (comma-separated: each in turn)")
    ap.add_argument("--gap", type=lambda s: [int(x) for x in s.split(",")], default=[],
                    help="microseconds slept before each request, outside the time taken (comma-separated: "
                         "each in turn, after the --pollute sizes)")
    args = ap.parse_args()
    n = args.transactions
    work = tempfile.mkdtemp(prefix="compactlog-txn-calls-")
    clock = Clock()
    broker = Broker(os.path.join(work, "data"), clock, **{"transaction.state.log.num.partitions": "50"})
    try:
        state = broker.state
        state.create_topic("t", 1)
        warm_kernels()
        jit.mark_warm()
        path = Path(state, metrics=not args.no_metrics)
        init = path.serve(frame(22, 4, 1, build(request_schema(22, 4), transactional_id="bench",
                                                transaction_timeout=60000 * MS, producer_id=-1, producer_epoch=-1)))
        pid, epoch = init.producer_id, init.producer_epoch
        add_cls, end_cls, produce_cls = request_schema(24, 0), request_schema(26, 1), request_schema(0, 10)
        add = frame(24, 0, 2, build(add_cls, v3_and_below_transactional_id="bench", v3_and_below_producer_id=pid,
                                    v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                                        build(nested(add_cls, "AddPartitionsToTxnTopic"), name="t", partitions=(0,)),)))
        end = frame(26, 1, 3, build(end_cls, transactional_id="bench", producer_id=pid, producer_epoch=epoch,
                                    committed=True))

        def produce(sequence: int) -> bytes:
            batch = encode_small_batch(BatchSpec(transactional=True, producer_id=pid, producer_epoch=epoch,
                                                 base_sequence=sequence), [0], [clock()], [b"%016d" % sequence],
                                       [b"v" * 100])
            data = build(nested(produce_cls, "PartitionProduceData"), index=0, records=batch)
            return frame(0, 10, 4, build(produce_cls, transactional_id="bench", acks=-1, timeout=30000 * MS,
                                         topic_data=(build(nested(produce_cls, "TopicProduceData"), name="t",
                                                           partition_data=(data,)),)))

        conditions = [(size, 0) for size in args.pollute] + [(0, gap) for gap in args.gap]
        produces = [produce(i) for i in range(WARM_TRANSACTIONS + (1 + len(conditions)) * n)]
        spent = [0.0]
        junk = None
        gap_s = 0.0

        def timed(data: bytes):
            if junk is not None:
                junk.sum()              # the caches as another process leaves them
            if gap_s:
                time.sleep(gap_s)       # idle, as between a client's requests
            begun = time.thread_time()
            body = path.serve(data)
            spent[0] += time.thread_time() - begun
            return body

        def transaction(i: int, serve=path.serve) -> None:
            codes = (serve(add).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
                     serve(produces[i]).responses[0].partition_responses[0].error_code,
                     serve(end).error_code)
            if any(codes):
                raise RuntimeError(f"transaction {i} answered {codes}")

        for i in range(WARM_TRANSACTIONS):
            transaction(i)
        profile = cProfile.Profile()
        profile.enable()
        for i in range(WARM_TRANSACTIONS, WARM_TRANSACTIONS + n):
            transaction(i)
        profile.disable()
        calls = pstats.Stats(profile).total_calls / n
        first = WARM_TRANSACTIONS + n
        for k, (size, gap) in enumerate(conditions):
            junk = np.ones(size, dtype=np.uint8) if size else None
            gap_s = gap / 1e6
            spent[0] = 0.0
            for i in range(first + k * n, first + (k + 1) * n):
                transaction(i, timed)
            between = f", {size:,} bytes read between requests" if size else ""
            between += f", {gap:,} us asleep before each request" if gap else ""
            print(f"{n:,} single-record transactions in-process{between}: {calls:,.0f} Python calls and "
                  f"{1e6 * spent[0] / n:,.0f} us of thread CPU a transaction", flush=True)
    finally:
        broker.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
