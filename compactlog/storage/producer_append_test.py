"""producer_append: an append's producer-state changes validated before anything is applied."""

from __future__ import annotations

import pytest

from compactlog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from compactlog.record.batch import iter_batches
from compactlog.record.batch import encode_marker
from compactlog.storage.conftest import T0, batch
from compactlog.storage.producer_append import aborted_entries, analyze, apply, entry_after, find_duplicate
from compactlog.storage.producer_state import CLIENT, COORDINATOR, ProducerStateManager
from compactlog.storage.txn_index import TransactionIndex


def sent(base, n, seq, *, pid=1, epoch=0, **kw):
    return next(iter_batches(batch(base, n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)))


@pytest.fixture
def state(tmp_path):
    return ProducerStateManager(str(tmp_path), "topic-0")


def test_analyze_validates_without_applying(state):
    updates = analyze(state, [sent(0, 2, 0)], CLIENT)
    assert state.producers == {} and list(updates.infos) == [1] and updates.completed == []
    apply(state, updates)
    assert state.producers[1].last_seq == 1
    with pytest.raises(OutOfOrderSequenceError):
        analyze(state, [sent(2, 1, 5)], CLIENT)
    # an epoch below the one a pending batch of the request moved to
    bumped = state.producers[1].copy_without_batches()
    bumped.producer_epoch = 3
    with pytest.raises(InvalidProducerEpochError):
        analyze(state, [sent(2, 1, 2)], CLIENT, {1: bumped})


def test_pending_entries_carry_a_request_forward_without_touching_the_manager(state):
    pending = {}
    analyze(state, [sent(0, 2, 0)], CLIENT, pending)
    assert state.producers == {} and pending[1].last_seq == 1 and pending[1].last_data_offset == 1
    # the next batch of the same request follows the pending entry, not the (empty) manager
    second = analyze(state, [sent(2, 3, 2)], CLIENT, pending)
    assert pending[1].last_seq == 4 and state.producers == {}
    assert find_duplicate(state, sent(0, 2, 0).header, pending).last_offset == 1
    assert find_duplicate(state, sent(0, 2, 0).header) is None
    # the pending entry is what update() will make of it
    apply(state, analyze(state, [sent(0, 2, 0)], CLIENT))
    apply(state, second)
    assert list(state.producers[1].batches) == list(pending[1].batches)


def test_entry_after_copies(state):
    apply(state, analyze(state, [sent(0, 2, 0)], CLIENT))
    info = analyze(state, [sent(2, 1, 2)], CLIENT).infos[1]
    after = entry_after(info)
    assert after.last_seq == 2 and state.producers[1].last_seq == 1 and after is not state.producers[1]


def test_an_abort_marker_completes_the_transaction_and_is_indexed(state, tmp_path):
    apply(state, analyze(state, [sent(0, 2, 0, transactional=True)], CLIENT))
    marker = next(iter_batches(encode_marker(offset=2, commit=False, producer_id=1, producer_epoch=0,
                                             coordinator_epoch=0, timestamp=T0)))
    updates = analyze(state, [marker], COORDINATOR)
    assert [(t.first_offset, t.last_offset, t.is_aborted) for t in updates.completed] == [(0, 2, True)]
    index = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    for entry in aborted_entries(state, updates):
        index.append(entry)
    apply(state, updates)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in index.entries()] == \
        [(1, 0, 2, 3)]
    assert state.first_unstable_offset() is None
