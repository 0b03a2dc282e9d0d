"""The new offsets of ``--reset-offsets``, as Kafka's ``GroupOffsetsResetter`` plans them: pure
functions over the offsets already read (the group's committed offsets and the logs' earliest,
latest and by-timestamp offsets), no I/O.

``log_offsets_needed`` says which log offsets a scenario reads, the caller reads them, then
``plan_reset`` (or ``clamp_to_log`` for a ``--from-file`` plan) gives a ``ResetPlan``: the new
offset of each partition, the warnings Kafka's tool prints (in its order) and, when the plan
cannot be made, Kafka's message for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EARLIEST, LATEST, AT_TIMESTAMP = "earliest", "latest", "timestamp"


@dataclass(frozen=True)
class LogOffsets:
    """What the logs answered, by (topic, partition); a partition the cluster or the data dir
    does not have is absent."""
    earliest: dict = field(default_factory=dict)
    latest: dict = field(default_factory=dict)
    at_timestamp: dict = field(default_factory=dict)     # the first offset at or after the time; -1: none


@dataclass
class ResetPlan:
    offsets: dict                                    # (topic, partition) -> the new offset
    warnings: list = field(default_factory=list)     # the lines Kafka's tool writes on stderr, in order
    error: str | None = None                         # the plan failed: the reason, as Kafka words it


def log_offsets_needed(kind: str) -> tuple[str, ...]:
    """The log offsets (``EARLIEST``, ``LATEST``, ``AT_TIMESTAMP``) the plan of ``kind`` reads."""
    return {"to-earliest": (EARLIEST,), "to-latest": (LATEST,), "to-current": (LATEST,),
            "timestamp": (AT_TIMESTAMP, LATEST)}.get(kind, (EARLIEST, LATEST))


def search_timestamp(ms: int) -> int:
    """The time to look offsets up by: a time before 1970 asks for 0, since negative timestamps
    are ListOffsets' earliest and latest markers."""
    return max(ms, 0)


def clamp_to_log(requested: dict, log: LogOffsets) -> ResetPlan:
    """checkOffsetsRange: offsets above the log end go to the end, below the start to the start."""
    plan = ResetPlan({})
    for tp, offset in requested.items():
        end, start = log.latest.get(tp), log.earliest.get(tp)
        if end is not None and offset > end:
            plan.warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition "
                                 f"{tp[0]}-{tp[1]}. Value will be set to {end}")
            plan.offsets[tp] = end
        elif start is not None and offset < start:
            plan.warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition "
                                 f"{tp[0]}-{tp[1]}. Value will be set to {start}")
            plan.offsets[tp] = start
        else:
            plan.offsets[tp] = offset
    return plan


def plan_reset(how: tuple, partitions: list, committed: dict, log: LogOffsets) -> ResetPlan:
    """The plan of scenario ``how`` = (kind, value) for ``partitions``: ``to-offset`` N,
    ``shift-by`` N (from the committed offsets), ``to-earliest``, ``to-latest``, ``to-current``
    (the committed offset, the log end where there is none) or ``timestamp`` (the first offset at
    or after the time ``log.at_timestamp`` was read for, else the log end; the value is not read
    here)."""
    kind, value = how
    if kind == "to-offset":
        return clamp_to_log({tp: value for tp in partitions}, log)
    if kind in ("to-earliest", "to-latest"):
        found = log.earliest if kind == "to-earliest" else log.latest
        missing = [tp for tp in partitions if tp not in found]
        if missing:
            return ResetPlan({}, error=f"Error getting {'starting' if kind == 'to-earliest' else 'ending'} offset "
                                      f"of topic partition: {missing[0][0]}-{missing[0][1]}")
        return ResetPlan({tp: found[tp] for tp in partitions})
    if kind == "shift-by":
        requested = {}
        for tp in partitions:
            if tp not in committed:
                return ResetPlan({}, error=f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                                          f"current committed offset")
            requested[tp] = committed[tp] + value
        return clamp_to_log(requested, log)
    if kind == "to-current":
        plan = ResetPlan({tp: committed[tp] for tp in partitions if tp in committed})
        for tp in partitions:
            if tp in committed:
                continue
            if tp not in log.latest:
                return ResetPlan({}, error=f"Error getting ending offset of topic partition: {tp[0]}-{tp[1]}")
            plan.offsets[tp] = log.latest[tp]
        return plan
    if kind != "timestamp":
        raise ValueError(f"unknown reset scenario {kind!r}")
    plan = ResetPlan({})
    for t, p in partitions:
        if log.at_timestamp.get((t, p), -1) < 0 and (t, p) in log.at_timestamp:
            plan.warnings.append(f"Warn: Partition {p} from topic {t} is empty. Falling back to latest known offset.")
    for tp in partitions:
        o = log.at_timestamp.get(tp, -1)
        if o < 0:
            o = log.latest.get(tp)
        if o is None:
            return ResetPlan({}, plan.warnings, f"Error getting offset by timestamp of topic partition: "
                                                f"{tp[0]}-{tp[1]}")
        plan.offsets[tp] = o
    return plan
