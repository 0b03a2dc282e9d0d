"""Inside one process (the broker's case), appends, cleaner swaps, retention and reads run on a
partition at the same time: no read ever sees a half-applied change, no acknowledged record is
lost, and the cleaner's result equals a latest-per-key computation."""

from __future__ import annotations

import threading
import time

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.storage.datadir import DataDir

T0 = 1_700_000_000_000


def test_appends_cleans_and_reads_at_once(tmp_path):
    clock = [T0]
    dd = DataDir(str(tmp_path / "d"), create=True, writable=True, clock=lambda: clock[0])
    dd.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "3000",
                             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    log = dd.open_log("c", 0)
    stop = threading.Event()
    errors: list[BaseException] = []
    latest: dict[bytes, bytes] = {}
    appended = [0]
    cleaned = [0]

    def producer():
        try:
            i = 0
            deadline = time.monotonic() + 60
            while not stop.is_set() and (i < 4000 or cleaned[0] < 3) and time.monotonic() < deadline:
                keys = [b"k%d" % ((i + j) % 37) for j in range(5)]
                values = [b"v%d" % (i + j) for j in range(5)]
                log.append_records(keys, values, timestamps=[clock[0]] * 5)
                for k, v in zip(keys, values):
                    latest[k] = v
                appended[0] += 5
                i += 5
                if i % 100 == 0:
                    time.sleep(0.002)           # let the cleaner and readers in
        except BaseException as e:          # noqa: BLE001 - reported by the test
            errors.append(e)

    def cleaner():
        try:
            c = Cleaner(dd, InProcessExecutor())
            while not stop.is_set():
                clock[0] += 10
                for o in c.run(clock[0], force=True):
                    assert o.error is None or "changed while it was cleaned" in o.error, o.error
                    cleaned[0] += o.cleaned
                dd.open_log("c", 0).delete_old_segments()
        except BaseException as e:          # noqa: BLE001
            errors.append(e)

    def reader():
        try:
            while not stop.is_set():
                prev = -1
                for b in log.batches(0):
                    b.ensure_valid()                  # never a torn or stale batch
                    assert b.base_offset > prev, (b.base_offset, prev)
                    prev = b.last_offset
        except BaseException as e:          # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (producer, cleaner, reader, reader)]
    for t in threads:
        t.start()
    threads[0].join(timeout=120)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert appended[0] >= 4000
    assert cleaned[0] >= 3, cleaned          # swaps really happened while appends and reads ran
    log.roll()
    Cleaner(dd, InProcessExecutor()).run(clock[0] + 10, force=True)
    got = {}
    for r in log.records():
        got[r.key] = r.value
    assert got == latest
    assert log.log_end_offset == appended[0]
    dd.close()
