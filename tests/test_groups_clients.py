"""Consumer groups on ``compactlog serve`` with unmodified clients: confluent-kafka (librdkafka),
kafka-python and aiokafka (and kcat -G when installed).

One consumer subscribing, committing, closing and resuming from its committed offsets; two and
three members splitting the partitions; a late joiner; a member leaving; a member killed with
SIGKILL, whose partitions move to the others when its session expires; DeleteGroups through the
admin clients; a ``group.protocol=consumer`` (KIP-848) client stopped with an error when the
broker's ``group.coordinator.rebalance.protocols`` lacks ``consumer`` (this module's broker; the
consumer protocol itself is tested in ``test_groups_consumer_protocol.py``).
"""

from __future__ import annotations

import signal
import time

import pytest

from broker_support import KCAT, kcat
from groups_support import (CLIENTS, GROUP_BROKER, AioKafka, Confluent, KafkaPython, child_consumer, committed,
                            create_topic, module_broker, names, poll_until, produce, read_and_commit, read_resumed,
                            split_evenly)


broker = module_broker("groups", {**GROUP_BROKER, "group.coordinator.rebalance.protocols": "classic"})


@pytest.mark.parametrize("client", list(CLIENTS))
def test_subscribe_commit_close_resume(broker, client):
    topic, group = names("resume")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 30)
    m = CLIENTS[client](broker.bootstrap, group, topic)
    try:
        got = read_and_commit(m, 30)
    finally:
        m.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(30))
    produce(broker.bootstrap, topic, 10, start=30)
    more = read_resumed(CLIENTS[client](broker.bootstrap, group, topic), 10, "the 10 new records")
    # exactly the records after the committed offsets: nothing read twice, nothing lost
    assert sorted(more) == sorted(b"v%d" % i for i in range(30, 40))


def test_members_split_late_joiner_leaving_member_confluent(broker):
    topic, group = names("split")
    create_topic(broker.bootstrap, topic, 6)
    members = [Confluent(broker.bootstrap, group, topic)]
    try:
        poll_until(members, lambda: members[0].assignment() == set(range(6)), what="one member owning all")
        members.append(Confluent(broker.bootstrap, group, topic))        # a late joiner
        poll_until(members, lambda: split_evenly(members, 6), what="two members splitting 6 partitions")
        members.append(Confluent(broker.bootstrap, group, topic))
        poll_until(members, lambda: split_evenly(members, 6), what="three members splitting 6 partitions")
        assert [len(m.assignment()) for m in members] == [2, 2, 2]
        members.pop().close()                                             # a member leaving
        poll_until(members, lambda: split_evenly(members, 6), what="the two others taking over")
    finally:
        for m in members:
            m.close()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_members_split_late_joiner_leaving_member(broker, client):
    topic, group = names("split-" + client)
    create_topic(broker.bootstrap, topic, 4)
    cls = CLIENTS[client]
    members = [cls(broker.bootstrap, group, topic)]
    try:
        poll_until(members, lambda: members[0].assignment() == set(range(4)), what="one member owning all")
        members.append(cls(broker.bootstrap, group, topic))
        poll_until(members, lambda: split_evenly(members, 4), what="two members splitting")
        members.pop().close()
        poll_until(members, lambda: members[0].assignment() == set(range(4)), what="the survivor owning all")
    finally:
        for m in members:
            m.close()


def test_killed_member_loses_its_partitions_at_session_expiry(broker):
    topic, group = names("killed")
    create_topic(broker.bootstrap, topic, 4)
    session_ms = 2000
    child = child_consumer(broker.bootstrap, group, topic, session_ms)
    survivor = None
    try:
        assert child.stdout.readline().startswith(b"assigned 4"), "the child did not join"
        survivor = Confluent(broker.bootstrap, group, topic, session_ms=session_ms)
        poll_until([survivor], lambda: len(survivor.assignment()) == 2, what="the split with the child")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: survivor.assignment() == set(range(4)), timeout=20,
                   what="the survivor owning the killed member's partitions")
        # not before the session ran out: the broker cannot know the member is gone sooner
        assert time.monotonic() - killed_at >= session_ms / 1000 * 0.5
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if survivor is not None:
            survivor.close()


def test_delete_groups_through_the_admin_clients(broker):
    from confluent_kafka import ConsumerGroupState, KafkaException
    from confluent_kafka.admin import AdminClient
    topic, group = names("del")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 4)
    m = Confluent(broker.bootstrap, group, topic)
    read_and_commit(m, 4)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups([group])[group].result(30)
    desc = admin.describe_consumer_groups([group])[group].result(30)
    assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 1
    m.close()
    listed = {g.group_id: g.state for g in admin.list_consumer_groups().result(30).valid}
    assert listed[group] == ConsumerGroupState.EMPTY
    admin.delete_consumer_groups([group])[group].result(30)
    listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert group not in listed
    # its offsets went with it: a new member starts from auto.offset.reset (earliest) again
    again: list[bytes] = []
    m2 = Confluent(broker.bootstrap, group, topic)
    try:
        poll_until([m2], lambda: len(again) >= 4, got=again, what="records from the start")
    finally:
        m2.close()
    # kafka-python's admin client deletes groups too
    from kafka.admin import KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert group in {g["group_id"] for g in kadmin.list_groups()}
        assert kadmin.delete_groups([group, "never-existed"]) == {group: "OK",
                                                                 "never-existed": "GroupIdNotFoundError"}
    finally:
        kadmin.close()


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(broker):
    topic, group = names("kcat")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 12)
    r = kcat("-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-c", "12", "-q",
             "-f", "%s\n", topic, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(r.stdout.split()) == sorted(b"v%d" % i for i in range(12))
    # kcat commits as it goes (enable.auto.commit): the group resumes after what it read
    produce(broker.bootstrap, topic, 3, start=12)
    r = kcat("-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-c", "3", "-q",
             "-f", "%s\n", topic, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(r.stdout.split()) == [b"v12", b"v13", b"v14"]


def test_kip_848_consumer_protocol_is_reported_as_an_error(broker):
    """group.protocol=consumer with the consumer protocol disabled (group.coordinator.rebalance.protocols
    =classic): librdkafka gets UNSUPPORTED_VERSION from ConsumerGroupHeartbeat and
    raises a fatal error from poll (without it, it would wait forever); kafka-python and aiokafka
    have no such setting and refuse it when the consumer is built."""
    topic, group = names("kip848")
    create_topic(broker.bootstrap, topic, 1)
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer"})
    c.subscribe([topic])
    error = None
    deadline = time.monotonic() + 20
    try:
        while error is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                error = m.error()
    finally:
        c.close()
    assert error is not None, "librdkafka reported nothing"
    assert error.fatal() or error.code() < 0
    assert "API version not supported" in error.str() and "ConsumerGroupHeartbeat" in error.str()
    from kafka import KafkaConsumer
    from kafka.errors import KafkaConfigurationError
    with pytest.raises(KafkaConfigurationError):
        KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, group_protocol="consumer")
    from aiokafka import AIOKafkaConsumer
    with pytest.raises(TypeError):
        AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, group_protocol="consumer")


def test_clients_in_one_group_interoperate(broker):
    """Members of the three clients in one group: they agree on the consumer protocol's range
    assignor and split the partitions."""
    topic, group = names("mixed")
    create_topic(broker.bootstrap, topic, 3)
    # aiokafka's start() waits for its first join: started after a librdkafka member that nobody
    # polls yet, its join waits in PreparingRebalance for that member's rejoin (as on Kafka) past
    # the start's 30 s; started first, it joins alone and the others join as they are polled
    aio = AioKafka(broker.bootstrap, group, topic)
    members = [Confluent(broker.bootstrap, group, topic, **{"partition.assignment.strategy": "roundrobin"}),
               KafkaPython(broker.bootstrap, group, topic), aio]
    try:
        poll_until(members, lambda: split_evenly(members, 3), timeout=45, what="three clients splitting")
    finally:
        for m in members:
            m.close()


def test_deleting_a_topic_removes_its_committed_offsets(broker):
    from confluent_kafka.admin import AdminClient
    topic, group = names("deltopic")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 3)
    m = Confluent(broker.bootstrap, group, topic)
    try:
        read_and_commit(m, 3)
        assert m.committed(topic, [0]) == {0: 3}
    finally:
        m.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    assert committed(broker.bootstrap, group, topic, [0]) == {0: -1001}      # no committed offset
