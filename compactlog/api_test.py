"""The Python API: send routed by Kafka's partitioner, Arrow appends, reads from an offset or a
timestamp, follow, latest value and latest state without Spark, the writer lock."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import compactlog
from compactlog.errors import DataDirLockedError, ReadOnlyError
from compactlog.storage.partitioner import partition_for_key


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "data")


def test_send_read_latest_and_state(root):
    with compactlog.open(root, write=True, create=True) as log:
        assert log.create_topic("prices", partitions=3, configs={"cleanup.policy": "compact"})
        assert not log.create_topic("prices", partitions=3, if_not_exists=True)
        md = log.send("prices", b"p3", b"10")
        assert md.partition == partition_for_key(b"p3", 3) and md.first_offset == 0
        log.send("prices", "p5", "7", headers=[("src", b"api")])
        log.send("prices", b"p3", b"11")
        log.send("prices", b"p6", b"25")
        log.send("prices", b"p6", None)                      # tombstone
    with compactlog.open(root) as log:
        recs = list(log.read("prices"))
        by_key = {}
        for r in recs:
            by_key.setdefault(r.key, []).append(r.value)
        assert by_key == {b"p3": [b"10", b"11"], b"p5": [b"7"], b"p6": [b"25", None]}
        assert [h for r in recs for h in r.headers] == [("src", b"api")]
        assert log.latest("prices", b"p3").value == b"11"
        assert log.latest("prices", b"p6") is None           # deleted
        assert log.latest("prices", b"nope") is None
        state = log.latest_state("prices")
        assert dict(zip(state.column("key").to_pylist(), state.column("value").to_pylist())) == \
            {b"p3": b"11", b"p5": b"7"}
        assert dict(log.iter_latest_state("prices")) == {b"p3": b"11", b"p5": b"7"}
        with pytest.raises(ReadOnlyError):
            log.send("prices", b"k", b"v")


def test_arrow_appends_match_the_partitioner_and_keyless_records_stick(root):
    keys = pa.array([f"k{i}".encode() for i in range(5000)] + [None] * 100, pa.binary())
    values = pa.array([f"v{i}" for i in range(5100)])
    with compactlog.open(root, write=True, create=True) as log:
        log.create_topic("bulk", partitions=4)
        mds = log.send_arrow("bulk", keys, values)
    assert sum(m.last_offset - m.first_offset + 1 for m in mds) == 5100
    with compactlog.open(root) as log:
        seen = {}
        keyless_partitions = set()
        for r in log.read("bulk"):
            if r.key is None:
                keyless_partitions.add(r.partition)
            else:
                seen[r.key] = r.partition
        assert all(p == partition_for_key(k, 4) for k, p in seen.items())
        assert len(seen) == 5000 and len(keyless_partitions) == 1      # one partition per batch


def test_read_from_offset_and_timestamp(root):
    with compactlog.open(root, write=True, create=True) as log:
        log.create_topic("t", 1)
        log.send_many("t", [(b"k%d" % i, b"v%d" % i, None, None, 1000 + 10 * i) for i in range(10)])
    with compactlog.open(root) as log:
        assert [r.offset for r in log.read("t", 0, offset=7)] == [7, 8, 9]
        assert [r.offset for r in log.read("t", timestamp=1045)] == [5, 6, 7, 8, 9]
        assert list(log.read("t", offset="latest")) == []
        assert log.end_offsets("t") == {0: 10}


def test_follow_sees_records_appended_later_by_the_writer(root):
    with compactlog.open(root, write=True, create=True) as w:
        w.create_topic("f", 1)
        w.send("f", b"a", b"1")
        got = []
        reader = compactlog.open(root)
        stop = threading.Event()

        def consume():
            for rec in reader.follow("f", offset="earliest", poll_interval=0.02, timeout=5, stop=stop):
                got.append(rec.value)
                if len(got) == 3:
                    stop.set()

        t = threading.Thread(target=consume)
        t.start()
        time.sleep(0.2)
        w.send("f", b"b", b"2")
        w.send("f", b"c", b"3")
        t.join(timeout=10)
        reader.close()
    assert got == [b"1", b"2", b"3"]


def test_one_writer_at_a_time(root):
    with compactlog.open(root, write=True, create=True):
        with pytest.raises(DataDirLockedError):
            compactlog.open(root, write=True)
        compactlog.open(root).close()                        # readers are welcome


def test_latest_is_read_committed_as_latest_state(root):
    """An aborted transaction's value and an open transaction's are not a key's current value."""
    with compactlog.open(root, write=True, create=True) as log:
        log.create_topic("t", partitions=1)
        log.send("t", b"k", b"committed")
        dd_log = log._dd.open_log("t", 0)
        dd_log.append_records([b"k"], [b"aborted"], producer_id=9, producer_epoch=0, base_sequence=0,
                              transactional=True)
        dd_log.append_control(commit=False, producer_id=9, producer_epoch=0)
        log.send("t", b"j", b"1")
        dd_log.append_records([b"j"], [b"open"], producer_id=10, producer_epoch=0, base_sequence=0,
                              transactional=True)
    with compactlog.open(root) as log:
        assert log.latest("t", b"k").value == b"committed"
        assert log.latest("t", b"j").value == b"1"
        state = log.latest_state("t")
        assert dict(zip(state.column("key").to_pylist(), state.column("value").to_pylist())) == \
            {b"k": b"committed", b"j": b"1"}


def test_send_many_routes_keys_by_murmur2_and_keeps_arrival_order(root):
    recs = [(f"k{i}".encode(), b"v%d" % i) for i in range(300)]
    recs[7] = (b"pinned", b"v7", None, 2)
    recs[9] = (None, b"v9")
    with compactlog.open(root, write=True, create=True) as log:
        log.create_topic("m", partitions=3)
        mds = log.send_many("m", recs)
    assert sum(m.last_offset - m.first_offset + 1 for m in mds) == 300
    with compactlog.open(root) as log:
        got = {(r.key, r.value): r.partition for r in log.read("m")}
        per_partition = [[r.value for r in log.read("m", p)] for p in range(3)]
    for key, value, *rest in recs:
        if key is not None and not rest:
            assert got[(key, value)] == partition_for_key(key, 3)
    assert got[(b"pinned", b"v7")] == 2
    for values in per_partition:
        assert values == sorted(values, key=lambda v: int(v[1:]))


def test_keyless_records_move_to_another_partition_every_batch_size_bytes(root):
    """send_arrow and send_many share the sticky partition: one partition per ~16 KiB of keyless
    records, across calls, as one Kafka producer would place them."""
    values = [b"%04d" % i + b"x" * 975 for i in range(50)]     # + 21 framing bytes: 1000 a record
    draws = iter([0, 2, 1])                  # the partitions drawn: the first, then one per switch
    with compactlog.open(root, write=True, create=True) as log:
        log._partitioner.rng.randrange = lambda n: next(draws)
        log.create_topic("k", partitions=3)
        log.send_arrow("k", pa.nulls(40, pa.binary()), pa.array(values[:40]))
        log.send_many("k", [(None, v) for v in values[40:]])
    with compactlog.open(root) as log:
        placed = sorted((int(r.value[:4]), r.partition) for r in log.read("k"))
    assert [i for i, _ in placed] == list(range(50))
    # 17 records reach 16384 bytes: a new partition is drawn after the 17th and the 34th
    assert [p for _, p in placed] == [0] * 17 + [2] * 17 + [1] * 16
