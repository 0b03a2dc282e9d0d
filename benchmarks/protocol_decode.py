#!/usr/bin/env python3
"""Decode cost per request of compactlog's sans-IO protocol core (compactlog.server.protocol).

For the captured Produce requests (tests/data/wire-captures) and a Produce request carrying one
1 MiB batch: the whole path a broker runs per request (Connection.receive_data + next_event:
framing, header, array-count scan, kio body decode, the Request event), and its parts (the
scan alone, kio alone), then the kio-encoded Produce response. Best of several repeats, in µs
per request. Not a test: a script that prints a table.

    .venv/bin/python benchmarks/protocol_decode.py [--number N] [--repeat R]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import io
import os
import struct
import sys
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

from compactlog.server.dispatch import BROKER  # noqa: E402
from compactlog.server.precheck import scan  # noqa: E402
from compactlog.server.protocol import Connection, encode_response  # noqa: E402
from compactlog.server.versions import request_schema, response_schema  # noqa: E402

CAPTURES = os.path.join(ROOT, "tests", "data", "wire-captures")


def capture(name: str) -> bytes:
    with open(os.path.join(CAPTURES, name + ".bin"), "rb") as f:
        return f.read()


def big_produce(records_size: int) -> bytes:
    """The 0_9 capture with its partitions replaced by one partition of ``records_size`` bytes."""
    payload = capture("0_9")
    cls = request_schema(0, 9)
    header, n = entity_reader(cls.__header_schema__)(payload, 0)
    body, _ = entity_reader(cls)(payload, n)
    topic = body.topic_data[0]
    part = dataclasses.replace(topic.partition_data[0], records=b"\x01" * records_size)
    body = dataclasses.replace(body, topic_data=(dataclasses.replace(topic, partition_data=(part,)),))
    out = io.BytesIO()
    entity_writer(type(header))(out, header)
    entity_writer(cls)(out, body)
    return out.getvalue()


def produce_response(request):
    cls = response_schema(0, request.response_version)
    mod = sys.modules[cls.__module__]
    extra = {"record_errors": ()} if request.response_version >= 8 else {}
    partitions = tuple(
        mod.PartitionProduceResponse(index=p, error_code=ErrorCode.none, base_offset=1000,
                                     log_append_time=None, log_start_offset=0, **extra)
        for _, p, _ in request.produce_records())
    topic = request.body.topic_data[0].name
    return cls(responses=(mod.TopicProduceResponse(name=topic, partition_responses=partitions),),
               throttle_time=datetime.timedelta(0))


def best_us(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=20000, help="calls per repeat")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)

    cases = [(f"Produce capture {n}", capture(n)) for n in ("0_10", "0_9", "0_7")]
    cases.append(("Produce, one 1 MiB batch", big_produce(1 << 20)))
    print(f"{'request':30} {'bytes':>8} {'decode':>8} {'scan':>7} {'kio':>7} {'encode resp':>12}"
          "   (µs per request, best of %d x %d)" % (args.repeat, args.number))
    for label, payload in cases:
        frame = struct.pack(">i", len(payload)) + payload
        conn = Connection(BROKER)

        def decode():
            conn.receive_data(frame)
            return conn.next_event()

        request = decode()
        assert request.api_key == 0, request
        number = args.number if len(payload) < 65536 else max(args.number // 50, 10)
        cls = type(request.body)
        _, body_start = entity_reader(cls.__header_schema__)(payload, 0)
        reader = entity_reader(cls)
        response = produce_response(request)
        t_decode = best_us(decode, number, args.repeat)
        t_scan = best_us(lambda: scan(cls, payload, body_start, len(payload)), number, args.repeat)
        t_kio = best_us(lambda: reader(payload, body_start), number, args.repeat)
        t_encode = best_us(lambda: encode_response(request, response), number, args.repeat)
        print(f"{label:30} {len(payload):8d} {t_decode:8.2f} {t_scan:7.2f} {t_kio:7.2f} "
              f"{t_encode:12.2f}")
    print("\ndecode = Connection.receive_data + next_event (framing, header, scan, kio body, "
          "Request event);\nscan = the array-count check alone; kio = kio's body reader alone; "
          "encode resp = encode_response of a kio ProduceResponse.")


if __name__ == "__main__":
    main()
