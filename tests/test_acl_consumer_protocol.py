"""KIP-848 consumer groups under StandardAuthorizer with an unmodified client: confluent-kafka
(librdkafka) ``group.protocol=consumer`` members of principals with and without the rights
(spec consumer-protocol.md §2.2 rules 2-3 and §5; KafkaApis.handleConsumerGroupHeartbeatRequest).

* no ACL on the group: GROUP_AUTHORIZATION_FAILED (FindCoordinator already refuses it);
* READ on the group, nothing on the topic: TOPIC_AUTHORIZATION_FAILED, the same for a topic that
  does not exist (its existence is not told);
* READ on the group and on one topic, a regex matching two: the member is assigned the topic it
  may DESCRIBE only, reads and commits it.

One broker for the module, SASL_PLAINTEXT with PLAIN users from the listener's JAAS setting.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from groups_support import CONSUMER_PROTOCOL_BROKER, names
from security_support import SecureBroker

USERS = ("admin", "alice", "bob", "carol")
TIMEOUT = 20


def password(user: str) -> str:
    return f"{user}-kip848-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    users = " ".join(f'user_{u}="{password(u)}"' for u in USERS)
    b = SecureBroker(tmp_path_factory.mktemp("acl-kip848") / "data", {
        **CONSUMER_PROTOCOL_BROKER,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:admin"})
    b.start()
    yield b
    b.stop()
    log = b.log_text()
    assert not [u for u in USERS if password(u) in log], "a password in the broker's log"


def conf(broker, user) -> dict:
    return {"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password(user)}


def allow(rtype, name, user, op):
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW)


def setup(broker, topics, acls) -> None:
    a = AdminClient(conf(broker, "admin"))
    for f in a.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        f.result(TIMEOUT)
    for f in a.create_acls(acls, request_timeout=TIMEOUT).values():
        assert f.result() is None
    p = Producer(conf(broker, "admin"))
    for t in topics:
        for i in range(4):
            p.produce(t, b"%s-%d" % (t.encode(), i), partition=i % 2)
    assert p.flush(TIMEOUT) == 0


def member(broker, user, group, subscription):
    c = Consumer({**conf(broker, user), "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(subscription)
    return c


def first_error(c, timeout=15) -> int:
    """The code of the first error the member's poll reports."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is not None:
            return m.error().code()
    raise AssertionError("no error reported")


def test_members_without_the_rights_are_refused_with_kafkas_codes(broker):
    topic, group = names("acl848")
    setup(broker, [topic], [allow(ResourceType.GROUP, group, "bob", AclOperation.READ)])
    for user, subscription, code in (("carol", [topic], 30),                 # GROUP_AUTHORIZATION_FAILED
                                     ("bob", [topic], 29),                   # TOPIC_AUTHORIZATION_FAILED
                                     ("bob", [f"{topic}-missing"], 29)):     # the same: existence not told
        c = member(broker, user, group, subscription)
        try:
            assert first_error(c) == code, (user, subscription)
            assert not c.assignment()
        finally:
            c.close()


def test_a_regex_resolves_to_the_topics_the_member_may_describe(broker):
    prefix, group = names("acl848rx")
    mine, other = f"{prefix}-mine", f"{prefix}-other"
    setup(broker, [mine, other], [allow(ResourceType.GROUP, group, "alice", AclOperation.READ),
                                  allow(ResourceType.TOPIC, mine, "alice", AclOperation.READ)])
    c = member(broker, "alice", group, [f"^{prefix}-.*"])
    try:
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 4 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.topic(), m.value()))
        assert sorted(got) == [(mine, b"%s-%d" % (mine.encode(), i)) for i in range(4)]
        assert {tp.topic for tp in c.assignment()} == {mine}
        c.commit(asynchronous=False)
        committed = c.committed(c.assignment(), timeout=TIMEOUT)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 2), (1, 2)]
    finally:
        c.close()
    bob = AdminClient(conf(broker, "bob"))      # kept until its future is done
    with pytest.raises(KafkaException) as e:    # bob may not DESCRIBE the group
        bob.describe_consumer_groups([group])[group].result(TIMEOUT)
    assert e.value.args[0].code() == 30


def test_a_group_naming_a_topic_the_caller_may_not_describe_is_hidden_with_kafkas_text(broker):
    """KafkaApis.handleConsumerGroupDescribe (KAFKA-18813): DESCRIBE on the group is not enough when
    a member's assignment names a topic the caller may not DESCRIBE; the group is answered
    TOPIC_AUTHORIZATION_FAILED without members, with the text "The group has described topic(s)
    that the client is not authorized to describe." (the broker sent "Topic authorization
    failed.")."""
    from txn_support import Raw
    topic, group = names("acl848d")
    setup(broker, [topic], [allow(ResourceType.GROUP, group, "alice", AclOperation.READ),
                            allow(ResourceType.TOPIC, topic, "alice", AclOperation.READ),
                            allow(ResourceType.GROUP, group, "bob", AclOperation.DESCRIBE)])
    c = member(broker, "alice", group, [topic])
    try:
        deadline = time.monotonic() + TIMEOUT
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert {tp.topic for tp in c.assignment()} == {topic}
        with Raw(broker.ports["SASL_PLAINTEXT"]) as raw:       # bob, by hand: SaslHandshake v1, PLAIN
            assert raw.call(17, 1, mechanism="PLAIN").error_code == 0
            assert raw.call(36, 1, auth_bytes=b"\0bob\0" + password("bob").encode()).error_code == 0
            d = raw.call(69, 1, group_ids=[group], include_authorized_operations=False).groups[0]
        assert (d.group_id, d.error_code, d.error_message, d.members) == \
            (group, 29, "The group has described topic(s) that the client is not authorized to describe.", ())
    finally:
        c.close()


def test_consumer_group_describe_answers_in_kafkas_order(broker):
    """KafkaApis.handleConsumerGroupDescribe adds a GROUP_AUTHORIZATION_FAILED entry (id and code,
    no message) for each refused group first, then the coordinator's answer, which
    GroupCoordinatorService.consumerGroupDescribe assembles per __consumer_offsets partition in the
    iteration order of its HashMap<TopicPartition, List<String>> (each partition's groups in the
    request's order). cgd-0..7 fall on partitions 45-49, 0, 1, 2 of 50; a HashMap of those
    TopicPartitions iterates 47, 48, 0, 45, 46, 49, 1, 2. The broker answered in the request's
    order, the refused group with a message."""
    from txn_support import Raw
    a = AdminClient(conf(broker, "admin"))
    bindings = [AclBinding(ResourceType.GROUP, "cgd-", ResourcePatternType.PREFIXED, "User:bob", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
    for f in a.create_acls(bindings, request_timeout=TIMEOUT).values():
        assert f.result() is None
    asked = [f"cgd-{i}" for i in range(5)] + ["cgx-refused"] + [f"cgd-{i}" for i in range(5, 8)]
    with Raw(broker.ports["SASL_PLAINTEXT"]) as raw:
        assert raw.call(17, 1, mechanism="PLAIN").error_code == 0
        assert raw.call(36, 1, auth_bytes=b"\0bob\0" + password("bob").encode()).error_code == 0
        r = raw.call(69, 1, group_ids=asked, include_authorized_operations=False)
    assert [(g.group_id, g.error_code) for g in r.groups] == [("cgx-refused", 30)] + [
        (f"cgd-{i}", 69) for i in (2, 3, 5, 0, 1, 4, 6, 7)]
    assert r.groups[0].error_message is None
