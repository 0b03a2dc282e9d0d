"""The group coordinator inside the broker: ``__consumer_offsets`` writes, loading, timers, expiry.

Follows Kafka's ``GroupCoordinatorService`` on the ``CoordinatorRuntime`` (``..runtime``: one
coordinator, every operation applied in turn, its records appended to the group's ``__consumer_offsets`` partition
before it answers), ``CoordinatorLoaderImpl`` (a partition replayed from its log start to its end,
transactional offset commits held until their producer's marker, unknown record types skipped),
and the scheduling of ``GroupCoordinatorShard`` (offset expiry every
``offsets.retention.check.interval.ms``).

One lock serialises the coordinator: requests (from the broker's worker threads and event loop),
the timer thread and the loader all go through ``call``. Records are appended under that lock,
so the log order is the order in which the coordinator decided, as with Kafka's single-threaded
coordinator; each operation's records for one partition are one batch (uncompressed, no producer
id, CreateTime = now). Offset commits and tombstones take effect (``GroupCoordinatorShard.replay``)
only once written.

Transactions (transactions.md §5.1): a TxnOffsetCommit's records are written as one transactional
batch with the producer's id and epoch (``commit_transactional_offsets``: Kafka's
``scheduleTransactionalWriteOperation``, verification of the group's partition first) and stay
pending until the transaction coordinator's marker for that partition, which it writes through
``write_txn_marker`` (Kafka's ``completeTransaction``): the marker is appended under the same lock
as every other write, so it follows the offsets it settles, and then replayed.

Loading (at start): every partition of ``__consumer_offsets`` is marked loading, so requests for
its groups get COORDINATOR_LOAD_IN_PROGRESS, then replayed in a background thread, in chunks that
let requests for loaded partitions through; transactional offsets are replayed pending and settled
by the markers that follow them, exactly as the live path does. The same class serves the offline
tools: with ``DataDir`` opened writable (the data-dir lock held) ``load_now`` reads every group and
``call`` writes exactly as the broker would. The loader decodes the consumer-group records of
KIP-848 (types 3-8 and 16) and replays them into the consumer groups; share- and streams-group
records are skipped, as before.

Consumer groups (KIP-848) read the topics through ``metadata_image`` (Kafka's ``MetadataImage``:
ids, names, partition counts), rebuilt after ``on_metadata_change``, which the broker calls when a
topic is created, deleted or grows (``GroupMetadataManager.onNewMetadataImage``). The hook only
records the change: the next operation, under the coordinator's lock, applies it, so the broker
never calls into the coordinator while holding its metadata lock.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, NamedTuple

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError
from ...record import consumer_offsets as R
from ...record.control import ABORT, COMMIT, parse_control_key
from ...storage.checkpoint import decode_topic_id
from ...storage.producer_state import COORDINATOR, NO_SEQUENCE, VerificationGuard
from ..internal_topics import offsets_topic_configs
from ..txn.verification import verification_enabled, verify_partition
from .api_data import CommitPartition, JoinResponse, SyncResponse
from .classic_group import complete_join, complete_sync
from .config import GroupConfig
from .consumer.model import MetadataImage, TopicImage
from .offset_manager import commit_append_error
from ..runtime import CoordinatorRuntime, Outcome, Periodic, error_code_of, operation_error
from .shard import GroupCoordinatorShard

log = logging.getLogger("kafka.coordinator.group.GroupCoordinatorService")
loader_log = logging.getLogger("kafka.coordinator.common.runtime.CoordinatorLoaderImpl")

LOAD_CHUNK_RECORDS = 5000        # records replayed per hold of the lock while loading


class TxnWrite(NamedTuple):
    """The producer an operation's records are written for, in its transaction (CoordinatorWriteEvent's
    producer id, epoch and verification guard)."""
    producer_id: int
    producer_epoch: int
    verification_guard: VerificationGuard | None


class GroupCoordinatorService(CoordinatorRuntime):
    """See the module docstring. ``create_topic(partitions, configs)`` creates the offsets topic
    (the broker passes its own, which opens the logs under its metadata lock); ``notify`` wakes
    fetches of appended partitions."""

    topic = R.OFFSETS_TOPIC
    name = "group coordinator"
    thread_name = "group-coordinator"
    log = log
    loader_log = loader_log

    @property
    def broker(self):
        """The broker's settings of this moment: a dynamic change (storage/dynamic_config.py) makes
        ``datadir.broker`` a new object, so none is kept (``transaction.partition.verification.enable``
        is read per TxnOffsetCommit, as Kafka reads it)."""
        return self.datadir.broker

    def __init__(self, datadir, *, clock: Callable[[], int] | None = None,
                 create_topic: Callable[[int, dict], object] | None = None,
                 notify: Callable[[list], None] | None = None,
                 metadata_lock: threading.RLock | None = None):
        super().__init__(clock, metadata_lock)
        self.datadir = datadir
        self._create_topic = create_topic
        self.notify = notify
        config = GroupConfig.from_broker(self.broker, self.partition_count())
        self.coordinator = GroupCoordinatorShard(config, self.clock)
        self.cleanup = Periodic(config.retention_check_interval_ms)      # offset expiry
        self._closing = False
        # the topics as consumer groups see them (rebuilt after a change), and the changes the
        # broker reported since the last operation
        self._image: MetadataImage | None = None
        # the image's version: resolved regexes store it (ConsumerGroupRegularExpression.Version) and
        # compare it with that of the last topic creation, so it must grow across restarts as
        # Kafka's metadata offset does: the clock's milliseconds, bumped by one per change
        self._image_version = self.clock()
        self._changes: list[tuple[list, bool]] = []
        self._changes_lock = threading.Lock()
        self.coordinator.consumer.image = self.metadata_image
        self.coordinator.consumer.group_setting = self._group_setting

    @property
    def config(self) -> GroupConfig:
        return self.coordinator.config

    # -- the offsets topic (created by the runtime's ensure_topic) ---------------------------------
    def topic_configs(self) -> dict[str, str]:
        return offsets_topic_configs(self.broker)

    def create_topic(self, n: int, configs: dict[str, str]) -> None:
        if self._create_topic is not None:
            self._create_topic(n, configs)
        else:
            self.datadir.create_topic(R.OFFSETS_TOPIC, n, configs)

    def _log(self, partition: int):
        lg = self.datadir.logs.get((R.OFFSETS_TOPIC, partition))
        if lg is not None and not lg.closed:
            return lg
        self.ensure_topic()
        with self.metadata_lock:
            return self.datadir.open_log(R.OFFSETS_TOPIC, partition, create=True)

    # -- the topics, for consumer groups --------------------------------------------------------------
    def on_metadata_change(self, topics, created: bool = False) -> None:
        """Topics were created (``created``), deleted or given partitions: recorded here, applied
        by the next operation (module docstring)."""
        with self._changes_lock:
            self._changes.append((list(topics), created))

    def metadata_image(self) -> MetadataImage:
        """The topics now: id, name and partition count of each (called under the lock)."""
        with self._changes_lock:
            changes, self._changes = self._changes, []
        for topics, created in changes:
            self._image_version = max(self._image_version + 1, self.clock())
            self._image = None
            self.coordinator.consumer.on_metadata_change(topics, created, self._image_version)
        if self._image is None:
            ids = self.datadir.topic_ids()
            topics = []
            for name, parts in self.datadir.partition_map().items():
                text = ids.get(name) or self.datadir.topic_id(name)
                if not text or not parts:
                    continue        # a topic without an id (a Kafka dir before ids) is not offered
                topics.append(TopicImage(uuid.UUID(bytes=decode_topic_id(text)), name, max(parts) + 1))
            self._image = MetadataImage(topics, self._image_version)
        return self._image

    def _group_setting(self, group_id: str, name: str) -> int | None:
        """A group's dynamic config (consumer.session.timeout.ms, ...), read at each use as Kafka does."""
        value = getattr(self.broker, "dynamic_groups", {}).get(group_id, {}).get(name)
        try:
            return None if value is None else int(value)
        except ValueError:
            return None

    # -- running operations ---------------------------------------------------------------------
    def call(self, op: Callable, *args):
        """Run ``op(*args)`` (a coordinator method returning ``(Outcome, *rest)``), write its records,
        run its callback; ``rest`` (a single value unpacked)."""
        with self.lock:
            result = op(*args)
            outcome, rest = result[0], result[1:]
            self._apply(outcome)
            if self._closing:
                self._fail_parked()
        self._wake.set()
        return rest[0] if len(rest) == 1 else rest

    def commit_offsets(self, *args, **kwargs) -> list[int]:
        """OffsetCommit: the per-partition errors, every accepted one turned into the write's error
        when the append fails."""
        with self.lock:
            outcome, errors = self.coordinator.commit_offsets(*args, **kwargs)
            failure = self._apply(outcome)
            # what failed (a full disk), for a caller that can say more than an error code: the
            # offline consumer-groups --reset-offsets
            self.last_commit_failure = failure
        self._wake.set()
        if failure is not None:
            code = commit_append_error(failure)
            errors = [code if e == ErrorCode.none else e for e in errors]
        return errors

    def _apply(self, outcome: Outcome, txn: TxnWrite | None = None) -> Exception | None:
        failure = self._write(outcome, txn)
        if outcome.on_written is not None:
            outcome.on_written(failure)
        for pending in self.coordinator.take_pending():
            self._apply(pending)
        return failure

    def _write(self, outcome: Outcome, txn: TxnWrite | None = None) -> Exception | None:
        """Append the outcome's records, one batch per partition, and replay them. With ``txn``
        the batch is the producer's transactional batch (baseSequence 0, origin COORDINATOR: its
        epoch is checked, not its sequence) and its records are replayed as pending."""
        if not outcome.records:
            return None
        by_partition: dict[int, list] = {}
        for rec in outcome.records:
            by_partition.setdefault(self.coordinator.partition_for(rec.group), []).append(rec)
        failure = None
        written = []
        for p, recs in by_partition.items():
            try:
                lg = self._log(p)
                now = self.clock()
                keys, values = [r.key_bytes() for r in recs], [r.value_bytes() for r in recs]
                if txn is None:
                    info = lg.append_records(keys, values, timestamps=[now] * len(recs))
                else:
                    info = lg.append_records(keys, values, timestamps=[now] * len(recs),
                                             producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
                                             base_sequence=0, transactional=True, origin=COORDINATOR,
                                             verification_guard=txn.verification_guard)
            except (CompactlogError, OSError) as e:
                log.error(f"Failed to append {len(recs)} record(s) to {R.OFFSETS_TOPIC}-{p}: {e}")
                failure = failure or e
                continue
            written.append((R.OFFSETS_TOPIC, p))
            if outcome.replay:
                producer_id = -1 if txn is None else txn.producer_id
                for i, rec in enumerate(recs):
                    self.coordinator.replay(rec, info.first_offset + i, producer_id)
        if written and self.notify is not None:
            self.notify(written)
        return failure

    # -- transactions -----------------------------------------------------------------------------
    def commit_transactional_offsets(self, transactional_id: str, group_id: str, producer_id: int,
                                     producer_epoch: int, generation_id: int, member_id: str,
                                     group_instance_id: str | None, partitions: list[CommitPartition],
                                     api_version: int = 4, transactions=None) -> list[ErrorCode]:
        """TxnOffsetCommit (GroupCoordinatorService.commitTransactionalOffsets): one error per
        partition. The group's partition is verified with the transaction coordinator
        (``transactions``, ``state.transactions``) before the operation runs, as Kafka's runtime
        does (so a verification error comes before COORDINATOR_LOAD_IN_PROGRESS); the accepted
        offsets are written in the producer's transaction, pending until its marker."""
        if not group_id:
            return [ErrorCode.invalid_group_id] * len(partitions)
        partition = self.coordinator.partition_for(group_id)
        guard = None
        if verification_enabled(self.broker):
            try:
                guard, code = verify_partition(self._log(partition), transactions, transactional_id, producer_id,
                                               producer_epoch, NO_SEQUENCE,
                                               transaction_abortable_supported=api_version >= 4)
            except (CompactlogError, OSError) as e:
                code = error_code_of(e)
            if code != ErrorCode.none:
                return [operation_error(code)] * len(partitions)
        with self.lock:
            outcome, errors = self.coordinator.commit_transactional_offsets(
                group_id, generation_id, member_id, group_instance_id, partitions, api_version)
            failure = self._apply(outcome, TxnWrite(producer_id, producer_epoch, guard))
        self._wake.set()
        if failure is not None:
            code = operation_error(error_code_of(failure))
            errors = [code if e == ErrorCode.none else e for e in errors]
        return errors

    def write_txn_marker(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool) -> ErrorCode:
        """The transaction coordinator's marker for ``__consumer_offsets-<partition>``
        (GroupCoordinatorService.completeTransaction): appended under the coordinator's lock, after
        every write already made (nothing is buffered here, so the offsets it settles precede it),
        then replayed: the producer's pending offsets of the partition's groups become committed
        (COMMIT, unless a later plain commit is newer) or are dropped (ABORT). The append's error
        code (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...), else NONE; a partition
        still loading answers COORDINATOR_LOAD_IN_PROGRESS, one this coordinator does not have
        NOT_COORDINATOR (the WriteTxnMarkers handler answers both as NOT_LEADER_OR_FOLLOWER)."""
        with self.lock:
            if not (0 <= partition < self.config.num_partitions) or not self.topic_exists():
                return ErrorCode.not_coordinator
            if partition in self.coordinator.partitions.loading:
                return ErrorCode.coordinator_load_in_progress
            try:
                self._log(partition).append_control(commit=commit, producer_id=producer_id,
                                                    producer_epoch=producer_epoch,
                                                    coordinator_epoch=coordinator_epoch)
            except (CompactlogError, OSError) as e:
                (log.warning if isinstance(e, CompactlogError) else log.error)(
                    f"Writing the {'COMMIT' if commit else 'ABORT'} marker of producer {producer_id} "
                    f"to {R.OFFSETS_TOPIC}-{partition} failed: {e}")
                return error_code_of(e)
            self.coordinator.replay_end_txn(producer_id, commit, partition)
        if self.notify is not None:
            self.notify([(R.OFFSETS_TOPIC, partition)])
        return ErrorCode.none

    # -- loading --------------------------------------------------------------------------------
    def partitions_to_load(self) -> list[int]:
        if not self.topic_exists():
            return []
        parts = [p for p in self.datadir.partitions(R.OFFSETS_TOPIC) if p < self.config.num_partitions]
        if not self.datadir.writable:
            # a partition the topics file records but a crash kept from being made holds no group:
            # a reader skips it (a writer makes it, empty, when it opens it)
            on_disk = set(self.datadir.partition_dirs().get(R.OFFSETS_TOPIC, ()))
            parts = [p for p in parts if p in on_disk]
        return parts

    def load_partition(self, partition: int) -> int:
        """Replay one partition from its log start to its end; the records replayed."""
        started = time.monotonic()
        lg = self._log(partition)
        end = lg.log_end_offset
        c = self.coordinator
        n = skipped = 0
        chunk: list = []

        def flush():
            if chunk:
                with self.lock:
                    for item in chunk:
                        if item[0] == "marker":
                            c.replay_end_txn(item[1], item[2], partition)
                        else:
                            c.replay(item[1], item[2], item[3])
                chunk.clear()

        for b in lg.batches(lg.log_start_offset, end):
            if b.is_control:
                for r in b.records():
                    try:
                        kind = parse_control_key(r.key).type
                    except CompactlogError as e:
                        loader_log.error(f"{lg.name}: offset {r.offset}: control record skipped: {e}")
                        continue
                    if kind in (ABORT, COMMIT):
                        chunk.append(("marker", b.header.producer_id, kind == COMMIT))
                continue
            # a legacy (v0/v1) entry is its own header and never transactional
            pid = b.header.producer_id if b.header.is_transactional else -1
            for r in b.records():
                try:
                    rec = R.decode_record(r.key, r.value, consumer_groups=True)
                except R.UnknownRecordType as e:
                    # share- and streams-group records, or newer types: Kafka's loader skips them too
                    loader_log.debug(f"{lg.name}: offset {r.offset}: unknown record type "
                                     f"{e.record_type}, skipped")
                    skipped += 1
                    continue
                except R.RecordFormatError as e:
                    loader_log.error(f"{lg.name}: offset {r.offset}: record skipped, it does not decode: {e}")
                    skipped += 1
                    continue
                chunk.append(("record", rec, r.offset, pid))
                n += 1
            if len(chunk) >= LOAD_CHUNK_RECORDS:
                flush()
        flush()
        with self.lock:
            c.on_loaded(partition)
            pending = c.take_pending()
            for o in pending:
                self._apply(o)
        self._wake.set()
        loader_log.info(f"Finished loading offsets and group metadata from {lg.name} in "
                        f"{1000 * (time.monotonic() - started):.0f} ms: {n} record(s)"
                        + (f", {skipped} skipped" if skipped else ""))
        return n

    def load_now(self) -> None:
        """Load every partition in this thread (offline tools, tests)."""
        for p in self.mark_loading():
            self.load_partition(p)
        self.loaded.set()

    def load_failed(self, partition: int) -> None:
        loader_log.exception(f"Failed to load {R.OFFSETS_TOPIC}-{partition}; its groups stay unavailable")

    # -- the timers (the runtime's thread runs them) ------------------------------------------------
    def activate(self) -> None:
        self.cleanup.start(self.clock())

    def run_timers(self, now: int) -> list[int | None]:
        """The expired timers, then offset expiry when due; the next deadlines."""
        for outcome in self.coordinator.run_timers(now):
            self._apply(outcome)
        self.cleanup.run_if_due(now, lambda: self._apply(self.coordinator.cleanup_expired()))
        return [self.coordinator.timer.next_deadline(), self.cleanup.next_ms]

    def on_partitions_deleted(self, partitions) -> int:
        """Tombstones for every group's offsets of deleted topic partitions; how many."""
        with self.lock:
            outcome = self.coordinator.offsets_for_deleted_partitions(partitions)
            self._apply(outcome)
        return len(outcome.records)

    def expire_offsets_now(self) -> int:
        """One expiry pass now; the tombstones written."""
        with self.lock:
            outcome = self.coordinator.cleanup_expired()
            self._apply(outcome)
        return len(outcome.records)

    def unload(self) -> None:
        """Answer every parked JoinGroup and SyncGroup with NOT_COORDINATOR (Kafka's onUnloaded),
        and every later one too, so that a stopping broker is not held up by rebalances waiting
        on their timeouts."""
        with self.lock:
            self._closing = True
            self._fail_parked()

    def _fail_parked(self) -> None:
        with self.lock:
            for g in self.coordinator.groups.values():
                for m in list(g.members.values()):
                    complete_join(g, m, JoinResponse(ErrorCode.not_coordinator, member_id=m.member_id))
                    complete_sync(m, SyncResponse(ErrorCode.not_coordinator))

    def on_stopping(self) -> None:
        self.unload()


def for_broker(state) -> GroupCoordinatorService:
    """The service of a running broker (``BrokerState``): the offsets topic is created the way
    CreateTopics creates topics, appends wake the fetches waiting on them."""
    svc = GroupCoordinatorService(
        state.datadir, create_topic=lambda n, configs: state.create_topic(R.OFFSETS_TOPIC, n, configs),
        notify=state.appends.notify, metadata_lock=state.metadata_lock)
    state.groups = svc
    return svc
