"""The .txnindex trust check: true indexes pass; a lying one is named and every segment's aborted
transactions come back from the markers, as the indexes should have held them."""

from __future__ import annotations

from compactlog.errors import StorageError
from compactlog.storage.conftest import config
from compactlog.storage.index_check import read_file
from compactlog.storage.txn_trust import untrusted_txn_indexes


def aborted_log(open_log):
    log = open_log(config(segment_bytes=400))
    for pid in (10, 11, 12):
        log.append_records([b"k"], [b"v"], producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
        log.append_records([b"p"], [b"q"])
        log.append_control(commit=pid == 11, producer_id=pid, producer_epoch=0)
    log.flush()
    return log


def test_true_indexes_are_trusted_and_a_lie_is_rebuilt_from_the_markers(open_log):
    log = aborted_log(open_log)
    segs = list(log.segments)
    layouts = [s.layout() for s in segs]
    paths = [s.txn_index.path for s in segs]
    raws = [read_file(p) for p in paths]
    assert untrusted_txn_indexes(layouts, paths, lambda i: raws[i]) is None
    # each entry's producer id off by one (byte 9 of the 34: version 2, producer id 8)
    lying = [r if not r else r[:9] + bytes([r[9] ^ 1]) + r[10:] for r in raws]
    problem, rebuilt = untrusted_txn_indexes(layouts, paths, lambda i: lying[i])
    assert ".txnindex" in problem
    assert rebuilt == [s.txn_index.entries() for s in segs]


def test_an_unreadable_index_is_the_problem(open_log):
    log = aborted_log(open_log)
    segs = list(log.segments)

    def unreadable(i):
        raise StorageError("bad version")

    problem, rebuilt = untrusted_txn_indexes([s.layout() for s in segs], [""] * len(segs), unreadable)
    assert problem == "bad version" and sum(map(len, rebuilt)) == 2
