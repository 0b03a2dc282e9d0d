"""Checking a data dir without changing it (``compactlog verify``).

Per partition: every batch's size, magic and CRC; offsets increasing within and across segments,
each batch inside its segment's range (base offset >= the segment's, last offset below the next
segment's base and inside the 32-bit relative range): base offsets are not covered by the CRC,
so this is what catches a flipped one; no torn tail; every record section decodable within the
decompression limit; offset, time and transaction indexes checked entry by entry against the log
(``index_check``: the rules under which lookups and read_committed reads can trust them);
producer snapshots readable; checkpoint entries within the log's offsets; and, for compacted
partitions, every key at most once below the cleaner checkpoint. Each problem names the file and
the byte position (or offset, or index entry).

Every segment, index and producer snapshot is read through the partition's segment source
(``segment_source.py``); only the files recovery set aside are a local directory's listing.

Beside a running writer (a broker holding the data dir's lock) each partition is checked in one
consistent state, its segment files pinned (the source's ``pin``: ``pinned.py`` for a local
directory), so a swap or a delete during the check is no problem; the checkpoints, read first, are at most that state's offsets. The writer's work in
flight is not reported either: index entries it appended after the pinned bytes of the active
segment, or the part of a batch it is still writing. Anything else found is looked at again in a
newer state, and reported only when it is still there.

A segment's index files are read right after the pin, and belong to it only while its ``.log`` is
still under its name (``PinnedSegments.sidecar``); a cleaner's swap in between makes that state
unreadable (``LogChangedError``). The partition is then checked again in a newer state, as the
other readers pin again (``pin_live_segments``), for up to ``CHANGED_TIMEOUT_S``: a check fails
with ``LogChangedError`` only when the log keeps changing that long.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptRecordError, LogChangedError, StorageError
from ..record import kernels
from ..record.batch import iter_batches
from ..record.layout import RECORD_BATCH_OVERHEAD
from . import files, index_check
from .checkpoint import OffsetCheckpointFile
from .config import LogConfig
from .index_file import used_length
from .lock import describe_holder
from .pinned import (PIN_TIMEOUT_S, PinnedSegment, PinnedSegments, changed, sibling_path,
                     without_in_flight)
from .producer_state import decode_snapshot
from .segment_source import LocalDirSource, SegmentSource
from .txn_index import ENTRY as TXN_ENTRY, ENTRY_SIZE as TXN_ENTRY_SIZE, LAST_OFFSET_AT as TXN_LAST_OFFSET_AT

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
LIVE_LOOKS = 3          # beside a writer: how many states a problem must be found in to be reported
CHANGED_TIMEOUT_S = PIN_TIMEOUT_S   # how long states changing under the check are retried


@dataclass
class Problem:
    file: str
    where: str
    message: str
    set_aside: bool = False      # bytes recovery kept aside (.discarded/.quarantined), not damage
    note: bool = False           # not a problem: something Kafka rebuilds as it loads (a missing index)
    kept_by_repair: bool = False  # a batch every reader takes as valid, which the repair keeps as it is

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.message}" if self.where else f"{self.file}: {self.message}"

    @property
    def repairable(self) -> bool:
        """Whether ``verify --repair`` fixes it: the repair rebuilds segments and their indexes
        from their valid batches (``loader.repair_segments``); checkpoints, snapshots, duplicate
        keys and foreign directories are not its to change."""
        return not self.set_aside and not self.kept_by_repair and self.file.endswith(files.SEGMENT_SUFFIXES)

    @property
    def severity(self) -> str:
        return "note" if self.note else "set-aside" if self.set_aside else "problem"

    def to_dict(self) -> dict:
        return {"file": self.file, "where": self.where, "problem": self.message, "severity": self.severity,
                "repairable": self.repairable}


@dataclass
class VerifyCounts:
    """What a verify run looked at, for its summary line."""
    partitions: int = 0
    segments: int = 0
    records: int = 0


@dataclass
class SegmentFacts:
    base_offset: int
    path: str
    size: int
    batch_pos: list            # start positions of the complete batches
    batch_base: list           # their base offsets
    batch_last: list           # their last offsets
    batch_max_ts: list         # their max timestamps
    first_offset: int | None
    last_offset: int | None
    layout: index_check.SegmentLayout | None = None   # the batch headers, for the index checks
    records: int = 0                                  # in the complete batches walked
    index_bytes: object = None  # suffix -> the bytes of that index file of the pinned state (None: none)
    in_flight: bool = False     # the active segment of a running writer: its appends are under way

    def index_file(self, suffix: str) -> tuple[str, bytes | None]:
        """(path, bytes or None when there is no such file) of one of the segment's indexes, as the
        pinned state holds it; beside a running writer without the entries it appended after the
        pinned bytes."""
        raw = self.index_bytes(suffix)
        if raw is not None and self.in_flight:
            last = self.last_offset if self.last_offset is not None else self.base_offset - 1
            if suffix == files.TXN_INDEX_SUFFIX:
                raw = without_in_flight(raw, TXN_ENTRY_SIZE, TXN_LAST_OFFSET_AT, last)
            else:
                entry, at = (_OFFSET_ENTRY.size, 0) if suffix == files.INDEX_SUFFIX else (_TIME_ENTRY.size, 8)
                raw = without_in_flight(raw[:used_length(raw, entry)], entry, at, last, relative_to=self.base_offset)
        return sibling_path(self.path, suffix), raw


def check_segment(seg: PinnedSegment, prev_last: int | None, problems: list[Problem],
                  keys: list | None, key_below: int | None, *, next_base: int | None = None,
                  max_message_bytes: int | None = None, in_flight: bool = False) -> SegmentFacts:
    """The batches of one pinned segment file; ``in_flight``: the active segment of a running writer,
    whose last batch may still be being written."""
    base, path, size, buf = seg.base_offset, seg.path, seg.size, seg.data
    facts = SegmentFacts(base, path, size, [], [], [], [], None, None, in_flight=in_flight)
    if size == 0:
        facts.layout = index_check.walk_segment(b"", base)
        return facts
    facts.layout = index_check.walk_segment(buf, base)
    pos = 0
    last = prev_last
    prev_pos = None
    try:
        for b in iter_batches(buf, 0, size, max_message_bytes=max_message_bytes):
            pos = b.position
            h = b.header
            if not b.is_valid():
                problems.append(Problem(path, f"position {pos}", f"batch {h.base_offset}-{h.last_offset} has an "
                                                                  f"invalid CRC (stored {b.stored_crc():#010x}, "
                                                                  f"computed {b.computed_crc():#010x})"))
            if last is not None and b.magic >= 2 and index_check.breaks_order(h.base_offset, last):
                after = f" of the batch at position {prev_pos}" if prev_pos is not None else " of the previous segment"
                problems.append(Problem(path, f"position {pos}", f"base offset {h.base_offset} does not follow "
                                                                  f"the last offset {last}{after} (one of the two "
                                                                  f"base offsets, which the CRC does not cover, is "
                                                                  f"wrong)"))
            if h.base_offset < base:
                problems.append(Problem(path, f"position {pos}", f"base offset {h.base_offset} is below the "
                                                                  f"segment's base offset {base}"))
            if not 0 <= h.last_offset - base <= 0x7FFFFFFF:
                problems.append(Problem(path, f"position {pos}", f"last offset {h.last_offset} is outside the "
                                                                  f"relative range of base offset {base}"))
            if next_base is not None and h.last_offset >= next_base:
                problems.append(Problem(path, f"position {pos}", f"last offset {h.last_offset} (base offset "
                                                                  f"{h.base_offset}) is not below the next "
                                                                  f"segment's base offset {next_base}"))
            if b.magic >= 2 and h.records_count > h.last_offset_delta + 1:
                problems.append(Problem(path, f"position {pos}", f"{h.records_count} records in a batch of "
                                                                  f"{h.last_offset_delta + 1} offsets"))
            if b.magic >= 2 and not h.records_count and b.size > RECORD_BATCH_OVERHEAD:
                # the empty batch Kafka's cleaner keeps is the header alone; bytes after a count of 0
                # (its CRC right) are records no reader reads, Kafka's included: lost without a word
                problems.append(Problem(path, f"position {pos}", f"the batch at offset {h.base_offset} says it holds "
                                                                  f"no record but {b.size - RECORD_BATCH_OVERHEAD} "
                                                                  f"bytes follow its header: no reader reads them",
                                        kept_by_repair=True))
            try:
                if b.magic >= 2 and not h.is_control and keys is not None and h.records_count:
                    _collect_keys(b, keys, key_below)
                elif b.magic >= 2 and h.records_count:
                    b.columns()
            except CorruptRecordError as e:
                problems.append(Problem(path, f"position {pos}",
                                        f"records of the batch at offset {h.base_offset}: {e.detail}"))
            facts.batch_pos.append(pos)
            facts.batch_base.append(h.base_offset)
            facts.batch_last.append(h.last_offset)
            facts.batch_max_ts.append(h.max_timestamp)
            facts.records += h.records_count
            if facts.first_offset is None:
                facts.first_offset = h.base_offset
            facts.last_offset = h.last_offset
            last = h.last_offset
            prev_pos = pos
            pos = b.position + b.size
    except CorruptRecordError as e:
        problems.append(Problem(path, f"position {e.position if e.position is not None else pos}", e.detail))
        return facts
    if pos != size and not in_flight:
        problems.append(Problem(path, f"position {pos}", f"{size - pos} bytes at the end are not a complete batch "
                                                          f"(torn or truncated write)"))
    return facts


def _collect_keys(b, keys: list, key_below: int | None) -> None:
    cols = b.columns()
    offsets = b.header.base_offset + cols.off_delta
    sel = np.flatnonzero((cols.key_len >= 0) & ((offsets < key_below) if key_below is not None else True))
    if sel.size == 0:
        return
    h1 = np.zeros(sel.size, dtype=np.uint64)
    h2 = np.zeros(sel.size, dtype=np.uint64)
    kernels.hash_keys(cols.data, cols.key_pos[sel], cols.key_len[sel], h1, h2)
    keys.append((h1, h2, offsets[sel]))


def _index_problem(problem: index_check.IndexProblem, raw: bytes, base: int, kind: str) -> Problem:
    """A Problem naming the entry with its decoded values."""
    i = problem.entry
    where = f"entry {i}"
    if problem.field != "size" and not problem.missing:
        if kind == "offset" and len(raw) >= (i + 1) * 8:
            rel, pos = _OFFSET_ENTRY.unpack_from(raw, i * 8)
            where = f"entry {i} (offset {base + rel}, position {pos})"
        elif kind == "time" and len(raw) >= (i + 1) * 12:
            ts, rel = _TIME_ENTRY.unpack_from(raw, i * 12)
            where = f"entry {i} (timestamp {ts}, offset {base + rel})"
        elif kind == "txn" and len(raw) >= (i + 1) * TXN_ENTRY_SIZE:
            _, pid, first, last, _ = TXN_ENTRY.unpack_from(raw, i * TXN_ENTRY_SIZE)
            where = f"entry {i} (producer {pid}, offsets {first}-{last})"
    return Problem(problem.file, where, f"{problem.field} {problem.value}: {problem.why}")


def _without_preallocation(raw: bytes, entry_size: int) -> bytes:
    """The entries of an index a writer preallocated (zero-filled slots after them): what a live
    broker's, or a crashed one's, active segment holds; recovery trims them."""
    return raw[:used_length(raw, entry_size)]


def check_offset_index(pdir: str, facts: SegmentFacts, problems: list[Problem], *,
                       preallocated: bool = False) -> None:
    path, raw = facts.index_file(files.INDEX_SUFFIX)
    if raw is None:
        problems.append(Problem(path, "", "offset index is missing: Kafka rebuilds it when it loads the log, "
                                          "and `compactlog verify --repair` rebuilds it now", note=True))
        return
    if preallocated:
        raw = _without_preallocation(raw, 8)
    problem = index_check.check_offset_index(raw, facts.layout, path=path)
    if problem is not None:
        problems.append(_index_problem(problem, raw, facts.base_offset, "offset"))


def check_time_index(pdir: str, facts: SegmentFacts, problems: list[Problem], *, closed: bool,
                     preallocated: bool = False) -> None:
    path, raw = facts.index_file(files.TIME_INDEX_SUFFIX)
    if raw is None:
        return   # Kafka creates an empty one on load
    if preallocated:
        raw = _without_preallocation(raw, 12)
    problem = index_check.check_time_index(raw, facts.layout, closed=closed, path=path)
    if problem is not None:
        problems.append(_index_problem(problem, raw, facts.base_offset, "time"))


def check_txn_index(pdir: str, facts: SegmentFacts, problems: list[Problem], *, next_base: int | None,
                    carry: index_check.TxnCarry) -> None:
    path, raw = facts.index_file(files.TXN_INDEX_SUFFIX)
    raw = raw or b""
    problem = index_check.check_txn_index(raw, facts.layout, next_base=next_base, path=path, carry=carry)
    if problem is not None:
        problems.append(_index_problem(problem, raw, facts.base_offset, "txn"))


def check_keys_unique(pdir: str, keys: list, checkpoint: int, problems: list[Problem]) -> None:
    if not keys:
        return
    h1 = np.concatenate([k[0] for k in keys])
    h2 = np.concatenate([k[1] for k in keys])
    offs = np.concatenate([k[2] for k in keys])
    order = np.lexsort((offs, h2, h1))
    s1, s2 = h1[order], h2[order]
    dup = np.flatnonzero((s1[1:] == s1[:-1]) & (s2[1:] == s2[:-1]))
    for i in dup[:20].tolist():
        problems.append(Problem(pdir, f"offset {int(offs[order][i + 1])}",
                                f"key also at offset {int(offs[order][i])}, both below the cleaner checkpoint "
                                f"{checkpoint} of a compacted partition"))
    if dup.size > 20:
        problems.append(Problem(pdir, "", f"{dup.size - 20} more duplicate keys below the cleaner checkpoint"))


def verify_partition(root: str, topic: str, partition: int, config: LogConfig,
                     checkpoints: dict[str, dict], counts: VerifyCounts | None = None) -> list[Problem]:
    """Every problem of one partition (``counts``, when given, adds what was looked at)."""
    counts = counts if counts is not None else VerifyCounts()
    counts.partitions += 1
    pdir = os.path.join(root, files.partition_dir_name(topic, partition))
    source = LocalDirSource(pdir)
    if not source.exists():
        # never written (no checkpoint names it): a creation stopped after the topics file recorded
        # it, which the broker or the next writer completes with an empty partition, as Kafka does
        if not any((topic, partition) in entries for entries in checkpoints.values()):
            return [Problem(pdir, "", "partition directory not made yet (a topic creation was interrupted): "
                                      "the next writer or `compactlog serve` makes it, empty", note=True)]
        return [Problem(pdir, "", "partition directory is missing")]
    # a writer at work (a broker holding the lock): what looks wrong may be a state it is leaving
    looks = LIVE_LOOKS if describe_holder(root) is not None else 1
    look = attempts = 0
    started = time.monotonic()
    while True:
        seen = VerifyCounts()
        try:
            problems = _verify_state(root, source, topic, partition, config, checkpoints, seen, writer=looks > 1)
        except LogChangedError as e:
            # a state the writer changed before it was read whole: read a newer one, as long as
            # the log does not keep changing
            attempts += 1
            waited = time.monotonic() - started
            if waited >= CHANGED_TIMEOUT_S:
                raise changed(pdir, f"{attempts} states of it changed before each was checked whole, for "
                                    f"{round(waited, 1):g} s; the last: {getattr(e, 'what', e)}") from None
            time.sleep(min(0.001 * 2 ** min(attempts, 10), 0.05))
            continue
        look += 1
        # a note is looked at again too: an index missing in one state may be one a roll or a
        # swap creates right after it (only files recovery set aside stay as they are)
        if look == looks or all(p.set_aside for p in problems):
            break
        time.sleep(0.05 * look)
    counts.segments += seen.segments
    counts.records += seen.records
    return problems


def _verify_state(root: str, source: SegmentSource, topic: str, partition: int, config: LogConfig,
                  checkpoints: dict[str, dict], counts: VerifyCounts, *, writer: bool) -> list[Problem]:
    """The problems of one pinned state of the partition (``counts``: what was looked at), its
    segments, indexes and producer snapshots read through its segment source."""
    pdir = source.location()
    problems: list[Problem] = []
    cleaner_ckpt = checkpoints.get(files.CLEANER_CHECKPOINT, {}).get((topic, partition))
    keys = [] if (config.compact and cleaner_ckpt) else None
    prev_last = None
    seg_facts = []
    carry = index_check.TxnCarry()
    # without the clean-shutdown marker a writer is running (or crashed): the active segment's
    # indexes are preallocated, their zero-filled tail is not a problem
    live = not source.clean_shutdown()
    pinned = source.pin()
    try:
        segs = pinned.segments
        # every index file read now, right after the pin: a swap soon after it is then no matter
        indexes = [_index_reader(pinned, i) for i in range(len(segs))]
        for i, seg in enumerate(segs):
            next_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
            facts = check_segment(seg, prev_last, problems, keys, cleaner_ckpt, next_base=next_base,
                                  max_message_bytes=config.max_message_size,
                                  in_flight=writer and next_base is None)
            facts.index_bytes = indexes[i]
            if facts.last_offset is not None:
                prev_last = facts.last_offset
            active = live and next_base is None
            check_offset_index(pdir, facts, problems, preallocated=active)
            check_time_index(pdir, facts, problems, closed=next_base is not None, preallocated=active)
            check_txn_index(pdir, facts, problems, next_base=next_base, carry=carry)
            seg_facts.append(facts)
            counts.segments += 1
            counts.records += facts.records
    finally:
        pinned.close()
    # what recovery set aside is a local directory's own (files beside the segments, no segment)
    for name in sorted(os.listdir(pdir)) if isinstance(source, LocalDirSource) else ():
        try:
            if name.endswith((".discarded", ".quarantined")):
                path = os.path.join(pdir, name)
                what = "quarantined" if name.endswith(".quarantined") else "cut off"
                problems.append(Problem(path, "", f"{os.path.getsize(path)} bytes {what} by recovery are kept "
                                                  f"here for inspection; delete the file once you have",
                                        set_aside=True))
        except FileNotFoundError:
            continue
    for offset in source.producer_snapshot_offsets():
        path = source.location(offset, files.SNAPSHOT_SUFFIX)
        try:
            decode_snapshot(source.producer_snapshot(offset), path)
        except FileNotFoundError:
            continue        # deleted by the writer since the listing (a snapshot of a removed segment)
        except StorageError as e:
            problems.append(Problem(path, "", str(e).split(": ", 1)[-1]))
    end = seg_facts[-1].last_offset + 1 if seg_facts and seg_facts[-1].last_offset is not None else (
        seg_facts[-1].base_offset if seg_facts else 0)
    for name, entries in checkpoints.items():
        off = entries.get((topic, partition))
        if off is not None and not 0 <= off <= end:
            problems.append(Problem(os.path.join(root, name), f"{topic} {partition}",
                                    f"offset {off} is outside the log's offsets [0, {end}]"))
    if keys is not None:
        check_keys_unique(pdir, keys, cleaner_ckpt, problems)
    return _dedupe(problems)


def verify_source(root: str, source: SegmentSource, topic: str, partition: int, config: LogConfig,
                  checkpoints: dict[str, dict], counts: VerifyCounts) -> list[Problem]:
    """Every problem of one partition read through ``source`` with no writer beside it (a data
    dir copied to a bucket, ``storage.remote.bucket``); ``root`` names the data dir in messages."""
    counts.partitions += 1
    if not source.exists():
        return [Problem(source.location(), "", "partition has no segments")]
    return _verify_state(root, source, topic, partition, config, checkpoints, counts, writer=False)


def _index_reader(pinned: PinnedSegments, i: int):
    """suffix -> the bytes of the i-th pinned segment's index file, read now (LogChangedError when
    the segment was replaced since the pin)."""
    cache = {suffix: pinned.sidecar(i, suffix)
             for suffix in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)}
    return cache.__getitem__


def refused_directories(root: str) -> list[Problem]:
    """Directories of the data dir that Kafka's loader refuses (``files.kafka_loader_refuses``):
    a Kafka broker does not start on a log dir holding one. ``logs/`` holding log-cleaner.log is
    the run log of an earlier compactlog (it now goes next to the data dir): left there, named."""
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isdir(path) or not files.kafka_loader_refuses(name):
            continue
        why = ("a directory Kafka's loader refuses (its name is not <topic>-<partition>): a Kafka broker does "
               "not start on this log dir")
        if name == "logs" and os.path.exists(os.path.join(path, "log-cleaner.log")):
            why += (f"; it holds the cleaner's run log of an earlier compactlog, which now writes it to "
                    f"{os.path.realpath(root)}.logs (compactlog.cleaner.log.dir)")
        out.append(Problem(path, "", why + "; move it out of the data dir"))
    return out


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        k = str(p)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def read_checkpoints(root: str) -> tuple[dict[str, dict], list[Problem]]:
    out, problems = {}, []
    for name in (files.CLEANER_CHECKPOINT, files.RECOVERY_POINT_CHECKPOINT, files.LOG_START_OFFSET_CHECKPOINT):
        path = os.path.join(root, name)
        try:
            out[name] = OffsetCheckpointFile(path).read()
        except StorageError as e:
            problems.append(Problem(path, "", str(e).split(": ", 1)[-1]))
            out[name] = {}
    return out, problems
