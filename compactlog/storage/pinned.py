"""One consistent state of a partition's segment files, held for a read-only read: the ``pin`` of
the local directory's segment source (``segment_source.LocalDirSource``).

Kafka's own readers never see a swap half done: a fetch reads the ``LogSegment`` objects of the
segment map it started from (``LocalLog.read``), and ``LocalLog.replaceSegments`` / retention
only rename replaced files to ``.deleted`` and remove them ``file.delete.delay.ms`` later, so a
read in flight ends on the files it began with. A reader in another process holds nothing of the
writer's and cannot delay its deletes, so it pins the files itself:

1. list the directory and decide which ``.log`` files are live (``layout.live_names``: the
   loader's rules for ``.cleaned``, ``.swap`` and ``.deleted`` names);
2. map every live ``.log``, the last (active) one last. A mapping keeps a file's bytes whatever
   the writer renames or unlinks afterwards, and the writer never rewrites a segment in place: it
   only appends to the active one, whose mapping ends at the size it had when mapped;
3. list again: the ``.log`` names must be the same (a roll may add segments above the last one)
   and every pinned name must still hold the file that was mapped. A file leaves its name once and
   never comes back to it, so at the moment of the second listing every pinned file was live under
   its name, and nothing else was: the maps are one state the log had. Otherwise unmap, try again.

While a writer holds the data dir and ``.log.swap`` names are present, a swap is in progress (it
takes milliseconds): the pin waits for it to end rather than take the state the rules make of the
names in between. A directory that keeps changing for ``PIN_TIMEOUT_S`` fails the read with
``LogChangedError``: a reader returns one state of the log or an error, never parts of two.

Index files are read on demand (``PinnedSegments.sidecar``) and checked against the pin: the writer
renames a segment's ``.log`` before its indexes (``LogSegment.changeFileSuffixes``), so an index
read while the pinned ``.log`` is still under its name belongs to that segment.
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import dataclass

from ..errors import LogChangedError
from . import files
from .fsutil import open_regular
from .layout import SegmentFile, close_map, live_names, offset_or_none
from .lock import describe_holder

PIN_TIMEOUT_S = 10.0
SWAP_WAIT_S = 1.0          # how long a pin waits for a writer's swap in progress to finish


@dataclass(slots=True, eq=False)
class PinnedSegment:
    """A live segment file, mapped: ``data`` holds its first ``size`` bytes (b"" when empty)."""
    base_offset: int
    path: str
    size: int
    data: object
    dev: int
    ino: int

    @property
    def file(self) -> SegmentFile:
        return SegmentFile(self.base_offset, self.path, self.size)

    @property
    def identity(self) -> tuple[int, int]:
        """(device, inode): which file this is, whatever its name becomes."""
        return self.dev, self.ino

    def next_offset(self) -> int:
        """Kafka's readNextOffset of the pinned bytes: the last complete batch's next offset."""
        if not self.size:
            return self.base_offset
        from ..record import kernels              # numba: only for a swap file or the log end
        from ..record.batch import as_u8
        nxt, _ = kernels.last_batch_end(as_u8(self.data), 0, self.size)
        return self.base_offset if nxt < 0 else int(nxt)

    def release_pages(self) -> None:
        """Let the kernel drop this process's page mappings (they fault in again from the page
        cache if read again): a pass over a large partition keeps no more resident than a segment."""
        if isinstance(self.data, mmap.mmap):
            try:
                self.data.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass


def sibling_path(segment_path: str, suffix: str) -> str:
    """The index file beside a segment (``.log`` or ``.log.swap``) with the same marker suffix."""
    name = os.path.basename(segment_path)
    base, _, extra = name.partition(files.LOG_SUFFIX)
    return os.path.join(os.path.dirname(segment_path), base + suffix + extra)


def without_in_flight(raw: bytes, entry_size: int, offset_at: int, last_offset: int, *,
                      relative_to: int | None = None) -> bytes:
    """An index file's bytes without the trailing entries past ``last_offset``, the last offset of
    the pinned bytes of its segment: a writer appends an index entry just after the batch it names,
    so when the index is read after the ``.log`` was pinned such entries belong to a later state of
    the log. The entry's offset is the big-endian int64 at ``offset_at`` (or the int32 relative to
    the segment's base ``relative_to``). Only a trailing run is cut: an entry past the pinned end
    followed by one within it is not the writer's work in flight and stays for a check to report.
    """
    n = len(raw) // entry_size
    while n:
        pos = (n - 1) * entry_size + offset_at
        if relative_to is None:
            offset = int.from_bytes(raw[pos:pos + 8], "big", signed=True)
        else:
            offset = relative_to + int.from_bytes(raw[pos:pos + 4], "big", signed=True)
        if offset <= last_offset:
            break
        n -= 1
    return raw if n * entry_size == len(raw) else raw[:n * entry_size]


class PinnedSegments:
    """The live segments of one partition directory at one moment, mapped (``pin_live_segments``)."""

    def __init__(self, dir_path: str, segments: list[PinnedSegment]):
        self.dir = dir_path
        self.segments = segments

    def __len__(self) -> int:
        return len(self.segments)

    def files(self) -> list[SegmentFile]:
        return [s.file for s in self.segments]

    def in_place(self, seg: PinnedSegment) -> bool:
        """Is the pinned file still live under its name?"""
        try:
            st = os.stat(seg.path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == seg.identity

    def location(self, i: int, suffix: str) -> str:
        """The name of the i-th segment's index file ``suffix`` (for messages)."""
        return sibling_path(self.segments[i].path, suffix)

    def sidecar(self, i: int, suffix: str) -> bytes | None:
        """The bytes of the i-th segment's index file ``suffix`` (None when it has none), read now;
        LogChangedError when the segment was replaced since the pin (its name may then hold another
        segment's index)."""
        seg = self.segments[i]
        path = sibling_path(seg.path, suffix)
        try:
            with open_regular(path) as f:
                raw = f.read()
        except FileNotFoundError:
            raw = None
        if not self.in_place(seg):
            raise changed(self.dir, f"{os.path.basename(seg.path)} was replaced before its "
                                    f"{suffix} could be read")
        if raw is None and (os.path.exists(path + files.SWAP_SUFFIX) or os.path.exists(path)) and self._writer():
            # a swap's last step renames the new segment's .log into place before its indexes:
            # this one is still on its way, or arrived between the open above and now (after a
            # crash, the loader deletes such a leftover instead)
            raise changed(self.dir, f"the {suffix} of {os.path.basename(seg.path)} was still being renamed "
                                    f"into place by a swap")
        return raw

    def _writer(self) -> bool:
        """Whether a writer holds the data dir (the partition directory's parent) now."""
        return describe_holder(os.path.dirname(os.path.abspath(self.dir))) is not None

    def close(self) -> None:
        for seg in self.segments:
            close_map(seg.data)
            seg.data = b""


def changed(dir_path: str, what: str) -> LogChangedError:
    error = LogChangedError(f"{dir_path}: the log changed under the read ({what}): a writer (a broker's "
                            f"cleaner or retention) replaced or deleted segments, and the read stopped "
                            f"rather than return records of two states of the log: retry the read")
    error.what = what           # what changed, for a caller that retries and then says why it stopped
    return error


def _log_names(dir_path: str) -> frozenset[str]:
    """Every name of a segment ``.log`` in any state (``.log``, ``.log.swap``, ``.log.cleaned``,
    ``.log.deleted``): what decides the live segments. Regular files only (a symlink to one
    counts), as Kafka's loader lists them (File.isFile) and as ``loader._files`` does: a FIFO of
    such a name would hang the open, a directory fail the map, a dangling symlink look like a
    segment deleted by a writer on every retry."""
    out = set()
    with os.scandir(dir_path) as it:
        for e in it:
            if files.LOG_SUFFIX not in e.name:
                continue
            try:
                if e.is_file():
                    out.add(e.name)
            except OSError:         # gone since the listing (or unreadable): not a segment now
                continue
    return frozenset(out)


def _swap_in_progress(names: frozenset[str]) -> bool:
    return any(n.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX) for n in names)


def _map(path: str, base_offset: int) -> PinnedSegment:
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        from . import object_body
        body = object_body.body_of(fd, path) if st.st_size and object_body.active() else None
        if body is not None:        # a segment whose bytes are a bucket's object (clean over a bucket)
            data = body.whole(st.st_size)
        else:
            data = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ) if st.st_size else b""
    finally:
        os.close(fd)
    return PinnedSegment(base_offset, path, st.st_size, data, st.st_dev, st.st_ino)


def _only_rolled(before: frozenset[str], after: frozenset[str], last_base: int | None) -> bool:
    """The listings differ at most by new segments above ``last_base`` (the writer rolled)."""
    if before - after:
        return False
    for name in after - before:
        off = offset_or_none(name)
        if not files.is_segment_log(name) or off is None or last_base is None or off <= last_base:
            return False
    return True


def _try_pin(dir_path: str, names: frozenset[str]) -> tuple[list[PinnedSegment] | None, str]:
    """One attempt: (the pinned segments, "") or (None, why the directory did not hold still)."""
    mapped: dict[str, PinnedSegment] = {}
    keep: list[PinnedSegment] = []
    try:
        def swap_next_offset(name: str, base: int) -> int:
            seg = mapped[name] = _map(os.path.join(dir_path, name), base)
            return seg.next_offset()

        live = live_names(sorted(names), swap_next_offset)
        for base in sorted(live):       # ascending: the active segment, the one still growing, last
            name = live[base]
            seg = mapped.pop(name, None) or _map(os.path.join(dir_path, name), base)
            keep.append(seg)
        after = _log_names(dir_path)
        if not _only_rolled(names, after, keep[-1].base_offset if keep else None):
            return None, "segments were renamed, added or deleted while they were being opened"
        view = PinnedSegments(dir_path, keep)
        moved = next((s for s in keep if not view.in_place(s)), None)
        if moved is not None:
            return None, f"{os.path.basename(moved.path)} was replaced while it was being opened"
        result, keep = keep, []
        return result, ""
    except FileNotFoundError as e:
        return None, f"{os.path.basename(e.filename or '?')} was renamed or deleted while it was being opened"
    finally:
        for seg in list(mapped.values()) + keep:
            close_map(seg.data)


def pin_live_segments(dir_path: str, *, timeout_s: float = PIN_TIMEOUT_S) -> PinnedSegments:
    """The partition's live segments at one moment, mapped; LogChangedError when the directory does
    not hold still long enough within ``timeout_s``."""
    started = time.monotonic()
    writer = None            # asked once, and only when a swap is seen
    attempt = 0
    why = ""
    while True:
        names = _log_names(dir_path)
        waited = time.monotonic() - started
        if _swap_in_progress(names) and waited < SWAP_WAIT_S:
            if writer is None:
                writer = describe_holder(os.path.dirname(os.path.abspath(dir_path))) is not None
            if writer:
                why = "a swap of cleaned segments was in progress"
                attempt += 1
                time.sleep(min(0.001 * 2 ** min(attempt, 10), 0.02))
                continue
        segments, why = _try_pin(dir_path, names)
        if segments is not None:
            return PinnedSegments(dir_path, segments)
        attempt += 1
        if time.monotonic() - started > timeout_s:
            raise changed(dir_path, f"{why}, again and again for {timeout_s:g} s")
        time.sleep(min(0.001 * 2 ** min(attempt, 10), 0.05))


__all__ = ["PinnedSegment", "PinnedSegments", "pin_live_segments", "sibling_path", "changed",
           "without_in_flight", "PIN_TIMEOUT_S"]
