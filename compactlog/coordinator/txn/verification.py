"""KIP-890's verification of a transactional write, on one node: Kafka's
``ReplicaManager.maybeStartTransactionVerificationForPartition`` and the verify-only half of
``AddPartitionsToTxnManager``, for Produce and TxnOffsetCommit alike.

Before the first transactional write of a transaction to a partition, the partition starts a
verification (``Log.maybe_start_transaction_verification``: a stale epoch is refused there, and a
transaction of the producer already open in the partition needs no question), then the
transaction coordinator is asked whether the partition is in the producer's ongoing transaction
(``state.transactions.verify_partition``). Kafka sends that question to the coordinator's broker
and answers asynchronously; here it is a direct call, made without holding the partition's lock
(the coordinator takes its own lock and writes markers under it), and the guard the partition
handed out closes the gap between answer and append exactly as Kafka's ``VerificationGuard``
does.

The coordinator's answer reaches the client as ``AddPartitionsToTxnManager`` maps it: PRODUCER_FENCED
as INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE as INVALID_TXN_STATE for clients that predate it
(Produce v10 and below, TxnOffsetCommit v3 and below). What each API then makes of the
coordinator-unavailable answers is the API's own (``apis/produce.py``, the group coordinator).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from ...storage.producer_state import SENTINEL, VerificationGuard
from ..errors import CoordinatorError

log = logging.getLogger("kafka.server.AddPartitionsToTxnManager")

ENABLE = "transaction.partition.verification.enable"


def verification_enabled(broker) -> bool:
    """``transaction.partition.verification.enable`` (default true), read on every request as
    Kafka reads the dynamic config."""
    return bool(broker.get(ENABLE))


def ask_coordinator(transactions, transactional_id: str, producer_id: int, producer_epoch: int,
                    topic: str, partition: int) -> ErrorCode:
    """The coordinator's answer for one partition (``TransactionCoordinator.handleVerifyPartitionsInTransaction``):
    NONE when the partition is in the producer's ongoing transaction. No coordinator running, or a
    coordinator that fails, answers COORDINATOR_NOT_AVAILABLE (retriable, as a network error)."""
    if transactions is None:
        return ErrorCode.coordinator_not_available
    try:
        code = transactions.verify_partition(transactional_id, producer_id, producer_epoch, topic, partition)
        return code if code.__class__ is ErrorCode else ErrorCode(code)
    except CoordinatorError as e:
        return e.code
    except Exception:
        log.exception(f"Verifying {topic}-{partition} for transactional id {transactional_id!r} "
                      f"(producer {producer_id}, epoch {producer_epoch}) failed")
        return ErrorCode.coordinator_not_available


def client_error(code: ErrorCode, transaction_abortable_supported: bool) -> ErrorCode:
    """AddPartitionsToTxnManager's mapping of the coordinator's answer for the appending broker."""
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code == ErrorCode.transaction_abortable and not transaction_abortable_supported:
        return ErrorCode.invalid_txn_state
    return code


def verify_partition(log_, transactions, transactional_id: str, producer_id: int, producer_epoch: int,
                     sequence: int, transaction_abortable_supported: bool) -> tuple[VerificationGuard, ErrorCode]:
    """Start the verification of ``log_`` for the producer, ask the coordinator when the partition
    has no transaction of this producer and epoch open: (the guard the append must carry, the
    coordinator's answer as the client sees it). Raises InvalidProducerEpochError (47) for an epoch
    older than the partition's."""
    guard = log_.maybe_start_transaction_verification(producer_id, sequence, producer_epoch)
    if guard is SENTINEL:
        return guard, ErrorCode.none
    code = ask_coordinator(transactions, transactional_id, producer_id, producer_epoch, log_.topic, log_.partition)
    return guard, client_error(code, transaction_abortable_supported)
