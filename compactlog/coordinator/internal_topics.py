"""The coordinators' internal topics, ``__consumer_offsets`` and ``__transaction_state``: their
partition count, and their repair at the broker's start.

Kafka creates each on the first coordinator lookup, with ``offsets.topic.num.partitions`` /
``transaction.state.log.num.partitions`` partitions (50), and the count never changes: a group's or
a transactional id's partition is ``hash % count`` (``GroupCoordinator.partitionFor``,
``TransactionStateManager.partitionFor``, which checks at each load that the count is stable).
Kafka's controller records a topic's count before any broker makes a directory, so a crash never
makes a topic shorter; ``DataDir.create_topic`` does the same with the topics file.

The count (``partition_count``, the one rule both coordinators and the offline tools use): what
the topics file records; for a topic known only by its directories (a Kafka dir copied here, or a
creation by an older compactlog that a kill -9 interrupted: it wrote the record last), the broker's
setting, or more when more directories exist (a count is never lowered). So a topic created on
purpose with fewer partitions (``offsets.topic.num.partitions=3``) is whole at 3.

``repair`` (at start, before any log of theirs is opened) makes each internal topic whole at that
count: the missing partitions made, empty, and the count recorded. Transactional ids a short
``__transaction_state`` placed by ``hash % its directories`` (an older compactlog kept such a count
for good) are moved where ``hash % count`` puts them, as Kafka would look for them: each id's latest
record appended to its partition and synced, then a tombstone where it was. The count is recorded
last, so a crash during the repair leaves it to be done again at the next start (an id then found
in both places carries the same value in both). Group records are not moved: the group
coordinator of those versions already placed them by the configured count.
"""

from __future__ import annotations

import logging

from ..record import consumer_offsets as R
from ..record import transaction_log as TL
from ..storage.datadir import INTERNAL_TOPIC_CONFIGS
from .txn.state_log import TRANSACTION_STATE_TOPIC, topic_configs

log = logging.getLogger("kafka.log.LogManager")

# Kafka's Topic.INTERNAL_TOPICS: the coordinators' topics, which clients may not write or delete
INTERNAL_TOPICS = frozenset({R.OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, "__share_group_state"})

# the broker setting each internal topic is created with
PARTITION_SETTINGS = {R.OFFSETS_TOPIC: "offsets.topic.num.partitions",
                      TRANSACTION_STATE_TOPIC: "transaction.state.log.num.partitions"}
MOVE_BATCH_BYTES = 512 * 1024      # records per append while moving ids, well inside max.message.bytes


def offsets_topic_configs(broker) -> dict[str, str]:
    """The configs Kafka gives ``__consumer_offsets`` at creation (its segment size is the broker's
    ``offsets.topic.segment.bytes``)."""
    return {**INTERNAL_TOPIC_CONFIGS[R.OFFSETS_TOPIC],
            "segment.bytes": str(broker.get("offsets.topic.segment.bytes"))}


def creation_configs(topic: str, broker) -> dict[str, str]:
    return offsets_topic_configs(broker) if topic == R.OFFSETS_TOPIC else topic_configs(broker)


def partition_count(dd, topic: str, warn: logging.Logger | None = None) -> int:
    """The partitions of the internal ``topic`` of the data dir ``dd`` (see the module docstring):
    the recorded count, else the broker's setting, never less than its directories. ``warn``: the
    logger that says so when the count is not the setting (a coordinator's, at its start)."""
    setting = PARTITION_SETTINGS[topic]
    configured = dd.broker.get(setting)
    if not dd.has_topic(topic):
        return configured
    n = max(dd.partitions(topic), default=-1) + 1       # the record, and the directories beyond it
    if dd.registered_partitions(topic) is None:
        n = max(configured, n)
    if n != configured and warn is not None:
        warn.warning(f"{topic} has {n} partitions, not {setting}={configured}: keeping {n} (the count of a "
                     f"created topic never changes)")
    return n


def repair(dd) -> list[str]:
    """Make each internal topic of the writable data dir ``dd`` whole (module docstring); one line
    logged for each topic repaired, and returned."""
    lines = []
    for topic in PARTITION_SETTINGS:
        if not dd.has_topic(topic):
            continue
        registered = dd.registered_partitions(topic)
        present = dd.partition_dirs().get(topic, [])
        count = partition_count(dd, topic)
        if registered is not None and set(present) >= set(range(count)):
            continue                    # whole
        made = sorted(set(range(count)) - set(present))
        moved = move_transactional_ids(dd, count) \
            if topic == TRANSACTION_STATE_TOPIC and registered is None else 0
        dd.complete_topic(topic, count, creation_configs(topic, dd.broker))
        if not made and not moved:
            continue                    # a whole topic known by its directories: its count recorded
        why = ("its creation was interrupted" if registered is not None else
               f"no record of its count: {PARTITION_SETTINGS[topic]}={dd.broker.get(PARTITION_SETTINGS[topic])}")
        line = (f"Repaired {topic}: {len(present)} of its {count} partitions were there ({why}); made "
                f"{f'partition(s) {spans(made)} (empty)' if made else 'none'}")
        if moved:
            line += f", moved {moved} transactional id(s) to the partition hash % {count} gives them"
        log.warning(line)
        lines.append(line)
    return lines


def move_transactional_ids(dd, count: int) -> int:
    """Move each id whose latest ``__transaction_state`` record lies in another partition than
    ``hash % count`` there (module docstring); the ids moved."""
    moved = 0
    for p in sorted(dd.partition_dirs().get(TRANSACTION_STATE_TOPIC, [])):
        lg = dd.open_log(TRANSACTION_STATE_TOPIC, p)
        misplaced = misplaced_ids(lg, p, count)
        if not misplaced:
            continue
        homes: dict[int, list] = {}
        for tid, (key, value) in misplaced.items():
            homes.setdefault(R.partition_for(tid, count), []).append((key, value))
        for q in sorted(homes):
            home = dd.open_log(TRANSACTION_STATE_TOPIC, q, create=True)
            _append(home, homes[q])
            home.flush()
        _append(lg, [(key, None) for key, _ in misplaced.values()])
        lg.flush()
        moved += len(misplaced)
    return moved


def misplaced_ids(lg, partition: int, count: int) -> dict[str, tuple[bytes, bytes]]:
    """id -> (key, value) of its latest record in ``lg`` (``__transaction_state``-``partition``),
    for the ids that record keeps (not a tombstone) and ``hash % count`` places elsewhere."""
    latest: dict[str, tuple[bytes, bytes | None]] = {}
    for b in lg.batches(lg.log_start_offset, lg.log_end_offset):
        if b.is_control:
            continue
        for r in b.records():
            if r.key is None:
                continue
            try:
                tid = TL.read_key(bytes(r.key))
            except TL.TransactionLogError:
                continue                # the loader reports it, where it is
            if tid is not None:
                latest[tid] = (bytes(r.key), None if r.value is None else bytes(r.value))
    return {tid: kv for tid, kv in latest.items()
            if kv[1] is not None and R.partition_for(tid, count) != partition}


def _append(lg, records: list) -> None:
    """``records`` (key, value) in batches of about MOVE_BATCH_BYTES, as the coordinator appends."""
    chunk: list = []
    size = 0
    for key, value in records:
        chunk.append((key, value))
        size += len(key) + len(value or b"") + 32
        if size >= MOVE_BATCH_BYTES:
            lg.append_records([k for k, _ in chunk], [v for _, v in chunk])
            chunk, size = [], 0
    if chunk:
        lg.append_records([k for k, _ in chunk], [v for _, v in chunk])


def spans(numbers: list[int]) -> str:
    """[3, 18, 19, 20] -> '3, 18-20'."""
    out: list[str] = []
    start = prev = None
    for n in sorted(numbers) + [None]:
        if start is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ", ".join(out)
