"""Socket-level fuzz smoke test: a few hundred mutated real client frames (the wire captures:
flipped, truncated, extended, re-sized, re-keyed) sent to a live broker, many connections at once.
The broker never dies or hangs: each bad connection gets an answer or is closed, while a healthy
connection keeps being answered and the data stored before stays as it was.

``COMPACTLOG_BROKER_FUZZ_CASES=10000`` runs a long campaign."""

from __future__ import annotations

import asyncio
import os
import random
import struct

from broker_support import Broker, run_cli
from compactlog.server.protocol_fuzz_test import PAYLOADS, mutate

CASES = int(os.environ.get("COMPACTLOG_BROKER_FUZZ_CASES", "400"))
SEED = int(os.environ.get("COMPACTLOG_BROKER_FUZZ_SEED", "1234"))
CONCURRENCY = 20
PROBE_ID = 0x7EADBEEF


def api_versions_frame(correlation_id: int) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"fuzz"
    return struct.pack(">i", len(payload)) + payload


async def read_answer(reader, correlation_id: int, timeout: float) -> bool:
    """True when a response with ``correlation_id`` arrives, False on close or timeout."""
    async def loop():
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            body = await reader.readexactly(size)
            if struct.unpack_from(">i", body, 0)[0] == correlation_id:
                return True
    try:
        return await asyncio.wait_for(loop(), timeout)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError):
        return False


async def one_case(port: int, frame: bytes, stats: dict) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        # the mutated frame, then a valid ApiVersions: answered unless the broker closed the
        # connection (or still waits for the rest of a frame whose size was enlarged)
        writer.write(frame + api_versions_frame(PROBE_ID))
        await writer.drain()
        answered = await read_answer(reader, PROBE_ID, 2.0)
        stats["answered" if answered else "closed_or_waiting"] += 1
    except ConnectionError:
        stats["closed_or_waiting"] += 1
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except ConnectionError:
            pass


async def campaign(port: int) -> dict:
    rng = random.Random(SEED)
    stats = {"answered": 0, "closed_or_waiting": 0, "healthy": 0}
    healthy_r, healthy_w = await asyncio.open_connection("127.0.0.1", port)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def guarded(frame):
        async with sem:
            await one_case(port, frame, stats)

    frames = []
    for _ in range(CASES):
        payload = mutate(rng, rng.choice(PAYLOADS))
        if rng.random() < 0.3:                     # a lying size prefix now and then
            frames.append(struct.pack(">i", rng.choice([-1, 0, 3, len(payload) + 7])) + payload)
        else:
            frames.append(struct.pack(">i", len(payload)) + payload)
    for start in range(0, len(frames), 100):
        await asyncio.gather(*(guarded(f) for f in frames[start:start + 100]))
        healthy_w.write(api_versions_frame(start + 1))
        await healthy_w.drain()
        assert await read_answer(healthy_r, start + 1, 10.0), "the healthy connection got no answer"
        stats["healthy"] += 1
    healthy_w.close()
    return stats


def test_mutated_frames_never_hurt_the_broker(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    assert run_cli(data, "topics", "create", "--topic", "keep").returncode == 0
    assert run_cli(data, "produce", "--topic", "keep", stdin=b"a\nb\nc\n").returncode == 0
    with Broker(data) as b:
        stats = asyncio.run(asyncio.wait_for(campaign(b.port), 240))
        assert b.alive()
        assert stats["answered"] + stats["closed_or_waiting"] == CASES
        assert stats["healthy"] == (CASES + 99) // 100
        r = run_cli(data, "consume", "--topic", "keep", "--from-beginning")
        assert r.stdout.decode().split()[:3] == ["a", "b", "c"]
    log = b.log_text()
    assert "Unexpected error on the connection" not in log, log[-5000:]
    assert "shut down completed" in log
