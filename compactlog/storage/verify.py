"""Checking a data dir without changing it (``compactlog verify``).

Per partition: every batch's size, magic and CRC; offsets increasing within and across segments
and inside each segment's 32-bit relative range; no torn tail; offset, time and transaction index
entries consistent with the log; producer snapshots readable; checkpoint entries within the
log's offsets; and, for compacted partitions, every key at most once below the cleaner checkpoint.
Each problem names the file and the byte position (or offset).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptRecordError, StorageError
from ..record import kernels
from ..record.batch import iter_batches
from . import files
from .checkpoint import OffsetCheckpointFile
from .config import LogConfig
from .producer_state import read_snapshot
from .txn_index import TransactionIndex

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


@dataclass
class Problem:
    file: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.message}" if self.where else f"{self.file}: {self.message}"

    def to_dict(self) -> dict:
        return {"file": self.file, "where": self.where, "problem": self.message}


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


def live_segment_bases(pdir: str) -> list[int]:
    return sorted(files.offset_from_filename(n) for n in os.listdir(pdir) if files.is_segment_log(n))


def check_segment(pdir: str, base: int, prev_last: int | None, problems: list[Problem],
                  keys: list | None, key_below: int | None) -> SegmentFacts:
    path = files.segment_file(pdir, base, files.LOG_SUFFIX)
    size = os.path.getsize(path)
    facts = SegmentFacts(base, path, size, [], [], [], [], None, None)
    if size == 0:
        return facts
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    pos = 0
    last = prev_last
    try:
        for b in iter_batches(buf, 0, size):
            pos = b.position
            h = b.header
            if not b.is_valid():
                problems.append(Problem(path, f"position {pos}", f"batch {h.base_offset}-{h.last_offset} has an "
                                                                  f"invalid CRC (stored {b.stored_crc():#010x}, "
                                                                  f"computed {b.computed_crc():#010x})"))
            if last is not None and h.base_offset <= last and b.magic >= 2:
                problems.append(Problem(path, f"position {pos}", f"base offset {h.base_offset} does not follow "
                                                                  f"the previous last offset {last}"))
            if not 0 <= h.last_offset - base <= 0x7FFFFFFF:
                problems.append(Problem(path, f"position {pos}", f"last offset {h.last_offset} is outside the "
                                                                  f"relative range of base offset {base}"))
            if b.magic >= 2 and h.records_count > h.last_offset_delta + 1:
                problems.append(Problem(path, f"position {pos}", f"{h.records_count} records in a batch of "
                                                                  f"{h.last_offset_delta + 1} offsets"))
            try:
                if b.magic >= 2 and not h.is_control and keys is not None and h.records_count:
                    _collect_keys(b, keys, key_below)
                elif b.magic >= 2 and h.records_count:
                    b.columns()
            except CorruptRecordError as e:
                problems.append(Problem(path, f"position {pos}", f"records of batch {h.base_offset}: {e.detail}"))
            facts.batch_pos.append(pos)
            facts.batch_base.append(h.base_offset)
            facts.batch_last.append(h.last_offset)
            facts.batch_max_ts.append(h.max_timestamp)
            if facts.first_offset is None:
                facts.first_offset = h.base_offset
            facts.last_offset = h.last_offset
            last = h.last_offset
            pos = b.position + b.size
    except CorruptRecordError as e:
        problems.append(Problem(path, f"position {e.position if e.position is not None else pos}", e.detail))
        return facts
    if pos != size:
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


def check_offset_index(pdir: str, facts: SegmentFacts, problems: list[Problem]) -> None:
    path = files.segment_file(pdir, facts.base_offset, files.INDEX_SUFFIX)
    if not os.path.exists(path):
        problems.append(Problem(path, "", "offset index is missing (Kafka rebuilds it on recovery)"))
        return
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) % 8:
        problems.append(Problem(path, "", f"size {len(raw)} is not a multiple of 8"))
    positions = {p: i for i, p in enumerate(facts.batch_pos)}
    prev = None
    for i, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(raw[:len(raw) - len(raw) % 8])):
        off = facts.base_offset + rel
        where = f"entry {i} (offset {off}, position {pos})"
        if prev is not None and (off <= prev[0] or pos <= prev[1]):
            problems.append(Problem(path, where, "entries do not increase (untrimmed or stale index?)"))
            break
        k = positions.get(pos)
        if k is None:
            problems.append(Problem(path, where, f"position is not the start of a batch in {os.path.basename(facts.path)}"))
        elif off < facts.batch_base[k] or (facts.last_offset is not None and off > facts.last_offset):
            # a cleaner chunk's entry holds its largest retained offset, which may be below the
            # last offset of the batch at that position, never below its base offset
            problems.append(Problem(path, where, f"offset does not belong to the batches from that position "
                                                 f"(batch {facts.batch_base[k]}-{facts.batch_last[k]})"))
        prev = (off, pos)


def check_time_index(pdir: str, facts: SegmentFacts, problems: list[Problem]) -> None:
    path = files.segment_file(pdir, facts.base_offset, files.TIME_INDEX_SUFFIX)
    if not os.path.exists(path):
        return   # Kafka creates an empty one on load
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) % 12:
        problems.append(Problem(path, "", f"size {len(raw)} is not a multiple of 12"))
    running = {}
    mx = -1
    for last, ts in zip(facts.batch_last, facts.batch_max_ts):
        mx = max(mx, ts)
        running[last] = mx
    prev_ts = None
    for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(raw[:len(raw) - len(raw) % 12])):
        off = facts.base_offset + rel
        where = f"entry {i} (timestamp {ts}, offset {off})"
        if prev_ts is not None and ts < prev_ts:
            problems.append(Problem(path, where, "timestamps decrease"))
            break
        if off not in running:
            problems.append(Problem(path, where, "offset is not the last offset of a batch"))
        elif running[off] < ts:
            problems.append(Problem(path, where, f"no record up to that offset has this timestamp "
                                                 f"(max is {running[off]})"))
        prev_ts = ts


def check_txn_index(pdir: str, facts: SegmentFacts, problems: list[Problem]) -> None:
    path = files.segment_file(pdir, facts.base_offset, files.TXN_INDEX_SUFFIX)
    if not os.path.exists(path):
        return
    try:
        entries = TransactionIndex(path, facts.base_offset).entries()
    except StorageError as e:
        problems.append(Problem(path, "", str(e)))
        return
    prev = None
    for i, t in enumerate(entries):
        if t.last_offset < facts.base_offset:
            problems.append(Problem(path, f"entry {i}", f"aborted transaction ends at {t.last_offset}, below the "
                                                        f"segment base {facts.base_offset}"))
        if prev is not None and t.last_offset <= prev:
            problems.append(Problem(path, f"entry {i}", "last offsets do not increase"))
        prev = t.last_offset


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
                     checkpoints: dict[str, dict]) -> list[Problem]:
    pdir = os.path.join(root, files.partition_dir_name(topic, partition))
    problems: list[Problem] = []
    if not os.path.isdir(pdir):
        return [Problem(pdir, "", "partition directory is missing")]
    cleaner_ckpt = checkpoints.get(files.CLEANER_CHECKPOINT, {}).get((topic, partition))
    keys = [] if (config.compact and cleaner_ckpt) else None
    prev_last = None
    seg_facts = []
    for base in live_segment_bases(pdir):
        facts = check_segment(pdir, base, prev_last, problems, keys, cleaner_ckpt)
        if facts.last_offset is not None:
            prev_last = facts.last_offset
        check_offset_index(pdir, facts, problems)
        check_time_index(pdir, facts, problems)
        check_txn_index(pdir, facts, problems)
        seg_facts.append(facts)
    for name in sorted(os.listdir(pdir)):
        if name.endswith(files.SNAPSHOT_SUFFIX):
            try:
                read_snapshot(os.path.join(pdir, name))
            except StorageError as e:
                problems.append(Problem(os.path.join(pdir, name), "", str(e).split(": ", 1)[-1]))
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
