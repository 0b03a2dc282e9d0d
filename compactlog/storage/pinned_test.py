"""pin_live_segments: a reader holds one state of the log while a writer swaps cleaned segments in.

The writer's swap (``Log.replace_segments``, Kafka's replaceSegments: ``.cleaned`` -> ``.swap``,
old -> ``.deleted``, ``.swap`` -> live, ``.deleted`` removed) is run in a thread that stops before
each rename and remove. Readers are made at every step, with the writer taking one more step
between the reader's listing and its mapping (and between two mappings); each is read only after
the swap finished and its old files are gone, and must return exactly the records of the log before
the swap or exactly those after it. The writer's step there is one rename or the rest of the swap.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from compactlog.errors import LogChangedError
from compactlog.record.batch import iter_batches
from compactlog.storage import files, pinned
from compactlog.storage.conftest import config
from compactlog.storage.pinned import pin_live_segments, without_in_flight
from compactlog.storage.reader import PartitionReader
from compactlog.storage.segment import LogSegment

KEYS = [b"k%d" % i for i in range(4)]


def fill(log) -> None:
    """Four closed segments of every key rewritten, then an active one."""
    for rnd in range(4):
        for _ in range(3):
            log.append_records(KEYS, [b"r%d" % rnd] * len(KEYS))
        log.roll()
    log.append_records(KEYS, [b"tail"] * len(KEYS))


def cleaned(log, old, clock) -> list[LogSegment]:
    """Cleaned replacements of ``old``: two segments (a split), each keeping every other batch; the
    second takes the base offset of the last old segment, so a reader that mapped the first old
    ones before the swap finds that name again after it."""
    new = []
    for group in (old[:-1], old[-1:]):
        seg = LogSegment(log.dir, group[0].base_offset, log.config, now_ms=clock(), suffix=files.CLEANED_SUFFIX,
                         new=True)
        for s in group:
            for i, b in enumerate(iter_batches(s.log.map())):
                if i % 2 == 0:
                    seg.append(b.last_offset, b.max_timestamp, b.last_offset, b.raw())
        seg.flush()
        new.append(seg)
    return new


def records(reader: PartitionReader) -> list[tuple]:
    return [(r.offset, r.key, r.value) for r in reader.records()]


# A bound on the test's own waits for the writer's thread, only so that a bug cannot hang the suite:
# each wait ends when the step it waits for is done, however loaded the machine.
WRITER_STEP_BOUND_S = 300


class SteppedSwap:
    """``log.replace_segments(new, old)`` in a thread that waits before every rename and remove.

    ``stepping_s`` is the wall time the test spent waiting for the writer's steps: a reader whose
    hooks step the writer does not count it against its own budget (``ReaderClock``)."""

    def __init__(self, monkeypatch, log, new, old):
        self.cv = threading.Condition()
        self.allowed = 0
        self.done = 0
        self.stepping_s = 0.0
        self.thread = threading.Thread(target=log.replace_segments, args=(new, old), daemon=True)
        for name in ("replace", "remove"):
            monkeypatch.setattr(os, name, self._gated(getattr(os, name)))

    def _gated(self, real):
        def op(*args, **kwargs):
            if threading.current_thread() is self.thread:
                with self.cv:
                    assert self.cv.wait_for(lambda: self.allowed > self.done, timeout=WRITER_STEP_BOUND_S)
                try:
                    return real(*args, **kwargs)
                finally:
                    with self.cv:
                        self.done += 1
                        self.cv.notify_all()
            return real(*args, **kwargs)
        return op

    def start(self, steps: int) -> "SteppedSwap":
        self.thread.start()
        self.step(steps)
        return self

    def step(self, n: int = 1) -> None:
        started = time.monotonic()
        with self.cv:
            self.allowed += n
            self.cv.notify_all()
            assert self.cv.wait_for(lambda: self.done >= self.allowed or not self.thread.is_alive(),
                                    timeout=WRITER_STEP_BOUND_S)
        self.stepping_s += time.monotonic() - started

    def finish(self) -> None:
        self.step(10_000)
        self.thread.join(WRITER_STEP_BOUND_S)
        assert not self.thread.is_alive()


class ReaderClock:
    """``pinned``'s clock for a reader whose hooks step the writer: the real one less the time the
    hooks waited for the writer's thread, so the pin's budget (``PIN_TIMEOUT_S``) counts the
    reader's own attempts and waits and not the writer's steps the test forces into the middle of
    them, which take seconds on a loaded machine."""

    def __init__(self, swap: SteppedSwap):
        self.swap = swap
        self.sleep = time.sleep

    def monotonic(self) -> float:
        return time.monotonic() - self.swap.stepping_s


@pytest.fixture
def swap_setup(open_log, clock):
    """(make a writer with its swap prepared, the steps the swap takes, records before, records after)."""
    def make():
        log = open_log(config(segment_bytes=100_000, cleanup_policy="compact"))
        fill(log)
        old = list(log.segments)[:-1]
        return log, cleaned(log, old, clock), old

    log, new, old = make()
    before = records(PartitionReader(log.dir))
    calls = []
    real_replace, real_remove = os.replace, os.remove
    os.replace = lambda *a, **k: (calls.append(a), real_replace(*a, **k))[1]
    os.remove = lambda *a, **k: (calls.append(a), real_remove(*a, **k))[1]
    try:
        log.replace_segments(new, old)
    finally:
        os.replace, os.remove = real_replace, real_remove
    after = records(PartitionReader(log.dir))
    assert before != after and len(after) < len(before)
    log.close()
    os.rename(log.dir, log.dir + ".done")
    return make, len(calls), before, after


@pytest.mark.slow          # every step x 3 places x 2 jumps: ~150 swaps, 5 s of CPU
def test_every_step_of_a_swap_between_listing_and_mapping(swap_setup, monkeypatch):
    make, steps, before, after = swap_setup
    assert steps >= 12          # 4 files x (cleaned->swap, old->deleted, swap->live) + removes
    real_names, real_map = pinned._log_names, pinned._map
    seen = set()
    cases = [(k, where, jump) for k in range(steps) for where in ("listing", 1, 3) for jump in (1, steps)]
    for k, where, jump in cases:
        log, new, old = make()
        with monkeypatch.context() as m:
            swap = SteppedSwap(m, log, new, old).start(k)
            moved, maps = [False], [0]

            def names(d, moved=moved, swap=swap, where=where, jump=jump):
                out = real_names(d)
                if where == "listing" and not moved[0]:
                    moved[0] = True
                    swap.step(jump)         # the writer goes on between listing and mapping
                return out

            def mapped(path, base, moved=moved, maps=maps, swap=swap, where=where, jump=jump):
                seg = real_map(path, base)
                maps[0] += 1
                if maps[0] == where and not moved[0]:
                    moved[0] = True
                    swap.step(jump)         # ... or after the first (or third) mapping
                return seg

            m.setattr(pinned, "_log_names", names)
            m.setattr(pinned, "_map", mapped)
            m.setattr(pinned, "time", ReaderClock(swap))
            reader = PartitionReader(log.dir)
            m.setattr(pinned, "_log_names", real_names)
            m.setattr(pinned, "_map", real_map)
            m.setattr(pinned, "time", time)
            swap.finish()
        got = records(reader)       # every old file is gone by now
        assert got in (before, after), (k, where, jump)
        seen.add(got == after)
        reader.close()
        log.close()
        os.rename(log.dir, f"{log.dir}.{k}.{where}.{jump}")
    assert seen == {False, True}        # both states were pinned along the way


def test_a_directory_that_never_holds_still_fails_loudly(open_log, monkeypatch):
    log = open_log()
    log.append_records(KEYS, KEYS)
    count = [0]
    real = pinned._log_names

    def changing(d):
        count[0] += 1
        return real(d) | {f"{count[0]:020d}.log.cleaned"}
    monkeypatch.setattr(pinned, "_log_names", changing)
    with pytest.raises(LogChangedError, match="the log changed under the read .*retry the read"):
        pin_live_segments(log.dir, timeout_s=0.05)


def test_a_pin_keeps_its_files_after_retention_deletes_them(open_log):
    log = open_log()
    log.append_records(KEYS, [b"a"] * 4)
    log.roll()
    log.append_records(KEYS, [b"b"] * 4)
    reader = PartitionReader(log.dir)
    expected = records(reader)
    for seg in list(log.segments):
        for p in seg.file_paths():
            if os.path.exists(p):
                os.remove(p)            # as retention, or a whole swap, would
    assert records(reader) == expected and reader.log_end_offset == 8
    reader.close()


def test_appends_after_the_pin_are_not_read_and_a_roll_above_is_allowed(open_log, monkeypatch):
    log = open_log()
    log.append_records(KEYS, [b"a"] * 4)
    real = pinned._log_names
    calls = [0]

    def roll_between(d):
        calls[0] += 1
        out = real(d)
        if calls[0] == 1:       # after the first listing: the writer appends and rolls
            log.append_records(KEYS, [b"b"] * 4)
            log.roll()
            log.append_records(KEYS, [b"c"] * 4)
        return out
    monkeypatch.setattr(pinned, "_log_names", roll_between)
    reader = PartitionReader(log.dir)
    assert calls[0] == 2                     # the roll did not make the pin start again
    got = records(reader)
    assert [v for _, _, v in got] in ([b"a"] * 4, [b"a"] * 4 + [b"b"] * 4)
    assert reader.log_end_offset == len(got)


def test_without_in_flight_cuts_only_a_trailing_run():
    def entries(*offs):
        return b"".join(o.to_bytes(8, "big") for o in offs)
    assert without_in_flight(entries(1, 5, 9), 8, 0, 5) == entries(1, 5)
    assert without_in_flight(entries(1, 9, 5), 8, 0, 5) == entries(1, 9, 5)      # not the writer's
    assert without_in_flight(entries(1, 5) + b"\x00\x00", 8, 0, 5) == entries(1, 5)   # a partial entry
    rel = b"".join(r.to_bytes(4, "big") + b"\x00" * 4 for r in (0, 3, 7))
    assert without_in_flight(rel, 8, 0, 103, relative_to=100) == rel[:16]


def test_an_abort_indexed_after_the_pin_is_not_taken_for_a_lying_index(open_log):
    """The writer appends an ABORT marker and then its ``.txnindex`` entry: a reader that pinned the
    log before the marker but reads the index after it sees an entry past its pinned bytes, the
    writer's work in flight, not an index that lies (which would be rebuilt from the markers, with
    a note)."""
    log = open_log()
    log.append_records(KEYS[:2], [b"a", b"b"])
    log.append_records(KEYS[:2], [b"t1", b"t2"], producer_id=7, producer_epoch=0, base_sequence=0,
                       transactional=True)
    reader = PartitionReader(log.dir)
    log.append_control(commit=False, producer_id=7, producer_epoch=0)
    txn_index = log.segments.active.txn_index.path
    assert os.path.getsize(txn_index) > 0
    view = reader.visible("read_committed")
    committed = [(r.offset, r.value) for _, recs in view.batches(0) for r in recs]
    assert committed == [(0, b"a"), (1, b"b")]      # the open transaction is not stable in the pinned state
    assert reader.aborted_transactions(0, 4) == [] and reader.notes == []
