"""Opening a partition directory: Kafka's LogLoader.

``LogLoader`` takes the log's collaborators (an empty ``LogSegments``, the producer state manager,
the leader-epoch cache, the config, the directory, the checkpointed recovery point and log start
offset, whether the last shutdown was clean) and ``load()`` fills the segments and returns the
``LoadedOffsets``; ``Log`` is built from them afterwards, as Kafka's ``UnifiedLog.apply`` builds
its ``LocalLog`` and ``UnifiedLog`` from what ``LogLoader.load()`` returns. Loading:

1. leftovers of an interrupted clean or split: ``.deleted`` removed, ``.cleaned`` removed (with any
   ``.swap`` of an incomplete split), complete ``.swap`` sets replace the segments they cover;
2. segments loaded; a segment without ``.index`` or with a bad ``.txnindex`` is recovered;
3. after an unclean shutdown every segment from the recovery point on is validated; one with an
   invalid batch or index is recovered (indexes rebuilt, the invalid tail cut and later segments
   dropped). compactlog keeps the bytes it cuts beside the segment (``*.log.discarded``), where
   Kafka deletes them, and keeps the index files of a segment that validates (Kafka rebuilds them;
   the result is the same for a log Kafka wrote, and a compacted log keeps txn-index entries a
   rebuild from the cleaned data would lose);
4. producer state rebuilt from the newest snapshot and the batches after it; an unreadable
   leader-epoch checkpoint rebuilt from the batches.

Read-only, nothing on disk changes: the live segments are chosen as the writer's loader would
leave them (``layout.stable_live_segments``) and recovery truncates in memory.

``repair_segments`` is the same recovery on demand (``verify --repair``, through ``Log.repair``).
What ``repair.repair_segment`` needs of the partition (its dir, config, clock, read-only flag,
name, events and a ``replace_segments``) is offered by the loader while loading and by the ``Log``
afterwards.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import CorruptRecordError, StorageError
from ..record.batch import MAGIC_V2, iter_batches
from . import files
from .checkpoint import LeaderEpochCache
from .events import REBUILT, RECOVERY_CUT, WOULD_CUT, DataEvent
from .index_check import breaks_order
from .layout import offset_or_none, stable_live_segments
from .local_log import read_batches, replace_segments
from .producer_append import apply_batch_to_producer
from .producer_state import REPLICATION, ProducerStateManager
from .repair import keep_bytes, kept_already, numbered_path, repair_segment, scan_segment
from .segment import LogSegment
from .segments import NO_UPPER_BOUND, LogSegments
from .txn_index import AbortedTxn


@dataclass
class LoadedOffsets:
    """What loading found: Kafka's LoadedLogOffsets."""
    log_start_offset: int
    recovery_point: int
    log_end_offset: int


def _list_files(dir_path: str) -> list[str]:
    """The directory's regular files, sorted (one scandir: the entry types need no stat)."""
    with os.scandir(dir_path) as entries:
        return sorted(e.name for e in entries if e.is_file())


def remove_temp_files_and_collect_swaps(dir_path: str, names: list[str] | None = None) -> list[str]:
    """``names``: the directory's files when the caller listed them already."""
    swaps, cleaned = [], []
    min_cleaned = None
    for name in _list_files(dir_path) if names is None else names:
        path = os.path.join(dir_path, name)
        if name.endswith(files.DELETED_SUFFIX) and not name.endswith(".checkpoint.deleted"):
            os.remove(path)
        elif name.endswith(files.CLEANED_SUFFIX):
            off = offset_or_none(name)
            if off is not None:
                min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            cleaned.append(path)
        elif name.endswith(files.SWAP_SUFFIX):
            swaps.append(path)
    valid = []
    for path in swaps:
        off = offset_or_none(os.path.basename(path))
        if min_cleaned is not None and off is not None and off >= min_cleaned:
            os.remove(path)
        else:
            valid.append(path)
    for path in cleaned:
        os.remove(path)
    return valid


def segment_is_valid(seg: LogSegment) -> bool:
    """Every batch valid, the file ending on a batch boundary, the indexes consistent with them."""
    positions = {}
    last_offset = None
    end = 0
    max_ts = -1
    try:
        buf = seg.log.map()
        for b in iter_batches(buf, 0, seg.log.size):
            b.ensure_valid()
            if not seg.can_convert_to_relative_offset(b.last_offset):
                return False
            if last_offset is not None and b.magic == MAGIC_V2 and breaks_order(b.base_offset, last_offset):
                return False
            positions[b.position] = (b.last_offset, b.max_timestamp)
            last_offset = b.last_offset
            max_ts = max(max_ts, b.max_timestamp)
            end = b.position + b.size
        del buf
    except (CorruptRecordError, StorageError):
        return False
    if end != seg.log.size:
        return False
    if seg.offset_index.untrimmed_slots or seg.time_index.untrimmed_slots:
        return False          # left preallocated by a crash: Kafka's sanity check fails and rebuilds
    try:
        seg.offset_index.sanity_check()
        seg.time_index.sanity_check()
        seg.txn_index.sanity_check()
    except StorageError:
        return False
    prev = None
    for off, pos in seg.offset_index.all_entries():
        batch = positions.get(pos)
        if batch is None or off < batch[0] or (prev is not None and (off <= prev[0] or pos <= prev[1])):
            return False
        prev = (off, pos)
    prev_ts = None
    time_entries = seg.time_index.all_entries()
    for ts, off in time_entries:
        if last_offset is None or off > last_offset or off < seg.base_offset:
            return False
        if prev_ts is not None and ts < prev_ts:
            return False
        prev_ts = ts
    # a closed segment's time index ends with its largest timestamp (the entry Kafka appends on
    # roll, close and recovery); without it (a crash, a deleted file) the index is rebuilt
    if max_ts >= 0 and (not time_entries or time_entries[-1][0] != max_ts):
        return False
    return True


def discard_path(log_path: str) -> str:
    """``<segment>.log.discarded``, or ``<segment>.log.<n>.discarded`` when earlier recoveries already
    kept bytes of a segment with this base offset (never overwrite what was kept)."""
    return numbered_path(log_path, ".discarded")


def _valid_prefix_length(seg: LogSegment) -> tuple[int, str]:
    """Bytes of valid batches from the start of the segment, and why the rest is not valid."""
    valid = 0
    why = "incomplete batch at the end of the segment (a torn write)"
    try:
        buf = seg.log.map()
        for b in iter_batches(buf, 0, seg.log.size):
            b.ensure_valid()
            if not seg.can_convert_to_relative_offset(b.last_offset):
                # LogSegment.recover's rule too (Kafka's ensureOffsetInRange): the cut is kept and said
                why = (f"offset {b.last_offset} is outside the relative offset range of the segment's "
                       f"base offset {seg.base_offset}")
                break
            valid = b.position + b.size
        del buf
    except CorruptRecordError as e:
        why = e.detail
    return valid, why


def _scan(seg: LogSegment, prev_last: int):
    """repair.scan_segment over the segment's mapped ``.log``."""
    buf = seg.log.map()
    try:
        return scan_segment(buf, seg.log.size, seg.base_offset, prev_last)
    finally:
        del buf


class LogLoader:
    """Kafka's LogLoader: loads ``segments`` from ``dir_path`` and returns the offsets found."""

    def __init__(self, dir_path: str, config, segments: LogSegments, producer_state: ProducerStateManager,
                 leader_epochs: LeaderEpochCache, *, clock, name: str, recovery_point: int,
                 log_start_offset: int, had_clean_shutdown: bool, read_only: bool, events: list[DataEvent],
                 leader_epoch: int = 0, remote_log_enabled: bool = False):
        self.dir = dir_path
        # a tiered log's start offset is the checkpointed one, remote segments included; a local
        # log's is raised to its first segment (Kafka's LogLoader.load)
        self.remote_log_enabled = remote_log_enabled
        self.config = config
        self.segments = segments
        self.producer_state = producer_state
        self.leader_epochs = leader_epochs
        self.clock = clock
        self.name = name
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.had_clean_shutdown = had_clean_shutdown
        self.read_only = read_only
        self.events = events          # what recovery cut or set aside, for the user
        self.leader_epoch = leader_epoch

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """A repaired segment swapped in while loading (repair.repair_segment's last step)."""
        replace_segments(self.segments, new_segments, old_segments, self.dir,
                         on_dropped=self.producer_state.delete_snapshot)

    # -- load
    def load(self) -> LoadedOffsets:
        if not os.path.isdir(self.dir):
            raise StorageError(f"{self.dir}: partition directory does not exist")
        if self.read_only:
            needs_recovery = self._load_live_segments()
        else:
            names = _list_files(self.dir)
            swaps = remove_temp_files_and_collect_swaps(self.dir, names)
            if swaps or any(n.endswith((files.DELETED_SUFFIX, files.CLEANED_SUFFIX)) for n in names):
                self._complete_swaps(swaps)
                names = _list_files(self.dir)       # changed: listed again
            needs_recovery = self._load_segment_files(names)
        segments = self.segments
        last_layout = None
        if segments and segments.last not in needs_recovery:
            # the log end offset comes from valid batches only: a last segment whose batches do not
            # read to its end is recovered even after a clean shutdown (Kafka would trust it)
            last_layout = segments.last.layout()
            last = last_layout.last_offset
            if last_layout.end != segments.last.log.size or (
                    last is not None and not segments.last.can_convert_to_relative_offset(last)):
                # ... and one whose offsets lie outside its relative range (its files renamed):
                # the log end would come out below its base offset
                needs_recovery.append(segments.last)
                last_layout = None
        self._recover_log(needs_recovery)
        log_start_offset = self.log_start_offset
        log_end = None
        if segments:
            if last_layout is not None and self.had_clean_shutdown:
                # nothing recovered it (after a clean shutdown only needs_recovery is): its walk
                # serves the index check too
                segments.last.ensure_indexes_trusted(last_layout)
            log_end = segments.last.read_next_offset()
            if log_end < log_start_offset:
                for seg in segments.clear():
                    if self.read_only:
                        seg.close_handles()
                    else:
                        seg.delete_files()
                self.leader_epochs.entries = []
                self.leader_epochs.flush()
                self.producer_state.truncate_fully_and_start_at(log_start_offset)
                log_end = None
        if not segments:
            segments.add(LogSegment(self.dir, log_start_offset, self.config, now_ms=self.clock(), new=True,
                                    preallocate_indexes=not self.read_only, read_only=self.read_only))
            log_end = segments.last.read_next_offset()
        recovery_point = log_end if self.had_clean_shutdown else min(self.recovery_point, log_end)
        segments.last.reserve_indexes(self.config.max_index_size)
        epochs = self.leader_epochs.entries
        if epochs and epochs[-1] == (self.leader_epoch, log_end):
            # the log's own leader epoch, begun at the log end before its first record (written
            # when the partition was created, as Kafka's makeLeader writes it): kept, where
            # Kafka's loader drops it and its makeLeader writes it back at once
            self.leader_epochs.truncate_from_end(log_end + 1)
        else:
            self.leader_epochs.truncate_from_end(log_end)
        start = max(log_start_offset, segments.first.base_offset)
        self.leader_epochs.truncate_from_start(log_start_offset)
        self.producer_state.remove_stray_snapshots(segments.bases())
        rebuild_producer_state(segments, self.producer_state, log_end, start,
                               reload_from_clean_shutdown=self.had_clean_shutdown, now=self.clock())
        if getattr(self.leader_epochs, "load_error", None) is not None:
            self._rebuild_leader_epochs(start)
        return LoadedOffsets(min(log_start_offset, start) if self.remote_log_enabled else start,
                             recovery_point, log_end)

    def _rebuild_leader_epochs(self, log_start_offset: int) -> None:
        """An unreadable leader-epoch-checkpoint: rebuilt from the batches' partition leader epochs
        (a writer writes it back), and reported."""
        self.leader_epochs.entries = []
        for b in read_batches(self.segments, log_start_offset, NO_UPPER_BOUND):
            if b.magic == MAGIC_V2:
                self.leader_epochs.assign(b.header.partition_leader_epoch, b.base_offset)
        if not self.read_only:
            self.leader_epochs.flush()
        what = "rebuilt from the batches" if not self.read_only else "a writer rebuilds it from the batches"
        self.events.append(DataEvent(REBUILT, self.name, self.leader_epochs.checkpoint.path,
                                     f"{self.leader_epochs.load_error}; {what}"))

    def _complete_swaps(self, swap_paths: list[str]) -> None:
        min_base, max_end = None, None
        for path in swap_paths:
            name = os.path.basename(path)
            if not name.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX):
                continue
            base = files.offset_from_filename(name)
            seg = LogSegment(self.dir, base, self.config, now_ms=self.clock(), suffix=files.SWAP_SUFFIX)
            end = seg.read_next_offset()
            seg.close_handles()
            min_base = base if min_base is None else min(min_base, base)
            max_end = end if max_end is None else max(max_end, end)
        if min_base is not None:
            for name in _list_files(self.dir):
                if name.endswith(files.SWAP_SUFFIX):
                    continue
                off = offset_or_none(name)
                if off is not None and min_base <= off < max_end:
                    os.remove(os.path.join(self.dir, name))
        for name in _list_files(self.dir):
            if name.endswith(files.SWAP_SUFFIX):
                os.replace(os.path.join(self.dir, name),
                           os.path.join(self.dir, name[:-len(files.SWAP_SUFFIX)]))

    def _load_segment_files(self, names: list[str]) -> list[LogSegment]:
        """Open every ``.log`` of ``names`` (the directory's files), deleting orphaned indexes;
        segments needing recovery are returned."""
        needs_recovery = []
        present = set(names)
        for name in names:
            off = offset_or_none(name)
            if off is None:
                continue
            if name.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)) \
                    and name.count(".") == 1:
                if files.filename_prefix(off) + files.LOG_SUFFIX not in present:
                    os.remove(os.path.join(self.dir, name))
            elif files.is_segment_log(name):
                seg = LogSegment(self.dir, off, self.config, now_ms=self.clock())
                if seg.time_index_newly_created:
                    seg.time_index.resize(0)
                self._add_loaded_segment(seg, needs_recovery)
        return needs_recovery

    def _load_live_segments(self) -> list[LogSegment]:
        """Read-only: open the segments Kafka's loader would keep live, changing nothing on disk."""
        needs_recovery = []
        for sf in stable_live_segments(self.dir):
            seg = LogSegment(self.dir, sf.base_offset, self.config, now_ms=self.clock(), suffix=sf.suffix,
                             read_only=True)
            self._add_loaded_segment(seg, needs_recovery)
        return needs_recovery

    def _add_loaded_segment(self, seg: LogSegment, needs_recovery: list[LogSegment]) -> None:
        """Add a segment just opened; a missing offset index or an impossible ``.txnindex`` entry
        sends it to recovery (Kafka's LogLoader.loadSegmentFiles)."""
        try:
            if seg.index_missing:
                raise StorageError("offset index missing")
        except StorageError:
            needs_recovery.append(seg)
        else:
            try:
                seg.txn_index.sanity_check()
            except StorageError as e:
                # said, as Kafka's loader warns of a corrupt index it rebuilds: a read_committed
                # read depends on this file
                needs_recovery.append(seg)
                what = ("rebuilt from the segment's markers by recovery" if not self.read_only else
                        "its aborted transactions taken from the segment's markers (in memory; a writer's "
                        "recovery rebuilds the file)")
                why = str(e).removeprefix(f"{seg.txn_index.path}: ")
                self.events.append(DataEvent(REBUILT, self.name, seg.txn_index.path, f"{why}; {what}"))
        self.segments.add(seg)

    # -- recovery
    def _recover_log(self, needs_recovery: list[LogSegment]) -> None:
        segments = self.segments
        recovered = {id(s) for s in needs_recovery}
        to_check = [] if self.had_clean_shutdown else segments.in_range(self.recovery_point, NO_UPPER_BOUND)
        for seg in list(needs_recovery):
            if seg not in to_check:
                to_check.append(seg)
        to_check.sort(key=lambda s: s.base_offset)
        epochs_before = list(self.leader_epochs.entries)
        for seg in to_check:
            if id(seg) not in recovered and segment_is_valid(seg):
                continue
            seg, nothing_to_cut = self._set_aside_corrupt_batches(seg)
            # as Kafka's recoverSegment: producer state rebuilt afresh (latest snapshot + the batches
            # up to this segment), so that segments skipped as valid in between are replayed too
            temp_state = self.producer_state.sibling()
            rebuild_producer_state(segments, temp_state, seg.base_offset, self.log_start_offset,
                                   reload_from_clean_shutdown=False, now=self.clock())
            truncated = self._recover_segment(seg, temp_state, nothing_to_cut=nothing_to_cut)
            temp_state.take_snapshot()
            if truncated > 0 and self.read_only:
                # reads cannot cross the unreadable bytes: in memory the log ends there (a writer
                # sets them aside and keeps every later segment)
                for later in [s for s in segments if s.base_offset > seg.base_offset]:
                    segments.remove(later.base_offset)
                    later.close_handles()
                    self.events.append(DataEvent(WOULD_CUT, self.name, later.log.path,
                                                 f"follows unreadable bytes in segment {seg.base_offset}",
                                                 first_offset=later.base_offset, bytes=later.size))
                break
        if self.leader_epochs.entries != epochs_before:
            self.leader_epochs.flush()     # Kafka's LeaderEpochFileCache.assign writes the checkpoint

    def _set_aside_corrupt_batches(self, seg: LogSegment) -> tuple[LogSegment, bool]:
        """A writer's recovery of a segment holding corrupt batches: each is quarantined alone and
        every valid batch after it kept (storage/repair.py). A torn tail alone is left to
        ``_recover_segment``'s cut, which needs no copy of the segment.

        Returns the live segment and whether the scan proved every byte of it a valid batch
        (nothing for the cut to find): the scan's batch rule includes Kafka's size and CRC checks,
        so a segment it finds whole, or the copy made of the batches it kept, has nothing to cut.
        With a tail the cut is left to the prefix rule: its position and the reason it reports are
        Kafka's (the scan rejects more, e.g. a negative last offset delta, and words a torn write
        differently)."""
        if self.read_only or seg.log.size == 0:
            return seg, seg.log.size == 0
        prev_last = seg.base_offset - 1
        before = self.segments.floor(seg.base_offset - 1)
        if before is not None:
            last = before.layout().last_offset     # its readable batches, trusted or not
            prev_last = last if last is not None else before.base_offset - 1
        scan = _scan(seg, prev_last)
        # a batch outside the segment's relative offset range (its files renamed to another base)
        # passes the scan, and recover() cuts it: left to the prefix rule, which keeps the cut
        # bytes aside and says so
        in_range = all(seg.can_convert_to_relative_offset(s.last_offset) for s in scan.spans)
        if not scan.holes and not any(s.fixed_base is not None for s in scan.spans):
            return seg, scan.tail is None and in_range
        return repair_segment(self, seg, scan)[0], in_range

    def _recover_segment(self, seg: LogSegment, producer_state: ProducerStateManager, *,
                         nothing_to_cut: bool = False) -> int:
        """Kafka's recoverSegment, the bytes it cuts kept aside first; ``nothing_to_cut``: every
        byte of the segment is known to be valid batches (``_set_aside_corrupt_batches``' scan),
        so the pass that finds the valid prefix is skipped."""

        def apply(batch):
            h = batch.header
            if h.producer_id >= 0:
                info = producer_state.prepare_update(h.producer_id, REPLICATION)
                done = apply_batch_to_producer(info, batch)
                producer_state.update(info)
                if done is not None:
                    if done.is_aborted:
                        lso = producer_state.last_stable_offset_after(done)
                        seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset,
                                                        done.last_offset, lso))
                    producer_state.complete_txn(done)
            producer_state.last_map_offset = h.last_offset + 1

        if not nothing_to_cut:
            keep, why = _valid_prefix_length(seg)
            self._discard_tail(seg, keep, why)
        return seg.recover(leader_epochs=self.leader_epochs, apply_batch=apply)

    def _discard_tail(self, seg: LogSegment, valid_bytes: int, why: str) -> None:
        """Keep the bytes recovery cuts off in ``<segment>.log.discarded`` instead of losing them,
        and say so."""
        if seg.log.size <= valid_bytes:
            return
        cut = seg.log.size - valid_bytes
        if seg.read_only:
            self.events.append(DataEvent(WOULD_CUT, self.name, seg.log.path, why, position=valid_bytes,
                                         bytes=cut))
            return
        data = seg.log.read(valid_bytes, cut)
        kept = kept_already(seg.log.path, ".discarded", data)     # a recovery killed before its cut
        if kept is None:
            kept = discard_path(seg.log.path)
            keep_bytes(kept, data)
        self.events.append(DataEvent(RECOVERY_CUT, self.name, seg.log.path, why, position=valid_bytes,
                                     bytes=cut, kept_at=kept))


def repair_segments(partition, segments: LogSegments, log_start_offset: int) -> int | None:
    """``verify --repair``: recovery on demand over every segment, below the recovery point too.

    Each segment that does not validate (CRCs, offsets, indexes against the log) is rebuilt from
    its valid batches: corrupt batches quarantined, a base offset repaired, an unreadable tail cut,
    indexes rebuilt. ``partition`` is what ``repair.repair_segment`` reports to and swaps through
    (the ``Log``). Returns the base offset of the first segment repaired (None when every segment
    was valid); the caller rebuilds what depends on the batches from there.
    """
    first_repaired = None
    prev_last = log_start_offset - 1
    for seg in segments:
        if seg.log.size and not segment_is_valid(seg):
            scan = _scan(seg, prev_last)
            if scan.clean:
                seg.recover()          # every batch is valid: only the indexes were not
            else:
                seg = repair_segment(partition, seg, scan)[0]
            first_repaired = seg.base_offset if first_repaired is None else first_repaired
        nxt = seg.read_next_offset()
        if nxt > seg.base_offset:
            prev_last = nxt - 1
    return first_repaired


def replay_producer_state_from(segments: LogSegments, state: ProducerStateManager, first_changed: int,
                               log_end_offset: int, log_start_offset: int, *, now: int) -> None:
    """Producer state after segments from ``first_changed`` on were rewritten (a repair): the
    snapshots past it dropped and the state replayed from the newest one left."""
    for off in state.snapshot_offsets():
        if off > first_changed:
            state.delete_snapshot(off)
    state.clear()
    state.last_map_offset = state.last_snap_offset = 0
    rebuild_producer_state(segments, state, log_end_offset, log_start_offset,
                           reload_from_clean_shutdown=False, now=now)


def rebuild_producer_state(segments: LogSegments, state: ProducerStateManager, last_offset: int,
                           log_start_offset: int, *, reload_from_clean_shutdown: bool, now: int) -> None:
    """Kafka's rebuildProducerState: latest snapshot <= last_offset, then replay the batches after it."""
    bases = segments.bases()
    to_snapshot = set()
    if bases:
        if len(bases) > 1:
            to_snapshot.add(bases[-2])
        to_snapshot.add(bases[-1])
    to_snapshot.add(last_offset)
    if state.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for off in sorted(to_snapshot):
            state.last_map_offset = off
            state.take_snapshot()
        return
    was_empty = not state.producers and state.last_map_offset >= last_offset
    state.truncate_and_reload(log_start_offset, last_offset, now)
    if last_offset > state.last_map_offset and not was_empty:
        for seg in segments.in_range(state.last_map_offset, last_offset):
            start = max(seg.base_offset, state.last_map_offset, log_start_offset)
            state.last_map_offset = start
            if seg.base_offset in to_snapshot:
                state.take_snapshot()
            infos = {}
            completed = []
            for b in seg.batches(seg.lookup_position(start)):
                if b.base_offset >= last_offset:
                    break
                if b.last_offset < start or b.magic != MAGIC_V2 or b.producer_id < 0:
                    continue
                info = infos.get(b.producer_id)
                if info is None:
                    info = state.prepare_update(b.producer_id, REPLICATION)
                    infos[b.producer_id] = info
                done = apply_batch_to_producer(info, b)
                if done is not None:
                    completed.append(done)
            for info in infos.values():
                state.update(info)
            for txn in completed:
                state.complete_txn(txn)
    state.last_map_offset = last_offset
    state.take_snapshot()
