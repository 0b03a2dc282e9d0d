"""The admin API handlers, sans IO: kio requests in, response bodies out, over a real data dir.

Every answer is also encoded (``protocol.encode_response``), so a body kio cannot write fails here
and not on a client's connection."""

from __future__ import annotations

import datetime
import importlib
import os
import uuid

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.errors import OffsetOutOfRangeError, TopicError
from compactlog.server.apis.cluster import CLUSTER_AUTHORIZED_OPERATIONS, handle_describe_cluster
from compactlog.server.apis.configs import (handle_alter_configs, handle_describe_configs,
                                            handle_incremental_alter_configs)
from compactlog.server.apis.records import handle_delete_records
from compactlog.server.apis.topic_validation import kafka_config_error
from compactlog.server.apis.topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from compactlog.server.conftest import KIO_MAX_APIS, capture, framed
from compactlog.server.dispatch import dispatch_table
from compactlog.server.protocol import Connection, Request, encode_response
from compactlog.server.state import BrokerState, Listener
from compactlog.server.versions import request_schema
from compactlog.storage import files
from compactlog.storage.checkpoint import OffsetCheckpointFile, decode_topic_id
from compactlog.storage.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, java_double
from compactlog.storage.conftest import Clock
from compactlog.storage.datadir import DataDir

NODE = 1
TIMEOUT = datetime.timedelta(seconds=30)


@pytest.fixture
def make_state(tmp_path):
    opened = []

    def make(**props):
        path = tmp_path / f"data{len(opened)}"
        path.mkdir()
        dd = DataDir(str(path), writable=True, clock=Clock(),
                     broker=BrokerConfig({k.replace("_", "."): str(v) for k, v in props.items()}))
        opened.append(dd)
        return BrokerState(dd, NODE, "compactlog-test-cluster", Listener("PLAINTEXT", "127.0.0.1", 19092))
    yield make
    for dd in opened:
        dd.close()


@pytest.fixture
def state(make_state):
    return make_state()


def nested(api_key: int, version: int):
    return importlib.import_module(request_schema(api_key, version).__module__)


def call(handler, state, body):
    """Run ``handler`` on ``body`` as the broker would, and check that the answer encodes."""
    cls = type(body)
    version = cls.__version__
    request = Request(cls.__api_key__, version, 7, "admin-test", None, body, 0, version, True)
    response = handler(state, request)
    encode_response(request, response)
    return response


# -- builders -------------------------------------------------------------------------------------

def create_req(topics, version=7, validate_only=False):
    m = nested(19, version)
    items = []
    for t in topics:
        t = t if isinstance(t, tuple) else (t,)
        name, parts, rf, configs, assignments = t + (None, 1, 1, {}, ())[len(t):]
        items.append(m.CreatableTopic(
            name=name, num_partitions=parts, replication_factor=rf,
            assignments=tuple(m.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(b))
                              for i, b in assignments),
            configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in configs.items())))
    return m.CreateTopicsRequest(topics=tuple(items), validate_only=validate_only)


def create(state, *topics, **kw):
    return call(handle_create_topics, state, create_req(topics, **kw)).topics


def one(results):
    assert len(results) == 1
    return results[0]


def delete_req(names, version=5):
    return request_schema(20, version)(topic_names=tuple(names), timeout=TIMEOUT)


def partitions_req(topics, version=3, validate_only=False):
    m = nested(37, version)
    return m.CreatePartitionsRequest(
        topics=tuple(m.CreatePartitionsTopic(
            name=n, count=c, assignments=None if a is None else
            tuple(m.CreatePartitionsAssignment(broker_ids=tuple(b)) for b in a))
            for n, c, a in topics),
        timeout=TIMEOUT, validate_only=validate_only)


def delete_records_req(spec, version=2):
    m = nested(21, version)
    return m.DeleteRecordsRequest(topics=tuple(
        m.DeleteRecordsTopic(name=n, partitions=tuple(
            m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts))
        for n, parts in spec), timeout=TIMEOUT)


def describe_req(resources, version=4, synonyms=True, documentation=False):
    m = nested(32, version)
    items = tuple(m.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
                  for t, n, k in resources)
    kw = {"include_documentation": documentation} if version >= 3 else {}
    return m.DescribeConfigsRequest(resources=items, include_synonyms=synonyms, **kw)


def describe(state, *resources, **kw):
    return call(handle_describe_configs, state, describe_req(resources, **kw)).results


def by_name(result):
    return {c.name: c for c in result.configs}


def incremental_req(resources, validate_only=False, version=1):
    m = nested(44, version)
    return m.IncrementalAlterConfigsRequest(resources=tuple(
        m.AlterConfigsResource(resource_type=t, resource_name=n, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops))
        for t, n, ops in resources), validate_only=validate_only)


def alter_req(resources, validate_only=False, version=2):
    m = nested(33, version)
    return m.AlterConfigsRequest(resources=tuple(
        m.AlterConfigsResource(resource_type=t, resource_name=n, configs=tuple(
            m.AlterableConfig(name=k, value=v) for k, v in configs))
        for t, n, configs in resources), validate_only=validate_only)


def errors(results):
    return [(r.error_code, r.error_message) for r in results]


def fill(state, topic, n, partition=0):
    log = state.datadir.open_log(topic, partition)
    for i in range(n):
        log.append_records([b"k%d" % i], [b"v" * 20])
    return log


# -- CreateTopics ---------------------------------------------------------------------------------

def test_create_topic_v7_echoes_partitions_configs_and_the_topic_id(state):
    r = one(create(state, ("orders", 3, 1, {"cleanup.policy": "compact", "segment.bytes": " 4096"})))
    assert (r.error_code, r.error_message, r.num_partitions, r.replication_factor) == (E.none, None, 3, 1)
    assert state.datadir.partitions("orders") == [0, 1, 2]
    assert r.topic_id == uuid.UUID(bytes=decode_topic_id(state.datadir.topic_id("orders")))
    configs = {c.name: c for c in r.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert [c.name for c in r.configs] == sorted(configs)
    # the request's values as given (Kafka echoes the creation configs unparsed)
    assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == ("compact", 1)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (" 4096", 1)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("604800000", 5)
    assert (configs["min.cleanable.dirty.ratio"].value) == "0.5"
    assert not any(c.read_only or c.is_sensitive for c in r.configs)
    assert state.datadir.topic_config("orders").compact
    assert state.datadir.topic_overrides("orders") == {"cleanup.policy": "compact", "segment.bytes": " 4096"}


def test_created_configs_show_static_broker_settings(make_state):
    state = make_state(log_retention_hours=24, log_segment_bytes=1048576)
    configs = {c.name: c for c in one(create(state, "t")).configs}
    # a setting in another unit is converted (ConfigSynonym.HOURS_TO_MILLISECONDS)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("86400000", 4)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("1048576", 4)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_create_topic_before_v5_has_no_echo(state, version):
    r = one(create(state, ("t", 2), version=version))
    assert (r.name, r.error_code) == ("t", E.none)
    assert not hasattr(r, "configs")
    assert state.datadir.partitions("t") == [0, 1]


def test_minus_one_takes_the_broker_defaults(make_state):
    state = make_state(num_partitions=4)
    r = one(create(state, ("t", -1, -1)))
    assert (r.error_code, r.num_partitions, r.replication_factor) == (E.none, 4, 1)
    assert state.datadir.partitions("t") == [0, 1, 2, 3]


def test_validate_only_creates_nothing(state):
    r = one(create(state, ("t", 2, 1, {"cleanup.policy": "compact"}), validate_only=True))
    assert (r.error_code, r.num_partitions) == (E.none, 2)
    assert isinstance(r.topic_id, uuid.UUID)
    assert state.datadir.topics() == []
    assert os.listdir(state.datadir.path) == [n for n in os.listdir(state.datadir.path) if not n.startswith("t-")]


def test_duplicate_create(state):
    create(state, "t")
    r = one(create(state, ("t", 5)))
    assert (r.error_code, r.error_message) == (E.topic_already_exists, "Topic 't' already exists.")
    assert (r.num_partitions, r.replication_factor, r.configs, r.topic_id) == (-1, -1, (), None)
    assert state.datadir.partitions("t") == [0]


def test_a_topic_named_twice_in_one_request(state):
    results = create(state, "t", ("t", 2), "u")
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("t", E.invalid_request, "Duplicate topic name."), ("u", E.none, None)]
    assert state.datadir.topics() == ["u"]


@pytest.mark.parametrize("name, message", [
    ("", "Topic name is invalid: the empty string is not allowed"),
    (".", "Topic name is invalid: '.' is not allowed"),
    ("..", "Topic name is invalid: '..' is not allowed"),
    ("x" * 250, f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max allowed length 249"),
    ("bad name", "Topic name is invalid: 'bad name' contains one or more characters other than ASCII "
                 "alphanumerics, '.', '_' and '-'"),
    ("t\n", "Topic name is invalid: 't\n' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'"),
    ("caf\u00e9", "Topic name is invalid: 'caf\u00e9' contains one or more characters other than ASCII "
                  "alphanumerics, '.', '_' and '-'"),
])
def test_invalid_topic_names(state, name, message):
    r = one(create(state, name))
    assert (r.error_code, r.error_message) == (E.invalid_topic_exception, message)
    assert state.datadir.topics() == []


def test_names_colliding_in_dot_and_underscore(state):
    create(state, "a.b")
    r = one(create(state, "a_b"))
    assert (r.error_code, r.error_message) == (E.invalid_topic_exception,
                                               "Topic 'a_b' collides with existing topic: a.b")
    # within one request too (Kafka checks existing topics only)
    results = create(state, "x_y", "x.y", "xy")
    assert [r.error_code for r in results] == [E.none, E.invalid_topic_exception, E.none]
    assert state.datadir.topics() == ["a.b", "x_y", "xy"]


def test_cluster_metadata_topic_is_refused(state):
    r = one(create(state, "__cluster_metadata"))
    assert (r.error_code, r.error_message) == (E.invalid_request,
                                               "Creation of internal topic __cluster_metadata is prohibited.")


@pytest.mark.parametrize("parts, rf, code, message", [
    (1, 0, E.invalid_replication_factor, "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, -2, E.invalid_replication_factor, "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, 3, E.invalid_replication_factor, "Unable to replicate the partition 3 time(s): The target replication "
                                         "factor of 3 cannot be reached because only 1 broker(s) are registered."),
    (0, 1, E.invalid_partitions, "Number of partitions was set to an invalid non-positive value."),
    (-2, 1, E.invalid_partitions, "Number of partitions was set to an invalid non-positive value."),
])
def test_partition_count_and_replication_factor(state, parts, rf, code, message):
    r = one(create(state, ("t", parts, rf)))
    assert (r.error_code, r.error_message) == (code, message)
    assert state.datadir.topics() == []


def test_default_replication_factor_above_one(make_state):
    state = make_state(default_replication_factor=2)
    r = one(create(state, ("t", 1, -1)))
    assert r.error_code == E.invalid_replication_factor
    assert r.error_message.startswith("Unable to replicate the partition 2 time(s)")
    assert one(create(state, ("t", 1, 1))).error_code == E.none


@pytest.mark.parametrize("configs, message", [
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"segment.bytes": "abc"}, "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
    ({"segment.bytes": "3000000000"}, "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
    ({"retention.ms": "1.5"}, "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "10"}, "Invalid value 10 for configuration segment.bytes: Value must be at least 14"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"cleanup.policy": "compact,bogus"},
     "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
    ({"cleanup.policy": "Compact"},
     "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"),
    ({"compression.type": "ZSTD"}, "Invalid value ZSTD for configuration compression.type: String must be "
                                   "one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"min.cleanable.dirty.ratio": "1.5"},
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ({"min.cleanable.dirty.ratio": "x"},
     "Invalid value x for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ({"compression.gzip.level": "0"},
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ({"compression.zstd.level": "23"},
     "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
    ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ({"message.timestamp.type": "createtime"}, "Invalid value createtime for configuration message.timestamp.type: "
                                               "String must be one of: CreateTime, LogAppendTime"),
    ({"retention.ms": None, "segment.ms": None}, "Null value not supported for topic configs: retention.ms,segment.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
def test_invalid_configs_get_kafkas_message(state, configs, message):
    r = one(create(state, ("t", 1, 1, configs)))
    assert (r.error_code, r.error_message) == (E.invalid_config, message)
    assert state.datadir.topics() == []


def test_where_compactlog_is_stricter_its_own_message_is_given(state):
    r = one(create(state, ("t", 1, 1, {"cleanup.policy": ""})))
    assert r.error_code == E.invalid_config
    assert "cleanup.policy" in r.error_message and "compact, delete or both" in r.error_message


@pytest.mark.parametrize("props, configs", [({}, {"min.insync.replicas": "2"}),
                                            ({"min.insync.replicas": "2"}, {})])
def test_min_insync_replicas_above_one_can_never_be_met(make_state, props, configs):
    state = make_state(**{k.replace(".", "_"): v for k, v in props.items()})
    r = one(create(state, ("t", 1, 1, configs)))
    assert r.error_code == E.invalid_config
    assert "min.insync.replicas=2" in r.error_message and "single node" in r.error_message


def test_checks_come_in_kafkas_order(state):
    create(state, "t")
    # existence before configs, configs before the replication factor
    assert one(create(state, ("t", 1, 1, {"x": "1"}))).error_code == E.topic_already_exists
    assert one(create(state, ("u", 1, 5, {"x": "1"}))).error_code == E.invalid_config


def test_manual_assignments_on_one_node(state):
    r = one(create(state, ("t", -1, -1, {}, [(0, [NODE]), (1, [NODE])])))
    assert (r.error_code, r.num_partitions, r.replication_factor) == (E.none, 2, 1)
    assert state.datadir.partitions("t") == [0, 1]


@pytest.mark.parametrize("parts, rf, assignments, code, message", [
    (-1, 1, [(0, [NODE])], E.invalid_request,
     "A manual partition assignment was specified, but replication factor was not set to -1."),
    (1, -1, [(0, [NODE])], E.invalid_request,
     "A manual partition assignment was specified, but numPartitions was not set to -1."),
    (-1, -1, [(0, [2])], E.invalid_replica_assignment,
     "The manual partition assignment includes broker 2, but no such broker is registered."),
    (-1, -1, [(0, [NODE, NODE])], E.invalid_replica_assignment,
     f"The manual partition assignment includes the broker {NODE} more than once."),
    (-1, -1, [(0, [])], E.invalid_replica_assignment,
     "The manual partition assignment includes an empty replica list."),
    (-1, -1, [(0, [NODE]), (0, [NODE])], E.invalid_replica_assignment,
     "Found multiple manual partition assignments for partition 0"),
    (-1, -1, [(0, [NODE]), (2, [NODE])], E.invalid_replica_assignment,
     "partitions should be a consecutive 0-based integer sequence"),
])
def test_bad_manual_assignments(state, parts, rf, assignments, code, message):
    r = one(create(state, ("t", parts, rf, {}, assignments)))
    assert (r.error_code, r.error_message) == (code, message)
    assert state.datadir.topics() == []


def test_an_excessively_large_request_creates_nothing(state):
    # the whole operation fails (QuorumController), every topic of the request says so
    results = create(state, ("a", 6000), ("b", 6000), "c", "c")
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        (n, E.policy_violation, "Unable to perform excessively large batch operation.") for n in "abc"]
    assert state.datadir.topics() == []


@pytest.mark.parametrize("name, policy", [("19_3", "compact"), ("19_4", "compact"), ("19_7", "compact")])
def test_captured_create_topics_requests(state, name, policy):
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(framed(capture(name)))
    request = conn.next_event()
    response = handle_create_topics(state, request)
    frame = encode_response(request, response)
    assert frame[4:8] == request.correlation_id.to_bytes(4, "big")
    r = one(response.topics)
    assert r.error_code == E.none
    assert state.datadir.partitions(r.name) == [0, 1, 2]
    assert state.datadir.topic_config(r.name).get("cleanup.policy") == [policy]
    if name == "19_4":
        assert state.datadir.topic_config(r.name).get("min.cleanable.dirty.ratio") == 0.1


# -- DeleteTopics ---------------------------------------------------------------------------------

def test_delete_topics(state):
    create(state, ("t", 2), "u")
    log = fill(state, "t", 3)
    topic_id = state.datadir.topic_id("t")
    results = call(handle_delete_topics, state, delete_req(["t", "nope"])).responses
    assert errors(results) == [(E.none, None),
                               (E.unknown_topic_or_partition, "This server does not host this topic-partition.")]
    assert state.datadir.topics() == ["u"]
    assert not [n for n in os.listdir(state.datadir.path) if n.startswith("t-") or n.endswith("-delete")]
    with pytest.raises(TopicError):
        log.append_records([b"k"], [b"v"])
    create(state, "t")
    assert state.datadir.topic_id("t") != topic_id


def test_delete_topics_v1_has_no_message(state):
    results = call(handle_delete_topics, state, delete_req(["nope"], version=1)).responses
    assert [(r.name, r.error_code) for r in results] == [("nope", E.unknown_topic_or_partition)]


def test_delete_a_topic_named_twice(state):
    create(state, "t")
    results = call(handle_delete_topics, state, delete_req(["t", "t"])).responses
    assert errors(results) == [(E.invalid_request, "Duplicate topic name.")]
    assert state.datadir.topics() == ["t"]


@pytest.mark.parametrize("version, code", [(5, E.topic_deletion_disabled), (3, E.topic_deletion_disabled),
                                           (2, E.invalid_request)])
def test_topic_deletion_disabled(make_state, version, code):
    state = make_state(delete_topic_enable="false")
    create(state, "t")
    results = call(handle_delete_topics, state, delete_req(["t"], version=version)).responses
    assert [r.error_code for r in results] == [code]
    assert state.datadir.topics() == ["t"]


def test_delete_topics_by_id_v6(state):
    # v6 is not advertised (wire-protocol.md §2.1); the handler still answers it as Kafka does
    create(state, "t", "u")
    t_id = uuid.UUID(bytes=decode_topic_id(state.datadir.topic_id("t")))
    m = nested(20, 6)
    body = m.DeleteTopicsRequest(topics=(
        m.DeleteTopicState(name=None, topic_id=t_id), m.DeleteTopicState(name="u", topic_id=t_id),
        m.DeleteTopicState(name=None, topic_id=None), m.DeleteTopicState(name=None, topic_id=uuid.UUID(int=5))),
        timeout=TIMEOUT)
    results = call(handle_delete_topics, state, body).responses
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in results] == [
        ("u", t_id, E.invalid_request, "You may not specify both topic name and topic id."),
        (None, None, E.invalid_request, "Neither topic name nor id were specified."),
        (None, uuid.UUID(int=5), E.unknown_topic_id, "This server does not host this topic ID."),
        ("t", t_id, E.none, None)]
    assert state.datadir.topics() == ["u"]


# -- CreatePartitions -----------------------------------------------------------------------------

def test_create_partitions(state):
    create(state, ("t", 1, 1, {"cleanup.policy": "compact"}))
    results = call(handle_create_partitions, state, partitions_req([("t", 3, None)])).results
    assert errors(results) == [(E.none, None)]
    assert state.datadir.partitions("t") == [0, 1, 2]
    topic_id = state.datadir.topic_id("t")
    for p in (1, 2):
        with open(os.path.join(state.datadir.path, f"t-{p}", files.PARTITION_METADATA)) as f:
            assert topic_id in f.read()
    assert state.datadir.open_log("t", 2).config.compact


@pytest.mark.parametrize("count, message", [(2, "Topic already has 2 partition(s)."),
                                            (1, "The topic t currently has 2 partition(s); 1 would not be an increase.")])
def test_partitions_only_increase(state, count, message):
    create(state, ("t", 2))
    results = call(handle_create_partitions, state, partitions_req([("t", count, None)])).results
    assert errors(results) == [(E.invalid_partitions, message)]
    assert state.datadir.partitions("t") == [0, 1]


def test_create_partitions_errors(state):
    create(state, "t", "u", "v")
    req = partitions_req([("nope", 3, None), ("t", 3, [[NODE]]), ("u", 2, [[7]]), ("v", 2, None), ("v", 3, None)])
    results = call(handle_create_partitions, state, req).results
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("nope", E.unknown_topic_or_partition, None),
        ("t", E.invalid_replica_assignment,
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        ("u", E.invalid_replica_assignment,
         "The manual partition assignment includes broker 7, but no such broker is registered."),
        ("v", E.invalid_request, "Duplicate topic name.")]
    assert [state.datadir.partitions(t) for t in "tuv"] == [[0], [0], [0]]


def test_create_partitions_with_assignments_and_validate_only(state):
    create(state, "t", "u")
    results = call(handle_create_partitions, state,
                   partitions_req([("t", 3, [[NODE], [NODE]]), ("u", 4, None)], validate_only=True)).results
    assert errors(results) == [(E.none, None), (E.none, None)]
    assert state.datadir.partitions("t") == [0] and state.datadir.partitions("u") == [0]
    call(handle_create_partitions, state, partitions_req([("t", 3, [[NODE], [NODE]])]))
    assert state.datadir.partitions("t") == [0, 1, 2]


def test_create_partitions_too_many(state):
    create(state, "t")
    results = call(handle_create_partitions, state, partitions_req([("t", 20000, None)])).results
    assert errors(results) == [(E.policy_violation, "Unable to perform excessively large batch operation.")]
    assert state.datadir.partitions("t") == [0]


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


# -- DescribeConfigs ------------------------------------------------------------------------------

def test_describe_topic_configs_with_sources_and_synonyms(make_state):
    state = make_state(log_segment_bytes=1048576)
    create(state, ("t", 1, 1, {"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": ".25"}))
    result = one(describe(state, (2, "t", None)))
    assert (result.error_code, result.error_message, result.resource_type, result.resource_name) == \
        (E.none, None, 2, "t")
    configs = by_name(result)
    assert set(configs) == set(TOPIC_CONFIGS)
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only, policy.is_sensitive) == \
        ("delete,compact", 1, False, False)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "delete,compact", 1), ("log.cleanup.policy", "delete", 5)]
    assert configs["min.cleanable.dirty.ratio"].value == "0.25"
    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1048576", 4)
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "1048576", 4), ("log.segment.bytes", "1073741824", 5)]
    flush = configs["flush.messages"]
    assert (flush.value, flush.config_source) == ("9223372036854775807", 5)
    assert [(s.name, s.source) for s in flush.synonyms] == [("log.flush.interval.messages", 5)]
    remote = configs["remote.storage.enable"]        # no broker synonym at all
    assert (remote.value, remote.config_source, remote.synonyms) == ("false", 5, ())
    assert configs["segment.bytes"].config_type == 3 and configs["cleanup.policy"].config_type == 7
    assert configs["retention.ms"].config_type == 5 and configs["preallocate"].config_type == 1
    assert configs["min.cleanable.dirty.ratio"].config_type == 6
    assert configs["compression.type"].config_type == 2
    assert all(c.documentation is None for c in result.configs)


@pytest.mark.parametrize("props, value, source, synonyms", [
    # Kafka drops the synonyms before the primary name (log.retention.ms): with only the default
    # log.retention.hours, or only a static one, it lists none and says DEFAULT_CONFIG
    ({}, "604800000", 5, []),
    ({"log_retention_hours": "24"}, "86400000", 5, []),
    ({"log_retention_ms": "1000"}, "1000", 4, [("log.retention.ms", "1000", 4), ("log.retention.hours", "168", 5)]),
    ({"log_retention_ms": "1000", "log_retention_minutes": "3"}, "1000", 4,
     [("log.retention.ms", "1000", 4), ("log.retention.minutes", "3", 4), ("log.retention.hours", "168", 5)]),
])
def test_retention_ms_synonyms_as_kafka_lists_them(make_state, props, value, source, synonyms):
    state = make_state(**props)
    create(state, "t")
    entry = by_name(one(describe(state, (2, "t", ["retention.ms"]))))["retention.ms"]
    assert (entry.value, entry.config_source) == (value, source)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == synonyms


def test_describe_without_synonyms_and_selected_keys(state):
    create(state, ("t", 1, 1, {"cleanup.policy": "compact"}))
    result = one(describe(state, (2, "t", ["cleanup.policy", "segment.bytes", "no.such.key"]), synonyms=False))
    assert [(c.name, c.value, c.config_source, c.synonyms) for c in result.configs] == [
        ("cleanup.policy", "compact", 1, ()), ("segment.bytes", "1073741824", 5, ())]
    # an empty key list is every config, as a null one
    assert len(one(describe(state, (2, "t", []))).configs) == len(TOPIC_CONFIGS)


@pytest.mark.parametrize("version", [1, 2])
def test_describe_old_versions(state, version):
    create(state, "t")
    result = one(describe(state, (2, "t", None), version=version))
    assert not hasattr(result.configs[0], "documentation")
    assert by_name(result)["cleanup.policy"].config_source == 5


def test_describe_with_documentation(state):
    create(state, "t")
    topic, broker = describe(state, (2, "t", None), (4, str(NODE), None), documentation=True, version=3)
    assert all(c.documentation for c in topic.configs)
    assert all(c.documentation for c in broker.configs if c.name in BROKER_CONFIGS)
    broker = by_name(describe(state, (4, str(NODE), None), documentation=True)[0])
    assert broker["log.segment.bytes"].documentation == \
        "Default of the topic config segment.bytes for topics that do not set it."
    assert broker["num.partitions"].documentation


def test_describe_unknown_and_invalid_topics(state):
    results = describe(state, (2, "nope", None), (2, "bad name", None), (2, "", None))
    assert [(r.error_code, r.error_message, r.configs) for r in results] == [
        (E.unknown_topic_or_partition, None, ()),
        (E.invalid_topic_exception, "Topic name is invalid: 'bad name' contains one or more characters other "
                                    "than ASCII alphanumerics, '.', '_' and '-'", ()),
        (E.invalid_topic_exception, "Topic name is invalid: the empty string is not allowed", ())]


def test_describe_the_broker(make_state):
    state = make_state(num_partitions=3, log_retention_hours=24, my_custom_secret="hunter2",
                       listeners="PLAINTEXT://127.0.0.1:19092")
    result = one(describe(state, (4, str(NODE), None)))
    assert result.error_code == E.none
    configs = by_name(result)
    # read-only unless Kafka can change it at run time (DynamicBrokerConfig.AllDynamicConfigs)
    assert not configs["log.cleanup.policy"].read_only and not configs["log.cleaner.backoff.ms"].read_only
    assert configs["num.partitions"].read_only and configs["node.id"].read_only
    assert not configs["listeners"].read_only           # DynamicListenerConfig lists it (per broker)
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == ("3", 4)
    assert [(s.name, s.value, s.source) for s in configs["num.partitions"].synonyms] == [
        ("num.partitions", "3", 4), ("num.partitions", "1", 5)]
    assert (configs["log.cleaner.threads"].value, configs["log.cleaner.threads"].config_source) == ("1", 5)
    assert configs["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.config_source, hours.config_type) == ("24", 4, 3)
    assert [(s.name, s.value, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", "24", 4), ("log.retention.hours", "168", 5)]
    # a setting with no default and none set: null, as Kafka's log.retention.ms
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].config_source) == (None, 5)
    assert configs["listeners"].value == "PLAINTEXT://127.0.0.1:19092"
    secret = configs["my.custom.secret"]            # unknown to Kafka: its type, and so its secrecy, too
    assert (secret.value, secret.is_sensitive, secret.config_type) == (None, True, 0)
    assert all(s.value is None for s in secret.synonyms)


def test_describe_broker_resource_names(state):
    results = describe(state, (4, "", None), (4, "2", None), (4, "x", None), (8, str(NODE), None),
                       (32, "group", None), (99, "?", None))
    assert errors(results) == [
        (E.none, None),
        (E.invalid_request, f"Unexpected broker id, expected {NODE} or empty string, but received 2"),
        (E.invalid_request, "Broker id must be an integer, but it is: x"),
        (E.invalid_request, "Unsupported resource type 8 (BROKER_LOGGER): compactlog serves TOPIC (2), "
                            "BROKER (4) and GROUP (32) configs only"),
        (E.none, None),                   # GROUP: Kafka 4.0's group configs (a group need not exist)
        (E.invalid_request, "Unsupported resource type 99: compactlog serves TOPIC (2), BROKER (4) and "
                            "GROUP (32) configs only")]
    assert results[0].configs == ()


@pytest.mark.parametrize("name", ["32_1", "32_2", "32_4"])
def test_captured_describe_configs_requests(state, name):
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(framed(capture(name)))
    request = conn.next_event()
    topic = request.body.resources[0].resource_name
    create(state, ("t", 1))
    response = handle_describe_configs(state, request)
    encode_response(request, response)
    assert errors(response.results) == [(E.unknown_topic_or_partition, None)]
    create(state, (topic, 3, 1, {"cleanup.policy": "compact"}))
    response = handle_describe_configs(state, request)
    encode_response(request, response)
    result = one(response.results)
    policy = by_name(result)["cleanup.policy"]
    assert (policy.value, policy.config_source) == ("compact", 1)
    assert bool(policy.synonyms) == request.body.include_synonyms


# -- IncrementalAlterConfigs ----------------------------------------------------------------------

def incremental(state, *resources, **kw):
    return call(handle_incremental_alter_configs, state, incremental_req(resources, **kw)).responses


def test_incremental_set_delete_append_subtract(state):
    create(state, ("t", 1, 1, {"retention.ms": "1000", "segment.bytes": "4096"}))
    log = fill(state, "t", 1)
    results = incremental(state, (2, "t", [("retention.ms", 1, None), ("segment.ms", 0, "60000"),
                                           ("cleanup.policy", 2, "compact")]))
    assert errors(results) == [(E.none, None)]
    assert (results[0].resource_type, results[0].resource_name) == (2, "t")
    # APPEND starts from Kafka's default of the config (delete)
    assert state.datadir.topic_overrides("t") == {"segment.bytes": "4096", "segment.ms": "60000",
                                                  "cleanup.policy": "delete,compact"}
    assert log.config.compact and log.config.delete            # the open log at once
    assert errors(incremental(state, (2, "t", [("cleanup.policy", 3, "delete")]))) == [(E.none, None)]
    assert state.datadir.topic_overrides("t")["cleanup.policy"] == "compact"
    assert log.config.compact and not log.config.delete
    assert errors(incremental(state, (2, "t", [("cleanup.policy", 2, "compact,delete")]))) == [(E.none, None)]
    assert state.datadir.topic_overrides("t")["cleanup.policy"] == "compact,delete"


def test_incremental_errors(state):
    create(state, ("t", 1, 1, {"retention.ms": "1000"}))
    results = incremental(
        state,
        (2, "t", [("segment.bytes", 2, "1")]),
        (2, "nope", [("retention.ms", 0, "5")]),
        (2, "nope2", [("retention.ms", 0, "x")]),
        (2, "", [("retention.ms", 0, "5")]),
        (2, "u v", [("retention.ms", 0, "5")]))
    assert errors(results) == [
        (E.invalid_config, "Can't APPEND to key segment.bytes because its type is not LIST."),
        (E.unknown_topic_or_partition, "The topic 'nope' does not exist."),
        (E.invalid_config, "Invalid value x for configuration retention.ms: Not a number of type LONG"),
        (E.invalid_request, "Default topic resources are not allowed."),
        (E.invalid_topic_exception, "Topic name is invalid: 'u v' contains one or more characters other than "
                                    "ASCII alphanumerics, '.', '_' and '-'")]
    assert state.datadir.topic_overrides("t") == {"retention.ms": "1000"}


def test_incremental_preprocessing(state):
    create(state, "t", "u")
    results = incremental(
        state,
        (2, "t", [("retention.ms", 0, "5")]),
        (2, "t", [("retention.ms", 0, "6")]),
        (2, "u", [("retention.ms", 0, "5"), ("retention.ms", 1, None)]),
        (2, "w", [("retention.ms", 0, None), ("segment.ms", 2, None), ("segment.bytes", 1, None)]),
        (2, "x", [("retention.ms", 9, "1")]),
        (8, str(NODE), [("kafka", 0, "DEBUG")]))
    assert errors(results) == [
        (E.invalid_request, "Each resource must appear at most once."),
        (E.invalid_request, "Each resource must appear at most once."),
        (E.invalid_request, "Error due to duplicate config keys"),
        (E.invalid_request, "Null value not supported for : retention.ms, segment.ms"),
        (E.invalid_request, "Unknown operations type 9"),
        (E.invalid_request, "Unsupported resource type 8 (BROKER_LOGGER): compactlog serves TOPIC (2), "
                            "BROKER (4) and GROUP (32) configs only")]
    assert state.datadir.topic_overrides("t") == {} and state.datadir.topic_overrides("u") == {}


def test_incremental_values_are_validated_as_a_whole(state):
    create(state, ("t", 1, 1, {"max.compaction.lag.ms": "100"}))
    results = incremental(state, (2, "t", [("min.compaction.lag.ms", 0, "200")]))
    assert errors(results) == [(E.invalid_config, "conflict topic config setting min.compaction.lag.ms "
                                                   "(200) > max.compaction.lag.ms (100)")]
    results = incremental(state, (2, "t", [("cleanup.policy", 3, "delete")]))
    assert results[0].error_code == E.invalid_config          # no policy left: compactlog refuses it
    assert errors(incremental(state, (2, "t", [("no.such", 1, None)]))) == [(E.none, None)]


def test_incremental_validate_only(state):
    create(state, "t")
    results = incremental(state, (2, "t", [("cleanup.policy", 0, "compact")]), validate_only=True)
    assert errors(results) == [(E.none, None)]
    assert state.datadir.topic_overrides("t") == {}
    assert incremental(state, (2, "t", [("retention.ms", 0, "-5")]), validate_only=True)[0].error_code == \
        E.invalid_config


def test_incremental_broker_resources(state):
    results = incremental(state, (4, str(NODE), [("log.retention.ms", 1, None)]),
                          (4, "", [("num.partitions", 0, "3"), ("log.retention.ms", 0, "5")]),
                          (4, "3", [("num.partitions", 0, "3")]),
                          (4, "one", [("num.partitions", 0, "3")]))
    assert errors(results) == [
        (E.none, None),
        (E.invalid_request, "Cannot update these configs dynamically: Set(num.partitions)"),
        (E.invalid_request, f"Unexpected broker id, expected {NODE}, but received 3"),
        (E.invalid_request, "Node id must be an integer, but it is: one")]


def test_captured_incremental_alter_configs_request(state):
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(framed(capture("44_1")))
    request = conn.next_event()
    topic = request.body.resources[0].resource_name
    create(state, (topic, 3))
    log = state.datadir.open_log(topic, 1)
    response = handle_incremental_alter_configs(state, request)
    encode_response(request, response)
    assert errors(response.responses) == [(E.none, None)]
    assert state.datadir.topic_overrides(topic) == {"cleanup.policy": "compact", "delete.retention.ms": "1000"}
    assert log.config.compact and log.config.delete_retention_ms == 1000


# -- AlterConfigs (legacy) ------------------------------------------------------------------------

def alter(state, *resources, **kw):
    return call(handle_alter_configs, state, alter_req(resources, **kw)).responses


def test_legacy_alter_replaces_every_override(state):
    create(state, ("t", 1, 1, {"retention.ms": "1000", "segment.bytes": "4096"}))
    log = fill(state, "t", 1)
    assert errors(alter(state, (2, "t", [("cleanup.policy", "compact")]))) == [(E.none, None)]
    assert state.datadir.topic_overrides("t") == {"cleanup.policy": "compact"}
    assert log.config.compact and log.config.get("retention.ms") == 604800000
    assert errors(alter(state, (2, "t", []))) == [(E.none, None)]
    assert state.datadir.topic_overrides("t") == {}
    assert not log.config.compact


def test_legacy_alter_errors_and_validate_only(state):
    create(state, ("t", 1, 1, {"retention.ms": "1000"}))
    results = alter(state, (2, "t", [("segment.bytes", "1")]), (2, "nope", [("retention.ms", "5")]),
                    (2, "x", [("a", "1"), ("a", "2")]), (2, "y", [("retention.ms", None)]),
                    (4, str(NODE), [("num.partitions", "3")]), (4, str(NODE), []), (8, str(NODE), []))
    assert errors(results) == [
        (E.invalid_config, "Invalid value 1 for configuration segment.bytes: Value must be at least 14"),
        (E.unknown_topic_or_partition, "The topic 'nope' does not exist."),
        (E.invalid_request, "Error due to duplicate config keys"),
        (E.invalid_request, "Null value not supported for : retention.ms"),
        (E.invalid_request, "Each resource must appear at most once."),
        (E.invalid_request, "Each resource must appear at most once."),
        (E.invalid_request, "Unsupported resource type 8 (BROKER_LOGGER): compactlog serves TOPIC (2), "
                            "BROKER (4) and GROUP (32) configs only")]
    assert errors(alter(state, (4, str(NODE), [("num.partitions", "3")]))) == [
        (E.invalid_request, "Cannot update these configs dynamically: Set(num.partitions)")]
    assert errors(alter(state, (4, "", []))) == [(E.none, None)]
    assert errors(alter(state, (2, "t", [("cleanup.policy", "compact")]), validate_only=True)) == [(E.none, None)]
    assert state.datadir.topic_overrides("t") == {"retention.ms": "1000"}


@pytest.mark.parametrize("version", [0, 1])
def test_legacy_alter_old_versions(state, version):
    create(state, "t")
    assert errors(alter(state, (2, "t", [("retention.ms", "5")]), version=version)) == [(E.none, None)]
    assert state.datadir.topic_config("t").get("retention.ms") == 5


# -- DescribeCluster ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("include, operations", [(True, CLUSTER_AUTHORIZED_OPERATIONS),
                                                 (False, -2147483648)])
def test_describe_cluster(state, version, include, operations):
    body = request_schema(60, version)(include_cluster_authorized_operations=include)
    r = call(handle_describe_cluster, state, body)
    assert (r.error_code, r.error_message, r.cluster_id, r.controller_id) == \
        (E.none, None, "compactlog-test-cluster", NODE)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [(NODE, "127.0.0.1", 19092, None)]
    assert r.cluster_authorized_operations == operations
    if version >= 1:
        assert r.endpoint_type == 1


def test_cluster_operations_are_kafkas_cluster_acls():
    # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
    assert CLUSTER_AUTHORIZED_OPERATIONS == 0b1111110100000


@pytest.mark.parametrize("endpoint, code, message", [
    (2, E.mismatched_endpoint_type,
     "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"),
    (0, E.unsupported_endpoint_type, "Unsupported endpoint type 0"),
    (7, E.unsupported_endpoint_type, "Unsupported endpoint type 7"),
])
def test_describe_cluster_endpoint_types(state, endpoint, code, message):
    body = request_schema(60, 1)(include_cluster_authorized_operations=False, endpoint_type=endpoint)
    r = call(handle_describe_cluster, state, body)
    assert (r.error_code, r.error_message, r.brokers, r.controller_id) == (code, message, (), -1)


# -- the Kafka rules beside compactlog's ----------------------------------------------------------

def test_every_topic_config_check_carries_kafkas_rule():
    from compactlog.storage.config import Rule
    assert all(d.check is None or isinstance(d.check, Rule) for d in TOPIC_CONFIGS.values())


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_kafka_messages_agree_with_compactlogs_checks(name):
    """Where Kafka's rule gives a message, compactlog refuses the value too, and the other way round
    at each bound (one rule object gives both, so they can only drift in their wording)."""
    from compactlog.errors import ConfigError
    d = TOPIC_CONFIGS[name]
    rule = d.check
    probes = ["abc", "", "1.5", "true"]
    for attr in ("lo", "hi", "other"):
        bound = getattr(rule, attr, None)
        if bound is not None:
            probes += [str(bound - 1), str(bound), str(bound + 1)]
    options = getattr(rule, "options", ())
    probes += list(options) + [options[0].upper()] if options else []
    for raw in probes:
        try:
            d.parse(raw)
            ours = None
        except ConfigError:
            ours = "refused"
        kafka = kafka_config_error(d, raw)
        if kafka is not None:
            assert ours == "refused", (name, raw, kafka)
        elif ours is not None:
            # compactlog stricter than Kafka: only where the module docstring says so
            assert (name, raw) in {("cleanup.policy", "")}, (name, raw)


@pytest.mark.parametrize("name, raw, message", [
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ("min.cleanable.dirty.ratio", "1.5",
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "-1e-5",
     "Invalid value -1.0E-5 for configuration min.cleanable.dirty.ratio: Value must be at least 0"),
    ("compression.zstd.level", "23",
     "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
    ("compression.gzip.level", "0",
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one "
                                 "of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("cleanup.policy", "compact,Delete",
     "Invalid value Delete for configuration cleanup.policy: String must be one of: compact, delete"),
    ("segment.ms", "x", "Invalid value x for configuration segment.ms: Not a number of type LONG"),
    ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either "
                           "true or false"),
    ("retention.bytes", "-5", None),
])
def test_kafka_config_error_words_each_rule_as_kafka(name, raw, message):
    assert kafka_config_error(TOPIC_CONFIGS[name], raw) == message


@pytest.mark.parametrize("value, text", [(0.5, "0.5"), (1.0, "1.0"), (100.0, "100.0"), (0.001, "0.001"),
                                         (0.0001, "1.0E-4"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"),
                                         (1.7976931348623157e308, "1.7976931348623157E308"), (0.0, "0.0"),
                                         (-2.5e-5, "-2.5E-5"), (float("inf"), "Infinity")])
def test_java_double(value, text):
    assert java_double(value) == text


# -- mutated captures -----------------------------------------------------------------------------

def test_mutated_admin_requests_are_answered_never_raised(state):
    """Random byte flips in the captured admin requests: every frame kio decodes gets an answer that
    encodes (nothing raises); the requests run with validate_only so nothing is created."""
    import dataclasses
    import random
    rng = random.Random(20241025)
    names = ["19_3", "19_4", "19_7", "32_1", "32_2", "32_4", "44_1"]
    create(state, ("kp-79005f", 3), ("aio-a3d451", 1), ("compacted-e210e3", 1))
    answered = 0
    for _ in range(10000):
        frame = bytearray(capture(rng.choice(names)))
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(4, len(frame))] = rng.randrange(256)   # keep API key and version
        conn = Connection(KIO_MAX_APIS)
        conn.receive_data(framed(bytes(frame)))
        request = conn.next_event()
        if not isinstance(request, Request):
            continue
        if hasattr(request.body, "validate_only"):
            request.body = dataclasses.replace(request.body, validate_only=True)
        response = dispatch_table()[request.api_key].handler(state, request)
        encode_response(request, response)
        answered += 1
    assert answered > 1500
    assert state.datadir.topics() == ["aio-a3d451", "compacted-e210e3", "kp-79005f"]
