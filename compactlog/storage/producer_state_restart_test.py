"""Producer state across a kill -9 (issue 24's OUT_OF_ORDER_SEQUENCE_NUMBER, sans broker): a
transactional producer's last batches of an epoch written but never acknowledged, the log dropped
as a kill -9 leaves it, reopened (snapshot + replay from the recovery point), then the abort
marker and the producer's next batches, judged by Kafka's ProducerAppendInfo.checkSequence rules:
the same epoch continues at last + 1 (a retry of a written batch is a duplicate), a new epoch
starts at 0, and a gap at the same epoch is OUT_OF_ORDER_SEQUENCE_NUMBER."""

from __future__ import annotations

import pytest

from compactlog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from compactlog.storage.conftest import batch, config, crash
from compactlog.storage.log import Log

PID = 7


def sent(seq: int, n: int = 5, *, epoch: int = 0) -> bytes:
    """A client's transactional batch of ``n`` records from ``seq`` (offsets assigned on append)."""
    return batch(0, n, producer_id=PID, producer_epoch=epoch, base_sequence=seq, transactional=True)


def reopen(log: Log, clock) -> Log:
    crash(log)
    return Log(log.dir, log.config, clock=clock)


def entry(log: Log):
    e = log.producer_state.producers[PID]
    return e.producer_epoch, e.last_seq, e.current_txn_first_offset


@pytest.mark.parametrize("roll", [False, True], ids=["one-segment", "snapshot-at-a-roll"])
def test_unacknowledged_batches_of_an_epoch_survive_a_kill_and_sequences_go_on(open_log, clock, roll):
    log = open_log(config(segment_bytes=400) if roll else None)
    log.append_as_leader(sent(0))                                   # txn 1: seq 0..4, committed
    log.append_control(commit=True, producer_id=PID, producer_epoch=0)
    first = log.append_as_leader(sent(5)).first_offset              # txn 2: written, never acked
    log.append_as_leader(sent(10))
    if roll:
        assert len(log.segments) > 1                                # a snapshot at each roll
    log = reopen(log, clock)
    assert entry(log) == (0, 14, first)                             # rebuilt, the txn still open
    assert log.last_stable_offset == first
    # the client's retry of what it sent before the kill: duplicates, answered with their offsets
    dup = log.append_as_leader(sent(10))
    assert dup.duplicate and dup.first_offset == first + 5
    # a gap at the same epoch (what librdkafka sends after it dropped timed-out batches without
    # bumping its epoch): OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka answers it
    with pytest.raises(OutOfOrderSequenceError, match="out of order sequence 25"):
        log.append_as_leader(sent(25))
    # the application's abort (TV1 marker, same epoch) keeps the epoch's sequences
    log.append_control(commit=False, producer_id=PID, producer_epoch=0)
    log = reopen(log, clock)
    assert entry(log) == (0, 14, None)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(sent(20))
    log.append_as_leader(sent(15))                                  # txn 3 at the same epoch: 15
    log.append_control(commit=True, producer_id=PID, producer_epoch=0)
    # after a KIP-360 bump (InitProducerId): the new epoch starts at 0, and only at 0
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        log.append_as_leader(sent(3, epoch=1))
    log.append_as_leader(sent(0, epoch=1))
    log = reopen(log, clock)
    assert entry(log)[:2] == (1, 4)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(sent(20, epoch=0))
    log.append_as_leader(sent(5, epoch=1))
    log.close()


def test_a_tv2_abort_marker_at_the_next_epoch_starts_it_empty_across_a_kill(open_log, clock):
    """The coordinator's timeout-abort under transaction version 2 writes its marker with e+1
    (KAFKA-19367's single bump); the partition then holds e+1 with no batch: a producer that took
    e+1 (KIP-588) starts at sequence 0, before and after a restart, and at 0 only."""
    log = open_log()
    log.append_as_leader(sent(0))
    log.append_as_leader(sent(5))
    log.append_control(commit=False, producer_id=PID, producer_epoch=1, transaction_version=2)
    assert entry(log) == (1, -1, None)
    log = reopen(log, clock)
    assert entry(log) == (1, -1, None)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(sent(10, epoch=1))
    log.append_as_leader(sent(0, epoch=1))
    log.close()
