"""Damaged files: flipped bits in batches, bad index / txn-index / snapshot / checkpoint files.

Unflushed data (at/after the recovery point, after an unclean shutdown) is validated: a bad batch
is set aside alone and every valid batch after it kept (storage/repair.py); flushed data is trusted
and a bad batch there is reported when read, naming the file and byte position (`verify --repair`
sets it aside on demand).
"""

from __future__ import annotations

import os
import random
import struct
import time

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.storage.checkpoint import OffsetCheckpointFile
from compactlog.storage.config import LogConfig
from compactlog.storage.log import Log
from compactlog.storage.producer_state import read_snapshot
from storage_support import Clock, check_partition_dir, flip_bit, raw_batches, read

T0 = 1_700_000_000_000
CFG = LogConfig({"segment.bytes": "1500", "index.interval.bytes": "200", "segment.index.bytes": "8192"})


def crash(log: Log) -> None:
    for seg in log.segments:
        seg.close_handles()
    log.closed = True


def build(path, n=40, cfg=CFG, **kw) -> Log:
    os.makedirs(path, exist_ok=True)
    log = Log(str(path), cfg, clock=Clock(T0 + 10**6))
    for i in range(n):
        log.append_records([b"k%d" % i, b"j%d" % i], [b"v%d" % i * (1 + i % 5), None],
                           timestamps=[T0 + i, T0 + i], **kw)
    return log


def reopen(path, cfg=CFG, **kw) -> Log:
    return Log(str(path), cfg, clock=Clock(T0 + 10**6), **kw)


def recs(log, start=None):
    return [(r.offset, r.key, r.value, r.timestamp) for r in log.records(start)]


# --- bit flips in batches ---------------------------------------------------------------------

def test_random_bit_flips_in_unflushed_batches(tmp_path):
    """Every flipped bit covered by a batch's size/magic/CRC check sets that one batch aside
    (quarantined, or cut when nothing follows it in the log) and keeps every other batch."""
    rng = random.Random(2024)
    src = tmp_path / "src" / "t-0"
    log = build(src)
    expected = recs(log)
    leo = log.log_end_offset
    segs = [(s.base_offset, s.log.path) for s in log.segments]
    crash(log)
    originals = {p: read(p) for _, p in segs}
    for trial in range(30):
        base, path = segs[rng.randrange(len(segs))]
        data = originals[path]
        batches, _ = raw_batches(data)
        pos, first, last, _, size, _ = batches[rng.randrange(len(batches))]
        # bytes 0-7 (base offset) and 12-15 (leader epoch) are not covered by the CRC
        rel = rng.choice([8, 9, 10, 11, 16, 17, 18, 19, 20] + list(range(21, size)))
        work = tmp_path / f"trial{trial}" / "t-0"
        os.makedirs(work)
        for n in os.listdir(src):
            with open(work / n, "wb") as f:
                f.write(read(str(src / n)))
        victim = str(work / os.path.basename(path))
        flip_bit(victim, pos + rel, rng.randrange(8))
        flipped = read(victim)
        again = reopen(work)
        assert recs(again) == [r for r in expected if not first <= r[0] <= last], (trial, base, pos, rel)
        at_the_end = path == segs[-1][1] and pos + size == len(data)
        assert again.log_end_offset == (first if at_the_end else leo)
        assert read(victim) == data[:pos] + data[pos + size:]
        aside = victim + (".discarded" if pos + size == len(data) else ".quarantined")
        assert read(aside) == flipped[pos:pos + size]
        info = again.append_records([b"new"], [b"x"], timestamps=[T0])
        assert info.first_offset == again.log_end_offset - 1
        again.close()
        check_partition_dir(str(work), 200, exact_indexes=False)


def test_bad_batch_in_flushed_data_is_reported_on_read(tmp_path):
    path = tmp_path / "t-0"
    log = build(path)
    log.flush()
    leo, rp = log.log_end_offset, log.recovery_point
    seg = log.segments[1]                 # not the active segment: the recovery point's segment
    crash(log)                            # (the active one) is validated again, as in Kafka
    batches, _ = raw_batches(read(seg.log.path))
    pos, first = batches[1][0], batches[1][1]
    flip_bit(seg.log.path, pos + 40)
    again = reopen(path, recovery_point=rp)
    assert again.log_end_offset == leo
    with pytest.raises(CorruptRecordError) as err:
        list(again.records(seg.base_offset))
    e = err.value
    assert (e.file, e.position, e.offset, e.field) == (seg.log.path, pos, first, "crc")
    assert str(e).startswith(f"{seg.log.path}, position {pos}, offset {first}: crc: stored CRC")
    # unvalidated reads (Kafka's fetch path) still hand out the bytes
    assert len(list(again.records(seg.base_offset, validate=False))) > 0
    again.close()


def test_impossible_batch_length_in_flushed_data_is_reported(tmp_path):
    path = tmp_path / "t-0"
    log = build(path)
    log.flush()
    rp = log.recovery_point
    seg = log.segments[1]
    crash(log)
    batches, _ = raw_batches(read(seg.log.path))
    pos = batches[2][0]
    with open(seg.log.path, "r+b") as f:
        f.seek(pos + 8)
        f.write(struct.pack(">i", 3))                   # length 3 < 14
    again = reopen(path, recovery_point=rp)
    with pytest.raises(CorruptRecordError) as err:
        list(again.records())
    assert err.value.position == pos and err.value.file == seg.log.path
    assert "length" in str(err.value)
    again.close()


def test_zero_filled_tail_of_a_preallocated_log(tmp_path):
    cfg = LogConfig({"segment.bytes": "4096", "preallocate": "true", "index.interval.bytes": "200",
                     "segment.index.bytes": "8192"})
    path = tmp_path / "t-0"
    log = build(path, n=10, cfg=cfg)
    expected = recs(log)
    seg = log.active_segment
    size = seg.size
    crash(log)
    assert os.path.getsize(seg.log.path) == 4096     # preallocated: zeros after the data
    again = reopen(path, cfg)
    assert recs(again) == expected
    assert os.path.getsize(seg.log.path) == size
    assert read(seg.log.path + ".discarded") == b"\0" * (4096 - size)
    again.append_records([b"a"], [b"b"], timestamps=[T0])
    again.close()
    check_partition_dir(str(path), 200, exact_indexes=False)


def test_garbage_segment_in_unflushed_region(tmp_path):
    path = tmp_path / "t-0"
    log = build(path)
    bases = log.segment_bases()
    expected = recs(log)
    victim = log.segments[2]
    crash(log)
    garbage = random.Random(1).randbytes(os.path.getsize(victim.log.path))
    with open(victim.log.path, "wb") as f:
        f.write(garbage)
    again = reopen(path, recovery_point=bases[2])
    assert again.segment_bases() == bases[:3]
    assert again.log_end_offset == bases[2]
    assert recs(again) == [r for r in expected if r[0] < bases[2]]
    assert read(victim.log.path + ".discarded") == garbage
    again.close()


# --- index files ------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["odd-length", "bad-position", "decreasing", "beyond-end"])
def test_bad_offset_index_of_unflushed_segment_is_rebuilt(tmp_path, damage):
    path = tmp_path / "t-0"
    log = build(path)
    log.close()
    seg = log.segments[1]
    good = read(seg.offset_index.path)
    entries = list(struct.iter_unpack(">ii", good))
    assert len(entries) >= 2
    if damage == "odd-length":
        bad = good + b"\1\2\3"
    elif damage == "bad-position":
        bad = struct.pack(">ii", entries[0][0], entries[0][1] + 1) + good[8:]
    elif damage == "decreasing":
        bad = good[8:16] + good[0:8] + good[16:]
    else:
        bad = good + struct.pack(">ii", entries[-1][0] + 1, 10**6)
    with open(seg.offset_index.path, "wb") as f:
        f.write(bad)
    again = reopen(path, recovery_point=seg.base_offset)          # unclean shutdown
    again.close()
    assert read(seg.offset_index.path) == good
    check_partition_dir(str(path), 200)


def test_bad_time_index_of_unflushed_segment_is_rebuilt(tmp_path):
    path = tmp_path / "t-0"
    log = build(path)
    log.close()
    seg = log.segments[1]
    good = read(seg.time_index.path)
    with open(seg.time_index.path, "wb") as f:
        f.write(struct.pack(">qi", T0 + 10**9, 1) + good)      # timestamps going backwards
    again = reopen(path, recovery_point=seg.base_offset)
    again.close()
    assert read(seg.time_index.path) == good


def test_txn_index_below_base_offset_forces_recovery_even_after_clean_shutdown(tmp_path):
    path = tmp_path / "t-0"
    log = build(path, n=10)
    log.roll()
    start = log.append_records([b"t"], [b"1"], timestamps=[T0], producer_id=3, producer_epoch=0,
                               base_sequence=0, transactional=True)
    marker = log.append_control(commit=False, producer_id=3, producer_epoch=0)
    log.append_records([b"z"], [b"2"], timestamps=[T0])
    log.close()
    seg = log.active_segment
    good = read(seg.txn_index.path)
    assert struct.unpack(">hqqqq", good) == (0, 3, start.first_offset, marker.first_offset,
                                             marker.first_offset + 1)
    with open(seg.txn_index.path, "ab") as f:
        f.write(struct.pack(">hqqqq", 0, 9, 0, seg.base_offset - 1, 0))
    again = reopen(path, had_clean_shutdown=True)
    assert read(seg.txn_index.path) == good
    assert [t.producer_id for t in again.collect_aborted_transactions(0, again.log_end_offset)] == [3]
    again.close()


def test_txn_index_with_unknown_version_forces_recovery(tmp_path):
    path = tmp_path / "t-0"
    log = build(path, n=10)
    log.close()
    seg = log.segments[0]
    with open(seg.txn_index.path, "wb") as f:
        f.write(struct.pack(">hqqqq", 0x0100, 1, 2, 3, 4))
    again = reopen(path, had_clean_shutdown=True)
    assert again.collect_aborted_transactions(0, again.log_end_offset) == []
    again.close()
    assert read(seg.txn_index.path) == b""


# --- snapshots and checkpoints ----------------------------------------------------------------

def test_corrupt_snapshot_after_unclean_shutdown(tmp_path):
    path = tmp_path / "t-0"
    os.makedirs(path)
    log = Log(str(path), CFG, clock=Clock(T0))
    for i in range(30):
        log.append_records([b"k%d" % i], [b"v" * 40], timestamps=[T0 + i], producer_id=4,
                           producer_epoch=1, base_sequence=i)
    snaps = sorted(n for n in os.listdir(path) if n.endswith(".snapshot"))
    assert len(snaps) >= 2
    crash(log)
    for n in snaps:
        with open(path / n, "r+b") as f:
            f.seek(2)
            f.write(b"\xde\xad\xbe\xef")
    again = reopen(path)
    assert again.producer_state.producers[4].last_seq == 29
    assert again.append_records([b"k29"], [b"v" * 40], timestamps=[T0 + 29], producer_id=4,
                                producer_epoch=1, base_sequence=29).duplicate
    for n in os.listdir(path):
        if n.endswith(".snapshot"):
            read_snapshot(str(path / n))                 # every remaining snapshot is valid
    again.close()


def test_unreadable_leader_epoch_checkpoint(tmp_path):
    path = tmp_path / "t-0"
    log = build(path, n=5)
    log.close()
    with open(path / "leader-epoch-checkpoint", "w") as f:
        f.write("0\n7\nnot numbers\n")
    again = reopen(path, had_clean_shutdown=True)
    assert again.log_end_offset == 10
    again.leader_epoch = 2
    again.append_records([b"a"], [b"b"], timestamps=[T0])
    assert again.leader_epochs.entries[-1] == (2, 10)
    again.close()
    assert read(str(path / "leader-epoch-checkpoint")).decode().endswith("2 10\n")


def test_checkpoint_write_is_atomic(tmp_path):
    ck = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint"))
    ck.write({("a", 0): 5})
    with open(ck.path + ".tmp", "w") as f:                # a crash while writing the next version
        f.write("0\n3\na 0")
    assert ck.read() == {("a", 0): 5}
    ck.write({("a", 0): 9})
    assert ck.read() == {("a", 0): 9} and not os.path.exists(ck.path + ".tmp")


# --- base offsets going backwards (outside the CRC) --------------------------------------------

def out_of_order_dir(root, bases: dict[str, tuple[int, int]]) -> str:
    """A data dir, shut down cleanly, with a topic per entry of ``bases``: one segment of two valid
    batches of two records each (a=1 b=2, then c=3 d=4), their base offsets then set to the pair
    given (not covered by the CRC: every CRC stays valid)."""
    from compactlog.storage.datadir import DataDir
    dd = DataDir(str(root), create=True, writable=True)
    for topic in bases:
        dd.create_topic(topic, 1, {})
        log = dd.open_log(topic, 0)
        log.append_records([b"a", b"b"], [b"1", b"2"], timestamps=[T0, T0])
        log.append_records([b"c", b"d"], [b"3", b"4"], timestamps=[T0, T0])
    dd.close()
    for topic, (first, second) in bases.items():
        seg = os.path.join(str(root), f"{topic}-0", "00000000000000000000.log")
        data = bytearray(read(seg))
        (p1, *_), (p2, *_) = raw_batches(bytes(data))[0]
        struct.pack_into(">q", data, p1, first)
        struct.pack_into(">q", data, p2, second)
        with open(seg, "wb") as f:
            f.write(data)
        assert all(ok for *_, ok in raw_batches(bytes(data))[0])
    return str(root)


def test_offsets_going_backwards_are_never_a_short_read(tmp_path, capsys):
    """Every pair of base offsets: ``consume --from-beginning`` and the API print all 4 records (the
    offsets increase) or fail naming the file and position; never fewer with exit 0. A second
    batch below the first one used to end every read at the first (the log end offset, taken from
    the last batch, lies below it): nothing printed, exit 0."""
    import compactlog
    from compactlog.cli.main import main
    pairs = {f"t{a}{b}": (a, b) for a in range(5) for b in range(7)}
    root = out_of_order_dir(tmp_path / "d", pairs)
    for topic, (a, b) in pairs.items():
        seg = os.path.join(root, f"{topic}-0", "00000000000000000000.log")
        healthy = b > a + 1
        code = main(["--data-dir", root, "consume", "--topic", topic, "--from-beginning",
                     "--property", "print.offset=true"])
        out, err = capsys.readouterr()
        if healthy:
            assert code == 0 and out.splitlines() == [f"Offset:{o}\t{v}" for o, v in
                                                      zip((a, a + 1, b, b + 1), "1234")], (a, b, out, err)
        else:
            assert code == 1 and f"error: {seg}, position " in err and "Traceback" not in err, (a, b, out, err)
            assert len(out.splitlines()) < 4
        with compactlog.open(root) as log:
            if healthy:
                assert [r.value for r in log.read(topic)] == [b"1", b"2", b"3", b"4"]
            else:
                with pytest.raises(CorruptRecordError) as e:
                    list(log.read(topic))
                assert e.value.file == seg and e.value.position in (0, 79), (a, b, str(e.value))


def test_a_second_batch_below_the_first(tmp_path, capsys):
    """The reported case: the second batch's base offset below the first's. ``consume`` fails
    naming the file, the batch where the reads stopped and the one going back; ``verify`` flags it."""
    from compactlog.cli.main import main
    root = out_of_order_dir(tmp_path / "d", {"t": (2, 0)})
    seg = os.path.join(root, "t-0", "00000000000000000000.log")
    assert main(["--data-dir", root, "consume", "--topic", "t", "--from-beginning"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"error: {seg}, position 0, offset 2: baseOffset: offsets 2-3 are at or above the log "
                          f"end offset 2; the batch at position 79 goes back to offsets 0-1: the offsets go "
                          f"backwards in the segment"), err
    assert main(["--data-dir", root, "verify"]) == 1
    assert f"{seg}: position 79: base offset 0 does not follow the last offset 3" in capsys.readouterr().out


def test_a_broker_answers_corrupt_message_for_offsets_going_backwards(tmp_path):
    """Through the broker's Fetch the same partitions answer CORRUPT_MESSAGE (librdkafka's
    INVALID_MSG; Kafka's answer for a partition whose batches it cannot serve: ReplicaManager maps
    a CorruptRecordException to it) rather than nothing forever below the high watermark (t), or
    batches out of order (u); a sound partition beside them is served."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from broker_support import Broker
    root = out_of_order_dir(tmp_path / "d", {"t": (2, 0), "u": (1, 0), "ok": (0, 2)})
    with Broker(root) as b:
        for topic, expected in (("t", None), ("u", None), ("ok", [b"1", b"2", b"3", b"4"])):
            c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": topic,
                                          "enable.auto.commit": False, "enable.partition.eof": True})
            c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
            values, error = [], None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and error is None:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    break
                else:
                    error = m.error()
            c.close()
            if expected is None:
                assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_MSG, (topic, error)
                assert values == [], (topic, values)
            else:
                assert error is None and values == expected, (topic, error, values)
        assert b.alive()
        assert f"Fetch from t-0 failed: {root}/t-0/00000000000000000000.log, position 0" in b.log_text()
