"""The coordinator runtime's pieces: keyed timers, the loading partitions and the codes a failed
append is answered with."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.offset_manager import commit_append_error
from compactlog.coordinator.runtime import CoordinatorPartitions, GroupError, Timer, append_error

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
