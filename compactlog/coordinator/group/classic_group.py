"""Kafka's ``ClassicGroup`` and ``ClassicGroupMember``: a classic group's members, its state
(``ClassicGroupState`` and the transitions it allows), the protocol its members vote for, the
metadata written for it, and the static members (KIP-345) mapped to their current member ids.

A member's parked JoinGroup and SyncGroup are ``concurrent.futures.Future`` objects completed with
a ``JoinResponse`` / ``SyncResponse`` (``complete_join``, ``complete_sync``), as Kafka's members
hold their ``awaitingJoinFuture`` and ``awaitingSyncFuture``. The states are
``classic_group_state``'s. Sans-IO: the clock is injected.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from concurrent.futures import Future
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from ...record import consumer_offsets as R
from .api_data import DescribedGroup, DescribedMember, JoinResponse, ListedGroup, SyncResponse
from .classic_group_state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, VALID_PREVIOUS
from ..runtime import GroupError

# the coordinator's log lines keep the logger they were always written under
log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")


# -- members and groups ---------------------------------------------------------------------------

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
        complete_join(self, old, JoinResponse(ErrorCode.fenced_instance_id, member_id=old_id))
        complete_sync(old, SyncResponse(ErrorCode.fenced_instance_id))
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

    def accept_joining_member(self, member_id: str, max_size: int) -> bool:
        """Room for the member within ``group.max.size`` (members rejoining count once)."""
        if self.state in (EMPTY, DEAD):
            return True
        if self.state == PREPARING_REBALANCE:
            return (member_id in self.members and self.members[member_id].awaiting_join) or \
                self.num_awaiting_join < max_size
        return member_id in self.members or len(self.members) < max_size

    def validate_member(self, member_id: str, instance_id: str | None, operation: str) -> None:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise GroupError(ErrorCode.unknown_member_id, f"unknown static member {instance_id}")
            if existing != member_id:
                log.info(f"Request memberId={member_id} for static member with groupInstanceId="
                         f"{instance_id} is fenced by existing memberId={existing} during {operation}")
                raise GroupError(ErrorCode.fenced_instance_id)
        if member_id not in self.members:
            raise GroupError(ErrorCode.unknown_member_id, f"unknown member {member_id!r} in group {self.group_id}")

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

    def validate_delete_group(self) -> None:
        """DeleteGroups refuses a dead group (as unknown) and one with members."""
        if self.in_state(DEAD):
            raise GroupError(ErrorCode.group_id_not_found, f"group {self.group_id} is dead")
        if self.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE):
            raise GroupError(ErrorCode.non_empty_group, f"group {self.group_id} has members")

    # -- DescribeGroups / ListGroups
    def as_described_group(self) -> DescribedGroup:
        """Members' metadata, assignments and the protocol are only shown once the group is Stable."""
        stable = self.in_state(STABLE)
        members = [DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.metadata(self.protocol_name) if stable else b"",
                                   m.assignment if stable else b"")
                   for m in self.members.values()]
        return DescribedGroup(self.group_id, ErrorCode.none, self.state, self.protocol_type or "",
                              (self.protocol_name or "") if stable else "", members)

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state)

    # -- offsets
    def offset_base_timestamp(self) -> Callable[..., int] | None:
        """OffsetExpirationCondition: from when an offset's retention runs (a function of its
        ``OffsetAndMetadata``), None = never."""
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
    """Answer the member's parked JoinGroup, if any (ClassicGroup.completeJoinFuture); True if
    there was one."""
    if member.join_future is None:
        return False
    fut, member.join_future = member.join_future, None
    group.num_awaiting_join -= 1
    if not fut.done():
        fut.set_result(response)
    return True


def complete_sync(member: Member, response: SyncResponse) -> bool:
    """Answer the member's parked SyncGroup, if any (ClassicGroup.completeSyncFuture)."""
    if member.sync_future is None:
        return False
    fut, member.sync_future = member.sync_future, None
    if not fut.done():
        fut.set_result(response)
    return True

