"""The group APIs' requests and answers as the coordinator reads and gives them: Kafka's generated
``*RequestData`` / ``*ResponseData`` reduced to the fields it uses. ``server/apis/groups.py`` turns kio
requests into these and these into kio responses; errors are kio's ``ErrorCode``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from .classic_group_state import DEAD

UNKNOWN_MEMBER = ""         # JoinGroupRequest.UNKNOWN_MEMBER_ID: a member joining for the first time
NO_LEADER = ""
NO_GENERATION = -1
CLASSIC = "classic"         # the group type ListGroups names


# -- JoinGroup / SyncGroup ------------------------------------------------------------------------

@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: list                                 # [(name, metadata bytes)]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 7
    reason: str | None = None


@dataclass
class JoinResponse:
    """What a member's JoinGroup is answered (with its parked future, ``ClassicGroupMember``)."""
    error: ErrorCode = ErrorCode.none
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = NO_LEADER
    member_id: str = UNKNOWN_MEMBER
    members: list = field(default_factory=list)     # [(member id, instance id, metadata)], leader only
    skip_assignment: bool = False


@dataclass
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: dict = field(default_factory=dict)  # member id -> bytes (leader only)


@dataclass
class SyncResponse:
    """What a member's SyncGroup is answered."""
    error: ErrorCode = ErrorCode.none
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# -- OffsetCommit / OffsetFetch -------------------------------------------------------------------

@dataclass
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


# -- DescribeGroups / ListGroups ------------------------------------------------------------------

@dataclass
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class DescribedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.none
    state: str = DEAD
    protocol_type: str = ""
    protocol_data: str = ""
    members: list = field(default_factory=list)


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC


# -- ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848) ------------------------------------

@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: list | None = None            # [(topic id, [partition])] owned; None = unchanged
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    # with an authorizer: the topics of a set the member's principal may DESCRIBE (regexes resolve
    # to those only, refreshRegularExpressions); None = all
    describable: object = field(default=None, repr=False, compare=False)


@dataclass
class HeartbeatResponse:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None                  # {topic id: [partition]}; None = not sent

    def fail(self, code: ErrorCode, message: str | None = None) -> "HeartbeatResponse":
        """An error answer: code and message, epoch 0, no member id (KafkaApis)."""
        self.error, self.message = code, message
        self.member_id, self.member_epoch, self.heartbeat_interval_ms, self.assignment = None, 0, 0, None
        return self


@dataclass
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list
    subscribed_topic_regex: str | None
    assignment: list                                # [(topic id, name, [partitions])]
    target_assignment: list
    member_type: int                                # 0 classic, 1 consumer (v1)


@dataclass
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list = field(default_factory=list)
