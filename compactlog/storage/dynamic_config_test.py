"""The data dir's dynamic configs (Kafka's DynamicBrokerConfig, ``storage/dynamic_config.py``) read
back without a broker: values Kafka would not take and names not dynamic there are dropped at
start, and the dynamic sets and each owner's update mode are Kafka's. Setting them through the
config APIs is ``server/apis/configs_test.py``."""

from __future__ import annotations

from compactlog.storage.datadir import DataDir, load_broker_config
from compactlog.storage.dynamic_config import DYNAMIC_CONFIGS_FILE, DynamicConfigs


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
