"""A ``.txnindex`` that lies (a flipped byte) never makes a read_committed read serve aborted
records: the reader and the log check it against the markers and use the markers when it lies."""

from __future__ import annotations

import json
import os

import pytest

from cli_support import run_in_process
from storage_support import Clock, read
from compactlog.storage.datadir import DataDir
from compactlog.storage.reader import PartitionReader

T0 = 1_700_000_000_000


def build(root):
    """Committed and aborted transactions of two producers, over several segments."""
    dd = DataDir(root, create=True, writable=True, clock=Clock(T0))
    dd.create_topic("t", 1, {"segment.bytes": "1500"})
    log = dd.open_log("t", 0)
    committed = []
    for i in range(12):
        pid = 7 + i % 2
        info = log.append_records([b"k%d" % i, b"j%d" % i], [b"v%d" % i, b"w%d" % i], producer_id=pid,
                                  producer_epoch=0, base_sequence=2 * (i // 2), transactional=True,
                                  timestamps=[T0 + i] * 2)
        commit = i % 3 != 1
        log.append_control(commit=commit, producer_id=pid, producer_epoch=0)
        if commit:
            committed += [info.first_offset, info.last_offset]
        log.append_records([b"plain%d" % i], [b"p"], timestamps=[T0 + i])
        committed.append(log.log_end_offset - 1)
    txn_files = [s.txn_index.path for s in log.segments if os.path.exists(s.txn_index.path)
                 and os.path.getsize(s.txn_index.path)]
    dd.close()
    return sorted(committed), txn_files


def consumed(root):
    """``compactlog consume`` in this process (what it reads and says is the test, not its process)."""
    r = run_in_process(["--data-dir", root, "consume", "--topic", "t", "--from-beginning",
                        "--isolation-level", "read_committed", "--output-format", "jsonl"], text=True)
    assert r.returncode == 0, r.stderr
    return [json.loads(line)["offset"] for line in r.stdout.splitlines()], r.stderr


@pytest.mark.parametrize("field_pos", [3, 9, 17, 25])     # producer id, first, last, LSO
def test_flipped_txn_index_byte_never_serves_aborted_records(tmp_path, field_pos):
    root = str(tmp_path / "d")
    committed, txn_files = build(root)
    assert consumed(root)[0] == committed
    victim = txn_files[0]
    originals = {p: read(p) for p in txn_files}
    data = bytearray(read(victim))
    data[field_pos] ^= 0x40
    with open(victim, "wb") as f:
        f.write(data)
    got, err = consumed(root)
    assert got == committed                                   # the markers decide
    assert "aborted transactions are taken from the log's markers" in err
    reader = PartitionReader(os.path.join(root, "t-0"))
    # the writer checks too, and rebuilds the file from the markers
    dd = DataDir(root, writable=True, clock=Clock(T0))
    log = dd.open_log("t", 0)
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert aborted == reader.aborted_transactions(0, 10**6)
    assert any(e.kind == "rebuilt" for e in dd.data_events())
    dd.close()
    got, err = consumed(root)                                 # the file is right again
    assert got == committed and "note:" not in err
    assert {p: read(p) for p in txn_files} == originals       # byte for byte what was written


def test_zero_filled_txn_index_of_the_first_segment_is_rebuilt_not_decoded(tmp_path):
    """A ``.txnindex`` of zeros (a crash that extended the file before its data reached the disk)
    on the segment at base 0: every entry passes Kafka's sanity check (last offset 0 is not below
    the base), and each was made an object before the order check found the second one wrong (a 1
    GiB file: 31 million entries, explain 41 s and 4.8 GB, clean 85 s and 7.6 GB). Now refused
    from its second entry, before any entry is made: the writer's recovery rebuilds the file from
    the markers and says so; a read-only open takes the markers in memory and says so."""
    root = str(tmp_path / "d")
    committed, txn_files = build(root)
    victim = os.path.join(root, "t-0", "00000000000000000000.txnindex")
    assert victim in txn_files
    original = read(victim)
    with open(victim, "r+b") as f:
        f.truncate(0)
        f.truncate(64 << 20)        # sparse: 1.97 million zero entries
    reader_dd = DataDir(root, clock=Clock(T0))
    log = reader_dd.open_log("t", 0)
    assert [str(e) for e in reader_dd.data_events() if e.kind == "rebuilt"] == [
        f"t-0: unreadable, rebuilt: {victim}: position 34: last offset 0 of an aborted transaction is "
        f"not above the previous entry's 0; its aborted transactions taken from the segment's markers (in "
        f"memory; a writer's recovery rebuilds the file)"]
    in_memory = log.collect_aborted_transactions(0, log.log_end_offset)
    reader_dd.close()
    assert os.path.getsize(victim) == 64 << 20         # a read-only open changed nothing
    got, err = consumed(root)
    assert got == committed
    dd = DataDir(root, writable=True, clock=Clock(T0))
    log = dd.open_log("t", 0)
    assert any(e.kind == "rebuilt" and e.file == victim for e in dd.data_events())
    assert log.collect_aborted_transactions(0, log.log_end_offset) == in_memory
    dd.close()
    assert read(victim) == original                   # byte for byte what the appends wrote
    got, err = consumed(root)
    assert got == committed and "note:" not in err
