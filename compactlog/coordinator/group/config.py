"""The group coordinator's settings under Kafka's names (``GroupCoordinatorConfig``,
``OffsetConfig``): their definitions (type, default, validator, documentation, importance, update
mode), registered with every owner's (storage/config_registry.py), and ``GroupConfig``, the values
the coordinator runs with. A small module on purpose: it moves with the coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...storage.config_def import ConfigDef, at_least
from ...storage.config_registry import register

GROUP_SETTINGS = (
    ConfigDef("group.min.session.timeout.ms", "int", 6000, importance="medium",
              doc="Shortest session timeout a group member may ask for."),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000, importance="medium",
              doc="Longest session timeout a group member may ask for."),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, check=at_least(0), importance="medium",
              doc="How long the first rebalance of an empty group waits for more members to join."),
    ConfigDef("group.max.size", "int", 2147483647, check=at_least(1), importance="medium",
              doc="Most members a consumer group may have."),
    ConfigDef("offsets.topic.num.partitions", "int", 50, check=at_least(1), importance="high",
              doc="Partitions of __consumer_offsets, created on first use."),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, check=at_least(1), importance="high",
              doc="Segment size of __consumer_offsets (small segments compact sooner)."),
    ConfigDef("offsets.retention.minutes", "int", 10080, check=at_least(1), importance="high",
              doc="How long committed offsets are kept after their group empties or their last commit."),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, check=at_least(1), importance="high",
              doc="Interval between checks for expired committed offsets."),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, importance="high",
              doc="Longest metadata string a committed offset may carry."),
)

register("groups", __name__, GROUP_SETTINGS)


@dataclass(frozen=True)
class GroupConfig:
    """The group settings, under Kafka's names (``GroupCoordinatorConfig``)."""
    min_session_timeout_ms: int = 6000              # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000           # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000          # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1                       # group.max.size
    num_partitions: int = 50                        # offsets.topic.num.partitions
    retention_ms: int = 10080 * 60000               # offsets.retention.minutes
    retention_check_interval_ms: int = 600000       # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096           # offset.metadata.max.bytes
    new_member_join_timeout_ms: int = 5 * 60 * 1000  # Kafka's classicGroupNewMemberJoinTimeoutMs

    @classmethod
    def from_broker(cls, broker, num_partitions: int | None = None) -> "GroupConfig":
        return cls(min_session_timeout_ms=broker.get("group.min.session.timeout.ms"),
                   max_session_timeout_ms=broker.get("group.max.session.timeout.ms"),
                   initial_rebalance_delay_ms=broker.get("group.initial.rebalance.delay.ms"),
                   max_size=broker.get("group.max.size"),
                   num_partitions=num_partitions or broker.get("offsets.topic.num.partitions"),
                   retention_ms=broker.get("offsets.retention.minutes") * 60000,
                   retention_check_interval_ms=broker.get("offsets.retention.check.interval.ms"),
                   offset_metadata_max_bytes=broker.get("offset.metadata.max.bytes"))
