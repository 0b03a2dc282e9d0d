"""A KIP-848 consumer group outliving ``kill -9`` of the broker: its records in
``__consumer_offsets`` (spec §7) are replayed at start, so two live ``group.protocol=consumer``
members heartbeat into the loaded group with the same epochs and assignments (no rebalance, no
revocation in their callbacks), and the committed offsets are intact; a graceful restart after
that loads the same group again (compaction of these records: ``coordinator/group/service_test.py``).

One broker at a time (the same data dir, restarted on the same port)."""

from __future__ import annotations

from broker_support import Broker, wait_until
from groups_support import (CONSUMER_PROTOCOL_BROKER, ConsumerProtocol, close_all, committed, create_topic, names,
                            owned_once, poll_until, produce)
from txn_support import Raw


def describe(port, group):
    with Raw(port) as raw:
        return raw.call(69, 1, group_ids=[group], include_authorized_operations=False).groups[0]


def snapshot(d):
    return (d.group_state, d.group_epoch, d.assignment_epoch,
            sorted((m.member_id, m.member_epoch, tuple(sorted(p for tp in m.assignment.topic_partitions
                                                             for p in tp.partitions))) for m in d.members))


def test_consumer_group_reloaded_after_kill_9_without_a_rebalance(tmp_path):
    overrides = {**CONSUMER_PROTOCOL_BROKER, "offsets.topic.num.partitions": "1"}
    data = tmp_path / "data"
    b = Broker(data, overrides).start()
    port = b.port
    topic, group = names("cp-k9")
    events: list = []
    members: list = []
    try:
        create_topic(b.bootstrap, topic, 6)
        produce(b.bootstrap, topic, 60, partitions=6)
        members = [ConsumerProtocol(b.bootstrap, group, topic, "a", events),
                   ConsumerProtocol(b.bootstrap, group, topic, "b", events)]
        got: list = []
        # each member caught up on its 3 partitions (10 records each) before it commits: a member
        # given partitions the other had already read reads them again first (no commit yet), and
        # with nothing read it would have nothing to commit (librdkafka's _NO_OFFSET)
        poll_until(members, lambda: len(got) >= 60 and all(len(m.assignment()) == 3 and m.caught_up(topic, 10)
                                                           for m in members),
                   got=got, what="60 records, a 3/3 split, each member at the end of its partitions")
        for m in members:
            m.commit()
        wait_until(lambda: describe(port, group).group_state == "Stable", what="a stable group")
        before = snapshot(describe(port, group))
        assignments = [m.assignment() for m in members]
        n_events = len(events)
        b.kill()
        b = Broker(data, overrides, port=port).start()
        # the members heartbeat into the reloaded group: same epochs, same partitions
        d = wait_until(lambda: (lambda x: x if x.error_code == 0 else None)(describe(port, group)),
                       what="the group loaded")
        assert snapshot(d) == before
        produce(b.bootstrap, topic, 12, start=60, partitions=6)
        more: list = []
        poll_until(members, lambda: len(more) >= 12, got=more, what="the 12 new records after the restart")
        assert sorted(more) == sorted(b"v%d" % i for i in range(60, 72))        # offsets intact
        assert [m.assignment() for m in members] == assignments
        assert events[n_events:] == []          # no revocation, no new assignment
        assert snapshot(describe(port, group)) == before
        for m in members:
            m.commit()
        # a graceful restart loads the same group again
        b.stop()
        b = Broker(data, overrides, port=port).start()
        d = wait_until(lambda: (lambda x: x if x.error_code == 0 else None)(describe(port, group)),
                       what="the group loaded again")
        assert snapshot(d) == before
        assert sum(committed(b.bootstrap, group, topic, 6).values()) == 72
        owned_once(events)
    finally:
        close_all(members)
        b.stop()
