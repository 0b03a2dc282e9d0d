"""The transaction coordinator of a running broker: Kafka's ``TransactionCoordinator`` start-up and
scheduler and the I/O half of ``TransactionStateManager`` around the sans-IO core, on the
coordinators' one runtime (``..runtime.CoordinatorRuntime``: lock, loading, timer thread, error
table).

One lock serialises every operation: a request's decision, its ``__transaction_state`` append
and, for a Prepare* record, the transaction's markers and Complete* record are made in one go,
without anything else of the coordinator in between (write order is the contract: Prepare*
durable before any marker, all markers before Complete*). ``verify_partition`` alone does not
take it (Produce and TxnOffsetCommit call it, the latter under the group coordinator's lock,
which the marker phase takes inside this one): it reads the cache under the core's leaf lock.

``__transaction_state`` (50 partitions, compacted, RF and min ISR 1) is created on first use: by
the first FindCoordinator for a transactional id, or the first write, as the group coordinator
creates ``__consumer_offsets`` (Kafka creates it on the first lookup too; a broker that never
sees a transaction keeps no 50 empty partitions). When it exists at start, every partition is
marked loading (COORDINATOR_LOAD_IN_PROGRESS for their ids) before any request can arrive; the
service's thread waits until the group coordinator has loaded ``__consumer_offsets``, replays each
partition, re-drives the markers of every Prepare* transaction (a crash between a decision and
its Complete* record, spec §4.4), then runs the timers: abort transactions past their timeout
every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, expire idle transactional
ids every ``transaction.remove.expired.transaction.cleanup.interval.ms``, retry markers that could
not be written.

Test hook: ``COMPACTLOG_TEST_CRASH_AFTER=prepare`` (or ``first-marker``) makes the process exit
(``os._exit(137)``, as a kill -9 would leave it) right after a Prepare* record is appended (or
after the first marker of a transaction), so that tests can restart the broker exactly there.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Callable

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError
from ...record.consumer_offsets import OFFSETS_TOPIC
from ..runtime import CoordinatorRuntime, Periodic, answered, error_code_of, operation_error
from .coordinator import Decision, TransactionCoordinator, TxnConfig, TxnResult
from .markers import RETRY_BACKOFF_MS, run_job
from .state_log import (TRANSACTION_STATE_TOPIC, StateLogError, describe_loaded, key_bytes, replay, topic_configs,
                        value_bytes)

log = logging.getLogger("kafka.coordinator.transaction.TransactionCoordinator")
loader_log = logging.getLogger("kafka.coordinator.transaction.TransactionStateManager")

CRASH_ENV = "COMPACTLOG_TEST_CRASH_AFTER"
CRASH_POINTS = ("prepare", "first-marker")
TOMBSTONE_BATCH_BYTES = 512 * 1024      # tombstones per append, well inside max.message.bytes


class TransactionCoordinatorService(CoordinatorRuntime):
    """See the module docstring. ``state`` is the broker's state (logs, topic creation, producer
    ids, the group coordinator, fetch wake-ups): ``server.state.BrokerState``, or any object with
    those (``api.py``'s offline target has the few the markers use)."""

    topic = TRANSACTION_STATE_TOPIC
    name = "transaction coordinator"
    thread_name = "transaction-coordinator"
    log = log
    loader_log = loader_log

    @property
    def broker(self):
        """The broker's settings of this moment (a dynamic change replaces the object)."""
        return self.state.broker

    def __init__(self, state, *, clock: Callable[[], int] | None = None, crash_after: str | None = None):
        super().__init__(clock, state.metadata_lock)
        self.state = state
        self.config = TxnConfig.from_broker(self.broker, self.partition_count())
        self.coordinator = TransactionCoordinator(self.config, self.clock, self._new_producer_id)
        crash = os.environ.get(CRASH_ENV, "") if crash_after is None else crash_after
        self.crash_after = crash if crash in CRASH_POINTS else None
        self.abort_timed_out = Periodic(self.config.abort_interval_ms)
        self.expire_ids = Periodic(self.config.expire_interval_ms)

    @property
    def datadir(self):
        return self.state.datadir

    def _new_producer_id(self) -> int:
        return self.state.producer_ids.allocate()

    # -- the topic --------------------------------------------------------------------------------
    def topic_exists(self) -> bool:
        return self.state.has_topic(TRANSACTION_STATE_TOPIC)

    def ensure_topic(self) -> bool:
        """Create ``__transaction_state`` if missing (Kafka does on the first transactional
        FindCoordinator and answers COORDINATOR_NOT_AVAILABLE until it exists; one node creates
        it at once, so the answer names this broker). False when it cannot be created (the
        lookup then answers COORDINATOR_NOT_AVAILABLE)."""
        try:
            return super().ensure_topic()
        except CompactlogError as e:
            log.error(f"Cannot create {TRANSACTION_STATE_TOPIC}: {e}; transactions are unavailable")
            return False

    def topic_configs(self) -> dict[str, str]:
        return topic_configs(self.broker)

    def create_topic(self, n: int, configs: dict[str, str]) -> None:
        self.state.create_topic(TRANSACTION_STATE_TOPIC, n, configs,
                                replication_factor=self.broker.get("transaction.state.log.replication.factor"))

    def _coordinator_epoch(self) -> int:
        """The epoch of this node's markers: 0 (one leader, forever), or the largest one the
        partitions' producer state already holds (a data dir from a Kafka cluster), so that its
        markers are not fenced (spec §4.4, compactlog's choice)."""
        epochs = [e.coordinator_epoch for lg in list(self.state.datadir.logs.values())
                  for e in lg.producer_state.producers.values()]
        return max([0, *epochs])

    # -- requests (each under the lock, run to completion) -------------------------------------------
    def is_available(self) -> bool:
        """FindCoordinator's view: the coordinator runs (loading partitions still answer)."""
        return self.coordinator.active

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> TxnResult:
        with self.lock:
            return self._execute(self.coordinator.init_producer_id(transactional_id, timeout_ms, expected))

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> ErrorCode:
        with self.lock:
            return self._execute(self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                                                 partitions)).error

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                client_tv: int = 0) -> TxnResult:
        with self.lock:
            return self._execute(self.coordinator.end_txn(transactional_id, producer_id, producer_epoch, commit,
                                                          client_tv))

    def quick(self, transactional_id: str, call: Callable, *, markers: bool):
        """``call()`` on the calling thread (the broker's event loop: ``apis/transactions.py``)
        when nothing it may do can wait, else None: this coordinator's lock is free at once, the
        id's ``__transaction_state`` partition is open and an append to it would only write to
        the page cache (``Log.append_is_quick``), and with ``markers`` (EndTxn) so would one to
        each partition of the id's transaction, none of them a ``__consumer_offsets`` one (their
        markers take the group coordinator's lock). The lock is held through ``call``."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            coordinator = self.coordinator
            if not coordinator.active:
                return None
            wanted = [(TRANSACTION_STATE_TOPIC, coordinator.partition_for(transactional_id))]
            md = coordinator.txns.get(transactional_id)
            if markers and md is not None:
                wanted += md.partitions
            size = 128 + 40 * (len(md.partitions) if md is not None else 0)    # the record, about
            logs = self.state.datadir.logs
            now = self.clock()
            for key in wanted:
                lg = logs.get(key)
                if key[0] == OFFSETS_TOPIC or lg is None or not lg.append_is_quick(size, now, 1):
                    return None
            return call()
        finally:
            self.lock.release()

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> ErrorCode:
        """KIP-890 verification (spec §2.7 c): NONE when the partition is in the id's ongoing
        transaction; else INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
        TRANSACTION_ABORTABLE, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE."""
        code, _ = answered(self.coordinator.verify_partition, transactional_id, producer_id, producer_epoch,
                           topic, partition)
        return code

    def describe(self, transactional_id: str):
        """(error, a copy of the id's metadata): the marker phase may change the original."""
        with self.lock:
            code, md = answered(self.coordinator.describe, transactional_id)
            return code, None if md is None else replace(md, partitions=set(md.partitions))

    def list_transactions(self, states=(), producer_ids=(), duration_ms: int = -1, pattern: str | None = None):
        with self.lock:
            code, found = answered(self.coordinator.list_transactions, states, producer_ids, duration_ms, pattern)
            unknown, listed = found or ([], [])
            return code, unknown, [replace(md, partitions=set(md.partitions)) for md in listed]

    # -- executing decisions ----------------------------------------------------------------------------
    def _execute(self, decision: Decision) -> TxnResult | None:
        if not decision.records:
            return decision.result
        code = self._append(decision.partition, decision.records)
        result = decision.on_written(code)
        if code == ErrorCode.none and decision.is_prepare:
            self._crash_point("prepare")
        self._run_jobs(self.coordinator.take_new_jobs())
        return result

    def _append(self, partition: int, records: list) -> ErrorCode:
        """One batch of ``records`` (id, transit or None) to ``__transaction_state``-``partition``,
        acks=-1 (one replica); the error as the coordinator answers it (TSM.appendTransactionToLog:
        the runtime's ``operation_error`` table)."""
        lg = self.state.log(TRANSACTION_STATE_TOPIC, partition)
        if lg is None and self.ensure_topic():              # a first write before any lookup
            lg = self.state.log(TRANSACTION_STATE_TOPIC, partition)
        if lg is None:
            return operation_error(ErrorCode.unknown_topic_or_partition)
        if lg.config.min_insync_replicas > 1:
            return operation_error(ErrorCode.not_enough_replicas)
        tv = self.config.transaction_version
        keys = [key_bytes(tid) for tid, _ in records]
        values = [None if t is None else value_bytes(t, tv) for _, t in records]
        now = self.clock()
        try:
            # the coordinator's own records: only the size limits are checked (Kafka's LogValidator
            # runs on them too, and finds nothing a client could have got wrong)
            lg.append_records(keys, values, timestamps=[now] * len(keys), trusted=True)
        except (CompactlogError, OSError) as e:
            log.error(f"Appending to {lg.name} failed: {e}")
            return operation_error(error_code_of(e))
        self.state.appends.notify([(TRANSACTION_STATE_TOPIC, partition)])
        return ErrorCode.none

    def _run_jobs(self, jobs) -> None:
        """Write the markers of decided transactions, then their Complete* records."""
        for job in jobs:
            if self.coordinator.jobs.get(job.transactional_id) is not job:
                continue
            now = self.clock()
            complete = run_job(self.state, self.coordinator, job, now, self._marker_written)
            if complete is not None:
                self._execute(complete)
                if self.coordinator.jobs.get(job.transactional_id) is job:
                    job.next_attempt_ms = now + RETRY_BACKOFF_MS       # Complete* not written: again later
            if job.transactional_id in self.coordinator.jobs:
                self._wake.set()

    def _marker_written(self) -> None:
        self._crash_point("first-marker")

    def _crash_point(self, name: str) -> None:
        if self.crash_after != name:
            return
        log.warning(f"{CRASH_ENV}={name}: exiting now, as a kill -9 would")
        for h in logging.getLogger("kafka").handlers:
            h.flush()
        os._exit(137)

    # -- loading ----------------------------------------------------------------------------------------
    def partitions_to_load(self) -> list[int]:
        """Every partition of an existing topic (a new one has nothing to load)."""
        if not self.state.has_topic(TRANSACTION_STATE_TOPIC):
            return []
        return list(range(self.config.num_partitions))

    def load_partition(self, partition: int) -> int:
        """Replay one partition, install it and re-drive its Prepare* transactions; the records read."""
        started = time.monotonic()
        lg = self.state.log(TRANSACTION_STATE_TOPIC, partition)
        try:
            if lg is None:
                raise StateLogError(f"{TRANSACTION_STATE_TOPIC}-{partition} does not exist")
            txns, n = replay(lg)
        except (StateLogError, CompactlogError, OSError) as e:
            loader_log.error(f"Cannot load {TRANSACTION_STATE_TOPIC}-{partition}, its transactional ids stay "
                             f"unavailable: {e}")
            with self.lock:
                self.coordinator.fail_loading(partition, f"{TRANSACTION_STATE_TOPIC}-{partition} could not be "
                                                         f"loaded: {e}")
            return 0
        summary = describe_loaded(txns)
        with self.lock:
            jobs = self.coordinator.finish_loading(partition, txns)
            self._run_jobs(jobs)
        if n:
            loader_log.info(f"Finished loading {n} record(s) from {lg.name} in "
                            f"{1000 * (time.monotonic() - started):.0f} ms: {summary}")
        return n

    def load_failed(self, partition: int) -> None:
        loader_log.exception(f"Failed to load {TRANSACTION_STATE_TOPIC}-{partition}")
        with self.lock:
            self.coordinator.fail_loading(partition, f"{TRANSACTION_STATE_TOPIC}-{partition} could not be loaded")

    def start_now(self) -> None:
        """Start and load every partition in this thread (tests, offline tools)."""
        parts = self.mark_loading()
        self.activate()
        for p in parts:
            self.load_partition(p)
        self.loaded.set()

    def activate(self) -> None:
        with self.lock:
            self.coordinator.coordinator_epoch = self._coordinator_epoch()
            self.coordinator.active = True
        now = self.clock()
        self.abort_timed_out.start(now)
        self.expire_ids.start(now)

    def before_loading(self) -> bool:
        """Wait for ``__consumer_offsets`` first: its pending transactional offsets must be there
        before a re-driven marker commits or drops them (spec §4.4). False when stopped meanwhile."""
        groups = getattr(self.state, "groups", None)
        groups_loaded = getattr(groups, "loaded", None)
        while groups_loaded is not None and not groups_loaded.wait(0.1):
            if self._stop.is_set():
                return False
        return True

    # -- the timers (the runtime's thread runs them) ---------------------------------------------------
    def run_timers(self, now: int) -> list[int | None]:
        """Timed-out aborts and id expiry when due, then marker retries; the next deadlines."""
        c = self.coordinator

        def abort_timed_out():
            for tid in c.timed_out(now):
                d = c.abort_timed_out(tid, now)
                if d is not None:
                    self._execute(d)
        self.abort_timed_out.run_if_due(now, abort_timed_out)
        self.expire_ids.run_if_due(now, lambda: self.expire_now(now))
        self._run_jobs(c.jobs_due(now))
        return [self.abort_timed_out.next_ms, self.expire_ids.next_ms, c.next_job_deadline()]

    def expire_now(self, now: int | None = None) -> int:
        """One expiry pass: tombstones for idle transactional ids; how many were written."""
        with self.lock:
            c = self.coordinator
            removed = 0
            for p, tids in sorted(c.expirable(self.clock() if now is None else now).items()):
                chunk, size = [], 0
                for tid in tids + [None]:
                    if tid is not None and size + len(tid.encode("utf-8")) + 32 <= TOMBSTONE_BATCH_BYTES:
                        chunk.append(tid)
                        size += len(tid.encode("utf-8")) + 32
                        continue
                    d = c.expire(p, chunk) if chunk else None
                    if d is not None:
                        before = len(c.txns)
                        self._execute(d)
                        removed += before - len(c.txns)
                    chunk, size = ([tid], len(tid.encode("utf-8")) + 32) if tid is not None else ([], 0)
            return removed

    def on_stopped(self) -> None:
        with self.lock:
            self.coordinator.active = False


def for_broker(state) -> TransactionCoordinatorService:
    """The coordinator of a running broker, set as ``state.transactions``."""
    svc = TransactionCoordinatorService(state)
    state.transactions = svc
    return svc
