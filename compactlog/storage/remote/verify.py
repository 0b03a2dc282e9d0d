"""``compactlog verify`` of a tiered partition's remote tier (tiered-storage.md §6), read-only:

* the partition manifest parses and its segments are contiguous (``PartitionManifest.check``);
* each segment has its objects (``.log``, ``.indexes``, ``.rsm-manifest``, Aiven's layout) and
  its ``.log`` is as long as the manifest says;
* its batches: CRC-32C, offsets in order and within the segment's [start, end] (each batch's
  header read from the object through the store, one whole-object GET per segment);
* its offset and time indexes (out of ``.indexes``): entries in order, positions inside the log;
* the tiers meet: no gap between the highest remote offset and the first local segment;
* the journal (``__remote_log_metadata`` in the data dir, replayed as Kafka's
  RemoteLogMetadataCache does) agrees with the manifest: every FINISHED segment listed, every
  listed segment known. What the broker settles itself at its next start (a copy cut short, a
  journal record lost) is a note, not a problem.

Only GET, HEAD and LIST reach the store.
"""

from __future__ import annotations

import os
import struct

from ...errors import CompactlogError
from ...record import remote_log_metadata as rlm
from ...record.remote_log_metadata import RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, SegmentState
from .. import files
from ..verify import Problem, VerifyCounts
from . import keys
from .partition_manifest import ManifestError
from .segment_objects import read_indexes, read_manifest
from .store import RemoteStorageError
from .tiered_read import RemoteTier, TieredSource

_OFFSET = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


def journal_states(datadir) -> dict[tuple[str, int], dict[str, SegmentState]]:
    """(topic id, partition) -> segment id -> state, replayed from the data dir's
    ``__remote_log_metadata`` (read-only) with Kafka's transitions; deleted segments dropped."""
    from ..reader import PartitionReader
    out: dict[tuple[str, int], dict[str, SegmentState]] = {}
    if not datadir.has_topic(rlm.TOPIC):
        return out
    for p in datadir.partitions(rlm.TOPIC):
        pdir = os.path.join(datadir.path, files.partition_dir_name(rlm.TOPIC, p))
        if not os.path.isdir(pdir):
            continue
        with PartitionReader(pdir) as reader:
            for r in reader.records():
                if r.value is None:
                    continue
                try:
                    m = rlm.decode(bytes(r.value))
                except (ValueError, CompactlogError):
                    continue
                if isinstance(m, RemoteLogSegmentMetadata):
                    tip = m.segment_id.topic_id_partition
                    out.setdefault((tip.topic_id, tip.partition), {}).setdefault(m.segment_id.id, m.state)
                elif isinstance(m, RemoteLogSegmentMetadataUpdate):
                    tip = m.segment_id.topic_id_partition
                    segs = out.setdefault((tip.topic_id, tip.partition), {})
                    st = segs.get(m.segment_id.id)
                    if st is None or not rlm.is_valid_transition(st, m.state):
                        continue
                    if m.state == SegmentState.DELETE_SEGMENT_FINISHED:
                        del segs[m.segment_id.id]
                    else:
                        segs[m.segment_id.id] = m.state
    return out


def verify_remote_partition(tier: RemoteTier, topic: str, partition: int, journal: dict | None,
                            counts: VerifyCounts) -> list[Problem]:
    """Every problem (and note) of the partition's remote tier; [] when it is not tiered."""
    from ..reader import PartitionReader
    name = f"{topic}-{partition}"
    try:
        tiers = tier.tiers(topic, partition)
    except ManifestError as e:
        return [Problem(e.key or name, "remote manifest", str(e))]
    if tiers is None:
        return []
    if tiers.manifest is None:
        if tiers.log_start_offset < tiers.local_log_start_offset:
            # the local log was trimmed to a start the remote tier would have to hold
            pdir = os.path.join(tier.datadir.path, files.partition_dir_name(topic, partition))
            return [Problem(pdir, "tiers", f"offsets {tiers.log_start_offset}-{tiers.local_log_start_offset - 1} "
                                           f"are in neither tier: the bucket holds no partition manifest for "
                                           f"{name} ({keys.partition_manifest_key(tier.prefix, topic, tiers.topic_id, partition)})")]
        return []
    m = tiers.manifest
    store, config = tier.store, tier.config
    part = keys.partition_prefix(tier.prefix, topic, tiers.topic_id, partition)
    listed: dict[str, dict[str, int]] = {}
    for meta in store.list(part):
        parsed = keys.parse_segment_key(meta.key, part)
        if parsed is not None:
            listed.setdefault(parsed[1], {})[parsed[2]] = meta.size
    problems: list[Problem] = []
    pdir = os.path.join(tier.datadir.path, files.partition_dir_name(topic, partition))
    for s in m.segments:
        counts.segments += 1
        key = keys.SegmentKey(tier.prefix, topic, tiers.topic_id, partition, s.start_offset, s.id)
        where = f"remote segment {s.start_offset}-{s.end_offset} ({s.id})"
        objs = listed.get(s.id, {})
        missing = [x for x in (keys.LOG, keys.INDEXES, keys.RSM_MANIFEST) if x not in objs]
        if missing:
            problems.append(Problem(key.main, where, f"object(s) missing: {', '.join('.' + x for x in missing)}"))
            continue
        if objs[keys.LOG] != s.size_in_bytes:
            problems.append(Problem(key.key(keys.LOG), where, f"{objs[keys.LOG]} bytes, the manifest says "
                                                              f"{s.size_in_bytes}"))
            continue
        source = TieredSource(pdir, config, topic, tiers.topic_id, partition, (s,), s.start_offset, local=False)
        try:
            with PartitionReader(source) as reader:
                for b in reader.batches(s.start_offset):
                    b.ensure_valid()
                    if b.base_offset < s.start_offset or b.last_offset > s.end_offset:
                        problems.append(Problem(key.key(keys.LOG), f"{where} at position {b.position}",
                                                f"batch {b.base_offset}-{b.last_offset} is outside the segment's "
                                                f"offsets"))
                        break
                    counts.records += b.records_count
            problems += _check_indexes(store, key, where, s)
        except (CompactlogError, OSError) as e:
            problems.append(Problem(key.key(keys.LOG), where, str(e)))
    # the tiers meet
    local_start = tiers.local_log_start_offset
    if m.segments and local_start > m.highest_offset + 1:
        problems.append(Problem(pdir, "tiers", f"offsets {m.highest_offset + 1}-{local_start - 1} are in neither "
                                               f"tier: the remote tier ends at {m.highest_offset}, the local log "
                                               f"starts at {local_start}"))
    if m.segments and tiers.log_start_offset < m.segments[0].start_offset:
        problems.append(Problem(pdir, "tiers", f"the log start offset {tiers.log_start_offset} is below the "
                                               f"first remote segment ({m.segments[0].start_offset})"))
    if journal is not None:
        problems += _check_journal(journal.get((tiers.topic_id, partition), {}), m, name)
    return problems


def _check_indexes(store, key, where: str, s) -> list[Problem]:
    out = []
    raw = read_indexes(store, key, read_manifest(store, key), ("offset", "timestamp"))
    o, t = raw["offset"] or b"", raw["timestamp"] or b""
    prev_off, prev_pos = -1, -1
    for rel, pos in _OFFSET.iter_unpack(o[:len(o) - len(o) % 8]):
        if rel <= prev_off or pos < prev_pos or pos >= s.size_in_bytes or s.start_offset + rel > s.end_offset:
            out.append(Problem(key.key(keys.INDEXES), where, f"offset index entry ({rel}, {pos}) out of order or "
                                                              f"outside the segment"))
            break
        prev_off, prev_pos = rel, pos
    prev_ts = -1
    for ts, rel in _TIME.iter_unpack(t[:len(t) - len(t) % 12]):
        if ts < prev_ts or s.start_offset + rel > s.end_offset:
            out.append(Problem(key.key(keys.INDEXES), where, f"time index entry ({ts}, {rel}) out of order or "
                                                              f"outside the segment"))
            break
        prev_ts = ts
    return out


def _check_journal(states: dict[str, SegmentState], m, name: str) -> list[Problem]:
    out = []
    listed = {s.id for s in m.segments}
    pending = {p.id for p in m.pending_deletion}
    where = f"{rlm.TOPIC} for {name}"
    for seg_id, st in sorted(states.items()):
        if seg_id in listed or seg_id in pending:
            if st == SegmentState.COPY_SEGMENT_STARTED:
                out.append(Problem(where, seg_id, "committed in the manifest, COPY_SEGMENT_FINISHED not in the "
                                                  "journal yet (the broker appends it at its next start)", note=True))
            continue
        if st == SegmentState.COPY_SEGMENT_FINISHED:
            out.append(Problem(where, seg_id, "COPY_SEGMENT_FINISHED in the journal, not in the partition manifest"))
        else:
            out.append(Problem(where, seg_id, f"{st.name} in the journal, not in the manifest (a copy or deletion cut "
                                              f"short: the broker finishes it at its next start)", note=True))
    for seg_id in sorted(listed - set(states)):
        out.append(Problem(where, seg_id, "in the manifest, not in the journal (the broker writes it back from "
                                          "the manifest at its next start)", note=True))
    return out
