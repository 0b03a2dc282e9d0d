"""The target assignment of a consumer group and the records that store it (spec §4.1).

Follows Kafka's ``modern/TargetAssignmentBuilder`` (``ConsumerTargetAssignmentBuilder``): a spec
per member (the stored members, then the updated or removed ones), the assignor run over them, a
``ConsumerGroupTargetAssignmentMember`` record for every member whose target changed or who had
none, then ``ConsumerGroupTargetAssignmentMetadata`` with the group epoch.

It also builds the iteration order Kafka's assignors see (``assignors`` follows whatever order it
is given): member ids as a ``HashMap`` filled with the stored members then the updated ones
iterates them; each stored target as ``Assignment.fromRecord`` made it (topics in a default
``HashMap``, partitions in a ``HashSet``), because Kafka's in-memory target is always the replay of
its record. Where two keys share a hash bucket Kafka's order depends on its ``TimelineHashMap``; we
use the group's join order there (spec §4.2).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping

from ....record import consumer_offsets as R
from .assignors import GroupSpec, MemberSpec, SubscriptionType
from .javaorder import java_order, java_partitions
from .model import (ConsumerGroup, ConsumerGroupMember, MetadataImage, ResolvedRegularExpression, assignment,
                    target_assignment_epoch_record, target_assignment_record)


@dataclass
class TargetAssignmentResult:
    records: list[R.CoordinatorRecord]
    target: dict[str, dict[uuid.UUID, frozenset]]


def subscribed_topic_names(member: ConsumerGroupMember,
                           resolved: Mapping[str, ResolvedRegularExpression]) -> list[str]:
    """The member's topic names and, if resolved, its regex's topics (``UnionSet``: names first);
    an unresolved regex matches nothing."""
    names = sorted(member.subscribed_topic_names)
    if member.regex:
        rr = resolved.get(member.regex)
        if rr is not None:
            seen = set(names)
            names += [t for t in sorted(rr.topics) if t not in seen]
    return names


def stored_order(a: Mapping[uuid.UUID, frozenset]) -> dict[uuid.UUID, list[int]]:
    """A stored target in the order Kafka iterates it after ``Assignment.fromRecord``."""
    return {t: java_partitions(sorted(a[t])) for t in java_order(a)}


class TargetAssignmentBuilder:
    """``TargetAssignmentBuilder.ConsumerTargetAssignmentBuilder``."""

    def __init__(self, group_id: str, group_epoch: int, assignor):
        self.group_id = group_id
        self.group_epoch = group_epoch
        self.assignor = assignor
        self.members: Mapping[str, ConsumerGroupMember] = {}
        self.static_members: Mapping[str, str] = {}
        self.subscription_type = SubscriptionType.HOMOGENEOUS
        self.target_assignment: Mapping[str, Mapping[uuid.UUID, frozenset]] = {}
        self.inverted: Mapping[uuid.UUID, Mapping[int, str]] | None = None
        self.image = MetadataImage()
        self.resolved: Mapping[str, ResolvedRegularExpression] = {}
        self.updated: dict[str, ConsumerGroupMember | None] = {}

    @classmethod
    def for_group(cls, group: ConsumerGroup, group_epoch: int, assignor, image: MetadataImage,
                  subscription_type: SubscriptionType | None = None) -> "TargetAssignmentBuilder":
        """A builder over a group's stored state, as ``GroupMetadataManager.updateTargetAssignment``
        sets it up (the caller passes the subscription type the update leads to)."""
        b = cls(group.group_id, group_epoch, assignor)
        b.members = group.members
        b.static_members = group.static_members
        b.subscription_type = group.subscription_type if subscription_type is None else subscription_type
        b.target_assignment = group.target_assignment
        b.inverted = group.inverted_target
        b.image = image
        b.resolved = group.resolved_regexes
        return b

    def add_or_update_member(self, member_id: str, member: ConsumerGroupMember) -> "TargetAssignmentBuilder":
        self.updated[member_id] = member
        return self

    def remove_member(self, member_id: str) -> "TargetAssignmentBuilder":
        self.updated[member_id] = None
        return self

    def _spec(self, member: ConsumerGroupMember, target: Mapping[uuid.UUID, frozenset]) -> MemberSpec:
        return MemberSpec(tuple(self.image.topic_ids(subscribed_topic_names(member, self.resolved))),
                          stored_order(target), member.instance_id, member.rack_id)

    def build(self) -> TargetAssignmentResult:
        """Raises ``assignors.PartitionAssignorError`` when the assignor fails (the heartbeat then
        answers UNKNOWN_SERVER_ERROR)."""
        specs: dict[str, MemberSpec] = {}
        for mid, member in self.members.items():
            specs[mid] = self._spec(member, self.target_assignment.get(mid, {}))
        for mid, member in self.updated.items():
            if member is None:
                specs.pop(mid, None)
                continue
            target = self.target_assignment.get(mid, {})
            # a new static member replacing a departed one takes over its target
            if member.instance_id is not None:
                previous = self.static_members.get(member.instance_id)
                if previous is not None and previous != mid:
                    target = self.target_assignment.get(previous, {})
            specs[mid] = self._spec(member, target)

        ordered = {mid: specs[mid] for mid in java_order(specs)}
        result = self.assignor.assign(GroupSpec(ordered, self.subscription_type, self.inverted),
                                      self.image.partition_counts())

        records, target = [], {}
        for mid in ordered:
            new = assignment(result.get(mid, {}))
            target[mid] = new
            old = self.target_assignment.get(mid)
            if old is None or assignment(old) != new:
                records.append(target_assignment_record(self.group_id, mid, new))
        records.append(target_assignment_epoch_record(self.group_id, self.group_epoch))
        return TargetAssignmentResult(records, target)
