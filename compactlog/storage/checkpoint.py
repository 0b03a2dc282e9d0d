"""Kafka's text checkpoint files: offset checkpoints, leader epochs, partition.metadata.

Kafka's CheckpointFile / LeaderEpochCheckpointFile / PartitionMetadataFile formats. Every problem
reading one (a malformed line, a byte that is not UTF-8, a file that cannot be read) is a
StorageError naming the file and line, never a decoding exception.
"""

from __future__ import annotations

import base64
import os
import threading
import uuid
from typing import Callable, Iterable

from ..errors import StorageError
from .fsutil import atomic_write, read_text


def read_checkpoint(path: str, version: int, parse_entry: Callable[[list[str]], object]) -> list:
    """Entries of a ``version / count / entry...`` file; [] when the file is missing or empty."""
    try:
        lines = read_text(path).split("\n")
    except FileNotFoundError:
        return []
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    try:
        found = int(lines[0].strip())
    except ValueError:
        raise StorageError(f"{path}: line 1: version {lines[0]!r} is not a number") from None
    if found != version:
        raise StorageError(f"{path}: line 1: unrecognised version {found}, expected {version}")
    if len(lines) < 2:
        return []
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise StorageError(f"{path}: line 2: entry count {lines[1]!r} is not a number") from None
    entries = []
    for i, line in enumerate(lines[2:], start=3):
        tokens = line.split()
        try:
            entries.append(parse_entry(tokens))
        except (ValueError, IndexError):
            raise StorageError(f"{path}: line {i}: malformed entry {line!r}") from None
    if len(entries) != count:
        raise StorageError(f"{path}: line 2: expected {count} entries but found {len(entries)}")
    return entries


def write_checkpoint(path: str, version: int, entries: Iterable[str], *, sync: bool = True,
                     sync_dir: bool = True) -> None:
    entries = list(entries)
    text = f"{version}\n{len(entries)}\n" + "".join(e + "\n" for e in entries)
    atomic_write(path, text.encode("utf-8"), sync=sync, sync_dir=sync_dir)


def _offset_entry(tokens: list[str]) -> tuple[tuple[str, int], int]:
    if len(tokens) != 3:
        raise ValueError("need 3 tokens")
    return (tokens[0], int(tokens[1])), int(tokens[2])


class OffsetCheckpointFile:
    """A data-dir file of ``topic partition offset`` lines (recovery point, log start, cleaner).

    ``update`` reads, changes and writes it under ``lock``, so that threads of one process (the
    broker's cleaner threads, a topic deletion) never lose each other's changes; a caller doing
    its own read-modify-write holds ``lock`` around it."""

    VERSION = 0

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.RLock()
        self._cached: tuple[tuple, dict] | None = None

    def read(self) -> dict[tuple[str, int], int]:
        return dict(read_checkpoint(self.path, self.VERSION, _offset_entry))

    def read_cached(self) -> dict[tuple[str, int], int]:
        """``read()``, parsed again only when the file's inode, size or mtime changed (opening
        10,000 logs reads a 10,000-line file once, not once per log). Shared: never changed by
        a caller."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cached
        if cached is not None and cached[0] == sig:
            return cached[1]
        offsets = self.read()
        self._cached = (sig, offsets)
        return offsets

    def write(self, offsets: dict[tuple[str, int], int], *, sync: bool = True) -> None:
        lines = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        with self.lock:
            write_checkpoint(self.path, self.VERSION, lines, sync=sync)

    def update(self, changes: dict[tuple[str, int], int], remove: Iterable[tuple[str, int]] = ()) -> None:
        with self.lock:
            offsets = self.read()
            offsets.update(changes)
            for tp in remove:
                offsets.pop(tp, None)
            self.write(offsets)


def _epoch_entry(tokens: list[str]) -> tuple[int, int]:
    if len(tokens) != 2:
        raise ValueError("need 2 tokens")
    return int(tokens[0]), int(tokens[1])


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: the first offset written under each leader epoch."""

    VERSION = 0

    def __init__(self, path: str):
        self.path = path

    def read(self) -> list[tuple[int, int]]:
        return read_checkpoint(self.path, self.VERSION, _epoch_entry)

    def write(self, entries: list[tuple[int, int]], *, sync: bool = True, sync_dir: bool = True) -> None:
        write_checkpoint(self.path, self.VERSION, [f"{e} {o}" for e, o in entries], sync=sync,
                         sync_dir=sync_dir)


class LeaderEpochCache:
    """Epoch -> start offset, kept from the partition leader epochs of appended batches."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile):
        self.checkpoint = checkpoint
        # An unreadable file starts the cache empty: the epochs are rebuilt from the batches as they
        # are recovered or appended, and the next flush rewrites the file. The error is kept so that
        # the log can report it (Kafka would take the whole log dir offline instead).
        self.load_error: StorageError | None = None
        try:
            self.entries: list[tuple[int, int]] = checkpoint.read()
        except StorageError as e:
            self.entries = []
            self.load_error = e

    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record a new epoch; True when the cache changed."""
        if epoch < 0:
            return False
        if self.entries and epoch <= self.entries[-1][0]:
            return False
        self.entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        if not self.entries:
            return
        kept = [(e, o) for e, o in self.entries if o > start_offset]
        earlier = [(e, o) for e, o in self.entries if o <= start_offset]
        if earlier:
            kept.insert(0, (earlier[-1][0], start_offset))
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def flush(self) -> None:
        self.checkpoint.write(self.entries)


class PartitionMetadataFile:
    """``partition.metadata``: the topic id, as URL-safe base64 without padding."""

    def __init__(self, path: str):
        self.path = path

    def read(self) -> str | None:
        try:
            lines = read_text(self.path).splitlines()
        except FileNotFoundError:
            return None
        fields = {}
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise StorageError(f"{self.path}: line {i}: expected 'name: value', found {line!r}")
            fields[key.strip()] = value.strip()
        if fields.get("version") != "0":
            raise StorageError(f"{self.path}: unsupported version {fields.get('version')!r}")
        topic_id = fields.get("topic_id")
        if not topic_id or decode_topic_id(topic_id) == b"\x00" * 16:
            raise StorageError(f"{self.path}: invalid topic_id {topic_id!r}")
        return topic_id

    def write(self, topic_id: str) -> None:
        atomic_write(self.path, f"version: 0\ntopic_id: {topic_id}\n".encode("utf-8"))


def new_topic_id() -> str:
    raw = uuid.uuid4().bytes
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def exists(path: str) -> bool:
    return os.path.exists(path)
