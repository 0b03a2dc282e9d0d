"""The admin APIs of ``compactlog serve`` through real clients: confluent-kafka's AdminClient,
kafka-python's KafkaAdminClient and aiokafka's AIOKafkaAdminClient.

One broker for the module, on a free loopback port, with ``log.segment.bytes`` set on its command
line so that describing a topic shows all three sources (topic override, static broker setting,
Kafka's default). Each test uses its own topics."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker_support import Broker, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   ConfigSource, NewPartitions, NewTopic)

TIMEOUT = 30
SEGMENT_BYTES = "1048576"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("admin") / "data"
    with Broker(data, {"log.segment.bytes": SEGMENT_BYTES}) as b:
        yield b
        assert b.alive(), b.log_text()
        assert "Traceback" not in b.log_text(), b.log_text()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    assert p.flush(TIMEOUT) == 0


def first_offset(bootstrap: str, topic: str, partition: int = 0,
                 start: int = confluent_kafka.OFFSET_BEGINNING) -> tuple[int, int, int]:
    """(low watermark, high watermark, offset of the first record read from ``start``); an
    offset out of range resets to the earliest one."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
        c.assign([TopicPartition(topic, partition, start)])
        msg = wait_until(lambda: c.poll(0.2), timeout=TIMEOUT, what=f"a record of {topic}-{partition}")
        assert msg.error() is None, msg.error()
        return low, high, msg.offset()
    finally:
        c.close()


# -- confluent-kafka ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin, *topics, **kw):
    futures = admin.create_topics(list(topics), operation_timeout=TIMEOUT, request_timeout=TIMEOUT, **kw)
    return {t: f.exception(TIMEOUT) for t, f in futures.items()}


def describe(admin, topic, **kw):
    res = ConfigResource("topic", topic)
    return admin.describe_configs([res], request_timeout=TIMEOUT, **kw)[res].result(TIMEOUT)


def test_confluent_create_with_configs_and_describe_sources(admin, broker):
    t = name("cf")
    assert create(admin, NewTopic(t, 3, 1, config={"cleanup.policy": "compact",
                                                  "min.cleanable.dirty.ratio": "0.1"})) == {t: None}
    assert len(admin.list_topics(t, timeout=TIMEOUT).topics[t].partitions) == 3
    configs = describe(admin, t)      # librdkafka always asks for synonyms
    policy, ratio = configs["cleanup.policy"], configs["min.cleanable.dirty.ratio"]
    assert (policy.value, policy.source, policy.is_default) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
                                                               False)
    assert (ratio.value, ratio.source) == ("0.1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source) == (SEGMENT_BYTES, ConfigSource.STATIC_BROKER_CONFIG.value)
    assert list(segment.synonyms) == ["log.segment.bytes"]
    retention = configs["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG.value, True)
    assert not any(c.is_read_only or c.is_sensitive for c in configs.values())


def test_confluent_duplicate_and_invalid_creates(admin):
    t = name("cf-dup")
    assert create(admin, NewTopic(t, 1, 1)) == {t: None}
    err = create(admin, NewTopic(t, 2, 1))[t]
    assert isinstance(err, KafkaException) and err.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert f"Topic '{t}' already exists." in err.args[0].str()
    bad = name("cf-bad")
    err = create(admin, NewTopic(bad, 1, 1, config={"segment.bytes": "abc"}))[bad]
    assert err.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Invalid value abc for configuration segment.bytes: Not a number of type INT" in err.args[0].str()
    err = create(admin, NewTopic(bad, 1, 3))[bad]
    assert err.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    err = create(admin, NewTopic("bad name", 1, 1))["bad name"]
    assert err.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert create(admin, NewTopic(bad, 2, 1), validate_only=True) == {bad: None}
    assert bad not in admin.list_topics(timeout=TIMEOUT).topics


def test_confluent_incremental_alter_configs(admin):
    t = name("cf-alter")
    assert create(admin, NewTopic(t, 1, 1, config={"retention.ms": "60000"})) == {t: None}
    res = ConfigResource("topic", t, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    configs = describe(admin, t)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert (configs["segment.ms"].value, configs["segment.ms"].source) == \
        ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    bad = ConfigResource("topic", t, incremental_configs=[
        ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Can't APPEND to key segment.bytes because its type is not LIST." in e.value.args[0].str()


def test_confluent_create_partitions_delete_records_and_delete(admin, broker):
    t = name("cf-grow")
    assert create(admin, NewTopic(t, 1, 1)) == {t: None}
    admin.create_partitions([NewPartitions(t, 4)], request_timeout=TIMEOUT)[t].result(TIMEOUT)
    wait_until(lambda: len(admin.list_topics(t, timeout=TIMEOUT).topics[t].partitions) == 4,
               what="4 partitions in the metadata")
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions(t, 2)])[t].result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    produce(broker.bootstrap, t, 10)
    deleted = admin.delete_records([TopicPartition(t, 0, 4)], request_timeout=TIMEOUT)
    result = next(iter(deleted.values())).result(TIMEOUT)
    assert result.low_watermark == 4
    assert first_offset(broker.bootstrap, t) == (4, 10, 4)
    # a fetch below the new log start is out of range: the consumer resets to it
    assert first_offset(broker.bootstrap, t, start=1) == (4, 10, 4)
    with pytest.raises(KafkaException) as e:
        next(iter(admin.delete_records([TopicPartition(t, 0, 11)]).values())).result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    admin.delete_topics([t], operation_timeout=TIMEOUT)[t].result(TIMEOUT)
    wait_until(lambda: t not in admin.list_topics(timeout=TIMEOUT).topics, what="the topic gone")
    with pytest.raises(KafkaException) as e:
        admin.delete_topics([t])[t].result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_delete_records_on_a_compacted_topic_is_a_policy_violation(admin, broker):
    t = name("cf-compact")
    assert create(admin, NewTopic(t, 1, 1, config={"cleanup.policy": "compact"})) == {t: None}
    produce(broker.bootstrap, t, 3)
    with pytest.raises(KafkaException) as e:
        next(iter(admin.delete_records([TopicPartition(t, 0, 1)]).values())).result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_confluent_describe_cluster_and_broker(admin, broker):
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", broker.port)]
    assert cluster.controller.id == cluster.nodes[0].id
    res = ConfigResource("broker", str(cluster.controller.id))
    configs = admin.describe_configs([res])[res].result(TIMEOUT)
    assert (configs["log.segment.bytes"].value, configs["log.segment.bytes"].source) == \
        (SEGMENT_BYTES, ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    # read-only unless Kafka can change it at run time (dynamic broker configs)
    assert configs["num.partitions"].is_read_only and not configs["log.segment.bytes"].is_read_only


# -- kafka-python ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kp_admin(broker):
    kafka_admin = pytest.importorskip("kafka.admin")
    client = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def test_kafka_python_admin(kp_admin, broker):
    from kafka import TopicPartition as KTP
    from kafka.admin import AlterConfigOp, ConfigResource as KCR, ConfigResourceType, NewPartitions as KNP, \
        NewTopic as KNT
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError
    t = name("kp")
    r = kp_admin.create_topics([KNT(t, 2, 1, topic_configs={"cleanup.policy": "compact"})])
    result = r["topics"][0]
    assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (0, 2, 1)
    assert result["configs"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert result["configs"]["segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([KNT(t, 2, 1)])

    configs = kp_admin.describe_configs([KCR(ConfigResourceType.TOPIC, t)], include_synonyms=True,
                                        config_filter="all")["topic"][t]
    assert (configs["cleanup.policy"]["value"], configs["cleanup.policy"]["config_source"]) == \
        ("compact", "DYNAMIC_TOPIC_CONFIG")
    assert [(s["name"], s["source"]) for s in configs["cleanup.policy"]["synonyms"]] == [
        ("cleanup.policy", "DYNAMIC_TOPIC_CONFIG"), ("log.cleanup.policy", "DEFAULT_CONFIG")]
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"

    # kafka-python sends IncrementalAlterConfigs
    r = kp_admin.alter_configs([KCR(ConfigResourceType.TOPIC, t, configs={
        "cleanup.policy": (AlterConfigOp.APPEND, "delete"), "delete.retention.ms": "1000"})])
    assert r == {"topic": {t: "OK"}}
    modified = kp_admin.describe_configs([KCR(ConfigResourceType.TOPIC, t)])["topic"][t]
    assert {k: v["value"] for k, v in modified.items()} == {"cleanup.policy": "compact,delete",
                                                            "delete.retention.ms": "1000"}

    r = kp_admin.create_partitions({t: KNP(3)})
    assert [x.error_code for x in r.results] == [0]
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({t: KNP(3)})

    produce(broker.bootstrap, t, 6, partition=1)
    r = kp_admin.delete_records({KTP(t, 1): 2})
    assert r[KTP(t, 1)]["low_watermark"] == 2
    assert first_offset(broker.bootstrap, t, 1) == (2, 6, 2)

    cluster = kp_admin.describe_cluster()
    assert cluster["controller_id"] == cluster["brokers"][0]["broker_id"]
    assert cluster["brokers"][0]["port"] == broker.port

    r = kp_admin.delete_topics([t])
    assert [x["error_code"] for x in r["topics"]] == [0]
    assert t not in kp_admin.list_topics()


# -- aiokafka -------------------------------------------------------------------------------------

def test_aiokafka_admin(broker):
    aiokafka_admin = pytest.importorskip("aiokafka.admin")
    from aiokafka.admin.config_resource import ConfigResource as ACR, ConfigResourceType as ACRT
    from aiokafka.structs import TopicPartition as ATP
    t = name("aio")

    async def scenario():
        client = aiokafka_admin.AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap,
                                                    request_timeout_ms=TIMEOUT * 1000)
        await client.start()
        try:
            r = await client.create_topics([aiokafka_admin.NewTopic(t, 2, 1, topic_configs={
                "cleanup.policy": "compact,delete", "retention.ms": "3600000"})])
            assert [e[1] for e in r.topic_errors] == [0]
            r = await client.create_topics([aiokafka_admin.NewTopic(t, 2, 1)])
            assert [(e[1], e[2]) for e in r.topic_errors] == [(36, f"Topic '{t}' already exists.")]

            (resp,) = await client.describe_configs([ACR(ACRT.TOPIC, t)], include_synonyms=True)
            (resource,) = resp.resources
            assert resource[0] == 0
            entries = {e[0]: e for e in resource[4]}
            assert entries["cleanup.policy"][1:4:2] == ("compact,delete", 1)
            assert entries["retention.ms"][1:4:2] == ("3600000", 1)
            assert entries["segment.bytes"][1:4:2] == (SEGMENT_BYTES, 4)

            # aiokafka sends the legacy AlterConfigs: the listed configs replace every override
            (resp,) = await client.alter_configs([ACR(ACRT.TOPIC, t, {"retention.ms": "1000"})])
            assert [r[0] for r in resp.resources] == [0]
            (resp,) = await client.describe_configs([ACR(ACRT.TOPIC, t)])
            entries = {e[0]: e for e in resp.resources[0][4]}
            assert entries["retention.ms"][1:4:2] == ("1000", 1)
            assert entries["cleanup.policy"][1:4:2] == ("delete", 5)

            r = await client.create_partitions({t: aiokafka_admin.NewPartitions(4)})
            assert [e[1] for e in r.topic_errors] == [0]

            produce(broker.bootstrap, t, 5)
            low = await client.delete_records({ATP(t, 0): aiokafka_admin.RecordsToDelete(3)})
            assert low == {ATP(t, 0): 3}

            cluster = await client.describe_cluster()
            assert cluster["controller_id"] == cluster["brokers"][0]["node_id"]

            r = await client.delete_topics([t])
            assert [e[1] for e in r.topic_error_codes] == [0]
            r = await client.delete_topics([t])
            assert [e[1] for e in r.topic_error_codes] == [3]
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))
    assert t not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=TIMEOUT).topics


def test_confluent_dynamic_broker_configs_and_group_configs(admin, broker):
    """librdkafka's findings: IncrementalAlterConfigs on the broker resource (log.cleanup.policy)
    answered "Cannot update these configs dynamically", and GROUP config resources "Unsupported
    resource type 32"."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, NewTopic
    t = "dyn-default-policy"
    admin.create_topics([NewTopic(t, 1, 1)])[t].result(TIMEOUT)
    node = str(admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT).controller.id)
    change = ConfigResource("broker", node, incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(TIMEOUT)
    try:
        topic = ConfigResource("topic", t)
        policy = admin.describe_configs([topic])[topic].result(TIMEOUT)["cleanup.policy"]
        assert (policy.value, policy.source) == ("compact", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        res = ConfigResource("broker", node)
        mine = admin.describe_configs([res])[res].result(TIMEOUT)["log.cleanup.policy"]
        assert (mine.value, mine.source, mine.is_read_only) == \
            ("compact", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    finally:
        undo = ConfigResource("broker", node, incremental_configs=[
            ConfigEntry("log.cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([undo])[undo].result(TIMEOUT)
    group = ConfigResource("group", "g-configs", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([group])[group].result(TIMEOUT)
    described = admin.describe_configs([ConfigResource("group", "g-configs")])
    configs = next(iter(described.values())).result(TIMEOUT)
    assert configs["consumer.session.timeout.ms"].value == "50000"
    assert configs["consumer.heartbeat.interval.ms"].value == "5000"
