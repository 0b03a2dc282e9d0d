"""A member's reconciliation towards its target assignment: revoke first, then assign (spec §3).

Follows Kafka's ``modern/consumer/CurrentAssignmentBuilder``. A member in STABLE at an older
epoch moves towards the target: partitions it must give up go to its pending-revocation set and
it waits in UNREVOKED_PARTITIONS, at its epoch, until its heartbeats stop reporting them; only
then does it reach the target epoch and get the partitions that are free (those still owned by
another member, per the partition epoch map, keep it in UNRELEASED_PARTITIONS until released).

Where spec and Kafka's code differ, the code is followed: every epoch update sets the previous
epoch to the current one even when the epoch does not change (``Builder.updateMemberEpoch``).
"""

from __future__ import annotations

import uuid
from typing import Callable, Iterable, Mapping

from .model import (ConsumerGroupMember, MemberState, MetadataImage, ResolvedRegularExpression, assignment)
from .target_assignment import subscribed_topic_names


class FencedMemberEpochError(Exception):
    """Kafka's ``FencedMemberEpochException``: answered as FENCED_MEMBER_EPOCH (110)."""


OwnedPartitions = Iterable[tuple[uuid.UUID, Iterable[int]]] | None


class CurrentAssignmentBuilder:
    """``CurrentAssignmentBuilder``: ``build()`` returns the member, updated or the same object."""

    def __init__(self, member: ConsumerGroupMember):
        self.member = member
        self.image = MetadataImage()
        self.target_epoch = 0
        self.target: Mapping[uuid.UUID, frozenset] = {}
        self.subscription_changed = False
        self.resolved: Mapping[str, ResolvedRegularExpression] = {}
        self.partition_epoch: Callable[[uuid.UUID, int], int] = lambda t, p: -1
        self.owned: dict[uuid.UUID, set[int]] | None = None

    def with_metadata_image(self, image: MetadataImage) -> "CurrentAssignmentBuilder":
        self.image = image
        return self

    def with_target_assignment(self, epoch: int, target: Mapping[uuid.UUID, Iterable[int]]) -> "CurrentAssignmentBuilder":
        self.target_epoch = epoch
        self.target = assignment(target)
        return self

    def with_subscription_changed(self, changed: bool) -> "CurrentAssignmentBuilder":
        self.subscription_changed = changed
        return self

    def with_resolved_regexes(self, resolved: Mapping[str, ResolvedRegularExpression]) -> "CurrentAssignmentBuilder":
        self.resolved = resolved
        return self

    def with_current_partition_epoch(self, fn: Callable[[uuid.UUID, int], int]) -> "CurrentAssignmentBuilder":
        self.partition_epoch = fn
        return self

    def with_owned_partitions(self, owned: OwnedPartitions) -> "CurrentAssignmentBuilder":
        """The heartbeat's ``topic_partitions``; None = not sent (the member may own anything)."""
        if owned is None:
            self.owned = None
        else:
            self.owned = {}
            for t, ps in owned:
                self.owned.setdefault(t, set()).update(ps)
        return self

    # -- the state machine ----------------------------------------------------------------------
    def build(self) -> ConsumerGroupMember:
        m = self.member
        if m.state is MemberState.STABLE:
            if m.member_epoch != self.target_epoch:
                return self._next(m.member_epoch, m.assigned_partitions)
            if self.subscription_changed:
                return self._shrink(m.assigned_partitions)
            return m
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if self._owns_any(m.partitions_pending_revocation):
                return self._shrink(m.assigned_partitions) if self.subscription_changed else m
            # entering UNREVOKED on a subscription change must not pass the target's epoch
            return self._next(min(m.member_epoch + 1, self.target_epoch), m.assigned_partitions)
        if m.state is MemberState.UNRELEASED_PARTITIONS:
            return self._next(m.member_epoch, m.assigned_partitions)
        # UNKNOWN: a state written by a newer coordinator; start over from nothing owned
        if self.owned is None or self.owned:
            raise FencedMemberEpochError("The consumer group member is in a unknown state. "
                                         "The member must abandon all its partitions and rejoin.")
        return self._next(self.target_epoch, m.assigned_partitions)

    def _owns_any(self, pending: Mapping[uuid.UUID, frozenset]) -> bool:
        if self.owned is None:
            return True
        return any(pending.get(t, frozenset()) & ps for t, ps in self.owned.items())

    def _subscribed_ids(self) -> set[uuid.UUID]:
        return set(self.image.topic_ids(subscribed_topic_names(self.member, self.resolved)))

    def _shrink(self, assigned: Mapping[uuid.UUID, frozenset]) -> ConsumerGroupMember:
        """``updateCurrentAssignment``: partitions of topics no longer subscribed become pending."""
        subscribed = self._subscribed_ids()
        m = self.member
        removed = {t: ps for t, ps in assigned.items() if t not in subscribed}
        if not removed:
            return m
        new_assigned = {t: ps for t, ps in assigned.items() if t in subscribed}
        pending = dict(m.partitions_pending_revocation)
        for t, ps in removed.items():
            pending[t] = pending.get(t, frozenset()) | ps
        if pending and self._owns_any(pending):
            return m.with_(state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=new_assigned,
                           partitions_pending_revocation=pending)
        # already revoked: only the assigned set shrinks, the state stays
        return m.with_(assigned_partitions=new_assigned)

    def _next(self, epoch: int, assigned: Mapping[uuid.UUID, frozenset]) -> ConsumerGroupMember:
        """``computeNextAssignment``."""
        m = self.member
        subscribed = self._subscribed_ids()
        own_pending = m.partitions_pending_revocation
        unreleased = False
        new_assigned: dict[uuid.UUID, frozenset] = {}
        revoke: dict[uuid.UUID, frozenset] = {}
        add: dict[uuid.UUID, frozenset] = {}
        for t in set(self.target) | set(assigned):
            target = self.target.get(t, frozenset()) if t in subscribed else frozenset()
            current = assigned.get(t, frozenset())
            keep = current & target
            gone = current - keep
            wanted = target - keep
            # KAFKA-19449: a partition this member itself still has pending is not unreleased
            free = frozenset(p for p in wanted if self.partition_epoch(t, p) == -1
                             or p in own_pending.get(t, frozenset()))
            if free != wanted:
                unreleased = True
            if keep:
                new_assigned[t] = keep
            if gone:
                revoke[t] = gone
            if free:
                add[t] = free
        if revoke and self._owns_any(revoke):
            return m.update_member_epoch(epoch, state=MemberState.UNREVOKED_PARTITIONS,
                                         assigned_partitions=new_assigned, partitions_pending_revocation=revoke)
        if add:
            for t, ps in add.items():
                new_assigned[t] = new_assigned.get(t, frozenset()) | ps
            state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            return m.update_member_epoch(self.target_epoch, state=state, assigned_partitions=new_assigned,
                                         partitions_pending_revocation={})
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return m.update_member_epoch(self.target_epoch, state=state, assigned_partitions=new_assigned,
                                     partitions_pending_revocation={})
