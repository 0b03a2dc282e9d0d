"""Shared helpers of the storage recovery/corruption/fault-injection tests.

The checks here are written from segment-files.md, independently of compactlog's loader: a
segment's ``.log`` must be whole valid batches, and its (closed) indexes must hold exactly the
entries Kafka's rebuild (``LogSegment.recover``) would write for those batches.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct

import crc32c

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "data", "kafka-vectors")


class Clock:
    def __init__(self, now: int = 1_700_000_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def copy_vector_dir(rel: str, dest_root: str) -> str:
    """Copy tests/data/kafka-vectors/<rel> (a partition dir) into dest_root; its new path."""
    dst = os.path.join(dest_root, os.path.basename(rel.rstrip("/")))
    shutil.copytree(os.path.join(VECTORS, rel), dst)
    return dst


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def digest_files(dir_path: str, suffixes=(".log",)) -> dict[str, str]:
    return {n: hashlib.sha256(read(os.path.join(dir_path, n))).hexdigest()
            for n in sorted(os.listdir(dir_path)) if n.endswith(suffixes)}


def flip_bit(path: str, position: int, bit: int = 3) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ (1 << bit)]))


# --- raw batch parsing, independent of compactlog ---------------------------------------------

def raw_batches(data: bytes):
    """[(position, base_offset, last_offset, max_timestamp, size, crc_ok)] of v2 batches; stops at
    the first incomplete or impossible one (returns it as the second value: its position or None)."""
    out = []
    pos = 0
    while pos + 17 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length < 49 or pos + 12 + length > len(data) or data[pos + 16] != 2:
            return out, pos
        size = 12 + length
        crc = struct.unpack_from(">I", data, pos + 17)[0]
        last_delta = struct.unpack_from(">i", data, pos + 23)[0]
        max_ts = struct.unpack_from(">q", data, pos + 35)[0]
        ok = crc == crc32c.crc32c(data[pos + 21:pos + size])
        out.append((pos, base, base + last_delta, max_ts, size, ok))
        pos += size
    return out, (pos if pos != len(data) else None)


def expected_indexes(data: bytes, base_offset: int, interval: int):
    """Offset and time index entries Kafka's recover() writes for the batches in ``data``."""
    offsets, times = [], []
    batches, _ = raw_batches(data)
    valid, last_entry = 0, 0
    max_ts, max_off = -1, -1
    for pos, _, last, ts, size, _ in batches:
        if ts > max_ts:
            max_ts, max_off = ts, last
        if valid - last_entry > interval:
            offsets.append((last, valid))
            if not times or max_ts > times[-1][0]:
                times.append((max_ts, max_off))
            last_entry = valid
        valid += size
    if max_ts >= 0 and (not times or max_ts > times[-1][0]):
        times.append((max_ts, max_off))
    return offsets, times


def index_entries(path: str, base_offset: int):
    raw = read(path)
    return [(base_offset + rel, pos) for rel, pos in struct.iter_unpack(">ii", raw[:len(raw) // 8 * 8])]


def time_index_entries(path: str, base_offset: int):
    raw = read(path)
    return [(ts, base_offset + rel) for ts, rel in struct.iter_unpack(">qi", raw[:len(raw) // 12 * 12])]


def check_partition_dir(pdir: str, interval: int = 4096, *, exact_indexes: bool = True) -> list[int]:
    """Assert a closed partition directory is valid; returns the segment base offsets.

    Every ``.log``: whole v2 batches, CRC-32C valid, offsets increasing across segments. Every
    ``.index`` / ``.timeindex``: trimmed (a whole number of entries, no zero-filled tail) and, with
    ``exact_indexes``, equal to what Kafka's rebuild would write.
    """
    bases = sorted(int(n[:-4]) for n in os.listdir(pdir) if n.endswith(".log") and n[:-4].isdigit())
    prev_last = -1
    for base in bases:
        prefix = os.path.join(pdir, f"{base:020d}")
        data = read(prefix + ".log")
        batches, stop = raw_batches(data)
        assert stop is None, f"{prefix}.log: invalid or torn bytes at position {stop}"
        for pos, first, last, _, _, ok in batches:
            assert ok, f"{prefix}.log: bad CRC at position {pos}"
            assert first > prev_last and first >= base and last - base < 2**31, (prefix, pos)
            prev_last = last
        offs = index_entries(prefix + ".index", base)
        times = time_index_entries(prefix + ".timeindex", base)
        assert os.path.getsize(prefix + ".index") == 8 * len(offs)
        assert os.path.getsize(prefix + ".timeindex") == 12 * len(times)
        positions = {pos: last for pos, _, last, _, _, _ in batches}
        for i, (off, pos) in enumerate(offs):
            assert pos in positions and off >= positions[pos], (prefix, off, pos)
            assert i == 0 or (off > offs[i - 1][0] and pos > offs[i - 1][1])
        for i, (ts, off) in enumerate(times):
            assert base <= off <= prev_last and (i == 0 or ts >= times[i - 1][0]), (prefix, ts, off)
        max_ts = max([b[3] for b in batches], default=-1)
        if max_ts >= 0:
            assert times and times[-1][0] == max_ts, f"{prefix}.timeindex lacks the final entry"
        if exact_indexes:
            exp_offs, exp_times = expected_indexes(data, base, interval)
            assert offs == exp_offs, f"{prefix}.index {offs} != {exp_offs}"
            assert times == exp_times, f"{prefix}.timeindex {times} != {exp_times}"
    return bases


def tree_state(root) -> dict:
    """Every file and directory under root: (size, sha256, mtime) or "dir" (to prove nothing changed)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            state[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            path = os.path.join(dirpath, f)
            if f == ".lock":
                # the data-dir lock: a writer notes its pid there; its presence is what counts
                state[os.path.relpath(path, root)] = "lock"
                continue
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            st = os.stat(path)
            state[os.path.relpath(path, root)] = (st.st_size, digest, st.st_mtime_ns)
    return state
