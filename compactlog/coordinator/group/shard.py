"""Kafka's ``GroupCoordinatorShard``: the group coordinator as one object, composing the
``GroupMetadataManager`` (its classic half here, ``group_manager``, and its consumer-protocol half,
``consumer_group_manager``: KIP-848) and the ``OffsetMetadataManager`` (committed offsets) over one
clock, one ``Timer`` and one view of the ``__consumer_offsets`` partitions being loaded. A group id
names a classic group or a consumer group, never both: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup on a consumer group go to its classic members' half (spec §11.1).

Each request is handed to the manager that owns it; the shard itself only holds what needs both:
DeleteGroups (a group's offsets, then the group), the periodic cleanup (expired offsets, then the
groups left empty without offsets: ``cleanupGroupMetadata``), the replay of a record by its kind,
and the timers.

Nothing here does I/O or reads a clock of its own. Every operation returns an ``Outcome``: the
``__consumer_offsets`` records to append and a callback ``on_written(error)`` the caller runs
once the append succeeded (``error`` None) or failed. The caller (``service.GroupCoordinatorService``)
appends the records, then, when ``Outcome.replay`` is set, feeds them back through ``replay``
(offset commits and tombstones take effect only once written, exactly as at load time), then
runs the callback. ``run_timers(now)`` runs the expired timers (session expiry, join and sync
timeouts, the initial rebalance delay) and returns their outcomes.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from ...record import consumer_offsets as R
from .api_data import CommitPartition, DescribedGroup, JoinRequest, JoinResponse, ListedGroup, SyncRequest
from .classic_group import ClassicGroup
from .config import GroupConfig
from .api_data import HeartbeatRequest, HeartbeatResponse
from .consumer_group_manager import ConsumerGroupManager
from .group_manager import GroupMetadataManager
from .offset_manager import OffsetAndMetadata, OffsetMetadataManager
from ..runtime import CoordinatorPartitions, GroupError, Outcome, Timer, answered

# the coordinator's log lines keep the logger they were always written under
log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")


class GroupCoordinatorShard:
    """Every group of the broker and its committed offsets; see the module docstring."""

    def __init__(self, config: GroupConfig | None = None, clock: Callable[[], int] | None = None):
        self.config = config or GroupConfig()
        self.clock = clock or (lambda: 0)
        self.timer = Timer()
        self.partitions = CoordinatorPartitions(self.config.num_partitions)
        self.group_manager = GroupMetadataManager(self.config, self.clock, self.timer, self.partitions)
        self.consumer = ConsumerGroupManager(self.config, self.clock, self.timer, self.partitions,
                                             self.group_manager)
        self.offset_manager = OffsetMetadataManager(self.config, self.clock, self.partitions, self.group_manager,
                                                    self.consumer.groups)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The classic groups by id (read them; they change through the operations only)."""
        return self.group_manager.groups

    def partition_for(self, group_id: str) -> int:
        return self.partitions.partition_for(group_id)

    # -- the group APIs, each to the manager that owns it
    def join_group(self, req: JoinRequest) -> tuple[Outcome, Future]:
        """JoinGroup. On a consumer group (KIP-848): an empty one is deleted and a classic group
        takes its id, its offsets kept (``classicGroupJoin`` converting it); a classic member
        joins a non-empty one as a classic-protocol member (spec §11.1)."""
        cg = self.consumer.groups.get(req.group_id)
        if cg is None or self.partitions.is_loading(req.group_id):
            return self.group_manager.join_group(req)
        if not cg.is_empty():
            return self.consumer.classic_join(req)
        # the classic join mutates its group in place (its records are not replayed), so the
        # consumer group goes from memory now and its tombstones are written first, unreplayed
        tombstones: list = []
        self.consumer.create_group_tombstone_records(req.group_id, tombstones)
        del self.consumer.groups[req.group_id]
        log.info(f"[GroupId {req.group_id}] Converted the empty consumer group to a classic group.")
        outcome, future = self.group_manager.join_group(req)
        return Outcome(tombstones + outcome.records, outcome.on_written, replay=False), future

    def _consumer_group(self, group_id: str) -> bool:
        """The id names a loaded consumer group: its classic members are answered there (§11.1)."""
        return group_id in self.consumer.groups and not self.partitions.is_loading(group_id)

    def sync_group(self, req: SyncRequest) -> tuple[Outcome, Future]:
        if self._consumer_group(req.group_id):
            return self.consumer.classic_sync(req)
        return self.group_manager.sync_group(req)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> tuple[Outcome, ErrorCode]:
        if self._consumer_group(group_id):
            return self.consumer.classic_heartbeat(group_id, member_id, group_instance_id, generation_id)
        return self.group_manager.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, members: list) -> tuple[Outcome, ErrorCode, list]:
        if self._consumer_group(group_id):
            return self.consumer.classic_leave(group_id, members)
        return self.group_manager.leave_group(group_id, members)

    def describe_groups(self, group_ids: list) -> list[DescribedGroup]:
        """A consumer group is not a classic group: it reads as Dead without members, as Kafka
        answers DescribeGroups up to v5 (the admin clients then ask ConsumerGroupDescribe)."""
        return self.group_manager.describe_groups(group_ids)

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        return self.group_manager.list_groups(states_filter, types_filter) + self.consumer.list_groups(states, types)

    # -- KIP-848
    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> tuple[Outcome, HeartbeatResponse]:
        return self.consumer.heartbeat(req)

    def consumer_group_describe(self, group_ids: list) -> list:
        return self.consumer.describe(group_ids)

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None, partitions: list[CommitPartition],
                       retention_time_ms: int = -1, api_version: int = 8) -> tuple[Outcome, list[ErrorCode]]:
        return self.offset_manager.commit_offsets(group_id, generation_id, member_id, group_instance_id,
                                                  partitions, retention_time_ms, api_version)

    def commit_transactional_offsets(self, group_id: str, generation_id: int, member_id: str,
                                     group_instance_id: str | None, partitions: list[CommitPartition],
                                     api_version: int = 4) -> tuple[Outcome, list[ErrorCode]]:
        return self.offset_manager.commit_transactional_offsets(group_id, generation_id, member_id,
                                                                group_instance_id, partitions, api_version)

    def fetch_offsets(self, group_id: str | None, topics: list | None, require_stable: bool = False,
                      member_id: str | None = None, member_epoch: int = -1) -> tuple[ErrorCode, list]:
        """(group error, [(topic, [FetchedOffset])]): the offset manager's answer or refusal."""
        code, found = answered(self.offset_manager.fetch_offsets, group_id, topics, require_stable, member_id,
                               member_epoch)
        return code, found or []

    def committed(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return self.offset_manager.committed(group_id)

    def delete_offsets(self, group_id: str, topics: list) -> tuple[Outcome, ErrorCode, list]:
        return self.offset_manager.delete_offsets(group_id, topics)

    def offsets_for_deleted_partitions(self, partitions: Iterable[tuple[str, int]]) -> Outcome:
        return self.offset_manager.offsets_for_deleted_partitions(partitions)

    # -- what needs both managers
    def delete_groups(self, group_ids: list) -> tuple[Outcome, list[tuple[str, ErrorCode]]]:
        """DeleteGroups: each deletable group's offsets, then the group, as tombstones."""
        recs, results = [], []
        for gid in group_ids:
            if not gid:
                results.append((gid, ErrorCode.invalid_group_id))
                continue
            manager = self.consumer if gid in self.consumer.groups else self.group_manager
            try:
                self.partitions.check_loaded(gid)
                manager.validate_delete_group(gid)
            except GroupError as e:
                results.append((gid, e.code))
                continue
            self.offset_manager.delete_all_offsets(gid, recs)
            manager.create_group_tombstone_records(gid, recs)
            results.append((gid, ErrorCode.none))
        if recs:
            log.info(f"The following groups were deleted: "
                     f"{', '.join(g for g, e in results if e == ErrorCode.none)}.")
        return Outcome(recs), results

    def cleanup_expired(self) -> Outcome:
        """Offsets past their retention, and empty groups left without offsets, as tombstones
        (cleanupGroupMetadata)."""
        now = self.clock()
        recs = []
        for gid in self.group_manager.group_ids() + list(self.consumer.groups):
            if self.partitions.is_loading(gid):
                continue
            if self.offset_manager.cleanup_expired_offsets(gid, now, recs):
                manager = self.consumer if gid in self.consumer.groups else self.group_manager
                manager.maybe_delete_group(gid, recs)
        if recs:
            log.info(f"Generated {len(recs)} tombstone records while cleaning up group metadata.")
        return Outcome(recs)

    def run_timers(self, now_ms: int | None = None) -> list[Outcome]:
        """Run every expired timer (in deadline order); their outcomes, for the caller to write."""
        now = self.clock() if now_ms is None else now_ms
        out = []
        for key, fn in self.timer.pop_due(now):
            outcome = fn()
            if outcome is not None and (outcome.records or outcome.on_written):
                out.append(outcome)
        return out

    # -- replay: loading, and writes taking effect
    def replay(self, record: R.CoordinatorRecord, offset: int = -1, producer_id: int = -1) -> None:
        key = record.key
        if isinstance(key, R.OffsetCommitKey):
            self.offset_manager.replay(key, record.value, offset, producer_id)
        elif isinstance(key, R.GroupMetadataKey):
            self.group_manager.replay(key.group, record.value)
        else:
            self.consumer.replay(record)

    def replay_end_txn(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """A COMMIT or ABORT marker of a producer that committed offsets in a transaction, in
        ``__consumer_offsets-<partition>`` (replayEndTransactionMarker)."""
        self.offset_manager.replay_end_txn(producer_id, commit, partition)

    def start_loading(self, partition: int) -> None:
        self.partitions.loading.add(partition)

    def on_loaded(self, partition: int) -> None:
        """The partition's groups are served; their loaded members get session timers (onLoaded)."""
        self.partitions.loading.discard(partition)
        self.group_manager.on_loaded(partition)
        self.consumer.on_loaded(partition)

    def take_pending(self) -> list[Outcome]:
        """Outcomes produced inside callbacks (a failed write's new rebalance), to be written."""
        return self.group_manager.take_pending() + self.consumer.take_pending()
