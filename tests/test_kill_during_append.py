"""kill -9 during appends: nothing flushed is lost, the log reopens valid and accepts appends.

A child process appends to a data dir in a tight loop (plain, idempotent and transactional batches,
segments rolling every few KiB) and flushes periodically, printing the recovery point after each
flush. The parent SIGKILLs it at a random moment (every 3rd trial it also cuts a random part of
the unflushed tail, as a power loss would), reopens the data dir (recovering the crash) and checks
that every record below the last reported recovery point is present and byte-identical, that every
record holds the content the child derived from its offset, that every CRC is valid and every
aborted transaction is in the transaction index, and that the log takes appends. The trials
run on the same directory, so later children also recover what earlier ones left.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from compactlog.record.control import ABORT
from compactlog.storage.datadir import DataDir
from storage_support import check_partition_dir, raw_batches, read

HERE = os.path.dirname(os.path.abspath(__file__))
TOPIC = "crashy"
CONFIGS = {"segment.bytes": "6000", "index.interval.bytes": "300", "segment.index.bytes": "2048"}

CHILD = r'''
import hashlib, sys
sys.path.insert(0, sys.argv[3])
from compactlog.storage.datadir import DataDir

root, seed = sys.argv[1], int(sys.argv[2])
TOPIC = "crashy"

def value(o):
    return hashlib.blake2b(b"%d" % o, digest_size=16).digest() * (1 + o % 4)

dd = DataDir(root, clock=lambda: 1_700_000_000_000, writable=True)
log = dd.open_log(TOPIC, 0)
state = log.producer_state.producers
for pid in (2,):
    e = state.get(pid)
    if e is not None and e.current_txn_first_offset is not None:   # a transaction the crash cut
        log.append_control(commit=False, producer_id=pid, producer_epoch=0)
seq = {1: 0, 2: 0}
for pid in seq:
    if pid in state and not state[pid].is_empty:
        seq[pid] = state[pid].last_seq + 1
print("START %d" % log.log_end_offset, flush=True)
i = seed * 1000
while True:
    i += 1
    o = log.log_end_offset
    n = 1 + i % 3
    keys = [b"k%d" % ((o + j) % 500) for j in range(n)]
    values = [value(o + j) for j in range(n)]
    stamps = [1_700_000_000_000 + o + j for j in range(n)]
    kind = i % 10
    if kind in (3, 4):
        log.append_records(keys, values, timestamps=stamps, producer_id=1, producer_epoch=0,
                           base_sequence=seq[1])
        seq[1] += n
    elif kind in (6, 7):
        log.append_records(keys, values, timestamps=stamps, producer_id=2, producer_epoch=0,
                           base_sequence=seq[2], transactional=True)
        seq[2] += n
    else:
        log.append_records(keys, values, timestamps=stamps)
    if kind == 8:
        log.append_control(commit=(i % 20 == 8), producer_id=2, producer_epoch=0)
    if i % 37 == 0:
        log.flush()
        dd.checkpoint_logs()
        print("FLUSHED %d" % log.recovery_point, flush=True)
'''


def expected_value(o: int) -> bytes:
    import hashlib
    return hashlib.blake2b(b"%d" % o, digest_size=16).digest() * (1 + o % 4)


def flushed_batches(pdir: str, flushed: int) -> dict[int, bytes]:
    """base offset -> raw bytes of every batch entirely below ``flushed`` (read before reopening)."""
    out = {}
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".log") and name[:-4].isdigit():
            data = read(os.path.join(pdir, name))
            for pos, base, last, _, size, _ in raw_batches(data)[0]:
                if last < flushed:
                    out[base] = data[pos:pos + size]
    return out


def lose_unflushed_tail(pdir: str, flushed: int, rng: random.Random) -> None:
    """Power loss rather than a process kill: the last segment loses a random part of the bytes
    written after the flush (possibly cutting a batch in two)."""
    last = max(n for n in os.listdir(pdir) if n.endswith(".log") and n[:-4].isdigit())
    path = os.path.join(pdir, last)
    data = read(path)
    keep = max([pos + size for pos, _, end, _, size, _ in raw_batches(data)[0] if end < flushed],
               default=0)
    with open(path, "r+b") as f:
        f.truncate(rng.randint(keep, len(data)))


def run_child(root: str, seed: int, rng: random.Random) -> tuple[int, int]:
    """Start a child, kill -9 it at a random moment; (its start offset, last reported flush)."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, root, str(seed), os.path.dirname(HERE)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = p.stdout.readline().decode()
        assert first.startswith("START"), first + p.stderr.read().decode()
        second = p.stdout.readline().decode()          # the child is in its loop: kill it anywhere
        assert second.startswith("FLUSHED"), second + p.stderr.read().decode()
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        out = second + p.stdout.read().decode()
        err = p.stderr.read().decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    assert p.returncode == -signal.SIGKILL, err
    flushed = [int(line.split()[1]) for line in out.splitlines() if line.startswith("FLUSHED")]
    return int(first.split()[1]), max(flushed, default=0)


def test_kill_9_during_appends(tmp_path):
    rng = random.Random(99)
    root = str(tmp_path / "data")
    dd = DataDir(root, create=True, writable=True)
    dd.create_topic(TOPIC, 1, CONFIGS)
    dd.close()
    pdir = os.path.join(root, f"{TOPIC}-0")
    best_flushed = 0
    for trial in range(10):
        start, flushed = run_child(root, trial, rng)
        assert start >= best_flushed
        best_flushed = max(best_flushed, flushed)
        before = flushed_batches(pdir, best_flushed)
        if trial % 3 == 1:
            lose_unflushed_tail(pdir, best_flushed, rng)

        dd = DataDir(root, clock=lambda: 1_700_000_000_000, writable=True)
        log = dd.open_log(TOPIC, 0)
        leo = log.log_end_offset
        assert leo >= best_flushed > 0
        # nothing flushed was lost or changed
        after = flushed_batches(pdir, best_flushed)
        assert after == before, f"trial {trial}: flushed batches changed"
        # offsets contiguous from 0; every data record holds what the child wrote at its offset
        offsets, aborts = [], []
        for b in log.batches(0):
            b.ensure_valid()
            for r in b.records():
                offsets.append(r.offset)
                if b.is_control:
                    if b.control_type() == ABORT:
                        aborts.append(r.offset)
                elif r.key != b"parent":
                    assert r.value == expected_value(r.offset), (trial, r.offset)
                    assert r.key == b"k%d" % (r.offset % 500)
        assert offsets == list(range(leo)), f"trial {trial}: offsets not contiguous"
        indexed = {t.last_offset for t in log.collect_aborted_transactions(0, leo)}
        assert set(aborts) <= indexed, f"trial {trial}: aborted txns missing from .txnindex"
        # the recovered log accepts appends; alternate clean and unclean hand-overs to the next child
        log.append_records([b"parent"], [b"after-trial-%d" % trial])
        o = log.log_end_offset
        log.append_records([b"k%d" % (o % 500)], [expected_value(o)])
        if trial % 2:
            dd.close()
            check_partition_dir(pdir, 300, exact_indexes=False)
        else:
            dd.abandon()
    assert best_flushed > 0

