"""Authorization with unmodified clients (security.md §12.3): confluent-kafka, kafka-python and
kcat are refused with Kafka's errors exactly where Kafka's StandardAuthorizer refuses them, and
the ACL admin APIs work from confluent-kafka's and kafka-python's admin clients.

One broker, ``authorizer.class.name=...StandardAuthorizer``, ``super.users=User:admin``, with two
listeners: PLAINTEXT, whose clients are all User:ANONYMOUS as in Kafka, and SASL_PLAINTEXT with
PLAIN, where each principal logs in as its own user (``user_alice="alice-secret"`` ... in the
listener's JAAS config), each client configured as users configure it against Kafka. Each test
uses its own topics, groups and principals.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, NewTopic, ResourcePatternType, ResourceType)

from broker_support import KCAT, kcat
from security_support import SecureBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN = "User:admin"
TIMEOUT = 20


# one SASL user per principal the tests name
USERS = ("admin", "alice", "bob", "carol", "dora", "frank", "gina", "hugo", "ivan", "jo", "kim", "lee")
ANONYMOUS = None        # a client of the PLAINTEXT listener: no credentials, User:ANONYMOUS


def password(user: str) -> str:
    return f"{user}-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    users = " ".join(f'user_{u}="{password(u)}"' for u in USERS)
    b = SecureBroker(tmp_path_factory.mktemp("acl-clients") / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "authorizer.class.name": AUTHORIZER, "super.users": ADMIN, "group.initial.rebalance.delay.ms": "0"})
    b.start()
    yield b
    b.stop()
    log = b.log_text()
    assert not [u for u in USERS if password(u) in log], "a password in the broker's log"


# -- clients as one principal or another, set up as users set them up against Kafka ----------------

def user_of(principal: str) -> str:
    assert principal.startswith("User:"), principal
    return principal[len("User:"):]


def rdkafka_conf(broker, principal) -> dict:
    """confluent-kafka's (librdkafka's) settings for a client that logs in as ``principal``."""
    if principal is ANONYMOUS:
        return {"bootstrap.servers": broker.address("PLAINTEXT")}
    user = user_of(principal)
    return {"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password(user)}


def kafka_python_conf(broker, principal) -> dict:
    user = user_of(principal)
    return {"bootstrap_servers": broker.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": password(user)}


def kcat_conf(broker, principal) -> list[str]:
    """kcat's ``-b`` and ``-X`` options for ``principal``."""
    conf = rdkafka_conf(broker, principal)
    return ["-b", conf.pop("bootstrap.servers")] + [x for k, v in conf.items() for x in ("-X", f"{k}={v}")]


def admin(broker, principal=ADMIN) -> AdminClient:
    return AdminClient(rdkafka_conf(broker, principal))


def topics(broker, *names, partitions=1) -> None:
    a = admin(broker)           # kept until the futures are done: a destroyed client fails them
    for f in a.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(TIMEOUT)


def acl(rtype, name, principal, operation, permission=AclPermissionType.ALLOW,
        pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", operation, permission)


def grant(broker, *bindings) -> None:
    a = admin(broker)
    for f in a.create_acls(list(bindings), request_timeout=TIMEOUT).values():
        assert f.result() is None


def produce(broker, principal, topic, value=b"v", **settings) -> KafkaError | None:
    """The delivery error of one record (None: written)."""
    p = Producer({**rdkafka_conf(broker, principal), **settings})
    got = []
    p.produce(topic, value, on_delivery=lambda err, _msg: got.append(err))
    assert p.flush(TIMEOUT) == 0
    return got[0]


def kp_consumer(broker, principal, **settings):
    from kafka import KafkaConsumer
    return KafkaConsumer(**kafka_python_conf(broker, principal), consumer_timeout_ms=3000,
                         request_timeout_ms=10000, **settings)


def kp_read_assigned(broker, principal, topic, n) -> list[bytes]:
    """kafka-python, ``assign()`` without a group: the first ``n`` values of partition 0."""
    from kafka import TopicPartition
    c = kp_consumer(broker, principal)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        return got
    finally:
        c.close()


def visible_topics(broker, principal) -> set[str]:
    return set(admin(broker, principal).list_topics(timeout=TIMEOUT).topics)


def listed_groups(broker, principal) -> set[str]:
    a = admin(broker, principal)
    return {g.group_id for g in a.list_consumer_groups(request_timeout=TIMEOUT).result().valid}


def denied_code(future_of) -> int:
    """The error code a call of ``future_of(admin client)`` fails with (the client kept alive)."""
    with pytest.raises(KafkaException) as e:
        future_of().result()
    return e.value.args[0].code()


# -- the scenarios ------------------------------------------------------------------------------------------

def test_write_denied_without_an_acl_then_allowed(broker):
    topics(broker, "z-write")
    err = produce(broker, "User:alice", "z-write")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    kp = KafkaProducer(**kafka_python_conf(broker, "User:alice"), max_block_ms=5000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            kp.send("z-write", b"v").get(TIMEOUT)
    finally:
        kp.close(timeout=5)
    if KCAT:
        r = kcat(*kcat_conf(broker, "User:alice"), "-P", "-t", "z-write", stdin=b"v\n")
        assert r.returncode != 0 and b"Topic authorization failed" in r.stderr, r.stderr
    assert "z-write" not in visible_topics(broker, "User:alice")

    grant(broker, acl(ResourceType.TOPIC, "z-write", "User:alice", AclOperation.WRITE))
    assert produce(broker, "User:alice", "z-write") is None
    assert "z-write" in visible_topics(broker, "User:alice")        # WRITE implies DESCRIBE


def test_read_without_describe_then_the_group(broker):
    topics(broker, "z-read")
    for i in range(3):
        assert produce(broker, ADMIN, "z-read", b"r%d" % i) is None
    # READ alone: DESCRIBE (ListOffsets, Metadata) is implied; no group needed for assign()
    grant(broker, acl(ResourceType.TOPIC, "z-read", "User:bob", AclOperation.READ))
    assert kp_read_assigned(broker, "User:bob", "z-read", 3) == [b"r0", b"r1", b"r2"]
    if KCAT:
        r = kcat(*kcat_conf(broker, "User:bob"), "-C", "-t", "z-read", "-e", "-q")
        assert r.returncode == 0 and r.stdout.split() == [b"r0", b"r1", b"r2"], r.stderr
    # reading is not writing
    err = produce(broker, "User:bob", "z-read")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # a group needs READ on the group: kafka-python stops at FindCoordinator / JoinGroup
    from kafka.errors import GroupAuthorizationFailedError
    c = kp_consumer(broker, "User:bob", group_id="z-read-g", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.subscribe(["z-read"])
        with pytest.raises(GroupAuthorizationFailedError):
            c.poll(timeout_ms=5000)
    finally:
        c.close(autocommit=False)

    grant(broker, acl(ResourceType.GROUP, "z-read-g", "User:bob", AclOperation.READ))
    c = Consumer({**rdkafka_conf(broker, "User:bob"), "group.id": "z-read-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(["z-read"])
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
        assert got == [b"r0", b"r1", b"r2"]
        committed = c.commit(asynchronous=False)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(0, 3, None)]
    finally:
        c.close()
    # the group is visible to bob (READ implies DESCRIBE), not to someone else
    assert "z-read-g" in listed_groups(broker, "User:bob")
    assert "z-read-g" not in listed_groups(broker, "User:carol")


def test_a_deny_beats_an_allow_and_deny_read_leaves_describe(broker):
    topics(broker, "z-deny")
    assert produce(broker, ADMIN, "z-deny", b"d0") is None
    bindings = [acl(ResourceType.TOPIC, "z-deny", "User:*", AclOperation.ALL),
                acl(ResourceType.TOPIC, "z-deny", "User:alice", AclOperation.READ, AclPermissionType.DENY)]
    grant(broker, *bindings)
    try:
        assert kp_read_assigned(broker, "User:dora", "z-deny", 1) == [b"d0"]
        from kafka.errors import TopicAuthorizationFailedError
        with pytest.raises(TopicAuthorizationFailedError):
            kp_read_assigned(broker, "User:alice", "z-deny", 1)
        assert "z-deny" in visible_topics(broker, "User:alice")          # DESCRIBE still allowed
        assert produce(broker, "User:alice", "z-deny") is None             # and WRITE
    finally:
        # through DeleteAcls, with a filter: both ACLs of the topic, whatever their principal
        a = admin(broker)
        deleted = a.delete_acls([AclBindingFilter(
            ResourceType.TOPIC, "z-deny", ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
            AclPermissionType.ANY)], request_timeout=TIMEOUT)
        assert sorted(str(b) for f in deleted.values() for b in f.result()) == sorted(str(b) for b in bindings)


def test_prefixed_allow_with_a_literal_deny(broker):
    topics(broker, "orders", "orders.eu", "orders.audit")
    grant(broker, acl(ResourceType.TOPIC, "orders.", "User:alice", AclOperation.WRITE,
                      pattern=ResourcePatternType.PREFIXED),
          acl(ResourceType.TOPIC, "orders.audit", "User:alice", AclOperation.WRITE, AclPermissionType.DENY))
    assert produce(broker, "User:alice", "orders.eu") is None
    for denied in ("orders.audit", "orders"):
        err = produce(broker, "User:alice", denied)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied


def test_metadata_hides_topics_the_principal_may_not_describe(broker):
    topics(broker, "hid-a", "hid-b", "hid-c")
    grant(broker, acl(ResourceType.TOPIC, "hid-b", "User:frank", AclOperation.DESCRIBE))
    assert {t for t in visible_topics(broker, "User:frank") if t.startswith("hid-")} == {"hid-b"}
    assert {t for t in visible_topics(broker, ADMIN) if t.startswith("hid-")} == {"hid-a", "hid-b", "hid-c"}
    from kafka import KafkaConsumer
    kc = KafkaConsumer(**kafka_python_conf(broker, "User:frank"))
    try:
        assert {t for t in kc.topics() if t.startswith("hid-")} == {"hid-b"}
    finally:
        kc.close()
    # a named topic: the same answer whether it exists or not (no existence leak)
    md = admin(broker, "User:frank").list_topics(topic="hid-a", timeout=TIMEOUT)
    assert md.topics["hid-a"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    md = admin(broker, "User:frank").list_topics(topic="hid-missing", timeout=TIMEOUT)
    assert md.topics["hid-missing"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_super_user_bypasses_a_deny(broker):
    topics(broker, "z-super")
    grant(broker, acl(ResourceType.TOPIC, "z-super", "User:*", AclOperation.ALL, AclPermissionType.DENY))
    assert produce(broker, ADMIN, "z-super") is None
    err = produce(broker, "User:alice", "z-super")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_plaintext_client_is_user_anonymous(broker):
    topics(broker, "z-anon")
    err = produce(broker, ANONYMOUS, "z-anon")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # a client.id naming a principal changes nothing: only authentication makes a principal
    err = produce(broker, ANONYMOUS, "z-anon", **{"client.id": ADMIN})
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, acl(ResourceType.TOPIC, "z-anon", "User:ANONYMOUS", AclOperation.WRITE))
    assert produce(broker, ANONYMOUS, "z-anon") is None
    err = produce(broker, "User:alice", "z-anon")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "Principal = User:ANONYMOUS is Denied operation = DESCRIBE" in broker.log_text()      # the audit log


def test_an_idempotent_producer_needs_write_on_some_topic(broker):
    topics(broker, "z-idem")
    grant(broker, acl(ResourceType.TOPIC, "z-idem", "User:gina", AclOperation.WRITE),
          acl(ResourceType.TOPIC, "z-idem", "User:hugo", AclOperation.DESCRIBE))
    # WRITE on one topic: InitProducerId passes (authorizeByResourceType), no cluster ACL needed
    assert produce(broker, "User:gina", "z-idem", **{"enable.idempotence": True}) is None
    # no WRITE anywhere and no IdempotentWrite: Kafka's CLUSTER_AUTHORIZATION_FAILED, fatal
    p = Producer({**rdkafka_conf(broker, "User:hugo"), "enable.idempotence": True,
                  "log_level": 0})
    p.produce("z-idem", b"v")
    with pytest.raises(KafkaException) as e:
        p.flush(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED and e.value.args[0].fatal()
    # IdempotentWrite on the cluster is the other way in
    grant(broker, acl(ResourceType.BROKER, "kafka-cluster", "User:hugo", AclOperation.IDEMPOTENT_WRITE),
          acl(ResourceType.TOPIC, "z-idem", "User:hugo", AclOperation.WRITE))
    assert produce(broker, "User:hugo", "z-idem", **{"enable.idempotence": True}) is None


def test_transactional_writes_follow_the_acl_on_the_transactional_id(broker):
    topics(broker, "z-txn")
    grant(broker, acl(ResourceType.TOPIC, "z-txn", "User:ivan", AclOperation.WRITE))
    p = Producer({**rdkafka_conf(broker, "User:ivan"), "transactional.id": "tx-ivan-1",
                  "log_level": 0})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError
    kp = KafkaProducer(**kafka_python_conf(broker, "User:ivan"), transactional_id="tx-ivan-2")
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            kp.init_transactions()
    finally:
        kp.close(timeout=5)

    grant(broker, acl(ResourceType.TRANSACTIONAL_ID, "tx-ivan-", "User:ivan", AclOperation.WRITE,
                      pattern=ResourcePatternType.PREFIXED))
    p = Producer({**rdkafka_conf(broker, "User:ivan"), "transactional.id": "tx-ivan-3"})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce("z-txn", b"committed")
    p.commit_transaction(TIMEOUT)
    c = Consumer({**rdkafka_conf(broker, ADMIN), "group.id": "z-txn-check",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["z-txn"])
        deadline = time.monotonic() + TIMEOUT
        m = None
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        assert m is not None and m.error() is None and m.value() == b"committed"
    finally:
        c.close()


def test_acl_admin_with_confluent_kafka(broker):
    a = admin(broker)
    bindings = [acl(ResourceType.TOPIC, "adm-t", "User:jo", AclOperation.READ),
                acl(ResourceType.TOPIC, "adm-", "User:jo", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
                acl(ResourceType.GROUP, "adm-g", "User:jo", AclOperation.READ)]
    for f in a.create_acls(bindings, request_timeout=TIMEOUT).values():
        assert f.result() is None
    for f in a.create_acls(bindings[:1], request_timeout=TIMEOUT).values():     # again: no second copy
        assert f.result() is None
    jo = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:jo", None, AclOperation.ANY,
                          AclPermissionType.ANY)
    assert sorted(map(str, a.describe_acls(jo, request_timeout=TIMEOUT).result())) == sorted(map(str, bindings))
    match = AclBindingFilter(ResourceType.TOPIC, "adm-t", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert sorted(map(str, a.describe_acls(match, request_timeout=TIMEOUT).result())) == sorted(map(str, bindings[:2]))
    # not a super user, no ACL on the cluster: Kafka's CLUSTER_AUTHORIZATION_FAILED
    as_jo = admin(broker, "User:jo")
    # the broker answers DescribeAcls CLUSTER_AUTHORIZATION_FAILED (kafka-python sees it, below), but
    # librdkafka drops that error code and reports no ACLs
    assert as_jo.describe_acls(jo, request_timeout=TIMEOUT).result() == []
    assert denied_code(lambda: list(as_jo.create_acls(bindings[:1], request_timeout=TIMEOUT).values())[0]) \
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    broker_configs = [ConfigResource(ConfigResource.Type.BROKER, "0")]
    assert denied_code(lambda: list(as_jo.describe_configs(broker_configs, request_timeout=TIMEOUT).values())[0]) \
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deleted = a.delete_acls([jo], request_timeout=TIMEOUT)
    assert sorted(str(b) for f in deleted.values() for b in f.result()) == sorted(map(str, bindings))
    assert a.describe_acls(jo, request_timeout=TIMEOUT).result() == []


def test_acl_admin_with_kafka_python(broker):
    from kafka import KafkaAdminClient
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourcePatternFilter)
    from kafka.admin import ResourceType as KRT
    from kafka.errors import ClusterAuthorizationFailedError, NoError
    a = KafkaAdminClient(**kafka_python_conf(broker, ADMIN))
    try:
        new = [ACL("User:kim", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                   ResourcePattern(KRT.TOPIC, "kp-t", ACLResourcePatternType.LITERAL)),
               ACL("User:kim", "127.0.0.1", ACLOperation.WRITE, ACLPermissionType.DENY,
                   ResourcePattern(KRT.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))]
        result = a.create_acls(new)
        assert len(result["succeeded"]) == 2 and not result["failed"]
        kim = ACLFilter("User:kim", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KRT.ANY, None, ACLResourcePatternType.ANY))
        found, error = a.describe_acls(kim)
        assert error is NoError and {(x.resource_pattern.resource_name, x.host, x.operation) for x in found} == {
            ("kp-t", "*", ACLOperation.READ), ("kp-", "127.0.0.1", ACLOperation.WRITE)}
        [(_, removed, error)] = a.delete_acls([kim])
        assert error is NoError and len(removed) == 2
        assert a.describe_acls(kim)[0] == []
    finally:
        a.close()
    a = KafkaAdminClient(**kafka_python_conf(broker, "User:kim"))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            found, error = a.describe_acls(kim)
            if error is not NoError:
                raise error
    finally:
        a.close()


def test_the_acls_command_as_a_principal_without_rights(broker, tmp_path):
    """``compactlog acls --bootstrap-server`` fails as kafka-acls.sh does where librdkafka would
    report "no ACLs" (its DescribeAcls drops the error code)."""
    import subprocess
    from broker_support import COMMAND
    props = tmp_path / "lee.properties"
    # kafka-acls.sh's client properties, as a Java client takes them
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     f'username="lee" password="{password("lee")}";\n')
    base = COMMAND + ["acls", "--bootstrap-server", broker.address("SASL_PLAINTEXT"),
                      "--command-config", str(props)]
    for args in (["--list"], ["--add", "--allow-principal", "User:lee", "--operation", "Read", "--topic", "z-lee"]):
        r = subprocess.run(base + args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stdout == "", r.stdout
        assert r.stderr.startswith("error: DescribeAcls: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed."), \
            r.stderr
    # Describe on the cluster lets lee list (an empty list is then the truth), not add
    grant(broker, acl(ResourceType.BROKER, "kafka-cluster", "User:lee", AclOperation.DESCRIBE))
    r = subprocess.run(base + ["--list", "--topic", "z-lee"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    r = subprocess.run(base + ["--add", "--allow-principal", "User:lee", "--operation", "Read", "--topic", "z-lee"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "CreateAcls" in r.stderr and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr, r.stderr
