"""Helpers for the transaction coordinator's unit tests: ``H``, the sans-IO coordinator driven as
the service drives it, with a fake clock, a counter for producer ids and an in-memory
``__transaction_state`` (markers are "written" to every partition at once unless a test takes
the jobs itself); ``Broker``, a data dir opened as ``compactlog serve`` opens it, with both
coordinators and a fake clock, no sockets."""

from __future__ import annotations

import itertools

from kio.schema.errors import ErrorCode

from compactlog.coordinator.group.service import for_broker as groups_for
from compactlog.server.state import BrokerState, Listener, ProducerIdManager, load_identity
from compactlog.coordinator.txn.coordinator import TransactionCoordinator, TxnConfig
from compactlog.coordinator.txn.service import TransactionCoordinatorService
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.coordinator.conftest import Clock  # noqa: F401 - the tests import it from here too

E = ErrorCode


class H:
    def __init__(self, tv: int = 2, **config):
        self.now = 1_000_000
        self._pids = itertools.count(1000)
        self.c = TransactionCoordinator(TxnConfig(transaction_version=tv, **config), lambda: self.now,
                                        lambda: next(self._pids))
        self.c.active = True
        self.log: list[tuple[int, str, object]] = []       # (partition, transactional id, transit or None)
        self.fail: ErrorCode | None = None
        self.auto_markers = True
        self.pending_jobs = []

    def run(self, decision):
        if not decision.records:
            return decision.result
        code = self.fail or E.none
        if code == E.none:
            self.log.extend((decision.partition, tid, t) for tid, t in decision.records)
        result = decision.on_written(code)
        for job in self.c.take_new_jobs():
            if self.auto_markers:
                self.markers(job)
            else:
                self.pending_jobs.append(job)
        return result

    def markers(self, job):
        for tp in sorted(job.remaining):
            self.c.marker_done(job, tp)
        self.run(self.c.complete_markers(job))

    # -- requests
    def init(self, tid="t", timeout=60000, expected=None):
        return self.run(self.c.init_producer_id(tid, timeout, expected))

    def add(self, tid, pid, epoch, *parts, tv=0):
        return self.run(self.c.add_partitions(tid, pid, epoch, set(parts) or {("a", 0)}, tv))

    def end(self, tid, pid, epoch, commit=True, tv=0):
        return self.run(self.c.end_txn(tid, pid, epoch, commit, tv))

    def abort_timed_out(self):
        for tid in self.c.timed_out(self.now):
            d = self.c.abort_timed_out(tid, self.now)
            if d is not None:
                self.run(d)

    def states(self, tid="t") -> list[str]:
        return [t.state.display if t is not None else "<tombstone>" for _, x, t in self.log if x == tid]

    def last(self, tid="t"):
        return [t for _, x, t in self.log if x == tid][-1]

    def md(self, tid="t"):
        return self.c.txns[tid]

    def ongoing(self, tid="t", *parts, tv=0):
        """An initialised id with an ongoing transaction: (producer id, epoch)."""
        r = self.init(tid)
        assert r.error == E.none
        assert self.add(tid, r.producer_id, r.producer_epoch, *parts, tv=tv).error == E.none
        return r.producer_id, r.producer_epoch


BROKER = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "4"}


class Broker:
    """A data dir opened as ``compactlog serve`` opens it, with both coordinators (no sockets)."""

    def __init__(self, path, clock: Clock, crash_after: str | None = None, groups: bool = True, **props):
        self.dd = DataDir(str(path), broker=BrokerConfig({**BROKER, **props}), writable=True, create=True,
                          command="test")
        for topic, partition in self.dd.all_partitions():
            self.dd.open_log(topic, partition, create=True)
        node, cluster = load_identity(self.dd.path, None)
        self.state = BrokerState(self.dd, node, cluster, Listener("PLAINTEXT", "127.0.0.1", 9092),
                                 producer_ids=ProducerIdManager(self.dd.path))
        if groups:
            groups_for(self.state).load_now()
        self.svc = TransactionCoordinatorService(self.state, clock=clock, crash_after=crash_after or "")
        self.state.transactions = self.svc
        self.svc.start_now()

    def close(self):
        self.svc.stop()
        self.dd.close()
