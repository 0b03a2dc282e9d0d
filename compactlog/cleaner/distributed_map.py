"""The distributed key map: any number of distinct keys in one pass, no task holding a key table.

Kafka's map is a fixed buffer (about 5M keys per pass); the in-task map here grows, but a task has a
memory budget. When a partition's keys would not fit, the map is built by Spark instead:

1. scan tasks, one per segment, emit ``(partition, key digest, offset)`` for every keyed record of
   the dirty range (transaction markers and aborted data left out, as Kafka's map does) and, in
   separate tasks, for the records of the clean section below it;
2. a shuffle keeps the latest offset per key: the *winning* offsets; a semi-join finds the
   clean-section records whose key reappears in the dirty range (the superseded ones);
3. both are shuffled by partition to the rewrite task of that partition, which receives them as two
   sorted offset arrays (8 bytes per key, no hash table) and rewrites its segment groups with the
   same rules as the in-task path. Only small results reach the driver.

A record's fate needs only the comparison of its offset with its key's latest offset, so the
rewrite asks ``WinnersMap.get(digests, offsets)``: in the dirty range a record wins exactly when
its offset is a winning offset; below it, when its offset is not superseded.

With a version strategy (``compaction.strategy`` timestamp or header, cleaner/strategy.py) the scans
also emit each record's version, the reducer keeps each key's winner by the strategy's comparison
(``offset_map.VersionMap``, the in-task engine's map) over the dirty range and then the clean
section's records of the same keys, and a clean-section record loses only to its key's winner:
the same winners as the in-task engine, so the same bytes.
"""

from __future__ import annotations

import numpy as np

from ..record.batch import as_u8
from .executor import TaskFailure, run_guarded
from .fast_path import SegmentScan
from .source import SourceLog
from .strategy import strategy_of
from .task import PartitionCleanPlan, PartitionCleanResult

INT64_MAX = 2**63 - 1
DIRTY, CLEAN, SEED = 0, 1, 2


class WinnersMap:
    """The latest-offset-per-key map as seen by one rewrite task of the distributed path."""

    def __init__(self, first_dirty: int, end_offset: int, winners: np.ndarray, superseded: np.ndarray):
        self.first_dirty = first_dirty
        self.winners = np.sort(winners)
        self.superseded = np.sort(superseded)
        self.latest_offset = end_offset - 1

    @staticmethod
    def _member(sorted_values: np.ndarray, x: np.ndarray) -> np.ndarray:
        if sorted_values.size == 0:
            return np.zeros(x.shape[0], dtype=bool)
        i = np.searchsorted(sorted_values, x)
        i[i == sorted_values.size] = 0
        return sorted_values[i] == x

    def get(self, h1, h2, offsets: np.ndarray) -> np.ndarray:
        offsets = np.asarray(offsets, dtype=np.int64)
        out = np.full(offsets.shape[0], -1, dtype=np.int64)
        dirty = offsets >= self.first_dirty
        d = offsets[dirty]
        out[dirty] = np.where(self._member(self.winners, d), d, INT64_MAX)
        c = offsets[~dirty]
        out[~dirty] = np.where(self._member(self.superseded, c), INT64_MAX, -1)
        return out

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def __len__(self) -> int:
        return int(self.winners.size)

    @property
    def bytes_used(self) -> int:
        return int(self.winners.nbytes + self.superseded.nbytes)


def _aborted_ranges(log: SourceLog, lo: int, hi: int):
    return [(t.producer_id, t.first_offset, t.last_offset) for t in log.collect_aborted(lo, hi)]


def keyed_records(plan: PartitionCleanPlan, seg_base: int, lo: int, hi: int):
    """(h1, h2, offsets, records read, bytes read) of the keyed records in [lo, hi) of one segment,
    without control records and aborted transactional data; with a version strategy,
    (h1, h2, offsets, versions, has-version, records read, bytes read)."""
    log = SourceLog(plan.source, plan.segments, plan.max_message_size)
    try:
        seg = next(s for s in log.segments if s.base_offset == seg_base)
        seg.check_structure(log.next_base(seg))
        pos = seg.index_position(lo)
        seg.validate(log.next_base(seg), pos)
        strategy = strategy_of(plan)
        if strategy.versioned:
            from .map_builder import keyed_versions
            from .txn_state import CleanedTransactionState
            # this segment's scan alone: a transaction whose marker lies before it is over (its
            # producer's later transactions must not be taken for it)
            first = max(lo, seg_base)
            txn = CleanedTransactionState()
            txn.add_aborted(t for t in log.collect_aborted(lo, hi) if t.last_offset >= first)
            return (*keyed_versions(seg, pos, lo, hi, txn, strategy), seg.size - pos)
        buf = as_u8(seg.buffer)
        scan = SegmentScan(buf, pos, seg.size, seg.scan_scratch)
        if scan.ok:
            offsets = scan.r_offset
            sel = np.flatnonzero((scan.r_klen >= 0) & (offsets >= lo) & (offsets < hi))
            h1, h2 = scan.key_hashes(sel)
            return h1, h2, offsets[sel], scan.nr, seg.size - pos
        return _keyed_records_per_batch(log, seg, pos, lo, hi)
    finally:
        log.close()


def _keyed_records_per_batch(log: SourceLog, seg, pos: int, lo: int, hi: int):
    from .map_builder import key_hashes
    aborted = _aborted_ranges(log, lo, hi)
    parts, read = [], 0
    for b in seg.batches(pos):
        h = b.header
        if b.magic < 2 or h.is_control or h.records_count == 0:
            read += 1 if h.is_control else 0
            continue
        if h.is_transactional and any(pid == h.producer_id and first <= h.last_offset < last
                                      for pid, first, last in aborted):
            read += h.records_count
            continue
        cols = b.columns()
        offsets = h.base_offset + cols.off_delta
        sel = np.flatnonzero((cols.key_len >= 0) & (offsets >= lo) & (offsets < hi))
        if sel.size:
            h1, h2 = key_hashes(cols, sel)
            parts.append((h1, h2, offsets[sel]))
        read += h.records_count
    if not parts:
        z = np.zeros(0, dtype=np.uint64)
        return z, z, np.zeros(0, dtype=np.int64), read, seg.size - pos
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]), read, seg.size - pos)


def scan_jobs(plans: list[PartitionCleanPlan]) -> tuple[list, list]:
    """(dirty-range scan jobs, clean-section scan jobs): rows (plan index, segment, lo, hi)."""
    dirty, clean = [], []
    for p, plan in enumerate(plans):
        bases = [s.base_offset for s in plan.segments]
        for i, base in enumerate(bases):
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            if base < plan.first_uncleanable and (nxt is None or nxt > plan.first_dirty):
                dirty.append((p, base, plan.first_dirty, plan.first_uncleanable))
            if base < plan.first_dirty:
                clean.append((p, base, 0, plan.first_dirty))
    return dirty, clean


def _buckets(p: int, kind: int, h1: np.ndarray, h2: np.ndarray, offs: np.ndarray, reducers: int, *versions):
    """Split one scan's digests (and versions) by reducer (high bits of the digest), as whole
    numpy blocks."""
    bucket = (h1 >> np.uint64(40)) % np.uint64(reducers)
    order = np.argsort(bucket, kind="stable")
    counts = np.bincount(bucket.astype(np.int64), minlength=reducers)
    cols = [c[order] for c in (h1, h2, offs, *versions)]
    start = 0
    for r, n in enumerate(counts.tolist()):
        if n:
            yield r, (p, kind, *(c[start:start + n] for c in cols))
        start += n


def _reduce_versions(kinds: dict, base: int):
    """A version strategy's winners: the dirty range's records ranked (VersionMap), the clean
    section's records of the same keys ranked against them; (winning offsets, clean offsets
    that lose)."""
    from .offset_map import VersionMap
    vmap = VersionMap(base, sum(b[0].shape[0] for b in kinds[DIRTY]))
    for h1, h2, offs, ver, has in kinds[DIRTY]:
        vmap.put(h1, h2, offs, ver, has)
    for h1, h2, offs, ver, has in kinds[CLEAN]:
        vmap.update(h1, h2, offs, ver, has)
    lost = []
    for h1, h2, offs, _, _ in kinds[CLEAN]:
        winner = vmap.get(h1, h2)
        lost.append(offs[(winner >= 0) & (winner != offs)])
    return vmap.offsets(), np.concatenate(lost) if lost else np.zeros(0, np.int64)


def reduce_task(blocks, bases=None) -> list:
    """Per partition: the winning offsets (latest per key) and the superseded clean offsets
    (``bases``: each versioned plan's log start, for its VersionMap)."""
    from .offset_map import InTaskOffsetMap
    by_plan: dict[int, dict[int, list]] = {}
    for _, (p, kind, *cols) in blocks:
        by_plan.setdefault(p, {DIRTY: [], CLEAN: []})[kind].append(tuple(cols))
    out = []
    for p, kinds in by_plan.items():
        if bases and bases.get(p) is not None:
            out.append((p, _reduce_versions(kinds, bases[p])))
            continue
        latest = InTaskOffsetMap()
        for h1, h2, offs in kinds[DIRTY]:
            latest.put_max(h1, h2, offs)
        superseded = [offs[latest.get(h1, h2) >= 0] for h1, h2, offs in kinds[CLEAN]]
        out.append((p, (latest.offsets(), np.concatenate(superseded) if superseded else np.zeros(0, np.int64))))
    return out


def distributed_stages(plans: list[PartitionCleanPlan], parallelism: int) -> tuple[list, int, dict]:
    """What a distributed run of ``plans`` does: (scan jobs, number of reducers, each versioned
    plan's log start for its ``VersionMap``)."""
    dirty_bytes = sum(s.log_bytes for plan in plans for s in plan.segments if s.base_offset < plan.first_uncleanable)
    reducers = max(1, min(4 * parallelism, dirty_bytes // (64 << 20)))   # ~64 MiB of log per reducer
    dirty_jobs, clean_jobs = scan_jobs(plans)
    jobs = [(DIRTY, *j) for j in dirty_jobs] + [(CLEAN, *j) for j in clean_jobs]
    bases = {p: plan.segments[0].base_offset for p, plan in enumerate(plans) if strategy_of(plan).versioned}
    return jobs, reducers, bases


def scan_task(plans: list[PartitionCleanPlan], job, reducers: int, count):
    """One scan task: the job's keyed records as blocks by reducer; ``count(plan index, records,
    bytes)`` told what a dirty-range scan read (the map statistics)."""
    kind, p, seg, lo, hi = job
    *cols, n, nbytes = keyed_records(plans[p], seg, lo, hi)
    if kind == DIRTY:
        count(p, n, nbytes)
    yield from _buckets(p, kind, *cols[:3], reducers, *cols[3:])


def rewrite_task(plans: list[PartitionCleanPlan], items):
    """One rewrite task: each of its partitions cleaned with the winners the reducers sent it
    (``(plan index, (winning offsets, superseded clean offsets))`` items, a seed of empty arrays
    for every plan)."""
    by_plan: dict[int, list] = {}
    for p, arrays in items:
        by_plan.setdefault(p, []).append(arrays)
    for p, parts in by_plan.items():
        plan = plans[p]
        winners = np.concatenate([w for w, _ in parts])
        superseded = np.concatenate([c for _, c in parts])
        omap = WinnersMap(plan.first_dirty, plan.first_uncleanable, winners, superseded)
        yield p, run_guarded(plan, offset_map=omap)


def seed(p: int):
    """The empty winners every plan's rewrite task receives (a plan with no keyed record still
    gets its task)."""
    return p, (np.zeros(0, np.int64), np.zeros(0, np.int64))


def ordered_results(plans: list[PartitionCleanPlan], results: dict, records_read: list[int],
                    bytes_read: list[int]) -> list:
    """The rewrite tasks' results in the plans' order, with the map statistics of the scans."""
    ordered = []
    for p, plan in enumerate(plans):
        res = results.get(p)
        if res is None:
            res = TaskFailure(plan.topic, plan.partition, "the distributed map produced no rewrite task", "Missing")
        elif isinstance(res, PartitionCleanResult):
            res.stats["map_messages_read"] = records_read[p]
            res.stats["map_bytes_read"] = bytes_read[p]
        ordered.append(res)
    return ordered


def run_distributed(spark, plans: list[PartitionCleanPlan]) -> list:
    """Clean ``plans`` with the key map built by Spark (see the module docstring).

    Digests travel between tasks as numpy blocks in Spark's shuffle (no per-record rows): scan
    tasks -> reducers by digest (latest offset per key) -> the rewrite task of each partition.
    """
    sc = spark.sparkContext
    parallelism = max(sc.defaultParallelism, 1)
    jobs, reducers, bases = distributed_stages(plans, parallelism)
    records_read = [sc.accumulator(0) for _ in plans]
    bytes_read = [sc.accumulator(0) for _ in plans]

    def count(p: int, n: int, nbytes: int) -> None:
        records_read[p].add(n)
        bytes_read[p].add(nbytes)

    sc.setJobDescription(f"compactlog clean (distributed key map): {len(plans)} partition(s)")
    seeds = sc.parallelize([seed(p) for p in range(len(plans))], 1)
    reduced = (sc.parallelize(jobs, max(min(len(jobs), 4 * parallelism), 1))
               .flatMap(lambda job: scan_task(plans, job, reducers, count))
               .partitionBy(reducers, lambda r: r).mapPartitions(lambda blocks: reduce_task(blocks, bases)))
    out = (reduced.union(seeds).partitionBy(min(len(plans), 2 * parallelism), lambda p: p)
           .mapPartitions(lambda items: rewrite_task(plans, items)).collect())
    return ordered_results(plans, dict(out), [a.value for a in records_read], [a.value for a in bytes_read])
