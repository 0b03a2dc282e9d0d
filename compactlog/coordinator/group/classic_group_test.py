"""ClassicGroup on its own: room for joining members, which groups DeleteGroups refuses, and what
DescribeGroups and ListGroups show of a group before and after it is Stable."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.classic_group import ClassicGroup, Member
from compactlog.coordinator.group.classic_group_state import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE,
                                                          STABLE)
from compactlog.coordinator.runtime import GroupError

SUB = R.encode_subscription(["t"])


def group_with(*member_ids, state=EMPTY) -> ClassicGroup:
    g = ClassicGroup("g", lambda: 42)
    for mid in member_ids:
        g.add(Member(mid, None, "cli", "/127.0.0.1", 30000, 10000, "consumer", [("range", SUB)],
                     b"A-" + mid.encode()))
    g.state = state
    return g


def test_accept_joining_member_within_the_max_size():
    assert group_with("a", "b", state=EMPTY).accept_joining_member("new", 1)
    stable = group_with("a", "b", state=STABLE)
    assert not stable.accept_joining_member("new", 2)
    assert stable.accept_joining_member("a", 2)             # a member already in counts once
    assert stable.accept_joining_member("new", 3)
    preparing = group_with("a", "b", state=PREPARING_REBALANCE)
    # while preparing, only the members that rejoined count
    assert preparing.accept_joining_member("new", 1)
    preparing.update_member(preparing.member("a"), [("range", SUB)], 30000, 10000, Future())
    assert not preparing.accept_joining_member("new", 1)


@pytest.mark.parametrize("state, code", [(DEAD, ErrorCode.group_id_not_found), (STABLE, ErrorCode.non_empty_group),
                                         (PREPARING_REBALANCE, ErrorCode.non_empty_group),
                                         (COMPLETING_REBALANCE, ErrorCode.non_empty_group), (EMPTY, None)])
def test_validate_delete_group(state, code):
    g = group_with(state=state)
    if code is None:
        g.validate_delete_group()
        return
    with pytest.raises(GroupError) as e:
        g.validate_delete_group()
    assert e.value.code == code


def test_described_and_listed_group_show_the_protocol_and_assignments_once_stable():
    g = group_with("a", state=COMPLETING_REBALANCE)
    g.protocol_name = "range"
    d = g.as_described_group()
    assert (d.group_id, d.error, d.state, d.protocol_type, d.protocol_data) == \
        ("g", ErrorCode.none, COMPLETING_REBALANCE, "consumer", "")
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [("a", b"", b"")]
    g.state = STABLE
    d = g.as_described_group()
    assert d.protocol_data == "range"
    assert [(m.member_id, m.client_id, m.client_host, m.metadata, m.assignment) for m in d.members] == \
        [("a", "cli", "/127.0.0.1", SUB, b"A-a")]
    listed = g.as_listed_group()
    assert (listed.group_id, listed.protocol_type, listed.state, listed.group_type) == \
        ("g", "consumer", STABLE, "classic")
