"""TransactionMetadata alone: the valid-previous table, the two-phase transitions and the epoch
rules of transactions.md §1.5 (bump, retry, fencing, exhaustion and rotation, TV2 bumps)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from compactlog.coordinator.txn.metadata import (MAX_EPOCH, VALID_PREVIOUS, IllegalTransition, TransactionMetadata,
                                            TxnError, TxnState, is_epoch_exhausted)

S = TxnState


def md(state=S.EMPTY, epoch=3, last=-1, parts=(), start=-1, tv=0, pid=7) -> TransactionMetadata:
    return TransactionMetadata("t", pid, epoch, 60000, state, set(parts), start, 100, last_producer_epoch=last,
                               client_tv=tv)


def test_state_ids_and_names():
    assert [s.display for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                      "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert S.by_name("PrepareCommit") is S.PREPARE_COMMIT and S.by_name("prepareCommit") is None
    assert not is_epoch_exhausted(32765) and is_epoch_exhausted(32766) and is_epoch_exhausted(MAX_EPOCH)


@pytest.mark.parametrize("target", list(S))
@pytest.mark.parametrize("current", [s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)])
def test_valid_previous_table_is_enforced(current, target):
    m = md(current)
    if current in VALID_PREVIOUS[target]:
        t = m._transit(target)
        assert m.pending_state == target and t.state == target
    else:
        with pytest.raises(IllegalTransition):
            m._transit(target)
        assert m.pending_state is None


def test_one_transition_at_a_time_and_cancel():
    m = md()
    m.prepare_increment_epoch(1000, None, 200)
    with pytest.raises(IllegalTransition):
        m.prepare_increment_epoch(1000, None, 200)
    m.cancel_transition()
    assert m.pending_state is None and m.producer_epoch == 3        # nothing changed


def test_increment_epoch_rules():
    # no expected epoch: a new instance, last epoch forgotten
    m = md(epoch=3, last=2)
    t = m.prepare_increment_epoch(5000, None, 200)
    assert (t.producer_epoch, t.last_producer_epoch, t.txn_timeout_ms, t.partitions, t.txn_start_ms) == \
        (4, -1, 5000, frozenset(), -1)
    m.complete_transition(t)
    assert (m.producer_epoch, m.last_producer_epoch, m.last_update_ms, m.pending_state) == (4, -1, 200, None)
    # expected = current: the same instance recovering (KIP-360)
    t = md(epoch=3).prepare_increment_epoch(1, 3, 0)
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    # a brand-new id (epoch -1) with an expected epoch
    t = md(epoch=-1).prepare_increment_epoch(1, 9, 0)
    assert (t.producer_epoch, t.last_producer_epoch) == (0, -1)
    # expected = last: a retry of a bump whose answer was lost, no second bump
    t = md(epoch=4, last=3).prepare_increment_epoch(1, 3, 0)
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    # anything else is fenced
    m = md(epoch=4, last=3)
    with pytest.raises(TxnError) as e:
        m.prepare_increment_epoch(1, 2, 0)
    assert e.value.code == ErrorCode.producer_fenced and m.pending_state is None
    with pytest.raises(IllegalTransition):
        md(epoch=32766).prepare_increment_epoch(1, None, 0)


def test_rotation_gives_a_new_id_at_epoch_0():
    t = md(epoch=32766, state=S.COMPLETE_COMMIT).prepare_rotation(99, 1000, 5, record_last_epoch=True)
    assert (t.producer_id, t.prev_producer_id, t.producer_epoch, t.last_producer_epoch, t.state) == \
        (99, 7, 0, 32766, S.EMPTY)
    t = md(epoch=32767).prepare_rotation(99, 1000, 5, record_last_epoch=False)
    assert t.last_producer_epoch == -1
    with pytest.raises(IllegalTransition):
        md(S.ONGOING, epoch=32766).prepare_rotation(99, 1, 0, False)


def test_add_partitions_starts_the_clock_once():
    m = md()
    t = m.prepare_add_partitions({("a", 0)}, 500, 0)
    assert (t.state, t.partitions, t.txn_start_ms, t.last_update_ms) == (S.ONGOING, {("a", 0)}, 500, 500)
    m.complete_transition(t)
    t = m.prepare_add_partitions({("b", 1)}, 900, 0)
    assert (t.partitions, t.txn_start_ms, t.last_update_ms) == ({("a", 0), ("b", 1)}, 500, 900)
    assert t.sorted_partitions() == [("a", [0]), ("b", [1])]
    assert md().prepare_increment_epoch(1, None, 0).sorted_partitions() is None      # Empty: null


def test_prepare_commit_tv1_keeps_the_epoch_tv2_bumps_it():
    t = md(S.ONGOING, epoch=5, last=4, parts={("a", 0)}, start=50).prepare_abort_or_commit(
        S.PREPARE_COMMIT, 0, -1, 60, False)
    assert (t.producer_epoch, t.last_producer_epoch, t.txn_start_ms, t.partitions) == (5, 4, 50, {("a", 0)})
    t = md(S.ONGOING, epoch=5, start=50).prepare_abort_or_commit(S.PREPARE_COMMIT, 2, -1, 60, False)
    assert (t.producer_epoch, t.last_producer_epoch, t.client_tv) == (6, 5, 2)
    # TV2 abort without partitions: the start time is now
    t = md(S.COMPLETE_COMMIT, epoch=5).prepare_abort_or_commit(S.PREPARE_ABORT, 2, -1, 60, True)
    assert (t.producer_epoch, t.txn_start_ms) == (6, 60)
    # an abort at 32767 lets the epoch be (KAFKA-20090)
    t = md(S.ONGOING, epoch=MAX_EPOCH).prepare_abort_or_commit(S.PREPARE_ABORT, 2, -1, 60, False)
    assert t.producer_epoch == MAX_EPOCH


def test_fence_tv1_bumps_once_and_forgets_the_last_epoch():
    m = md(S.ONGOING, epoch=5, last=4, parts={("a", 0)}, start=50)
    t = m.prepare_fence_abort(0, 70)
    assert (t.state, t.producer_epoch, t.last_producer_epoch, t.txn_start_ms, t.partitions) == \
        (S.PREPARE_ABORT, 6, -1, 50, {("a", 0)})
    # the fence record was not written: the cache keeps 6 (the old instance stays fenced) ...
    m.fence_failed(t)
    assert (m.producer_epoch, m.last_producer_epoch, m.has_failed_epoch_fence, m.pending_state) == (6, -1, True, None)
    # ... and the next fence does not bump again (KAFKA-9666)
    t = m.prepare_fence_abort(0, 80)
    assert t.producer_epoch == 6
    m.complete_transition(t)
    m.prepare_complete(90)
    assert not m.has_failed_epoch_fence
    # never past 32767
    assert md(S.ONGOING, epoch=MAX_EPOCH).prepare_fence_abort(0, 1).producer_epoch == MAX_EPOCH
    assert md(S.ONGOING, epoch=32766).prepare_fence_abort(0, 1).producer_epoch == MAX_EPOCH


def test_fence_tv2_bumps_once_and_remembers_the_epoch():
    m = md(S.ONGOING, epoch=5, parts={("a", 0)}, start=50)
    t = m.prepare_fence_abort(2, 70)
    assert (t.producer_epoch, t.last_producer_epoch, t.client_tv, t.next_producer_id) == (6, 5, 2, -1)
    m.fence_failed(t)                       # TV2: nothing was bumped in the cache
    assert (m.producer_epoch, m.has_failed_epoch_fence) == (5, False)
    with pytest.raises(IllegalTransition):
        md(S.EMPTY).prepare_fence_abort(2, 1)


def test_complete_after_markers_and_the_tv2_overflow():
    m = md(S.ONGOING, epoch=4, parts={("a", 0), ("b", 0)}, start=10)
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 0, -1, 20, False))
    m.remove_partition(("a", 0))
    assert m.partitions == {("b", 0)}
    t = m.prepare_complete(30)
    assert (t.state, t.producer_id, t.producer_epoch, t.partitions, t.txn_start_ms) == \
        (S.COMPLETE_COMMIT, 7, 4, frozenset(), 10)
    m.complete_transition(t)
    with pytest.raises(IllegalTransition):
        m.remove_partition(("b", 0))
    # TV2 at 32766: the commit bumps to 32767 and Complete* moves to the next producer id
    m = md(S.ONGOING, epoch=32766, start=10)
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 2, 500, 20, False))
    assert (m.producer_epoch, m.next_producer_id) == (MAX_EPOCH, 500)
    t = m.prepare_complete(30)
    assert (t.producer_id, t.producer_epoch, t.prev_producer_id, t.next_producer_id, t.last_producer_epoch) == \
        (500, 0, 7, -1, 32766)


def test_dead_is_never_completed_and_loaded_state_is_installed():
    m = md()
    t = m.prepare_dead()
    with pytest.raises(IllegalTransition):
        m.complete_transition(t)
    loaded = TransactionMetadata.from_transit("x", md(S.ONGOING, parts={("a", 1)}, start=5)._transit(S.ONGOING))
    assert (loaded.state, loaded.partitions, loaded.txn_start_ms, loaded.pending_state) == \
        (S.ONGOING, {("a", 1)}, 5, None)
