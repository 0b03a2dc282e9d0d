"""DeleteRecords through its handler (``apis/records.py``), sans IO: the low watermarks answered,
the log start moved and checkpointed, Kafka's errors per partition."""

from __future__ import annotations

import os

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.errors import OffsetOutOfRangeError
from compactlog.server.apis.conftest import call, create, delete_records_req, fill
from compactlog.server.apis.records import handle_delete_records
from compactlog.storage import files
from compactlog.storage.checkpoint import OffsetCheckpointFile


@pytest.fixture
def state(make_state):
    return make_state()


# -- DeleteRecords --------------------------------------------------------------------------------

def low_watermarks(response):
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark)
            for t in response.topics for p in t.partitions}


def test_delete_records(state):
    create(state, ("t", 2, 1, {"segment.bytes": "200"}))
    log = fill(state, "t", 10)
    fill(state, "t", 4, partition=1)
    response = call(handle_delete_records, state, delete_records_req([("t", [(0, 6), (1, -1)])]))
    assert low_watermarks(response) == {("t", 0): (E.none, 6), ("t", 1): (E.none, 4)}
    assert log.log_start_offset == 6
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5)
    checkpoint = OffsetCheckpointFile(os.path.join(state.datadir.path, files.LOG_START_OFFSET_CHECKPOINT))
    assert checkpoint.read() == {("t", 0): 6, ("t", 1): 4}
    # an offset below the log start changes nothing and answers the current low watermark
    response = call(handle_delete_records, state, delete_records_req([("t", [(0, 2)])]))
    assert low_watermarks(response) == {("t", 0): (E.none, 6)}


@pytest.mark.parametrize("offset", [11, -2])
def test_delete_records_out_of_range(state, offset):
    create(state, "t")
    log = fill(state, "t", 10)
    response = call(handle_delete_records, state, delete_records_req([("t", [(0, offset)])]))
    assert low_watermarks(response) == {("t", 0): (E.offset_out_of_range, -1)}
    assert log.log_start_offset == 0


def test_delete_records_errors(state):
    create(state, ("c", 1, 1, {"cleanup.policy": "compact"}), ("cd", 1, 1, {"cleanup.policy": "compact,delete"}),
           "__consumer_offsets", "t")
    fill(state, "cd", 3)
    response = call(handle_delete_records, state, delete_records_req([
        ("c", [(0, 0)]), ("cd", [(0, 2)]), ("__consumer_offsets", [(0, 0)]), ("t", [(1, 0), (0, 0), (0, -1)]),
        ("nope", [(0, 0)])], version=0))
    assert low_watermarks(response) == {
        ("c", 0): (E.policy_violation, -1), ("cd", 0): (E.none, 2),
        ("__consumer_offsets", 0): (E.invalid_topic_exception, -1),
        ("t", 1): (E.unknown_topic_or_partition, -1), ("t", 0): (E.none, 0),
        ("nope", 0): (E.unknown_topic_or_partition, -1)}
    assert [len(t.partitions) for t in response.topics] == [1, 1, 1, 2, 1]
