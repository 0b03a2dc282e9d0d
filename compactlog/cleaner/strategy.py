"""Which record of a key wins: the compaction strategy (KIP-280, accepted by Kafka, never built there).

A strategy is the key map's *version column* and its comparison. Kafka's cleaner has one, the
offset: the record with the highest offset of a key wins and the map stores offsets only. KIP-280
adds two, chosen per topic with ``compaction.strategy`` (broker default
``log.cleaner.compaction.strategy``):

* ``timestamp``: the record timestamp is the version (for a LogAppendTime batch, the batch's
  max timestamp, which is what consumers see as each record's timestamp);
* ``header``: the value of the record header named by ``compaction.strategy.header`` (broker
  default ``log.cleaner.compaction.strategy.header``), read as an 8-byte big-endian signed long.
  When a record repeats the header, its LAST occurrence counts (KIP-280); when that value is not
  exactly 8 bytes (null, empty, a string), the record has no version: the KIP asks for a long of
  8 bytes and its earlier drafts ignored a value that is not one, so such a value is treated as
  an absent header, never as a partial number, and never by falling back to an earlier
  occurrence.

The comparison, the one place it is written (``beats``, ``rank``, ``latest_rows``): the highest
version wins; a record with a version beats one without ("only one has it keeps that one");
between equal versions, or two records without one, the later offset wins. A record is ranked by
the pair (version, tie) with version ``NO_VERSION`` (the lowest long) when it has none and
``tie = has_version << 62 | offset``, compared lexicographically, which is exactly that order
(offsets stay below 2**62). The offset strategy is the pair (0, offset):
every caller keeps its offset-only code for it, byte for byte as before.

Who uses it: the map builders (``map_builder``, ``fast_path.map_segment_fast``: the version map,
``offset_map.VersionMap``), both rewrite kernels (``rules.record_fates``, ``fast_path.decide_segment``:
``exact`` fates), the distributed map's reducer, ``explain`` and ``clean --dry-run`` (through the
same round), and the read side (``storage.latest`` with ``latest_rows``, ``spark.snapshot`` with
``spark_rank``), so that a snapshot of a log equals the snapshot of the log the cleaner leaves.

Where KIP-280 says nothing, compactlog chooses (docs/compaction-strategies.md says the same):

* tombstones take part in the comparison like any record: a tombstone with a lower version than
  a live record of its key is superseded at once; a winning tombstone stays until its delete
  horizon (``delete.retention.ms``) as under the offset strategy. Once it is gone, a record of
  its key with a lower version that arrives later is live again: the horizon also bounds how late
  an out-of-order version may arrive and still be suppressed by a delete;
* the winner is decided over the whole cleanable range, the clean section included (a record
  cleaned in an earlier round keeps winning against a later, lower version), so a round with a
  version strategy also reads the clean section's keys (the offset strategy never needs to:
  every dirty offset is above it);
* records past the round's end (the active segment, past the last stable offset) are neither
  mapped nor removed, as under the offset strategy; a lower version there is removed by the
  round that cleans it;
* aborted transactional records and control batches never enter the map (as Kafka's map); markers
  and empty batches are kept by Kafka's batch rules, which do not depend on the strategy;
* on a LogAppendTime topic the timestamp strategy sees the broker's append times (nearly the
  offset order); it is allowed, not refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..record import kernels as K
from ..record.jit import njit

OFFSET, TIMESTAMP, HEADER = "offset", "timestamp", "header"
STRATEGIES = (OFFSET, TIMESTAMP, HEADER)
HAS_SHIFT = 62
OFFSET_LIMIT = 1 << HAS_SHIFT
# the version of a record without one: below every long, so that "only one has it" keeps that one
# (a header holding Long.MIN_VALUE still wins over none: ``has`` in the tie word decides)
NO_VERSION = -(1 << 63)


@njit(cache=True, inline="always")
def beats(ver_a, tie_a, ver_b, tie_b):
    """Whether record a wins over record b (both ranked by ``rank``)."""
    return ver_a > ver_b or (ver_a == ver_b and tie_a > tie_b)


@njit(cache=True, work=lambda buf, val_pos, *_: 16 * val_pos.shape[0])
def header_versions(buf, val_pos, val_len, hdr_count, name, out_ver, out_has):
    """The version of each record from its headers: the last header named ``name`` whose value is
    8 bytes, read big-endian signed; ``out_has`` 0 when the last such header is absent or not
    8 bytes. Records are already validated by the scan kernels (their header sections parse)."""
    nlen = name.shape[0]
    end = buf.shape[0]
    for i in range(val_pos.shape[0]):
        out_ver[i] = NO_VERSION
        out_has[i] = 0
        nh = hdr_count[i]
        if nh == 0:
            continue
        p = val_pos[i] + (val_len[i] if val_len[i] > 0 else 0)
        _, p = K._read_varint(buf, p, end)
        found = False
        vpos = np.int64(0)
        vlen = np.int64(-1)
        for _ in range(nh):
            kl, p = K._read_varint(buf, p, end)
            same = kl == nlen
            if same:
                for j in range(nlen):
                    if buf[p + j] != name[j]:
                        same = False
                        break
            p += kl
            vl, p = K._read_varint(buf, p, end)
            if same:
                found = True
                vpos = p
                vlen = vl
            if vl > 0:
                p += vl
        if found and vlen == 8:
            v = np.int64(0)
            for j in range(8):
                v = (v << np.int64(8)) | np.int64(buf[vpos + j])
            out_ver[i] = v
            out_has[i] = 1


def rank(offsets: np.ndarray, has: np.ndarray) -> np.ndarray:
    """The tie word of each record: ``has << 62 | offset`` (see the module docstring)."""
    return np.asarray(offsets, dtype=np.int64) | (np.asarray(has, dtype=np.int64) << HAS_SHIFT)


@dataclass(frozen=True)
class CompactionStrategy:
    """A topic's strategy as plain data (it travels in a ``PartitionCleanPlan`` to Spark tasks)."""

    name: str = OFFSET
    header: str = ""

    def __post_init__(self):
        if self.name not in STRATEGIES:
            raise ConfigError(f"unknown compaction strategy {self.name!r}: use {', '.join(STRATEGIES)}")
        if self.name == HEADER and not self.header:
            raise ConfigError("compaction.strategy=header needs the header's name in "
                              "compaction.strategy.header")

    @classmethod
    def of(cls, config) -> "CompactionStrategy":
        """The strategy of a topic's ``LogConfig`` (its own values, else the broker's defaults)."""
        name = config.get("compaction.strategy")
        return cls(name, config.get("compaction.strategy.header") if name == HEADER else "")

    @property
    def versioned(self) -> bool:
        return self.name != OFFSET

    def __str__(self) -> str:
        return f"header {self.header!r}" if self.name == HEADER else self.name

    def record_versions(self, buf, timestamps, val_pos, val_len, hdr_count) -> tuple[np.ndarray, np.ndarray]:
        """(version, has version) of records laid out by the scan kernels in ``buf``."""
        n = timestamps.shape[0]
        if self.name == TIMESTAMP:
            return np.ascontiguousarray(timestamps, dtype=np.int64), np.ones(n, dtype=np.int8)
        ver = np.full(n, NO_VERSION if self.name == HEADER else 0, dtype=np.int64)
        has = np.zeros(n, dtype=np.int8)
        if self.name == HEADER and n:
            name = np.frombuffer(self.header.encode("utf-8"), dtype=np.uint8)
            header_versions(buf, np.ascontiguousarray(val_pos, dtype=np.int64),
                            np.ascontiguousarray(val_len, dtype=np.int32),
                            np.ascontiguousarray(hdr_count, dtype=np.int32), name, ver, has)
        return ver, has

    def column_versions(self, cols, timestamps, select=None) -> tuple[np.ndarray, np.ndarray]:
        """(version, has) of a decoded records section (``batch.columns()``), rows ``select``."""
        vp, vl, hc, ts = cols.val_pos, cols.val_len, cols.hdr_count, timestamps
        if select is not None:
            vp, vl, hc, ts = vp[select], vl[select], hc[select], ts[select]
        return self.record_versions(cols.data, ts, vp, vl, hc)

    def arrow_versions(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """(version, has) of the reader's Arrow rows (``timestamp`` and, for ``header``, the
        ``headers`` column read with ``with_headers=True``): the same rule as ``header_versions``."""
        n = batch.num_rows
        if self.name == TIMESTAMP:
            return batch.column("timestamp").to_numpy(zero_copy_only=False).astype(np.int64), np.ones(n, np.int8)
        ver, has = np.full(n, NO_VERSION, dtype=np.int64), np.zeros(n, dtype=np.int8)
        if self.name != HEADER or n == 0:
            return ver, has
        import pyarrow as pa
        import pyarrow.compute as pc
        headers = batch.column("headers")
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        offsets = headers.offsets.to_numpy()
        flat = headers.flatten()     # honours the list array's slice
        base = int(offsets[0])
        match = np.flatnonzero(pc.equal(flat.field("key"), self.header).to_numpy(zero_copy_only=False))
        if match.size == 0:
            return ver, has
        rows = np.searchsorted(offsets, match + base, side="right") - 1
        last = np.full(n, -1, dtype=np.int64)
        last[rows] = match      # ascending: the last occurrence of each row stays
        hit = np.flatnonzero(last >= 0)
        values = flat.field("value").take(pa.array(last[hit]))
        lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
        eight = np.flatnonzero(np.nan_to_num(lengths, nan=-1) == 8)
        if eight.size:
            raw = b"".join(values.take(pa.array(eight)).to_pylist())
            ver[hit[eight]] = np.frombuffer(raw, dtype=">i8").astype(np.int64)
            has[hit[eight]] = 1
        return ver, has

    def latest_rows(self, codes: np.ndarray, offsets: np.ndarray, ver=None, has=None) -> np.ndarray:
        """The row of every key's winner (``codes``: a key number per row), in row order."""
        if codes.size == 0:
            return np.zeros(0, dtype=np.int64)
        if not self.versioned:
            last = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
            np.maximum.at(last, codes, np.arange(codes.size, dtype=np.int64))
            return np.sort(last)
        tie = rank(offsets, has)
        order = np.lexsort((tie, ver, codes))
        ends = np.flatnonzero(np.diff(codes[order], append=codes[order][-1] + 1))
        return np.sort(order[ends])

    def spark_rank(self, header_column: str = "headers"):
        """The Spark column ranking a record of the kafka-log source as ``rank`` does (a struct
        ordered version first, then has-version, then offset): for ``spark.snapshot``."""
        from pyspark.sql import functions as F
        if self.name == OFFSET:
            return F.col("offset")
        if self.name == TIMESTAMP:
            return F.struct(F.col("timestamp").alias("v"), F.lit(True).alias("h"), F.col("offset").alias("o"))
        named = F.filter(header_column, lambda h: h["key"] == F.lit(self.header))
        value = F.get(named, F.size(named) - 1)["value"]     # the last occurrence; NULL when none
        has = F.coalesce(F.length(value) == 8, F.lit(False))
        # signed big-endian order as a string: the sign nibble mapped so that negatives sort first
        text = F.hex(value)
        signed = F.concat(F.translate(F.substring(text, 1, 1), "0123456789ABCDEF", "89ABCDEF01234567"),
                          F.substring(text, 2, 15))
        return F.struct(F.when(has, signed).alias("v"), has.alias("h"), F.col("offset").alias("o"))


DEFAULT = CompactionStrategy()


def strategy_of(plan) -> CompactionStrategy:
    """The strategy a plan carries (plans made before strategies existed mean the offset)."""
    return getattr(plan, "strategy", None) or DEFAULT

