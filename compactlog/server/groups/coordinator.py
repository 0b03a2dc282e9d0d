"""Kafka's classic group coordinator, sans-IO: groups, members, rebalances and committed offsets.

Follows the classic-protocol half of Kafka's ``GroupMetadataManager`` (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, the session, join and sync
timers, static membership), ``ClassicGroup`` / ``ClassicGroupMember`` / ``ClassicGroupState``,
``OffsetMetadataManager`` (OffsetCommit, OffsetFetch, OffsetDelete, expiry, replay of offset
records with their transactional markers), ``OffsetExpirationConditionImpl`` and the checks of
``GroupCoordinatorService`` (group ids, session timeout bounds, partitions still loading).

Nothing here does I/O or reads a clock of its own. Like Kafka's coordinator shard, every
operation returns an ``Outcome``: the ``__consumer_offsets`` records to append and a callback
``on_written(error)`` the caller runs once the append succeeded (``error`` None) or failed. The
caller (``service.GroupCoordinatorService``) appends the records, then, when ``Outcome.replay``
is set, feeds them back through ``replay`` (offset commits and tombstones take effect only once
written, exactly as at load time), then runs the callback. The group state machine itself
changes in place, as Kafka's classic groups do (their records are written with replay off).

JoinGroup and SyncGroup answer through ``concurrent.futures.Future`` objects completed when the
rebalance allows it (by another member's request or by a timer), so the broker can park the
request. Timers are plain data (``Timer``): the caller runs ``run_timers(now)`` and gets the
outcomes of the expired ones (session expiry, join and sync timeouts, the initial rebalance
delay). The clock is injected.

Responses are small dataclasses of this module; ``handlers.py`` turns kio requests into calls and
these results into kio responses.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ...record import consumer_offsets as R

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

# Kafka's Errors codes used by the group APIs
NONE = 0
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88
UNKNOWN_SERVER_ERROR = -1

UNKNOWN_MEMBER = ""
NO_LEADER = ""
NO_GENERATION = -1

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# ClassicGroupState: the states a group may come from
VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}

CLASSIC = "classic"


class GroupError(Exception):
    """A request refused with a Kafka error code."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message or str(code))
        self.code = code


# -- configuration ---------------------------------------------------------------------------------

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


# -- results -----------------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What an operation asks the caller to do (Kafka's ``CoordinatorResult``)."""
    records: list = field(default_factory=list)
    on_written: Callable[[Exception | None], None] | None = None
    replay: bool = True


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
    error: int = NONE
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
    error: int = NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


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
    error: int = NONE


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
    error: int = NONE
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


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1          # -1: none (v1 records of old clients carry one)
    record_offset: int = -1             # where the record is in __consumer_offsets


# -- timers --------------------------------------------------------------------------------------------

class Timer:
    """Keyed one-shot timers; scheduling a key again replaces it (Kafka's ``CoordinatorTimer``)."""

    def __init__(self):
        self._entries: dict = {}
        self._seq = 0

    def schedule(self, key, deadline_ms: int, fn: Callable[[], Outcome]) -> None:
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, fn)

    def cancel(self, key) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key) -> bool:
        return key in self._entries

    def deadline(self, key) -> int | None:
        e = self._entries.get(key)
        return None if e is None else e[0]

    def next_deadline(self) -> int | None:
        return min((e[0] for e in self._entries.values()), default=None)

    def pop_due(self, now_ms: int):
        """The expired timers, earliest first, removed; one at a time so that a timer that
        cancels or replaces another one is honoured."""
        while True:
            due = [(d, s, k) for k, (d, s, _) in self._entries.items() if d <= now_ms]
            if not due:
                return
            _, _, key = min(due)
            yield key, self._entries.pop(key)[2]

    def __len__(self) -> int:
        return len(self._entries)


def heartbeat_key(group_id: str, member_id: str):
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str):
    return ("join", group_id)


def sync_key(group_id: str):
    return ("sync", group_id)


# -- members and groups --------------------------------------------------------------------------------

class Member:
    """ClassicGroupMember."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_future",
                 "sync_future", "is_new")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: list,
                 assignment: bytes = b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = [(n, bytes(m)) for n, m in protocols]
        self.assignment = assignment
        self.join_future: Future | None = None
        self.sync_future: Future | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def has_satisfied_heartbeat(self) -> bool:
        # a new member may be expired even while it awaits its join; members awaiting a
        # rebalance answer otherwise count as alive
        return False if self.is_new else (self.awaiting_join or self.awaiting_sync)

    def matches(self, protocols) -> bool:
        return self.protocols == [(n, bytes(m)) for n, m in protocols]

    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for n, m in self.protocols:
            if n == protocol:
                return m
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set) -> str:
        for n, _ in self.protocols:
            if n in candidates:
                return n
        raise ValueError(f"member {self.member_id} supports none of the candidate protocols")


class ClassicGroup:
    """ClassicGroup: members, the protocol, the generation, the state and its time."""

    def __init__(self, group_id: str, clock: Callable[[], int], state: str = EMPTY, generation: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None, current_state_timestamp: int | None = None):
        self.group_id = group_id
        self.clock = clock
        self.state = state
        self.previous_state = DEAD
        self.generation_id = generation
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.current_state_timestamp = current_state_timestamp
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter = Counter()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # -- state
    def transition_to(self, state: str) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id} should be in one of "
                               f"{sorted(VALID_PREVIOUS[state])} to go to {state}, not {self.state}")
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = self.clock()

    def in_state(self, state: str) -> bool:
        return self.state == state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[PREPARING_REBALANCE]

    def is_empty(self) -> bool:
        return self.state == EMPTY

    # -- members
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: Member, future: Future | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in group "
                                   f"{self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise RuntimeError("the group's and the member's protocol types differ")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_future = future
        if member.awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.supported_protocols.subtract(removed.protocol_names())
            if removed.awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                log.info(f"Group leader {self.leader_id} of group {self.group_id} failed to join "
                         f"before the rebalance timeout; member {m.member_id} is the new leader")
                self.leader_id = m.member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        old = self.members.pop(old_id, None)
        if old is None:
            raise RuntimeError(f"cannot replace non-existing member id {old_id}")
        # fence the old member's parked requests at once
        complete_join(self, old, JoinResponse(FENCED_INSTANCE_ID, member_id=old_id))
        complete_sync(old, SyncResponse(FENCED_INSTANCE_ID))
        new = Member(new_id, old.group_instance_id, old.client_id, old.client_host,
                     old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                     old.protocols, old.assignment)
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def update_member(self, member: Member, protocols, rebalance_timeout_ms: int, session_timeout_ms: int,
                      future: Future | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = [(n, bytes(m)) for n, m in protocols]
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif future is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_future = future

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise RuntimeError(f"pending member {member_id} is already a member of {self.group_id}")
        self.pending_join_members.add(member_id)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def validate_member(self, member_id: str, instance_id: str | None, operation: str) -> None:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise GroupError(UNKNOWN_MEMBER_ID, f"unknown static member {instance_id}")
            if existing != member_id:
                log.info(f"Request memberId={member_id} for static member with groupInstanceId="
                         f"{instance_id} is fenced by existing memberId={existing} during {operation}")
                raise GroupError(FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise GroupError(UNKNOWN_MEMBER_ID, f"unknown member {member_id!r} in group {self.group_id}")

    # -- protocols
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self.supported_protocols.items() if c == n}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = list(names)
        if self.in_state(EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and \
            any(self.supported_protocols.get(p, 0) == n for p in names)

    def select_protocol(self) -> str:
        if not self.members:
            raise RuntimeError(f"cannot select a protocol for the empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to (``consumer`` groups only), None when unknown."""
        if self.protocol_type != R.CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(R.decode_subscription(m.metadata(self.protocol_name), topics_only=True).topics)
        except (R.RecordFormatError, ValueError) as e:
            log.warning(f"Failed to parse the consumer protocol of group {self.group_id}; the "
                        f"coordinator does not know its subscribed topics: {e}")
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == R.CONSUMER_PROTOCOL_TYPE

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY)
        self.pending_sync_members.clear()

    def current_members(self) -> list:
        """(member id, instance id, metadata) of every member: the leader's JoinGroup answer."""
        if self.state in (DEAD, PREPARING_REBALANCE):
            raise RuntimeError(f"no member metadata in state {self.state}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # -- offsets
    def offset_base_timestamp(self) -> Callable[[OffsetAndMetadata], int] | None:
        """OffsetExpirationCondition: from when an offset's retention runs, None = never."""
        if self.protocol_type:
            if self.in_state(EMPTY):
                ts = self.current_state_timestamp
                return (lambda o: ts) if ts is not None else (lambda o: o.commit_timestamp)
            if self.uses_consumer_protocol() and self.subscribed_topics is not None and self.in_state(STABLE):
                return lambda o: o.commit_timestamp
            return None
        # a simple group (manual commits only): retention from each commit
        return lambda o: o.commit_timestamp

    def metadata_value(self, assignment: dict[str, bytes] | None) -> R.GroupMetadataValue:
        """GroupCoordinatorRecordHelpers.newGroupMetadataRecord (``assignment`` None: no members)."""
        members = []
        if assignment is not None:
            for m in self.members.values():
                members.append(R.MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                                m.rebalance_timeout_ms, m.session_timeout_ms,
                                                m.metadata(self.protocol_name), assignment[m.member_id]))
        return R.GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name,
                                    self.leader_id, self.current_state_timestamp or -1, members)


def complete_join(group: ClassicGroup, member: Member, response: JoinResponse) -> bool:
    if member.join_future is None:
        return False
    fut, member.join_future = member.join_future, None
    group.num_awaiting_join -= 1
    if not fut.done():
        fut.set_result(response)
    return True


def complete_sync(member: Member, response: SyncResponse) -> bool:
    if member.sync_future is None:
        return False
    fut, member.sync_future = member.sync_future, None
    if not fut.done():
        fut.set_result(response)
    return True


def _done(value) -> Future:
    f = Future()
    f.set_result(value)
    return f


# -- the coordinator ---------------------------------------------------------------------------------

class GroupCoordinator:
    """Every group of the broker and its committed offsets; see the module docstring."""

    def __init__(self, config: GroupConfig | None = None, clock: Callable[[], int] | None = None):
        self.config = config or GroupConfig()
        self.clock = clock or (lambda: 0)
        self.timer = Timer()
        self.groups: dict[str, ClassicGroup] = {}
        # group -> topic -> partition -> OffsetAndMetadata
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # producer id -> group -> topic -> partition -> OffsetAndMetadata (open transactions, from loading)
        self.pending_txn_offsets: dict[int, dict] = {}
        self.open_txns_by_group: dict[str, set[int]] = {}
        self.loading: set[int] = set()          # __consumer_offsets partitions being loaded
        self._pending: list[Outcome] = []       # outcomes produced inside write callbacks

    # -- checks shared by every API (GroupCoordinatorService)
    def partition_for(self, group_id: str) -> int:
        return R.partition_for(group_id, self.config.num_partitions)

    def is_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_for(group_id) in self.loading

    def check_loaded(self, group_id: str) -> None:
        if self.is_loading(group_id):
            raise GroupError(COORDINATOR_LOAD_IN_PROGRESS,
                             f"__consumer_offsets-{self.partition_for(group_id)} is still loading")

    def group(self, group_id: str) -> ClassicGroup:
        g = self.groups.get(group_id)
        if g is None:
            raise GroupError(GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        return g

    def _get_or_create(self, group_id: str, create: bool) -> ClassicGroup:
        g = self.groups.get(group_id)
        if g is None:
            if not create:
                raise GroupError(GROUP_ID_NOT_FOUND, f"group {group_id} not found")
            g = self.groups[group_id] = ClassicGroup(group_id, self.clock)
        return g

    def _schedule(self, key, delay_ms: int, fn) -> None:
        self.timer.schedule(key, self.clock() + delay_ms, fn)

    # == JoinGroup ====================================================================================
    def join_group(self, req: JoinRequest) -> tuple[Outcome, Future]:
        """The answer is a future: completed now for a refusal, or when the join phase ends."""
        if not req.group_id:
            return Outcome(), _done(JoinResponse(INVALID_GROUP_ID, member_id=req.member_id))
        try:
            self.check_loaded(req.group_id)
        except GroupError as e:
            return Outcome(), _done(JoinResponse(e.code, member_id=req.member_id))
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return Outcome(), _done(JoinResponse(INVALID_SESSION_TIMEOUT, member_id=req.member_id))

        future: Future = Future()
        unknown = req.member_id == UNKNOWN_MEMBER
        is_new_group = req.group_id not in self.groups
        try:
            group = self._get_or_create(req.group_id, unknown)
        except GroupError:
            future.set_result(JoinResponse(UNKNOWN_MEMBER_ID, member_id=req.member_id))
            return Outcome(), future

        outcome = None
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            future.set_result(JoinResponse(GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER))
        elif unknown:
            outcome = self._join_new_member(req, group, future)
        else:
            outcome = self._join_existing_member(req, group, future)

        if is_new_group and not (outcome and outcome.records):
            # a new group is written at once (an empty GroupMetadata), so it survives a restart
            group_ref = group

            def written(error):
                if error is not None:
                    log.warning(f"Failed to write empty metadata for group {req.group_id}: {error}")
                    if self.groups.get(req.group_id) is group_ref and group_ref.is_empty() \
                            and not group_ref.members:
                        del self.groups[req.group_id]
                    if not future.done():
                        future.set_result(JoinResponse(append_error(error), member_id=req.member_id))
                if outcome is not None and outcome.on_written is not None:
                    outcome.on_written(error)
            rec = R.group_metadata_record(req.group_id, R.GroupMetadataValue(
                "", 0, None, None, group.current_state_timestamp or -1, []))
            return Outcome([rec], written, replay=False), future
        return outcome or Outcome(), future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        if group.state == PREPARING_REBALANCE:
            return (member_id in group.members and group.members[member_id].awaiting_join) or \
                group.num_awaiting_join < self.config.max_size
        return member_id in group.members or len(group.members) < self.config.max_size

    def _join_new_member(self, req: JoinRequest, group: ClassicGroup, future: Future) -> Outcome:
        names = [n for n, _ in req.protocols]
        if group.in_state(DEAD):
            future.set_result(JoinResponse(COORDINATOR_NOT_AVAILABLE, member_id=UNKNOWN_MEMBER))
        elif not group.supports_protocols(req.protocol_type, names):
            future.set_result(JoinResponse(INCONSISTENT_GROUP_PROTOCOL, member_id=UNKNOWN_MEMBER))
        else:
            new_id = group.generate_member_id(req.client_id, req.group_instance_id)
            if req.group_instance_id is not None:
                existing = group.static_member_id(req.group_instance_id)
                if existing is not None:
                    log.info(f"Static member with groupInstanceId={req.group_instance_id} and unknown "
                             f"member id joins group {group.group_id} in {group.state} state. Replacing "
                             f"previously mapped member {existing} with this groupInstanceId.")
                    return self._update_static_member(req, group, existing, new_id, future)
                return self._add_member_and_rebalance(req, group, new_id, future)
            if req.api_version >= 4:
                # KIP-394: the member id is handed out first and the member rejoins with it
                log.info(f"Dynamic member with unknown member id joins group {group.group_id} in "
                         f"{group.state} state. Created a new member id {new_id} and requesting "
                         f"the member to rejoin with this id.")
                group.add_pending_member(new_id)
                gid = group.group_id
                self._schedule(heartbeat_key(gid, new_id), req.session_timeout_ms,
                               lambda: self._expire_heartbeat(gid, new_id))
                future.set_result(JoinResponse(MEMBER_ID_REQUIRED, member_id=new_id))
            else:
                return self._add_member_and_rebalance(req, group, new_id, future)
        return Outcome()

    def _join_existing_member(self, req: JoinRequest, group: ClassicGroup, future: Future) -> Outcome:
        member_id = req.member_id
        names = [n for n, _ in req.protocols]
        if group.in_state(DEAD):
            future.set_result(JoinResponse(COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return Outcome()
        if not group.supports_protocols(req.protocol_type, names):
            future.set_result(JoinResponse(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return Outcome()
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                raise RuntimeError(f"JoinGroup with groupInstanceId={req.group_instance_id} for the "
                                   f"pending member {member_id}")
            log.info(f"Pending dynamic member with id {member_id} joins group {group.group_id} in "
                     f"{group.state} state. Adding to the group now.")
            return self._add_member_and_rebalance(req, group, member_id, future)
        try:
            group.validate_member(member_id, req.group_instance_id, "join-group")
        except GroupError as e:
            future.set_result(JoinResponse(e.code, member_id=member_id))
            return Outcome()
        member = group.member(member_id)
        if group.in_state(PREPARING_REBALANCE):
            return self._update_member_and_rebalance(req, group, member, future,
                                                     f"Member {member_id} is joining group during "
                                                     f"{group.state}")
        if group.in_state(COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # a member that missed its JoinGroup answer gets the current generation again
                future.set_result(self._current_generation(group, member_id,
                                                           with_members=group.is_leader(member_id)))
                return Outcome()
            return self._update_member_and_rebalance(req, group, member, future,
                                                     f"Updating metadata for member {member_id} during "
                                                     f"{group.state}")
        if group.in_state(STABLE):
            if group.is_leader(member_id):
                # the leader rejoining forces a rebalance (topic metadata changes reach the assignor so)
                return self._update_member_and_rebalance(req, group, member, future,
                                                         f"Leader {member_id} re-joining group during "
                                                         f"{group.state}")
            if not member.matches(req.protocols):
                return self._update_member_and_rebalance(req, group, member, future,
                                                         f"Updating metadata for member {member_id} "
                                                         f"during {group.state}")
            future.set_result(self._current_generation(group, member_id, with_members=False))
            return Outcome()
        log.warning(f"Attempt to add rejoining member {member_id} of group {group.group_id} in "
                    f"unexpected group state {group.state}")
        future.set_result(JoinResponse(UNKNOWN_MEMBER_ID, member_id=member_id))
        return Outcome()

    @staticmethod
    def _current_generation(group: ClassicGroup, member_id: str, with_members: bool) -> JoinResponse:
        return JoinResponse(NONE, group.generation_id, group.protocol_type, group.protocol_name,
                            group.leader_id or NO_LEADER, member_id,
                            group.current_members() if with_members else [])

    def _add_member_and_rebalance(self, req: JoinRequest, group: ClassicGroup, member_id: str,
                                  future: Future) -> Outcome:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols)
        member.is_new = True
        if group.in_state(PREPARING_REBALANCE) and group.previous_state == EMPTY:
            group.new_member_added = True         # the initial rebalance may wait longer
        group.add(member, future)
        # a new member parked in JoinGroup cannot heartbeat: its join is bounded instead
        self._reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        return self._maybe_prepare_rebalance_or_complete_join(
            group, f"Adding new member {member_id} with group instance id {req.group_instance_id}")

    def _update_member_and_rebalance(self, req: JoinRequest, group: ClassicGroup, member: Member,
                                     future: Future, reason: str) -> Outcome:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future)
        return self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _update_static_member(self, req: JoinRequest, group: ClassicGroup, old_id: str, new_id: str,
                              future: Future) -> Outcome:
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self.timer.cancel(heartbeat_key(group.group_id, old_id))
        self._reschedule_heartbeat(group, member)
        old_rebalance, old_session, old_protocols = (member.rebalance_timeout_ms, member.session_timeout_ms,
                                                     list(member.protocols))
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future)
        if group.in_state(STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # the same protocol: the new member id is persisted, no rebalance (KIP-345)
                log.info("Static member which joins during Stable stage and doesn't affect the selected "
                         "protocol will not trigger a rebalance.")
                assignment = group.group_assignment()

                def written(error):
                    if error is not None:
                        log.warning(f"Failed to persist metadata for group {group.group_id} static member "
                                    f"{new_id}: {error}. Reverting to old member id {old_id}.")
                        group.update_member(member, old_protocols, old_rebalance, old_session, None)
                        old = group.replace_static_member(req.group_instance_id, new_id, old_id)
                        self.timer.cancel(heartbeat_key(group.group_id, new_id))
                        self._reschedule_heartbeat(group, old)
                        if not future.done():
                            future.set_result(JoinResponse(append_error(error), group.generation_id,
                                                           group.protocol_type, group.protocol_name,
                                                           current_leader or NO_LEADER, UNKNOWN_MEMBER))
                        return
                    complete_join(group, member, JoinResponse(NONE, group.generation_id, group.protocol_type,
                                                              group.protocol_name, current_leader or NO_LEADER,
                                                              new_id))
                rec = R.group_metadata_record(group.group_id, group.metadata_value(assignment))
                return Outcome([rec], written, replay=False)
            return self._maybe_prepare_rebalance_or_complete_join(
                group, f"Group's selected protocol will change because static member {new_id} with "
                       f"instance id {req.group_instance_id} joined with a change of protocol")
        if group.in_state(COMPLETING_REBALANCE):
            # the leader may already have assigned to the old member id: rebalance again
            return self._prepare_rebalance(group, f"Updating metadata for static member {new_id} with "
                                                  f"instance id {req.group_instance_id}")
        if group.state in (EMPTY, DEAD):
            raise RuntimeError(f"group {group.group_id} in state {group.state} with static member "
                               f"{req.group_instance_id} rejoining")
        return self._maybe_complete_join_phase(group)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> Outcome:
        if group.can_rebalance():
            return self._prepare_rebalance(group, reason)
        return self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> Outcome:
        if group.in_state(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.in_state(EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self._schedule(join_key(gid), delay,
                           lambda: self._try_complete_initial_rebalance(gid, delay, remaining))
        group.transition_to(PREPARING_REBALANCE)
        log.info(f"Preparing to rebalance group {group.group_id} in state {group.state} with old "
                 f"generation {group.generation_id} (reason: {reason}).")
        return Outcome() if initial else self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> Outcome:
        if group.has_all_members_joined():
            return self._complete_join(group)
        gid = group.group_id
        self._schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
        return Outcome()

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> Outcome:
        group = self.groups.get(group_id)
        if group is None:
            return Outcome()
        if group.new_member_added and remaining != 0:
            # members keep arriving: wait another delay, within the rebalance timeout
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self._schedule(join_key(group_id), new_delay,
                           lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
            return Outcome()
        return self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> Outcome:
        if not group.in_state(PREPARING_REBALANCE):
            return Outcome()
        if group.previous_state == EMPTY:
            return Outcome()            # the initial rebalance ends by its timer
        if not group.has_all_members_joined():
            return Outcome()
        return self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> Outcome:
        group = self.groups.get(group_id)
        return Outcome() if group is None else self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> Outcome:
        """completeClassicGroupJoin: drop dynamic members that did not rejoin, start the next
        generation, answer every parked JoinGroup (the leader gets the member list)."""
        gid = group.group_id
        self.timer.cancel(join_key(gid))
        missing = [m for m in group.not_yet_rejoined() if not m.is_static]
        for m in missing:
            group.remove(m.member_id)
            self.timer.cancel(heartbeat_key(gid, m.member_id))
        if missing:
            log.info(f"Group {gid} removed dynamic members who haven't joined: "
                     f"{[m.member_id for m in missing]}")
        if group.in_state(DEAD):
            return Outcome()
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait another rebalance timeout while sessions expire
            log.error(f"Group {gid} could not complete rebalance because no members rejoined.")
            self._schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return Outcome()
        group.init_next_generation()
        if group.in_state(EMPTY):
            log.info(f"Group {gid} with generation {group.generation_id} is now empty.")

            def written(error):
                if error is not None:
                    log.warning(f"Failed to write empty metadata for group {gid}: {error}")
            return Outcome([R.group_metadata_record(gid, group.metadata_value(None))], written, replay=False)
        log.info(f"Stabilized group {gid} generation {group.generation_id} with {len(group.members)} members.")
        for m in list(group.members.values()):
            members = group.current_members() if group.is_leader(m.member_id) else []
            complete_join(group, m, JoinResponse(NONE, group.generation_id, group.protocol_type,
                                                 group.protocol_name, group.leader_id or NO_LEADER,
                                                 m.member_id, members))
            self._reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        generation = group.generation_id
        self._schedule(sync_key(gid), group.rebalance_timeout_ms(),
                       lambda: self._expire_pending_sync(gid, generation))
        return Outcome()

    def _expire_pending_sync(self, group_id: str, generation: int) -> Outcome:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation_id:
            return Outcome()
        if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync_members:
            pending = sorted(group.pending_sync_members)
            for mid in pending:
                group.remove(mid)
                self.timer.cancel(heartbeat_key(group_id, mid))
            log.info(f"Group {group_id} removed members who haven't sent their sync requests: {pending}")
            return self._prepare_rebalance(group, f"Removing {pending} on pending sync request expiration")
        return Outcome()

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        self._schedule(heartbeat_key(gid, mid), member.session_timeout_ms if timeout_ms is None else timeout_ms,
                       lambda: self._expire_heartbeat(gid, mid))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> Outcome:
        group = self.groups.get(group_id)
        if group is None or group.in_state(DEAD):
            return Outcome()
        if group.is_pending_member(member_id):
            log.info(f"Pending member {member_id} in group {group_id} has been removed after session "
                     f"timeout expiration.")
            group.remove(member_id)
            if group.in_state(PREPARING_REBALANCE) and group.has_all_members_joined():
                return self._complete_join(group)
            return Outcome()
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return Outcome()
        log.info(f"Member {member_id} in group {group_id} has failed, removing it from the group.")
        return self._remove_member_and_update(group, member, f"removing member {member_id} on heartbeat "
                                                             f"expiration")

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> Outcome:
        # a new member may time out while its JoinGroup is parked: it learns it with UNKNOWN_MEMBER_ID
        complete_join(group, member, JoinResponse(UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            return self._maybe_prepare_rebalance_or_complete_join(group, reason)
        if group.in_state(PREPARING_REBALANCE) and group.has_all_members_joined():
            return self._complete_join(group)
        return Outcome()

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self._propagate_assignment(group, NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ptype, pname = (group.protocol_type, group.protocol_name) if error == NONE else (None, None)
        for m in list(group.members.values()):
            if complete_sync(m, SyncResponse(error, ptype, pname, m.assignment)):
                # sessions run again from the moment the assignment is out
                self._reschedule_heartbeat(group, m)

    # == SyncGroup ====================================================================================
    def sync_group(self, req: SyncRequest) -> tuple[Outcome, Future]:
        if not req.group_id:
            return Outcome(), _done(SyncResponse(INVALID_GROUP_ID))
        try:
            self.check_loaded(req.group_id)
        except GroupError as e:
            return Outcome(), _done(SyncResponse(e.code))
        group = self.groups.get(req.group_id)
        if group is None or group.is_empty():
            return Outcome(), _done(SyncResponse(UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, req)
        if error is not None:
            return Outcome(), _done(SyncResponse(error))
        if group.in_state(PREPARING_REBALANCE):
            return Outcome(), _done(SyncResponse(REBALANCE_IN_PROGRESS))
        if group.in_state(STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            m = group.member(req.member_id)
            return Outcome(), _done(SyncResponse(NONE, group.protocol_type, group.protocol_name, m.assignment))
        if not group.in_state(COMPLETING_REBALANCE):
            raise RuntimeError(f"SyncGroup for group {group.group_id} in state {group.state}")
        future: Future = Future()
        group.member(req.member_id).sync_future = future
        self._remove_pending_sync_member(group, req.member_id)
        if not group.is_leader(req.member_id):
            return Outcome(), future
        log.info(f"Assignment received from leader {req.member_id} for group {group.group_id} for "
                 f"generation {group.generation_id}. The group has {len(group.members)} members, "
                 f"{len(group.static_members)} of which are static.")
        assignment = {mid: bytes(a) for mid, a in req.assignments.items() if mid in group.members}
        missing = [mid for mid in group.members if mid not in assignment]
        for mid in missing:
            assignment[mid] = b""
        if missing:
            log.warning(f"Setting empty assignments for members {missing} of {group.group_id} for "
                        f"generation {group.generation_id}.")
        generation = req.generation_id

        def written(error):
            # another member may have joined meanwhile: only the same generation still completes
            if group.in_state(COMPLETING_REBALANCE) and generation == group.generation_id:
                if error is not None:
                    code = append_error(error)
                    self._reset_and_propagate_assignment(group, code)
                    self._pending.append(self._maybe_prepare_rebalance_or_complete_join(
                        group, f"Error {code} when storing group assignment during SyncGroup"))
                else:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(STABLE)
        rec = R.group_metadata_record(group.group_id, group.metadata_value(assignment))
        return Outcome([rec], written, replay=False), future

    def _validate_sync(self, group: ClassicGroup, req: SyncRequest) -> int | None:
        if group.in_state(DEAD):
            return COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(req.member_id, req.group_instance_id, "sync-group")
        except GroupError as e:
            return e.code
        if req.generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return INCONSISTENT_GROUP_PROTOCOL
        return None

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (DEAD, EMPTY, PREPARING_REBALANCE) or not group.pending_sync_members:
            self.timer.cancel(sync_key(group.group_id))

    # == Heartbeat ====================================================================================
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> tuple[Outcome, int]:
        if not group_id:
            return Outcome(), INVALID_GROUP_ID
        if self.is_loading(group_id):
            return Outcome(), NONE          # Kafka answers heartbeats blindly while loading
        group = self.groups.get(group_id)
        if group is None:
            return Outcome(), UNKNOWN_MEMBER_ID
        if group.in_state(DEAD):
            return Outcome(), COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id, "heartbeat")
        except GroupError as e:
            return Outcome(), e.code
        if generation_id != group.generation_id:
            return Outcome(), ILLEGAL_GENERATION
        if group.in_state(EMPTY):
            return Outcome(), UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.member(member_id))
        # PreparingRebalance: this is how members learn that a rebalance started
        return Outcome(), REBALANCE_IN_PROGRESS if group.in_state(PREPARING_REBALANCE) else NONE

    # == LeaveGroup ===================================================================================
    def leave_group(self, group_id: str, members: list) -> tuple[Outcome, int, list]:
        """``members``: (member id, instance id, reason). (outcome, top-level error,
        [(member id, instance id, error)])."""
        if not group_id:
            return Outcome(), INVALID_GROUP_ID, []
        try:
            self.check_loaded(group_id)
        except GroupError as e:
            return Outcome(), e.code, []
        group = self.groups.get(group_id)
        if group is None:
            return Outcome(), NONE, [(mid, iid, UNKNOWN_MEMBER_ID) for mid, iid, _ in members]
        if group.in_state(DEAD):
            return Outcome(), COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id, reason in members:
            reason = reason or "not provided"
            if member_id == UNKNOWN_MEMBER:
                # an admin may remove a static member by its instance id alone
                existing = group.static_member_id(instance_id)
                if existing is not None:
                    self._remove_current_member(group, existing, reason)
                    results.append((member_id, instance_id, NONE))
                else:
                    results.append((member_id, instance_id, UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
                log.info(f"[Group {group_id}] Pending member {member_id} has left group through explicit "
                         f"LeaveGroup request; client reason: {reason}")
                results.append((member_id, instance_id, NONE))
            else:
                try:
                    group.validate_member(member_id, instance_id, "leave-group")
                except GroupError as e:
                    results.append((member_id, instance_id, e.code))
                    continue
                self._remove_current_member(group, member_id, reason)
                results.append((member_id, instance_id, NONE))
        left = [r[0] for r in results if r[2] == NONE]
        outcome = Outcome()
        if left:
            why = f"explicit LeaveGroup request for ({', '.join(left)}) members."
            if group.state in (STABLE, COMPLETING_REBALANCE):
                outcome = self._maybe_prepare_rebalance_or_complete_join(group, why)
            elif group.in_state(PREPARING_REBALANCE):
                outcome = self._maybe_complete_join_phase(group)
        return outcome, NONE, results

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info(f"[Group {group.group_id}] Member {member_id} has left group through explicit LeaveGroup "
                 f"request; client reason: {reason}")
        complete_join(group, member, JoinResponse(UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER))
        group.remove(member_id)

    # == OffsetCommit ===================================================================================
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None, partitions: list[CommitPartition],
                       retention_time_ms: int = -1, api_version: int = 8) -> tuple[Outcome, list[int]]:
        """One error per partition, in order; the records are the accepted commits."""
        if not group_id:
            return Outcome(), [INVALID_GROUP_ID] * len(partitions)
        try:
            self.check_loaded(group_id)
            group = self._validate_commit(group_id, generation_id, member_id, group_instance_id, api_version)
        except GroupError as e:
            return Outcome(), [e.code] * len(partitions)
        if group is not None and group.state in (STABLE, PREPARING_REBALANCE) and member_id in group.members:
            # classic members keep their session through their commits
            self._reschedule_heartbeat(group, group.member(member_id))
        now = self.clock()
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        errors, recs = [], []
        for p in partitions:
            metadata = p.metadata
            if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(NONE)
            recs.append(R.offset_commit_record(group_id, p.topic, p.partition, R.OffsetCommitValue(
                p.offset, p.leader_epoch, metadata or "", now, expire)))
        return Outcome(recs), errors

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None, api_version: int) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # admin tools and assign() consumers: a "simple" group, created by the commit's replay
                log.info(f"[GroupId {group_id}] Creating a simple consumer group via manual offset commit.")
                return None
            if api_version >= 9:
                raise GroupError(GROUP_ID_NOT_FOUND, f"group {group_id} not found")
            raise GroupError(ILLEGAL_GENERATION, f"group {group_id} not found")
        if group.in_state(DEAD):
            raise GroupError(COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.in_state(EMPTY):
            return group
        if generation_id >= 0 or member_id or instance_id is not None:
            group.validate_member(member_id, instance_id, "offset-commit")
            if generation_id != group.generation_id:
                raise GroupError(ILLEGAL_GENERATION)
        elif not group.in_state(EMPTY):
            raise GroupError(UNKNOWN_MEMBER_ID, "commits without a member id need an empty group")
        if group.in_state(COMPLETING_REBALANCE):
            raise GroupError(REBALANCE_IN_PROGRESS)
        return group

    # == OffsetFetch ====================================================================================
    def fetch_offsets(self, group_id: str | None, topics: list | None,
                      require_stable: bool = False) -> tuple[int, list]:
        """``topics``: [(topic, [partition, ...])] or None for every committed offset.
        (group error, [(topic, [FetchedOffset])])."""
        if group_id is None:
            return INVALID_GROUP_ID, []
        try:
            self.check_loaded(group_id)
        except GroupError as e:
            return e.code, []
        group = self.groups.get(group_id)
        by_topic = self.offsets.get(group_id, {}) if group is not None and not group.in_state(DEAD) else {}
        out = []
        if topics is None:
            for topic, parts in by_topic.items():
                out.append((topic, [self._fetched(group_id, topic, p, parts.get(p), require_stable)
                                    for p in parts]))
            return NONE, out
        for topic, parts in topics:
            stored = by_topic.get(topic, {})
            out.append((topic, [self._fetched(group_id, topic, p, stored.get(p), require_stable) for p in parts]))
        return NONE, out

    def _fetched(self, group_id: str, topic: str, partition: int, o: OffsetAndMetadata | None,
                 require_stable: bool) -> FetchedOffset:
        if require_stable and self._has_pending_txn_offset(group_id, topic, partition):
            return FetchedOffset(partition, error=UNSTABLE_OFFSET_COMMIT)
        if o is None:
            return FetchedOffset(partition)
        return FetchedOffset(partition, o.offset, o.leader_epoch, o.metadata)

    def committed(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return {(t, p): o for t, parts in self.offsets.get(group_id, {}).items() for p, o in parts.items()}

    # == DescribeGroups / ListGroups ======================================================================
    def describe_groups(self, group_ids: list) -> list[DescribedGroup]:
        out = []
        for gid in group_ids:
            if gid is None:
                out.append(DescribedGroup(None, INVALID_GROUP_ID))
                continue
            try:
                self.check_loaded(gid)
            except GroupError as e:
                out.append(DescribedGroup(gid, e.code))
                continue
            group = self.groups.get(gid)
            if group is None:
                out.append(DescribedGroup(gid, NONE, DEAD))
                continue
            stable = group.in_state(STABLE)
            members = [DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       m.metadata(group.protocol_name) if stable else b"",
                                       m.assignment if stable else b"")
                       for m in group.members.values()]
            out.append(DescribedGroup(gid, NONE, group.state, group.protocol_type or "",
                                      (group.protocol_name or "") if stable else "", members))
        return out

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        out = []
        for gid, g in self.groups.items():
            if self.is_loading(gid):
                continue
            if states and g.state.lower() not in states:
                continue
            if types and CLASSIC not in types:
                continue
            out.append(ListedGroup(gid, g.protocol_type or "", g.state))
        return out

    # == DeleteGroups / OffsetDelete ======================================================================
    def delete_groups(self, group_ids: list) -> tuple[Outcome, list[tuple[str, int]]]:
        recs, results = [], []
        for gid in group_ids:
            if not gid:
                results.append((gid, INVALID_GROUP_ID))
                continue
            try:
                self.check_loaded(gid)
                group = self.group(gid)
                if group.in_state(DEAD):
                    raise GroupError(GROUP_ID_NOT_FOUND, f"group {gid} is dead")
                if group.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE):
                    raise GroupError(NON_EMPTY_GROUP, f"group {gid} has members")
            except GroupError as e:
                results.append((gid, e.code))
                continue
            recs.extend(self._all_offset_tombstones(gid))
            recs.append(R.group_metadata_record(gid, None))
            results.append((gid, NONE))
        if recs:
            log.info(f"The following groups were deleted: {', '.join(g for g, e in results if e == NONE)}.")
        return Outcome(recs), results

    def _all_offset_tombstones(self, group_id: str) -> list:
        committed = self.committed(group_id)
        recs = [R.offset_commit_record(group_id, t, p, None) for (t, p) in committed]
        seen = set(committed)
        for pid in self.open_txns_by_group.get(group_id, ()):
            for t, parts in self.pending_txn_offsets.get(pid, {}).get(group_id, {}).items():
                for p in parts:
                    if (t, p) not in seen:
                        seen.add((t, p))
                        recs.append(R.offset_commit_record(group_id, t, p, None))
        return recs

    def delete_offsets(self, group_id: str, topics: list) -> tuple[Outcome, int, list]:
        """``topics``: [(topic, [partition])]. (outcome, group error, [(topic, [(partition, error)])])."""
        try:
            self.check_loaded(group_id)
            group = self.group(group_id)
            if group.in_state(DEAD):
                raise GroupError(GROUP_ID_NOT_FOUND)
            if group.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) and \
                    not group.uses_consumer_protocol():
                raise GroupError(NON_EMPTY_GROUP)
        except GroupError as e:
            return Outcome(), e.code, []
        recs, out = [], []
        for topic, parts in topics:
            if group.is_subscribed_to_topic(topic):
                out.append((topic, [(p, GROUP_SUBSCRIBED_TO_TOPIC) for p in parts]))
                continue
            res = []
            for p in parts:
                res.append((p, NONE))
                if self._has_offset(group_id, topic, p) or self._has_pending_txn_offset(group_id, topic, p):
                    recs.append(R.offset_commit_record(group_id, topic, p, None))
            out.append((topic, res))
        return Outcome(recs), NONE, out

    # == expiry =========================================================================================
    def cleanup_expired(self) -> Outcome:
        """Offsets past their retention, and empty groups left without offsets, as tombstones
        (GroupCoordinatorShard.cleanupGroupMetadata)."""
        now = self.clock()
        recs = []
        for gid in list(self.groups):
            if self.is_loading(gid):
                continue
            if self._cleanup_group_offsets(gid, now, recs):
                group = self.groups[gid]
                if group.is_empty():
                    recs.append(R.group_metadata_record(gid, None))
        if recs:
            log.info(f"Generated {len(recs)} tombstone records while cleaning up group metadata.")
        return Outcome(recs)

    def _cleanup_group_offsets(self, group_id: str, now: int, recs: list) -> bool:
        by_topic = self.offsets.get(group_id)
        if not by_topic:
            return True
        group = self.groups[group_id]
        base = group.offset_base_timestamp()
        if base is None:
            return False
        retention = self.config.retention_ms
        all_expired = True
        for topic, parts in by_topic.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for p, o in parts.items():
                expired = now >= o.expire_timestamp if o.expire_timestamp >= 0 else now - base(o) >= retention
                if expired and not self._has_pending_txn_offset(group_id, topic, p):
                    recs.append(R.offset_commit_record(group_id, topic, p, None))
                else:
                    all_expired = False
        return all_expired and group_id not in self.open_txns_by_group

    def offsets_for_deleted_partitions(self, partitions: Iterable[tuple[str, int]]) -> Outcome:
        """Tombstones for every group's offsets of deleted partitions (onPartitionsDeleted)."""
        wanted = set(partitions)
        recs = []
        for gid, by_topic in self.offsets.items():
            for t, parts in by_topic.items():
                for p in parts:
                    if (t, p) in wanted:
                        recs.append(R.offset_commit_record(gid, t, p, None))
        for groups in self.pending_txn_offsets.values():
            for gid, by_topic in groups.items():
                for t, parts in by_topic.items():
                    for p in parts:
                        if (t, p) in wanted and not self._has_offset(gid, t, p):
                            recs.append(R.offset_commit_record(gid, t, p, None))
        return Outcome(recs)

    # == timers =========================================================================================
    def run_timers(self, now_ms: int | None = None) -> list[Outcome]:
        """Run every expired timer (in deadline order); their outcomes, for the caller to write."""
        now = self.clock() if now_ms is None else now_ms
        out = []
        for key, fn in self.timer.pop_due(now):
            outcome = fn()
            if outcome is not None and (outcome.records or outcome.on_written):
                out.append(outcome)
        return out

    # == replay: loading, and writes taking effect ==========================================================
    def replay(self, record: R.CoordinatorRecord, offset: int = -1, producer_id: int = -1) -> None:
        key, value = record.key, record.value
        if isinstance(key, R.OffsetCommitKey):
            self._replay_offset(key, value, offset, producer_id)
        else:
            self._replay_group(key.group, value)

    def _replay_offset(self, key: R.OffsetCommitKey, value: R.OffsetCommitValue | None, offset: int,
                       producer_id: int) -> None:
        gid, topic, partition = key.group, key.topic, key.partition
        if value is None:
            self._remove_offset(self.offsets, gid, topic, partition)
            for pid in list(self.open_txns_by_group.get(gid, ())):
                self._remove_offset(self.pending_txn_offsets.get(pid, {}), gid, topic, partition)
            return
        if gid not in self.groups:
            # offsets committed without membership make a "simple" group (Empty, no protocol type)
            self.groups[gid] = ClassicGroup(gid, self.clock)
        oam = OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                value.expire_timestamp, offset)
        if producer_id < 0:
            self.offsets.setdefault(gid, {}).setdefault(topic, {})[partition] = oam
        else:
            self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(gid, {}) \
                .setdefault(topic, {})[partition] = oam
            self.open_txns_by_group.setdefault(gid, set()).add(producer_id)

    @staticmethod
    def _remove_offset(store: dict, gid: str, topic: str, partition: int) -> None:
        by_topic = store.get(gid)
        if by_topic is None:
            return
        parts = by_topic.get(topic)
        if parts is None:
            return
        parts.pop(partition, None)
        if not parts:
            del by_topic[topic]
        if not by_topic:
            del store[gid]

    def _replay_group(self, gid: str, value: R.GroupMetadataValue | None) -> None:
        if value is None:
            group = self.groups.pop(gid, None)
            if group is not None:
                for mid in list(group.members):
                    self.timer.cancel(heartbeat_key(gid, mid))
                self.timer.cancel(join_key(gid))
                self.timer.cancel(sync_key(gid))
                if not group.in_state(DEAD):
                    group.transition_to(DEAD)
            return
        ptype = value.protocol_type or None
        group = ClassicGroup(gid, self.clock, STABLE if value.members else EMPTY, value.generation, ptype,
                             value.protocol, value.leader,
                             None if value.current_state_timestamp == -1 else value.current_state_timestamp)
        for m in value.members:
            rebalance = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance,
                             m.session_timeout, value.protocol_type, [(value.protocol, m.subscription)],
                             m.assignment))
        group.subscribed_topics = group.compute_subscribed_topics()
        old = self.groups.get(gid)
        if old is not None:
            for mid in old.members:
                self.timer.cancel(heartbeat_key(gid, mid))
        self.groups[gid] = group

    def replay_end_txn(self, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of a producer that committed offsets in a transaction."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None:
            return
        for gid in pending:
            txns = self.open_txns_by_group.get(gid)
            if txns is not None:
                txns.discard(producer_id)
                if not txns:
                    del self.open_txns_by_group[gid]
        if not commit:
            return
        for gid, by_topic in pending.items():
            for topic, parts in by_topic.items():
                for p, oam in parts.items():
                    existing = self.offsets.get(gid, {}).get(topic, {}).get(p)
                    # the later record wins, whichever kind it is (compaction keeps it so too)
                    if existing is None or oam.record_offset > existing.record_offset:
                        self.offsets.setdefault(gid, {}).setdefault(topic, {})[p] = oam

    def start_loading(self, partition: int) -> None:
        self.loading.add(partition)

    def on_loaded(self, partition: int) -> None:
        """Every loaded member gets a session timer: absent members are then removed (onLoaded)."""
        self.loading.discard(partition)
        for gid, group in self.groups.items():
            if self.partition_for(gid) != partition:
                continue
            log.info(f"Loaded classic group {gid} with {len(group.members)} members.")
            for m in group.members.values():
                self._reschedule_heartbeat(group, m)
            if len(group.members) > self.config.max_size:
                self._pending.append(self._prepare_rebalance(
                    group, f"Freshly-loaded group {gid} (size {len(group.members)}) is over capacity "
                           f"{self.config.max_size}"))

    def take_pending(self) -> list[Outcome]:
        """Outcomes produced inside callbacks (a failed write's new rebalance), to be written."""
        out, self._pending[:] = list(self._pending), []
        return [o for o in out if o.records or o.on_written]

    def _has_offset(self, gid: str, topic: str, partition: int) -> bool:
        return partition in self.offsets.get(gid, {}).get(topic, {})

    def _has_pending_txn_offset(self, gid: str, topic: str, partition: int) -> bool:
        for pid in self.open_txns_by_group.get(gid, ()):
            if partition in self.pending_txn_offsets.get(pid, {}).get(gid, {}).get(topic, {}):
                return True
        return False



def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current


def append_error(error: Exception) -> int:
    """The code a failed ``__consumer_offsets`` append answers (appendGroupMetadataErrorToResponseError):
    a storage failure says NOT_COORDINATOR so that clients look the coordinator up again and retry."""
    code = getattr(error, "kafka_error", None)
    if code in (3, 19, 7):          # UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT
        return COORDINATOR_NOT_AVAILABLE
    if code in (10, 18, 4):         # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE
        return UNKNOWN_SERVER_ERROR
    return NOT_COORDINATOR


def commit_append_error(error: Exception) -> int:
    """For OffsetCommit, a batch too large is INVALID_COMMIT_OFFSET_SIZE, as in Kafka."""
    code = getattr(error, "kafka_error", None)
    if code in (10, 18, 4):
        return INVALID_COMMIT_OFFSET_SIZE
    return append_error(error)
