"""The group coordinator's settings under Kafka's names (``GroupCoordinatorConfig``)."""

from __future__ import annotations

from dataclasses import dataclass


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
