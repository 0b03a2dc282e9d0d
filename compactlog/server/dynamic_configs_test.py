"""Dynamic broker configs and group configs through the config APIs (librdkafka's admin tests use
both): Kafka's DynamicBrokerConfig (cluster-wide defaults and this node's, applied to topics
without an override, kept in the data dir) and Kafka 4.0's GROUP resources."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E

from compactlog.server.admin_test import (NODE, alter, by_name, create, describe, errors, fill, incremental,  # noqa: F401
                                          make_state, one, state)
from compactlog.storage.config import TOPIC_CONFIGS
from compactlog.storage.datadir import DataDir, load_broker_config
from compactlog.storage.dynamic_config import DYNAMIC_CONFIGS_FILE, DynamicConfigs

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


def test_invalid_values_in_the_file_are_dropped_as_kafka_ignores_them(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    DynamicConfigs({"log.cleaner.threads": "many", "log.cleanup.policy": "compact"}, {}).write(str(d))
    broker = load_broker_config(str(d))
    assert broker.dropped_dynamic == ["log.cleaner.threads"]
    assert broker.props["log.cleanup.policy"] == "compact" and "log.cleaner.threads" not in broker.props
    with DataDir(str(d), writable=True, command="test") as dd:
        dd.create_topic("t", 1)
        assert dd.topic_config("t").compact
    assert (d / DYNAMIC_CONFIGS_FILE).exists()


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


# -- which names a BROKER resource takes (DynamicBrokerConfig.validateConfigs) ------------------------

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


def test_names_not_dynamic_there_are_dropped_at_start(tmp_path):
    """DynamicBrokerConfig.fromPersistentProps: a file holding names that may not be set (there)
    starts without them."""
    d = tmp_path / "d"
    d.mkdir()
    DynamicConfigs({"listeners": "PLAINTEXT://:1", "my.custom": "1"},
                   {"num.partitions": "4", "ssl.key.password": "k", "listener.name.ssl.ssl.key.password": "k"}
                   ).write(str(d))
    assert oct((d / DYNAMIC_CONFIGS_FILE).stat().st_mode & 0o777) == "0o600"      # it may hold passwords
    broker = load_broker_config(str(d))
    assert sorted(broker.dropped_dynamic) == ["listeners", "num.partitions", "ssl.key.password"]
    assert broker.props["my.custom"] == "1" and broker.props["listener.name.ssl.ssl.key.password"] == "k"
    assert "num.partitions" not in broker.props


KIP_280 = {"log.cleaner.compaction.strategy", "log.cleaner.compaction.strategy.header"}


def test_kafkas_dynamic_sets():
    from compactlog.storage import dynamic_config as dc
    from compactlog.storage.kafka_names import KAFKA_CONFIG_NAMES
    # DynamicLogConfig.ReconfigurableConfigs: ServerTopicConfigSynonyms' first names (but
    # log.message.format.version, which compactlog has no topic config for)
    assert dc.DYNAMIC_LOG_CONFIGS == {
        "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
        "message.max.bytes", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
        "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms", "log.message.downconversion.enable", "log.local.retention.ms",
        "log.local.retention.bytes"} | KIP_280
    # every dynamic name is one of Kafka's (but the quotas, which only DynamicConfig.Broker defines,
    # and KIP-280's broker defaults, which Kafka never built: dynamic as every topic default is)
    assert dc.DYNAMIC_BROKER_CONFIGS - dc.BROKER_QUOTA_CONFIGS - KIP_280 <= KAFKA_CONFIG_NAMES
    assert not dc.KAFKA_NON_DYNAMIC_CONFIGS & dc.DYNAMIC_BROKER_CONFIGS


def test_owners_update_modes_are_kafkas():
    """Each compactlog setting's update mode, declared by its owner, is what Kafka's
    DynamicBrokerConfig says of the same name: dynamic exactly when Kafka lists it, per-broker
    exactly for the listener settings a cluster-wide default may not hold."""
    from compactlog.storage import dynamic_config as dc
    from compactlog.storage.config_def import PER_BROKER, READ_ONLY
    from compactlog.storage.config_registry import BROKER_CONFIGS
    for name, d in BROKER_CONFIGS.items():
        assert (d.dynamic != READ_ONLY) == (name in dc.DYNAMIC_BROKER_CONFIGS), name
        assert (d.dynamic == PER_BROKER) == (name in dc.PER_BROKER_CONFIGS), name
        assert dc.is_non_dynamic(name) == (d.dynamic == READ_ONLY)
    assert dc.PER_BROKER_CONFIGS >= dc.SSL_STORE_CONFIGS and "max.connections" not in dc.PER_BROKER_CONFIGS


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
