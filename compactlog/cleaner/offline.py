"""Offline compaction that cannot surprise (``clean`` on a copied data dir): what a run's
``--config`` reaches, records without a key, and the dry run.

Kafka's cleaner removes every record without a key from a compacted log (it counts them as
invalid messages): Kafka's producers cannot write one to a compacted topic, so only a topic that
was not compacted when they were written holds them. ``clean --config cleanup.policy=compact``
compacts such a topic for one run; this module keeps that from emptying it unasked:

* ``config_scope_error``: session configs reach only the topics named (``--topic``) or, said
  explicitly, every topic (``--all-topics``);
* ``compacted_by_session`` and ``find_keyless``: the partitions compacted only because of this
  run's configs, and the keyless records each holds in the range a clean would rewrite, counted
  before anything is written; the run is refused unless ``--drop-keyless`` is given, and each
  task checks again (``PartitionCleanPlan.extra["refuse_keyless"]``) for records that arrived since;
* ``dry_run``: what a clean would remove from each partition, per reason, writing nothing
  (``explain_partition`` for every partition the run would consider);
* ``idle_outcomes``: a run that would clean nothing, found read-only before the data dir is
  opened for writing. Such a run then writes nothing at all: opening a copied Kafka dir as a
  writer would take its lock, write the missing indexes, producer snapshots, leader-epoch and
  recovery checkpoints and the clean-shutdown marker: none of it is the user's to pay for a run
  that changes no log (the first run that cleans does all of it, as Kafka's broker would). A
  cleaner checkpoint outside its partition's log is work, though: Kafka's cleaner resets it to
  the log start even when it cleans nothing, and so does the run, saying so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..record.batch import as_u8, iter_batches
from .cleaner import Cleaner, PartitionOutcome, compacted_partitions
from .explain import Explanation, explain_partition
from .fast_path import SegmentScan
from .plan import log_to_clean, partition_status
from .rolled_view import as_rolled

NAMES_SHOWN = 10        # topics named in one error line before "and N more"


def config_scope_error(topics_in_dir: list[str], topics: list[str], all_topics: bool, where: str) -> str | None:
    """The one line that refuses ``--config`` reaching topics nobody named, or None."""
    if topics or all_topics:
        return None
    shown = ", ".join(topics_in_dir[:NAMES_SHOWN])
    more = len(topics_in_dir) - NAMES_SHOWN
    listing = f"{shown} and {more} more" if more > 0 else shown
    return (f"--config without --topic would apply to every topic of {where} ({len(topics_in_dir)}: "
            f"{listing}); name the topics with --topic T (repeatable) or give --all-topics")


def compacted_by_session(datadir, topics=None, partition: int | None = None) -> list[tuple[str, int]]:
    """Partitions compacted with this run's session configs but not with their topic's own."""
    if not datadir.session_configs:
        return []
    chosen = []
    for t, p in compacted_partitions(datadir, topics, partition):
        if datadir.topic_config(t).compact and not datadir.topic_config(t, session=False).compact:
            chosen.append((t, p))
    return chosen


@dataclass
class KeylessRecords:
    """Records without a key in [start, end) of a partition: what a clean would remove as invalid."""
    topic: str
    partition: int
    start: int
    end: int
    records: int
    keyless: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def text(self) -> str:
        return (f"{self.name}: {self.keyless} of {self.records} records have no key (offsets "
                f"[{self.start}, {self.end}))")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["refused"] = "keyless records"
        return d


def count_keyless(log, start: int, end: int) -> tuple[int, int]:
    """(records, records without a key) of the data batches with offsets in [start, end):
    uncompressed segments in one numba pass (the cleaner's scanner), others batch by batch. The
    bytes are read through the log's segment source, as a clean reads them (the caller holds the
    log's lock: the listing is the log's own)."""
    records = keyless = 0
    source = log.segment_source
    for seg in log.segments_in_range(start, end) if start < end else []:
        if seg.size == 0:
            continue
        buf = source.read_segment(seg.base_offset, seg.size)
        try:
            r, k = _count_segment(buf, seg.size, start, end)
        finally:
            try:
                if hasattr(buf, "close"):       # a mapping (bytes read from a bucket have none)
                    buf.close()
            except BufferError:
                pass    # a view of a batch still refers to it; the mapping goes with it
        records += r
        keyless += k
    return records, keyless


def _count_segment(buf, size: int, start: int, end: int) -> tuple[int, int]:
    scan = SegmentScan(as_u8(buf), 0, size)
    if scan.ok:
        inside = (scan.r_offset >= start) & (scan.r_offset < end)
        return int(inside.sum()), int((inside & (scan.r_klen < 0)).sum())
    records = keyless = 0
    for b in iter_batches(buf, 0, size):
        # legacy batches are refused by the clean itself; control batches are markers, not data
        if b.magic < 2 or b.is_control or b.records_count == 0:
            continue
        if b.last_offset < start or b.base_offset >= end:
            continue
        cols = b.columns()
        offsets = b.base_offset + cols.off_delta
        inside = (offsets >= start) & (offsets < end)
        records += int(inside.sum())
        keyless += int((inside & (cols.key_len < 0)).sum())
    return records, keyless


def find_keyless(datadir, partitions: list[tuple[str, int]], *, roll: bool) -> list[KeylessRecords]:
    """The keyless records of each partition, from its log start to where a clean would stop
    (the log end with ``roll``, else the active segment): only those holding any."""
    found = []
    for t, p in partitions:
        log = datadir.open_log(t, p)
        with log.lock:
            start = log.log_start_offset
            end = log.log_end_offset if roll else log.active_segment.base_offset
            records, keyless = count_keyless(log, start, end)
        if keyless:
            found.append(KeylessRecords(t, p, start, end, records, keyless))
    return found


def would_clean(ex: Explanation, *, force: bool, enabled: bool) -> bool:
    """Whether ``Cleaner.run`` would clean this partition (and the preview is of that clean)."""
    if not ex.status.compacted or not ex.previewed:
        return False
    return ex.forced if not ex.would_clean else (force or enabled)


def dry_run(cleaner: Cleaner, now_ms: int, topics=None, partition: int | None = None, *,
            force: bool = False, roll: bool = False) -> list[Explanation]:
    """What ``clean`` at ``now_ms`` would do to every partition it considers, writing nothing."""
    out = []
    for t, p in compacted_partitions(cleaner.datadir, topics, partition):
        out.append(explain_partition(cleaner, t, p, now_ms, roll=roll, simulate_force=force))
    return out



def idle_outcomes(cleaner: Cleaner, now_ms: int, topics=None, partition: int | None = None, *,
                  force: bool = False, roll: bool = False) -> list[PartitionOutcome] | None:
    """What ``clean`` at ``now_ms`` (``Cleaner.run``, after ``--roll`` when ``roll``) would report
    when it cleans no partition, decided as the run decides, on a data dir opened read-only; None
    when it would clean one (or, with ``roll``, one that a roll makes cleanable) or reset a
    cleaner checkpoint lying outside its log."""
    dd = cleaner.datadir
    enabled = dd.broker.get("log.cleaner.enable") and dd.broker.get("log.cleaner.threads") > 0
    checkpoints = cleaner.manager.all_cleaner_checkpoints()
    outcomes = []
    for t, p in compacted_partitions(dd, topics, partition):
        log = dd.open_log(t, p)
        with log.lock:
            log.producer_state.remove_expired(now_ms)
            # ``clean --roll`` rolls a compacted partition's non-empty active segment first
            view = as_rolled(log) if roll and log.config.compact and log.active_segment.size > 0 else log
            st = partition_status(view, checkpoints.get((t, p)), now_ms)
            outcomes.append(PartitionOutcome(t, p, st))
            if st.force_checkpoint_update and st.first_dirty is not None:
                return None         # a cleaner checkpoint outside the log: the run resets it, as Kafka's
            if not st.compacted:
                continue
            if force and not st.eligible:           # Cleaner._force, on the view
                upper = min(view.last_stable_offset, view.active_segment.base_offset)
                ltc = log_to_clean(view, st.first_dirty, max(st.first_dirty, upper))
                st.first_uncleanable = max(ltc.first_uncleanable, st.first_dirty)
                st.cleanable_bytes = ltc.cleanable_bytes
                if ltc.cleanable_bytes > 0:
                    return None
            elif not force and not enabled:
                st.reason = "log.cleaner.enable is false or log.cleaner.threads is 0"
                continue
            if st.eligible:
                return None
    return outcomes
