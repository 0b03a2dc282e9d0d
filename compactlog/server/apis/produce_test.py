"""Produce with transactional batches (transactions.md §2.7) through the handler, raw kio requests
in: the request-wide refusals, KIP-890's verification against a fake transaction coordinator and
its answer per Produce version, and the append rules of the producer state."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.server.conftest import FakeTransactions
from compactlog.server.handlers_test import batch, produce, state  # noqa: F401 (the fixture)

TID = "tx-1"


def txn(keys, pid=7, epoch=0, seq=0):
    return batch(keys, pid=pid, epoch=epoch, seq=seq, transactional=True)


def codes(rs):
    return [r.error_code for r in rs]


def test_a_transactional_batch_without_transactional_id_refuses_the_whole_request(state):
    state.create_topic("t", 2)
    rs = produce(state, [("t", 0, batch([b"a"])), ("t", 1, txn([b"b"])), ("nope", 0, batch([b"c"]))])
    assert codes(rs) == [ErrorCode.transactional_id_authorization_failed] * 3
    assert state.log("t", 0).log_end_offset == 0


def test_transactional_batches_of_two_producers_refuse_the_whole_request(state):
    state.create_topic("t", 2)
    state.transactions = FakeTransactions()
    rs = produce(state, [("t", 0, txn([b"a"], pid=7)), ("t", 1, txn([b"b"], pid=8))], transactional_id=TID)
    assert codes(rs) == [ErrorCode.invalid_producer_id_mapping] * 2
    # Kafka collects (producer id, epoch) pairs: one id with two epochs is refused too
    rs = produce(state, [("t", 0, txn([b"a"], epoch=0)), ("t", 1, txn([b"b"], epoch=1))], transactional_id=TID)
    assert codes(rs) == [ErrorCode.invalid_producer_id_mapping] * 2
    assert state.transactions.calls == []
    # a partition refused by KafkaApis' own checks does not count
    state.transactions.add(TID, 7, 0, ("t", 0))
    rs = produce(state, [("t", 0, txn([b"a"], pid=7)), ("nope", 0, txn([b"b"], pid=8))], transactional_id=TID)
    assert codes(rs) == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]


def test_verification_per_version(state):
    state.create_topic("t", 2)
    fake = state.transactions = FakeTransactions()
    fake.add(TID, 7, 0, ("t", 0))
    # not added: INVALID_TXN_STATE up to v10, TRANSACTION_ABORTABLE from v11 (and v12: verify only)
    for version, code in ((9, ErrorCode.invalid_txn_state), (10, ErrorCode.invalid_txn_state),
                          (11, ErrorCode.transaction_abortable), (12, ErrorCode.transaction_abortable)):
        [r] = produce(state, [("t", 1, txn([b"x"]))], version=version, transactional_id=TID)
        assert r.error_code == code, version
    assert state.log("t", 1).log_end_offset == 0
    # added: appended, the transaction is open (the LSO holds), later batches need no question
    [r] = produce(state, [("t", 0, txn([b"a", b"b"]))], transactional_id=TID)
    assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)
    asked = len(fake.calls)
    [r] = produce(state, [("t", 0, txn([b"c"], seq=2))], transactional_id=TID)
    assert r.error_code == ErrorCode.none and len(fake.calls) == asked
    lg = state.log("t", 0)
    assert lg.last_stable_offset == 0 and lg.high_watermark == 3
    # a non-transactional batch of the same producer while its transaction is open (§2.7 step 5)
    [r] = produce(state, [("t", 0, batch([b"d"], pid=7, epoch=0, seq=3))], transactional_id=TID)
    assert r.error_code == ErrorCode.invalid_txn_state
    # the marker closes the transaction; the next write is verified again
    lg.append_control(commit=True, producer_id=7, producer_epoch=0)
    fake.add(TID, 7, 0)
    [r] = produce(state, [("t", 0, txn([b"e"], seq=3))], version=11, transactional_id=TID)
    assert r.error_code == ErrorCode.transaction_abortable and len(fake.calls) == asked + 1


def test_coordinator_answers_as_each_version_sees_them(state):
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    cases = [(ErrorCode.producer_fenced, 9, ErrorCode.invalid_producer_epoch),
             (ErrorCode.producer_fenced, 11, ErrorCode.invalid_producer_epoch),
             (ErrorCode.invalid_producer_id_mapping, 9, ErrorCode.invalid_producer_id_mapping),
             (ErrorCode.concurrent_transactions, 11, ErrorCode.not_enough_replicas),
             (ErrorCode.concurrent_transactions, 12, ErrorCode.concurrent_transactions),
             (ErrorCode.coordinator_load_in_progress, 12, ErrorCode.not_enough_replicas),
             (ErrorCode.coordinator_not_available, 9, ErrorCode.not_enough_replicas),
             (ErrorCode.not_coordinator, 11, ErrorCode.not_enough_replicas)]
    for answer, version, expected in cases:
        fake.answer = answer
        [r] = produce(state, [("t", 0, txn([b"x"]))], version=version, transactional_id=TID)
        assert r.error_code == expected, (answer, version)
        if expected == ErrorCode.not_enough_replicas:
            assert answer.name.upper() in r.error_message
    # no coordinator running at all
    state.transactions = None
    [r] = produce(state, [("t", 0, txn([b"x"]))], transactional_id=TID)
    assert r.error_code == ErrorCode.not_enough_replicas
    assert state.log("t", 0).log_end_offset == 0


def test_a_stale_epoch_is_refused_before_asking(state):
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    fake.add(TID, 7, 1, ("t", 0))
    [r] = produce(state, [("t", 0, txn([b"a"], epoch=1))], transactional_id=TID)
    assert r.error_code == ErrorCode.none
    state.log("t", 0).append_control(commit=False, producer_id=7, producer_epoch=1)
    asked = len(fake.calls)
    [r] = produce(state, [("t", 0, txn([b"b"], epoch=0, seq=0))], transactional_id=TID)
    assert r.error_code == ErrorCode.invalid_producer_epoch and len(fake.calls) == asked


def test_a_marker_between_the_answer_and_the_append_refuses_the_batch(state):
    """KIP-890's guard: the coordinator said yes, then the transaction ended before the append."""
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    fake.add(TID, 7, 0, ("t", 0))
    lg = state.log("t", 0)
    fake.before_answer = lambda: lg.append_control(commit=False, producer_id=7, producer_epoch=0)
    [r] = produce(state, [("t", 0, txn([b"late"]))], transactional_id=TID)
    assert r.error_code == ErrorCode.invalid_txn_state
    assert lg.last_stable_offset == lg.log_end_offset == 1        # the marker only: nothing hangs


def test_verification_disabled_and_idempotent_batches_ask_nothing(state):
    state.create_topic("t", 1)
    fake = state.transactions = FakeTransactions()
    [r] = produce(state, [("t", 0, batch([b"a"], pid=9, epoch=0, seq=0))], transactional_id=TID)
    assert r.error_code == ErrorCode.none and fake.calls == []
    state.datadir.broker.props["transaction.partition.verification.enable"] = "false"
    [r] = produce(state, [("t", 0, txn([b"b"]))], transactional_id=TID)
    assert r.error_code == ErrorCode.none and fake.calls == []
    assert state.log("t", 0).last_stable_offset == 1          # a transaction the coordinator never saw
