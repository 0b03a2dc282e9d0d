"""The settings registry (Kafka's KafkaConfig gathering its owners' ConfigDefs): every owner's
settings registered, none twice, each documented; storage never imports an owner above it; the
broker's DescribeConfigs documentation and read-only flags are the owners' declarations."""

from __future__ import annotations

import ast
import os

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.errors import ConfigError
from compactlog.storage import config_registry as R
from compactlog.storage.config import TOPIC_CONFIGS, BrokerConfig
from compactlog.storage.config_def import READ_ONLY, ConfigDef
from compactlog.storage.config_entries import broker_config_entries, topic_config_entries

STORAGE = os.path.dirname(os.path.abspath(R.__file__))


def test_every_owner_registers_in_its_own_package():
    assert {o.name: o.module for o in R.OWNERS.values()} == {
        "storage": "compactlog.storage.config", "cleaner": "compactlog.cleaner.config",
        "server": "compactlog.server.config", "authorizer": "compactlog.server.authorizer.config",
        "security": "compactlog.server.security.config", "groups": "compactlog.coordinator.group.config",
        "transactions": "compactlog.coordinator.txn.config", "spark": "compactlog.spark.config",
        "remote": "compactlog.storage.remote.config"}
    # 47: the remote tier's (storage/remote/config.py); 11: group.consumer.* and the protocols (KIP-848)
    assert sum(len(o.settings) for o in R.OWNERS.values()) == len(R.BROKER_CONFIGS) == 68 + 47 + 11
    # the owners are where Kafka puts them: the cleaner's in CleanerConfig, TLS in SslConfigs, ...
    assert R.owner_of("log.cleaner.threads") == "cleaner"
    assert R.owner_of("ssl.keystore.location") == "security"
    assert R.owner_of("sasl.enabled.mechanisms") == "security"
    assert R.owner_of("transaction.max.timeout.ms") == "transactions"
    assert R.owner_of("offsets.retention.minutes") == "groups"
    assert R.owner_of("compactlog.spark.master") == "spark"
    assert R.owner_of("log.retention.check.interval.ms") == "storage"
    assert R.owner_of("no.such.setting") is None


def test_each_setting_is_documented_once():
    for d in list(R.BROKER_CONFIGS.values()) + list(TOPIC_CONFIGS.values()):
        assert d.doc and d.importance in ("high", "medium", "low"), d.name
    assert not set(R.BROKER_CONFIGS) & set(TOPIC_CONFIGS)


def test_a_name_two_owners_define_is_refused():
    with pytest.raises(ConfigError, match="defined by both cleaner and someone"):
        R.register("someone", __name__, [ConfigDef("log.cleaner.threads", "int", 1, doc="x")])
    with pytest.raises(ConfigError, match="needs a documentation"):
        R.register("someone", __name__, [ConfigDef("some.new.setting", "int", 1)])
    assert "someone" not in R.OWNERS and "some.new.setting" not in R.BROKER_CONFIGS


def test_owner_checks_run_together():
    # the cleaner's rule (cleaner/config.py), run by BrokerConfig.validate through the registry
    with pytest.raises(ConfigError, match="1 MiB per cleaner thread"):
        BrokerConfig({"log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "2097152"}).validate()
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        BrokerConfig({"log.segment.bytes": "1"}).validate()        # storage's: a topic default


def test_storage_imports_no_upper_floor():
    """Storage's modules import record, errors and storage only (the owners register themselves)."""
    upper = ("compactlog.cleaner", "compactlog.server", "compactlog.spark", "compactlog.api",
             "compactlog.cli", "compactlog.settings")
    for name in sorted(os.listdir(STORAGE)):
        if not name.endswith(".py") or name.endswith("_test.py") or name == "conftest.py":
            continue
        tree = ast.parse(open(os.path.join(STORAGE, name), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = ("compactlog.storage." if node.level == 1 else "compactlog." if node.level == 2
                          else "") + (node.module or "")
                assert not target.startswith(upper), f"storage/{name} imports {target}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    assert not a.name.startswith(upper), f"storage/{name} imports {a.name}"


class _State:
    def __init__(self, datadir):
        self.datadir, self.broker = datadir, datadir.broker


def test_described_docs_and_read_only_are_the_owners(tmp_path):
    from compactlog.storage.datadir import DataDir
    with DataDir(str(tmp_path), broker=BrokerConfig(), writable=True) as dd:
        dd.create_topic("t", 1)
        state = _State(dd)
        entries = {e.name: e for e in broker_config_entries(state)}
        for name, d in R.BROKER_CONFIGS.items():
            assert entries[name].documentation == d.doc
            assert entries[name].read_only == (d.dynamic == READ_ONLY), name
        for e in topic_config_entries(state, "t"):
            assert e.documentation == TOPIC_CONFIGS[e.name].doc


def test_a_data_dir_opened_by_a_process_that_imported_only_storage_reads_every_owners_settings(tmp_path):
    """A Python worker Spark starts for a sink's commit imports spark/ and storage/ only: opening
    the data dir registers every owner's settings, so its broker config reads whole (before, the
    worker failed with 'unknown broker configuration auto.create.topics.enable')."""
    import subprocess
    import sys
    (tmp_path / "server.properties").write_text("auto.create.topics.enable=false\ngroup.max.size=7\n")
    code = ("import sys\n"
            "from compactlog.storage.datadir import DataDir\n"
            "assert 'compactlog.server' not in sys.modules\n"
            "dd = DataDir(sys.argv[1])\n"
            "print(dd.broker.get('auto.create.topics.enable'), dd.broker.get('group.max.size'),\n"
            "      dd.broker.get('num.io.threads'))\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # parsed by their owners' definitions (before: the raw strings, and an error for a default)
    assert done.stdout.split() == ["False", "7", "8"]
