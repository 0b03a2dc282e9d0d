"""The actions of ``consumer-groups`` over a backend, as Kafka's ``ConsumerGroupService`` runs
them: list, describe (offsets, members, state), reset offsets (the plan from ``reset_planner``
over the offsets the backend reads), delete groups and delete offsets; ``printing`` writes the
output.
"""

from __future__ import annotations

import sys

from ...errors import CompactlogError
from . import printing
from .printing import MISSING
from .reset_planner import (AT_TIMESTAMP, EARLIEST, LATEST, LogOffsets, clamp_to_log, log_offsets_needed,
                            plan_reset, search_timestamp)


# -- --list / --describe ------------------------------------------------------------------------------

def list_groups(backend, with_state: bool, states: set[str] | None) -> None:
    """listGroups, filtered by the states given."""
    printing.print_group_list(sorted(backend.list_groups(states)), with_state)


def describe_offsets(backend, group: str) -> None:
    """The offsets view: the assigned partitions, biggest assignments first, then the committed
    partitions nobody owns (collectConsumerAssignment), with their log end offsets."""
    info = backend.describe(group)
    if info.state == "Dead":
        printing.state_says_print(group, "Dead", None)
        return
    committed = backend.committed(group)
    rows = []          # (topic, partition), offset, consumer id, host, client id
    assigned = set()
    for m in sorted((m for m in info.members if m.partitions), key=lambda m: -len(m.partitions)):
        tps = sorted(m.partitions, key=lambda tp: tp[1])
        assigned.update(tps)
        rows += [(tp, committed.get(tp), m.consumer_id, m.host, m.client_id) for tp in tps]
    rows += [(tp, committed[tp], MISSING, MISSING, MISSING) for tp in sorted(committed) if tp not in assigned]
    ends = backend.offsets([r[0] for r in rows], "latest")
    printing.print_offsets(group, info.state, rows, ends)


def describe_members(backend, group: str, verbose: bool) -> None:
    printing.print_members(group, backend.describe(group), verbose)


def describe_state(backend, group: str, verbose: bool = False) -> None:
    printing.print_state(group, backend.describe(group), verbose)


# -- --reset-offsets ----------------------------------------------------------------------------------

def partitions_to_reset(backend, group: str, topics: list, all_topics: bool) -> list:
    """topics: parsed --topic values [(topic, [partition] or None)]."""
    if all_topics:
        return sorted(backend.committed(group))
    found = []
    for topic, parts in topics:
        found += [(topic, p) for p in (parts if parts is not None else backend.partitions(topic))]
    return found


def check_partitions_exist(backend, tps: list) -> None:
    """GroupOffsetsResetter.checkAllTopicPartitionsValid."""
    known = backend.topic_partitions({t for t, _ in tps})
    missing = [(t, p) for t, p in tps if known[t] is None or p not in known[t]]
    if missing:
        raise CompactlogError(f'The partitions "{",".join(f"{t}-{p}" for t, p in missing)}" do not exist')


def read_log_offsets(backend, tps: list, needed: tuple, timestamp: int | None = None) -> LogOffsets:
    """The log offsets a plan reads, from the backend."""
    return LogOffsets(earliest=backend.offsets(tps, "earliest") if EARLIEST in needed else {},
                      latest=backend.offsets(tps, "latest") if LATEST in needed else {},
                      at_timestamp=backend.offsets(tps, "timestamp", timestamp) if AT_TIMESTAMP in needed else {})


def prepare_reset(backend, group: str, tps: list, how: tuple) -> dict:
    """The group's new offsets for scenario ``how``; Kafka's warnings on stderr."""
    kind, value = how
    committed = backend.committed(group) if kind in ("shift-by", "to-current") else {}
    timestamp = None
    if kind == "timestamp":
        # --by-duration's value is a function: now minus the duration, taken for each group's plan
        timestamp = search_timestamp(value() if callable(value) else value)
    plan = plan_reset(how, tps, committed, read_log_offsets(backend, tps, log_offsets_needed(kind), timestamp))
    return _followed(plan)


def _followed(plan) -> dict:
    for line in plan.warnings:
        sys.stderr.write(line + "\n")
    if plan.error is not None:
        raise CompactlogError(plan.error)
    return plan.offsets


def reset_offsets(backend, groups: list[str], topics: list, all_topics: bool, how: tuple | None,
                  plan_file: dict | None, execute: bool) -> dict:
    """ConsumerGroupService.resetOffsets: {group: {(topic, partition): new offset}}; an active group
    is reported and left out (an empty plan)."""
    result = {}
    for g in groups:
        info = backend.describe(g)
        if info.state not in ("Empty", "Dead"):
            printing.print_error(f"Assignments can only be reset if the group '{g}' is inactive, but the current "
                                 f"state is {info.state}.")
            result[g] = {}
            continue
        if plan_file is not None:
            requested = plan_file.get(g)
            if requested is None:
                printing.print_error(f"No reset plan for group {g} found.")
                result[g] = {}
                continue
            planned = _followed(clamp_to_log(requested, read_log_offsets(backend, list(requested),
                                                                         (EARLIEST, LATEST))))
        else:
            tps = partitions_to_reset(backend, g, topics, all_topics)
            check_partitions_exist(backend, tps)
            planned = prepare_reset(backend, g, tps, how)
        if execute and planned:
            backend.alter(g, planned)
        result[g] = planned
    return result


# -- --delete / --delete-offsets ------------------------------------------------------------------------

def delete_groups(backend, groups: list[str]) -> bool:
    return printing.print_group_deletion(backend.delete(groups) if groups else {})


def delete_offsets(backend, group: str, topics: list) -> bool:
    """ConsumerGroupService.deleteOffsets: the request's outcome, then one row per partition (a
    topic the cluster does not have gets one row, partition "-")."""
    explicit, whole = [], []
    for topic, parts in topics:
        if parts is None:
            whole.append(topic)
        else:
            explicit += [(topic, p) for p in parts]
    results: dict = {}
    known = backend.topic_partitions(whole) if whole else {}
    wanted = set(explicit)
    for t in whole:
        if known[t] is None:
            from kio.schema.errors import ErrorCode     # kio loads in ~125 ms: only when needed
            results[(t, -1)] = ErrorCode.unknown_topic_or_partition
        else:
            wanted.update((t, p) for p in known[t])
    top, per = backend.delete_offsets(group, sorted(wanted))
    if top == 0:
        # the admin client's all(): the first partition's error when the request itself succeeded
        top = next((per[tp] for tp in sorted(wanted) if per.get(tp, 0) != 0), 0)
        results.update({tp: per.get(tp, 0) for tp in wanted})
    else:
        results.update({tp: top for tp in wanted})
    return printing.print_offset_deletion(group, top, results)
