"""Kafka's ``GroupMetadataManager``, the classic-protocol half: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups and ListGroups; the session, join, initial-delay and sync timers that
drive a rebalance; static membership (KIP-345); which groups may be deleted and their tombstones;
the replay of ``GroupMetadata`` records; and the session timers given to members found at load.

Sans-IO, as Kafka's coordinator shard: every operation returns an ``Outcome`` (the records to
append and a callback ``on_written(error)`` run once the append succeeded or failed). The group
state machine changes in place, as Kafka's classic groups do, so its records are written with
``replay`` off. JoinGroup and SyncGroup answer through futures completed when the rebalance
allows it (by another member's request or by a timer); timers are plain data in the shared
``Timer``, run by the caller. The clock is injected.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from ...record import consumer_offsets as R
from .api_data import (CLASSIC, NO_LEADER, UNKNOWN_MEMBER, DescribedGroup, JoinRequest, JoinResponse,
                       ListedGroup, SyncRequest, SyncResponse)
from .classic_group import ClassicGroup, Member, complete_join, complete_sync
from .classic_group_state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from .config import GroupConfig
from ..runtime import CoordinatorPartitions, GroupError, Outcome, Timer, append_error

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")


# -- timer keys -------------------------------------------------------------------------------------

def heartbeat_key(group_id: str, member_id: str):
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str):
    return ("join", group_id)


def sync_key(group_id: str):
    return ("sync", group_id)


def _done(value) -> Future:
    f = Future()
    f.set_result(value)
    return f


class GroupMetadataManager:
    """The classic groups of the broker; see the module docstring."""

    def __init__(self, config: GroupConfig, clock: Callable[[], int], timer: Timer,
                 partitions: CoordinatorPartitions):
        self.config = config
        self.clock = clock
        self.timer = timer
        self.partitions = partitions
        self.groups: dict[str, ClassicGroup] = {}
        self._pending: list[Outcome] = []       # outcomes produced inside write callbacks
        self.completed_rebalances = 0           # group-completed-rebalance-count (broker metrics)

    def group(self, group_id: str) -> ClassicGroup:
        g = self.groups.get(group_id)
        if g is None:
            raise GroupError(ErrorCode.group_id_not_found, f"group {group_id} not found")
        return g

    def get_or_create_group(self, group_id: str, create: bool) -> ClassicGroup:
        g = self.groups.get(group_id)
        if g is None:
            if not create:
                raise GroupError(ErrorCode.group_id_not_found, f"group {group_id} not found")
            g = self.groups[group_id] = ClassicGroup(group_id, self.clock)
        return g

    def _schedule(self, key, delay_ms: int, fn) -> None:
        self.timer.schedule(key, self.clock() + delay_ms, fn)

    # == JoinGroup ====================================================================================
    def join_group(self, req: JoinRequest) -> tuple[Outcome, Future]:
        """The answer is a future: completed now for a refusal, or when the join phase ends."""
        if not req.group_id:
            return Outcome(), _done(JoinResponse(ErrorCode.invalid_group_id, member_id=req.member_id))
        try:
            self.partitions.check_loaded(req.group_id)
        except GroupError as e:
            return Outcome(), _done(JoinResponse(e.code, member_id=req.member_id))
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return Outcome(), _done(JoinResponse(ErrorCode.invalid_session_timeout, member_id=req.member_id))

        future: Future = Future()
        unknown = req.member_id == UNKNOWN_MEMBER
        is_new_group = req.group_id not in self.groups
        try:
            group = self.get_or_create_group(req.group_id, unknown)
        except GroupError:
            future.set_result(JoinResponse(ErrorCode.unknown_member_id, member_id=req.member_id))
            return Outcome(), future

        outcome = None
        if not group.accept_joining_member(req.member_id, self.config.max_size):
            group.remove(req.member_id)
            future.set_result(JoinResponse(ErrorCode.group_max_size_reached, member_id=UNKNOWN_MEMBER))
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

    def _join_new_member(self, req: JoinRequest, group: ClassicGroup, future: Future) -> Outcome:
        names = [n for n, _ in req.protocols]
        if group.in_state(DEAD):
            future.set_result(JoinResponse(ErrorCode.coordinator_not_available, member_id=UNKNOWN_MEMBER))
        elif not group.supports_protocols(req.protocol_type, names):
            future.set_result(JoinResponse(ErrorCode.inconsistent_group_protocol, member_id=UNKNOWN_MEMBER))
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
                future.set_result(JoinResponse(ErrorCode.member_id_required, member_id=new_id))
            else:
                return self._add_member_and_rebalance(req, group, new_id, future)
        return Outcome()

    def _join_existing_member(self, req: JoinRequest, group: ClassicGroup, future: Future) -> Outcome:
        member_id = req.member_id
        names = [n for n, _ in req.protocols]
        if group.in_state(DEAD):
            future.set_result(JoinResponse(ErrorCode.coordinator_not_available, member_id=member_id))
            return Outcome()
        if not group.supports_protocols(req.protocol_type, names):
            future.set_result(JoinResponse(ErrorCode.inconsistent_group_protocol, member_id=member_id))
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
        future.set_result(JoinResponse(ErrorCode.unknown_member_id, member_id=member_id))
        return Outcome()

    @staticmethod
    def _current_generation(group: ClassicGroup, member_id: str, with_members: bool) -> JoinResponse:
        return JoinResponse(ErrorCode.none, group.generation_id, group.protocol_type, group.protocol_name,
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
        self.reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
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
        self.reschedule_heartbeat(group, member)
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
                        self.reschedule_heartbeat(group, old)
                        if not future.done():
                            future.set_result(JoinResponse(append_error(error), group.generation_id,
                                                           group.protocol_type, group.protocol_name,
                                                           current_leader or NO_LEADER, UNKNOWN_MEMBER))
                        return
                    complete_join(group, member, JoinResponse(ErrorCode.none, group.generation_id,
                                                              group.protocol_type, group.protocol_name,
                                                              current_leader or NO_LEADER, new_id))
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
            self._reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
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
            complete_join(group, m, JoinResponse(ErrorCode.none, group.generation_id, group.protocol_type,
                                                 group.protocol_name, group.leader_id or NO_LEADER,
                                                 m.member_id, members))
            self.reschedule_heartbeat(group, m)
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

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
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
        complete_join(group, member, JoinResponse(ErrorCode.unknown_member_id, member_id=UNKNOWN_MEMBER))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            return self._maybe_prepare_rebalance_or_complete_join(group, reason)
        if group.in_state(PREPARING_REBALANCE) and group.has_all_members_joined():
            return self._complete_join(group)
        return Outcome()

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self._propagate_assignment(group, ErrorCode.none)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ptype, pname = (group.protocol_type, group.protocol_name) if error == ErrorCode.none else (None, None)
        for m in list(group.members.values()):
            if complete_sync(m, SyncResponse(error, ptype, pname, m.assignment)):
                # sessions run again from the moment the assignment is out
                self.reschedule_heartbeat(group, m)

    # == SyncGroup ====================================================================================
    def sync_group(self, req: SyncRequest) -> tuple[Outcome, Future]:
        if not req.group_id:
            return Outcome(), _done(SyncResponse(ErrorCode.invalid_group_id))
        try:
            self.partitions.check_loaded(req.group_id)
        except GroupError as e:
            return Outcome(), _done(SyncResponse(e.code))
        group = self.groups.get(req.group_id)
        if group is None or group.is_empty():
            return Outcome(), _done(SyncResponse(ErrorCode.unknown_member_id))
        try:
            self._validate_sync(group, req)
        except GroupError as e:
            return Outcome(), _done(SyncResponse(e.code))
        if group.in_state(PREPARING_REBALANCE):
            return Outcome(), _done(SyncResponse(ErrorCode.rebalance_in_progress))
        if group.in_state(STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            m = group.member(req.member_id)
            return Outcome(), _done(SyncResponse(ErrorCode.none, group.protocol_type, group.protocol_name,
                                                 m.assignment))
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
                    self.completed_rebalances += 1
        rec = R.group_metadata_record(group.group_id, group.metadata_value(assignment))
        return Outcome([rec], written, replay=False), future

    def _validate_sync(self, group: ClassicGroup, req: SyncRequest) -> None:
        """A GroupError unless the member may sync in this generation."""
        if group.in_state(DEAD):
            raise GroupError(ErrorCode.coordinator_not_available)
        group.validate_member(req.member_id, req.group_instance_id, "sync-group")
        if req.generation_id != group.generation_id:
            raise GroupError(ErrorCode.illegal_generation)
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            raise GroupError(ErrorCode.inconsistent_group_protocol)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (DEAD, EMPTY, PREPARING_REBALANCE) or not group.pending_sync_members:
            self.timer.cancel(sync_key(group.group_id))

    # == Heartbeat ====================================================================================
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> tuple[Outcome, ErrorCode]:
        if not group_id:
            return Outcome(), ErrorCode.invalid_group_id
        if self.partitions.is_loading(group_id):
            return Outcome(), ErrorCode.none          # Kafka answers heartbeats blindly while loading
        group = self.groups.get(group_id)
        if group is None:
            return Outcome(), ErrorCode.unknown_member_id
        if group.in_state(DEAD):
            return Outcome(), ErrorCode.coordinator_not_available
        try:
            group.validate_member(member_id, group_instance_id, "heartbeat")
        except GroupError as e:
            return Outcome(), e.code
        if generation_id != group.generation_id:
            return Outcome(), ErrorCode.illegal_generation
        if group.in_state(EMPTY):
            return Outcome(), ErrorCode.unknown_member_id
        self.reschedule_heartbeat(group, group.member(member_id))
        # PreparingRebalance: this is how members learn that a rebalance started
        return Outcome(), ErrorCode.rebalance_in_progress if group.in_state(PREPARING_REBALANCE) else ErrorCode.none

    # == LeaveGroup ===================================================================================
    def leave_group(self, group_id: str, members: list) -> tuple[Outcome, ErrorCode, list]:
        """``members``: (member id, instance id, reason). (outcome, top-level error,
        [(member id, instance id, error)])."""
        if not group_id:
            return Outcome(), ErrorCode.invalid_group_id, []
        try:
            self.partitions.check_loaded(group_id)
        except GroupError as e:
            return Outcome(), e.code, []
        group = self.groups.get(group_id)
        if group is None:
            return Outcome(), ErrorCode.none, [(mid, iid, ErrorCode.unknown_member_id) for mid, iid, _ in members]
        if group.in_state(DEAD):
            return Outcome(), ErrorCode.coordinator_not_available, []
        results = []
        for member_id, instance_id, reason in members:
            reason = reason or "not provided"
            if member_id == UNKNOWN_MEMBER:
                # an admin may remove a static member by its instance id alone
                existing = group.static_member_id(instance_id)
                if existing is not None:
                    self._remove_current_member(group, existing, reason)
                    results.append((member_id, instance_id, ErrorCode.none))
                else:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
                log.info(f"[Group {group_id}] Pending member {member_id} has left group through explicit "
                         f"LeaveGroup request; client reason: {reason}")
                results.append((member_id, instance_id, ErrorCode.none))
            else:
                try:
                    group.validate_member(member_id, instance_id, "leave-group")
                except GroupError as e:
                    results.append((member_id, instance_id, e.code))
                    continue
                self._remove_current_member(group, member_id, reason)
                results.append((member_id, instance_id, ErrorCode.none))
        left = [r[0] for r in results if r[2] == ErrorCode.none]
        outcome = Outcome()
        if left:
            why = f"explicit LeaveGroup request for ({', '.join(left)}) members."
            if group.state in (STABLE, COMPLETING_REBALANCE):
                outcome = self._maybe_prepare_rebalance_or_complete_join(group, why)
            elif group.in_state(PREPARING_REBALANCE):
                outcome = self._maybe_complete_join_phase(group)
        return outcome, ErrorCode.none, results

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        log.info(f"[Group {group.group_id}] Member {member_id} has left group through explicit LeaveGroup "
                 f"request; client reason: {reason}")
        complete_join(group, member, JoinResponse(ErrorCode.unknown_member_id, member_id=UNKNOWN_MEMBER))
        group.remove(member_id)

    # == DescribeGroups / ListGroups ======================================================================
    def describe_groups(self, group_ids: list) -> list[DescribedGroup]:
        out = []
        for gid in group_ids:
            if gid is None:
                out.append(DescribedGroup(None, ErrorCode.invalid_group_id))
                continue
            try:
                self.partitions.check_loaded(gid)
            except GroupError as e:
                out.append(DescribedGroup(gid, e.code))
                continue
            group = self.groups.get(gid)
            out.append(DescribedGroup(gid, ErrorCode.none, DEAD) if group is None else group.as_described_group())
        return out

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        out = []
        for gid, g in self.groups.items():
            if self.partitions.is_loading(gid):
                continue
            if states and g.state.lower() not in states:
                continue
            if types and CLASSIC not in types:
                continue
            out.append(g.as_listed_group())
        return out

    # == DeleteGroups and expiry: which groups go =======================================================
    def validate_delete_group(self, group_id: str) -> None:
        """A GroupError unless the group may be deleted: loaded, known, alive and without members."""
        self.partitions.check_loaded(group_id)
        self.group(group_id).validate_delete_group()

    @staticmethod
    def create_group_tombstone_records(group_id: str, records: list) -> None:
        records.append(R.group_metadata_record(group_id, None))

    def maybe_delete_group(self, group_id: str, records: list) -> None:
        """The group's tombstone when it is empty (its offsets all expired)."""
        if self.groups[group_id].is_empty():
            self.create_group_tombstone_records(group_id, records)

    def group_ids(self) -> list[str]:
        return list(self.groups)

    # == replay and loading =============================================================================
    def replay(self, gid: str, value: R.GroupMetadataValue | None) -> None:
        """A GroupMetadata record (None: its tombstone) read at load or written."""
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

    def on_loaded(self, partition: int) -> None:
        """Every loaded member gets a session timer: absent members are then removed (onLoaded)."""
        for gid, group in self.groups.items():
            if self.partitions.partition_for(gid) != partition:
                continue
            log.info(f"Loaded classic group {gid} with {len(group.members)} members.")
            for m in group.members.values():
                self.reschedule_heartbeat(group, m)
            if len(group.members) > self.config.max_size:
                self._pending.append(self._prepare_rebalance(
                    group, f"Freshly-loaded group {gid} (size {len(group.members)}) is over capacity "
                           f"{self.config.max_size}"))

    def take_pending(self) -> list[Outcome]:
        """Outcomes produced inside callbacks (a failed write's new rebalance), to be written."""
        out, self._pending[:] = list(self._pending), []
        return [o for o in out if o.records or o.on_written]


def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current

