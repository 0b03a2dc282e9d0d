"""Recovery that keeps every valid batch (storage/repair.py), where Kafka's cuts the log at the first
bad one and deletes every later segment; and ``verify --repair`` for damage below the recovery point.

Each damaged directory is checked for: no traceback, every valid record still served, the corrupt
batch never served, its bytes kept aside, and a result that is valid for an independent reading
(``check_partition_dir``: CRCs, increasing offsets, trimmed indexes consistent with the log)."""

from __future__ import annotations

import json
import os
import random
import struct

import pytest

from cli_support import run_in_process
from corpus_support import kcompare
from storage_support import Clock, check_partition_dir, raw_batches, read
from compactlog.storage.datadir import DataDir
from compactlog.storage.events import EXIT_DATA_SET_ASIDE

T0 = 1_700_000_000_000
TOPIC = "t"
CONFIGS = {"segment.bytes": "1500", "index.interval.bytes": "200", "segment.index.bytes": "8192"}


def records(log, start=None):
    return [(r.offset, r.key, r.value) for r in log.records(start)]


def build(root, n=60, *, flush=False):
    """A partition of several segments, one record pair per batch; left as after a kill -9
    (recovery point 0: every segment is validated at the next open) unless ``flush``."""
    dd = DataDir(root, create=True, writable=True, clock=Clock(T0 + 10**6))
    dd.create_topic(TOPIC, 1, CONFIGS)
    log = dd.open_log(TOPIC, 0)
    for i in range(n):
        log.append_records([b"k%d" % i, b"j%d" % i], [b"v%d" % i * (1 + i % 4), None],
                           timestamps=[T0 + i, T0 + i])
    expected = records(log)
    paths = [s.log.path for s in log.segments]
    if flush:
        dd.close()
    else:
        dd.abandon()
    return expected, paths


def kafka_would_keep(expected, bad_first):
    """Kafka's recovery: the log ends at the first bad batch."""
    return [r for r in expected if r[0] < bad_first]


def open_log(root):
    dd = DataDir(root, writable=True, clock=Clock(T0 + 10**6))
    return dd, dd.open_log(TOPIC, 0)


def test_flipped_base_offset_outside_the_crc_is_corrected(tmp_path):
    """A flipped byte in a base offset is not covered by the CRC: consume used to stop early and
    clean to lose latest values. One single-byte correction fits the gap exactly: it is repaired."""
    root = str(tmp_path / "d")
    expected, paths = build(root)
    data = read(paths[1])
    batches, _ = raw_batches(data)
    pos, first = batches[2][0], batches[2][1]
    with open(paths[1], "r+b") as f:
        f.seek(pos + 6)
        f.write(bytes([data[pos + 6] ^ 0x5A]))
    dd, log = open_log(root)
    assert records(log) == expected
    events = dd.data_events()
    assert [e.kind for e in events] == ["repaired"] and events[0].first_offset == first
    dd.close()
    check_partition_dir(os.path.dirname(paths[1]), 200, exact_indexes=False)
    assert read(paths[1]) == data                     # byte for byte what was written


@pytest.mark.parametrize("damage", ["length", "garbage", "magic"])
def test_damaged_batch_is_quarantined_alone_and_later_segments_kept(tmp_path, damage):
    root = str(tmp_path / "d")
    expected, paths = build(root)
    data = read(paths[0])
    batches, _ = raw_batches(data)
    pos, first, _, _, size, _ = batches[1]
    work = bytearray(data)
    if damage == "length":           # the length field is damaged: the scan finds the next batch
        struct.pack_into(">i", work, pos + 8, 0x3FFFFFF)
        lost_end = pos + size
    elif damage == "garbage":         # random bytes over two batches
        rng = random.Random(1)
        end = batches[3][0] - 5
        work[pos + 3:end] = bytes(rng.randrange(256) for _ in range(end - pos - 3))
        lost_end = batches[3][0]
    else:                             # magic (outside the CRC)
        work[pos + 16] = 7
        lost_end = pos + size
    with open(paths[0], "wb") as f:
        f.write(work)
    lost = {b[1] for b in batches if pos <= b[0] < lost_end} | {b[2] for b in batches if pos <= b[0] < lost_end}
    lost_offsets = set(range(min(lost), max(lost) + 1))
    dd, log = open_log(root)
    kept = records(log)
    assert kept == [r for r in expected if r[0] not in lost_offsets]
    assert len(kept) > len(kafka_would_keep(expected, first))      # strictly more than Kafka keeps
    assert read(paths[0] + ".quarantined") == bytes(work[pos:lost_end])
    assert all(os.path.exists(p) for p in paths)                   # no later segment dropped
    [event] = [e for e in dd.data_events() if e.kind == "quarantine"]
    assert event.position == pos and event.kept_at == paths[0] + ".quarantined"
    log.append_records([b"after"], [b"repair"])
    dd.close()
    check_partition_dir(os.path.dirname(paths[0]), 200, exact_indexes=False)


def test_unreadable_tail_of_a_middle_segment_is_cut_and_later_segments_kept(tmp_path):
    root = str(tmp_path / "d")
    expected, paths = build(root)
    data = read(paths[1])
    batches, _ = raw_batches(data)
    pos = batches[-1][0]
    with open(paths[1], "r+b") as f:                  # the last batch of segment 1: zeros
        f.seek(pos)
        f.write(b"\x00" * (len(data) - pos))
    first, last = batches[-1][1], batches[-1][2]
    dd, log = open_log(root)
    assert records(log) == [r for r in expected if not first <= r[0] <= last]
    assert read(paths[1] + ".discarded") == b"\x00" * (len(data) - pos)
    assert all(os.path.exists(p) for p in paths)
    dd.close()
    check_partition_dir(os.path.dirname(paths[0]), 200, exact_indexes=False)


def run(root, *args, stdin: str | None = None):
    # in this process: a fresh interpreter per command cost ~0.6 CPU-s
    return run_in_process(["--data-dir", root, *args], stdin=stdin, text=True)


def test_verify_repair_below_the_recovery_point(tmp_path):
    """After a clean shutdown nothing is validated at open (as in Kafka): a flipped bit in flushed
    data stops consume at that batch. ``verify --repair`` sets it aside and every later record
    is served again."""
    root = str(tmp_path / "d")
    expected, paths = build(root, flush=True)
    data = read(paths[0])
    batches, _ = raw_batches(data)
    pos, first, last = batches[2][0], batches[2][1], batches[2][2]
    with open(paths[0], "r+b") as f:
        f.seek(pos + 70)
        f.write(bytes([data[pos + 70] ^ 0x10]))
    r = run(root, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl")
    assert r.returncode != 0 and f"position {pos}" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stdout.splitlines()) == len([x for x in expected if x[0] < first])
    r = run(root, "verify")
    assert r.returncode != 0 and f"position {pos}" in r.stdout
    r = run(root, "verify", "--repair")
    assert r.returncode == EXIT_DATA_SET_ASIDE, r.stdout + r.stderr
    assert "quarantined by recovery" in r.stderr and paths[0] in r.stderr
    r = run(root, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl")
    assert r.returncode == 0, r.stderr
    got = [json.loads(line)["offset"] for line in r.stdout.splitlines()]
    assert got == [x[0] for x in expected if not first <= x[0] <= last]
    check_partition_dir(os.path.dirname(paths[0]), 200, exact_indexes=False)
    r = run(root, "verify")                  # healthy, but the set-aside bytes are reported
    assert r.returncode == EXIT_DATA_SET_ASIDE and ".quarantined" in r.stdout, r.stdout
    os.remove(paths[0] + ".quarantined")
    assert run(root, "verify").returncode == 0


def test_repair_of_a_healthy_partition_changes_nothing(tmp_path):
    root = str(tmp_path / "d")
    build(root, flush=True)
    pdir = os.path.join(root, f"{TOPIC}-0")
    before = {n: read(os.path.join(pdir, n)) for n in os.listdir(pdir)}
    dd, log = open_log(root)
    assert log.repair() == []
    dd.close()
    after = {n: read(os.path.join(pdir, n)) for n in os.listdir(pdir)}
    assert {n: v for n, v in after.items() if n.endswith((".log", ".index", ".timeindex"))} == \
        {n: v for n, v in before.items() if n.endswith((".log", ".index", ".timeindex"))}


def test_random_damage_never_loses_a_valid_batch(tmp_path, corpus_dir):
    """200 random damages (bit flips, overwritten runs, zeroed runs) anywhere in any segment:
    the open never fails, no corrupt batch is served, and every batch the damage did not touch
    is still in the log."""
    rng = random.Random(20261124)
    src = str(tmp_path / "src")
    expected, paths = build(src, n=40)
    originals = {p: read(p) for p in paths}
    by_offset = dict((r[0], r) for r in expected)
    for trial in range(200):
        root = str(tmp_path / f"t{trial}")
        pdir = os.path.join(root, f"{TOPIC}-0")
        os.makedirs(pdir)
        for name in os.listdir(os.path.join(src, f"{TOPIC}-0")):
            with open(os.path.join(pdir, name), "wb") as f:
                f.write(read(os.path.join(src, f"{TOPIC}-0", name)))
        with open(os.path.join(root, "compactlog.topics.json"), "w") as f:
            f.write(read(os.path.join(src, "compactlog.topics.json")).decode())
        victim = paths[rng.randrange(len(paths))]
        data = bytearray(originals[victim])
        kind = rng.choice(["bit", "run", "zeros"])
        at = rng.randrange(len(data))
        n = 1 if kind == "bit" else rng.randrange(1, 200)
        for i in range(at, min(at + n, len(data))):
            data[i] = (data[i] ^ (1 << rng.randrange(8))) if kind == "bit" else \
                (0 if kind == "zeros" else rng.randrange(256))
        target = os.path.join(pdir, os.path.basename(victim))
        with open(target, "wb") as f:
            f.write(data)
        touched = set()
        batches, _ = raw_batches(originals[victim])
        for pos, first, last, _, size, _ in batches:
            if pos < at + n and at < pos + size:
                touched.update(range(first, last + 1))
        dd, log = open_log(root)
        got = records(log)
        for r in got:
            assert by_offset.get(r[0]) == r, (trial, kind, r)                   # nothing corrupt served
        missing = {o for o in by_offset if o not in {r[0] for r in got}}
        assert missing <= touched, (trial, kind, at, n, sorted(missing - touched))
        dd.close()
        check_partition_dir(pdir, 200, exact_indexes=False)
        if trial % 10 == 0:       # the corpus' independent decoder reads the result as we do
            lines, problems = kcompare(corpus_dir).decode_dir(root)
            assert problems == [], (trial, problems)
            assert [x["offset"] for x in lines if x["type"] == "record"] == [r[0] for r in got]


def _produce(root, lines):
    r = run(root, "produce", "--topic", "c", stdin=lines)
    assert r.returncode == 0, r.stderr


def test_consume_after_a_crash_stops_before_a_torn_tail_and_says_so(tmp_path):
    """A reader is not a writer: it cannot cut the torn tail, but it reads what recovery keeps."""
    root = str(tmp_path / "d")
    assert run(root, "topics", "create", "--topic", "c").returncode == 0
    _produce(root, "a\nb\nc\n")
    _produce(root, "d\n")
    os.remove(os.path.join(root, ".kafka_cleanshutdown"))
    with open(os.path.join(root, "c-0", "00000000000000000000.log"), "ab") as f:
        f.write(b"\x00" * 100)                          # preallocated zeros after a crash
    r = run(root, "consume", "--topic", "c", "--from-beginning")
    assert r.returncode == 0 and r.stdout.split() == ["a", "b", "c", "d"], r.stderr
    assert "note:" in r.stderr and "torn tail" in r.stderr and "100 bytes" in r.stderr


def test_corrupt_batch_after_a_clean_shutdown_is_an_error_after_the_records_before_it(tmp_path):
    root = str(tmp_path / "d")
    assert run(root, "topics", "create", "--topic", "c").returncode == 0
    _produce(root, "a\nb\nc\n")
    _produce(root, "d\n")
    path = os.path.join(root, "c-0", "00000000000000000000.log")
    batches, _ = raw_batches(read(path))
    with open(path, "r+b") as f:                         # the second batch's records
        f.seek(batches[1][0] + 65)
        f.write(b"\xff")
    r = run(root, "consume", "--topic", "c", "--from-beginning")
    assert r.returncode == 1 and r.stdout.split() == ["a", "b", "c"]
    assert f"position {batches[1][0]}" in r.stderr and "verify --repair" in r.stderr
    assert "Traceback" not in r.stderr


def test_flipped_base_offset_in_flushed_data_is_an_error_not_a_silent_stop(tmp_path):
    """Outside the CRC: consume used to stop early without a word; now the read stops with the
    file and position, and verify --repair corrects the byte."""
    root = str(tmp_path / "d")
    expected, paths = build(root, flush=True)
    data = read(paths[0])
    batches, _ = raw_batches(data)
    pos, first = batches[3][0], batches[3][1]
    with open(paths[0], "r+b") as f:
        f.seek(pos + 7)
        f.write(bytes([data[pos + 7] ^ 0x03]))           # base offset lowered (or raised) by a few
    r = run(root, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl")
    assert r.returncode == 1 and "baseOffset" in r.stderr and "Traceback" not in r.stderr
    r = run(root, "verify", "--repair")
    assert r.returncode == EXIT_DATA_SET_ASIDE and "repaired by recovery" in r.stderr, r.stderr
    r = run(root, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl")
    assert r.returncode == 0
    assert [json.loads(line)["offset"] for line in r.stdout.splitlines()] == [x[0] for x in expected]
    assert read(paths[0]) == data
