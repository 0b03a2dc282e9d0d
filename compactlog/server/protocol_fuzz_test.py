"""Fuzzing the protocol core: any bytes, however split across reads (handed over as bytes or read
into the connection's receive buffer, as the broker reads), give only Request, Close or
NEED_DATA, never an exception, a crash (kio's native reader included) or a hang; a closed
connection stays closed. Mutated real client frames (flipped, truncated, extended, re-sized,
re-keyed) and plain random bytes. Behind it, the admin handlers (``apis/``) on mutated captured
admin requests: every request kio decodes is answered, never raised."""

from __future__ import annotations

import os
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from compactlog.server.apis.conftest import create, make_state  # noqa: F401 (the fixture)
from compactlog.server.conftest import ALL_APIS, CAPTURE_NAMES, KIO_MAX_APIS, capture, framed
from compactlog.server.dispatch import dispatch_table
from compactlog.server.protocol import NEED_DATA, Close, Connection, Request, encode_response

# COMPACTLOG_FUZZ_EXAMPLES=20000 for a long run of the hypothesis tests
FUZZ = settings(max_examples=int(os.environ.get("COMPACTLOG_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# COMPACTLOG_PROTOCOL_FUZZ_CASES=1000000 COMPACTLOG_PROTOCOL_FUZZ_SEED=N for a long run
MUTATED_CASES = int(os.environ.get("COMPACTLOG_PROTOCOL_FUZZ_CASES", "60000"))
MUTATED_SEED = int(os.environ.get("COMPACTLOG_PROTOCOL_FUZZ_SEED", "0x6B61666B61"), 0)
MAX_REQUEST_SIZE = 1 << 16

PAYLOADS = [capture(n) for n in CAPTURE_NAMES]
INTERESTING_INT32 = [-1, -2, 0, 1, 3, 127, 128, 255, 4096, 65535, 1 << 24, 2**31 - 1, -2**31]
INTERESTING_VARINTS = [b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xff\xff\xff\xff\x07",
                       b"\xff\xff\xff\xff\x7f", b"\xff\xff\xff\xff\xff"]


def feed(conn: Connection, chunk: bytes, buffered: bool) -> None:
    """One read: handed over as bytes, or written into the connection's receive buffer as the
    broker's transport does it (``get_buffer``/``buffer_updated``, as many reads as it takes)."""
    if not buffered:
        conn.receive_data(chunk)
        return
    view = memoryview(chunk)
    while view:
        room = conn.get_buffer(-1)
        n = min(len(room), len(view))
        room[:n] = view[:n]
        room.release()
        conn.buffer_updated(n)
        view = view[n:]


def run(conn: Connection, chunks, buffered: bool = False) -> list:
    """Feed ``chunks`` one read at a time; check every event; return them."""
    events = []
    for chunk in chunks:
        feed(conn, chunk, buffered)
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                break
            events.append(event)
            assert len(events) < 10_000, "a finite input gave endless events"
            if isinstance(event, Close):
                assert isinstance(event.reason, str) and event.reason
                assert conn.closed is event and conn.next_event() is event
                break
            check_request(event)
        if conn.closed is not None:
            feed(conn, framed(PAYLOADS[0]), buffered)
            assert conn.next_event() is conn.closed
            break
    return events


def check_request(event) -> None:
    assert isinstance(event, Request), event
    assert type(event.body).__api_key__ == event.api_key
    assert type(event.body).__version__ == event.response_version
    assert isinstance(event.correlation_id, int) and isinstance(event.client_id, str)
    assert 4 <= event.frame_size <= MAX_REQUEST_SIZE
    if event.api_key == 18:
        apis = KIO_MAX_APIS
        encode_response(event, apis.api_versions_response(event.api_version, event.body))
    elif event.api_key == 0:
        for topic, partition, records in event.produce_records():
            assert isinstance(topic, str) and isinstance(partition, int)
            assert records is None or type(records) is bytes
        assert event.expects_response == (event.body.acks != 0)


def mutate(rng: random.Random, payload: bytes) -> bytes:
    b = bytearray(payload)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        p = rng.randrange(len(b) + 1)
        if op == 0 and b:                                       # flip bytes
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1:                                           # truncate
            del b[p:]
        elif op == 2:                                           # extend / insert
            b[p:p] = rng.randbytes(rng.randint(1, 32))
        elif op == 3:                                           # forge a count or length
            b[p:p + rng.choice([2, 4])] = struct.pack(">i", rng.choice(INTERESTING_INT32))
        elif op == 4:                                           # forge a compact length
            b[p:p + 1] = rng.choice(INTERESTING_VARINTS)
        elif op == 5 and len(b) >= 2:                           # another API key
            b[0:2] = struct.pack(">h", rng.choice([rng.randrange(-2, 70), 18, 0, 1, 3]))
        elif op == 6 and len(b) >= 4:                           # another version
            b[2:4] = struct.pack(">h", rng.choice([rng.randrange(-2, 20), 32767, -32768]))
        elif op == 7 and b:                                     # duplicate a slice
            q = rng.randrange(len(b))
            b[p:p] = b[q:q + rng.randint(1, 16)]
    return bytes(b)


def frame_of(rng: random.Random, payload: bytes) -> bytes:
    r = rng.random()
    if r < 0.85:
        return framed(payload)
    if r < 0.9:                                                 # a size that lies
        return struct.pack(">i", max(len(payload) + rng.randint(-8, 8), 0)) + payload
    return struct.pack(">i", rng.choice(INTERESTING_INT32 + [MAX_REQUEST_SIZE + 1])) + payload


def split(rng: random.Random, data: bytes) -> list[bytes]:
    if rng.random() < 0.5 or not data:
        return [data]
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 6)))
    return [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]


def classify(event) -> str:
    if isinstance(event, Request):
        return "request"
    reason = event.reason
    for label, marker in (("count refused", "declares"), ("size", "request size"),
                          ("unknown key", "unknown API key"), ("version", "enabled versions"),
                          ("malformed", "malformed")):
        if marker in reason:
            return label
    return "other close"


# the fast lane runs the first QUICK_CASES of the same seeded sequence; the slow lane all of them
QUICK_CASES = 3000


@pytest.mark.parametrize("cases", [pytest.param(QUICK_CASES, id="quick"),
                                   pytest.param(MUTATED_CASES, id="full", marks=pytest.mark.slow)])
def test_mutated_client_frames(cases):
    rng = random.Random(MUTATED_SEED)
    seen: dict[str, int] = {}
    healthy = Connection(ALL_APIS, max_request_size=MAX_REQUEST_SIZE)   # a well-behaved client
    healthy_frame = framed(capture("0_9"))
    for case in range(cases):
        frames = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            payload = rng.choice(PAYLOADS)
            if rng.random() < 0.8:
                payload = mutate(rng, payload)
            frames.append(frame_of(rng, payload))
        apis = KIO_MAX_APIS if case % 2 else ALL_APIS
        conn = Connection(apis, max_request_size=MAX_REQUEST_SIZE)
        for event in run(conn, split(rng, b"".join(frames)), buffered=case % 4 < 2):
            label = classify(event)
            seen[label] = seen.get(label, 0) + 1
        healthy.receive_data(healthy_frame)
        assert isinstance(healthy.next_event(), Request)    # no state shared between connections
    # the mutations reach every decision point many times (1000 times in 60000 cases)
    for label in ("request", "count refused", "size", "unknown key", "version", "malformed"):
        assert seen.get(label, 0) >= cases // 60, seen


@FUZZ
@given(st.binary(max_size=2048), st.integers(min_value=1, max_value=64), st.booleans())
def test_random_bytes(data, step, buffered):
    conn = Connection(KIO_MAX_APIS, max_request_size=MAX_REQUEST_SIZE)
    run(conn, [data[i:i + step] for i in range(0, len(data), step)], buffered)


@FUZZ
@given(st.sampled_from([(r.key, v) for r in KIO_MAX_APIS
                        for v in range(r.accepted_min, r.max_version + 1)]),
       st.integers(min_value=-2**31, max_value=2**31 - 1),
       st.one_of(st.none(), st.text(max_size=20)),
       st.binary(max_size=512))
def test_valid_header_random_body(key_version, correlation_id, client_id, body):
    key, version = key_version
    cid = b"\xff\xff" if client_id is None else (
        struct.pack(">h", len(client_id.encode())) + client_id.encode())
    flexible_header = b"\x00" if _flexible(key, version) else b""
    payload = struct.pack(">hhi", key, version, correlation_id) + cid + flexible_header + body
    (event,) = run(Connection(KIO_MAX_APIS, max_request_size=MAX_REQUEST_SIZE), [framed(payload)])
    if isinstance(event, Request):
        assert (event.api_key, event.api_version, event.correlation_id) == (key, version,
                                                                            correlation_id)
        assert event.client_id == (client_id or "")
    else:
        assert "malformed" in event.reason


def _flexible(key: int, version: int) -> bool:
    from compactlog.server.versions import request_schema
    return request_schema(key, version).__header_schema__.__version__ == 2


# -- mutated admin requests, through the handlers ---------------------------------------------------

@pytest.fixture
def admin_state(make_state):
    return make_state()


@pytest.mark.parametrize("cases", [pytest.param(2000, id="quick"),
                                   pytest.param(10000, id="full", marks=pytest.mark.slow)])
def test_mutated_admin_requests_are_answered_never_raised(admin_state, cases):
    """Random byte flips in the captured admin requests: every frame kio decodes gets an answer that
    encodes (nothing raises); the requests run with validate_only so nothing is created."""
    state = admin_state
    import dataclasses
    import random
    rng = random.Random(20241025)
    names = ["19_3", "19_4", "19_7", "32_1", "32_2", "32_4", "44_1"]
    create(state, ("kp-79005f", 3), ("aio-a3d451", 1), ("compacted-e210e3", 1))
    answered = 0
    for _ in range(cases):
        frame = bytearray(capture(rng.choice(names)))
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(4, len(frame))] = rng.randrange(256)   # keep API key and version
        conn = Connection(KIO_MAX_APIS)
        conn.receive_data(framed(bytes(frame)))
        request = conn.next_event()
        if not isinstance(request, Request):
            continue
        if hasattr(request.body, "validate_only"):
            request.body = dataclasses.replace(request.body, validate_only=True)
        response = dispatch_table()[request.api_key].handler(state, request)
        encode_response(request, response)
        answered += 1
    assert answered > cases * 15 // 100           # 1500 of 10000
    assert state.datadir.topics() == ["aio-a3d451", "compacted-e210e3", "kp-79005f"]
