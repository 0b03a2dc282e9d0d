"""Which files of a partition directory are live: Kafka's LogLoader passes 1-3, decided in memory
(the listing of the local directory's segment source, ``segment_source.LocalDirSource``).

One rule set for every reader and for the read-only loader (segment-files.md §10):
``*.deleted`` and ``*.cleaned`` files are ignored; ``.swap`` files at or above the lowest
``.cleaned`` offset are ignored (an interrupted split); the remaining ``.log.swap`` files replace
every segment whose base offset falls in [lowest swap base, highest swap next offset). The
writable loader (``loader.py``) applies the same rules by renaming and deleting files.

A listing taken while a writer swaps cleaned segments in can mix the before and after states,
because readdir is not atomic against renames: ``stable_live_segments`` lists until two
consecutive listings agree, which the writer's rename sequence (milliseconds long) allows. A
reader that reads the files after listing them pins them instead (``pinned.py``): a listing only
names files, which a swap may replace before they are opened.
"""

from __future__ import annotations

import mmap
import os
import time
from typing import NamedTuple

from ..record import kernels
from ..record.batch import as_u8
from . import files


class SegmentFile(NamedTuple):
    base_offset: int
    path: str
    size: int

    @property
    def suffix(self) -> str:
        """``.swap`` for a swap file taken as live, else ""."""
        return files.SWAP_SUFFIX if self.path.endswith(files.SWAP_SUFFIX) else ""


def offset_or_none(name: str) -> int | None:
    prefix = name.split(".", 1)[0]
    return int(prefix) if prefix.isdecimal() else None


def map_file(path: str):
    """(read-only mmap or b"", size) of a file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b"", 0
        from . import object_body
        body = object_body.body_of(fd, path) if object_body.active() else None
        if body is not None:        # a segment whose bytes are a bucket's object (clean over a bucket)
            return body.whole(size), size
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ), size
    finally:
        os.close(fd)


def close_map(m) -> None:
    if isinstance(m, mmap.mmap):
        try:
            m.close()
        except BufferError:   # still exported (a caller keeps a view): the GC closes it later
            pass


def next_offset_of(path: str, base_offset: int) -> int:
    """Kafka's readNextOffset of a segment file: the last complete batch's next offset, else base."""
    m, size = map_file(path)
    try:
        nxt, _ = kernels.last_batch_end(as_u8(m), 0, size)
    finally:
        close_map(m)
    return base_offset if nxt < 0 else int(nxt)


def _names(dir_path: str) -> list[str]:
    out = []
    with os.scandir(dir_path) as it:
        for e in it:
            try:
                if e.is_file():
                    out.append(e.name)
            except OSError:
                continue
    return sorted(out)


def live_names(names: list[str], next_offset=None) -> dict[int, str]:
    """Base offset -> file name of each live ``.log`` (or ``.log.swap``) among ``names``.

    ``next_offset(name, base)`` gives a swap file's next offset (read from the file).
    """
    regular, swaps = [], []
    min_cleaned = None
    for name in names:
        if name.endswith(files.DELETED_SUFFIX):
            continue
        if name.endswith(files.CLEANED_SUFFIX):
            off = offset_or_none(name)
            if off is not None:
                min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            continue
        if name.endswith(files.SWAP_SUFFIX):
            swaps.append(name)
            continue
        regular.append(name)
    if min_cleaned is not None:
        swaps = [s for s in swaps if (offset_or_none(s) is None or offset_or_none(s) < min_cleaned)]
    min_base, max_end = None, None
    for name in swaps:
        if not name.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX):
            continue
        base = offset_or_none(name)
        if base is None:
            continue
        end = next_offset(name, base) if next_offset is not None else base
        min_base = base if min_base is None else min(min_base, base)
        max_end = end if max_end is None else max(max_end, end)
    live: dict[int, str] = {}
    for name in regular:
        off = offset_or_none(name)
        if off is None or not files.is_segment_log(name):
            continue
        if min_base is not None and min_base <= off < max_end:
            continue   # replaced by the swapped-in segments
        live[off] = name
    for name in swaps:
        plain = name[:-len(files.SWAP_SUFFIX)]
        if files.is_segment_log(plain):
            live[offset_or_none(plain)] = name   # a swap file wins over a same-named segment
    return live


def live_segment_files(dir_path: str) -> list[SegmentFile]:
    """The ``.log`` files Kafka's loader would keep live, resolving leftovers in memory only."""
    names = _names(dir_path)
    live = live_names(names, lambda name, base: next_offset_of(os.path.join(dir_path, name), base))
    out = []
    for off in sorted(live):
        path = os.path.join(dir_path, live[off])
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            continue   # renamed away since the listing: the caller's stable listing retries
        out.append(SegmentFile(off, path, size))
    return out


def stable_live_segments(dir_path: str, *, attempts: int = 50) -> list[SegmentFile]:
    """``live_segment_files`` from two consecutive listings that agree on the live file names."""
    prev = None
    for i in range(attempts):
        segs = live_segment_files(dir_path)
        names = [s.path for s in segs]
        if names == prev:
            return segs
        prev = names
        if i:
            time.sleep(min(0.001 * (2 ** i), 0.05))
    return segs
