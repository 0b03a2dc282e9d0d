"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs through their handlers
(``apis/configs.py``), sans IO: sources and synonyms as Kafka lists them, the operations, the
refusals in Kafka's words; dynamic broker configs and group configs (librdkafka's admin tests use
both): Kafka's DynamicBrokerConfig (cluster-wide defaults and this node's, applied to topics
without an override, kept in the data dir) and Kafka 4.0's GROUP resources. What the data dir
keeps of them, read back without a broker, is ``storage/dynamic_config_test.py``."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from compactlog.server.apis.conftest import (NODE, alter, by_name, create, describe, errors, fill,
                                             incremental, one)
from compactlog.server.apis.configs import handle_describe_configs, handle_incremental_alter_configs
from compactlog.server.conftest import KIO_MAX_APIS, capture, framed
from compactlog.server.protocol import Connection, encode_response
from compactlog.storage.config import BROKER_CONFIGS, TOPIC_CONFIGS
from compactlog.storage.datadir import load_broker_config
from compactlog.storage.dynamic_config import DynamicConfigs


@pytest.fixture
def state(make_state):
    return make_state()


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


# -- dynamic broker configs and group configs ---------------------------------------------------

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def test_cluster_default_log_cleanup_policy_applies_to_topics_without_an_override(state):
    """librdkafka's reproduction: IncrementalAlterConfigs(BROKER "", log.cleanup.policy) answered
    "Cannot update these configs dynamically"."""
    create(state, "plain", ("own", 1, 1, {"cleanup.policy": "delete"}))
    plain, own = fill(state, "plain", 1), fill(state, "own", 1)
    assert errors(incremental(state, (4, "", [("log.cleanup.policy", SET, "compact")]))) == [(E.none, None)]
    assert plain.config.compact and not plain.config.delete          # the open log, at once
    assert own.config.delete and not own.config.compact              # its override wins
    assert state.datadir.topic_config("plain").compact
    # kept in the data dir: a later open (the broker's next start, an offline clean) sees it
    assert DynamicConfigs.read(state.datadir.path).cluster_default == {"log.cleanup.policy": "compact"}
    assert load_broker_config(state.datadir.path).get("log.cleaner.backoff.ms") == 15000
    assert load_broker_config(state.datadir.path).topic_default(TOPIC_CONFIGS["cleanup.policy"]) == ["compact"]
    # APPEND / SUBTRACT on the list, DELETE back to the static setting
    assert errors(incremental(state, (4, "", [("log.cleanup.policy", APPEND, "delete")]))) == [(E.none, None)]
    assert plain.config.compact and plain.config.delete
    assert errors(incremental(state, (4, "", [("log.cleanup.policy", DELETE, None)]))) == [(E.none, None)]
    assert not plain.config.compact


def test_describe_shows_dynamic_sources_and_synonyms(state):
    create(state, "t")
    incremental(state, (4, "", [("log.retention.ms", SET, "3600000"), ("log.cleaner.backoff.ms", SET, "200")]),
                (4, str(NODE), [("log.retention.ms", SET, "7200000")]))
    default = one(describe(state, (4, "", None)))
    assert [(c.name, c.value, c.config_source, c.read_only) for c in default.configs] == [
        ("log.cleaner.backoff.ms", "200", 3, False), ("log.retention.ms", "3600000", 3, False)]
    node = by_name(one(describe(state, (4, str(NODE), None))))
    retention = node["log.retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("7200000", 2, False)
    assert [(s.name, s.value, s.source) for s in retention.synonyms][:2] == [
        ("log.retention.ms", "7200000", 2), ("log.retention.ms", "3600000", 3)]
    topic = by_name(one(describe(state, (2, "t", None))))["retention.ms"]
    assert (topic.value, topic.config_source) == ("7200000", 2)
    assert state.datadir.topic_config("t").get("retention.ms") == 7200000
    assert state.broker.get("log.cleaner.backoff.ms") == 200       # the cleaner's next sleep


def test_refusals_validate_only_and_legacy_replace(state):
    results = [one(incremental(state, resource)) for resource in (
        (4, "", [("log.cleaner.threads", SET, "x")]),
        (4, str(NODE), [("log.segment.bytes", SET, "1")]),
        (4, "", [("listeners", SET, "PLAINTEXT://:1")]),
        (4, "", [("log.retention.bytes", APPEND, "5")]))]
    assert [r.error_code for r in results] == [E.invalid_config, E.invalid_config, E.invalid_request,
                                               E.invalid_config]
    assert results[0].error_message == "Invalid value x for configuration log.cleaner.threads: Not a number of type INT"
    # a listener setting is a broker's own (DynamicBrokerConfig.PerBrokerConfigs)
    assert results[2].error_message == ("Cannot update these configs at default cluster level, broker id must be "
                                        "specified: Set(listeners)")
    assert results[3].error_message == "Can't APPEND to key log.retention.bytes because its type is not LIST."
    assert errors(incremental(state, (4, "", [("log.segment.bytes", SET, "4096")]), validate_only=True)) == \
        [(E.none, None)]
    assert DynamicConfigs.read(state.datadir.path).cluster_default == {}
    # legacy AlterConfigs: the listed configs become the resource's whole set
    assert errors(alter(state, (4, "", [("log.segment.bytes", "4096"), ("log.roll.ms", "2")]))) == [(E.none, None)]
    assert errors(alter(state, (4, "", [("log.roll.ms", "3")]))) == [(E.none, None)]
    assert DynamicConfigs.read(state.datadir.path).cluster_default == {"log.roll.ms": "3"}
    assert state.datadir.topic_config("x-not-yet").get("segment.ms") == 3
    # only a topic config's first broker name is dynamic (Kafka's TOPIC_CONFIG_SYNONYMS)
    assert errors(alter(state, (4, "", [("log.roll.hours", "3")]))) == [
        (E.invalid_request, "Cannot update these configs dynamically: Set(log.roll.hours)")]


def test_a_dynamic_setting_hides_its_static_synonyms(make_state):
    state = make_state(log_retention_hours="5")
    create(state, "t")
    assert state.datadir.topic_config("t").get("retention.ms") == 5 * 3600000
    assert errors(incremental(state, (4, str(NODE), [("log.retention.ms", SET, "60000")]))) == [(E.none, None)]
    assert state.datadir.topic_config("t").get("retention.ms") == 60000
    assert "log.retention.hours" not in state.broker.props          # DynamicBrokerConfig.overrideProps


def test_group_configs_as_kafka_answers_them(state):
    """librdkafka's reproduction: "Unsupported resource type 32"."""
    result = one(describe(state, (32, "g1", None)))
    configs = by_name(result)
    assert result.error_code == E.none
    assert sorted(configs) == ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
                               "share.auto.offset.reset", "share.heartbeat.interval.ms",
                               "share.record.lock.duration.ms", "share.session.timeout.ms"]
    session = configs["consumer.session.timeout.ms"]
    assert (session.value, session.config_source, session.read_only) == ("45000", 5, False)
    assert [(s.name, s.source) for s in session.synonyms] == [("group.consumer.session.timeout.ms", 5)]
    assert errors(incremental(state, (32, "g1", [("consumer.session.timeout.ms", SET, "50000"),
                                                 ("share.auto.offset.reset", SET, "earliest")]))) == [(E.none, None)]
    configs = by_name(one(describe(state, (32, "g1", None))))
    assert (configs["consumer.session.timeout.ms"].value, configs["consumer.session.timeout.ms"].config_source) == \
        ("50000", 8)
    assert configs["share.auto.offset.reset"].value == "earliest"
    assert by_name(one(describe(state, (32, "other", None))))["consumer.session.timeout.ms"].value == "45000"
    results = incremental(state, (32, "g1", [("consumer.session.timeout.ms", SET, "1000")]),
                          (32, "g2", [("no.such.config", SET, "1")]),
                          (32, "g3", [("share.auto.offset.reset", SET, "middle")]),
                          (32, "", [("consumer.session.timeout.ms", SET, "50000")]))
    assert errors(results) == [
        (E.invalid_config, "consumer.session.timeout.ms must be greater than or equal to "
                           "group.consumer.min.session.timeout.ms"),
        (E.invalid_config, "Unknown group config name: no.such.config"),
        (E.invalid_config, "Invalid value middle for configuration share.auto.offset.reset: "
                           "String must be one of: latest, earliest"),
        (E.invalid_request, "Group name must not be empty")]
    assert errors(incremental(state, (32, "g1", [("consumer.session.timeout.ms", DELETE, None)]))) == [(E.none, None)]
    assert DynamicConfigs.read(state.datadir.path).groups == {"g1": {"share.auto.offset.reset": "earliest"}}
    assert one(describe(state, (32, "", None))).error_code == E.invalid_request


def test_custom_names_are_kept_as_kafka_keeps_them(state):
    """KafkaJS's alterConfigs test sets cleanup.policy on a broker: not a broker config of Kafka's,
    so a custom setting, kept and described (read-only, of no known type, so not shown)."""
    assert errors(alter(state, (4, str(NODE), [("cleanup.policy", "delete"), ("my.custom.prop", "x")]))) == \
        [(E.none, None)]
    assert errors(incremental(state, (4, "", [("my.custom.default", SET, "y")]))) == [(E.none, None)]
    dyn = DynamicConfigs.read(state.datadir.path)
    assert dyn.broker == {"cleanup.policy": "delete", "my.custom.prop": "x"}
    assert dyn.cluster_default == {"my.custom.default": "y"}
    custom = by_name(one(describe(state, (4, str(NODE), None))))["my.custom.prop"]
    assert (custom.config_source, custom.read_only, custom.is_sensitive, custom.value) == (2, True, True, None)
    assert state.datadir.topic_config("t-later").delete          # a topic's cleanup.policy is not touched


def test_kafkas_and_compactlogs_fixed_names_are_refused(state):
    results = [one(incremental(state, resource)) for resource in (
        (4, str(NODE), [("num.partitions", SET, "3"), ("log.dirs", SET, "/x")]),
        (4, "", [("compactlog.cleaner.map", SET, "task")]),
        (4, str(NODE), [("ssl.keystore.location", SET, "/etc/ks.pem")]))]
    assert errors(results) == [
        (E.invalid_request, "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"),
        (E.invalid_request, "Cannot update these configs dynamically: Set(compactlog.cleaner.map)"),
        (E.invalid_request, "These security configs can be dynamically updated only per-listener using the "
                            "listener prefix: Set(ssl.keystore.location)")]
    assert DynamicConfigs.read(state.datadir.path) == DynamicConfigs()


def test_sasl_and_listener_settings_are_a_brokers_own(state):
    """librdkafka's 0081-admin: sasl.kerberos.min.time.before.relogin on the broker resource is a
    valid change; Kafka keeps listener settings per broker (DynamicBrokerConfig.PerBrokerConfigs)."""
    assert errors(incremental(state, (4, str(NODE), [("sasl.kerberos.min.time.before.relogin", SET, "58000")]))) == \
        [(E.none, None)]
    results = [one(incremental(state, resource)) for resource in (
        (4, "", [("sasl.kerberos.min.time.before.relogin", SET, "58000")]),
        (4, "", [("listener.name.ssl.ssl.keystore.location", SET, "/etc/ks.pem")]),
        (4, str(NODE), [("sasl.kerberos.min.time.before.relogin", SET, "soon")]))]
    assert errors(results) == [
        (E.invalid_request, "Cannot update these configs at default cluster level, broker id must be specified: "
                            "Set(sasl.kerberos.min.time.before.relogin)"),
        (E.invalid_request, "Cannot update these configs at default cluster level, broker id must be specified: "
                            "Set(listener.name.ssl.ssl.keystore.location)"),
        (E.invalid_config, "Invalid value soon for configuration sasl.kerberos.min.time.before.relogin: "
                           "Not a number of type LONG")]
    # the cluster-wide listener settings (ClusterLevelListenerConfigs), prefixed or not
    assert errors(incremental(state, (4, "", [("max.connections", SET, "100"),
                                              ("listener.name.plaintext.max.connections", SET, "50")]))) == \
        [(E.none, None)]
    assert DynamicConfigs.read(state.datadir.path).broker == {"sasl.kerberos.min.time.before.relogin": "58000"}


def test_librdkafka_0081_broker_set_append_subtract_delete(state):
    for ops in ([("background.threads", SET, "9"), ("log.cleanup.policy", APPEND, "compact")],
                [("background.threads", DELETE, None), ("log.cleanup.policy", SUBTRACT, "compact")]):
        assert errors(incremental(state, (4, str(NODE), ops))) == [(E.none, None)]
    assert DynamicConfigs.read(state.datadir.path).broker == {"log.cleanup.policy": "delete"}


def test_the_log_line_says_when_each_change_takes_effect(state, caplog):
    from compactlog.storage.dynamic_config import effect
    assert [effect(n, {"ssl"}) for n in ("log.retention.ms", "transaction.partition.verification.enable",
                                         "listener.name.ssl.ssl.keystore.location",
                                         "listener.name.other.ssl.keystore.location", "num.io.threads",
                                         "listener.name.sasl_ssl.plain.sasl.jaas.config",
                                         "sasl.kerberos.min.time.before.relogin", "log.cleaner.io.max.bytes.per.second",
                                         "my.custom.prop")] == \
        ["now", "now", "now", "next start", "next start", "next start", "never", "never", "never"]
    with caplog.at_level("INFO", logger="kafka.server.KafkaApis"):
        assert errors(incremental(state, (4, str(NODE), [
            ("log.retention.ms", SET, "1000"), ("num.io.threads", SET, "4"), ("my.custom.prop", SET, "x"),
            ("listener.name.sasl_ssl.plain.sasl.jaas.config", SET, 'x required user_a="pw-secret";')]))) == \
            [(E.none, None)]
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Dynamic broker")]
    assert line.endswith("; taking effect at the next start: listener.name.sasl_ssl.plain.sasl.jaas.config, "
                         "num.io.threads; kept but not used by compactlog: my.custom.prop")
    assert "pw-secret" not in line and "'[hidden]'" in line
