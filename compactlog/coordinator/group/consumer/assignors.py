"""The server-side assignors of the consumer group protocol: ``uniform`` and ``range``.

Follows Kafka's ``UniformAssignor`` (dispatching to ``UniformHomogeneousAssignmentBuilder`` when
every member subscribes to the same topics, else ``UniformHeterogeneousAssignmentBuilder``) and
``RangeAssignor``, in ``group-coordinator/.../assignor``, with ``GroupSpecImpl`` as ``GroupSpec``.
They give Kafka's exact assignments, which depend on iteration order: a ``GroupSpec`` lists its
members, each member its subscribed topics and each stored target its topics and partitions **in
the order Kafka's collections iterate them** — ``target_assignment.TargetAssignmentBuilder`` builds
that order (``javaorder``); here every walk follows the given order, as Kafka's loops do.

Sans-IO, pure functions of their inputs: members in, ``{member: {topic id: set of partitions}}``
out. Topic ids are ``uuid.UUID``; ``partitions`` maps a topic id to its partition count (a topic
missing from it is one that does not exist: ``PartitionAssignorError``, as Kafka's
``SubscribedTopicDescriber.numPartitions`` returning -1).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .javaorder import hash_set_capacity, java_order, java_string_key, uuid_sort_key

Assignment = dict[uuid.UUID, set[int]]


class PartitionAssignorError(Exception):
    """Kafka's ``PartitionAssignorException``: the coordinator answers UNKNOWN_SERVER_ERROR."""


class SubscriptionType(enum.Enum):
    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


@dataclass(frozen=True)
class MemberSpec:
    """``MemberSubscriptionAndAssignmentImpl``: what the assignor knows of one member.

    ``topics`` are the subscribed topic ids that exist (names and resolved regex, §1.4) and
    ``assignment`` the member's stored target, both in Kafka's iteration order."""
    topics: Sequence[uuid.UUID] = ()
    assignment: Mapping[uuid.UUID, Sequence[int]] = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass
class GroupSpec:
    """``GroupSpecImpl``: the members (in iteration order), the group's subscription type and the
    inverted stored target ({topic id: {partition: member}}; derived from the members' stored
    targets when not given, as it always equals it in Kafka's heartbeat path)."""
    members: dict[str, MemberSpec]
    subscription_type: SubscriptionType = SubscriptionType.HOMOGENEOUS
    inverted: Mapping[uuid.UUID, Mapping[int, str]] | None = None

    def __post_init__(self):
        if self.inverted is None:
            inv: dict[uuid.UUID, dict[int, str]] = {}
            for mid, spec in self.members.items():
                for t, parts in spec.assignment.items():
                    d = inv.setdefault(t, {})
                    for p in parts:
                        d[p] = mid
            self.inverted = inv

    def is_partition_assigned(self, topic: uuid.UUID, partition: int) -> bool:
        return partition in self.inverted.get(topic, ())


def _num_partitions(partitions: Mapping[uuid.UUID, int], topic: uuid.UUID) -> int:
    n = partitions.get(topic, -1)
    if n < 0:
        raise PartitionAssignorError(
            f"Members are subscribed to topic {topic} which doesn't exist in the topic metadata.")
    return n


def _copy(assignment) -> dict[uuid.UUID, list[int]]:
    # partitions stay in their iteration order (Kafka's deep copy is a HashSet of the same
    # small integers, iterated the same way)
    return {t: list(p) for t, p in assignment.items()}


def _as_sets(assignment) -> Assignment:
    return {t: set(p) for t, p in assignment.items() if p}


# -- uniform, homogeneous -------------------------------------------------------------------------

def uniform_homogeneous(spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """``UniformHomogeneousAssignmentBuilder.build`` (spec §4.3)."""
    member_ids = list(spec.members)
    first = spec.members[member_ids[0]]
    # new HashSet<>(first member's subscription): Java order of the ids
    topics = java_order(first.topics, hash_set_capacity(len(first.topics)))
    if not topics:
        return {}
    subscribed = set(topics)
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for t in topics:
        n = _num_partitions(partitions, t)
        unassigned.extend((t, p) for p in range(n) if not spec.is_partition_assigned(t, p))
        total += n
    m = len(member_ids)
    min_quota, extra = divmod(total, m)

    target: dict[str, dict] = {}
    unfilled: list[tuple[str, int]] = []
    for index, mid in enumerate(member_ids):
        old = spec.members[mid].assignment
        new = None
        quota = min_quota
        has_extra = False
        if extra > 0:
            quota += 1
            has_extra = True
        for t, parts in old.items():
            if t in subscribed:
                if len(parts) <= quota:
                    quota -= len(parts)
                    continue
                for p in parts:
                    if quota > 0:
                        quota -= 1
                    else:
                        if new is None:
                            new = _copy(old)
                        new[t].remove(p)
                        if not new[t]:
                            del new[t]
                        unassigned.append((t, p))
            else:
                if new is None:
                    new = _copy(old)
                new.pop(t, None)
        # give the extra partition back unless this member is one of the last `extra` members,
        # which must take it (KAFKA-18688: any member may keep it, so a balanced group stays)
        if quota > 0 and has_extra and m - index > extra:
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((mid, quota))
        if has_extra:
            extra -= 1
        target[mid] = _copy(old) if new is None else new

    i = 0
    for mid, quota in unfilled:
        a = target[mid]
        for _ in range(quota):
            if i >= len(unassigned):
                break
            t, p = unassigned[i]
            i += 1
            a.setdefault(t, []).append(p)
    if i < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return {mid: _as_sets(a) for mid, a in target.items()}


# -- uniform, heterogeneous -----------------------------------------------------------------------

MAX_ITERATION_COUNT = 16


class _Balancer:
    """``UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer``: a least-loaded range
    growing rightwards and a most-loaded range growing leftwards over members sorted by size."""

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.order: list[int] = []
        self.lo_end = 0
        self.lo_level = -1
        self.lo_next = 0
        self.hi_start = 0
        self.hi_end = 0
        self.hi_level = 1
        self.hi_next = -1

    def initialize(self, members: list[int]) -> int:
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        s = self.sizes
        self.order = sorted(members, key=lambda i: (s[i], i))
        n = len(self.order)
        self.lo_end = 0
        self.lo_level = s[self.order[0]] - 1
        self.lo_next = 0
        self.hi_start = n
        self.hi_end = n
        self.hi_level = s[self.order[-1]] + 1
        self.hi_next = n - 1
        return s[self.order[-1]] - s[self.order[0]]

    def next_least_loaded(self) -> int:
        s, o = self.sizes, self.order
        if self.lo_next >= self.lo_end:
            self.lo_level += 1
            while self.lo_end < len(o) and s[o[self.lo_end]] == self.lo_level:
                self.lo_end += 1
            self.lo_next = 0
        member = o[self.lo_next]
        self.lo_next += 1
        return member

    def next_most_loaded(self) -> int:
        s, o = self.sizes, self.order
        if self.hi_next < self.hi_start:
            if self.hi_end <= self.hi_start and self.hi_start > 0:
                # emptied by exclude(): restart from the level just below, so the range expands
                self.hi_level = s[o[self.hi_start - 1]]
            else:
                self.hi_level -= 1
            while self.hi_start > 0 and s[o[self.hi_start - 1]] == self.hi_level:
                self.hi_start -= 1
            self.hi_next = self.hi_end - 1
        if self.hi_next < 0:
            return -1
        member = o[self.hi_next]
        self.hi_next -= 1
        return member

    def exclude_most_loaded(self) -> None:
        o = self.order
        i = self.hi_next + 1
        o[i], o[self.hi_end - 1] = o[self.hi_end - 1], o[i]
        self.hi_end -= 1

    def balanced(self) -> bool:
        return self.hi_level - self.lo_level <= 1


def uniform_heterogeneous(spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """``UniformHeterogeneousAssignmentBuilder.build`` (spec §4.4)."""
    member_ids = list(spec.members)
    index = {mid: i for i, mid in enumerate(member_ids)}
    subscribers: dict[uuid.UUID, list[int]] = {}
    for i, mid in enumerate(member_ids):
        for t in spec.members[mid].topics:
            _num_partitions(partitions, t)
            subscribers.setdefault(t, []).append(i)
    if not subscribers:
        return {}
    sizes = [0] * len(member_ids)
    owners = {t: [-1] * partitions[t] for t in subscribers}
    target: list[dict[uuid.UUID, set[int]]] = [dict() for _ in member_ids]

    def topic_key(t):
        n, subs = partitions[t], len(subscribers[t])
        # partitions per subscriber descending, subscriber count ascending, topic id ascending
        return (-(n / subs), subs, uuid_sort_key(t))

    # keep the stored partitions of topics still subscribed
    for mid in member_ids:
        i = index[mid]
        topics = set(spec.members[mid].topics)
        for t, parts in spec.members[mid].assignment.items():
            if t in topics:
                sizes[i] += len(parts)
                target[i][t] = set(parts)
                for p in parts:
                    owners[t][p] = i

    def assign(t, p, i):
        old = owners[t][p]
        if old != -1:
            ps = target[old].get(t)
            if ps is not None:
                ps.discard(p)
                if not ps:
                    del target[old][t]
            owners[t][p] = -1
            sizes[old] -= 1
        target[i].setdefault(t, set()).add(p)
        owners[t][p] = i
        sizes[i] += 1

    balancer = _Balancer(sizes)
    free = {t: [p for p, o in enumerate(owners[t]) if o == -1] for t in subscribers}
    for t in sorted((t for t, ps in free.items() if ps), key=topic_key):
        balancer.initialize(subscribers[t])
        for p in free[t]:
            assign(t, p, balancer.next_least_loaded())

    movable = sorted((t for t in subscribers if len(subscribers[t]) >= 2), key=topic_key)
    if movable:
        last = -1
        done = False
        for _ in range(MAX_ITERATION_COUNT):
            for ti, t in enumerate(movable):
                if ti == last:
                    done = True
                    break
                moved = _balance_topic(t, partitions[t], owners[t], subscribers[t], balancer, assign)
                if moved > 0 or last == -1:
                    last = ti
            if done:
                break
    return {mid: target[index[mid]] for mid in member_ids}


def _balance_topic(t, n, owners, subscribers, balancer: _Balancer, assign) -> int:
    moved = 0
    if balancer.initialize(subscribers) <= 1:
        return moved
    order = sorted(range(n), key=lambda p: (owners[p], p))
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for i, p in enumerate(order):
        o = owners[p]
        start.setdefault(o, i)
        end[o] = i + 1
    while not balancer.balanced():
        while True:
            m = balancer.next_most_loaded()
            if m == -1:
                break
            if m not in end or end[m] - start[m] <= 0:
                balancer.exclude_most_loaded()
                continue
            break
        if m == -1:
            break
        p = order[end[m] - 1]
        end[m] -= 1
        least = balancer.next_least_loaded()
        if balancer.balanced():
            break
        assign(t, p, least)
        moved += 1
    return moved


class UniformAssignor:
    """``UniformAssignor``: homogeneous or heterogeneous builder by the group's subscription type."""
    name = "uniform"

    def assign(self, spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return uniform_homogeneous(spec, partitions)
        return uniform_heterogeneous(spec, partitions)


# -- range ----------------------------------------------------------------------------------------

class RangeAssignor:
    """``RangeAssignor`` (spec §4.5): per topic, contiguous ranges over the members sorted static
    first (by instance id), then by member id; stored targets are ignored."""
    name = "range"

    @staticmethod
    def _sorted_members(spec: GroupSpec) -> list[str]:
        def key(mid):
            inst = spec.members[mid].instance_id
            return (0, java_string_key(inst)) if inst is not None else (1, java_string_key(mid))
        return sorted(spec.members, key=key)

    def assign(self, spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        members = self._sorted_members(spec)
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            topics = list(dict.fromkeys(spec.members[members[0]].topics))
            subs = {t: members for t in topics}
            member_topics = {mid: topics for mid in members}
        else:
            subs: dict[uuid.UUID, list[str]] = {}
            member_topics = {}
            for mid in members:
                member_topics[mid] = list(dict.fromkeys(spec.members[mid].topics))
                for t in member_topics[mid]:
                    subs.setdefault(t, []).append(mid)
        state = {}
        for t, ms in subs.items():
            n = partitions.get(t, -1)
            if n < 0:
                raise PartitionAssignorError("Member is subscribed to a non-existent topic")
            q, r = divmod(n, len(ms))
            state[t] = [q, r, 0, n]       # quota, extra left, next start, partition count
        out: dict[str, Assignment] = {}
        for mid in members:
            a: Assignment = {}
            for t in member_topics[mid]:
                st = state[t]
                quota = st[0]
                if st[1] > 0:
                    quota += 1
                    st[1] -= 1
                lo = st[2]
                hi = min(lo + quota, st[3])
                st[2] = hi
                if lo < hi:
                    a[t] = set(range(lo, hi))
            out[mid] = a
        return out


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNORS = ("uniform", "range")       # group.consumer.assignors
