"""Kafka's ``GroupMetadataManager``, the consumer-protocol half (KIP-848): ConsumerGroupHeartbeat
(join, heartbeat, leave, static membership), ConsumerGroupDescribe, the session and rebalance
timers, fencing, regex subscriptions resolved against the topics, the metadata-change hook, the
consumer groups' part of ListGroups and DeleteGroups, classic members inside consumer groups and
the online migration between the protocols (upgrade, downgrade), and the replay of their records
(types 3-8 and 16 of ``record/consumer_offsets``). Spec: consumer-protocol.md §2, §5-§8, §10, §11.

State changes only by replay, as in Kafka: an operation reads the group, produces records and the
response it will give; the caller appends the records and replays them (``replay``), then runs
``on_written`` (which turns the response into the append's error when it failed). Loading is the
same replay. The sans-IO cores live in ``consumer/`` (model, assignors, reconciliation, target
assignment, regexes); this module wires them as ``consumerGroupHeartbeat`` does.

Where Kafka's code and the spec differ, the code is followed (and said so where it matters):
* a static member rejoining with epoch 0 under its *own* member id is accepted as a known member
  (KAFKA-19233's rule for dynamic members; Kafka would answer UNRELEASED_INSTANCE_ID to a static
  member whose leave was lost, which librdkafka cannot recover from);
* the subscription type handed to the assignor counts the updated member's regex, as the
  resolution that follows does (Kafka's ``updateSubscriptionMetadata`` reads the group's counts
  before the update; both assignors accept either type, only the shape can differ);
* regex resolution runs synchronously right after the heartbeat's own write, as a second
  operation (Kafka runs it on an executor and writes its result as a separate operation too), so
  the heartbeat introducing a regex gets no partitions for it and a later one does (spec §5);
* migration (§11): the downgrade votes the first protocol of the first remaining member that all
  support (Kafka's ClassicGroup votes); the upgrade's group is the replay of its own conversion
  records into a group kept aside until they are written; a classic static member replacing the
  last consumer member (KAFKA-19546's downgrade on replacement) is not handled.

Sans-IO: an injected clock, timers in the shared ``Timer``, the topics through ``image()``.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections import Counter
from concurrent.futures import Future
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from ...record import consumer_offsets as R
from .api_data import (DescribedConsumerGroup, DescribedConsumerMember, HeartbeatRequest, HeartbeatResponse,
                       JoinResponse, ListedGroup, SyncResponse)
from .config import GroupConfig
from .consumer import regex as RX
from .consumer.assignors import ASSIGNORS, PartitionAssignorError
from .consumer.model import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroup,
                             ConsumerGroupMember, ConsumerGroupState, IllegalStateError, MemberState,
                             MetadataImage, ResolvedRegularExpression, SubscriptionCount, compute_metadata_hash,
                             current_assignment_record, group_epoch_record, member_metadata_record,
                             regex_record, replay as replay_record, subscription_type,
                             target_assignment_epoch_record, target_assignment_record, tombstones_for_group,
                             tombstones_for_member)
from .consumer.reconcile import CurrentAssignmentBuilder, FencedMemberEpochError
from .consumer.target_assignment import TargetAssignmentBuilder
from ..runtime import CoordinatorPartitions, GroupError, Outcome, Timer, append_error

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

CONSUMER = "consumer"                      # the group type and protocol type ListGroups names
REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000   # GroupMetadataManager's
NEVER = 1 << 62


def session_key(group_id: str, member_id: str):
    return ("consumer-session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str):
    return ("consumer-rebalance", group_id, member_id)


def join_key(group_id: str, member_id: str):
    """A classic member of a consumer group told to rejoin (REBALANCE_IN_PROGRESS)."""
    return ("consumer-classic-join", group_id, member_id)


def sync_key(group_id: str, member_id: str):
    """A classic member of a consumer group answered its JoinGroup, waiting for its SyncGroup."""
    return ("consumer-classic-sync", group_id, member_id)


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def _blank(value) -> bool:
    """``throwIfEmptyString``: a given string that is empty once trimmed (null passes)."""
    return value is not None and not value.strip()


def check_heartbeat(req: HeartbeatRequest, assignors) -> None:
    """GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid (spec §2.2 rule 4):
    a GroupError INVALID_REQUEST, then UNSUPPORTED_ASSIGNOR, when the request is malformed."""
    def bad(message: str) -> GroupError:
        return GroupError(ErrorCode.invalid_request, message)
    epoch = req.member_epoch
    if (req.api_version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(req.member_id):
        raise bad("MemberId can't be empty.")
    if _blank(req.group_id):
        raise bad("GroupId can't be empty.")
    if _blank(req.instance_id):
        raise bad("InstanceId can't be empty.")
    if _blank(req.rack_id):
        raise bad("RackId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise bad("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise bad("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise bad("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise bad("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise GroupError(ErrorCode.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported. "
                                                         f"Supported assignors: {', '.join(assignors)}.")


def _same_partitions(owned, assigned) -> bool:
    """The owned partitions of a heartbeat are exactly the member's assignment."""
    got = {t: frozenset(ps) for t, ps in owned if ps}
    return got == {t: ps for t, ps in assigned.items() if ps}


def _is_subset(owned, assigned) -> bool:
    """``GroupMetadataManager.isSubset``: null owned partitions are no subset."""
    if owned is None:
        return False
    for t, ps in owned:
        if ps and not set(ps) <= assigned.get(t, frozenset()):
            return False
    return True


class ConsumerGroupManager:
    """The consumer groups of the broker; see the module docstring. ``classic`` is the classic
    half (``GroupMetadataManager``), consulted for the group ids both share; ``image()`` gives the
    topics as they are now (``MetadataImage``)."""

    def __init__(self, config: GroupConfig, clock: Callable[[], int], timer: Timer,
                 partitions: CoordinatorPartitions, classic,
                 image: Callable[[], MetadataImage] | None = None):
        self.config = config
        self.clock = clock
        self.timer = timer
        self.partitions = partitions
        self.classic = classic
        self.image: Callable[[], MetadataImage] = image or MetadataImage
        # group config lookups (consumer.session.timeout.ms, consumer.heartbeat.interval.ms): the
        # service plugs in the data dir's dynamic group configs
        self.group_setting: Callable[[str, str], int | None] = lambda group_id, name: None
        self.groups: dict[str, ConsumerGroup] = {}
        # group -> (deadline, epoch) of its next metadata refresh (ModernGroup.metadataRefreshDeadline);
        # absent = due (a group loaded or never refreshed), as Kafka's starts at 0
        self._refresh: dict[str, tuple[int, int]] = {}
        self.last_topic_creation_version = -1      # lastMetadataImageWithNewTopics
        self.topic_hash_cache: dict[str, int] = {}
        self._pending: list[Outcome] = []
        self._after_write: list = []             # callbacks an operation's outcome runs once written
        self._unacked: dict[str, set[str]] = {}     # group -> members whose assignment may be lost
        self.rebalances = 0                         # consumer-group-rebalance-count (epoch bumps)

    # == ConsumerGroupHeartbeat =======================================================================
    def heartbeat(self, req: HeartbeatRequest) -> tuple[Outcome, HeartbeatResponse]:
        resp = HeartbeatResponse()
        self._after_write = []
        # the handler checks first (after the ACLs, as Kafka); checked again here so that nothing
        # reaching the coordinator can be malformed
        try:
            check_heartbeat(req, self.config.consumer_assignors)
            self.partitions.check_loaded(req.group_id)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                outcome = self._leave(req, resp)
            else:
                outcome = self._heartbeat(req, resp)
        except GroupError as e:
            return Outcome(), resp.fail(e.code, str(e))
        except FencedMemberEpochError as e:
            return Outcome(), resp.fail(ErrorCode.fenced_member_epoch, str(e))
        except RX.InvalidRegularExpressionError as e:
            return Outcome(), resp.fail(ErrorCode.invalid_regular_expression, str(e))
        except PartitionAssignorError as e:
            msg = f"Failed to compute a new target assignment: {e}"
            log.error(f"[GroupId {req.group_id}] {msg}.")
            return Outcome(), resp.fail(ErrorCode.unknown_server_error, msg)
        after = outcome.on_written

        def written(error):
            if error is not None:
                resp.fail(append_error(error))
            if after is not None:
                after(error)
        return Outcome(outcome.records, written), resp

    def _heartbeat(self, req: HeartbeatRequest, resp: HeartbeatResponse) -> Outcome:
        now = self.clock()
        image = self.image()
        gid = req.group_id
        recs: list = []
        create = req.member_epoch == 0

        # H1: the group (created only by the records, once written)
        group = self.groups.get(gid)
        if group is None:
            classic = self.classic.groups.get(gid)
            upgraded = None
            if classic is not None:
                if not create:
                    raise GroupError(ErrorCode.group_id_not_found, f"Group {gid} is not a consumer group.")
                if classic.is_empty():
                    # an empty classic group (or a simple one of manual commits) becomes a consumer
                    # group; its offsets stay
                    log.info(f"[GroupId {gid}] Converting the empty classic group to a consumer group.")
                    recs.append(R.group_metadata_record(gid, None))
                else:
                    upgraded = self._upgrade(classic, image, recs)
            elif not create:
                raise GroupError(ErrorCode.group_id_not_found, f"Consumer group {gid} not found.")
            group = upgraded or ConsumerGroup(gid)

        # H2: the size
        if len(group.members) >= self.config.consumer_max_size and \
                (not req.member_id or req.member_id not in group.members):
            raise GroupError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.consumer_max_size} members.")

        # H3, H4: the member
        member_id = req.member_id or new_member_id()
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req)
        else:
            member = self._static_member(group, member_id, req, recs)
        in_group = member.member_id in group.members
        replaced = None
        if req.instance_id is not None and not in_group:
            prev = group.static_members.get(req.instance_id)
            replaced = group.members.get(prev) if prev is not None else None
        # the member as the group knows it, for the counts it contributes
        counted = group.members.get(member.member_id) or replaced

        # H5: update
        changes = {"client_id": req.client_id, "client_host": req.client_host, "classic_member_metadata": None}
        if req.instance_id is not None:
            changes["instance_id"] = req.instance_id
        if req.rack_id is not None:
            changes["rack_id"] = req.rack_id
        if req.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            changes["server_assignor"] = req.server_assignor
        if req.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = frozenset(req.subscribed_topic_names)
        if req.subscribed_topic_regex is not None:
            changes["subscribed_topic_regex"] = req.subscribed_topic_regex
        updated = member.with_(**changes)
        updated, resolve = self._update_member(group, member, updated, replaced, counted, req.topic_partitions,
                                               now, image, recs)

        # H10: the session
        self._schedule_session_timeout(gid, updated.member_id)

        # H11, H12: the answer
        resp.member_id = updated.member_id
        resp.member_epoch = updated.member_epoch
        resp.heartbeat_interval_ms = self.heartbeat_interval_ms(gid)
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None and
                                         (req.subscribed_topic_names is not None or
                                          req.subscribed_topic_regex is not None))
        # Kafka sends the assignment on a full request or a change only. Here a member with
        # partitions to revoke is sent it again until it acknowledges it (owned partitions equal
        # to it, as librdkafka's ack heartbeat and Kafka's client send once they reconciled):
        # librdkafka gives up on a ConsumerGroupHeartbeat after one heartbeat interval and
        # retries the same request (not full, no owned partitions), so an answer later than that
        # lost the revocation for good and the group stayed Reconciling (30 members under load,
        # benchmarks/groups.py). A client ignores an assignment equal to the one it has. Only
        # then: repeated in every state, librdkafka's 0045_subscribe_many_updates (subscriptions
        # changed quickly) got INVALID_REQUEST (a rejoin naming partitions, it seems) in one run.
        unacked = self._unacked_members(group)
        acked = req.topic_partitions is not None and \
            _same_partitions(req.topic_partitions, updated.assigned_partitions)
        if full or updated.assigned_partitions != member.assigned_partitions or \
                (updated.member_id in unacked and not acked and updated.state is MemberState.UNREVOKED_PARTITIONS):
            unacked.add(updated.member_id)
            resp.assignment = {t: sorted(ps) for t, ps in updated.assigned_partitions.items()}
        if acked:
            unacked.discard(updated.member_id)

        after, self._after_write = self._after_write, []

        def written(error):
            for fn in after:
                fn(error)
            if error is None and resolve:
                self._pending.append(self._resolve_regexes(gid, resolve, req.describable))
        return Outcome(recs, written)

    def _unacked_members(self, group: ConsumerGroup) -> set:
        """The members of ``group`` sent an assignment they have not acknowledged yet (in memory
        only: after a restart clients send full requests, answered with the assignment anyway).
        Members and groups gone are dropped here, when the sets outgrow what they track."""
        gid = group.group_id
        if len(self._unacked) > len(self.groups) + 1:
            for stale in [g for g in self._unacked if g not in self.groups and g != gid]:
                del self._unacked[stale]
        unacked = self._unacked.setdefault(gid, set())
        if len(unacked) > len(group.members):
            unacked.intersection_update(group.members)
        return unacked

    def _update_member(self, group: ConsumerGroup, member, updated, replaced, counted, owned, now: int,
                       image, recs: list):
        """H5 (its record) to H9 of the heartbeat, shared with a classic member's JoinGroup: the
        member updated to ``updated``, the regex, the group epoch, the target and the
        reconciliation; (the member as it ends, the regexes to resolve after the write or None)."""
        gid = group.group_id
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        if updated != member:
            recs.append(member_metadata_record(gid, updated))

        # H6: the regex
        regex_changed, regex_bump, resolve = self._update_regex(group, counted, member, updated, now, recs)

        # H7: the group epoch
        bump = group.group_epoch == 0 or names_changed or regex_bump
        group_epoch = group.group_epoch
        names = self._subscribed_names(group, counted, updated)
        regexes = group.subscribed_regexes()
        if counted is not None and counted.regex:
            regexes[counted.regex] -= 1
        if updated.regex:
            regexes[updated.regex] += 1
        regexes = Counter({r: c for r, c in regexes.items() if c > 0})
        n_members = len(group.members) + (0 if counted is not None else 1)
        sub_type = subscription_type(regexes, names, n_members)
        if bump or self._refresh_due(group, now):
            h = compute_metadata_hash(names, image, self.topic_hash_cache)
            if h != group.metadata_hash:
                if not bump:
                    log.info(f"[GroupId {gid}] Computed new metadata hash: {h}.")
                bump = True
            if bump:
                group_epoch += 1
                recs.append(group_epoch_record(gid, group_epoch, h))
                self.rebalances += 1
                log.info(f"[GroupId {gid}] Bumped group epoch to {group_epoch} with metadata hash {h}.")
                if group.has_subscription_metadata_record:
                    recs.append(R.consumer_group_record(R.ConsumerGroupPartitionMetadataKey(gid), None))
            self._refresh[gid] = (NEVER, group_epoch)

        # H8: the target assignment
        if group_epoch > group.assignment_epoch:
            target = self._update_target(group, group_epoch, member, updated, sub_type, image, recs)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.target(updated.member_id)
            if replaced is not None and updated.member_id not in group.target_assignment:
                target = group.target(replaced.member_id)

        # H9: reconciliation
        subscription_changed = names_changed or regex_changed
        if not (updated.is_reconciled_to(target_epoch) and not subscription_changed):
            new = (CurrentAssignmentBuilder(updated).with_metadata_image(image)
                   .with_target_assignment(target_epoch, target)
                   .with_subscription_changed(subscription_changed)
                   .with_resolved_regexes(group.resolved_regexes)
                   .with_current_partition_epoch(group.current_partition_epoch)
                   .with_owned_partitions(owned).build())
            if new != updated:
                recs.append(current_assignment_record(gid, new))
                log.info(f"[GroupId {gid}] Member {new.member_id} new assignment state: epoch={new.member_epoch}, "
                         f"previousEpoch={new.previous_member_epoch}, state={new.state.name}, "
                         f"assigned={_fmt(new.assigned_partitions)}, "
                         f"pendingRevocation={_fmt(new.partitions_pending_revocation)}.")
                if new.use_classic_protocol():
                    pass                # classic members have join and sync timers instead
                elif new.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(gid, new.member_id, new.member_epoch, new.rebalance_timeout_ms)
                else:
                    self.timer.cancel(rebalance_key(gid, new.member_id))
            updated = new
        return updated, resolve

    def _upgrade(self, classic, image, recs: list) -> ConsumerGroup:
        """``convertToConsumerGroup`` (spec §11.2): a non-empty classic group of consumers becomes a
        consumer group at its generation, every member a classic-protocol member STABLE at it with
        its last assignment as current and target. Its records (the classic tombstone, then the
        group as a first join writes it) are replayed into a group kept aside, on which the
        heartbeat goes on; the parked JoinGroup/SyncGroup answers REBALANCE_IN_PROGRESS once
        written, and the members' sessions run with their own timeouts."""
        gid = classic.group_id
        policy = self.config.consumer_migration_policy
        why = None
        if policy not in ("upgrade", "bidirectional"):
            why = f"the migration policy ({policy}) does not allow upgrades"
        elif classic.protocol_type != CONSUMER:
            why = f"its protocol type is {classic.protocol_type!r}, not consumer"
        elif len(classic.members) > self.config.consumer_max_size:
            why = f"it has more members than group.consumer.max.size ({self.config.consumer_max_size})"
        members = []
        if why is None:
            gen = classic.generation_id
            for m in classic.members.values():
                metadata = dict(m.protocols).get(classic.protocol_name or "", b"")
                try:
                    sub = R.decode_subscription(metadata)
                    a = R.decode_assignment(m.assignment) if m.assignment else R.ConsumerAssignment(0, [])
                except R.RecordFormatError as e:
                    why = f"member {m.member_id}'s subscription or assignment does not parse ({e})"
                    break
                if a.user_data:
                    why = f"member {m.member_id}'s assignment carries user data (KAFKA-18134)"
                    break
                assigned = {}
                for t, ps in a.partitions:
                    topic = image.topic(t)
                    if topic is not None and ps:
                        assigned[topic.topic_id] = frozenset(ps)
                members.append(ConsumerGroupMember(
                    m.member_id, gen, gen, MemberState.STABLE, m.group_instance_id, sub.rack_id,
                    m.rebalance_timeout_ms, m.client_id, m.client_host, frozenset(sub.topics), "", None,
                    assigned, {}, R.ClassicMemberMetadata(m.session_timeout_ms,
                                                          [R.ClassicProtocol(n, bytes(md)) for n, md in m.protocols])))
        if why is not None:
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Cannot upgrade classic group {gid} to consumer group because {why}.")
        names = {n for m in members for n in m.subscribed_topic_names}
        conversion = [R.group_metadata_record(gid, None)]
        conversion += [member_metadata_record(gid, m) for m in members]
        conversion.append(group_epoch_record(gid, gen, compute_metadata_hash(names, image, self.topic_hash_cache)))
        conversion += [target_assignment_record(gid, m.member_id, m.assigned_partitions) for m in members]
        conversion.append(target_assignment_epoch_record(gid, gen))
        conversion += [current_assignment_record(gid, m) for m in members]
        aside: dict = {}
        try:
            for rec in conversion[1:]:
                replay_record(aside, rec)
        except IllegalStateError as e:       # two members assigned one partition
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Cannot upgrade classic group {gid} to consumer group because {e}") from None
        recs.extend(conversion)
        log.info(f"[GroupId {gid}] Upgrading the classic group (generation {gen}, {len(members)} members) to a "
                 f"consumer group.")

        def written(error):
            if error is not None:
                return
            from .classic_group import complete_join, complete_sync
            for m in list(classic.members.values()):
                complete_join(classic, m, JoinResponse(ErrorCode.rebalance_in_progress, member_id=m.member_id))
                complete_sync(m, SyncResponse(ErrorCode.rebalance_in_progress))
            for m in members:
                self._schedule_session_timeout(gid, m.member_id, m.classic_member_metadata.session_timeout_ms)
        self._after_write.append(written)
        return aside[gid]

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest) -> ConsumerGroupMember:
        """``getOrMaybeSubscribeDynamicConsumerGroupMember``."""
        m = group.members.get(member_id)
        if m is None:
            if req.member_epoch != 0:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
            log.info(f"[GroupId {group.group_id}] Member {member_id} joins the consumer group.")
            return ConsumerGroupMember(member_id)
        self._check_epoch(m, req.member_epoch, req.topic_partitions)
        return m

    def _static_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest,
                       recs: list) -> ConsumerGroupMember:
        """``getOrMaybeSubscribeStaticConsumerGroupMember`` and ``replaceMember`` (spec §8)."""
        gid, iid = group.group_id, req.instance_id
        existing_id = group.static_members.get(iid)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if req.member_epoch == 0:
            if existing is None:
                m = group.members.get(member_id)
                if m is not None:
                    return m
                log.info(f"[GroupId {gid}] Static member {member_id} with instance id {iid} joins the "
                         f"consumer group.")
                return ConsumerGroupMember(member_id)
            if existing.member_id == member_id:
                return existing         # rejoining under its own id (see the module docstring)
            if not existing.use_classic_protocol() and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.unreleased_instance_id,
                                 f"Static member {existing.member_id} with instance id {iid} cannot be "
                                 f"replaced because it is still in use.")
            new = existing.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            recs.extend(tombstones_for_member(gid, existing.member_id))
            recs.append(member_metadata_record(gid, new))
            recs.append(target_assignment_record(gid, member_id, group.target(existing.member_id)))
            recs.append(current_assignment_record(gid, new))
            log.info(f"[GroupId {gid}] Static member with instance id {iid} re-joins the consumer group "
                     f"with member id {member_id}; it replaces {existing.member_id}.")
            return new
        if existing is None:
            raise GroupError(ErrorCode.unknown_member_id, f"Instance id {iid} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(ErrorCode.fenced_instance_id,
                             f"Static member {member_id} with instance id {iid} is not the static member "
                             f"{existing.member_id} known by the group {gid}.")
        self._check_epoch(existing, req.member_epoch, req.topic_partitions)
        return existing

    @staticmethod
    def _check_epoch(m: ConsumerGroupMember, epoch: int, owned) -> None:
        """``throwIfConsumerGroupMemberEpochIsInvalid``; epoch 0 from a known member is a rejoin
        (KAFKA-19233)."""
        if epoch == 0:
            return
        if epoch > m.member_epoch:
            raise FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                f"the group coordinator ({m.member_epoch}). The member must abandon all its partitions "
                f"and rejoin.")
        if epoch < m.member_epoch:
            # the answer carrying the bumped epoch may have been lost
            if epoch != m.previous_member_epoch or not _is_subset(owned, m.assigned_partitions):
                raise FencedMemberEpochError(
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                    f"by the group coordinator ({m.member_epoch}). The member must abandon all its "
                    f"partitions and rejoin.")

    def _update_regex(self, group: ConsumerGroup, counted, member, updated, now: int, recs: list):
        """``maybeUpdateRegularExpressions``: (regex changed, bump the epoch, regexes to resolve)."""
        gid = group.group_id
        old, new = member.regex, updated.regex
        counts = group.subscribed_regexes()
        changed = old != new
        bump = require = False
        if changed:
            if old and counted is not None and counted.regex == old and counts[old] == 1:
                recs.append(R.consumer_group_record(R.ConsumerGroupRegularExpressionKey(gid, old), None))
            if new:
                if counts[new] == 0:
                    RX.validate(new)                # INVALID_REGULAR_EXPRESSION (128)
                    require = True
                else:
                    bump = new in group.resolved_regexes
        if not require and not counts:
            return changed, bump, None
        resolved = group.resolved_regexes
        last = max((rr.timestamp for rr in resolved.values()), default=None)
        if last is not None and now <= last + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
            return changed, bump, None
        wanted = Counter(counts)
        if counted is not None and counted.regex:
            wanted[counted.regex] -= 1
        if new:
            wanted[new] += 1
        wanted = {r for r, c in wanted.items() if c > 0}
        require = require or len(wanted) != len(resolved)
        require = require or max((rr.version for rr in resolved.values()), default=-1) < self.last_topic_creation_version
        require = require or (last is not None and now > last + self.config.consumer_regex_refresh_interval_ms)
        return changed, bump, (wanted if require and wanted else None)

    def _resolve_regexes(self, gid: str, regexes: set, describable=None) -> Outcome:
        """``refreshRegularExpressions`` + ``handleRegularExpressionsResult``: the regexes still in
        use resolved against the topics (those the triggering member's principal may DESCRIBE,
        with an authorizer), and an epoch bump when a topic set or the hash changed."""
        group = self.groups.get(gid)
        if group is None:
            return Outcome()
        image, now = self.image(), self.clock()
        result = RX.resolve(regexes, list(image.by_name))
        if describable is not None:
            allowed = describable(frozenset().union(*result.values()))
            result = {r: ts & allowed for r, ts in result.items()}
        counts = group.subscribed_regexes()
        recs, bump = [], False
        resolved = dict(group.resolved_regexes)
        for r, topics in result.items():
            if counts[r] == 0:
                continue
            old = group.resolved_regexes.get(r)
            if old is None or old.topics != topics:
                bump = True
            rr = ResolvedRegularExpression(topics, image.version, now)
            resolved[r] = rr
            recs.append(regex_record(gid, r, rr))
        names = {n for m in group.members.values() for n in m.subscribed_topic_names}
        for r, rr in resolved.items():
            if counts[r] > 0:
                names |= rr.topics
        h = compute_metadata_hash(names, image, self.topic_hash_cache)
        if bump or h != group.metadata_hash:
            recs.append(group_epoch_record(gid, group.group_epoch + 1, h))
            self.rebalances += 1
            log.info(f"[GroupId {gid}] Bumped group epoch to {group.group_epoch + 1} after resolving "
                     f"{', '.join(sorted(result))}.")
        return Outcome(recs)

    @staticmethod
    def _subscribed_names(group: ConsumerGroup, counted, updated) -> dict[str, SubscriptionCount]:
        """``computeSubscribedTopicNames(old, new)``: the group's names with ``counted`` replaced by
        ``updated`` (resolved regexes count once each)."""
        names = group.subscribed_topic_names()
        if counted is not None:
            for n in counted.subscribed_topic_names:
                names[n].by_name -= 1
        for n in updated.subscribed_topic_names:
            names.setdefault(n, SubscriptionCount()).by_name += 1
        return {n: c for n, c in names.items() if c.by_name > 0 or c.by_regex > 0}

    def _refresh_due(self, group: ConsumerGroup, now: int) -> bool:
        """``ModernGroup.hasMetadataExpired``."""
        entry = self._refresh.get(group.group_id)
        return entry is None or now >= entry[0] or group.group_epoch < entry[1]

    def _update_target(self, group: ConsumerGroup, group_epoch: int, member, updated, sub_type, image,
                       recs: list) -> dict:
        """``updateTargetAssignment``: the assignor most members name (else the default)."""
        name = group.preferred_server_assignor(member if member.member_id in group.members else None, updated)
        if name not in ASSIGNORS:
            # none named, or one stored by another coordinator (a Kafka log with a custom assignor)
            name = self.config.consumer_assignors[0]
        b = TargetAssignmentBuilder.for_group(group, group_epoch, ASSIGNORS[name], image, sub_type)
        b.add_or_update_member(updated.member_id, updated)
        prev = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
        if prev is not None and prev != updated.member_id:
            b.remove_member(prev)
        result = b.build()
        recs.extend(result.records)
        log.info(f"[GroupId {group.group_id}] Computed a new target assignment for epoch {group_epoch} with "
                 f"'{name}' assignor: {len(result.target)} member(s).")
        return result.target.get(updated.member_id, {})

    # == classic members in a consumer group (spec §11.1) ==============================================
    def supports_classic_protocols(self, group: ConsumerGroup, protocol_type: str, names) -> bool:
        """``ConsumerGroup.supportsClassicProtocols``: type ``consumer`` and a protocol every classic
        member supports (any, with none yet)."""
        if protocol_type != CONSUMER or not names:
            return False
        common = set(names)
        for m in group.members.values():
            if m.classic_member_metadata is not None:
                common &= {p.name for p in m.classic_member_metadata.supported_protocols}
        return bool(common)

    def classic_join(self, req) -> tuple[Outcome, Future]:
        """``classicGroupJoinToConsumerGroup``: a classic member (JoinGroup) joining a consumer group
        with members. Its subscription (topics, owned partitions, rack) comes from the
        ConsumerProtocolSubscription of its first protocol; then H5-H9 as a heartbeat; the answer,
        once written, carries its member epoch as the generation, no leader and no members."""
        fut: Future = Future()
        gid = req.group_id
        group = self.groups[gid]
        names = [n for n, _ in req.protocols]

        def done(code, member_id=req.member_id):
            fut.set_result(JoinResponse(code, member_id=member_id))
            return Outcome(), fut
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return done(ErrorCode.invalid_session_timeout)
        if not self.supports_classic_protocols(group, req.protocol_type, names):
            return done(ErrorCode.inconsistent_group_protocol)
        member_id = req.member_id
        if not member_id:
            member_id = f"{req.client_id}-{uuid.uuid4()}"
            if req.group_instance_id is None and req.api_version >= 4:
                return done(ErrorCode.member_id_required, member_id)
        if len(group.members) >= self.config.consumer_max_size and member_id not in group.members:
            return done(ErrorCode.group_max_size_reached)
        try:
            sub = R.decode_subscription(req.protocols[0][1])
        except R.RecordFormatError:
            return done(ErrorCode.inconsistent_group_protocol)
        now, image = self.clock(), self.image()
        recs: list = []
        replaced = None
        iid = req.group_instance_id
        if iid is not None:
            existing_id = group.static_members.get(iid)
            existing = group.members.get(existing_id) if existing_id is not None else None
            if existing is not None and existing.member_id != member_id:
                if req.member_id:
                    return done(ErrorCode.fenced_instance_id)
                # a classic static member replaces the old one (KAFKA-17228)
                member = existing.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0)
                recs.extend(tombstones_for_member(gid, existing.member_id))
                recs.append(member_metadata_record(gid, member))
                recs.append(target_assignment_record(gid, member_id, group.target(existing.member_id)))
                recs.append(current_assignment_record(gid, member))
                replaced = existing
            else:
                member = existing or ConsumerGroupMember(member_id)
        else:
            member = group.members.get(member_id)
            if member is None:
                member = ConsumerGroupMember(member_id)     # Kafka creates it whatever its id
            elif not member.use_classic_protocol():
                return done(ErrorCode.unknown_member_id)
        counted = group.members.get(member.member_id) or replaced
        owned = []
        for t, ps in sub.owned_partitions:
            topic = image.topic(t)
            if topic is not None:
                owned.append((topic.topic_id, list(ps)))
        updated = member.with_(
            instance_id=iid, rack_id=sub.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=None, subscribed_topic_names=frozenset(sub.topics), subscribed_topic_regex="",
            client_id=req.client_id, client_host=req.client_host,
            classic_member_metadata=R.ClassicMemberMetadata(
                req.session_timeout_ms, [R.ClassicProtocol(n, bytes(md)) for n, md in req.protocols]))
        try:
            updated, resolve = self._update_member(group, member, updated, replaced, counted, owned, now, image, recs)
        except (FencedMemberEpochError, PartitionAssignorError) as e:
            log.info(f"[GroupId {gid}] JoinGroup of classic member {member_id} failed: {e}")
            return done(ErrorCode.unknown_server_error if isinstance(e, PartitionAssignorError)
                        else ErrorCode.unknown_member_id)
        self.timer.cancel(join_key(gid, member_id))
        self._schedule_session_timeout(gid, member_id, req.session_timeout_ms)
        timeout = req.rebalance_timeout_ms
        self.timer.schedule(sync_key(gid, member_id), now + timeout, lambda: self._classic_timer_expired(gid, member_id,
                                                                                                        "sync"))
        answer = JoinResponse(ErrorCode.none, updated.member_epoch, CONSUMER, names[0], "", member_id, [])

        def written(error):
            if error is not None:
                fut.set_result(JoinResponse(append_error(error), member_id=member_id))
                return
            fut.set_result(answer)
            if resolve:
                self._pending.append(self._resolve_regexes(gid, resolve))
        log.info(f"[GroupId {gid}] Classic member {member_id} joins the consumer group at epoch "
                 f"{updated.member_epoch}.")
        return Outcome(recs, written), fut

    def _classic_member(self, group_id: str, member_id: str, instance_id: str | None):
        """``validateClassicGroupMember``-like: the classic member, else a GroupError."""
        group = self.groups[group_id]
        if instance_id is not None:
            mid = group.static_members.get(instance_id)
            if mid is None:
                raise GroupError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
            if mid != member_id:
                raise GroupError(ErrorCode.fenced_instance_id, f"Static member {member_id} with instance id "
                                                               f"{instance_id} is not the member {mid}.")
        m = group.members.get(member_id)
        if m is None or not m.use_classic_protocol():
            raise GroupError(ErrorCode.unknown_member_id, f"Member {member_id} is not a classic member of {group_id}.")
        return group, m

    def classic_sync(self, req) -> tuple[Outcome, Future]:
        """``classicGroupSyncToConsumerGroup``: the member's assigned partitions, serialized as a
        ConsumerProtocolAssignment in its subscription's version."""
        fut: Future = Future()
        try:
            group, m = self._classic_member(req.group_id, req.member_id, req.group_instance_id)
            if req.generation_id != m.member_epoch:
                raise GroupError(ErrorCode.illegal_generation)
            names = {p.name for p in m.classic_member_metadata.supported_protocols}
            if (req.protocol_type is not None and req.protocol_type != CONSUMER) or \
                    (req.protocol_name is not None and req.protocol_name not in names):
                raise GroupError(ErrorCode.inconsistent_group_protocol)
        except GroupError as e:
            fut.set_result(SyncResponse(e.code))
            return Outcome(), fut
        gid = req.group_id
        self.timer.cancel(sync_key(gid, m.member_id))
        if group.group_epoch > m.member_epoch and m.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(gid, m)
            fut.set_result(SyncResponse(ErrorCode.rebalance_in_progress))
            return Outcome(), fut
        first = m.classic_member_metadata.supported_protocols[0]
        try:
            version = R.decode_subscription(first.metadata, topics_only=True).version
        except R.RecordFormatError:
            version = 0
        image = self.image()
        parts = []
        for t, ps in m.assigned_partitions.items():
            topic = image.by_id.get(t)
            if topic is not None:
                parts.append((topic.name, sorted(ps)))
        fut.set_result(SyncResponse(ErrorCode.none, CONSUMER, req.protocol_name or first.name,
                                    R.encode_assignment(sorted(parts), min(version, 3))))
        return Outcome(), fut

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int) -> tuple[Outcome, ErrorCode]:
        """``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS (and a join timer) when the
        member must rejoin to move on: a newer group epoch, partitions to revoke, or partitions it
        waits for that are now free."""
        try:
            group, m = self._classic_member(group_id, member_id, instance_id)
        except GroupError as e:
            return Outcome(), e.code
        if generation_id != m.member_epoch:
            return Outcome(), ErrorCode.illegal_generation
        self._schedule_session_timeout(group_id, member_id)
        rejoin = m.member_epoch < group.group_epoch or m.state is MemberState.UNREVOKED_PARTITIONS
        if not rejoin and m.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target(member_id)
            rejoin = all(group.current_partition_epoch(t, p) == -1
                         for t, ps in target.items() for p in ps - m.assigned_partitions.get(t, frozenset()))
        if rejoin:
            self._schedule_join_timeout(group_id, m)
            return Outcome(), ErrorCode.rebalance_in_progress
        return Outcome(), ErrorCode.none

    def classic_leave(self, group_id: str, members: list) -> tuple[Outcome, ErrorCode, list]:
        """``classicGroupLeaveToConsumerGroup``: each member, by member id or instance id
        (KAFKA-18188), fenced."""
        group = self.groups[group_id]
        results, leaving = [], []
        for member_id, instance_id, _reason in members:
            if instance_id is not None:
                mid = group.static_members.get(instance_id)
                if mid is None:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                    continue
                if member_id and member_id != mid:
                    results.append((member_id, instance_id, ErrorCode.fenced_instance_id))
                    continue
                m = group.members[mid]
            else:
                m = group.members.get(member_id)
                if m is None:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                    continue
            if m not in leaving:
                leaving.append(m)
            results.append((member_id, instance_id, ErrorCode.none))
            log.info(f"[GroupId {group_id}] Member {m.member_id} left the consumer group (LeaveGroup).")
        return (self.fence(group, leaving) if leaving else Outcome()), ErrorCode.none, results

    def _schedule_join_timeout(self, gid: str, m: ConsumerGroupMember) -> None:
        if not self.timer.is_scheduled(join_key(gid, m.member_id)):
            self.timer.schedule(join_key(gid, m.member_id), self.clock() + max(m.rebalance_timeout_ms, 0),
                                lambda: self._classic_timer_expired(gid, m.member_id, "join"))

    def _classic_timer_expired(self, gid: str, mid: str, which: str) -> Outcome:
        group = self.groups.get(gid)
        m = group.members.get(mid) if group is not None else None
        if m is None:
            return Outcome()
        log.info(f"[GroupId {gid}] Classic member {mid} fenced from the group: no {which.capitalize()}Group "
                 f"within its rebalance timeout.")
        return self.fence(group, [m])

    # == leave and fencing ============================================================================
    def _leave(self, req: HeartbeatRequest, resp: HeartbeatResponse) -> Outcome:
        """``consumerGroupLeave`` (spec §2.4)."""
        gid = req.group_id
        group = self.groups.get(gid)
        if group is None:
            raise GroupError(ErrorCode.group_id_not_found, f"Consumer group {gid} not found.")
        resp.member_id, resp.member_epoch = req.member_id, req.member_epoch
        if req.instance_id is None:
            m = group.members.get(req.member_id)
            if m is None:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Member {req.member_id} is not a member of group {gid}.")
            log.info(f"[GroupId {gid}] Member {m.member_id} left the consumer group.")
            return self.fence(group, [m])
        mid = group.static_members.get(req.instance_id)
        if mid is None:
            raise GroupError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if mid != req.member_id:
            raise GroupError(ErrorCode.fenced_instance_id,
                             f"Static member {req.member_id} with instance id {req.instance_id} is not the "
                             f"static member {mid} known by the group {gid}.")
        m = group.members[mid]
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info(f"[GroupId {gid}] Static member {mid} with instance id {req.instance_id} temporarily "
                     f"left the consumer group.")
            # its partitions stay its own until its session expires (spec §2.4)
            leaving = m.with_(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
            return Outcome([current_assignment_record(gid, leaving)])
        log.info(f"[GroupId {gid}] Static member {mid} with instance id {req.instance_id} left the consumer group.")
        return self.fence(group, [m])

    def fence(self, group: ConsumerGroup, members: list[ConsumerGroupMember]) -> Outcome:
        """``consumerGroupFenceMembers`` (spec §2.5): the members' tombstones (8, 7, 5), their
        regexes nobody else uses, the epoch bumped with the hash of what remains; with nobody left
        the target's epoch too (KAFKA-20442)."""
        gid = group.group_id
        gone = {m.member_id for m in members}
        remaining = [m for m in group.members.values() if m.member_id not in gone]
        if remaining and all(m.use_classic_protocol() for m in remaining) and len(remaining) <= self.config.max_size \
                and self.config.consumer_migration_policy in ("downgrade", "bidirectional"):
            downgraded = self._downgrade(group, members, remaining)
            if downgraded is not None:
                return downgraded
        recs = []
        for m in members:
            recs.extend(tombstones_for_member(gid, m.member_id))
            for key in (session_key, rebalance_key, join_key, sync_key):
                self.timer.cancel(key(gid, m.member_id))
        remaining = [m for m in group.members.values() if m.member_id not in gone]
        used = Counter(m.regex for m in remaining if m.regex)
        for r in dict.fromkeys(m.regex for m in members if m.regex):
            if used[r] == 0 and r in group.resolved_regexes:
                recs.append(R.consumer_group_record(R.ConsumerGroupRegularExpressionKey(gid, r), None))
        names = {n for m in remaining for n in m.subscribed_topic_names}
        for r in used:
            rr = group.resolved_regexes.get(r)
            if rr is not None:
                names |= rr.topics
        epoch = group.group_epoch + 1
        recs.append(group_epoch_record(gid, epoch, compute_metadata_hash(names, self.image(), self.topic_hash_cache)))
        if not remaining:
            recs.append(target_assignment_epoch_record(gid, epoch))
        self.rebalances += 1
        return Outcome(recs)

    def _downgrade(self, group: ConsumerGroup, members: list, remaining: list) -> Outcome | None:
        """``convertToClassicGroup`` (spec §11.3): only classic members are left: the consumer
        group's tombstones, then one GroupMetadata (generation = group epoch, Stable, a protocol all
        members support, each member's target in its ConsumerProtocol version), replayed into a
        classic group, which then rebalances (PreparingRebalance after a leave)."""
        gid = group.group_id
        common = None
        for m in remaining:
            names = [p.name for p in m.classic_member_metadata.supported_protocols]
            common = names if common is None else [n for n in common if n in names]
        if not common:
            return None
        protocol = common[0]
        image = self.image()
        mm = []
        for m in remaining:
            cmm = m.classic_member_metadata
            metadata = next(p.metadata for p in cmm.supported_protocols if p.name == protocol)
            try:
                version = R.decode_subscription(metadata, topics_only=True).version
            except R.RecordFormatError:
                version = 0
            parts = sorted((image.by_id[t].name, sorted(ps)) for t, ps in group.target(m.member_id).items()
                           if t in image.by_id)
            mm.append(R.MemberMetadata(m.member_id, m.instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, cmm.session_timeout_ms, metadata,
                                       R.encode_assignment(parts, min(max(version, 0), 3))))
        recs = tombstones_for_group(group)
        recs.append(R.group_metadata_record(gid, R.GroupMetadataValue(
            CONSUMER, group.group_epoch, protocol, remaining[0].member_id, self.clock(), mm)))
        for m in group.members.values():
            for key in (session_key, rebalance_key, join_key, sync_key):
                self.timer.cancel(key(gid, m.member_id))
        log.info(f"[GroupId {gid}] Downgrading the consumer group to a classic group: "
                 f"{len(remaining)} classic member(s) left.")

        def written(error):
            classic = self.classic.groups.get(gid)
            if error is not None or classic is None:
                return
            for m in classic.members.values():
                self.classic.reschedule_heartbeat(classic, m)
            self._pending.append(self.classic._prepare_rebalance(
                classic, f"Downgrade of consumer group {gid} to a classic group after a member left"))
        return Outcome(recs, written)

    # == timers =======================================================================================
    def session_timeout_ms(self, group_id: str) -> int:
        v = self.group_setting(group_id, "consumer.session.timeout.ms")
        return self.config.consumer_session_timeout_ms if v is None else v

    def heartbeat_interval_ms(self, group_id: str) -> int:
        v = self.group_setting(group_id, "consumer.heartbeat.interval.ms")
        return self.config.consumer_heartbeat_interval_ms if v is None else v

    def _schedule_session_timeout(self, gid: str, mid: str, timeout_ms: int | None = None) -> None:
        """The session timer; a classic member's runs for its own JoinGroup session timeout."""
        if timeout_ms is None:
            group = self.groups.get(gid)
            m = group.members.get(mid) if group is not None else None
            cmm = m.classic_member_metadata if m is not None else None
            timeout_ms = cmm.session_timeout_ms if cmm is not None else self.session_timeout_ms(gid)
        self.timer.schedule(session_key(gid, mid), self.clock() + timeout_ms,
                            lambda: self._session_expired(gid, mid))

    def _session_expired(self, gid: str, mid: str) -> Outcome:
        group = self.groups.get(gid)
        m = group.members.get(mid) if group is not None else None
        if m is None:
            return Outcome()
        log.info(f"[GroupId {gid}] Member {mid} fenced from the group because its session expired.")
        return self.fence(group, [m])

    def _schedule_rebalance_timeout(self, gid: str, mid: str, epoch: int, timeout_ms: int) -> None:
        self.timer.schedule(rebalance_key(gid, mid), self.clock() + max(timeout_ms, 0),
                            lambda: self._rebalance_expired(gid, mid, epoch))

    def _rebalance_expired(self, gid: str, mid: str, epoch: int) -> Outcome:
        group = self.groups.get(gid)
        m = group.members.get(mid) if group is not None else None
        if m is None or m.member_epoch != epoch:
            return Outcome()
        log.info(f"[GroupId {gid}] Member {mid} fenced from the group because it failed to revoke "
                 f"partitions within {m.rebalance_timeout_ms} ms.")
        return self.fence(group, [m])

    # == the topics changing (GroupMetadataManager.onNewMetadataImage) ================================
    def on_metadata_change(self, changed: Iterable[str], created: bool, version: int) -> None:
        """Topics were created, deleted or grew: every group subscribed to one (by name or through
        a resolved regex) refreshes its metadata hash at its next heartbeat; a creation makes
        groups with regexes resolve them again."""
        changed = set(changed)
        if created:
            self.last_topic_creation_version = version
        for n in changed:
            self.topic_hash_cache.pop(n, None)
        for gid, group in self.groups.items():
            if created and group.subscribed_regexes():
                self._refresh.pop(gid, None)
                continue
            if changed & set(group.subscribed_topic_names()):
                self._refresh.pop(gid, None)

    # == ConsumerGroupDescribe / ListGroups / DeleteGroups ============================================
    def describe(self, group_ids: list) -> list[DescribedConsumerGroup]:
        image = self.image()

        def tps(a):
            out = []
            for t in sorted(a, key=lambda t: t.bytes):
                topic = image.by_id.get(t)
                if topic is not None:           # a deleted topic is left out
                    out.append((t, topic.name, sorted(a[t])))
            return out

        out = []
        for gid in group_ids:
            if not gid:
                # GroupCoordinatorService.isGroupIdNotEmpty: only an empty id (a blank one is looked
                # up, and not found), answered with the code alone
                out.append(DescribedConsumerGroup("", ErrorCode.invalid_group_id, None))
                continue
            try:
                self.partitions.check_loaded(gid)
            except GroupError as e:
                out.append(DescribedConsumerGroup(gid, e.code, str(e)))
                continue
            group = self.groups.get(gid)
            if group is None:
                what = "not a consumer group" if gid in self.classic.groups else "not found"
                out.append(DescribedConsumerGroup(gid, ErrorCode.group_id_not_found,
                                                  f"Group {gid} {what}."))
                continue
            members = [DescribedConsumerMember(m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                                       m.client_host, sorted(m.subscribed_topic_names), m.regex,
                                       tps(m.assigned_partitions), tps(group.target(m.member_id)),
                                       0 if m.use_classic_protocol() else 1)
                       for m in group.members.values()]
            out.append(DescribedConsumerGroup(gid, ErrorCode.none, None, group.state.value, group.group_epoch,
                                              group.assignment_epoch,
                                              group.preferred_server_assignor() or self.config.consumer_assignors[0],
                                              members))
        return out

    def list_groups(self, states: set[str], types: set[str]) -> list:
        if types and CONSUMER not in types:
            return []
        out = []
        for gid, g in self.groups.items():
            if self.partitions.is_loading(gid):
                continue
            state = g.state.value
            if states and state.lower() not in states:
                continue
            out.append(ListedGroup(gid, CONSUMER, state, CONSUMER))
        return out

    def validate_delete_group(self, group_id: str) -> None:
        """``ConsumerGroup.validateDeleteGroup``: only an Empty group goes."""
        if self.groups[group_id].state is not ConsumerGroupState.EMPTY:
            raise GroupError(ErrorCode.non_empty_group, f"Group {group_id} is not empty.")

    def create_group_tombstone_records(self, group_id: str, records: list) -> None:
        records.extend(tombstones_for_group(self.groups[group_id]))

    def maybe_delete_group(self, group_id: str, records: list) -> None:
        """The group's tombstones when it is empty and its offsets are all gone."""
        group = self.groups[group_id]
        if group.is_empty():
            records.extend(tombstones_for_group(group))

    # == replay and loading ===========================================================================
    def replay(self, record: R.CoordinatorRecord) -> None:
        """A consumer-group record read at load or written. A simple classic group (manual
        commits) with the same id is replaced by the consumer group (spec §7.3)."""
        gid = record.key.group
        if record.value is not None and gid not in self.groups:
            classic = self.classic.groups.get(gid)
            if classic is not None and classic.is_empty():
                self.classic.replay(gid, None)
        try:
            replay_record(self.groups, record)
        except IllegalStateError as e:
            # Kafka stops loading the partition; one contradictory record is logged and skipped here
            log.error(f"[GroupId {gid}] Record {type(record.key).__name__} not applied: {e}")

    def on_loaded(self, partition: int) -> None:
        """Session timers for every loaded member, rebalance timers for those revoking (onLoaded)."""
        for gid, group in self.groups.items():
            if self.partitions.partition_for(gid) != partition:
                continue
            log.info(f"Loaded consumer group {gid} with {len(group.members)} members.")
            for m in group.members.values():
                self._schedule_session_timeout(gid, m.member_id)
                if m.state is MemberState.UNREVOKED_PARTITIONS and not m.use_classic_protocol():
                    self._schedule_rebalance_timeout(gid, m.member_id, m.member_epoch, m.rebalance_timeout_ms)

    def take_pending(self) -> list[Outcome]:
        out, self._pending[:] = list(self._pending), []
        return [o for o in out if o.records or o.on_written]


def _fmt(a) -> str:
    return "{" + ", ".join(f"{t}-{sorted(ps)}" for t, ps in a.items()) + "}"
