"""A consumer group and its members, as the group coordinator keeps them, and the metadata hash.

Follows Kafka's ``modern/consumer/ConsumerGroup`` (with ``ModernGroup``), ``ConsumerGroupMember``
(its ``Builder``), ``MemberState``, ``ConsumerGroup.ConsumerGroupState``, ``ResolvedRegularExpression``,
``Utils.computeTopicHash``/``computeGroupHash`` (KIP-1101) and ``GroupMetadataManager.replay`` for
the consumer-group records (types 3-8 and 16 of ``record/consumer_offsets``). Spec §1 and §7.3.

State changes only by replay, as in Kafka: an operation reads the group, produces records, and
the records, once appended, are fed to ``replay`` — loading is the same replay. Members are
immutable values (``dataclasses.replace`` is the ``Builder``); the group derives its state, its
subscription type, its static members and the partition epoch map from what replay stored.

Sans-IO: no clock, no threads, no files. Topic ids are ``uuid.UUID``; an assignment is
``{topic id: frozenset of partitions}`` with no empty entry.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

import xxhash

from ....record import consumer_offsets as R
from .assignors import SubscriptionType
from .javaorder import java_order, table_size_for

Assignment = Mapping[uuid.UUID, frozenset]
EMPTY: Assignment = {}

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """``MemberState``: a stored value it does not know reads as UNKNOWN (the member is fenced)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(str, enum.Enum):
    """``ConsumerGroup.ConsumerGroupState``; its value is what ListGroups and describe print."""
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class IllegalStateError(RuntimeError):
    """Kafka's ``IllegalStateException`` in replay: the records contradict each other (loading
    stops on it in Kafka; the caller decides)."""


def assignment(mapping: Mapping[uuid.UUID, Iterable[int]] | Iterable = ()) -> dict[uuid.UUID, frozenset]:
    """An assignment from ``{topic: partitions}`` or (topic, partitions) pairs; empty topics dropped."""
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    out: dict[uuid.UUID, frozenset] = {}
    for t, ps in items:
        ps = frozenset(ps)
        if ps:
            out[t] = out.get(t, frozenset()) | ps
    return out


def to_topic_partitions(a: Assignment) -> R.TopicPartitions:
    """An assignment as records list it: topics as Kafka's ``HashMap`` iterates them, partitions
    ascending (the order is free to readers, ``Assignment.fromRecord`` makes sets of them)."""
    return [(t, sorted(a[t])) for t in java_order(a)]


def from_topic_partitions(tps: R.TopicPartitions) -> dict[uuid.UUID, frozenset]:
    """``Utils.assignmentFromTopicPartitions`` / ``Assignment.fromRecord``."""
    return assignment(tps)


@dataclass(frozen=True, eq=True)
class ResolvedRegularExpression:
    topics: frozenset = frozenset()
    version: int = -1
    timestamp: int = -1


@dataclass(frozen=True)
class ConsumerGroupMember:
    """``ConsumerGroupMember``; a new one has epoch 0, previous epoch -1, STABLE, regex "" and
    rebalance timeout -1 (its ``Builder``)."""
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    subscribed_topic_regex: str | None = ""
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict, hash=False)
    partitions_pending_revocation: Assignment = field(default_factory=dict, hash=False)
    classic_member_metadata: R.ClassicMemberMetadata | None = field(default=None, hash=False)

    def with_(self, **changes) -> "ConsumerGroupMember":
        return replace(self, **changes)

    def update_member_epoch(self, epoch: int, **changes) -> "ConsumerGroupMember":
        """``Builder.updateMemberEpoch``: the previous epoch becomes the current one, even when the
        epoch does not change (Kafka's code; spec §3 R4 says "any epoch change")."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def use_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def regex(self) -> str | None:
        """The subscribed regex, or None when the member has none (``""`` or null)."""
        return self.subscribed_topic_regex or None

    # -- records (GroupCoordinatorRecordHelpers, Builder.updateWith) ----------------------------
    def metadata_value(self) -> R.ConsumerGroupMemberMetadataValue:
        return R.ConsumerGroupMemberMetadataValue(
            self.instance_id, self.rack_id, self.client_id, self.client_host,
            sorted(self.subscribed_topic_names), self.subscribed_topic_regex,
            self.rebalance_timeout_ms, self.server_assignor, self.classic_member_metadata)

    def assignment_value(self) -> R.ConsumerGroupCurrentMemberAssignmentValue:
        return R.ConsumerGroupCurrentMemberAssignmentValue(
            self.member_epoch, self.previous_member_epoch, int(self.state),
            to_topic_partitions(self.assigned_partitions),
            to_topic_partitions(self.partitions_pending_revocation))

    def with_metadata(self, v: R.ConsumerGroupMemberMetadataValue) -> "ConsumerGroupMember":
        return replace(self, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                       client_host=v.client_host, subscribed_topic_names=frozenset(v.subscribed_topic_names),
                       subscribed_topic_regex=v.subscribed_topic_regex,
                       rebalance_timeout_ms=v.rebalance_timeout_ms, server_assignor=v.server_assignor,
                       classic_member_metadata=v.classic_member_metadata)

    def with_assignment(self, v: R.ConsumerGroupCurrentMemberAssignmentValue) -> "ConsumerGroupMember":
        return replace(self, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                       state=MemberState.from_value(v.state),
                       assigned_partitions=from_topic_partitions(v.assigned_partitions),
                       partitions_pending_revocation=from_topic_partitions(v.partitions_pending_revocation))


@dataclass
class SubscriptionCount:
    by_name: int = 0
    by_regex: int = 0


# -- topic metadata and the metadata hash (KIP-1101) ----------------------------------------------

TOPIC_HASH_MAGIC_BYTE = 0


@dataclass(frozen=True)
class TopicImage:
    """What the coordinator knows of a topic: id, name, partition count and, with ``broker.rack``,
    each partition's replica racks (``CoordinatorMetadataImage.TopicMetadata``)."""
    topic_id: uuid.UUID
    name: str
    partitions: int
    racks: tuple[tuple[str, ...], ...] = ()      # per partition; () = no rack information


class MetadataImage:
    """The topics by name and by id, and a version bumped by every change (spec §1.5)."""

    def __init__(self, topics: Iterable[TopicImage] = (), version: int = 0):
        self.by_name = {t.name: t for t in topics}
        self.by_id = {t.topic_id: t for t in self.by_name.values()}
        self.version = version

    def topic(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def partition_counts(self) -> dict[uuid.UUID, int]:
        return {t.topic_id: t.partitions for t in self.by_id.values()}

    def topic_ids(self, names: Iterable[str]) -> list[uuid.UUID]:
        """``TopicIds``: the ids of the names that exist, in the names' order."""
        out = []
        for n in names:
            t = self.by_name.get(n)
            if t is not None:
                out.append(t.topic_id)
        return out


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _hash4j_string(s: str) -> bytes:
    # hash4j's putString: the UTF-16 code units little-endian, then the length in code units
    units = s.encode("utf-16-le", "surrogatepass")
    return units + (len(units) // 2).to_bytes(4, "little", signed=True)


def topic_hash_input(topic: TopicImage) -> bytes:
    """The bytes ``Utils.computeTopicHash`` streams into XXH3-64 (hash4j ``HashStream64``:
    little-endian integers, strings as code units then length)."""
    msb, lsb = (topic.topic_id.int >> 64), (topic.topic_id.int & ((1 << 64) - 1))
    out = bytearray([TOPIC_HASH_MAGIC_BYTE])
    out += msb.to_bytes(8, "little") + lsb.to_bytes(8, "little")
    out += _hash4j_string(topic.name)
    out += topic.partitions.to_bytes(4, "little", signed=True)
    for i in range(topic.partitions):
        out += i.to_bytes(4, "little", signed=True)
        racks = topic.racks[i] if i < len(topic.racks) else ()
        for rack in sorted(racks, key=lambda r: r.encode("utf-16-be", "surrogatepass")):
            out += (len(rack.encode("utf-16-le", "surrogatepass")) // 2).to_bytes(4, "little", signed=True)
            out += _hash4j_string(rack)
    return bytes(out)


def compute_topic_hash(name: str, image: MetadataImage) -> int:
    """``Utils.computeTopicHash``: 0 for a topic that does not exist."""
    topic = image.topic(name)
    if topic is None:
        return 0
    return _signed64(xxhash.xxh3_64_intdigest(topic_hash_input(topic)))


def compute_group_hash(topic_hashes: Mapping[str, int]) -> int:
    """``Utils.computeGroupHash``: XXH3-64 over the topic hashes (int64 little-endian) in name
    order (``String.compareTo``); 0 for none."""
    if not topic_hashes:
        return 0
    data = b"".join((topic_hashes[n] & ((1 << 64) - 1)).to_bytes(8, "little")
                    for n in sorted(topic_hashes, key=lambda s: s.encode("utf-16-be", "surrogatepass")))
    return _signed64(xxhash.xxh3_64_intdigest(data))


def compute_metadata_hash(names: Iterable[str], image: MetadataImage,
                          cache: dict[str, int] | None = None) -> int:
    """``GroupMetadataManager.computeMetadataHash``: the group hash of the subscribed topics
    that exist (``cache`` keeps topic hashes between calls, as Kafka's topicHashCache)."""
    hashes = {}
    for n in names:
        if image.topic(n) is None:
            continue
        if cache is not None and n in cache:
            hashes[n] = cache[n]
            continue
        h = compute_topic_hash(n, image)
        if cache is not None:
            cache[n] = h
        hashes[n] = h
    return compute_group_hash(hashes)


# -- the group ------------------------------------------------------------------------------------

class ConsumerGroup:
    """``ConsumerGroup``: epochs, members (in the order they joined), target assignment, resolved
    regexes; the rest is derived."""

    protocol_type = "consumer"

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        # 0 for a new group, as Kafka's TimelineInteger starts; -1 only after the type 6 tombstone
        # (spec §1.1 says -1 = none: Kafka's code is followed)
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, dict[uuid.UUID, frozenset]] = {}
        self.inverted_target: dict[uuid.UUID, dict[int, str]] = {}
        self.resolved_regexes: dict[str, ResolvedRegularExpression] = {}
        self.partition_epochs: dict[uuid.UUID, dict[int, int]] = {}
        self.static_members: dict[str, str] = {}
        # a type 4 record was replayed: the next heartbeat writes its tombstone (KIP-1101)
        self.has_subscription_metadata_record = False

    # -- derived ----------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        """``ConsumerGroup.maybeUpdateGroupState``."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_regexes(self) -> Counter:
        """Regex -> number of members subscribed to it."""
        return Counter(m.regex for m in self.members.values() if m.regex)

    def subscribed_topic_names(self) -> dict[str, SubscriptionCount]:
        """Topic name -> how many members name it, how many resolved regexes match it
        (``ModernGroup.subscribedTopicNames`` with ``ConsumerGroup``'s regex counts)."""
        out: dict[str, SubscriptionCount] = {}
        for m in self.members.values():
            for n in m.subscribed_topic_names:
                out.setdefault(n, SubscriptionCount()).by_name += 1
        for rr in self.resolved_regexes.values():
            for n in rr.topics:
                out.setdefault(n, SubscriptionCount()).by_regex += 1
        return out

    @property
    def subscription_type(self) -> SubscriptionType:
        return subscription_type(self.subscribed_regexes(), self.subscribed_topic_names(), len(self.members))

    def subscribed_topics(self, member: ConsumerGroupMember) -> set[str]:
        """The names a member subscribes: its names and its resolved regex's topics (§1.4; an
        unresolved regex matches nothing)."""
        names = set(member.subscribed_topic_names)
        if member.regex:
            rr = self.resolved_regexes.get(member.regex)
            if rr is not None:
                names |= rr.topics
        return names

    def current_partition_epoch(self, topic: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition (assigned or pending revocation); -1 if free."""
        return self.partition_epochs.get(topic, {}).get(partition, -1)

    def target(self, member_id: str) -> dict[uuid.UUID, frozenset]:
        return self.target_assignment.get(member_id, {})

    def preferred_server_assignor(self, old: ConsumerGroupMember | None = None,
                                  new: ConsumerGroupMember | None = None) -> str | None:
        """``computePreferredServerAssignor``: the assignor most members name, counting ``new``
        instead of ``old``; on a tie the first in the iteration order of Kafka's ``HashMap`` copy."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if old is not None and old.server_assignor:
            counts[old.server_assignor] -= 1
        if new is not None and new.server_assignor:
            counts[new.server_assignor] += 1
        names = [n for n, c in counts.items() if c > 0]
        if not names:
            return None
        # new HashMap<>(map) of the group's counts (taken as iterating like a default HashMap):
        # capacity tableSizeFor(size / 0.75 + 1); Stream.max keeps the first of equal counts
        # (checked on JDK 17: {"range": 1, "uniform": 1} gives "uniform")
        best = None
        for n in java_order(java_order(names), table_size_for(int(len(names) / 0.75 + 1))):
            if best is None or counts[n] > counts[best]:
                best = n
        return best

    def classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.use_classic_protocol())

    # -- offsets (ConsumerGroup.isSubscribedToTopic, offsetExpirationCondition) ----------------------
    def is_subscribed_to_topic(self, topic: str) -> bool:
        """A member subscribes to it by name or through a resolved regex: its offsets neither
        expire nor may be deleted (GROUP_SUBSCRIBED_TO_TOPIC)."""
        return topic in self.subscribed_topic_names()

    @staticmethod
    def offset_base_timestamp():
        """A consumer group's offsets expire from their commit (``offsetExpirationCondition``)."""
        return lambda o: o.commit_timestamp

    # -- updates (called by replay) -------------------------------------------------------------
    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        if old is not None:
            self._remove_partition_epochs(old.assigned_partitions, old.member_epoch)
            self._remove_partition_epochs(old.partitions_pending_revocation, old.member_epoch)
            if old.instance_id is not None and old.instance_id != new.instance_id \
                    and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self._add_partition_epochs(new.assigned_partitions, new.member_epoch)
        self._add_partition_epochs(new.partitions_pending_revocation, new.member_epoch)
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._remove_partition_epochs(old.assigned_partitions, old.member_epoch)
        self._remove_partition_epochs(old.partitions_pending_revocation, old.member_epoch)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def update_target_assignment(self, member_id: str, new: Mapping[uuid.UUID, Iterable[int]]) -> None:
        self.remove_target_assignment(member_id)
        a = assignment(new)
        self.target_assignment[member_id] = a
        for t, ps in a.items():
            inv = self.inverted_target.setdefault(t, {})
            for p in ps:
                inv[p] = member_id

    def remove_target_assignment(self, member_id: str) -> None:
        old = self.target_assignment.pop(member_id, None)
        if not old:
            return
        for t, ps in old.items():
            inv = self.inverted_target.get(t)
            if inv is None:
                continue
            for p in ps:
                if inv.get(p) == member_id:
                    del inv[p]
            if not inv:
                del self.inverted_target[t]

    def _add_partition_epochs(self, a: Assignment, epoch: int) -> None:
        for t, ps in a.items():
            d = self.partition_epochs.setdefault(t, {})
            for p in ps:
                if p in d:
                    raise IllegalStateError(f"Cannot set the epoch of {t}-{p} to {epoch} because the "
                                            f"partition is still owned at epoch {d[p]}")
                d[p] = epoch

    def _remove_partition_epochs(self, a: Assignment, epoch: int) -> None:
        for t, ps in a.items():
            d = self.partition_epochs.get(t)
            if d is None:
                raise IllegalStateError(f"Cannot remove the epoch {epoch} from {t} because it does not "
                                        f"have any epoch")
            for p in ps:
                prev = d.pop(p, None)
                if prev != epoch:
                    raise IllegalStateError(f"Cannot remove the epoch {epoch} from {t}-{p} because the "
                                            f"partition is still owned at a different epoch {prev}")
            if not d:
                del self.partition_epochs[t]


def subscription_type(regexes: Mapping[str, int], names: Mapping[str, SubscriptionCount],
                      members: int) -> SubscriptionType:
    """``ConsumerGroup.subscriptionType`` (spec §1.4)."""
    if not regexes:
        for c in names.values():
            if c.by_name != members:
                return SubscriptionType.HETEROGENEOUS
        return SubscriptionType.HOMOGENEOUS
    # Kafka looks at one regex only: with two or more, none can count every member
    if next(iter(regexes.values())) == members:
        for c in names.values():
            if c.by_regex != 1 or c.by_name > 0:
                return SubscriptionType.HETEROGENEOUS
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


# -- replay (GroupMetadataManager.replay for the consumer-group records) ------------------------

def replay(groups: dict[str, ConsumerGroup], record: R.CoordinatorRecord) -> None:
    """Apply one consumer-group record (types 3-8, 16) to ``groups``: any record may create the
    group, tombstones of things that are absent are ignored, and Kafka's sanity checks raise
    ``IllegalStateError`` (KAFKA-17306)."""
    key, value = record.key, record.value
    gid = key.group
    group = groups.get(gid)
    if group is None:
        if value is None:
            return
        group = groups[gid] = ConsumerGroup(gid)

    if isinstance(key, R.ConsumerGroupMetadataKey):
        if value is not None:
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
            return
        if group.members:
            raise IllegalStateError(f"Received a tombstone record to delete group {gid} but the group "
                                    f"still has {len(group.members)} members.")
        if group.target_assignment:
            raise IllegalStateError(f"Received a tombstone record to delete group {gid} but the target "
                                    f"assignment still has {len(group.target_assignment)} members.")
        if group.assignment_epoch != -1:
            raise IllegalStateError(f"Received a tombstone record to delete group {gid} but did not "
                                    f"receive ConsumerGroupTargetAssignmentMetadataValue tombstone.")
        del groups[gid]
    elif isinstance(key, R.ConsumerGroupPartitionMetadataKey):
        group.has_subscription_metadata_record = value is not None
    elif isinstance(key, R.ConsumerGroupMemberMetadataKey):
        old = group.members.get(key.member_id)
        if value is not None:
            group.update_member((old or ConsumerGroupMember(key.member_id)).with_metadata(value))
            return
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            raise IllegalStateError(f"Received a tombstone record to delete member {key.member_id} but "
                                    f"did not receive ConsumerGroupCurrentMemberAssignmentValue tombstone.")
        if key.member_id in group.target_assignment:
            raise IllegalStateError(f"Received a tombstone record to delete member {key.member_id} but "
                                    f"did not receive ConsumerGroupTargetAssignmentMetadataValue tombstone.")
        group.remove_member(key.member_id)
    elif isinstance(key, R.ConsumerGroupTargetAssignmentMemberKey):
        if value is not None:
            group.update_target_assignment(key.member_id, from_topic_partitions(value.topic_partitions))
        else:
            group.remove_target_assignment(key.member_id)
    elif isinstance(key, R.ConsumerGroupTargetAssignmentMetadataKey):
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
            return
        if group.target_assignment:
            raise IllegalStateError(f"Received a tombstone record to delete target assignment of {gid} "
                                    f"but the assignment still has {len(group.target_assignment)} members.")
        group.assignment_epoch = -1
    elif isinstance(key, R.ConsumerGroupCurrentMemberAssignmentKey):
        old = group.members.get(key.member_id)
        if value is not None:
            group.update_member((old or ConsumerGroupMember(key.member_id)).with_assignment(value))
        elif old is not None:
            group.update_member(replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                        assigned_partitions={}, partitions_pending_revocation={}))
    elif isinstance(key, R.ConsumerGroupRegularExpressionKey):
        if value is not None:
            group.resolved_regexes[key.regex] = ResolvedRegularExpression(
                frozenset(value.topics), value.version, value.timestamp)
        else:
            group.resolved_regexes.pop(key.regex, None)
    else:
        raise TypeError(f"not a consumer-group record: {type(key).__name__}")


# -- the records a group writes (GroupCoordinatorRecordHelpers) ----------------------------------

def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> R.CoordinatorRecord:
    return R.consumer_group_record(R.ConsumerGroupMemberMetadataKey(group_id, member.member_id),
                                   member.metadata_value())


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> R.CoordinatorRecord:
    return R.consumer_group_record(R.ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                                   member.assignment_value())


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> R.CoordinatorRecord:
    return R.consumer_group_record(R.ConsumerGroupMetadataKey(group_id),
                                   R.ConsumerGroupMetadataValue(epoch, metadata_hash))


def target_assignment_record(group_id: str, member_id: str, a: Assignment) -> R.CoordinatorRecord:
    return R.consumer_group_record(R.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                                   R.ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(a)))


def target_assignment_epoch_record(group_id: str, epoch: int) -> R.CoordinatorRecord:
    return R.consumer_group_record(R.ConsumerGroupTargetAssignmentMetadataKey(group_id),
                                   R.ConsumerGroupTargetAssignmentMetadataValue(epoch))


def regex_record(group_id: str, regex: str, rr: ResolvedRegularExpression) -> R.CoordinatorRecord:
    return R.consumer_group_record(R.ConsumerGroupRegularExpressionKey(group_id, regex),
                                   R.ConsumerGroupRegularExpressionValue(sorted(rr.topics), rr.version,
                                                                         rr.timestamp))


def tombstones_for_group(group: ConsumerGroup) -> list[R.CoordinatorRecord]:
    """``ConsumerGroup.createGroupTombstoneRecords`` (spec §7.2, offsets excepted): 8 per member,
    7 per member, 6, 5 per member, 16 per regex, 4, 3."""
    g, cg = group.group_id, R.consumer_group_record
    out = [cg(R.ConsumerGroupCurrentMemberAssignmentKey(g, m), None) for m in group.members]
    out += [cg(R.ConsumerGroupTargetAssignmentMemberKey(g, m), None) for m in group.members]
    out.append(cg(R.ConsumerGroupTargetAssignmentMetadataKey(g), None))
    out += [cg(R.ConsumerGroupMemberMetadataKey(g, m), None) for m in group.members]
    out += [cg(R.ConsumerGroupRegularExpressionKey(g, r), None) for r in group.resolved_regexes]
    out.append(cg(R.ConsumerGroupPartitionMetadataKey(g), None))
    out.append(cg(R.ConsumerGroupMetadataKey(g), None))
    return out


def tombstones_for_member(group_id: str, member_id: str) -> list[R.CoordinatorRecord]:
    """A fenced member's records (spec §2.5): 8, 7, 5."""
    cg = R.consumer_group_record
    return [cg(R.ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            cg(R.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
            cg(R.ConsumerGroupMemberMetadataKey(group_id, member_id), None)]
