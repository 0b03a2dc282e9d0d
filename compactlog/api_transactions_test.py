"""The Python API's offline transactions: ``__transaction_state`` replayed read-only (list and
describe with the coordinator's filters and errors), the partitions' producer state, and the
admin's abort, written by the broker's marker function only with a writer (``__consumer_offsets``
through the group coordinator), refused without change when its epochs are stale."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

import compactlog
from compactlog.api import ProducerState, TransactionDescription, TransactionListing
from compactlog.errors import ReadOnlyError
from compactlog.record import consumer_offsets as R
from compactlog.record import transaction_log as TL
from compactlog.coordinator.txn.state_log import TRANSACTION_STATE_TOPIC, partition_for

T0 = 1_700_000_000_000
PARTS = 3          # __transaction_state's partitions here: the formula follows the topic's real count


def put_state(dd, tid: str, pid: int, epoch: int, status: int, partitions, start: int = -1) -> None:
    value = TL.encode_value_v1(pid, epoch, 60000, status, partitions, T0, start)
    dd.open_log(TRANSACTION_STATE_TOPIC, partition_for(tid, PARTS)).append_records([TL.encode_key(tid)], [value])


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "data")
    with compactlog.open(path, write=True, create=True) as log:
        dd = log._dd
        dd.create_topic("t", 1)
        dd.create_topic(TRANSACTION_STATE_TOPIC, PARTS, {"cleanup.policy": "compact"})
        put_state(dd, "a", 7, 0, 1, [("t", [0])], start=T0)        # Ongoing on t-0
        put_state(dd, "b", 8, 2, 0, None)                           # Empty
        t0 = dd.open_log("t", 0)
        t0.append_records([b"k"], [b"a's"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True,
                          timestamps=[T0])
        t0.append_records([b"k"], [b"lost"], producer_id=9, producer_epoch=1, base_sequence=0, transactional=True,
                          timestamps=[T0 + 1])
    return path


def test_list_and_describe_from_the_state_log(root):
    with compactlog.open(root) as log:
        txns = log.transactions()
        assert txns.list_transactions() == (ErrorCode.none, [], [TransactionListing("a", 7, "Ongoing"),
                                                                 TransactionListing("b", 8, "Empty")])
        assert txns.list_transactions(states=["Ongoing", "Nope"], producer_ids=[7]) == \
            (ErrorCode.none, ["Nope"], [TransactionListing("a", 7, "Ongoing")])
        assert txns.describe("a") == (ErrorCode.none, TransactionDescription("a", "Ongoing", 7, 0, 60000, T0,
                                                                             (("t", 0),)))
        assert txns.describe("zz") == (ErrorCode.transactional_id_not_found, None)
        assert txns.describe("") == (ErrorCode.invalid_request, None)
        assert txns.unreadable == {}


def test_producers_and_the_readers_refused_abort(root):
    with compactlog.open(root) as log:
        txns = log.transactions()
        assert txns.describe_producers("t", 0) == (ErrorCode.none, None, [
            ProducerState(7, 0, 0, T0, -1, 0), ProducerState(9, 1, 0, T0 + 1, -1, 1)])
        assert txns.describe_producers("t", 5)[0] == ErrorCode.unknown_topic_or_partition
        assert txns.describe_producers("nope", 0)[:2] == (ErrorCode.unknown_topic_or_partition,
                                                          "This server does not host this topic-partition.")
        with pytest.raises(ReadOnlyError):
            txns.abort("t", 0, 9, 1, 0)


def test_abort_writes_the_marker_and_moves_the_last_stable_offset(root):
    with compactlog.open(root, write=True) as log:
        txns = log.transactions()
        lg = log._dd.open_log("t", 0)
        end = lg.log_end_offset
        assert lg.last_stable_offset == 0
        # refused, nothing written: an older epoch than the producer's, a partition that does not exist
        assert txns.abort("t", 0, 9, 0, 0) == ErrorCode.invalid_producer_epoch
        assert txns.abort("t", 7, 9, 1, 0) == ErrorCode.unknown_topic_or_partition
        assert lg.log_end_offset == end
        assert txns.abort("t", 0, 7, 0, 0) == ErrorCode.none          # a's transaction ends here
        assert lg.last_stable_offset == 1                               # 9's is still open
        assert txns.abort("t", 0, 9, 1, 0) == ErrorCode.none
        assert lg.last_stable_offset == lg.log_end_offset == end + 2
        states = {p.producer_id: p for p in txns.describe_producers("t", 0)[2]}
        assert states[9].current_transaction_start_offset == -1 and states[9].coordinator_epoch == 0
        txns.close()
    with compactlog.open(root) as log:        # the markers are in the log: a reader sees it settled
        assert [r.value for r in log.read("t", isolation_level="read_committed")] == []
        assert [r.value for r in log.read("t")] == [b"a's", b"lost"]


def test_abort_on_the_offsets_topic_goes_through_the_group_coordinator(root):
    with compactlog.open(root, write=True) as log:
        groups = log.consumer_groups()
        groups.commit_offsets("g", {("t", 0): 1})                        # creates __consumer_offsets
        groups.close()
        p = R.partition_for("g", len(log.partitions(R.OFFSETS_TOPIC)))
        txns = log.transactions()
        end = log._dd.open_log(R.OFFSETS_TOPIC, p).log_end_offset
        assert txns.abort(R.OFFSETS_TOPIC, p, 42, 0, 0) == ErrorCode.none
        assert log._dd.open_log(R.OFFSETS_TOPIC, p).log_end_offset == end + 1
        txns.close()
        assert log.consumer_groups().committed_offsets("g") == {("t", 0): 1}


def test_an_unreadable_state_partition_answers_coordinator_not_available(root):
    with compactlog.open(root, write=True) as log:
        dd = log._dd
        p = partition_for("a", PARTS)
        dd.open_log(TRANSACTION_STATE_TOPIC, p).append_records([TL.encode_key("c")], [b"\x00\x09" + b"\x00" * 30])
    with compactlog.open(root) as log:
        txns = log.transactions()
        assert list(txns.unreadable) == [p] and "unknown transaction log value version 9" in txns.unreadable[p]
        assert txns.describe("a") == (ErrorCode.coordinator_not_available, None)
        assert txns.list_transactions()[0] == ErrorCode.coordinator_not_available
