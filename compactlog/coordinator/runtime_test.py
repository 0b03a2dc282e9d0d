"""The coordinator runtime's pieces: keyed timers, the loading partitions and the codes a failed
append is answered with."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.offset_manager import commit_append_error
from compactlog.coordinator.runtime import (MAX_TIMER_WAIT_S, CoordinatorError, CoordinatorPartitions,
                                            CoordinatorRuntime, GroupError, Periodic, Timer, TxnError, answered,
                                            append_error, error_code_of, operation_error, seconds_until)
from compactlog.errors import UnknownProducerIdError

def test_timer_order_and_replacement():
    t = Timer()
    fired = []
    t.schedule("a", 10, lambda: fired.append("a"))
    t.schedule("b", 5, lambda: fired.append("b"))
    t.schedule("a", 20, lambda: fired.append("a2"))
    for _, fn in t.pop_due(15):
        fn()
    assert fired == ["b"] and t.next_deadline() == 20
    t.cancel("a")
    assert t.next_deadline() is None and len(t) == 0


class _StorageError(Exception):
    def __init__(self, kafka_error):
        super().__init__("append failed")
        self.kafka_error = kafka_error


def test_a_failed_append_is_answered_as_kafka_answers_it():
    assert append_error(_StorageError(ErrorCode.unknown_topic_or_partition)) == ErrorCode.coordinator_not_available
    assert append_error(_StorageError(ErrorCode.request_timed_out)) == ErrorCode.coordinator_not_available
    assert append_error(_StorageError(ErrorCode.record_list_too_large)) == ErrorCode.unknown_server_error
    assert append_error(_StorageError(ErrorCode.kafka_storage_error)) == ErrorCode.not_coordinator
    assert append_error(OSError("disk gone")) == ErrorCode.not_coordinator
    # OffsetCommit says so when the commit itself is too large
    assert commit_append_error(_StorageError(ErrorCode.message_too_large)) == ErrorCode.invalid_commit_offset_size
    assert commit_append_error(OSError("disk gone")) == ErrorCode.not_coordinator


def test_one_table_for_an_operation_of_either_coordinator():
    # CoordinatorOperationExceptionHelper / TransactionStateManager.appendTransactionToLog
    E = ErrorCode
    for code, answer in [(E.unknown_topic_or_partition, E.coordinator_not_available),
                         (E.not_enough_replicas, E.coordinator_not_available),
                         (E.request_timed_out, E.coordinator_not_available),
                         (E.not_leader_or_follower, E.not_coordinator), (E.kafka_storage_error, E.not_coordinator),
                         (E.message_too_large, E.unknown_server_error), (E.record_list_too_large, E.unknown_server_error),
                         (E.network_exception, E.coordinator_load_in_progress),
                         (E.invalid_producer_epoch, E.invalid_producer_epoch), (E.none, E.none)]:
        assert operation_error(code) == answer, code
    # a group append's other failures (an unknown error of the storage) send the client to look again
    assert append_error(_StorageError(E.unknown_server_error)) == E.not_coordinator
    assert append_error(_StorageError(E.corrupt_message)) == E.not_coordinator


def test_periodic_runs_when_due_and_rearms_from_then():
    ran = []
    task = Periodic(100)
    task.run_if_due(10_000, lambda: ran.append(1))          # not started: never due
    task.start(1000)
    task.run_if_due(1099, lambda: ran.append(2))
    task.run_if_due(1150, lambda: ran.append(3))
    assert ran == [3] and task.next_ms == 1250

    def fails():
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError):
        task.run_if_due(1300, fails)
    assert task.next_ms == 1250                              # not re-armed: the next pass tries again


def test_the_timer_thread_sleeps_until_the_earliest_deadline_at_most_a_second():
    assert seconds_until([None, None], 1000) == MAX_TIMER_WAIT_S
    assert seconds_until([1500, None, 1200], 1000) == 0.2
    assert seconds_until([900], 1000) == 0.0
    assert seconds_until([60_000], 1000) == MAX_TIMER_WAIT_S


class _Shard:
    def __init__(self):
        self.loading = set()

    def start_loading(self, p):
        self.loading.add(p)


class _Runtime(CoordinatorRuntime):
    topic, name, thread_name = "__t", "test coordinator", "test-coordinator"

    def __init__(self, clock):
        super().__init__(clock)
        self.coordinator = _Shard()
        self.loaded_parts, self.failed, self.timer_calls = [], [], []
        self.expiry = Periodic(1000)

    def partitions_to_load(self):
        return [0, 1, 2]

    def load_partition(self, p):
        if p == 1:
            raise OSError("unreadable")
        self.coordinator.loading.discard(p)
        self.loaded_parts.append(p)

    def load_failed(self, p):
        self.failed.append(p)

    def activate(self):
        self.expiry.start(self.clock())

    def run_timers(self, now):
        self.timer_calls.append(now)
        self.expiry.run_if_due(now, lambda: None)
        return [self.expiry.next_ms]


def test_the_runtime_loads_every_partition_past_a_failed_one_then_drives_the_timers():
    now = [5000]
    rt = _Runtime(lambda: now[0])
    rt.start()
    try:
        assert rt.loaded.wait(10)
        assert rt.loaded_parts == [0, 2] and rt.failed == [1] and rt.coordinator.loading == {1}
        now[0] = 5400
        assert rt.run_due() == pytest.approx(0.6)           # expiry armed at start (5000 + 1000)
        now[0] = 6000
        assert rt.run_due() == MAX_TIMER_WAIT_S and rt.expiry.next_ms == 7000
    finally:
        rt.stop(5)
    assert not any(t.is_alive() for t in rt._threads)


def test_loading_partitions_refuse_their_groups_only():
    parts = CoordinatorPartitions(50)
    p = parts.partition_for("g")
    assert p == R.partition_for("g", 50) and not parts.is_loading("g")
    parts.loading.add(p)
    other = next(g for g in (f"g{i}" for i in range(100)) if parts.partition_for(g) != p)
    assert parts.is_loading("g") and not parts.is_loading(other)
    with pytest.raises(GroupError) as e:
        parts.check_loaded("g")
    assert e.value.code == ErrorCode.coordinator_load_in_progress
    parts.check_loaded(other)


def test_refusals_and_failures_map_to_codes_in_one_place():
    """A coordinator's refusal carries its own code (GroupError and TxnError alike), a failed
    append the code its error names, anything else (an OSError) KAFKA_STORAGE_ERROR."""
    for refusal in (GroupError(ErrorCode.illegal_generation, "old generation"), TxnError(ErrorCode.illegal_generation)):
        assert isinstance(refusal, CoordinatorError)
        assert error_code_of(refusal) == refusal.code == ErrorCode.illegal_generation
    assert str(TxnError(ErrorCode.producer_fenced)) == "producer_fenced"
    assert error_code_of(UnknownProducerIdError("gone")) == ErrorCode.unknown_producer_id
    assert error_code_of(OSError(5, "EIO")) == ErrorCode.kafka_storage_error
    # an append refused as a coordinator refuses is answered as a refusal, not as a storage failure
    assert append_error(GroupError(ErrorCode.not_enough_replicas)) == ErrorCode.coordinator_not_available


def test_answered_is_a_result_or_a_refusals_code():
    def describe(group_id):
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id)
        return {"group": group_id}
    assert answered(describe, "g") == (ErrorCode.none, {"group": "g"})
    assert answered(describe, "") == (ErrorCode.invalid_group_id, None)
    with pytest.raises(KeyError):
        answered(lambda: {}["bug"])          # a bug is no refusal: it is not turned into a code
