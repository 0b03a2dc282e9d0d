"""Fetch (``apis/fetch.py``): the hand-written response encoder against kio's, byte for byte, for
every version served; file regions stand for the same bytes as in-memory records; reads through
the handler within the limits, the long poll woken by an append, and fetches racing appends,
swaps and retention."""

from __future__ import annotations

import asyncio
import datetime
import os
import time

import pytest
from kio.schema.errors import ErrorCode

from compactlog.server.apis.fetch import PartitionRead, encode_fetch_response, handle_fetch, read_fetch
from compactlog.server.conftest import batch, fetch_body, produce, request
from compactlog.server.messages import build, nested
from compactlog.server.protocol import EncodedResponse, FileRegion, Request, encode_response
from compactlog.server.versions import response_schema

RECORDS = bytes(range(256)) * 3


def _topics(records):
    return [("orders", [PartitionRead(0, 0, 10, 9, 2, None, records),
                        PartitionRead(3, ErrorCode.offset_out_of_range.value, 10, 10, 2, None, b"")]),
            ("t2", [PartitionRead(1, 0, 5, 4, 0, [(7, 1), (9, 3)], b"")])]


def _kio_frame(version: int, topics) -> bytes:
    cls = response_schema(1, version)
    t_cls, p_cls, a_cls = (nested(cls, n) for n in ("FetchableTopicResponse", "PartitionData",
                                                     "AbortedTransaction"))
    responses = tuple(
        build(t_cls, topic=name, partitions=tuple(
            build(p_cls, partition_index=p.partition, error_code=ErrorCode(p.error),
                  high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                  log_start_offset=p.log_start_offset,
                  aborted_transactions=None if p.aborted is None else tuple(
                      build(a_cls, producer_id=pid, first_offset=off) for pid, off in p.aborted),
                  preferred_read_replica=-1, records=p.records) for p in parts))
        for name, parts in topics)
    body = build(cls, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
                 responses=responses)
    request = Request(1, version, 42, "c", None, None, 0, version, True)
    return encode_response(request, body)


def _flatten(resp: EncodedResponse) -> bytes:
    out = b""
    for part in resp.parts:
        out += part.read() if isinstance(part, FileRegion) else bytes(part)
    assert len(out) == resp.size
    return out


@pytest.mark.parametrize("version", range(4, 13))
def test_encoder_matches_kio(version):
    expected = _kio_frame(version, _topics(RECORDS))
    got = encode_fetch_response(42, version, _topics(RECORDS))
    assert _flatten(got) == expected


@pytest.mark.parametrize("version", [4, 11, 12])
def test_file_regions_encode_as_their_bytes(tmp_path, version):
    path = tmp_path / "seg.log"
    path.write_bytes(b"x" * 100 + RECORDS + b"y" * 50)
    fd = os.open(path, os.O_RDONLY)
    region = FileRegion(fd, 100, len(RECORDS))
    resp = encode_fetch_response(42, version, _topics(region))
    try:
        assert [type(p) for p in resp.parts] == [bytearray, FileRegion, bytearray]
        assert _flatten(resp) == _kio_frame(version, _topics(RECORDS))
    finally:
        resp.close()
    assert region.fd == -1


@pytest.mark.slow          # threads racing for a while: 2 s of CPU
def test_fetches_during_appends_swaps_and_retention_see_only_logged_bytes(tmp_path):
    """Appends, the cleaner's swaps and retention on one partition while fetches read it, both
    as bytes and through duplicated descriptors (the sendfile path): every fetch succeeds and
    every record it returns is the one appended at that offset."""
    import threading
    import time

    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.record.batch import iter_batches
    from compactlog.server.state import BrokerState, Listener
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir

    dd = DataDir(str(tmp_path), broker=BrokerConfig({}), writable=True, command="test")
    dd.create_topic("t", 1, {"cleanup.policy": "compact,delete", "segment.bytes": "1500",
                             "min.cleanable.dirty.ratio": "0.01", "retention.bytes": "20000"})
    state = BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1))
    log = state.log("t", 0)
    produced = {}
    stop = threading.Event()
    failures = []
    counts = {"fetches": 0, "cleans": 0, "regions": 0}

    def append():
        i = 0
        while not stop.is_set():
            keys = [b"k%d" % ((i + j) % 7) for j in range(3)]
            values = [b"v%d-%d" % (i, j) + b"." * 40 for j in range(3)]
            info = log.append_records(keys, values)
            for j in range(3):
                produced[info.first_offset + j] = (keys[j], values[j])
            i += 1
            time.sleep(0.001)

    def clean():
        while not stop.is_set():
            try:
                Cleaner(dd).run(int(time.time() * 1000))
                log.delete_old_segments()
                counts["cleans"] += 1
            except Exception as e:          # noqa: BLE001 - reported by the assertion below
                failures.append(f"cleaner: {type(e).__name__}: {e}")

    def fetch():
        while not stop.is_set():
            start = log.log_start_offset
            zero_copy = 1 if counts["fetches"] % 2 else 1 << 30
            try:
                r = read_fetch(state, fetch_body("t", 0, start, part_max=4000, max_bytes=4000), 12,
                               zero_copy_min=zero_copy)
            except Exception as e:          # noqa: BLE001
                failures.append(f"fetch: {type(e).__name__}: {e}")
                continue
            [(_, [p])] = r.topics
            try:
                if p.error:
                    if p.error != ErrorCode.offset_out_of_range.value:   # retention moved on
                        failures.append(f"fetch error {p.error}")
                    continue
                data = p.records
                if isinstance(data, FileRegion):
                    counts["regions"] += 1
                    time.sleep(0.002)       # let a swap or retention happen under the descriptor
                    data = data.read()
                for b in iter_batches(data):
                    b.ensure_valid()
                    for rec in b.records():
                        if produced.get(rec.offset) != (rec.key, rec.value):
                            failures.append(f"offset {rec.offset}: {rec.key!r} was not appended there")
                counts["fetches"] += 1
            finally:
                r.close()

    threads = [threading.Thread(target=f) for f in (append, clean, fetch, fetch)]
    for t in threads:
        t.start()
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join(30)
    dd.close()
    assert not failures, failures[:5]
    assert counts["fetches"] > 50 and counts["regions"] > 10 and counts["cleans"] > 5, counts


# -- reads through the handler --------------------------------------------------------------------

def test_fetch_reads_whole_batches_within_limits(state):
    state.create_topic("t", 1)
    sizes = []
    for i in range(4):
        b = batch([b"k%d" % i] * 3)
        sizes.append(len(b))
        produce(state, [("t", 0, b)])
    r = read_fetch(state, fetch_body("t", 0, 4), 12)
    [(_, [p])] = r.topics
    assert (p.error, p.high_watermark, p.last_stable_offset) == (0, 12, 12)
    assert len(p.records) == sum(sizes[1:]) and p.aborted is None
    # the first partition gets one whole batch even over both limits
    r = read_fetch(state, fetch_body("t", 0, 0, max_bytes=10, part_max=10), 12)
    assert len(r.topics[0][1][0].records) == sizes[0]
    r = read_fetch(state, fetch_body("t", 0, 0), 12, zero_copy_min=1)
    region = r.topics[0][1][0].records
    assert isinstance(region, FileRegion) and region.count == sum(sizes)
    r.close()
    r = read_fetch(state, fetch_body("t", 0, 13), 12)
    assert r.topics[0][1][0].error == ErrorCode.offset_out_of_range.value and r.has_error
    r = read_fetch(state, fetch_body("t", 0, 0, isolation=1), 12)
    assert r.topics[0][1][0].aborted == []


def test_fetch_long_poll_wakes_on_append(state):
    state.create_topic("t", 1)

    async def scenario():
        state.appends.bind(asyncio.get_running_loop())
        run = lambda fn, *args: asyncio.get_running_loop().run_in_executor(None, fn, *args)  # noqa: E731
        body = fetch_body("t", 0, 0, max_wait_ms=5000)
        started = time.monotonic()
        task = asyncio.ensure_future(handle_fetch(state, request(1, 12, body), run))
        await asyncio.sleep(0.2)
        assert not task.done()
        await run(produce, state, [("t", 0, batch([b"k"]))])
        resp = await asyncio.wait_for(task, 3)
        assert time.monotonic() - started < 3
        return resp

    resp = asyncio.run(scenario())
    assert resp.size > 100


def test_a_small_tail_fetch_is_read_on_the_event_loop_and_anything_that_could_wait_in_a_worker(state):
    """Issue 28's fetch on the loop: a read of the active segment with the partition's lock free
    is answered without a worker thread; a read of an older segment (maybe not in the page cache),
    or one whose partition lock is held (an fsync, a cleaner swap), goes to a worker as before,
    with the same answer."""
    import threading
    state.create_topic("t", 1)
    for i in range(3):
        produce(state, [("t", 0, batch([b"k%d" % i] * 2))])
    handed_off = []
    handing = threading.Event()

    async def fetch(offset):
        loop = asyncio.get_running_loop()

        def run(fn, *args):
            handed_off.append(offset)
            handing.set()
            return loop.run_in_executor(None, fn, *args)
        return await handle_fetch(state, request(1, 12, fetch_body("t", 0, offset)), run)

    def answer(offset):
        resp = asyncio.run(fetch(offset))
        try:
            return _flatten(resp)
        finally:
            resp.close()

    tail = answer(2)
    assert handed_off == [] and len(tail) > 100
    lg = state.log("t", 0)
    lg.roll()
    produce(state, [("t", 0, batch([b"late"]))])
    assert answer(0) and handed_off == [0]          # from the segment before the roll
    assert answer(6) and handed_off == [0]          # the active segment: on the loop
    held, release = threading.Event(), threading.Event()

    def hold():
        with lg.lock:
            held.set()
            release.wait(10)
    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    try:
        result = {}
        waiter = threading.Thread(target=lambda: result.setdefault("frame", answer(6)))
        handing.clear()
        waiter.start()
        assert handing.wait(10) and handed_off == [0, 6]      # the lock was busy: handed off
    finally:
        release.set()
        t.join(10)
    waiter.join(10)
    assert result["frame"] == answer(6) and handed_off == [0, 6]


def _fetch_answer(state, body, version=12):
    """handle_fetch's answer to ``body`` read back as kio's FetchResponse."""
    from kio.serial import entity_reader

    async def go():
        loop = asyncio.get_running_loop()
        return await handle_fetch(state, request(1, version, body),
                                  lambda fn, *args: loop.run_in_executor(None, fn, *args))
    resp = asyncio.run(go())
    if isinstance(resp, EncodedResponse):
        try:
            frame = _flatten(resp)
        finally:
            resp.close()
    else:
        frame = encode_response(request(1, version, body), resp)
    return entity_reader(response_schema(1, version))(frame, 8 + (version >= 12))[0]


def test_fetch_sessions_as_kafkas_fetch_manager_reads_them(state):
    """No session is ever created (every answer says session 0). Kafka's FetchManager.newContext:
    a full request (epoch 0 or -1) is answered whatever session id it names (a named session is
    closed, and 0 answered when none is made); any other epoch names a session that must exist:
    FETCH_SESSION_ID_NOT_FOUND, with no partitions (SessionErrorContext), session id 0 included."""
    import dataclasses
    state.create_topic("t", 1)
    produce(state, [("t", 0, batch([b"k"]))])
    plain = fetch_body("t", 0, 0)
    for session, epoch in ((0, -1), (0, 0), (77, -1), (77, 0)):
        resp = _fetch_answer(state, dataclasses.replace(plain, session_id=session, session_epoch=epoch))
        [t] = resp.responses
        assert (resp.error_code, resp.session_id) == (ErrorCode.none, 0), (session, epoch)
        assert t.partitions[0].error_code == ErrorCode.none and t.partitions[0].records
    for session, epoch in ((0, 1), (77, 3), (0, -2)):
        resp = _fetch_answer(state, dataclasses.replace(plain, session_id=session, session_epoch=epoch))
        assert (resp.error_code, resp.session_id, resp.responses) == \
            (ErrorCode.fetch_session_id_not_found, 0, ()), (session, epoch)


def test_fetch_error_response_is_kafkas_get_error_response(state):
    """FetchRequest.getErrorResponse (a failed request: an exception, an unknown isolation
    level): before v13 the code is both top-level and in every partition (hw -1), and the session
    id is the request's. IsolationLevel.forId throws on anything but 0 and 1: UNKNOWN_SERVER_ERROR."""
    import dataclasses
    from compactlog.server.apis.fetch import FETCH
    state.create_topic("t", 1)
    produce(state, [("t", 0, batch([b"k"]))])
    plain = fetch_body("t", 0, 0)
    for version in (7, 11, 12):
        body = dataclasses.replace(fetch_body("t", 0, 0, version=version), session_id=5, session_epoch=-1)
        resp = FETCH.error_body(request(1, version, body), ErrorCode.kafka_storage_error)
        assert (resp.error_code, resp.session_id) == (ErrorCode.kafka_storage_error, 5)
        [[p]] = [t.partitions for t in resp.responses]
        assert (p.partition_index, p.error_code, p.high_watermark) == (0, ErrorCode.kafka_storage_error, -1)
    for level in (2, -1):
        resp = _fetch_answer(state, dataclasses.replace(plain, isolation_level=level))
        assert resp.error_code == ErrorCode.unknown_server_error
        [[p]] = [t.partitions for t in resp.responses]
        assert (p.error_code, p.records) == (ErrorCode.unknown_server_error, b"")


def test_fetch_data_is_kafkas_ordered_map_of_partitions(state):
    """FetchRequest.fetchData is a LinkedHashMap keyed by the partition: a partition named twice
    is read once, where it was first named, with its last fetch offset; FetchResponse.toMessage
    then puts consecutive partitions of one topic in one topic entry."""
    import dataclasses
    from compactlog.server.messages import build, nested
    from compactlog.server.versions import request_schema
    state.create_topic("t", 2)
    state.create_topic("u", 1)
    for i in range(3):
        produce(state, [("t", 0, batch([b"k%d" % i])), ("t", 1, batch([b"k%d" % i])), ("u", 0, batch([b"u"]))])
    cls = request_schema(1, 12)
    t_cls, p_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")

    def part(i, offset):
        return build(p_cls, partition=i, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                     log_start_offset=-1, last_fetched_epoch=-1)
    body = dataclasses.replace(fetch_body("t", 0, 0), topics=(
        build(t_cls, topic="t", partitions=(part(0, 0), part(0, 2))),
        build(t_cls, topic="t", partitions=(part(1, 1),)),
        build(t_cls, topic="u", partitions=(part(0, 0),)),
        build(t_cls, topic="t", partitions=(part(0, 1),))))
    resp = _fetch_answer(state, body)
    got = [(t.topic, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.responses]
    assert got == [("t", [(0, ErrorCode.none), (1, ErrorCode.none)]), ("u", [(0, ErrorCode.none)])]
    # t-0 was read from its last offset (1): two batches, as t-1 from offset 1
    t0, t1 = resp.responses[0].partitions
    assert len(t0.records) == len(t1.records) > 0
