"""The transaction coordinator's decisions: Kafka's ``TransactionCoordinator`` and the cache half of
``TransactionStateManager``, sans-IO with an injected clock and producer id source.

Each request becomes a ``Decision``: an answer at once, or one ``__transaction_state`` write (the
target of a ``TransactionMetadata`` transition) and ``on_written``, which the caller runs with the
write's error code (NONE once the record is in the log) and which gives the answer — the shape
of the group coordinator's ``Outcome``. A written Prepare* record is the decision point of a
transaction: it queues a ``MarkerJob`` (the partitions that still need a marker and the pending
Complete* target) that ``markers.py`` works off before Complete* is written (transactions.md §2.6).

The checks follow Kafka's order and codes (spec §2.2-2.5, 2.7, 2.9, 3.1, 3.3); PRODUCER_FENCED
is answered as is, the handlers downgrade it for old request versions. ``verify_partition`` may be
called from any thread (Produce, TxnOffsetCommit): it reads the cache under ``cache_lock``, the
leaf lock every cache change takes too; everything else runs under the service's lock.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from kio.schema.errors import ErrorCode

from .metadata import (COMPLETED, EXPIRATION_ALLOWED, MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, PREPARED, TV_0,
                       TV_2, TopicPartition, TransactionMetadata, TxnError, TxnState, TxnTransit)
from .state_log import partition_for

log = logging.getLogger("kafka.coordinator.transaction.TransactionCoordinator")

INT_MAX = 2147483647
S = TxnState


@dataclass(frozen=True)
class TxnConfig:
    """TransactionConfig: the broker settings the coordinator reads."""
    num_partitions: int = 50
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    expire_interval_ms: int = 3600000
    transaction_version: int = TV_2

    @classmethod
    def from_broker(cls, broker, num_partitions: int | None = None) -> "TxnConfig":
        return cls(num_partitions if num_partitions is not None
                   else broker.get("transaction.state.log.num.partitions"),
                   broker.get("transaction.max.timeout.ms"), broker.get("transactional.id.expiration.ms"),
                   broker.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                   broker.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
                   broker.get("compactlog.transaction.version"))


class TxnResult(NamedTuple):
    """A request's answer: the error and, where it hands them out, the producer id and epoch."""
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class Decision:
    """What a request needs done: nothing (``result``) or ``records`` (id -> transit, None for a
    tombstone) written to ``__transaction_state``-``partition``, then ``on_written(code)``."""
    result: TxnResult | None = None
    partition: int = -1
    records: list = field(default_factory=list)
    on_written: Callable[[ErrorCode], TxnResult | None] | None = None

    @property
    def is_prepare(self) -> bool:
        """A Prepare* record: once written, the transaction's outcome is decided."""
        return any(t is not None and t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) for _, t in self.records)


@dataclass(eq=False)
class MarkerJob:
    """The markers of one decided transaction still to write (TMCM's pending complete txn)."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    client_tv: int
    remaining: set
    complete: TxnTransit                 # the pending Complete* target
    next_attempt_ms: int = 0
    attempts: int = 0


def _refused(code: ErrorCode) -> Decision:
    return Decision(result=TxnResult(code))


class TransactionCoordinator:
    """See the module docstring. ``new_producer_id()`` hands out producer ids (the broker's
    ProducerIdManager); ``clock()`` is the time in ms."""

    def __init__(self, config: TxnConfig, clock: Callable[[], int], new_producer_id: Callable[[], int], *,
                 coordinator_epoch: int = 0):
        self.config = config
        self.clock = clock
        self.new_producer_id = new_producer_id
        self.coordinator_epoch = coordinator_epoch
        self.txns: dict[str, TransactionMetadata] = {}
        self.loading: set[int] = set()
        self.failed: dict[int, str] = {}          # partitions refused by the loader: why
        self.active = False
        self.jobs: dict[str, MarkerJob] = {}
        self._new_jobs: list[MarkerJob] = []
        self.cache_lock = threading.Lock()

    # -- readiness ------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def _check_ready(self, transactional_id: str) -> None:
        """TSM.getTransactionState's refusals and TC's ``isActive``."""
        if not self.active:
            raise TxnError(ErrorCode.coordinator_not_available, "the transaction coordinator is not running")
        p = self.partition_for(transactional_id)
        if p in self.loading:
            raise TxnError(ErrorCode.coordinator_load_in_progress, f"__transaction_state-{p} is loading")
        if p in self.failed:
            raise TxnError(ErrorCode.coordinator_not_available, self.failed[p])

    def _allocate_producer_id(self) -> int:
        try:
            return self.new_producer_id()
        except Exception as e:      # the id block could not be persisted
            log.error(f"Could not allocate a producer id: {e}")
            raise TxnError(ErrorCode.coordinator_not_available, "no producer id could be allocated") from None

    # -- writing transitions ------------------------------------------------------------------------
    def _install(self, md: TransactionMetadata, transit: TxnTransit) -> None:
        with self.cache_lock:
            md.complete_transition(transit)

    def _write(self, md: TransactionMetadata, transit: TxnTransit, answer: Callable[[ErrorCode], TxnResult],
               then: Callable[[], None] | None = None, *, fence: bool = False) -> Decision:
        """The record of ``transit``; once written the cache takes it (then ``then``), after a
        failure the pending state is dropped (a fence's bump kept, KAFKA-9666)."""
        def on_written(code: ErrorCode) -> TxnResult:
            if code == ErrorCode.none:
                self._install(md, transit)
                if then is not None:
                    then()
            else:
                with self.cache_lock:
                    if fence:
                        md.fence_failed(transit)
                    else:
                        md.cancel_transition()
                log.info(f"Appending {transit.state.display} for {md.transactional_id} to __transaction_state "
                         f"failed with {code.name}")
            return answer(code)
        return Decision(partition=self.partition_for(md.transactional_id), records=[(md.transactional_id, transit)],
                        on_written=on_written)

    # -- InitProducerId (TC.handleInitProducerId) --------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> Decision:
        """A producer with a transactional id starts: ``expected`` = (producer id, epoch) it
        already holds (InitProducerId v3+, KIP-360), None when it sends none."""
        try:
            if transactional_id == "":
                raise TxnError(ErrorCode.invalid_request, "empty transactional id")
            if not 0 < timeout_ms <= self.config.max_timeout_ms:
                raise TxnError(ErrorCode.invalid_transaction_timeout,
                               f"transaction timeout {timeout_ms} ms is not in 1..{self.config.max_timeout_ms}")
            self._check_ready(transactional_id)
            now = self.clock()
            md = self.txns.get(transactional_id)
            if md is None:
                md = TransactionMetadata(transactional_id, self._allocate_producer_id(), NO_PRODUCER_EPOCH,
                                         timeout_ms, S.EMPTY, last_update_ms=now)
                with self.cache_lock:
                    self.txns[transactional_id] = md
            if md.pending:
                raise TxnError(ErrorCode.concurrent_transactions)
            if expected is not None and not self._valid_expected(md, *expected):
                raise TxnError(ErrorCode.producer_fenced, f"producer {expected[0]} is not {transactional_id}'s")
            if md.state in PREPARED:
                raise TxnError(ErrorCode.concurrent_transactions)
            if md.state == S.ONGOING:
                # fence the running instance: abort its transaction as the coordinator, then let
                # the caller retry (its retry gets the next bump, or a new id if this one ran out)
                return self._fence(md, now, lambda code: TxnResult(
                    ErrorCode.concurrent_transactions if code == ErrorCode.none else code))
            if md.is_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                transit = md.prepare_rotation(self._allocate_producer_id(), timeout_ms, now, expected is not None)
            else:
                transit = md.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
        except TxnError as e:
            return _refused(e.code)

        def answer(code: ErrorCode) -> TxnResult:
            if code != ErrorCode.none:
                return TxnResult(code)
            log.info(f"Initialized transactionalId {transactional_id} with producerId {transit.producer_id} and "
                     f"producer epoch {transit.producer_epoch} on partition __transaction_state-"
                     f"{self.partition_for(transactional_id)}")
            return TxnResult(ErrorCode.none, transit.producer_id, transit.producer_epoch)
        return self._write(md, transit, answer)

    @staticmethod
    def _valid_expected(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """TC.prepareInitProducerIdTransit.isValidProducerId: the id is T's (the epoch is judged
        by the bump), or T's previous one with an exhausted epoch (a retry after a rotation), or
        T was only just created."""
        return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
                or (producer_id == md.prev_producer_id and epoch >= MAX_EPOCH - 1))

    # -- the coordinator's own abort (fence, timeout) -------------------------------------------------
    def _fence(self, md: TransactionMetadata, now: int, answer: Callable[[ErrorCode], TxnResult]) -> Decision:
        transit = md.prepare_fence_abort(self.config.transaction_version, now)
        return self._write(md, transit, answer, lambda: self._start_markers(md, now), fence=True)

    def timed_out(self, now: int) -> list[str]:
        """TSM.timedOutTransactions: Ongoing, no transition pending, started more than its timeout
        ago (the clock runs from the first partition added, not from the last activity)."""
        return [tid for tid, md in self.txns.items()
                if md.state == S.ONGOING and not md.pending and md.txn_timeout_ms != INT_MAX
                and md.txn_start_ms + md.txn_timeout_ms < now and self._loaded(tid)]

    def abort_timed_out(self, transactional_id: str, now: int) -> Decision | None:
        """The abort of one timed-out transaction (TC.abortTimedOutTransactions), None when it no
        longer applies (a transition started since, the id changed hands)."""
        md = self.txns.get(transactional_id)
        if md is None or md.state != S.ONGOING or md.pending or not self._loaded(transactional_id):
            return None
        pid = md.producer_id

        def answer(code: ErrorCode) -> TxnResult:
            if code == ErrorCode.none:
                log.info(f"Aborting the transaction of {transactional_id} (producer {pid}): it ran past its "
                         f"timeout of {md.txn_timeout_ms} ms")
            else:
                log.warning(f"Rollback of the timed-out transaction of {transactional_id} failed with {code.name}")
            return TxnResult(code)
        return self._fence(md, now, answer)

    def _loaded(self, transactional_id: str) -> bool:
        p = self.partition_for(transactional_id)
        return p not in self.loading and p not in self.failed

    def _known(self, transactional_id: str) -> TransactionMetadata:
        """The id's metadata for a request about its transaction: a TxnError for an empty id, a
        partition not ready, or an id the coordinator does not know."""
        if transactional_id == "":
            raise TxnError(ErrorCode.invalid_request, "empty transactional id")
        self._check_ready(transactional_id)
        md = self.txns.get(transactional_id)
        if md is None:
            raise TxnError(ErrorCode.invalid_producer_id_mapping)
        return md

    # -- AddPartitionsToTxn / AddOffsetsToTxn (TC.handleAddPartitionsToTransaction) ------------------
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions, client_tv: int = TV_0) -> Decision:
        try:
            md = self._known(transactional_id)
            # the pending state first (KAFKA-18660): a TV2 overflow must not fence itself
            if md.pending:
                raise TxnError(ErrorCode.concurrent_transactions)
            if md.producer_id != producer_id:
                raise TxnError(ErrorCode.invalid_producer_id_mapping)
            if md.producer_epoch != producer_epoch:
                raise TxnError(ErrorCode.producer_fenced)
            if md.state in PREPARED:
                raise TxnError(ErrorCode.concurrent_transactions)
            wanted = set(partitions)
            if md.state == S.ONGOING and wanted <= md.partitions:
                return Decision(result=TxnResult(ErrorCode.none))      # nothing new: nothing written
            transit = md.prepare_add_partitions(wanted, self.clock(), client_tv)
        except TxnError as e:
            return _refused(e.code)
        return self._write(md, transit, lambda code: TxnResult(code))

    # -- EndTxn (TC.endTransaction) --------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                client_tv: int = TV_0) -> Decision:
        """A client's commit or abort; ``client_tv`` 2 for EndTxn v5 (KIP-890 part 2)."""
        try:
            md = self._known(transactional_id)
            state = md.state
            # the epoch rules of the request's version, as Kafka dispatches them (below v5:
            # endTransactionWithTV1, strict equality), not of the id's last transition: after a
            # TV2 timeout-abort bumped e to e+1, a TV1 client's EndTxn with e is fenced, never
            # taken for the retry of a bump it cannot have made
            tv2 = client_tv >= TV_2
            retry_overflow = (tv2 and md.prev_producer_id == producer_id and producer_epoch == MAX_EPOCH - 1
                              and md.producer_epoch == 0)
            retry_bump = tv2 and md.producer_epoch == producer_epoch + 1
            is_retry = retry_bump or retry_overflow
            current = producer_epoch == md.producer_epoch
            if not tv2:
                valid = current
            elif state in PREPARED:
                valid = is_retry
            elif state in COMPLETED:
                valid = current or is_retry
            else:
                valid = current
            if md.producer_id != producer_id and not retry_overflow:
                raise TxnError(ErrorCode.invalid_producer_id_mapping)
            if not valid:
                raise TxnError(ErrorCode.producer_fenced,
                               f"epoch {producer_epoch} is not {transactional_id}'s current {md.producer_epoch}")
            if md.pending:
                raise TxnError(ErrorCode.concurrent_transactions)
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if state == S.ONGOING:
                return self._prepare(md, target, client_tv, no_partition_added=False)
            if state == S.COMPLETE_COMMIT:
                if commit:
                    return self._retried(md) if (is_retry or not tv2) else _refused(ErrorCode.invalid_txn_state)
                if tv2 and not is_retry:
                    return self._prepare(md, target, client_tv, no_partition_added=True)
                return _refused(ErrorCode.invalid_txn_state)
            if state == S.COMPLETE_ABORT:
                if not commit:
                    if is_retry or not tv2:
                        return self._retried(md)
                    return self._prepare(md, target, client_tv, no_partition_added=True)
                # a commit racing the coordinator's abort is fenced, not a state error (KAFKA-20785)
                return _refused(ErrorCode.producer_fenced if is_retry else ErrorCode.invalid_txn_state)
            if state in PREPARED:
                same = (state == S.PREPARE_COMMIT) == commit
                return _refused(ErrorCode.concurrent_transactions if same else ErrorCode.invalid_txn_state)
            if state == S.EMPTY and not commit and tv2:
                return self._prepare(md, target, client_tv, no_partition_added=True)
            return _refused(ErrorCode.invalid_txn_state)
        except TxnError as e:
            return _refused(e.code)

    @staticmethod
    def _retried(md: TransactionMetadata) -> Decision:
        return Decision(result=TxnResult(ErrorCode.none, md.producer_id, md.producer_epoch))

    def _prepare(self, md: TransactionMetadata, target: TxnState, client_tv: int, *,
                 no_partition_added: bool) -> Decision:
        now = self.clock()
        next_pid = NO_PRODUCER_ID
        if client_tv >= TV_2 and md.is_epoch_exhausted:
            next_pid = self._allocate_producer_id()          # the bump overflows: Complete* moves to it
        transit = md.prepare_abort_or_commit(target, client_tv, next_pid, now, no_partition_added)

        def answer(code: ErrorCode) -> TxnResult:
            if code != ErrorCode.none:
                return TxnResult(code)
            c = self.jobs[md.transactional_id].complete if md.transactional_id in self.jobs else transit
            return TxnResult(ErrorCode.none, c.producer_id, c.producer_epoch)
        return self._write(md, transit, answer, lambda: self._start_markers(md, now))

    # -- markers (TMCM.addTxnMarkersToSend, TMRCH) -------------------------------------------------
    def _start_markers(self, md: TransactionMetadata, now: int) -> None:
        """Prepare* is in the log: queue its markers, with Complete* pending meanwhile (every
        request on the id answers CONCURRENT_TRANSACTIONS until it is written)."""
        with self.cache_lock:
            complete = md.prepare_complete(now)
        job = MarkerJob(md.transactional_id, md.producer_id, md.producer_epoch, self.coordinator_epoch,
                        md.state == S.PREPARE_COMMIT, md.client_tv, set(md.partitions), complete, now)
        self.jobs[md.transactional_id] = job
        self._new_jobs.append(job)

    def take_new_jobs(self) -> list[MarkerJob]:
        """The marker jobs queued since the last call (the caller writes them at once)."""
        jobs, self._new_jobs = self._new_jobs, []
        return jobs

    def jobs_due(self, now: int) -> list[MarkerJob]:
        return [j for j in self.jobs.values() if j.next_attempt_ms <= now]

    def next_job_deadline(self) -> int | None:
        return min((j.next_attempt_ms for j in self.jobs.values()), default=None)

    def marker_done(self, job: MarkerJob, tp: TopicPartition) -> None:
        """``tp`` has its marker, or no longer exists: it leaves the transaction's set."""
        md = self.txns.get(job.transactional_id)
        with self.cache_lock:
            job.remaining.discard(tp)
            if md is not None and md.state in PREPARED:
                md.remove_partition(tp)

    def markers_abandoned(self, job: MarkerJob, why: str) -> None:
        """A partition refused the marker for good (its producer or coordinator epoch moved on):
        stop writing this transaction's markers (TMRCH); the id stays Prepare*, with Complete*
        pending, as in Kafka."""
        log.warning(f"Stopped writing the markers of {job.transactional_id}: {why}")
        self.jobs.pop(job.transactional_id, None)

    def complete_markers(self, job: MarkerJob) -> Decision:
        """Every marker is written: the Complete* record. A failed write is retried later (one
        node: no other coordinator will take the partition over and redo it)."""
        md = self.txns[job.transactional_id]
        transit = job.complete

        def on_written(code: ErrorCode) -> None:
            if code == ErrorCode.none:
                self._install(md, transit)
                self.jobs.pop(job.transactional_id, None)
                log.debug(f"Completed the transaction of {job.transactional_id} ({transit.state.display})")
            else:
                log.warning(f"Appending {transit.state.display} for {job.transactional_id} failed with "
                            f"{code.name}; retrying")
            return None
        return Decision(partition=self.partition_for(job.transactional_id),
                        records=[(job.transactional_id, transit)], on_written=on_written)

    # -- verification (TC.handleVerifyPartitionsInTransaction) -------------------------------------
    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> None:
        """Is (topic, partition) in the id's ongoing transaction? A TxnError when it is not.
        Kafka does not look at the pending state here (the append itself is validated again)."""
        self._check_ready(transactional_id)
        with self.cache_lock:
            md = self.txns.get(transactional_id)
            if md is None or md.producer_id != producer_id:
                raise TxnError(ErrorCode.invalid_producer_id_mapping)
            if md.producer_epoch != producer_epoch:
                raise TxnError(ErrorCode.producer_fenced)
            if md.state in PREPARED:
                raise TxnError(ErrorCode.concurrent_transactions)
            if (topic, partition) not in md.partitions:
                raise TxnError(ErrorCode.transaction_abortable)

    # -- DescribeTransactions / ListTransactions ------------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata:
        """TC.handleDescribeTransactions: the id's metadata, else a TxnError."""
        if not self.active:
            raise TxnError(ErrorCode.coordinator_not_available)
        if transactional_id == "":
            raise TxnError(ErrorCode.invalid_request)
        self._check_ready(transactional_id)
        md = self.txns.get(transactional_id)
        if md is None or md.state == S.DEAD:
            raise TxnError(ErrorCode.transactional_id_not_found)
        return md

    def list_transactions(self, states=(), producer_ids=(), duration_ms: int = -1,
                          pattern: str | None = None) -> tuple[list[str], list[TransactionMetadata]]:
        """TSM.listTransactionStates: (unknown state names, the ids that pass every filter), else
        a TxnError."""
        if not self.active:
            raise TxnError(ErrorCode.coordinator_not_available)
        if self.loading:
            raise TxnError(ErrorCode.coordinator_load_in_progress)
        if self.failed:
            raise TxnError(ErrorCode.coordinator_not_available)
        matcher = None
        if pattern:
            try:
                matcher = re.compile(pattern)
            except re.error:
                raise TxnError(ErrorCode.invalid_regular_expression, f"invalid pattern {pattern!r}") from None
        unknown = [s for s in states if TxnState.by_name(s) is None]
        wanted = {TxnState.by_name(s) for s in states} - {None}
        pids = set(producer_ids)
        now = self.clock()
        out = []
        for tid in sorted(self.txns):
            md = self.txns[tid]
            if md.state == S.DEAD or (pids and md.producer_id not in pids) or (states and md.state not in wanted):
                continue
            if duration_ms >= 0 and now - md.txn_start_ms <= duration_ms:
                continue
            if matcher is not None and matcher.fullmatch(tid) is None:
                continue
            out.append(md)
        return unknown, out

    # -- transactional id expiry (TSM.removeExpiredTransactionalIds) --------------------------------
    def expirable(self, now: int) -> dict[int, list[str]]:
        """Per partition, the ids idle for ``transactional.id.expiration.ms`` in Empty/Complete*
        (an Ongoing one times out first)."""
        horizon = now - self.config.id_expiration_ms
        out: dict[int, list[str]] = {}
        for tid, md in self.txns.items():
            if md.pending or md.state not in EXPIRATION_ALLOWED or md.last_update_ms > horizon:
                continue
            p = self.partition_for(tid)
            if p not in self.loading and p not in self.failed:
                out.setdefault(p, []).append(tid)
        return out

    def expire(self, partition: int, transactional_ids: list[str]) -> Decision | None:
        """Tombstones for ``transactional_ids`` (one partition); once written the ids are gone."""
        chosen = []
        for tid in transactional_ids:
            md = self.txns.get(tid)
            if md is not None and not md.pending and md.state in EXPIRATION_ALLOWED:
                with self.cache_lock:
                    md.prepare_dead()
                chosen.append(md)
        if not chosen:
            return None

        def on_written(code: ErrorCode) -> None:
            with self.cache_lock:
                for md in chosen:
                    if code == ErrorCode.none and self.txns.get(md.transactional_id) is md \
                            and md.pending_state == S.DEAD:
                        del self.txns[md.transactional_id]
                    else:
                        md.cancel_transition()
            if code == ErrorCode.none:
                log.info(f"Removed {len(chosen)} expired transactional id(s) from __transaction_state-{partition}")
            return None
        return Decision(partition=partition, records=[(md.transactional_id, None) for md in chosen],
                        on_written=on_written)

    # -- loading ------------------------------------------------------------------------------------
    def start_loading(self, partition: int) -> None:
        self.loading.add(partition)

    def finish_loading(self, partition: int, txns: dict[str, TransactionMetadata]) -> list[MarkerJob]:
        """Install a replayed partition; every Prepare* transaction gets its markers written again
        (the loading mark is cleared first so that Complete* can be written, spec §4.4)."""
        now = self.clock()
        with self.cache_lock:
            for tid in [t for t in self.txns if self.partition_for(t) == partition]:
                del self.txns[tid]
            self.txns.update(txns)
        self.loading.discard(partition)
        self.failed.pop(partition, None)
        for md in txns.values():
            if md.state in PREPARED:
                self._start_markers(md, now)
        return self.take_new_jobs()

    def fail_loading(self, partition: int, why: str) -> None:
        self.loading.discard(partition)
        self.failed[partition] = why
