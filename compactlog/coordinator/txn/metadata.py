"""One transactional id's state at the coordinator: Kafka's ``TransactionMetadata``,
``TransactionState`` and ``TxnTransitMetadata`` (transaction-coordinator module), pure.

Every change is two-phase, as in Kafka: a ``prepare_*`` method checks that the target state may
follow the current one (``VALID_PREVIOUS``), sets ``pending_state`` and returns the target as a
``TxnTransit`` (what gets written to ``__transaction_state``); only once that record is written
does ``complete_transition`` copy it into the metadata, while ``cancel_transition`` drops it after
a failed write. While a transition is pending every state-changing request on the id is answered
CONCURRENT_TRANSACTIONS by the coordinator.

The epoch rules of transactions.md §1.5 live here: the InitProducerId bump (KIP-360 retries and
fencing), producer id rotation when the epoch is exhausted, the coordinator's own fence (TV ≤ 1:
e+1 and last epoch -1; TV 2: e+1 and last epoch e, KAFKA-19367's single bump) and the KIP-890
per-transaction bump of transaction version 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from ..errors import TxnError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767                   # Short.MAX_VALUE: kept for the coordinator's own fence
TV_0, TV_1, TV_2 = 0, 1, 2          # TransactionVersion levels


class TxnState(IntEnum):
    """TransactionState: the id is what ``__transaction_state`` stores, ``display`` what
    DescribeTransactions and ListTransactions show."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        return _NAMES[self]

    @classmethod
    def by_name(cls, name: str) -> "TxnState | None":
        return _BY_NAME.get(name)


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
          TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
          TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
          TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
# TransactionState.validPreviousStates (Kafka 4.2); PrepareAbort from Empty/Complete* is only
# reached by a TV2 EndTxn (the coordinator checks the version)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
# the states whose id may expire (TransactionState.isExpirationAllowed)
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})
COMPLETED = frozenset({S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

TopicPartition = tuple[str, int]


def is_epoch_exhausted(epoch: int) -> bool:
    """TransactionMetadata.isEpochExhausted: 32766 and 32767 are never handed to a client."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a bug in the caller, never a client's doing."""


class TxnTransit(NamedTuple):
    """The target of a transition (TxnTransitMetadata): the record ``__transaction_state`` gets.
    A named tuple (immutable, made in one call: a frozen dataclass's eleven setattrs cost 2.5 us,
    three transitions a transaction: issue 28)."""
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset
    txn_start_ms: int
    last_update_ms: int
    client_tv: int

    def sorted_partitions(self) -> list[tuple[str, list[int]]] | None:
        """The partition list as the log stores it: null for Empty, else by topic (TL.valueToBytes)."""
        if self.state == S.EMPTY:
            return None
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            by_topic.setdefault(t, []).append(p)
        return list(by_topic.items())


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TxnState = S.EMPTY
    partitions: set = field(default_factory=set)
    txn_start_ms: int = -1
    last_update_ms: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH       # in memory only (restored as -1)
    client_tv: int = TV_0
    pending_state: TxnState | None = None
    # a coordinator fence (TV ≤ 1) whose write failed already bumped the cached epoch: the next
    # fence must not bump it again (KAFKA-9666)
    has_failed_epoch_fence: bool = False

    # -- queries
    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def topics(self) -> list[tuple[str, list[int]]]:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            by_topic.setdefault(t, []).append(p)
        return list(by_topic.items())

    # -- preparing transitions
    def _transit(self, state: TxnState, **changes) -> TxnTransit:
        """TransactionMetadata.prepareTransitionTo: the current values with ``changes``, checked,
        and the pending state set. The previous producer id is the current one (Kafka's transit)."""
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: transition to {state.display} while "
                                    f"{self.pending_state.display} is pending")
        values = dict(producer_id=self.producer_id, prev_producer_id=self.producer_id,
                      next_producer_id=self.next_producer_id, producer_epoch=self.producer_epoch,
                      last_producer_epoch=self.last_producer_epoch, txn_timeout_ms=self.txn_timeout_ms,
                      state=state, partitions=frozenset(self.partitions), txn_start_ms=self.txn_start_ms,
                      last_update_ms=self.last_update_ms, client_tv=self.client_tv)
        values.update(changes)
        if values["producer_id"] < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal producer id {values['producer_id']}")
        if state != S.DEAD and values["producer_epoch"] < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal producer epoch {values['producer_epoch']}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {state.display} cannot follow {self.state.display}")
        self.pending_state = state
        return TxnTransit(**values)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int) -> TxnTransit:
        """InitProducerId on Empty/Complete*: the bump of §1.5 (raises PRODUCER_FENCED)."""
        if self.is_epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: producer {self.producer_id} has no epoch left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            # a new instance: bump and forget the last epoch (a new T: -1 + 1 = 0)
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # the same instance recovering from an error (KIP-360)
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose answer was lost: the same epoch again
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise TxnError(ErrorCode.producer_fenced,
                           f"expected epoch {expected_epoch} is neither the current {self.producer_epoch} nor "
                           f"the last {self.last_producer_epoch}")
        return self._transit(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=timeout_ms,
                             partitions=frozenset(), txn_start_ms=-1, last_update_ms=now)

    def prepare_rotation(self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool) -> TxnTransit:
        """InitProducerId on an exhausted epoch: a new producer id at epoch 0."""
        if self.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(f"{self.transactional_id}: rotation while a transaction is pending")
        return self._transit(S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1, last_update_ms=now)

    def prepare_add_partitions(self, added, now: int, client_tv: int) -> TxnTransit:
        """Ongoing with ``added`` joined; a new transaction starts its clock now."""
        start = now if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else self.txn_start_ms
        return self._transit(S.ONGOING, partitions=frozenset(self.partitions | set(added)), txn_start_ms=start,
                             last_update_ms=now, client_tv=client_tv)

    def prepare_abort_or_commit(self, state: TxnState, client_tv: int, next_producer_id: int, now: int,
                                no_partition_added: bool) -> TxnTransit:
        """Prepare*: TV2 bumps the epoch (KIP-890; 32767 stays for an abort) and remembers the one
        the client holds; TV ≤ 1 keeps both."""
        if client_tv >= TV_2:
            if self.producer_epoch == MAX_EPOCH and state == S.PREPARE_ABORT:
                epoch = self.producer_epoch       # a broken state: let the abort through (KAFKA-20090)
            else:
                epoch = self.producer_epoch + 1
            last = self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(state, producer_epoch=epoch, last_producer_epoch=last,
                             txn_start_ms=now if no_partition_added else self.txn_start_ms,
                             next_producer_id=next_producer_id, last_update_ms=now, client_tv=client_tv)

    def prepare_fence_abort(self, server_tv: int, now: int) -> TxnTransit:
        """The coordinator's own abort of an Ongoing transaction (a fencing InitProducerId or a
        timeout): Kafka's PrepareEpochFence followed by PrepareAbort, in one step.

        TV ≤ 1: epoch e+1 (e again after a failed fence, KAFKA-9666; never past 32767, KAFKA-20090)
        and last epoch -1, so the fenced instance can never resume. TV 2: one bump in the abort
        (KAFKA-19367) and last epoch e, so the fenced instance can claim the new epoch with an
        InitProducerId that names its old one (KIP-588)."""
        if self.state != S.ONGOING or self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: fence of a {self.state.display} transaction")
        if server_tv >= TV_2:
            return self.prepare_abort_or_commit(S.PREPARE_ABORT, server_tv, NO_PRODUCER_ID, now, False)
        keep = self.has_failed_epoch_fence or self.producer_epoch == MAX_EPOCH
        epoch = self.producer_epoch if keep else self.producer_epoch + 1
        return self._transit(S.PREPARE_ABORT, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                             last_update_ms=now, client_tv=server_tv)

    def fence_failed(self, transit: TxnTransit) -> None:
        """The fence record of a TV ≤ 1 fence was not written: as Kafka, the cache keeps the bumped
        epoch (the old instance stays fenced) and the next fence does not bump again."""
        self.pending_state = None
        if transit.client_tv < TV_2:
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = NO_PRODUCER_EPOCH
            self.has_failed_epoch_fence = True

    def prepare_complete(self, now: int) -> TxnTransit:
        """Complete* once every marker is written; after a TV2 overflow the next producer id at
        epoch 0 (the last epoch stays the one the client saw)."""
        self.has_failed_epoch_fence = False
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if self.client_tv >= TV_2 and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch
        return self._transit(state, producer_id=pid, producer_epoch=epoch, next_producer_id=NO_PRODUCER_ID,
                             partitions=frozenset(), last_update_ms=now)

    def prepare_dead(self) -> TxnTransit:
        """The id expires: the tombstone's pending state."""
        return self._transit(S.DEAD, partitions=frozenset())

    # -- finishing transitions
    def complete_transition(self, transit: TxnTransit) -> None:
        """The record of ``transit`` is written: it becomes the current state."""
        if self.pending_state != transit.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {transit.state.display} while "
                                    f"{self.pending_state.display if self.pending_state else 'nothing'} is pending")
        if transit.state == S.DEAD:
            raise IllegalTransition(f"{self.transactional_id}: an expired id is removed, never completed as Dead")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.partitions = set(transit.partitions)
        self.txn_start_ms = transit.txn_start_ms
        self.last_update_ms = transit.last_update_ms
        self.client_tv = transit.client_tv
        self.state = transit.state
        self.pending_state = None

    def cancel_transition(self) -> None:
        """The record was not written: nothing changes (TSM's failed-append callback)."""
        self.pending_state = None

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker was written to ``tp`` (only while the decision's markers are written)."""
        if self.state not in PREPARED:
            raise IllegalTransition(f"{self.transactional_id}: removing {tp} in {self.state.display}")
        self.partitions.discard(tp)

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransit) -> "TransactionMetadata":
        """The metadata a loaded record describes (the loader's replay)."""
        md = cls(transactional_id, transit.producer_id)
        md.pending_state = transit.state
        md.complete_transition(transit)
        return md
