"""The transaction coordinator's broker settings (Kafka's TransactionLogConfig and
TransactionStateManagerConfig, and compactlog's protocol level), each with its type, default,
validator, documentation, importance and update mode, registered with every owner's
(storage/config_registry.py). A small module on purpose: it moves with the coordinator.
"""

from __future__ import annotations

from ...storage.config_def import CLUSTER_WIDE, ConfigDef, at_least, between
from ...storage.config_registry import register

TXN_SETTINGS = (
    # Kafka's defaults but two: __transaction_state's replication factor (Kafka 3) and min ISR (Kafka 2)
    # are 1, which is all one node can meet (else every transactional client waits for
    # COORDINATOR_NOT_AVAILABLE until it times out)
    ConfigDef("transaction.state.log.num.partitions", "int", 50, check=at_least(1), importance="high",
              doc="Partitions of __transaction_state (never change it once the topic exists)."),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, check=at_least(1), importance="high",
              doc="Segment size of __transaction_state (small segments compact sooner)."),
    ConfigDef("transaction.state.log.replication.factor", "short", 1, check=at_least(1), importance="high",
              doc="Replication factor of __transaction_state; only 1 is possible on one node."),
    ConfigDef("transaction.state.log.min.isr", "int", 1, check=at_least(1), importance="high",
              doc="min.insync.replicas of __transaction_state; only 1 can be met on one node."),
    ConfigDef("transaction.state.log.load.buffer.size", "int", 5242880, check=at_least(1), importance="high",
              doc="Read size when __transaction_state is loaded at start."),
    ConfigDef("transaction.partition.verification.enable", "bool", True, dynamic=CLUSTER_WIDE, importance="low",
              doc="Whether a transactional write is refused for a partition its transaction has not added."),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, check=at_least(1), importance="high",
              doc="Longest transaction timeout a producer may ask for."),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, check=at_least(1), importance="high",
              doc="Time without a transaction after which a transactional id is forgotten."),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, check=at_least(1), importance="low",
              doc="Interval between checks for transactions past their timeout, which are aborted."),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, check=at_least(1), importance="low",
              doc="Interval between checks for expired transactional ids."),
    # KIP-939 (two-phase commit) is not offered: InitProducerId v6 is not advertised
    ConfigDef("transaction.two.phase.commit.enable", "bool", False, importance="low",
              doc="Two-phase commit (KIP-939); not offered."),
    # the coordinator's transaction protocol level (Kafka's finalized feature transaction.version,
    # set with kafka-storage/kafka-features, not a broker setting): 2 as on a new Kafka 4.x
    # cluster (v1 __transaction_state values, KIP-890 epoch rules for the coordinator's own aborts);
    # 0 and 1 for tests (v0 values at 0)
    ConfigDef("compactlog.transaction.version", "int", 2, check=between(0, 2), importance="low",
              doc="Transaction protocol level of the coordinator (Kafka's transaction.version feature): 2, or 0 "
                  "and 1 for tests."),
)

register("transactions", __name__, TXN_SETTINGS)
