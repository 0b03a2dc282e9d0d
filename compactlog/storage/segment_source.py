"""Where a partition's segments live: the seam the cleaner, the readers and Spark planning read
and replace segments through, shaped as Kafka's RemoteStorageManager (storage-api).

Kafka's ``RemoteStorageManager`` is the narrow interface every object store implements: copy a
segment with its indexes, fetch a segment by position range, fetch an index, delete a segment;
the log never sees a bucket. A ``SegmentSource`` is that interface widened by what compaction and
read-only readers need of one partition:

* ``list_segments``: the live segments (base offset, log bytes, which of its files exist);
* ``read_segment`` (the whole log of a segment, for the cleaner's scanners), ``read_range`` (by
  position range: a ranged GET) and ``read_index`` (``.index``, ``.timeindex``, ``.txnindex``);
* ``pin``: one consistent state of the partition, held for a read-only reader (``PinnedSegments``);
* ``create_replacement``: a cleaned segment and its indexes, written as new objects that are not
  live yet (staged); ``discard_replacements`` removes staged ones that will not be committed;
* ``commit_swap``: groups of live segments replaced by their staged replacements at once,
  crash-safe: a crash leaves either state, never a mix, and whoever opens the partition next
  finishes or undoes the commit.

Objects are immutable: a replacement is never written over a live segment, only staged under a
name of its own and made live by the commit. For the local directory (``LocalDirSource``) the
commit is Kafka's rename protocol, unchanged on disk (``LocalLog.replaceSegments``: ``.cleaned``
-> ``.swap`` -> live, old -> ``.deleted`` -> gone); an object store has no atomic rename and
commits by a conditional write of the partition's segment metadata instead.

A source is plain data (a frozen dataclass, picklable, no open handle): a cleaning plan and a
Spark read split carry it, and the task reads the segments where they are, in whatever process
it runs. Only the partition directory's own files are reached through a local source; nothing
above this module forms a segment's path.
"""

from __future__ import annotations

import mmap
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterable

from ..errors import CorruptRecordError, StorageError
from . import files
from .fsutil import open_regular

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
INDEX_SUFFIXES = (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)


@dataclass(frozen=True)
class SegmentEntry:
    """A live segment as a listing names it: Kafka's RemoteLogSegmentMetadata, reduced to what a
    reader needs (``identity``: which immutable object or file holds it, opaque)."""
    base_offset: int
    size: int
    files: frozenset            # the suffixes present (".log", ".index", ".timeindex", ".txnindex")
    identity: tuple | None = None


class ReplacementWriter(ABC):
    """A cleaned segment being written (not live until its source commits it): the log bytes in
    order (``append``), then the indexes and durability (``finish``); ``abort`` removes it all."""

    @abstractmethod
    def append(self, data: bytes) -> None:
        """``data`` may be a view of a buffer the caller reuses once this returns (the cleaner's
        output buffer, fast_path.ScanScratch): written or copied before returning."""

    @abstractmethod
    def finish(self, indexes: Iterable[tuple[str, bytes]], mtime_ms: int | None = None) -> None:
        """The log made durable, then each (suffix, bytes) index written in the order given."""

    @abstractmethod
    def abort(self) -> None: ...


class SegmentSource(ABC):
    """One partition's segments, wherever they are (see the module docstring)."""

    # -- names (for messages; never opened by a caller)
    @abstractmethod
    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        """The partition's place (no base offset) or one segment file's, as errors name it."""

    def __str__(self) -> str:
        return self.location()

    @abstractmethod
    def exists(self) -> bool: ...

    # -- listing and reading
    @abstractmethod
    def list_segments(self) -> list[SegmentEntry]:
        """The live segments in offset order, as Kafka's loader would keep them."""

    @abstractmethod
    def read_segment(self, base_offset: int, size: int):
        """The first ``size`` bytes of the segment's log, as one read-only buffer (``b""`` when
        empty); CorruptRecordError when it holds fewer."""

    @abstractmethod
    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        """Bytes [start, end) of one of the segment's files (fewer at its end)."""

    @abstractmethod
    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        """The bytes of one of the segment's indexes, None when it has none."""

    @abstractmethod
    def pin(self):
        """The live segments at one moment, held for a read (a ``PinnedSegments``-like view:
        ``segments``, ``files()``, ``sidecar(i, suffix)``, ``location(i, suffix)``, ``close()``)."""

    # -- the partition's own metadata a read-only reader consults
    def log_start_checkpoint(self) -> int | None:
        """The checkpointed log start offset, None when there is none."""
        return None

    def clean_shutdown(self) -> bool:
        """Whether the writer of these segments shut down cleanly (no torn tail to expect)."""
        return True

    def producer_snapshot_offsets(self) -> list[int]:
        """Offsets of the producer-state snapshots kept with the segments."""
        return []

    def producer_snapshot(self, offset: int) -> bytes:
        raise FileNotFoundError(self.location(offset, files.SNAPSHOT_SUFFIX))

    # -- replacing segments
    @abstractmethod
    def create_replacement(self, base_offset: int, members=None) -> ReplacementWriter:
        """A staged (not live) segment of this base offset, for a cleaned group of segments
        (``members``: the base offsets of the group's segments, which an object store needs to
        describe the replacement)."""

    @abstractmethod
    def discard_replacements(self) -> None:
        """Remove every staged replacement (a failed or abandoned clean)."""

    @abstractmethod
    def commit_swap(self, groups: list[list[int]], log=None, staged=None) -> None:
        """Replace the live segments of each group (their base offsets) with the staged
        replacement of the group's first base offset, crash-safe. ``log``: the writer that holds
        the segments open (its segment map follows the commit), when there is one; ``staged``:
        what the tasks' replacements described (``ReplacementWriter.descriptor``: new object ids),
        for sources whose staged objects cannot be found by name."""


class HeldSegment:
    """One segment of an ``ObjectPin``: its bytes fetched on first use (``data``)."""

    def __init__(self, source: SegmentSource, entry: SegmentEntry):
        self.source = source
        self.base_offset = entry.base_offset
        self.size = entry.size
        self.path = source.location(entry.base_offset)
        self.identity = entry.identity
        self._data = None

    @property
    def data(self):
        if self._data is None:
            self._data = self.source.read_segment(self.base_offset, self.size)
        return self._data

    @data.setter
    def data(self, value) -> None:
        self._data = value

    @property
    def file(self):
        from .layout import SegmentFile
        return SegmentFile(self.base_offset, self.path, self.size)

    def next_offset(self) -> int:
        """Kafka's readNextOffset of the held bytes: the last complete batch's next offset."""
        if not self.size:
            return self.base_offset
        from ..record import kernels
        from ..record.batch import as_u8
        nxt, _ = kernels.last_batch_end(as_u8(self.data), 0, self.size)
        return self.base_offset if nxt < 0 else int(nxt)

    def release_pages(self) -> None:
        self._data = None       # fetched again if read again: a pass holds one segment at a time


class ObjectPin:
    """The pin of a source whose segments are immutable objects (an object store): the listing
    is the state, and every object it names keeps its bytes, so nothing has to be held open; the
    ``PinnedSegments`` interface the readers use (``segments``, ``files``, ``sidecar``,
    ``location``, ``close``)."""

    def __init__(self, source: SegmentSource, entries: list[SegmentEntry]):
        self.source = source
        self.dir = source.location()
        self.segments = [HeldSegment(source, e) for e in entries]

    def __len__(self) -> int:
        return len(self.segments)

    def files(self) -> list:
        return [s.file for s in self.segments]

    def location(self, i: int, suffix: str) -> str:
        return self.source.location(self.segments[i].base_offset, suffix)

    def sidecar(self, i: int, suffix: str) -> bytes | None:
        return self.source.read_index(self.segments[i].base_offset, suffix)

    def close(self) -> None:
        for seg in self.segments:
            seg.release_pages()


def as_source(where) -> SegmentSource:
    """A source for ``where``: a source already, or a partition directory's path."""
    if isinstance(where, SegmentSource):
        return where
    return LocalDirSource(os.path.abspath(os.fspath(where)))


# --- the local directory ------------------------------------------------------------------------

def local_partitions(root: str) -> list[tuple[str, int, "LocalDirSource"]]:
    """(topic, partition, source) of every live partition directory directly under ``root``, in
    name order ([] when ``root`` is no directory): the local data dir's listing of its partitions,
    as an object store lists the prefixes of a bucket."""
    try:
        names = sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        full = os.path.join(root, name)
        if files.is_partition_dir(name) and os.path.isdir(full):
            topic, partition = files.parse_partition_dir(name)
            out.append((topic, partition, LocalDirSource(full)))
    return out


class LocalReplacement(ReplacementWriter):
    """A cleaned segment as ``<base>.log.cleaned`` and its ``.cleaned`` indexes beside the live
    segments (Kafka's LogCleaner writes them so; ``LocalLog.replaceSegments`` swaps them in)."""

    def __init__(self, dir_path: str, base_offset: int):
        self.paths = {s: files.segment_file(dir_path, base_offset, s, files.CLEANED_SUFFIX)
                      for s in files.SEGMENT_SUFFIXES}
        for p in self.paths.values():
            if os.path.exists(p):
                os.remove(p)
        self._log = open(self.paths[files.LOG_SUFFIX], "wb")

    def append(self, data: bytes) -> None:
        self._log.write(data)

    def finish(self, indexes, mtime_ms: int | None = None) -> None:
        self._log.flush()
        os.fsync(self._log.fileno())
        self._log.close()
        for suffix, data in indexes:
            with open(self.paths[suffix], "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        if mtime_ms is not None:
            ns = mtime_ms * 1_000_000
            os.utime(self.paths[files.LOG_SUFFIX], ns=(ns, ns))

    def abort(self) -> None:
        try:
            self._log.close()
        except Exception:
            pass
        for p in self.paths.values():
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


@dataclass(frozen=True)
class LocalDirSource(SegmentSource):
    """A partition directory ``<topic>-<partition>`` on a local disk: Kafka's own layout."""
    dir: str

    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        if base_offset is None:
            return self.dir
        return files.segment_file(self.dir, base_offset, suffix)

    def __str__(self) -> str:
        return self.dir

    def exists(self) -> bool:
        return os.path.isdir(self.dir)

    def list_segments(self) -> list[SegmentEntry]:
        from .layout import stable_live_segments
        names = set(os.listdir(self.dir))
        out = []
        for seg in stable_live_segments(self.dir):
            log_name = os.path.basename(seg.path)
            # a live ".log.swap" has its indexes under the same marker (".index.swap")
            present = frozenset(s for s in files.SEGMENT_SUFFIXES
                                if log_name.replace(files.LOG_SUFFIX, s, 1) in names)
            try:
                st = os.stat(seg.path)
                identity = (st.st_dev, st.st_ino)
            except FileNotFoundError:
                identity = None
            out.append(SegmentEntry(seg.base_offset, seg.size, present | {files.LOG_SUFFIX}, identity))
        return out

    def read_segment(self, base_offset: int, size: int):
        if size == 0:
            return b""
        path = self.location(base_offset)
        with open(path, "rb") as f:
            actual = os.fstat(f.fileno()).st_size
            if actual < size:
                raise CorruptRecordError(f"segment shrank from {size} to {actual} bytes "
                                         f"while being cleaned", file=path)
            from . import object_body
            body = object_body.body_of(f.fileno(), path) if object_body.active() else None
            if body is not None:        # its bytes are a bucket's object (clean over a bucket)
                return body.whole(size)
            # pre-fault the whole mapping: one kernel pass instead of a fault per page
            return mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)

    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        if end <= start:
            return b""
        fd = os.open(self.location(base_offset, suffix), os.O_RDONLY)
        try:
            from . import object_body
            body = object_body.body_of(fd) if object_body.active() else None
            if body is not None:
                return body.read(start, end - start, os.fstat(fd).st_size)
            return os.pread(fd, end - start, start)
        finally:
            os.close(fd)

    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        try:
            with open(self.location(base_offset, suffix), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def pin(self):
        from .pinned import pin_live_segments
        return pin_live_segments(self.dir)

    def log_start_checkpoint(self) -> int | None:
        from .checkpoint import OffsetCheckpointFile
        try:
            topic, partition = files.parse_partition_dir(self.dir)
        except ValueError:
            return None
        path = os.path.join(os.path.dirname(self.dir), files.LOG_START_OFFSET_CHECKPOINT)
        if not os.path.exists(path):
            return None
        try:
            return OffsetCheckpointFile(path).read().get((topic, partition))
        except (StorageError, OSError, UnicodeDecodeError):
            return None

    def clean_shutdown(self) -> bool:
        return os.path.exists(os.path.join(os.path.dirname(self.dir), files.CLEAN_SHUTDOWN_FILE))

    def producer_snapshot_offsets(self) -> list[int]:
        n = len(files.SNAPSHOT_SUFFIX)
        return sorted(int(name[:-n]) for name in os.listdir(self.dir)
                      if name.endswith(files.SNAPSHOT_SUFFIX) and name[:-n].isdecimal())

    def producer_snapshot(self, offset: int) -> bytes:
        with open_regular(self.location(offset, files.SNAPSHOT_SUFFIX)) as f:
            return f.read()

    def create_replacement(self, base_offset: int, members=None) -> LocalReplacement:
        return LocalReplacement(self.dir, base_offset)

    def discard_replacements(self) -> None:
        for name in os.listdir(self.dir):
            if name.endswith(files.CLEANED_SUFFIX):
                os.remove(os.path.join(self.dir, name))

    def commit_swap(self, groups: list[list[int]], log=None, staged=None) -> None:
        """The staged ``.cleaned`` segments opened as segments of ``log`` and swapped in by its
        ``replace_segments`` (the renames of ``local_log.replace_segments``, which the loader
        finishes or rolls back after a crash between any two of them)."""
        if log is None:
            raise StorageError(f"{self.dir}: a local swap needs the log that holds the segments")
        from .segment import LogSegment
        by_base = {s.base_offset: s for s in log.segments}
        new_segments, old_segments = [], []
        for group in groups:
            new_segments.append(LogSegment(log.dir, group[0], log.config, now_ms=log.clock(),
                                           suffix=files.CLEANED_SUFFIX))
            old_segments.extend(by_base[b] for b in group)
        if new_segments:
            log.replace_segments(new_segments, old_segments)


__all__ = ["SegmentSource", "SegmentEntry", "ReplacementWriter", "LocalDirSource", "LocalReplacement",
           "ObjectPin", "as_source", "local_partitions", "INDEX_SUFFIXES"]
