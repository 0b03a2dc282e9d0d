"""The group coordinator's settings under Kafka's names (``GroupCoordinatorConfig``,
``OffsetConfig``): their definitions (type, default, validator, documentation, importance, update
mode), registered with every owner's (storage/config_registry.py), and ``GroupConfig``, the values
the coordinator runs with. A small module on purpose: it moves with the coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ...storage.config_def import ConfigDef, ListOf, OneOf, at_least, block
from ...storage.config_registry import register

# the group types of group.coordinator.rebalance.protocols (Kafka's Group.GroupType; share and
# streams groups are not offered)
CLASSIC_PROTOCOL, CONSUMER_PROTOCOL = "classic", "consumer"
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
ASSIGNOR_NAMES = ("uniform", "range")

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
    # KIP-848's consumer groups (GroupCoordinatorConfig's group.consumer.*)
    ConfigDef("group.coordinator.rebalance.protocols", "list", [CLASSIC_PROTOCOL, CONSUMER_PROTOCOL],
              check=ListOf((CLASSIC_PROTOCOL, CONSUMER_PROTOCOL), "group protocol", "the list must name classic"),
              importance="medium",
              doc="The group protocols the coordinator speaks: classic (JoinGroup/SyncGroup) and consumer "
                  "(KIP-848's ConsumerGroupHeartbeat). Without consumer, a group.protocol=consumer client "
                  "is answered UNSUPPORTED_VERSION."),
    *block("group.consumer.", (
        ("session.timeout.ms", "int", 45000,
         "Time without a heartbeat after which a consumer group member (KIP-848) is removed, "
         "unless the group config consumer.session.timeout.ms says otherwise."),
        ("min.session.timeout.ms", "int", 45000, "Shortest consumer.session.timeout.ms a consumer group may be given."),
        ("max.session.timeout.ms", "int", 60000, "Longest consumer.session.timeout.ms a consumer group may be given."),
        ("heartbeat.interval.ms", "int", 5000,
         "How often a consumer group member (KIP-848) is told to heartbeat, unless the group "
         "config consumer.heartbeat.interval.ms says otherwise."),
        ("min.heartbeat.interval.ms", "int", 5000,
         "Shortest consumer.heartbeat.interval.ms a consumer group may be given."),
        ("max.heartbeat.interval.ms", "int", 15000,
         "Longest consumer.heartbeat.interval.ms a consumer group may be given."),
        ("max.size", "int", 2147483647,
         "Most members a consumer group (KIP-848) may have: a member joining beyond it is "
         "answered GROUP_MAX_SIZE_REACHED."),
        ("assignors", "list", list(ASSIGNOR_NAMES),
         "The server-side assignors a consumer group may name (group.remote.assignor); the first "
         "is used when no member names one.",
         {"check": ListOf(ASSIGNOR_NAMES, "assignor", "the list must name at least one assignor")}),
        ("migration.policy", "string", "bidirectional",
         "Whether a classic group with members becomes a consumer group when a member of the "
         "consumer protocol joins (upgrade), and a consumer group left with classic members only "
         "becomes classic again (downgrade); empty groups change protocol whatever the policy.",
         {"check": OneOf(*MIGRATION_POLICIES)}),
        ("regex.refresh.interval.ms", "int", 600000,
         "How often the topics matching a consumer group's subscribed regular expressions are "
         "resolved again (a topic creation resolves them at the next heartbeat anyway).",
         {"check": at_least(10000), "importance": "low"}),
    ), check=at_least(1), importance="medium"),
)


def check_group_settings(broker) -> None:
    """GroupCoordinatorConfig's cross-checks of the consumer-group settings."""
    protocols = broker.get("group.coordinator.rebalance.protocols")
    if CLASSIC_PROTOCOL not in protocols:
        raise ConfigError("invalid value for configuration group.coordinator.rebalance.protocols: "
                          "the classic protocol must be enabled (Kafka's rule)")
    for kind in ("session.timeout", "heartbeat.interval"):
        lo, v, hi = (broker.get(f"group.consumer.{m}{kind}.ms") for m in ("min.", "", "max."))
        if not lo <= v <= hi:
            raise ConfigError(f"invalid value {v} for configuration group.consumer.{kind}.ms: it must be "
                              f"between group.consumer.min.{kind}.ms={lo} and group.consumer.max.{kind}.ms={hi}")
    hb, session = broker.get("group.consumer.heartbeat.interval.ms"), broker.get("group.consumer.session.timeout.ms")
    if hb >= session:
        raise ConfigError(f"invalid value {hb} for configuration group.consumer.heartbeat.interval.ms: it must "
                          f"be less than group.consumer.session.timeout.ms={session}")


register("groups", __name__, GROUP_SETTINGS, check_group_settings)


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
    # KIP-848 (group.consumer.*)
    protocols: tuple = (CLASSIC_PROTOCOL, CONSUMER_PROTOCOL)   # group.coordinator.rebalance.protocols
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple = ASSIGNOR_NAMES
    consumer_migration_policy: str = "bidirectional"
    consumer_regex_refresh_interval_ms: int = 600000

    @property
    def consumer_protocol_enabled(self) -> bool:
        return CONSUMER_PROTOCOL in self.protocols

    @classmethod
    def from_broker(cls, broker, num_partitions: int | None = None) -> "GroupConfig":
        return cls(min_session_timeout_ms=broker.get("group.min.session.timeout.ms"),
                   max_session_timeout_ms=broker.get("group.max.session.timeout.ms"),
                   initial_rebalance_delay_ms=broker.get("group.initial.rebalance.delay.ms"),
                   max_size=broker.get("group.max.size"),
                   num_partitions=num_partitions or broker.get("offsets.topic.num.partitions"),
                   retention_ms=broker.get("offsets.retention.minutes") * 60000,
                   retention_check_interval_ms=broker.get("offsets.retention.check.interval.ms"),
                   offset_metadata_max_bytes=broker.get("offset.metadata.max.bytes"),
                   protocols=tuple(broker.get("group.coordinator.rebalance.protocols")),
                   consumer_session_timeout_ms=broker.get("group.consumer.session.timeout.ms"),
                   consumer_heartbeat_interval_ms=broker.get("group.consumer.heartbeat.interval.ms"),
                   consumer_max_size=broker.get("group.consumer.max.size"),
                   consumer_assignors=tuple(broker.get("group.consumer.assignors")),
                   consumer_migration_policy=broker.get("group.consumer.migration.policy"),
                   consumer_regex_refresh_interval_ms=broker.get("group.consumer.regex.refresh.interval.ms"))
