"""Transaction markers on one node: Kafka's ``TransactionMarkerChannelManager``,
``TransactionMarkerRequestCompletionHandler`` and the partition side of
``KafkaApis.handleWriteTxnMarkersRequest``, as direct local appends (transactions.md §2.6).

``write_marker`` is the one per-partition marker append, used by the coordinator's marker phase
and by the WriteTxnMarkers API: a data partition gets the control batch from its ``Log`` (origin
COORDINATOR, the producer state's epoch and coordinator-epoch checks), a ``__consumer_offsets``
partition through the group coordinator's ``write_txn_marker`` hook (which also commits or drops
the producer's pending offsets). ``run_job`` writes a decided transaction's markers, sorts each
partition's answer as Kafka's completion handler does (done, retry later, drop, stop) and, once
none is left, hands back the Complete* write.
"""

from __future__ import annotations

import logging
from typing import Callable

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError
from ...record.consumer_offsets import OFFSETS_TOPIC
from ..runtime import error_code_of
from .coordinator import Decision, MarkerJob, TransactionCoordinator
from .metadata import TV_2

log = logging.getLogger("kafka.coordinator.transaction.TransactionMarkerChannelManager")

RETRY_BACKOFF_MS = 100          # a partition that could not take its marker is tried again after this

DONE, RETRY, DROP, STOP = "done", "retry", "drop", "stop"

# TMRCH: what a partition's answer means for the transaction
_RETRIABLE = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.not_enough_replicas,
                        ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
                        ErrorCode.kafka_storage_error,
                        # the group coordinator not ready for the partition (KA answers them as
                        # NOT_LEADER_OR_FOLLOWER to the marker's sender)
                        ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                        ErrorCode.not_coordinator})
_SUPERSEDED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
_UNSUPPORTED = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})
# the group coordinator's readiness codes, as KafkaApis answers them to a WriteTxnMarkers sender
GROUP_NOT_READY = frozenset({ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                              ErrorCode.not_coordinator})


def write_marker(state, topic: str, partition: int, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int, commit: bool) -> ErrorCode:
    """Append one COMMIT/ABORT marker to ``topic``-``partition``; the append's error code.
    ``state`` is the BrokerState (its logs, its group coordinator and the fetch wake-ups)."""
    lg = state.log(topic, partition)
    if lg is None:
        return ErrorCode.unknown_topic_or_partition
    if topic == OFFSETS_TOPIC:
        groups = getattr(state, "groups", None)
        hook = getattr(groups, "write_txn_marker", None)
        if hook is None:
            # no group coordinator that can take a marker (yet): not ready, try again later
            return ErrorCode.coordinator_not_available
        try:
            return ErrorCode(hook(partition, producer_id, producer_epoch, coordinator_epoch, commit))
        except CompactlogError as e:
            return error_code_of(e)
    try:
        lg.append_control(commit=commit, producer_id=producer_id, producer_epoch=producer_epoch,
                          coordinator_epoch=coordinator_epoch)
    except (CompactlogError, OSError) as e:
        if isinstance(e, OSError):
            log.error(f"Writing a marker to {topic}-{partition} failed: {e}")
        return error_code_of(e)
    state.appends.notify([(topic, partition)])
    return ErrorCode.none


def classify(code: ErrorCode, partition_exists: bool) -> str:
    """TMRCH's handling of one partition's answer: DONE (leaves the set), RETRY, DROP (leaves the
    set without a marker) or STOP (the transaction is superseded: no more of its markers)."""
    if code == ErrorCode.none:
        return DONE
    if code == ErrorCode.unknown_topic_or_partition and not partition_exists:
        return DROP         # the topic was deleted: TMCM skips partitions without a leader
    if code in _SUPERSEDED:
        return STOP
    if code in _UNSUPPORTED:
        return DROP
    if code not in _RETRIABLE and code != ErrorCode.unknown_topic_or_partition:
        # CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, ...: Kafka calls them fatal bugs; a retry at least
        # leaves the decision standing (never complete a transaction with a partition unmarked)
        log.error(f"Unexpected error {code.name} writing a transaction marker; retrying")
    return RETRY


def _already_marked(state, topic: str, partition: int, job: MarkerJob) -> bool:
    """A TV2 marker is refused when repeated (the epoch must grow, KIP-1228): count the partition
    as done when its producer entry already holds the marker's epoch and coordinator epoch and
    no open transaction (spec §2.6)."""
    lg = state.log(topic, partition)
    entry = None if lg is None else lg.producer_state.producers.get(job.producer_id)
    return (entry is not None and entry.producer_epoch == job.producer_epoch
            and entry.coordinator_epoch == job.coordinator_epoch and entry.current_txn_first_offset is None)


def run_job(state, coordinator: TransactionCoordinator, job: MarkerJob, now: int,
            on_marker: Callable[[], None] | None = None) -> Decision | None:
    """Write ``job``'s outstanding markers; the Complete* write once none is left, else None (the
    job waits ``RETRY_BACKOFF_MS`` for the partitions that could not take theirs, or was stopped).
    ``on_marker`` runs after each marker appended (the crash-point hook)."""
    job.attempts += 1
    for topic, partition in sorted(job.remaining):
        tp = (topic, partition)
        if job.client_tv >= TV_2 and _already_marked(state, topic, partition, job):
            code = ErrorCode.none
        else:
            code = write_marker(state, topic, partition, job.producer_id, job.producer_epoch,
                                job.coordinator_epoch, job.commit)
            if code == ErrorCode.none and on_marker is not None:
                on_marker()
        action = classify(code, code != ErrorCode.unknown_topic_or_partition
                          or state.log(topic, partition) is not None)
        if action in (DONE, DROP):
            if action == DROP:
                log.info(f"Dropped {topic}-{partition} from the markers of {job.transactional_id} ({code.name})")
            coordinator.marker_done(job, tp)
        elif action == STOP:
            coordinator.markers_abandoned(job, f"{topic}-{partition} answered {code.name}")
            return None
        elif job.attempts == 1 or job.attempts % 100 == 0:
            log.info(f"Writing the marker of {job.transactional_id} to {topic}-{partition} failed with "
                     f"{code.name}; retrying")
    if job.remaining:
        job.next_attempt_ms = now + RETRY_BACKOFF_MS
        return None
    return coordinator.complete_markers(job)
