"""The remote tier's settings and LogConfig's remote checks (Kafka's LogConfig.validateTopicLogConfigValues)."""

from __future__ import annotations

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.errors import ConfigError
from compactlog.storage.config import BrokerConfig, LogConfig, RemoteConfigError
from compactlog.storage.config_registry import owner_of

ON = BrokerConfig({"remote.log.storage.system.enable": "true", "rsm.config.storage.s3.bucket.name": "bkt"})


def test_settings_are_the_remote_owners_with_kafkas_defaults():
    b = BrokerConfig()
    assert owner_of("remote.log.manager.task.interval.ms") == "remote"
    assert owner_of("rsm.config.storage.s3.bucket.name") == "remote"
    assert b.get("remote.log.storage.system.enable") is False
    assert b.get("remote.log.manager.task.interval.ms") == 30000
    assert b.get("remote.fetch.max.wait.ms") == 500
    assert b.get("rlmm.config.remote.log.metadata.topic.num.partitions") == 50
    assert LogConfig({}, b).get("local.retention.ms") == -2


def test_tiered_topic_needs_the_brokers_switch():
    with pytest.raises(RemoteConfigError, match="Tiered Storage functionality is disabled in the broker"):
        LogConfig({"remote.storage.enable": "true"}).validate_remote()
    LogConfig({"remote.storage.enable": "true"}, ON).validate_remote()


def test_compacted_tiered_topic_is_accepted_where_kafka_refuses_it():
    # Kafka (KAFKA-19273) refuses any policy but delete; compactlog keeps compacted topics tiered
    for policy in ("compact", "compact,delete", "delete"):
        cfg = LogConfig({"remote.storage.enable": "true", "cleanup.policy": policy}, ON)
        cfg.validate_remote()
        assert cfg.remote_log_enabled and cfg.remote_copy_enabled


@pytest.mark.parametrize("kind", ["bytes", "ms"])
def test_local_retention_within_retention(kind):
    base = {"remote.storage.enable": "true", f"retention.{kind}": "1000"}
    with pytest.raises(RemoteConfigError, match=f"Invalid value -1 for configuration local.retention.{kind}: "
                                                f"Value must not be -1 as retention.{kind} value is set as 1000."):
        LogConfig({**base, f"local.retention.{kind}": "-1"}, ON).validate_remote()
    with pytest.raises(RemoteConfigError, match=f"must not be more than retention.{kind} property value: 1000"):
        LogConfig({**base, f"local.retention.{kind}": "1001"}, ON).validate_remote()
    cfg = LogConfig({**base, f"local.retention.{kind}": "10"}, ON)
    cfg.validate_remote()
    assert getattr(cfg, f"local_retention_{kind}") == 10
    assert getattr(LogConfig(base, ON), f"local_retention_{kind}") == 1000     # -2: retention.*


def test_copy_disabled_needs_equal_retentions():
    with pytest.raises(RemoteConfigError, match="`remote.log.copy.disable` is set to true"):
        LogConfig({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "retention.ms": "100",
                   "local.retention.ms": "50"}, ON).validate_remote()
    cfg = LogConfig({"remote.storage.enable": "true", "remote.log.copy.disable": "true"}, ON)
    cfg.validate_remote()
    assert cfg.remote_log_enabled and not cfg.remote_copy_enabled


def test_turning_off_needs_delete_on_disable():
    with pytest.raises(RemoteConfigError, match="invalid to disable remote storage without deleting remote data"):
        LogConfig({"remote.storage.enable": "false"}, ON).validate_remote(was_remote_enabled=True)
    LogConfig({"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
              ON).validate_remote(was_remote_enabled=True)


def test_broker_check_refuses_bad_store_settings():
    with pytest.raises(ConfigError, match="bucket.name is required"):
        BrokerConfig({"remote.log.storage.system.enable": "true"}).validate()
    with pytest.raises(ConfigError, match="encryption.enabled=true is not supported"):
        BrokerConfig({**ON.props, "rsm.config.encryption.enabled": "true"}).validate()
    with pytest.raises(ConfigError, match="TopicBasedRemoteLogMetadataManager"):
        BrokerConfig({**ON.props, "remote.log.metadata.manager.class.name": "x.Y"}).validate()
    ON.validate()
