"""The coordinator's decisions without I/O: every transition of transactions.md §1.3 with what it
writes, the epoch rules of §1.5 through the APIs, the errors of §2.2-2.5 in Kafka's order, the
coordinator's own aborts (fencing, timeouts from txnStartTimestamp), verification (§2.7 c),
describe/list (§2.9) and transactional-id expiry (§3.3)."""

from __future__ import annotations

import pytest

from compactlog.coordinator.runtime import TxnError, answered
from compactlog.coordinator.txn.coordinator import TxnResult
from compactlog.coordinator.txn.metadata import MAX_EPOCH, TxnState

from .conftest import E, H

S = TxnState


# -- InitProducerId (§2.2) ------------------------------------------------------------------------

def test_init_new_id_then_bumps_with_the_request_timeout():
    h = H()
    r = h.init("t", 30000)
    assert r == TxnResult(E.none, 1000, 0)
    t = h.last()
    assert (t.state, t.producer_id, t.producer_epoch, t.txn_timeout_ms, t.sorted_partitions(), t.txn_start_ms,
            t.last_update_ms) == (S.EMPTY, 1000, 0, 30000, None, -1, h.now)
    assert h.c.partition_for("txn-1") == 10 and h.c.partition_for("my-transactional-id") == 46
    assert h.log[-1][0] == h.c.partition_for("t")
    h.now += 5
    assert h.init("t", 1000) == TxnResult(E.none, 1000, 1)
    assert (h.md().txn_timeout_ms, h.md().last_update_ms) == (1000, h.now)


@pytest.mark.parametrize("tid, timeout, code", [("", 1000, E.invalid_request), ("t", 0, E.invalid_transaction_timeout),
                                                ("t", -1, E.invalid_transaction_timeout),
                                                ("t", 900001, E.invalid_transaction_timeout)])
def test_init_refusals_write_nothing(tid, timeout, code):
    h = H()
    assert h.init(tid, timeout) == TxnResult(code)
    assert h.log == [] and h.c.txns == {}
    assert H(max_timeout_ms=5000).init("t", 5000).error == E.none


def test_readiness():
    h = H()
    h.c.active = False
    assert h.init().error == E.coordinator_not_available
    h.c.active = True
    p = h.c.partition_for("t")
    h.c.start_loading(p)
    assert h.init().error == E.coordinator_load_in_progress
    assert h.c.partition_for("txn-1") != p and h.init("txn-1").error == E.none      # other partitions serve
    h.c.fail_loading(p, "broken")
    assert h.init().error == E.coordinator_not_available
    h.c.finish_loading(p, {})
    assert h.init().error == E.none


def test_kip_360_recovery_retry_and_fencing():
    h = H()
    pid, e = h.init().producer_id, 0
    # the same instance recovers with its id and epoch: bumped, last epoch remembered
    assert h.init(expected=(pid, e)) == TxnResult(E.none, pid, 1)
    # its answer was lost: the retry with the old epoch gets the same epoch again, no bump
    assert h.init(expected=(pid, e)) == TxnResult(E.none, pid, 1)
    assert [t.producer_epoch for t in (x for _, _, x in h.log)] == [0, 1, 1]
    # a stale epoch, or an id that is not T's, is fenced
    assert h.init(expected=(pid, 7)).error == E.producer_fenced
    assert h.init(expected=(pid + 50, 1)).error == E.producer_fenced
    # a new instance (no expected epoch) bumps and forgets the last epoch: the old one is fenced
    assert h.init() == TxnResult(E.none, pid, 2)
    assert h.init(expected=(pid, 1)).error == E.producer_fenced
    # a brand-new id accepts whatever the client held (UNKNOWN_PRODUCER_ID recovery)
    assert h.init("new", expected=(77, 3)) == TxnResult(E.none, 1001, 0)


def test_exhausted_epoch_rotates_the_producer_id():
    h = H()
    pid = h.init().producer_id
    h.md().producer_epoch = 32766
    assert h.init(expected=(pid, 32766)) == TxnResult(E.none, 1001, 0)
    t = h.last()
    assert (t.prev_producer_id, t.last_producer_epoch) == (pid, 32766)
    # a retry of that rotation (the old id, an exhausted epoch) is the retry rule, not a fence
    assert h.init(expected=(pid, 32766)) == TxnResult(E.none, 1001, 0)
    # without an expected epoch: a new id, the last epoch forgotten
    h.md().producer_epoch = 32767
    assert h.init() == TxnResult(E.none, 1002, 0) and h.last().last_producer_epoch == -1


def test_init_while_prepared_or_pending_is_concurrent():
    h = H()
    h.auto_markers = False
    pid, e = h.ongoing()
    assert h.end("t", pid, e).error == E.none           # PrepareCommit, markers not written yet
    assert h.init().error == E.concurrent_transactions
    assert h.init(expected=(pid + 9, e)).error == E.concurrent_transactions   # pending checked first
    h.markers(h.pending_jobs.pop())
    assert h.init() == TxnResult(E.none, pid, e + 1)


# -- fencing (§1.5, §2.2 trace) --------------------------------------------------------------------

def test_fencing_an_ongoing_transaction_tv2():
    h = H(tv=2)
    h.init()
    h.init()
    h.init()
    h.init()
    pid, e = h.ongoing()            # epoch 4, as the spec's trace
    assert e == 4
    r = h.init()                    # instance B: no expected epoch
    assert r == TxnResult(E.concurrent_transactions)
    assert h.states()[-3:] == ["Ongoing", "PrepareAbort", "CompleteAbort"]
    pa, ca = [t for _, _, t in h.log][-2:]
    assert (pa.producer_epoch, pa.last_producer_epoch, pa.client_tv) == (5, 4, 2)
    assert (ca.producer_epoch, ca.sorted_partitions()) == (5, [])
    assert h.init() == TxnResult(E.none, pid, 6) and h.last().last_producer_epoch == -1
    # A: its EndTxn is fenced, its InitProducerId with its old epoch too (4 is neither 6 nor -1)
    assert h.end("t", pid, 4).error == E.producer_fenced
    assert h.init(expected=(pid, 4)).error == E.producer_fenced


def test_a_timed_out_instance_reclaims_the_epoch_with_tv2_and_is_fenced_with_tv0():
    for tv, expected in ((2, TxnResult(E.none, 1000, 1)), (0, TxnResult(E.producer_fenced))):
        h = H(tv=tv)
        pid, e = h.ongoing()
        h.now += 60001
        h.abort_timed_out()
        assert h.states()[-2:] == ["PrepareAbort", "CompleteAbort"]
        assert h.last().producer_epoch == e + 1
        # the instance's commit after the abort: fenced (KAFKA-20785 with TV2; TV0: epoch mismatch)
        assert h.end("t", pid, e).error == E.producer_fenced
        assert h.init(expected=(pid, e)) == expected


def test_end_txn_epoch_rules_follow_the_request_version_not_the_last_transition():
    """Kafka dispatches EndTxn on the request's version (TC.endTransaction: a client below v5 goes
    to endTransactionWithTV1, strict epoch equality), whatever TV the id's last transition used.
    After a TV2 timeout-abort (epoch e+1, client TV 2 in the metadata) librdkafka's EndTxn v1
    abort with epoch e is PRODUCER_FENCED there, as for a TV0 coordinator; it was answered NONE
    (a "clean" abort of a transaction the coordinator had already fenced)."""
    h = H(tv=2)
    pid, e = h.ongoing()
    h.now += 60001
    h.abort_timed_out()
    assert (h.md().state, h.md().producer_epoch, h.md().client_tv) == (S.COMPLETE_ABORT, e + 1, 2)
    assert h.end("t", pid, e, False, tv=0).error == E.producer_fenced
    assert h.end("t", pid, e, True, tv=0).error == E.producer_fenced
    # a v5 client's abort with e is the retry of the abort that bumped to e+1: NONE, new epoch
    assert h.end("t", pid, e, False, tv=2) == TxnResult(E.none, pid, e + 1)
    # a TV1 abort at the current epoch after the TV2 abort: CompleteAbort + abort is a retry (NONE)
    assert h.end("t", pid, e + 1, False, tv=0).error == E.none
    assert h.states()[-2:] == ["PrepareAbort", "CompleteAbort"]      # nothing more written


def test_failed_fence_write_tv1_keeps_the_bump_and_does_not_bump_twice():
    h = H(tv=0)
    pid, e = h.ongoing()
    h.fail = E.coordinator_not_available
    assert h.init().error == E.coordinator_not_available
    assert (h.md().producer_epoch, h.md().has_failed_epoch_fence, h.md().state) == (e + 1, True, S.ONGOING)
    h.fail = None
    assert h.init().error == E.concurrent_transactions
    assert h.log[-2][2].producer_epoch == e + 1           # PrepareAbort: still e+1
    assert h.init() == TxnResult(E.none, pid, e + 2)


def test_fence_at_32766_marks_with_32767_then_rotates():
    for tv in (0, 2):
        h = H(tv=tv)
        pid, _ = h.ongoing()
        h.md().producer_epoch = 32766
        h.auto_markers = False
        assert h.init().error == E.concurrent_transactions
        job = h.pending_jobs.pop()
        assert (job.producer_id, job.producer_epoch, job.commit) == (pid, MAX_EPOCH, False)
        h.markers(job)
        assert h.init() == TxnResult(E.none, 1001, 0)


# -- AddPartitionsToTxn / AddOffsetsToTxn (§2.3, §2.4) ------------------------------------------------

def test_add_partitions_errors_in_kafka_order():
    h = H()
    assert h.add("", 1, 0).error == E.invalid_request
    assert h.add("t", 1, 0).error == E.invalid_producer_id_mapping      # unknown id
    pid = h.init().producer_id
    assert h.add("t", pid + 1, 0).error == E.invalid_producer_id_mapping
    assert h.add("t", pid, 1).error == E.producer_fenced
    h.auto_markers = False
    assert h.add("t", pid, 0, ("a", 0)).error == E.none
    assert h.end("t", pid, 0).error == E.none
    assert h.add("t", pid, 0, ("a", 1)).error == E.concurrent_transactions      # Prepare*/pending
    assert h.add("t", pid + 1, 0).error == E.concurrent_transactions            # pending first (KAFKA-18660)


def test_add_partitions_writes_the_union_once_and_starts_the_clock():
    h = H()
    pid, e = h.ongoing("t", ("a", 0))
    start = h.now
    n = len(h.log)
    h.now += 10
    assert h.add("t", pid, e, ("a", 0)).error == E.none and len(h.log) == n         # nothing new
    assert h.add("t", pid, e, ("b", 2), ("a", 0)).error == E.none
    t = h.last()
    assert (t.state, t.partitions, t.txn_start_ms, t.last_update_ms) == \
        (S.ONGOING, {("a", 0), ("b", 2)}, start, h.now)
    h.fail = E.not_coordinator
    assert h.add("t", pid, e, ("c", 0)).error == E.not_coordinator
    assert ("c", 0) not in h.md().partitions and h.md().pending_state is None


# -- EndTxn TV1 (§2.5) ----------------------------------------------------------------------------------

def test_end_txn_tv1_commit_writes_prepare_markers_complete():
    h = H()
    h.auto_markers = False
    pid, e = h.ongoing("t", ("a", 0), ("b", 1))
    assert h.end("t", pid, e, True) == TxnResult(E.none, pid, e)
    assert h.states() == ["Empty", "Ongoing", "PrepareCommit"]
    t = h.last()
    assert (t.producer_epoch, t.partitions) == (e, {("a", 0), ("b", 1)})
    job = h.pending_jobs.pop()
    assert (job.commit, job.remaining, job.producer_epoch, job.coordinator_epoch) == \
        (True, {("a", 0), ("b", 1)}, e, 0)
    assert h.md().pending_state == S.COMPLETE_COMMIT
    # a retry meanwhile: concurrent; a described id shows the shrinking set
    assert h.end("t", pid, e, True).error == E.concurrent_transactions
    h.c.marker_done(job, ("a", 0))
    assert h.md().partitions == {("b", 1)}
    h.c.marker_done(job, ("b", 1))
    h.run(h.c.complete_markers(job))
    assert h.states()[-1] == "CompleteCommit" and h.last().sorted_partitions() == []
    # the retry after completion: NONE; an abort now: INVALID_TXN_STATE
    assert h.end("t", pid, e, True).error == E.none
    assert h.end("t", pid, e, False).error == E.invalid_txn_state


@pytest.mark.parametrize("state, commit, code", [
    (S.EMPTY, True, E.invalid_txn_state), (S.EMPTY, False, E.invalid_txn_state),
    (S.COMPLETE_COMMIT, True, E.none), (S.COMPLETE_COMMIT, False, E.invalid_txn_state),
    (S.COMPLETE_ABORT, False, E.none), (S.COMPLETE_ABORT, True, E.invalid_txn_state),
    (S.PREPARE_COMMIT, True, E.concurrent_transactions), (S.PREPARE_COMMIT, False, E.invalid_txn_state),
    (S.PREPARE_ABORT, False, E.concurrent_transactions), (S.PREPARE_ABORT, True, E.invalid_txn_state)])
def test_end_txn_tv1_by_state(state, commit, code):
    h = H()
    pid = h.init().producer_id
    h.md().state = state
    assert h.end("t", pid, 0, commit).error == code


def test_end_txn_tv1_refusals_in_order():
    h = H()
    assert h.end("", 1, 0).error == E.invalid_request
    assert h.end("t", 1, 0).error == E.invalid_producer_id_mapping
    pid, e = h.ongoing()
    assert h.end("t", pid + 1, e).error == E.invalid_producer_id_mapping
    assert h.end("t", pid, e + 1).error == E.producer_fenced
    assert h.end("t", pid, e - 1).error == E.producer_fenced
    h.fail = E.coordinator_not_available
    assert h.end("t", pid, e).error == E.coordinator_not_available
    assert h.md().state == S.ONGOING and h.md().pending_state is None
    h.fail = None
    assert h.end("t", pid, e, False).error == E.none and h.states()[-2:] == ["PrepareAbort", "CompleteAbort"]


# -- EndTxn TV2 (v5, not advertised yet) --------------------------------------------------------------

def _tv2_at(state, epoch=5):
    h = H()
    pid = h.init().producer_id
    m = h.md()
    m.state, m.producer_epoch, m.client_tv = state, epoch, 2
    return h, pid


@pytest.mark.parametrize("state, commit, retry, code", [
    (S.ONGOING, False, True, E.producer_fenced), (S.ONGOING, True, True, E.producer_fenced),
    (S.EMPTY, False, True, E.producer_fenced), (S.EMPTY, True, False, E.invalid_txn_state),
    (S.EMPTY, True, True, E.producer_fenced),
    (S.COMPLETE_ABORT, False, True, E.none), (S.COMPLETE_ABORT, True, True, E.producer_fenced),
    (S.COMPLETE_ABORT, True, False, E.invalid_txn_state),
    (S.COMPLETE_COMMIT, False, True, E.invalid_txn_state), (S.COMPLETE_COMMIT, True, True, E.none),
    (S.COMPLETE_COMMIT, True, False, E.invalid_txn_state),
    (S.PREPARE_COMMIT, True, True, E.concurrent_transactions), (S.PREPARE_COMMIT, False, True, E.invalid_txn_state),
    (S.PREPARE_ABORT, False, True, E.concurrent_transactions), (S.PREPARE_ABORT, True, True, E.invalid_txn_state),
    (S.PREPARE_COMMIT, True, False, E.producer_fenced), (S.PREPARE_ABORT, False, False, E.producer_fenced)])
def test_end_txn_tv2_table(state, commit, retry, code):
    h, pid = _tv2_at(state)
    epoch = 4 if retry else 5           # a retry carries the epoch before the bump
    assert h.end("t", pid, epoch, commit, tv=2).error == code


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_end_txn_tv2_abort_without_partitions_bumps_and_completes(state):
    h, pid = _tv2_at(state)
    assert h.end("t", pid, 5, False, tv=2) == TxnResult(E.none, pid, 6)
    pa, ca = [t for _, _, t in h.log][-2:]
    assert (pa.state, pa.producer_epoch, pa.last_producer_epoch, pa.txn_start_ms, pa.partitions) == \
        (S.PREPARE_ABORT, 6, 5, h.now, frozenset())
    assert (ca.state, ca.producer_epoch) == (S.COMPLETE_ABORT, 6)


def test_end_txn_tv2_commit_bumps_and_overflows_to_the_next_producer_id():
    h = H()
    pid, _ = h.ongoing(tv=2)
    h.md().producer_epoch = 3
    assert h.end("t", pid, 3, True, tv=2) == TxnResult(E.none, pid, 4)
    assert [t.producer_epoch for _, _, t in h.log][-2:] == [4, 4]
    assert h.end("t", pid, 3, True, tv=2) == TxnResult(E.none, pid, 4)          # retry: NONE
    h.add("t", pid, 4, tv=2)
    h.md().producer_epoch = 32766
    r = h.end("t", pid, 32766, True, tv=2)
    assert r == TxnResult(E.none, 1001, 0)
    pc, cc = [t for _, _, t in h.log][-2:]
    assert (pc.producer_id, pc.producer_epoch, pc.next_producer_id) == (pid, MAX_EPOCH, 1001)
    assert (cc.producer_id, cc.producer_epoch, cc.prev_producer_id, cc.next_producer_id) == (1001, 0, pid, -1)
    # the retry of the overflowing commit (old id, 32766) is recognised
    assert h.end("t", pid, 32766, True, tv=2) == TxnResult(E.none, 1001, 0)


# -- markers ----------------------------------------------------------------------------------------------

def test_markers_abandoned_keep_the_decision():
    h = H()
    h.auto_markers = False
    pid, e = h.ongoing()
    h.end("t", pid, e, True)
    job = h.pending_jobs.pop()
    h.c.markers_abandoned(job, "test")
    assert h.c.jobs == {} and h.md().state == S.PREPARE_COMMIT and h.md().pending_state == S.COMPLETE_COMMIT


def test_a_failed_complete_write_keeps_the_job():
    h = H()
    h.auto_markers = False
    pid, e = h.ongoing()
    h.end("t", pid, e, True)
    job = h.pending_jobs.pop()
    h.c.marker_done(job, ("a", 0))
    h.fail = E.coordinator_not_available
    h.run(h.c.complete_markers(job))
    assert h.c.jobs["t"] is job and h.md().state == S.PREPARE_COMMIT
    h.fail = None
    h.run(h.c.complete_markers(job))
    assert h.c.jobs == {} and h.md().state == S.COMPLETE_COMMIT


# -- timeouts (§3.1) -----------------------------------------------------------------------------------

def test_timeout_runs_from_the_transaction_start_not_the_last_activity():
    h = H()
    r = h.init("t", 2000)
    pid, e = r.producer_id, r.producer_epoch
    h.add("t", pid, e, ("a", 0))
    h.now += 1500
    h.add("t", pid, e, ("b", 0))            # activity does not restart the clock
    h.now += 500
    assert h.c.timed_out(h.now) == []       # start + timeout == now: not yet (strictly less)
    h.now += 1
    assert h.c.timed_out(h.now) == ["t"]
    h.abort_timed_out()
    assert h.states()[-2:] == ["PrepareAbort", "CompleteAbort"] and h.c.timed_out(h.now) == []
    # Empty / pending / loading ids never time out
    h.init("u", 1)
    h.now += 10
    assert h.c.timed_out(h.now) == []
    assert h.c.abort_timed_out("u", h.now) is None


# -- verification (§2.7 c) -------------------------------------------------------------------------------

def test_verify_partition_answers():
    h = H()
    def v(*args):          # the coordinator raises its refusals; the runtime answers their codes
        return answered(h.c.verify_partition, *args)[0]
    assert v("t", 1, 0, "a", 0) == E.invalid_producer_id_mapping
    assert v("", 1, 0, "a", 0) == E.invalid_producer_id_mapping
    pid, e = h.ongoing("t", ("a", 0))
    assert v("t", pid, e, "a", 0) == E.none
    assert v("t", pid, e, "a", 1) == E.transaction_abortable
    assert v("t", pid + 1, e, "a", 0) == E.invalid_producer_id_mapping
    assert v("t", pid, e + 1, "a", 0) == E.producer_fenced
    h.auto_markers = False
    h.end("t", pid, e)
    assert v("t", pid, e, "a", 0) == E.concurrent_transactions
    h.c.start_loading(h.c.partition_for("t"))
    assert v("t", pid, e, "a", 0) == E.coordinator_load_in_progress
    h.c.active = False
    assert v("t", pid, e, "a", 0) == E.coordinator_not_available


# -- describe / list (§2.9) -------------------------------------------------------------------------------

def test_describe():
    h = H()
    assert answered(h.c.describe, "")[0] == E.invalid_request
    assert answered(h.c.describe, "t")[0] == E.transactional_id_not_found
    h.ongoing("t", ("b", 1), ("a", 0), ("a", 2))
    code, md = answered(h.c.describe, "t")
    assert code == E.none and md.state.display == "Ongoing" and md.topics() == [("a", [0, 2]), ("b", [1])]
    h.c.start_loading(h.c.partition_for("t"))
    assert answered(h.c.describe, "t")[0] == E.coordinator_load_in_progress
    h.c.active = False
    assert answered(h.c.describe, "t")[0] == E.coordinator_not_available


def test_list_filters():
    h = H()
    h.ongoing("t1")                     # pid 1000, started now
    h.now += 1000
    h.init("t2")                        # pid 1001, Empty
    h.ongoing("x3")                     # pid 1002, started 1000 ms later
    h.now += 500

    def names(**kw):
        code, (unknown, listed) = answered(h.c.list_transactions, **kw)
        assert code == E.none
        return unknown, [m.transactional_id for m in listed]
    assert names() == ([], ["t1", "t2", "x3"])
    assert names(states=("Ongoing", "Bogus")) == (["Bogus"], ["t1", "x3"])
    assert names(states=("Bogus",)) == (["Bogus"], [])
    assert names(producer_ids=(1001, 1002)) == ([], ["t2", "x3"])
    # duration: running longer than 1000 ms (Empty has start -1 and always passes)
    assert names(duration_ms=1000) == ([], ["t1", "t2"])
    assert names(pattern="t.*") == ([], ["t1", "t2"])
    assert names(pattern="t") == ([], [])              # the whole id must match (Java's matches())
    assert names(pattern="") == ([], ["t1", "t2", "x3"])
    assert names(states=("Ongoing",), pattern="x.") == ([], ["x3"])
    with pytest.raises(TxnError) as refused:
        h.c.list_transactions(pattern="(")
    assert refused.value.code == refused.value.kafka_error == E.invalid_regular_expression
    h.c.start_loading(3)
    assert answered(h.c.list_transactions) == (E.coordinator_load_in_progress, None)


# -- transactional id expiry (§3.3) --------------------------------------------------------------------

def test_expiry_writes_tombstones_and_a_returning_producer_gets_a_new_id():
    h = H(id_expiration_ms=10000)
    pid = h.init("old").producer_id
    h.ongoing("busy")
    h.now += 10000
    exp = h.c.expirable(h.now)
    assert exp == {h.c.partition_for("old"): ["old"]}
    d = h.c.expire(h.c.partition_for("old"), ["old"])
    assert h.md("old").pending_state == S.DEAD
    assert h.c.init_producer_id("old", 1000).result.error == E.concurrent_transactions
    h.run(d)
    assert "old" not in h.c.txns and h.states("old")[-1] == "<tombstone>"
    assert answered(h.c.describe, "old")[0] == E.transactional_id_not_found
    assert h.add("old", pid, 0).error == E.invalid_producer_id_mapping
    assert h.init("old").producer_id != pid
    # a failed tombstone write keeps the id
    h.now += 20000
    h.fail = E.not_coordinator
    h.run(h.c.expire(h.c.partition_for("old"), ["old"]))
    assert h.md("old").pending_state is None
    # an Ongoing id never expires
    assert "busy" not in [t for ts in h.c.expirable(h.now).values() for t in ts]


# -- loading -------------------------------------------------------------------------------------------

def test_finish_loading_re_drives_prepared_transactions():
    h = H()
    h.auto_markers = False
    pid, e = h.ongoing("t", ("a", 0))
    h.end("t", pid, e)
    # a restart: a new coordinator replays the records written so far
    from compactlog.coordinator.txn.metadata import TransactionMetadata
    loaded = {}
    for _, tid, t in h.log:
        loaded[tid] = TransactionMetadata.from_transit(tid, t)
    h2 = H()
    p = h2.c.partition_for("t")
    h2.c.start_loading(p)
    assert h2.init().error == E.coordinator_load_in_progress
    jobs = h2.c.finish_loading(p, loaded)
    assert [(j.transactional_id, j.commit, j.remaining) for j in jobs] == [("t", True, {("a", 0)})]
    assert h2.end("t", pid, e).error == E.concurrent_transactions
    h2.markers(jobs[0])
    assert h2.md().state == S.COMPLETE_COMMIT
    assert h2.end("t", pid, e).error == E.none
