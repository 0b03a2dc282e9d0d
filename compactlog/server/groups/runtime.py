"""What the group managers share of Kafka's coordinator runtime: an operation's result, its timers,
the ``__consumer_offsets`` partitions still loading, and how a failed append is answered.

``Outcome`` is Kafka's ``CoordinatorResult`` (the records to append and what to do once they are
written), ``Timer`` its ``CoordinatorTimer``, ``CoordinatorPartitions`` the runtime's knowledge of
which partition holds a group and which of them are still being loaded (Kafka refuses requests for
a loading shard with COORDINATOR_LOAD_IN_PROGRESS), and ``append_error`` the code a request gets
when its records could not be written (``appendGroupMetadataErrorToResponseError``).

Sans-IO: nothing here reads a clock; deadlines are given by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kio.schema.errors import ErrorCode

from ...record import consumer_offsets as R


class GroupError(Exception):
    """A request refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or str(code))
        self.code = code


@dataclass
class Outcome:
    """What an operation asks the caller to do (Kafka's ``CoordinatorResult``)."""
    records: list = field(default_factory=list)
    on_written: Callable[[Exception | None], None] | None = None
    replay: bool = True


class Timer:
    """Keyed one-shot timers; scheduling a key again replaces it (Kafka's ``CoordinatorTimer``)."""

    def __init__(self):
        self._entries: dict = {}
        self._seq = 0

    def schedule(self, key, deadline_ms: int, fn: Callable[[], Outcome]) -> None:
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, fn)

    def cancel(self, key) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key) -> bool:
        return key in self._entries

    def deadline(self, key) -> int | None:
        e = self._entries.get(key)
        return None if e is None else e[0]

    def next_deadline(self) -> int | None:
        return min((e[0] for e in self._entries.values()), default=None)

    def pop_due(self, now_ms: int):
        """The expired timers, earliest first, removed; one at a time so that a timer that
        cancels or replaces another one is honoured."""
        while True:
            due = [(d, s, k) for k, (d, s, _) in self._entries.items() if d <= now_ms]
            if not due:
                return
            _, _, key = min(due)
            yield key, self._entries.pop(key)[2]

    def __len__(self) -> int:
        return len(self._entries)


class CoordinatorPartitions:
    """Which ``__consumer_offsets`` partition holds each group, and which partitions are still
    being loaded: the checks every group API makes first (GroupCoordinatorService)."""

    def __init__(self, num_partitions: int):
        self.num_partitions = num_partitions
        self.loading: set[int] = set()

    def partition_for(self, group_id: str) -> int:
        return R.partition_for(group_id, self.num_partitions)

    def is_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_for(group_id) in self.loading

    def check_loaded(self, group_id: str) -> None:
        if self.is_loading(group_id):
            raise GroupError(ErrorCode.coordinator_load_in_progress,
                             f"__consumer_offsets-{self.partition_for(group_id)} is still loading")


# the storage errors (their ``kafka_error``) a failed __consumer_offsets append may carry
_UNAVAILABLE = (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                ErrorCode.request_timed_out)
_TOO_LARGE = (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size)


def append_error(error: Exception) -> ErrorCode:
    """The code a failed ``__consumer_offsets`` append answers (appendGroupMetadataErrorToResponseError):
    a storage failure says NOT_COORDINATOR so that clients look the coordinator up again and retry."""
    code = getattr(error, "kafka_error", None)
    if code in _UNAVAILABLE:
        return ErrorCode.coordinator_not_available
    if code in _TOO_LARGE:
        return ErrorCode.unknown_server_error
    return ErrorCode.not_coordinator


_NOT_COORDINATOR = (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error)


def operation_error(code: ErrorCode) -> ErrorCode:
    """The code a failed coordinator operation answers (CoordinatorOperationExceptionHelper, the
    mapping of the new coordinator's ``handleOperationException``): what the client can act on
    (retry the coordinator, look it up again); the producer's own errors (47, 48, 49, 51, ...)
    pass as they are."""
    if code == ErrorCode.network_exception:
        return ErrorCode.coordinator_load_in_progress
    if code in _UNAVAILABLE:
        return ErrorCode.coordinator_not_available
    if code in _NOT_COORDINATOR:
        return ErrorCode.not_coordinator
    if code in _TOO_LARGE:
        return ErrorCode.unknown_server_error
    return code


def is_too_large(error: Exception) -> bool:
    """The append failed because the records were too large (a code of ``_TOO_LARGE``)."""
    return getattr(error, "kafka_error", None) in _TOO_LARGE
