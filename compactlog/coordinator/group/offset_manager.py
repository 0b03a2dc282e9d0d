"""Kafka's ``OffsetMetadataManager``: the committed offsets of every group. OffsetCommit and
TxnOffsetCommit (with the checks of ``ClassicGroup.validateOffsetCommit``), OffsetFetch (with
``require_stable``), OffsetDelete, the tombstones of a deleted group's offsets, expiry
(``OffsetExpirationConditionImpl``: from the commit, or from when the group became empty; never an
offset with a pending transactional commit), the offsets of deleted partitions, and the replay of
``OffsetCommit`` records, transactional ones held pending until their producer's COMMIT or ABORT
marker in the same ``__consumer_offsets`` partition (``replay_end_txn``).

Sans-IO, as the group manager: operations return an ``Outcome`` whose records take effect only
once written and replayed (``replay``), exactly as at load time. Groups are looked up in the
``GroupMetadataManager`` given, and in the consumer groups (KIP-848) given beside it, whose
commits and fetches carry member epochs (``ConsumerGroup.validateOffsetCommit`` and
``validateOffsetFetch``); a commit without membership creates a "simple" group.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from ...record import consumer_offsets as R
from .api_data import CommitPartition, FetchedOffset
from .classic_group import ClassicGroup
from .classic_group_state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from .config import GroupConfig
from .group_manager import GroupMetadataManager
from ..runtime import CoordinatorPartitions, GroupError, Outcome, append_error, is_too_large

# the coordinator's log lines keep the logger they were always written under
log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1          # -1: none (v1 records of old clients carry one)
    record_offset: int = -1             # where the record is in __consumer_offsets


class OffsetMetadataManager:
    """The committed offsets of every group; see the module docstring."""

    def __init__(self, config: GroupConfig, clock: Callable[[], int], partitions: CoordinatorPartitions,
                 group_manager: GroupMetadataManager, consumer_groups: dict | None = None):
        self.config = config
        self.clock = clock
        self.partitions = partitions
        self.group_manager = group_manager
        # the consumer groups (KIP-848) by id: the consumer group manager's dict, read only here
        self.consumer_groups: dict = {} if consumer_groups is None else consumer_groups
        # group -> topic -> partition -> OffsetAndMetadata
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # producer id -> group -> topic -> partition -> OffsetAndMetadata (open transactions, from loading)
        self.pending_txn_offsets: dict[int, dict] = {}
        self.open_txns_by_group: dict[str, set[int]] = {}
        # Kafka's offset-commit-count and offset-expiration-count (the broker's metrics read them)
        self.commits = 0
        self.expired_offsets = 0

    # == OffsetCommit ===================================================================================
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None, partitions: list[CommitPartition],
                       retention_time_ms: int = -1, api_version: int = 8) -> tuple[Outcome, list[ErrorCode]]:
        """One error per partition, in order; the records are the accepted commits."""
        if not group_id:
            return Outcome(), [ErrorCode.invalid_group_id] * len(partitions)
        try:
            self.partitions.check_loaded(group_id)
            group = self._validate_commit(group_id, generation_id, member_id, group_instance_id, api_version)
        except GroupError as e:
            return Outcome(), [e.code] * len(partitions)
        if isinstance(group, ClassicGroup) and group.state in (STABLE, PREPARING_REBALANCE) \
                and member_id in group.members:
            # classic members keep their session through their commits
            self.group_manager.reschedule_heartbeat(group, group.member(member_id))
        now = self.clock()
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        errors, recs = [], []
        for p in partitions:
            metadata = p.metadata
            if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            errors.append(ErrorCode.none)
            recs.append(R.offset_commit_record(group_id, p.topic, p.partition, R.OffsetCommitValue(
                p.offset, p.leader_epoch, metadata or "", now, expire)))
        self.commits += len(recs)
        return Outcome(recs), errors

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None, api_version: int,
                         transactional: bool = False) -> ClassicGroup | None:
        """validateOffsetCommit / validateTransactionalOffsetCommit and ClassicGroup.validateOffsetCommit.
        A transactional commit without member id and generation is accepted on any group (the old
        TxnOffsetCommit versions carry neither) and is never told REBALANCE_IN_PROGRESS."""
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            validate_consumer_commit(cg, generation_id, member_id, instance_id, api_version, transactional)
            return None
        group = self.group_manager.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # admin tools and assign() consumers: a "simple" group, created by the commit's replay
                log.info(f"[GroupId {group_id}] Creating a simple consumer group via manual offset commit.")
                return None
            if api_version >= 9 and not transactional:
                raise GroupError(ErrorCode.group_id_not_found, f"group {group_id} not found")
            raise GroupError(ErrorCode.illegal_generation, f"group {group_id} not found")
        if group.in_state(DEAD):
            raise GroupError(ErrorCode.coordinator_not_available)
        if generation_id < 0 and group.in_state(EMPTY):
            return group
        if generation_id >= 0 or member_id or instance_id is not None:
            group.validate_member(member_id, instance_id, "txn-offset-commit" if transactional else "offset-commit")
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.illegal_generation)
        elif not transactional and not group.in_state(EMPTY):
            raise GroupError(ErrorCode.unknown_member_id, "commits without a member id need an empty group")
        if not transactional and group.in_state(COMPLETING_REBALANCE):
            raise GroupError(ErrorCode.rebalance_in_progress)
        return group

    # == TxnOffsetCommit ================================================================================
    def commit_transactional_offsets(self, group_id: str, generation_id: int, member_id: str,
                                     group_instance_id: str | None, partitions: list[CommitPartition],
                                     api_version: int = 4) -> tuple[Outcome, list[ErrorCode]]:
        """commitTransactionalOffset: one error per partition, in order; the records (the caller
        writes them in the producer's transaction, where they stay pending until its marker)."""
        if not group_id:
            return Outcome(), [ErrorCode.invalid_group_id] * len(partitions)
        try:
            self.partitions.check_loaded(group_id)
            self._validate_commit(group_id, generation_id, member_id, group_instance_id, api_version,
                                  transactional=True)
        except GroupError as e:
            return Outcome(), [e.code] * len(partitions)
        now = self.clock()
        errors, recs = [], []
        for p in partitions:
            if p.metadata is not None and len(p.metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            errors.append(ErrorCode.none)
            recs.append(R.offset_commit_record(group_id, p.topic, p.partition, R.OffsetCommitValue(
                p.offset, p.leader_epoch, p.metadata or "", now, -1)))
        return Outcome(recs), errors

    # == OffsetFetch ====================================================================================
    def fetch_offsets(self, group_id: str | None, topics: list | None,
                      require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> list:
        """``topics``: [(topic, [partition, ...])] or None for every committed offset.
        [(topic, [FetchedOffset])], else a GroupError for the whole group. ``member_id`` and
        ``member_epoch`` (OffsetFetch v9) are checked against a consumer group's member
        (``validateOffsetFetch``)."""
        if group_id is None:
            raise GroupError(ErrorCode.invalid_group_id)
        self.partitions.check_loaded(group_id)
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            validate_consumer_fetch(cg, member_id, member_epoch)
            by_topic = self.offsets.get(group_id, {})
        else:
            group = self.group_manager.groups.get(group_id)
            by_topic = self.offsets.get(group_id, {}) if group is not None and not group.in_state(DEAD) else {}
        out = []
        if topics is None:
            for topic, parts in by_topic.items():
                out.append((topic, [self._fetched(group_id, topic, p, parts.get(p), require_stable)
                                    for p in parts]))
            return out
        for topic, parts in topics:
            stored = by_topic.get(topic, {})
            out.append((topic, [self._fetched(group_id, topic, p, stored.get(p), require_stable) for p in parts]))
        return out

    def _fetched(self, group_id: str, topic: str, partition: int, o: OffsetAndMetadata | None,
                 require_stable: bool) -> FetchedOffset:
        if require_stable and self._has_pending_txn_offset(group_id, topic, partition):
            return FetchedOffset(partition, error=ErrorCode.unstable_offset_commit)
        if o is None:
            return FetchedOffset(partition)
        return FetchedOffset(partition, o.offset, o.leader_epoch, o.metadata)

    def committed(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return {(t, p): o for t, parts in self.offsets.get(group_id, {}).items() for p, o in parts.items()}

    # == DeleteGroups / OffsetDelete ====================================================================
    def delete_all_offsets(self, group_id: str, records: list) -> None:
        """Tombstones for every offset of a group being deleted, pending transactional ones too."""
        committed = self.committed(group_id)
        records.extend(R.offset_commit_record(group_id, t, p, None) for (t, p) in committed)
        seen = set(committed)
        for pid in self.open_txns_by_group.get(group_id, ()):
            for t, parts in self.pending_txn_offsets.get(pid, {}).get(group_id, {}).items():
                for p in parts:
                    if (t, p) not in seen:
                        seen.add((t, p))
                        records.append(R.offset_commit_record(group_id, t, p, None))

    def delete_offsets(self, group_id: str, topics: list) -> tuple[Outcome, ErrorCode, list]:
        """``topics``: [(topic, [partition])]. (outcome, group error, [(topic, [(partition, error)])])."""
        try:
            self.partitions.check_loaded(group_id)
            group = self.consumer_groups.get(group_id) or self.group_manager.group(group_id)
            if isinstance(group, ClassicGroup) and group.in_state(DEAD):
                raise GroupError(ErrorCode.group_id_not_found)
            if isinstance(group, ClassicGroup) and group.state in (STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE) \
                    and not group.uses_consumer_protocol():
                raise GroupError(ErrorCode.non_empty_group)
        except GroupError as e:
            return Outcome(), e.code, []
        recs, out = [], []
        for topic, parts in topics:
            if group.is_subscribed_to_topic(topic):
                out.append((topic, [(p, ErrorCode.group_subscribed_to_topic) for p in parts]))
                continue
            res = []
            for p in parts:
                res.append((p, ErrorCode.none))
                if self._has_offset(group_id, topic, p) or self._has_pending_txn_offset(group_id, topic, p):
                    recs.append(R.offset_commit_record(group_id, topic, p, None))
            out.append((topic, res))
        return Outcome(recs), ErrorCode.none, out

    # == expiry =========================================================================================
    def cleanup_expired_offsets(self, group_id: str, now: int, recs: list) -> bool:
        """Tombstones for the group's offsets past their retention; True when none is left (the
        group may then go too)."""
        by_topic = self.offsets.get(group_id)
        if not by_topic:
            return True
        group = self.consumer_groups.get(group_id) or self.group_manager.groups[group_id]
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
                    self.expired_offsets += 1
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

    # == replay: loading, and writes taking effect ======================================================
    def replay(self, key: R.OffsetCommitKey, value: R.OffsetCommitValue | None, offset: int,
               producer_id: int) -> None:
        """An OffsetCommit record (None: its tombstone) at ``offset`` of the log; a producer id
        for one written in a transaction, held until its marker."""
        gid, topic, partition = key.group, key.topic, key.partition
        if value is None:
            self._remove_offset(self.offsets, gid, topic, partition)
            for pid in list(self.open_txns_by_group.get(gid, ())):
                self._remove_offset(self.pending_txn_offsets.get(pid, {}), gid, topic, partition)
            return
        # offsets committed without membership make a "simple" group (Empty, no protocol type)
        if gid not in self.consumer_groups:
            self.group_manager.get_or_create_group(gid, True)
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

    def replay_end_txn(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """A COMMIT or ABORT marker of a producer that committed offsets in a transaction, read
        from (or written to) ``__consumer_offsets-<partition>``: it settles the producer's pending
        offsets of the groups of that partition only, as Kafka's shard of that partition does
        (None: every partition). COMMIT makes each one the committed offset unless a later
        record (a plain commit after it) already is; ABORT drops them."""
        by_group = self.pending_txn_offsets.get(producer_id)
        if by_group is None:
            return
        settled = {gid: by_topic for gid, by_topic in by_group.items()
                   if partition is None or self.partitions.partition_for(gid) == partition}
        for gid in settled:
            del by_group[gid]
            txns = self.open_txns_by_group.get(gid)
            if txns is not None:
                txns.discard(producer_id)
                if not txns:
                    del self.open_txns_by_group[gid]
        if not by_group:
            del self.pending_txn_offsets[producer_id]
        if not commit:
            return
        for gid, by_topic in settled.items():
            for topic, parts in by_topic.items():
                for p, oam in parts.items():
                    existing = self.offsets.get(gid, {}).get(topic, {}).get(p)
                    # the later record wins, whichever kind it is (compaction keeps it so too)
                    if existing is None or oam.record_offset > existing.record_offset:
                        self.offsets.setdefault(gid, {}).setdefault(topic, {})[p] = oam

    def _has_offset(self, gid: str, topic: str, partition: int) -> bool:
        return partition in self.offsets.get(gid, {}).get(topic, {})

    def _has_pending_txn_offset(self, gid: str, topic: str, partition: int) -> bool:
        for pid in self.open_txns_by_group.get(gid, ()):
            if partition in self.pending_txn_offsets.get(pid, {}).get(gid, {}).get(topic, {}):
                return True
        return False


def validate_consumer_commit(group, epoch: int, member_id: str, instance_id: str | None, api_version: int,
                             transactional: bool) -> None:
    """``ConsumerGroup.validateOffsetCommit`` (spec §9): a commit without member epoch is accepted
    while the group is empty (admin tools); a transactional one without member, epoch and instance
    id always (KAFKA-18060); else the member must exist, commit with OffsetCommit v9 or above
    (KIP-848 members) and carry exactly its current epoch. A transactional commit is told
    ILLEGAL_GENERATION where a plain one is told STALE_MEMBER_EPOCH (OffsetMetadataManager)."""
    if epoch < 0 and not group.members:
        return
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}.")
    if not transactional and not member.use_classic_protocol() and api_version < 9:
        raise GroupError(ErrorCode.unsupported_version,
                         "OffsetCommit version 9 or above must be used by members using the modern group protocol")
    if epoch != member.member_epoch:
        code = ErrorCode.illegal_generation if member.use_classic_protocol() or transactional \
            else ErrorCode.stale_member_epoch
        raise GroupError(code, f"The received member epoch {epoch} does not match the expected member "
                               f"epoch {member.member_epoch}.")


def validate_consumer_fetch(group, member_id: str | None, epoch: int) -> None:
    """``ConsumerGroup.validateOffsetFetch``: no member id and a negative epoch (admin clients,
    librdkafka) fetch freely; else the member's current epoch."""
    if member_id is None and epoch < 0:
        return
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}.")
    if epoch != member.member_epoch:
        code = ErrorCode.illegal_generation if member.use_classic_protocol() else ErrorCode.stale_member_epoch
        raise GroupError(code, f"The received member epoch {epoch} does not match the expected member "
                               f"epoch {member.member_epoch}.")


def commit_append_error(error: Exception) -> ErrorCode:
    """For OffsetCommit, a batch too large is INVALID_COMMIT_OFFSET_SIZE, as in Kafka."""
    if is_too_large(error):
        return ErrorCode.invalid_commit_offset_size
    return append_error(error)
