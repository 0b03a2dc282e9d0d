"""The status page's data: a JSON-able picture of the broker's logs, cleaner and groups.

What Kafka shows operators through JMX (``LogCleanerManager``'s dirty ratios and
uncleanable partitions, ``LogCleaner``'s threads, ``Log``'s size and segment count) and through
``kafka-consumer-groups.sh --describe`` (lag), in one document, computed on request from what the
broker holds in memory: the open logs (``DataDir.logs``) and their segment lists, the cleaning
states of the data dir's ``CleanerManager``, the cleaner threads' health and recent cleanings
(``Background.activity``, a ``cleaner.activity.CleanerActivity``), the group coordinator's groups
and committed offsets. No directory is listed; the one file read is the small cleaner checkpoint,
which the cleaner keeps only on disk (its threads read it the same way).

Each compacted partition carries the ``PartitionStatus`` of ``compactlog cleaner status`` (the
same decision the cleaner makes: ``cleaner.plan.partition_status``), so the live and the offline
commands print the same rows.
"""

from __future__ import annotations

import math
import time

from ...cleaner.manager import CleanerManager
from ...cleaner.plan import partition_status, select_logs
from ..state import INTERNAL_TOPICS

FORMAT_VERSION = 1


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _finite(x: float) -> float:
    return 0.0 if x is None or math.isnan(x) else x


def _segments(segments, log_end_offset: int, active_base: int, first_dirty: int | None,
              first_uncleanable: int | None) -> list[dict]:
    """Each segment: where it starts and ends, its bytes, and which section of the log it is in.

    ``cleaned``: below the first dirty offset (Kafka's clean section: the segments the cleaner
    checkpoint has passed); ``cleanable``: in the dirty range the next clean would take;
    the rest of the dirty head is not cleanable yet (the active segment, an open transaction,
    min.compaction.lag.ms)."""
    rows = []
    for i, s in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < len(segments) else log_end_offset
        active = s.base_offset == active_base
        cleaned = first_dirty is not None and s.base_offset < first_dirty and end <= first_dirty
        cleanable = (first_dirty is not None and first_uncleanable is not None and not active
                     and s.base_offset >= first_dirty and s.base_offset < first_uncleanable)
        rows.append({"baseOffset": s.base_offset, "endOffset": end, "size": s.size, "active": active,
                     "cleaned": cleaned, "cleanable": cleanable,
                     "section": "active" if active else "cleaned" if cleaned
                     else "cleanable" if cleanable else "dirty" if first_dirty is not None else "log"})
    return rows


def _partition(log, checkpoint: int | None, now_ms: int, manager: CleanerManager | None) -> dict | None:
    # under the partition lock: appends, retention and the cleaner's swaps change the segment list
    with log.lock:
        if log.deleted or log.closed:
            return None
        segments = list(log.segments)
        active_base = log.active_segment.base_offset
        status = partition_status(log, checkpoint, now_ms)
        offsets = {"logStartOffset": log.log_start_offset, "logEndOffset": log.log_end_offset,
                   "highWatermark": log.high_watermark, "lastStableOffset": log.last_stable_offset}
    compacted = status.compacted
    first_dirty = status.first_dirty if compacted else None
    first_uncleanable = status.first_uncleanable if compacted else None
    key = (log.topic, log.partition)
    state = manager.cleaning_state(*key) if manager is not None else None
    row = {"topic": log.topic, "partition": log.partition, "size": sum(s.size for s in segments),
           "segmentCount": len(segments), **offsets, "compacted": compacted,
           "cleanerCheckpoint": checkpoint, "firstDirtyOffset": first_dirty,
           "firstUncleanableOffset": first_uncleanable,
           "cleanBytes": status.clean_bytes, "cleanableBytes": status.cleanable_bytes,
           "dirtyRatio": _finite(status.dirty_ratio) if compacted else None,
           "minCleanableDirtyRatio": status.min_cleanable_dirty_ratio if compacted else None,
           "eligible": status.eligible, "reason": status.reason, "nextEligibleMs": status.next_eligible_ms,
           "cleaningState": str(state) if state is not None else None,
           "segments": _segments(segments, offsets["logEndOffset"], active_base, first_dirty, first_uncleanable)}
    return row, status


def _tiers(state, log, row: dict) -> None:
    """A tiered partition's two tiers (``remote``: the manifest's segments, the local log start,
    the highest remote offset, the copy lag) and each segment's tier: ``remote`` (in the bucket
    only, below the local log start), ``local`` (not copied yet) or ``both`` (copied, not yet
    trimmed by local retention). Untiered partitions get ``remote`` None and no tiers."""
    remote = getattr(state, "remote", None)
    if remote is None or not log.remote_log_enabled:
        row["remote"] = None
        return
    from ..metrics.remote import tier_row
    tiers = tier_row(remote, log)
    row["remote"] = tiers
    rp = remote.partitions.get((log.topic, log.partition))
    manifest = rp.manifest if rp is not None else None
    hro = manifest.highest_offset if manifest is not None else -1
    for seg in row["segments"]:
        seg["tier"] = "both" if seg["endOffset"] - 1 <= hro and not seg["active"] else "local"
    below = [s for s in (manifest.segments if manifest is not None else ())
             if s.start_offset < log.local_log_start_offset]
    row["remoteSegments"] = [{"baseOffset": s.start_offset, "endOffset": s.end_offset + 1, "size": s.size_in_bytes,
                              "id": s.id, "tier": "remote"} for s in below]


RECENT_CLEANINGS = 20


def _thread_rows(activity, manager, in_progress: list[str]) -> list[dict]:
    """Each cleaner thread: alive or dead (since when, why, when it is restarted), and when it last
    looked for work. Which partitions are being cleaned is known per data dir, not per thread:
    with one thread they are its own."""
    if activity is None:
        return []
    threads = activity.threads()
    looks = dict(getattr(manager, "selections", None) or {})
    rows = []
    for name in sorted(threads):
        h = threads[name]
        dead = h.dead_since_ms is not None
        one = len(threads) == 1
        look = looks.get(name)
        rows.append({"name": name, "alive": not dead,
                     "state": "dead" if dead else ("cleaning" if in_progress else "idle") if one else "alive",
                     "partitions": in_progress if one and not dead else [],
                     "lastLookMs": look.time_ms if look is not None else None,
                     "deadSinceMs": h.dead_since_ms, "lastError": h.last_error, "deaths": h.deaths,
                     "restartAtMs": h.restart_at_ms})
    return rows


def _cleaning_rows(activity) -> list[dict]:
    """The last cleanings, newest first: when, which partition, how it ended, what it removed."""
    if activity is None:
        return []
    rows = []
    for c in reversed(activity.recent()[-RECENT_CLEANINGS:]):
        s = c.stats
        rows.append({"topic": c.topic, "partition": c.partition, "endedMs": c.finished_ms, "result": c.result,
                     "engine": c.engine, "thread": c.thread,
                     "durationSeconds": round(s.elapsed_seconds, 6) if s is not None else None,
                     "recordsRead": s.messages_read if s is not None else None,
                     "recordsRemoved": max(s.messages_read - s.messages_written, 0) if s is not None else None,
                     "removed": dict(s.removed) if s is not None else {},
                     "bytesBefore": c.start_size, "bytesAfter": c.end_size, "error": c.error})
    return rows


def _groups(state, ends: dict[tuple[str, int], int]) -> dict:
    service = getattr(state, "groups", None)
    if service is None:
        return {"loading": False, "groups": []}
    taken = []
    with service.lock:          # the coordinator's own lock: its maps change under it
        coordinator = service.coordinator
        for gid, g in coordinator.groups.items():
            taken.append((gid, g.state, g.protocol_type or "", g.generation_id, len(g.members),
                          coordinator.committed(gid)))
        # KIP-848 consumer groups: their group epoch stands for the generation
        for gid, g in coordinator.consumer.groups.items():
            taken.append((gid, g.state.value, "consumer", g.group_epoch, len(g.members), coordinator.committed(gid)))
    groups = []
    for gid, group_state, protocol_type, generation, members, committed in sorted(taken, key=lambda x: x[0]):
        parts = []
        for (topic, partition), om in sorted(committed.items()):
            end = ends.get((topic, partition))
            parts.append({"topic": topic, "partition": partition, "committedOffset": om.offset,
                          "logEndOffset": end, "lag": max(end - om.offset, 0) if end is not None else None})
        groups.append({"groupId": gid, "state": group_state, "protocolType": protocol_type,
                       "generation": generation, "members": members,
                       "lag": sum(p["lag"] for p in parts if p["lag"] is not None), "partitions": parts})
    loaded = getattr(service, "loaded", None)
    return {"loading": loaded is not None and not loaded.is_set(), "groups": groups}


def status_data(state, background=None, now_ms: int | None = None) -> dict:
    """The whole status document for ``state`` (a ``BrokerState``) and its cleaner threads
    (``background``: a ``server.background.Background``; None: no cleaner threads here) at
    ``now_ms`` (default: now)."""
    now = _wall_ms() if now_ms is None else now_ms
    dd = state.datadir
    broker = dd.broker
    manager = dd.cleaner if isinstance(dd.cleaner, CleanerManager) else None
    checkpoints = manager.all_cleaner_checkpoints() if manager is not None else dd.cleaner_checkpoint.read()
    topics, statuses = [], []
    ends: dict[tuple[str, int], int] = {}
    by_topic: dict[str, list] = {}
    for key, log in sorted(list(dd.logs.items()), key=lambda x: x[0]):
        by_topic.setdefault(key[0], []).append((key, log))
    for topic, logs in by_topic.items():
        parts = []
        for (t, p), log in logs:
            got = _partition(log, checkpoints.get((t, p)), now, manager)
            if got is None:
                continue
            row, status = got
            _tiers(state, log, row)
            parts.append(row)
            ends[(t, p)] = row["highWatermark"]
            if status.compacted or status.unknown_configs:
                statuses.append(status)
        if not parts:
            continue
        config = logs[0][1].config
        topics.append({"name": topic, "internal": topic in INTERNAL_TOPICS,
                       "cleanupPolicy": ",".join(config.get("cleanup.policy")),
                       "compacted": config.compact,
                       "minCleanableDirtyRatio": config.get("min.cleanable.dirty.ratio"),
                       "size": sum(p["size"] for p in parts), "partitions": parts})
    order = {(s.topic, s.partition): i for i, s in enumerate(select_logs(statuses))}
    by_key = {(p["topic"], p["partition"]): p for t in topics for p in t["partitions"]}
    status_rows = []
    for s in statuses:
        d = s.to_dict()
        d["cleaningOrder"] = order.get((s.topic, s.partition))
        row = by_key[(s.topic, s.partition)]
        if row.get("remote"):
            # the same tiers ``cleaner status`` prints offline, segments with their tier included
            d["tiers"] = {**row["remote"], "segments": row["remoteSegments"] + [
                {k: x[k] for k in ("baseOffset", "endOffset", "size", "tier")} for x in row["segments"]]}
        status_rows.append(d)
        row["cleaningOrder"] = d["cleaningOrder"]
    # Kafka's max-dirty-percent: over the logs with data (``cleaner status`` prints the same)
    ratios = [s.dirty_ratio for s in statuses if s.clean_bytes + s.cleanable_bytes > 0]
    uncleanable = manager.uncleanable_partitions() if manager is not None else {}
    activity = getattr(background, "activity", None)
    in_progress = sorted(f"{p['topic']}-{p['partition']}" for t in topics for p in t["partitions"]
                         if p["cleaningState"] == "in progress")
    enabled = bool(broker.get("log.cleaner.enable") and broker.get("log.cleaner.threads") > 0)
    return {
        "version": FORMAT_VERSION,
        "nowMs": now,
        "broker": {"nodeId": state.node_id, "clusterId": state.cluster_id, "dataDir": dd.path,
                   "advertised": str(state.advertised) if state.advertised is not None else None,
                   # every listener's endpoint: ``cleaner status --bootstrap-server`` checks that the
                   # document it read is the one of the broker it asked (``cli.live_status``)
                   "advertisedListeners": [str(a) for a in (state.advertised_listeners or {}).values()]
                   or ([str(state.advertised)] if state.advertised is not None else [])},
        "cleaner": {
            "enabled": enabled,
            "threadsConfigured": broker.get("log.cleaner.threads") if enabled else 0,
            "backoffMs": broker.get("log.cleaner.backoff.ms"),
            "maxDirtyPercent": int(100 * max(_finite(r) for r in ratios)) if ratios else 0,
            "threads": _thread_rows(activity, manager, in_progress),
            "inProgress": in_progress,
            "uncleanable": [{"topic": t, "partition": p, "reason": u.reason, "retryAtMs": u.retry_at_ms}
                            for (t, p), u in sorted(uncleanable.items())],
            "recentCleanings": _cleaning_rows(activity),
            "statuses": status_rows,
        },
        "topics": topics,
        "groups": _groups(state, ends),
    }
