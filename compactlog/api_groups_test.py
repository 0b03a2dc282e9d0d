"""The Python API's offline consumer groups: committed offsets written as the broker's coordinator
writes them and read back after a reopen, a group's description, OffsetDelete's answer for
partitions the data dir does not have, and DeleteGroups."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

import compactlog
from compactlog.record import consumer_offsets as R


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "data")
    with compactlog.open(path, write=True, create=True) as log:
        log.create_topic("t", partitions=2)
        log.send_many("t", [(b"k%d" % i, b"v", None, i % 2) for i in range(6)])
    return path


def test_commit_read_back_and_describe(root):
    with compactlog.open(root, write=True) as log:
        groups = log.consumer_groups()
        assert groups.list_groups() == [] and groups.committed_offsets("g") == {}
        assert groups.describe_group("g") == compactlog.api.GroupDescription("g", "Dead", "", "", ())
        assert groups.commit_offsets("g", {("t", 1): 2, ("t", 0): 3}) == {("t", 0): ErrorCode.none,
                                                                          ("t", 1): ErrorCode.none}
        groups.close()
        assert log.partitions(R.OFFSETS_TOPIC)              # written to __consumer_offsets
    with compactlog.open(root) as log:                       # a reader sees them after a reopen
        groups = log.consumer_groups()
        assert groups.committed_offsets("g") == {("t", 0): 3, ("t", 1): 2}
        assert groups.list_groups() == [("g", "Empty")] and groups.list_groups(["stable"]) == []
        assert groups.describe_group("g") == compactlog.api.GroupDescription("g", "Empty", "", "", ())
        groups.close()


def test_delete_offsets_and_groups(root):
    with compactlog.open(root, write=True) as log:
        groups = log.consumer_groups()
        groups.commit_offsets("g", {("t", 0): 1, ("t", 1): 1})
        top, per = groups.delete_offsets("g", [("t", 0), ("t", 7), ("nosuch", 0)])
        assert top == ErrorCode.none
        assert per == {("t", 0): ErrorCode.none, ("t", 7): ErrorCode.unknown_topic_or_partition,
                       ("nosuch", 0): ErrorCode.unknown_topic_or_partition}
        assert groups.committed_offsets("g") == {("t", 1): 1}
        assert groups.delete_offsets("nope", [("t", 0)]) == (ErrorCode.group_id_not_found, {})
        assert groups.delete_groups(["g", "nope"]) == {"g": ErrorCode.none, "nope": ErrorCode.group_id_not_found}
        assert groups.list_groups() == []
        groups.close()
