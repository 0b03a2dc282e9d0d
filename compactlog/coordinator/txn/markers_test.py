"""The one marker append and how the marker phase reads a partition's answer (Kafka's
TransactionMarkerRequestCompletionHandler); the phase itself on real partitions is in
service_test.py."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.errors import InvalidProducerEpochError
from compactlog.coordinator.txn.markers import DONE, DROP, RETRY, STOP, classify, write_marker

E = ErrorCode


class FakeState:
    """Only what write_marker uses: the logs, the group coordinator, the fetch wake-ups."""

    def __init__(self, groups=None, logs=None):
        self.groups = groups
        self.logs = logs or {}
        self.notified = []
        self.appends = self

    def log(self, topic, partition):
        return self.logs.get((topic, partition))

    def notify(self, keys):
        self.notified.extend(keys)


class FakeLog:
    def __init__(self, error=None):
        self.error = error
        self.calls = []

    def append_control(self, **kw):
        if self.error is not None:
            raise self.error
        self.calls.append(kw)


def test_data_partition_marker_is_one_append_and_wakes_fetches():
    lg = FakeLog()
    st = FakeState(logs={("t", 1): lg})
    assert write_marker(st, "t", 1, 5, 2, 0, True) == E.none
    assert lg.calls == [dict(commit=True, producer_id=5, producer_epoch=2, coordinator_epoch=0)]
    assert st.notified == [("t", 1)]
    assert write_marker(st, "gone", 0, 5, 2, 0, True) == E.unknown_topic_or_partition
    st.logs[("t", 2)] = FakeLog(InvalidProducerEpochError("old epoch"))
    assert write_marker(st, "t", 2, 5, 1, 0, False) == E.invalid_producer_epoch
    st.logs[("t", 3)] = FakeLog(OSError("disk"))
    assert write_marker(st, "t", 3, 5, 1, 0, False) == E.kafka_storage_error


def test_offsets_partition_marker_goes_to_the_group_hook():
    offsets = {("__consumer_offsets", p): FakeLog() for p in (0, 3, 9)}
    assert write_marker(FakeState(logs=offsets), "__consumer_offsets", 0, 5, 2, 0, True) == \
        E.coordinator_not_available                                     # no hook: not ready, retried
    assert write_marker(FakeState(logs=offsets), "__consumer_offsets", 1, 5, 2, 0, True) == \
        E.unknown_topic_or_partition                                    # no such partition: dropped

    class Groups:
        calls = []

        def write_txn_marker(self, partition, producer_id, producer_epoch, coordinator_epoch, commit):
            self.calls.append((partition, producer_id, producer_epoch, coordinator_epoch, commit))
            return E.transaction_coordinator_fenced if partition == 9 else E.none
    g = Groups()
    st = FakeState(groups=g, logs=offsets)
    assert write_marker(st, "__consumer_offsets", 3, 5, 2, 7, False) == E.none
    assert write_marker(st, "__consumer_offsets", 9, 5, 2, 7, False) == E.transaction_coordinator_fenced
    assert g.calls == [(3, 5, 2, 7, False), (9, 5, 2, 7, False)]


def test_classify_follows_the_completion_handler():
    assert classify(E.none, True) == DONE
    assert classify(E.unknown_topic_or_partition, False) == DROP          # the topic was deleted
    assert classify(E.unknown_topic_or_partition, True) == RETRY
    for code in (E.not_leader_or_follower, E.not_enough_replicas, E.not_enough_replicas_after_append,
                 E.request_timed_out, E.kafka_storage_error, E.coordinator_load_in_progress,
                 E.coordinator_not_available, E.not_coordinator):
        assert classify(code, True) == RETRY
    assert classify(E.invalid_producer_epoch, True) == STOP
    assert classify(E.transaction_coordinator_fenced, True) == STOP
    assert classify(E.unsupported_for_message_format, True) == DROP
    assert classify(E.unsupported_version, True) == DROP
    assert classify(E.corrupt_message, True) == RETRY                   # never complete with a partition unmarked
