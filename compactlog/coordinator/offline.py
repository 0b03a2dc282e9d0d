"""The coordinators over a data dir without a broker: what ``compactlog.api`` (and through it the
``consumer-groups`` and ``transactions`` tools) use to read and write groups and transactions as
a starting broker would, Kafka's ``kafka-consumer-groups.sh`` / ``kafka-transactions.sh`` answers
without one.

``load_transactions`` replays ``__transaction_state`` into the transaction coordinator's cache as
a starting coordinator loads it (``TransactionStateManager.loadTransactionsForTxnTopicPartition``),
without re-driving anything and without handing out producer ids. ``OfflineBroker`` is what the
marker function (``txn.markers.write_marker``) uses of a running broker: the partitions' logs,
the group coordinator (loaded only when a ``__consumer_offsets`` partition gets a marker) and no
fetches to wake.
"""

from __future__ import annotations

from typing import Callable

from ..errors import CompactlogError
from .group.service import GroupCoordinatorService
from .internal_topics import partition_count
from .txn.coordinator import TransactionCoordinator, TxnConfig
from .txn.state_log import TRANSACTION_STATE_TOPIC, StateLogError, replay


def _no_producer_ids() -> int:
    raise CompactlogError("the offline transaction coordinator hands out no producer ids")


def load_transactions(datadir, clock: Callable[[], int]) -> TransactionCoordinator:
    """The transaction coordinator's cache of ``datadir`` (a storage ``DataDir``), active, every
    readable ``__transaction_state`` partition replayed; one that cannot be read is failed (its
    ids answer COORDINATOR_NOT_AVAILABLE, as a broker answers them)."""
    dd = datadir
    parts = dd.partitions(TRANSACTION_STATE_TOPIC) if dd.has_topic(TRANSACTION_STATE_TOPIC) else []
    config = TxnConfig.from_broker(dd.broker, partition_count(dd, TRANSACTION_STATE_TOPIC))
    coordinator = TransactionCoordinator(config, clock, _no_producer_ids)
    for p in parts:
        try:
            txns, _ = replay(dd.open_log(TRANSACTION_STATE_TOPIC, p))
        except (StateLogError, CompactlogError, OSError) as e:
            coordinator.fail_loading(p, f"{TRANSACTION_STATE_TOPIC}-{p} could not be loaded: {e}")
            continue
        with coordinator.cache_lock:
            coordinator.txns.update(txns)
    coordinator.active = True
    return coordinator


def load_groups(datadir) -> GroupCoordinatorService:
    """The group coordinator of ``datadir``, every ``__consumer_offsets`` partition loaded in this
    thread; it writes (a data dir opened for writing) exactly as the broker's does."""
    service = GroupCoordinatorService(datadir)
    service.load_now()
    return service


class _NoFetchWaiters:
    """No broker, so no long-polling Fetch to wake after a marker."""

    def notify(self, partitions) -> None:
        pass


class OfflineBroker:
    """What ``write_marker`` uses of a running broker, over a data dir without one (module
    docstring). ``close`` stops the group coordinator it started."""

    def __init__(self, datadir):
        self._dd = datadir
        self._groups = None
        self.appends = _NoFetchWaiters()

    def log(self, topic: str, partition: int):
        if not self._dd.has_topic(topic) or partition not in self._dd.partitions(topic):
            return None
        return self._dd.open_log(topic, partition)

    @property
    def groups(self):
        if self._groups is None:
            self._groups = load_groups(self._dd)
        return self._groups

    def close(self) -> None:
        if self._groups is not None:
            self._groups.stop()
            self._groups = None
