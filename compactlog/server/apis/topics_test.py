"""CreateTopics, DeleteTopics and CreatePartitions through their handlers (``apis/topics.py``), sans
IO: kio requests in, response bodies out, over a real data dir; every answer is also encoded."""

from __future__ import annotations

import os
import uuid

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.errors import TopicError
from compactlog.server.apis.conftest import (NODE, TIMEOUT, call, create, delete_req, errors, fill, nested,
                                             one, partitions_req)
from compactlog.server.apis.topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from compactlog.server.conftest import KIO_MAX_APIS, capture, framed
from compactlog.server.protocol import Connection, encode_response
from compactlog.storage import files
from compactlog.storage.checkpoint import decode_topic_id
from compactlog.storage.config import TOPIC_CONFIGS


@pytest.fixture
def state(make_state):
    return make_state()


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
