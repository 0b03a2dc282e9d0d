"""A data directory: topics, their partitions (``<topic>-<partition>/``) and the checkpoint files.

Kafka keeps topic metadata outside the log dirs (in KRaft's metadata log). compactlog keeps it in
one file at the data dir's root, ``compactlog.topics.json`` (a file, so Kafka's loader, which only
looks at directories, ignores it). A directory Kafka wrote opens as is: every ``<topic>-<N>/`` is a
partition of ``<topic>``, with Kafka's default configs until configured here. A topic is created
as Kafka's controller does it, its record first (the topics file, synced), then its directories:
a crash in between leaves a topic whose count is known, each missing partition made on its first
use (the broker completes its internal topics at start: ``complete_topic``), never one that
passes for a smaller topic. A topic is deleted the other way round, as KRaft's RemoveTopicRecord
comes before the LogManager renames the logs to ``-delete``: its entry moves to the file's
``deleting`` object first, then its directories are renamed, then the entry goes. Readers leave a
topic being deleted out of everything; the next writer finishes the deletion when it opens the dir.

A data dir is opened by one writer at a time (``writable=True``: Kafka's LogManager, which holds
``.lock`` for its whole life) or by any number of readers (the default), which never change a file:
their logs are opened read-only, recovery happens in memory, the clean-shutdown marker is left
alone. A writer removes the marker when it opens its first log, as Kafka does at startup, and
writes it back at close only when the directory is then really in a clean state: it was clean when
the writer came, or the writer opened (and so recovered) every partition. Otherwise a partition
left torn by an earlier crash, and never opened here, would pass for clean at the next open.

Topic metadata is cached (Kafka's LogManager knows its logs without listing its dirs): the topics
file while its inode, size and mtime stay the same, and which ``<topic>-<N>/`` directories exist.
A writer lists the directory once and then keeps that map current itself (``create_topic``,
``add_partitions``, ``delete_topic``, a partition created by ``open_log``): no other process
changes a locked data dir. A reader lists it again at each question (one listing per call), so it
sees what a live writer beside it created or deleted.

Changes that move a log's start or remove its segments (retention, DeleteRecords, truncation,
topic deletion) first pause the log cleaner on that partition, waiting for a clean in progress to
stop, as Kafka's LogManager calls its LogCleaner (``abortAndPauseCleaning`` / ``resumeCleaning``).
The cleaner registers itself with ``use_cleaner``; without one nothing is cleaning here.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import uuid
import time
from contextlib import contextmanager, nullcontext
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from ..errors import ReadOnlyError, StorageError, TopicError
from . import files
from .checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile, PartitionMetadataFile, new_topic_id
from .config import BrokerConfig, LogConfig, read_properties
from .config_registry import gather_all
from .fsutil import atomic_write, fsync_dir, open_regular
from .lock import DataDirLock

if TYPE_CHECKING:
    from .log import Log


def system_clock() -> int:
    return int(time.time() * 1000)

TOPICS_FILE = "compactlog.topics.json"
# the topics file's record of the deletions begun and not yet finished: topic -> its entry as it was.
# A topic moves there from "topics" in one atomic write, the deletion's commit point (KRaft's
# RemoveTopicRecord): from then on no reader lists or opens it, and the next writer finishes it
DELETING = "deleting"

# Kafka's internal topics: their configs are fixed by the broker (GroupCoordinator, TransactionLog),
# so a copied Kafka dir's internal topics are known even without an entry here
INTERNAL_TOPIC_CONFIGS = {
    "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer",
                           "segment.bytes": "104857600"},
    "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed",
                            "segment.bytes": "104857600"},
}
SERVER_PROPERTIES = "server.properties"
CREATION_HOLD_ENV = "COMPACTLOG_TEST_TOPIC_CREATION_HOLD_FILE"
CREATION_HOLD_MAX_S = 30.0


def load_broker_config(data_dir: str, overrides: dict[str, str] | None = None) -> BrokerConfig:
    """server.properties and ``overrides`` (the static settings, validated), under the dynamic
    configs the broker's config APIs keep in the data dir (storage/dynamic_config.py). Every
    owner's settings are registered first: the config is read whole, whoever opens the data dir."""
    gather_all()
    props = read_properties(os.path.join(data_dir, SERVER_PROPERTIES))
    props.update(overrides or {})
    BrokerConfig(props).validate()
    from .dynamic_config import load_dynamic_layers
    broker, dropped = load_dynamic_layers(props, data_dir)
    broker.dropped_dynamic = dropped
    return broker


def _creation_hold(made: int) -> None:
    """Test hook: with ``COMPACTLOG_TEST_TOPIC_CREATION_HOLD_FILE=path``, a topic creation that has
    made as many partition directories as that file says waits (at most 30 s) while the file
    exists, so that a test can kill -9 the process in the middle of it."""
    path = os.environ.get(CREATION_HOLD_ENV)
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as f:
            if int(f.read().strip()) != made:
                return
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + CREATION_HOLD_MAX_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def _delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's UnifiedLog.logDeleteDirName: ``<topic>-<p>.<uuid hex>-delete``, the topic cut short so
    that the name fits in 255 characters."""
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[:255 - len(suffix)] + suffix


def _unmark(meta: dict, topics) -> None:
    """The topics file's deletion marks of ``topics`` dropped (``meta`` edited)."""
    deleting = meta.get(DELETING, {})
    for topic in topics:
        deleting.pop(topic, None)
    if not deleting:
        meta.pop(DELETING, None)


def _readable(checkpoint: OffsetCheckpointFile, *, cached: bool = False) -> dict:
    """The checkpoint's entries, or none when it is unreadable: as Kafka's LogManager, an unreadable
    recovery-point file means "recover everything" and an unreadable log-start file "use the first
    segment" (the file is rewritten at the next checkpoint). ``cached``: the shared parse, read
    only (``OffsetCheckpointFile.read_cached``)."""
    try:
        return checkpoint.read_cached() if cached else checkpoint.read()
    except StorageError:
        return {}


# Per-partition file work done at once, so many partitions' fsyncs wait together: closing the
# logs (Kafka's LogManager.shutdown closes each data dir's logs on a pool of
# num.recovery.threads.per.data.dir threads) and creating partitions. fsync waits without the GIL
# and the filesystem commits concurrent fsyncs together: 10,000 logs' fsyncs took 19 s one at a
# time on a loaded 2-core machine, 2.4 s on 16 threads (64 threads: no faster).
FSYNC_THREADS = 16

# The leader epoch of every partition: one node leads them all, from their creation on.
LEADER_EPOCH = 0


def _run_all(jobs: list[Callable[[], object]], name: str, threads: int | None = None) -> list[BaseException | None]:
    """Run every job, on up to ``threads`` (FSYNC_THREADS) threads each taking every n-th job (one:
    in order, in this thread); per job, the OSError or StorageError it raised, or None. Any other
    exception is raised once all are done."""
    threads = max(1, min(FSYNC_THREADS if threads is None else threads, len(jobs)))
    errors: list[BaseException | None] = [None] * len(jobs)

    def run(first: int) -> None:
        for i in range(first, len(jobs), threads):
            try:
                jobs[i]()
            except BaseException as e:      # noqa: BLE001 - sorted out below
                errors[i] = e

    if threads <= 1:
        run(0)
    else:
        workers = [threading.Thread(target=run, args=(k,), name=f"{name}-{k}", daemon=True)
                   for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    for e in errors:
        if e is not None and not isinstance(e, (OSError, StorageError)):
            raise e
    return errors


def _new_partition_files(pdir: str, topic_id: str | None, leader_epoch: bool) -> None:
    """A new partition directory's files, before its log is first opened: ``partition.metadata``
    (the topic id) and, when ``leader_epoch``, the ``leader-epoch-checkpoint`` of the partition's
    leader epoch from offset 0, as Kafka writes them when it creates a partition's log and becomes
    its leader (``Partition.makeLeader``): its first append then writes no checkpoint. Each file
    fsynced, then the directory once for both (partition.metadata's atomic write does it)."""
    if leader_epoch:
        LeaderEpochCheckpointFile(os.path.join(pdir, files.LEADER_EPOCH_CHECKPOINT)).write(
            [(LEADER_EPOCH, 0)], sync_dir=False)
    if topic_id is not None:
        PartitionMetadataFile(os.path.join(pdir, files.PARTITION_METADATA)).write(topic_id)
    else:
        fsync_dir(pdir)


def _flush_if_open(log: Log) -> None:
    if log.closed or log.offline is not None or log.deleted:
        return
    try:
        log.flush()
    except TopicError:
        pass            # its topic was deleted meanwhile: nothing left to flush


def _raise_first(errors: list[BaseException | None]) -> None:
    for e in errors:
        if e is not None:
            raise e


class LogCleaning(Protocol):
    """What the data dir asks of the log cleaner working on its logs (Kafka's LogManager calling
    its LogCleaner); ``cleaner.manager.CleanerManager`` is the one implementation."""

    def abort_and_pause_cleaning(self, topic: str, partition: int) -> None:
        """Stop a clean in progress (waiting until it has) and clean nothing here until resumed."""

    def resume_cleaning(self, topic: str, partition: int) -> None:
        """Undo one ``abort_and_pause_cleaning``."""

    def forget_partition(self, topic: str, partition: int) -> None:
        """The partition was deleted: drop what the cleaner keeps about it."""

    def busy_partitions(self, now_ms: int) -> set[tuple[str, int]]:
        """Partitions retention skips this time: being cleaned, or uncleanable and backing off."""


class NoCleaner:
    """No log cleaner in this process (a CLI command, a reader): nothing to stop or pause."""

    def abort_and_pause_cleaning(self, topic: str, partition: int) -> None:
        pass

    def resume_cleaning(self, topic: str, partition: int) -> None:
        pass

    def forget_partition(self, topic: str, partition: int) -> None:
        pass

    def busy_partitions(self, now_ms: int) -> set[tuple[str, int]]:
        return set()


def scan_partition_dirs(path: str) -> dict[str, list[int]]:
    """Topics found as live ``<topic>-<N>`` directories of ``path`` (one listing)."""
    found: dict[str, list[int]] = {}
    with os.scandir(path) as entries:
        for entry in entries:
            try:
                topic, part = files.parse_partition_dir(entry.name)
            except ValueError:
                continue
            if entry.is_dir():
                found.setdefault(topic, []).append(part)
    return {t: sorted(found[t]) for t in sorted(found)}


def deleting_topics(path: str) -> frozenset[str]:
    """The topics whose deletion the topics file of the data dir ``path`` records (``deleting``):
    for readers that list partition directories without a DataDir (the Spark source), which must
    leave them out as DataDir does. Empty when the file is missing or unreadable (DataDir itself
    reports an unreadable file)."""
    try:
        with open_regular(os.path.join(path, TOPICS_FILE), "r", encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError, StorageError):
        return frozenset()
    deleting = meta.get(DELETING) if isinstance(meta, dict) else None
    return frozenset(deleting) if isinstance(deleting, dict) else frozenset()


class DataDir:
    def __init__(self, path: str, *, broker: BrokerConfig | None = None,
                 clock: Callable[[], int] = system_clock, create: bool = False,
                 writable: bool = False, command: str = "compactlog",
                 session_configs: dict[str, str] | None = None):
        self.path = os.path.abspath(path)
        if not os.path.isdir(self.path):
            if os.path.exists(self.path):
                raise StorageError(f"{self.path}: not a directory (--data-dir must name a directory)")
            if not create:
                raise StorageError(f"{self.path}: data directory does not exist")
            if not writable:
                raise ReadOnlyError(f"{self.path}: cannot create a data directory when opened read-only")
            os.makedirs(self.path)
        self.writable = writable
        # the lock comes first: nothing is read that a running writer could be changing
        self.lock = DataDirLock(self.path, command) if writable else None
        try:
            self.broker = broker or load_broker_config(self.path)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        self.clock = clock
        self.logs: dict[tuple[str, int], Log] = {}
        self._logs_guard = threading.RLock()
        self._closed_events: list = []
        self._meta_cache: tuple[tuple, dict] | None = None
        # topic -> its live partition directories; a writer's, kept current by its own changes
        self._dirs_cache: dict[str, list[int]] | None = None
        self._listed: tuple[tuple[int, int, int], dict[str, list[int]]] | None = None   # a reader's
        self._dir_topic_ids: dict[str, str] = {}
        self.cleaner: LogCleaning = NoCleaner()
        # topic configs for this process only (offline compaction of a copied Kafka data dir:
        # ``clean --config``), fixed for the data dir's life; never written to compactlog.topics.json
        self.session_configs = MappingProxyType(dict(session_configs or {}))
        self._had_clean_shutdown: bool | None = None
        self.cleaner_checkpoint = OffsetCheckpointFile(os.path.join(self.path, files.CLEANER_CHECKPOINT))
        self.recovery_checkpoint = OffsetCheckpointFile(os.path.join(self.path, files.RECOVERY_POINT_CHECKPOINT))
        self.log_start_checkpoint = OffsetCheckpointFile(os.path.join(self.path, files.LOG_START_OFFSET_CHECKPOINT))
        if writable:
            try:
                self._finish_deletions()
            except BaseException:
                self.lock.release()
                raise

    def _finish_deletions(self) -> None:
        """Finish the topic deletions a crash interrupted: a topic the topics file records as being
        deleted (``deleting``) loses its live directories (renamed to ``-delete``) and its checkpoint
        entries, then its record; then every ``<topic>-<p>.<id>-delete`` directory is removed, as
        Kafka's LogManager removes logs marked for deletion at startup (and reported)."""
        from .events import DataEvent
        pending = sorted(self._meta().get(DELETING, {}))
        if pending:
            dirs = scan_partition_dirs(self.path)
            moved = False
            for topic in pending:
                for p in dirs.get(topic, []):
                    os.replace(os.path.join(self.path, files.partition_dir_name(topic, p)),
                               os.path.join(self.path, _delete_dir_name(topic, p)))
                    moved = True
            if moved:
                fsync_dir(self.path)
            self._forget_checkpoints(set(pending))
            meta = self._read_meta()
            _unmark(meta, pending)
            self._write_meta(meta)
        for name in sorted(os.listdir(self.path)):
            m = files.deleted_partition_dir(name)
            path = os.path.join(self.path, name)
            if m is None or not os.path.isdir(path):
                continue
            size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
                       if os.path.isfile(os.path.join(path, f)))
            shutil.rmtree(path)
            self._closed_events.append(DataEvent("deleted", m, path, "the rest of a topic deletion that a "
                                                 "crash interrupted", bytes=size))

    # -- topic metadata
    def _require_writer(self, what: str) -> None:
        if not self.writable:
            raise ReadOnlyError(f"{self.path}: opened read-only; {what} needs a writer")

    def _meta(self) -> dict:
        """The topics file, cached while its inode, size and mtime stay the same (a writer's
        without looking: only the writer changes it, through ``_write_meta``); shared, so never
        changed by a caller (``_read_meta`` gives a copy to edit)."""
        cached = self._meta_cache
        if cached is not None and self.writable:
            return cached[1]
        path = os.path.join(self.path, TOPICS_FILE)
        try:
            st = os.stat(path)
            sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            return {"version": 1, "topics": {}}
        cached = self._meta_cache
        if cached is not None and cached[0] == sig:
            return cached[1]
        try:
            with open_regular(path, "r", encoding="utf-8") as f:
                meta = json.load(f)
        except FileNotFoundError:
            return {"version": 1, "topics": {}}
        except UnicodeDecodeError as e:
            raise StorageError(f"{path}: byte {e.start}: not UTF-8 ({e.reason})") from None
        except json.JSONDecodeError as e:
            raise StorageError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("topics"), dict):
            raise StorageError(f"{path}: expected an object with a 'topics' object")
        if not isinstance(meta.get(DELETING, {}), dict):
            raise StorageError(f"{path}: expected '{DELETING}' to be an object")
        for name, entry in meta["topics"].items():
            if not isinstance(entry, dict) or not isinstance(entry.get("configs", {}), dict):
                raise StorageError(f"{path}: topic {name!r}: expected an object with a 'configs' object")
            try:
                int(entry.get("partitions", 0))
            except (TypeError, ValueError):
                raise StorageError(f"{path}: topic {name!r}: partitions {entry.get('partitions')!r} "
                                   f"is not a number") from None
        self._meta_cache = (sig, meta)
        return meta

    def _topics_meta(self) -> dict:
        """topic -> its entry in the topics file (shared: read, never changed)."""
        return self._meta()["topics"]

    def _read_meta(self) -> dict:
        """The topics file, a copy the caller may edit and pass to ``_write_meta``."""
        return json.loads(json.dumps(self._meta()))

    def _write_meta(self, meta: dict) -> None:
        self._require_writer("changing topics")
        try:
            atomic_write(os.path.join(self.path, TOPICS_FILE),
                         (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        finally:
            # a write that failed may have renamed the new file into place before its sync
            # failed: what the file holds is read again
            self._meta_cache = None

    # -- the partition map
    def _partition_dirs(self) -> dict[str, list[int]]:
        """topic -> live partition directories; a writer's cached map (not to be changed by a
        caller), a reader's listed again at each call."""
        if not self.writable:
            return self._live_partition_dirs()
        cached = self._dirs_cache
        if cached is None:
            with self._logs_guard:
                if self._dirs_cache is None:
                    self._dirs_cache = self._live_partition_dirs()
                cached = self._dirs_cache
        return cached

    def _live_partition_dirs(self) -> dict[str, list[int]]:
        """The listing without the topics whose deletion the topics file records: a crash after
        that record and before the renames leaves their live directories, which are no topic's. The
        file is read before the listing: a reader beside a writer deleting a topic then sees its
        directories only when it also saw the file from before the deletion (else a listing from
        before the renames with a file from after the deletion would bring the topic back)."""
        deleting = self._meta().get(DELETING)
        dirs = scan_partition_dirs(self.path) if self.writable else self._reader_listing()
        if not deleting:
            return dirs
        return {t: p for t, p in dirs.items() if t not in deleting}

    # a directory's mtime is set from a clock that ticks every few milliseconds: two changes within
    # one tick leave it as the first set it, so a listing is reused only when the directory has not
    # changed for longer than this (a command on a quiet data dir lists it once, not once a topic)
    _STABLE_NS = 2_000_000_000

    def _reader_listing(self) -> dict[str, list[int]]:
        """A reader's listing of the partition directories, listed again whenever the data dir
        changed since (its inode or mtime): ``topics list`` or ``describe`` of 2,000 topics listed
        the 2,000 directories once per topic (24 s of a profile, 4 million names parsed)."""
        st = os.stat(self.path)
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        known = self._listed
        if known is not None and known[0] == key and time.time_ns() - st.st_mtime_ns > self._STABLE_NS:
            return known[1]
        dirs = scan_partition_dirs(self.path)
        self._listed = (key, dirs)
        return dirs

    def _dirs_added(self, topic: str, partitions) -> None:
        """A writer made these partition directories: the cached map gets them."""
        with self._logs_guard:
            if self._dirs_cache is not None:
                cached = dict(self._dirs_cache)     # replaced, never changed: readers hold the old one
                cached[topic] = sorted(set(cached.get(topic, [])) | set(partitions))
                self._dirs_cache = cached

    def _dirs_removed(self, topic: str) -> None:
        with self._logs_guard:
            self._dir_topic_ids.pop(topic, None)
            if self._dirs_cache is not None:
                self._dirs_cache = {t: p for t, p in self._dirs_cache.items() if t != topic}

    def partition_dirs(self) -> dict[str, list[int]]:
        """Topics found as live ``<topic>-<N>`` directories."""
        return {t: list(p) for t, p in self._partition_dirs().items()}

    def topics(self) -> list[str]:
        return sorted(set(self._topics_meta()) | set(self._partition_dirs()))

    def has_topic(self, topic: str) -> bool:
        return topic in self._topics_meta() or topic in self._partition_dirs()

    def partitions(self, topic: str) -> list[int]:
        return self._partitions(topic, self._topics_meta(), self._partition_dirs())

    def _partitions(self, topic: str, meta: dict, dirs: dict) -> list[int]:
        entry = meta.get(topic)
        on_disk = dirs.get(topic, [])
        if entry is not None:
            return sorted(set(range(int(entry["partitions"]))) | set(on_disk))
        if not on_disk:
            raise TopicError(f"topic {topic!r} does not exist in {self.path}")
        return list(on_disk)

    def partition_map(self) -> dict[str, list[int]]:
        """topic -> its partitions, every topic (one listing for a reader, none for a writer)."""
        meta, dirs = self._topics_meta(), self._partition_dirs()
        return {t: self._partitions(t, meta, dirs) for t in sorted(set(meta) | set(dirs))}

    def topic_overrides(self, topic: str) -> dict[str, str]:
        meta = self._topics_meta().get(topic)
        return dict(meta.get("configs", {})) if meta else {}

    def topic_config(self, topic: str, *, session: bool = True) -> LogConfig:
        """The topic's configs. A topic known only by its directories (a Kafka dir copied here)
        gets Kafka's defaults but ``known = False``: nothing guesses its retention or policy.
        ``session=False``: its own configs, without this run's ``clean --config``."""
        meta = self._topics_meta().get(topic)
        internal = INTERNAL_TOPIC_CONFIGS.get(topic, {})
        overrides = dict(meta.get("configs", {})) if meta else {}
        session_configs = self.session_configs if session else {}
        return LogConfig({**internal, **overrides, **session_configs}, self.broker,
                         known=meta is not None or bool(session_configs) or bool(internal))

    def is_configured(self, topic: str) -> bool:
        return self.topic_config(topic).known

    def create_topic(self, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        self._require_writer("topic creation")
        try:
            files.validate_topic_name(topic)
        except ValueError as e:
            raise TopicError(str(e)) from None
        if partitions < 1:
            raise TopicError(f"topic {topic!r}: partition count must be at least 1, got {partitions}")
        # under the logs' guard: open_log makes a recorded partition's missing directory (what a
        # crash between the record and the directories leaves), and must not take a creation in
        # progress for one. Without it a broker's thread opening __transaction_state-5 while
        # another created the topic made that directory, the creation failed on it (File exists)
        # and its undo removed the directories it had made, under logs already open
        with self._logs_guard:
            if self.has_topic(topic):
                raise TopicError(f"topic {topic!r} already exists in {self.path}")
            if topic in self._meta().get(DELETING, {}):
                # only when this writer's own deletion of it failed half way (its open finishes the
                # others): its old directories may still be live
                raise TopicError(f"topic {topic!r} is being deleted in {self.path}: its deletion "
                                 f"finishes when the data dir is next opened for writing")
            configs = dict(configs or {})
            LogConfig(configs, self.broker).validate_remote()   # validates every name and value
            topic_id = new_topic_id()
            meta = self._read_meta()
            meta["topics"][topic] = {"partitions": partitions, "configs": configs, "topic_id": topic_id}
            # the record of the count first (written and synced), then the directories: a crash
            # between leaves a topic whose count is known, never one that passes for a smaller topic
            # (its directories are made, empty, by the next writer that opens them: open_log). The
            # record's write is undone too when it fails: its rename may have happened before the
            # sync failed
            made: list[str] = []
            try:
                self._write_meta(meta)
                self._make_partition_dirs(topic, range(partitions), topic_id, made)
            except BaseException:
                # a failed creation (disk full) is undone: the record, then the directories made. A
                # record that cannot be taken back keeps them (the topic is completed later instead)
                if self._forget_topic_record(topic):
                    for pdir in made:
                        shutil.rmtree(pdir, ignore_errors=True)
                else:
                    self._dirs_cache = None         # listed again when next asked
                raise
            self._dirs_added(topic, range(partitions))

    def _forget_topic_record(self, topic: str) -> bool:
        try:
            meta = self._read_meta()
            meta["topics"].pop(topic, None)
            self._write_meta(meta)
            return True
        except (OSError, StorageError):
            return False

    def _make_partition_dirs(self, topic: str, partitions, topic_id: str | None, made: list[str]) -> list[int]:
        """Make the directories ``partitions`` of ``topic`` that do not exist, each with the topic's
        id in ``partition.metadata`` (written too where a crash left a directory without one) and
        its leader-epoch-checkpoint (``_new_partition_files``), FSYNC_THREADS partitions at a time,
        then sync the data dir; the partitions made (their paths appended to ``made`` as they
        are)."""
        todo = []
        for p in partitions:
            pdir = os.path.join(self.path, files.partition_dir_name(topic, p))
            if not os.path.isdir(pdir):
                todo.append((p, pdir, True))
            elif topic_id is not None and not os.path.exists(os.path.join(pdir, files.PARTITION_METADATA)):
                todo.append((p, pdir, False))
        numbers = [p for p, _, new in todo if new]

        def make(pdir: str, new: bool, nth: int) -> None:
            if new:
                os.makedirs(pdir)
                made.append(pdir)
            _new_partition_files(pdir, topic_id, new)
            _creation_hold(nth)

        jobs, nth = [], 0
        for _, pdir, new in todo:
            nth += new
            jobs.append(functools.partial(make, pdir, new, nth))
        # the test hook holds a creation after its n-th directory: they are made in order then
        _raise_first(_run_all(jobs, "create-partition", 1 if os.environ.get(CREATION_HOLD_ENV) else None))
        if numbers:
            fsync_dir(self.path)
        return numbers

    def registered_partitions(self, topic: str) -> int | None:
        """The partition count the topics file records for ``topic`` (the count it was created
        with, or grown to); None for a topic known only by its directories."""
        entry = self._topics_meta().get(topic)
        return None if entry is None else int(entry["partitions"])

    def complete_topic(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> list[int]:
        """Make ``topic`` whole with ``partitions`` partitions (a count is never lowered): the
        topics file records the count first (a topic known only by its directories gets
        ``configs`` and the id its directories hold, else a new one), then each missing directory
        below it is made, empty, with the topic's id. The partitions made. It repairs a creation
        a crash interrupted (``coordinator/internal_topics.py``)."""
        self._require_writer("completing a topic")
        with self._logs_guard:
            if not self.has_topic(topic):
                raise TopicError(f"topic {topic!r} does not exist in {self.path}")
            count = max([partitions, *(p + 1 for p in self.partitions(topic))])
            topic_id = self.ensure_topic_id(topic)
            meta = self._read_meta()
            entry = meta["topics"].setdefault(topic, {"configs": dict(configs or {})})
            entry["partitions"] = count
            entry.setdefault("topic_id", topic_id)
            if meta != self._meta():
                self._write_meta(meta)
            made = self._make_partition_dirs(topic, range(count), topic_id, [])
            self._dirs_added(topic, range(count))
            return made

    def reconfigure_broker(self, broker: BrokerConfig) -> None:
        """New broker settings at run time (a dynamic broker config changed): every open log
        without an override of a topic config takes the new default at once, as Kafka's
        DynamicLogConfig.reconfigure updates every log."""
        with self._logs_guard:
            self.broker = broker
            expiration = broker.get("producer.id.expiration.ms")
            for (topic, _), log in self.logs.items():
                log.config = self.topic_config(topic)
                log.producer_state.expiration_ms = expiration

    def alter_topic(self, topic: str, set_configs: dict[str, str] | None = None,
                    delete_configs: list[str] | None = None) -> LogConfig:
        self._require_writer("altering a topic")
        if not self.has_topic(topic):
            raise TopicError(f"topic {topic!r} does not exist in {self.path}")
        # from the stored overrides only: session and internal-topic configs are never written
        stored = LogConfig(self.topic_overrides(topic), self.broker)
        new = stored.with_overrides(dict(set_configs or {}), list(delete_configs or []))
        return self.set_topic_configs(topic, new.overrides)

    def set_topic_configs(self, topic: str, configs: dict[str, str]) -> LogConfig:
        """Make ``configs`` the topic's complete set of overrides (Kafka's AlterConfigs; what
        IncrementalAlterConfigs computes), validated first; open logs use the new configs at once."""
        self._require_writer("altering a topic")
        with self._logs_guard:
            if not self.has_topic(topic):
                raise TopicError(f"topic {topic!r} does not exist in {self.path}")
            configs = dict(configs)
            new = LogConfig({**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **configs, **self.session_configs},
                            self.broker)
            new.validate_remote(was_remote_enabled=bool(self.topic_config(topic).get("remote.storage.enable")))
            meta = self._read_meta()
            entry = meta["topics"].get(topic)
            if entry is None:
                entry = {"partitions": len(self.partitions(topic)), "configs": {}}
                meta["topics"][topic] = entry
            entry["configs"] = configs
            self._write_meta(meta)
            for (t, _), log in self.logs.items():
                if t == topic:
                    log.config = new
            return new

    def topic_id(self, topic: str) -> str | None:
        """The topic's id (base64, as in ``partition.metadata``): from the topics file, else from
        the first partition directory holding one; None when neither has it."""
        entry = self._topics_meta().get(topic)
        if entry and entry.get("topic_id"):
            return entry["topic_id"]
        known = self._dir_topic_ids.get(topic)
        if known is not None:
            return known
        for p in self._partition_dirs().get(topic, []):
            pdir = os.path.join(self.path, files.partition_dir_name(topic, p))
            try:
                found = PartitionMetadataFile(os.path.join(pdir, files.PARTITION_METADATA)).read()
            except StorageError:
                continue
            if found:
                if self.writable:   # kept: Metadata asks for every topic's id at every request
                    self._dir_topic_ids[topic] = found
                return found
        return None

    def topic_ids(self) -> dict[str, str]:
        """topic -> id (base64) for the topics whose id is in the topics file (one read of it)."""
        return {t: e["topic_id"] for t, e in self._topics_meta().items()
                if isinstance(e, dict) and e.get("topic_id")}

    def ensure_topic_id(self, topic: str) -> str:
        """The topic's id (``topic_id``); a topic without one (a Kafka dir from before topic ids)
        gets a new id, written to the ``partition.metadata`` of each of its partition directories
        so that it stays the same across restarts."""
        with self._logs_guard:
            found = self.topic_id(topic)
            if found:
                return found
            self._require_writer("giving a topic an id")
            topic_id = new_topic_id()
            for p in self.partitions(topic):
                pdir = os.path.join(self.path, files.partition_dir_name(topic, p))
                if os.path.isdir(pdir):
                    PartitionMetadataFile(os.path.join(pdir, files.PARTITION_METADATA)).write(topic_id)
            return topic_id

    def add_partitions(self, topic: str, count: int) -> list[int]:
        """Grow ``topic`` to ``count`` partitions (Kafka's CreatePartitions: a topic never shrinks);
        the new partition numbers. Each new directory gets the topic's id in partition.metadata."""
        self._require_writer("adding partitions")
        with self._logs_guard:
            if not self.has_topic(topic):
                raise TopicError(f"topic {topic!r} does not exist in {self.path}")
            # a copied Kafka dir may hold only some partitions: the count is the highest + 1
            current = max(self.partitions(topic), default=-1) + 1
            if count <= current:
                raise TopicError(f"topic {topic!r} has {current} partition(s); {count} would not be "
                                 f"an increase")
            topic_id = self.topic_id(topic)
            added = list(range(current, count))
            meta = self._read_meta()
            entry = meta["topics"].get(topic)
            # as create_topic: the new count recorded first, then the directories, so that a crash
            # between leaves the new count (the directories made by the next writer: open_log),
            # never a topic of a count nobody asked for; a failure undoes both. A topic known only
            # by its directories stays so (its configs are not known here): its directories only
            made: list[str] = []
            try:
                if entry is not None:
                    old_count = entry["partitions"]
                    entry["partitions"] = count
                    self._write_meta(meta)
                self._make_partition_dirs(topic, added, topic_id, made)
            except BaseException:
                if entry is None or self._restore_count(topic, old_count):
                    for pdir in made:
                        shutil.rmtree(pdir, ignore_errors=True)
                self._dirs_cache = None         # listed again when next asked
                raise
            self._dirs_added(topic, added)
            return added

    def _restore_count(self, topic: str, count: int) -> bool:
        try:
            meta = self._read_meta()
            meta["topics"][topic]["partitions"] = count
            self._write_meta(meta)
            return True
        except (OSError, StorageError):
            return False

    # -- changes the log cleaner must not run into
    def use_cleaner(self, cleaner: LogCleaning) -> None:
        """The log cleaner working on this data dir's logs (one per data dir)."""
        self.cleaner = cleaner

    @contextmanager
    def cleaning_paused(self, topic: str, partition: int) -> Iterator[None]:
        """Kafka's abortAndPauseCleaning ... resumeCleaning around a change of the partition's
        segments or log start: a clean in progress is stopped (and waited for) first, so that it
        neither fails on a segment removed under it nor swaps in a result the change made stale.
        Never entered holding the log's lock: the clean being waited for may need it to stop."""
        self.cleaner.abort_and_pause_cleaning(topic, partition)
        try:
            yield
        finally:
            self.cleaner.resume_cleaning(topic, partition)

    def delete_old_segments(self, log: Log) -> int:
        """Retention on one log (Kafka's LogManager.cleanupLogs, per log); segments deleted. The
        cleaner is paused on the partition only when retention has something to delete."""
        if not log.has_segments_to_delete():
            return 0
        with self.cleaning_paused(log.topic, log.partition):
            return log.delete_old_segments()

    def truncate_to(self, topic: str, partition: int, offset: int) -> None:
        """Kafka's LogManager.truncateTo for one partition: the log cut back to ``offset`` with its
        cleaning paused (a follower's truncation; nothing in a single-node broker calls it yet)."""
        self._require_writer("truncating a log")
        log = self.open_log(topic, partition)
        if offset >= log.log_end_offset:
            return
        with self.cleaning_paused(topic, partition):
            log.truncate_to(offset)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords on one partition: raise its log start offset to ``offset`` (see
        ``Log.delete_records_before``) and checkpoint it at once, so that a crash cannot bring the
        deleted records back; the new log start offset. The cleaner is paused on the partition
        only when the log start moves (a bad offset or one at or below the start changes nothing)."""
        self._require_writer("deleting records")
        log = self.open_log(topic, partition)
        moves = offset > log.log_start_offset
        with self.cleaning_paused(topic, partition) if moves else nullcontext():
            start = log.delete_records_before(offset)
        self.checkpoint_logs()
        return start

    def delete_topic(self, topic: str) -> None:
        """Delete a topic (Kafka's LogManager.asyncDelete, with the removal done at once).

        Its open logs are marked deleted under their own locks, so a thread still holding one (a
        produce, the cleaner) gets a TopicError instead of writing into a removed directory. Each
        directory is first renamed to Kafka's ``<topic>-<p>.<uuid>-delete``, which is never taken
        for a live partition again, even when a crash comes before the removal."""
        self._require_writer("topic deletion")
        if not self.has_topic(topic):
            raise TopicError(f"topic {topic!r} does not exist in {self.path}")
        # a clean in progress is stopped first (not while holding the guard: it may need it to stop)
        keys = [(topic, p) for p in self.partitions(topic)]
        for key in keys:
            self.cleaner.abort_and_pause_cleaning(*key)
        try:
            self._delete_topic(topic)
        finally:
            for key in keys:
                self.cleaner.resume_cleaning(*key)
        for key in keys:
            self.cleaner.forget_partition(*key)

    def _delete_topic(self, topic: str) -> None:
        with self._logs_guard:
            if not self.has_topic(topic):
                raise TopicError(f"topic {topic!r} does not exist in {self.path}")
            for key in [k for k in self.logs if k[0] == topic]:
                log = self.logs.pop(key)
                with log.lock:
                    log.deleted = True
                    log.structure_epoch += 1      # a clean planned before this never swaps in
                    for seg in log.segments:
                        seg.close_handles()
                    log.closed = True
                self._closed_events.extend(log.events)
            # Kafka's order (KRaft): the removal recorded first, then the logs renamed to -delete,
            # then removed. The record moves the topic's entry to "deleting" in one atomic write,
            # after which nothing lists or opens the topic and the next writer finishes what a kill
            # leaves (``_finish_deletions``): a kill at any step leaves the topic whole or deleted.
            # The directories are those of the map before the mark (it leaves the topic out after)
            parts = list(self._partition_dirs().get(topic, []))
            meta = self._read_meta()
            entry = meta["topics"].pop(topic, None)
            meta.setdefault(DELETING, {})[topic] = entry if entry is not None else {}
            moved: list[tuple[str, str]] = []
            try:
                self._write_meta(meta)
                for p in parts:
                    pdir = os.path.join(self.path, files.partition_dir_name(topic, p))
                    target = os.path.join(self.path, _delete_dir_name(topic, p))
                    os.replace(pdir, target)
                    moved.append((pdir, target))
                if moved:
                    fsync_dir(self.path)
            except BaseException:
                # the deletion failed before its directories were all renamed (a full disk): undone,
                # the directories renamed back, then the topic's entry back in "topics", so that the
                # topic is there whole, as before the command. What cannot be undone keeps the mark
                # (the next writer finishes the deletion)
                self._dirs_cache = None     # listed again when next asked
                self._undo_deletion(topic, entry, moved)
                raise
            self._dirs_removed(topic)
            try:
                # the checkpoints' entries before the mark goes: a kill between leaves the mark, and
                # the next writer removes them, so a topic made again later never takes them for its own
                self._forget_checkpoints({topic})
                meta = self._read_meta()
                _unmark(meta, [topic])
                self._write_meta(meta)
                for _, target in moved:
                    shutil.rmtree(target)
            except (OSError, StorageError) as e:
                raise StorageError(f"topic {topic!r} is deleted, but finishing its deletion failed ({e}): "
                                   f"the next writer of {self.path} finishes it") from e

    def _forget_checkpoints(self, topics: set[str]) -> None:
        """The checkpoint files' entries of deleted ``topics`` removed."""
        for ck in (self.cleaner_checkpoint, self.recovery_checkpoint, self.log_start_checkpoint):
            with ck.lock:           # the cleaner updates its checkpoint from its own threads
                offsets = _readable(ck)
                if any(t in topics for t, _ in offsets):
                    ck.write({k: v for k, v in offsets.items() if k[0] not in topics})

    def _undo_deletion(self, topic: str, entry: dict | None, moved: list[tuple[str, str]]) -> None:
        try:
            for pdir, target in reversed(moved):
                os.replace(target, pdir)
            if moved:
                fsync_dir(self.path)
            meta = self._read_meta()
            if topic in meta.get(DELETING, {}):     # the mark's write may have failed after its rename
                _unmark(meta, [topic])
                if entry is not None:
                    meta["topics"][topic] = entry
                self._write_meta(meta)
        except (OSError, StorageError):
            pass                            # the mark stays: the next writer finishes the deletion

    # -- logs
    def had_clean_shutdown(self) -> bool:
        """Whether the last writer left the clean-shutdown marker (a writer consumes it here, as
        Kafka's LogManager deletes it at start: a crash from now on is an unclean shutdown)."""
        return self._clean_shutdown()

    def _clean_shutdown(self) -> bool:
        if self._had_clean_shutdown is None:
            marker = os.path.join(self.path, files.CLEAN_SHUTDOWN_FILE)
            self._had_clean_shutdown = os.path.exists(marker)
            if self._had_clean_shutdown and self.writable:
                os.remove(marker)
        return self._had_clean_shutdown

    def open_log(self, topic: str, partition: int, *, create: bool = False) -> Log:
        key = (topic, partition)
        with self._logs_guard:
            log = self.logs.get(key)
            if log is not None:
                return log
            if topic in self._meta().get(DELETING, {}):
                # a deletion a kill interrupted before its renames: the live directories are no topic's
                raise TopicError(f"partition {topic}-{partition} does not exist in {self.path} (its topic "
                                 f"is being deleted)")
            pdir = os.path.join(self.path, files.partition_dir_name(topic, partition))
            if not os.path.isdir(pdir):
                # a partition the topics file records but without its directory (a creation a crash
                # stopped after its record): a writer makes it, empty, as the broker does
                recorded = self.writable and partition < (self.registered_partitions(topic) or 0)
                if not create and not recorded:
                    raise TopicError(f"partition {topic}-{partition} does not exist in {self.path}")
                self._require_writer("creating a partition")
                self._make_partition_dirs(topic, [partition], self.topic_id(topic), [])
                self._dirs_added(topic, [partition])
            elif self.writable and partition not in self._partition_dirs().get(topic, ()):
                self._dirs_added(topic, [partition])    # made beside this writer: in its map from now on
            clean = self._clean_shutdown()
            recovery = _readable(self.recovery_checkpoint, cached=True).get(key, 0) if not clean else 0
            log_start = _readable(self.log_start_checkpoint, cached=True).get(key, 0)
            from .log import Log      # the record codec's numba kernels: not for metadata-only commands
            log = Log(pdir, self.topic_config(topic), clock=self.clock, recovery_point=recovery,
                      log_start_offset=log_start, had_clean_shutdown=clean,
                      producer_id_expiration_ms=self.broker.get("producer.id.expiration.ms"),
                      leader_epoch=LEADER_EPOCH, read_only=not self.writable)
            self.logs[key] = log
            return log

    def all_partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, parts in self.partition_map().items() for p in parts]

    def checkpoint_logs(self) -> None:
        """Write recovery points and log start offsets of the open logs (Kafka's checkpoint files)."""
        if not self.logs or not self.writable:
            return
        # one writer of the checkpoint files at a time: the broker's request handlers
        # (DeleteRecords) and its background checkpointing both call this
        with self._logs_guard:
            recovery = _readable(self.recovery_checkpoint)
            starts = _readable(self.log_start_checkpoint)
            for key, log in self.logs.items():
                recovery[key] = log.recovery_point
                # a tiered log's start may lie below its first local segment (in the remote tier)
                if log.log_start_offset != log.segments[0].base_offset:
                    starts[key] = log.log_start_offset
                else:
                    starts.pop(key, None)
            self.recovery_checkpoint.write(recovery)
            if starts or os.path.exists(self.log_start_checkpoint.path):
                self.log_start_checkpoint.write(starts)

    def flush_logs(self, logs: list[Log]) -> list[BaseException | None]:
        """Flush each log (``Log.flush``), FSYNC_THREADS at a time; per log, the OSError or
        StorageError its flush raised (a failed fsync takes it offline), or None. A log closed,
        offline or deleted meanwhile is left alone."""
        return _run_all([functools.partial(_flush_if_open, log) for log in logs], "log-flush")

    def close(self) -> None:
        """Clean shutdown: close every log (FSYNC_THREADS at a time), write checkpoints and (when
        every partition is in a clean state) the clean-shutdown marker, then let go of the lock. A
        reader closes its files."""
        with self._logs_guard:
            try:
                # every log closed even when one fails (a full disk): one that could not be closed
                # cleanly, or is offline, leaves no clean-shutdown marker, so that the next start
                # recovers the dir as after a crash
                failed: list[str] = []
                first_error: BaseException | None = None
                logs = list(self.logs.values())
                for log, error in zip(logs, _run_all([log.close for log in logs], "log-close")):
                    if error is not None:
                        failed.append(log.name)
                        first_error = first_error or error
                        log.close(abandon=True)     # its files as they are, for the next start
                    if log.offline is not None and log.name not in failed:
                        failed.append(log.name)
                if self.writable:
                    self.checkpoint_logs()
                    if self._had_clean_shutdown is not None and not failed and self._all_partitions_clean():
                        atomic_write(os.path.join(self.path, files.CLEAN_SHUTDOWN_FILE),
                                     json.dumps({"version": 0, "brokerEpoch": 0}).encode("utf-8"))
                if first_error is not None:
                    raise first_error       # the first failure, as it was (the others alike)
            finally:
                self._end_session()

    def _end_session(self) -> None:
        """Forget the open logs (keeping their events) and let go of the lock. Opening a log again
        starts a new session: the marker must be consumed (removed) again, or a crash in that
        session would pass for a clean one."""
        self._closed_events.extend(e for log in self.logs.values() for e in log.events)
        self.logs.clear()
        self._dirs_cache = None         # the lock is let go: another writer may change the dir
        self._meta_cache = None
        self._dir_topic_ids = {}
        self._had_clean_shutdown = None
        if self.lock is not None:
            self.lock.release()

    def data_events(self) -> list:
        """What recovery and retention removed or set aside in this data dir since it was opened."""
        with self._logs_guard:
            return self._closed_events + [e for log in self.logs.values() for e in log.events]

    def drain_data_events(self) -> list:
        """``data_events()``, forgotten once returned (a long-running writer reports as it goes)."""
        with self._logs_guard:
            out = self.data_events()
            self._closed_events = []
            for log in self.logs.values():
                log.events.clear()
            return out

    def abandon(self) -> None:
        """What a kill -9 leaves behind (fault-injection tests): file handles dropped without a
        flush, trim, snapshot, checkpoint or marker, and the lock released by the kernel."""
        with self._logs_guard:
            for log in self.logs.values():
                for seg in log.segments:
                    seg.close_handles()
                log.closed = True
            self._end_session()

    def _all_partitions_clean(self) -> bool:
        """Was the dir clean when this writer came, or did it open (recover) every partition?"""
        if self._had_clean_shutdown:
            return True
        opened = set(self.logs)
        for topic, parts in self._partition_dirs().items():
            if any((topic, p) not in opened for p in parts):
                return False
        return True

    def __enter__(self) -> "DataDir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
